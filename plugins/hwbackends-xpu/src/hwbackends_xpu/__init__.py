"""Intel GPUs (Data Center GPU Max, Arc) through PyTorch's built-in XPU backend.

Available means: a discrete Intel GPU is in the machine and the installed torch is an XPU
build (torch >= 2.7). Integrated GPUs are used only when no discrete Intel GPU is present and
the torch build is XPU (see README). Visibility (ZE_AFFINITY_MASK, ONEAPI_DEVICE_SELECTOR,
ZE_FLAT_DEVICE_HIERARCHY) is resolved by ``hwbackends.visibility``.
"""

from __future__ import annotations

from hwbackends.facts import AcceleratorBackend, ArchFacts, Stack
from hwbackends.plugin import AttentionOption, Probe, lazy, replace
from hwbackends.visibility import LevelZeroDevices

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

    from hwbackends import Host, HostDevice

__all__ = ["XpuBackend"]
__version__ = "0.1.0"


def is_integrated(hd: HostDevice) -> bool:
    """An iGPU: marked so by the host, or at 0000:00:02.0, where Intel places its iGPU."""
    flag = hd.extra.get("integrated")
    if isinstance(flag, bool):
        return flag
    return (hd.pci_bus_id or "").endswith("00:02.0")


class XpuBackend(AcceleratorBackend):
    name: ClassVar[str] = "xpu"
    # The plugin API this class was written for; the core refuses it when it speaks another
    # (docs/writing-a-backend.md maps API versions to hwbackends releases).
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "xpu"
    priority: ClassVar[int] = 40  # below dedicated accelerators and NVIDIA/AMD GPUs
    vendor: ClassVar[str | None] = "intel"
    display: ClassVar[str] = "Intel GPU"
    # Intel also makes NICs, chipsets and audio: GPUs are display (0x03) or accelerators (0x12).
    pci_vendor_ids: ClassVar[tuple[int, ...]] = (0x8086,)
    pci_classes: ClassVar[tuple[int, ...]] = (0x03, 0x12)
    driver_modules: ClassVar[tuple[str, ...]] = ("i915", "xe")
    visibility = LevelZeroDevices()
    pci_models = lazy("hwbackends_xpu._facts", "PCI_MODELS")
    stacks: ClassVar[tuple[Stack, ...]] = lazy("hwbackends_xpu._facts", "STACKS")
    torch_flavour: ClassVar[str | None] = "xpu"
    distributed_backend: ClassVar[str] = "xccl"
    # Slurm schedules GPUs as the "gpu" GRES and sets the runtime's visibility variable per step
    # (https://slurm.schedmd.com/gres.html, "GPU Management")
    slurm_gres: ClassVar[str | None] = "gpu"
    install_hint: ClassVar[str] = lazy("hwbackends_xpu._facts", "INSTALL_HINT")
    hardware_hint: ClassVar[str] = (
        "no Intel GPU is visible: check `xpu-smi discovery` or `sycl-ls`, the i915/xe driver, "
        "and that /dev/dri is available in the container"
    )
    arch_facts = lazy("hwbackends_xpu._facts", "ARCH_FACTS")
    default_facts: ClassVar[ArchFacts] = lazy("hwbackends_xpu._facts", "DEFAULT_FACTS")
    attention: ClassVar[tuple[AttentionOption, ...]] = lazy("hwbackends_xpu._facts", "ATTENTION")
    quantization = lazy("hwbackends_xpu._facts", "QUANTIZATION")
    limitations = lazy("hwbackends_xpu._facts", "LIMITATIONS")

    def host_devices(self, host: Host) -> tuple[HostDevice, ...]:
        """Discrete GPUs; integrated ones only without a discrete one and with XPU torch.

        torch's XPU runtime itself drops iGPUs when a discrete GPU is present.
        """
        all_gpus = super().host_devices(host)
        discrete = tuple(d for d in all_gpus if not is_integrated(d))
        if discrete:
            return discrete
        if host.torch is not None and host.torch.flavour == "xpu":
            return tuple(replace(d, extra={**d.extra, "integrated": True}) for d in all_gpus)
        return ()

    def arch_of(self, hd: HostDevice) -> str | None:
        if hd.arch is None and hd.extra.get("integrated") is True:
            return "integrated"
        return hd.arch

    def facts_for(self, arch: str | None, host: Host | None) -> ArchFacts:
        from . import _facts

        if arch == "integrated":
            return _facts.INTEGRATED_FACTS
        return super().facts_for(arch, host)

    def probe(self, host: Host) -> Probe:
        p = super().probe(host)
        igpus = [d for d in host.devices_of("intel") if is_integrated(d)]
        if p.hardware_present or not igpus:
            return p
        name = igpus[0].name or igpus[0].pci_device_id or "an integrated Intel GPU"
        return replace(
            p,
            reason=(
                f"only an integrated Intel GPU ({name}) was found; hwbackends uses an "
                "integrated GPU only when the installed torch is an XPU build"
            ),
            hint=self.install_hint,
        )
