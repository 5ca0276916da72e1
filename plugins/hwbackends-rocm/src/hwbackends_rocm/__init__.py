"""hwbackends plugin for AMD GPUs through ROCm (HIP) builds of torch.

torch calls these GPUs ``cuda`` devices (``torch.cuda`` is the HIP backend on a ROCm build), so
``device_type`` is ``"cuda"`` while the backend is named ``rocm`` and the ``kernels`` device key
is ``rocm``. Importing this module imports neither torch nor transformers; the probe reads
files (``/sys/class/kfd``, ``/sys/bus/pci``, ``/dev/kfd``) through the ``Host`` it is given.
"""

from __future__ import annotations

from hwbackends.plugin import (
    BaseBackend,
    Capabilities,
    Device,
    Limitation,
    common_attention,
    lazy,
    replace,
)
from hwbackends.visibility import RocmDevices

# A declaration module: the fact tables (_arch, _attention, _quant), the KFD reader
# (_system) and the probe's rules (_probe) are imported by the methods that use them.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

    from hwbackends import Host, HostDevice, Probe
    from hwbackends.plugin import DeviceSupport

__all__ = ["RocmBackend"]

__version__ = "0.1.0"

HF = "docs/reference/hf-integration.md"
CODECARBON = Limitation(
    text=(
        "CodeCarbon does not support ROCm: Transformers' CodeCarbonCallback raises when "
        "torch.version.hip is set, so leave 'codecarbon' out of TrainingArguments.report_to"
    ),
    source=(
        "transformers integrations/integration_utils.py CodeCarbonCallback.__init__ "
        "(mlco2/codecarbon#490)"
    ),
    report_to_exclude=("codecarbon",),
)
_DIST_SOURCE = (
    f"accelerate/state.py: ROCm counts as cuda -> nccl, which is RCCL in a ROCm build of torch "
    f"({HF} §5.1)"
)


_SOURCES = {
    "arch": "KFD topology gfx_target_version (host reader) or the host file, else the PCI "
    "device-id table (hwbackends_rocm/_pciids.py: the amdgpu driver's pciidlist, pci.ids and "
    "LLVM's AMDGPU processor table)",
    "device_type": (
        f"torch ROCm builds expose HIP as torch.cuda; device_map 'cuda', never 'rocm' ({HF} §3.1)"
    ),
    "kernel_device": (
        f"kernels Device type 'rocm'; kernelize turns cuda into rocm when torch.version.hip is "
        f"set ({HF} §2.3)"
    ),
    "distributed_backend": _DIST_SOURCE,
    "device_map_auto": f"accelerate get_max_memory cuda branch, which serves ROCm ({HF} §3.2)",
}


class RocmBackend(BaseBackend):
    """AMD GPUs. ``priority`` 100 equals cuda's: one torch build serves only one of them."""

    name: ClassVar[str] = "rocm"
    # The plugin API this class was written for; the core refuses it when it speaks another
    # (docs/writing-a-backend.md maps API versions to hwbackends releases).
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "cuda"
    priority: ClassVar[int] = 100
    display: ClassVar[str] = "AMD ROCm"
    vendor: ClassVar[str | None] = "amd"
    pci_vendor_ids: ClassVar[tuple[int, ...]] = (0x1002,)
    # AMD (ATI) also makes HDMI audio functions: GPUs are display (0x03) or accelerators (0x12).
    pci_classes: ClassVar[tuple[int, ...]] = (0x03, 0x12)
    device_nodes: ClassVar[tuple[str, ...]] = ("kfd",)
    driver_modules: ClassVar[tuple[str, ...]] = ("amdgpu",)
    # read_devices finds GPUs in the KFD topology on its own (hwbackends_rocm._system)
    evidence_sources: ClassVar[tuple[str, ...]] = ("kfd",)
    # the KFD topology folder the reader lists (hwbackends_rocm._system.NODES)
    watch_paths: ClassVar[tuple[str, ...]] = ("sys/class/kfd/kfd/topology/nodes",)
    torch_flavour: ClassVar[str | None] = "rocm"
    install_hint: ClassVar[str] = lazy("hwbackends_rocm._probe", "INSTALL_HINT")
    distributed_backend: ClassVar[str] = "nccl"
    # Slurm schedules GPUs as the "gpu" GRES and sets the runtime's visibility variable per step
    # (https://slurm.schedmd.com/gres.html, "GPU Management")
    slurm_gres: ClassVar[str | None] = "gpu"
    # torch wheels with this runtime exist for Linux and Windows only (pytorch.org, "Start Locally")
    systems: ClassVar[tuple[str, ...]] = ("Linux", "Windows")
    visibility = RocmDevices()

    def read_devices(
        self, root: str, found: tuple[HostDevice, ...], *, system: str, machine: str
    ) -> tuple[HostDevice, ...]:
        # The KFD topology finds GPUs on its own, also with no PCI folder (a container that
        # mounts only part of /sys); a machine without it costs one stat.
        import os

        if not os.path.isdir(os.path.join(root, "sys/class/kfd/kfd/topology/nodes")):
            return found
        from . import _system

        return _system.order_by_kfd(root, found)

    def arch_of(self, hd: HostDevice) -> str | None:
        """The host's gfx target (KFD ``gfx_target_version``, host file), else the PCI
        device-id table's (a bare PCI function, or a KFD node without a gfx version)."""
        if hd.arch:
            return hd.arch
        from ._arch import pci_row

        row = pci_row(hd.pci_device_id)
        return row.arch if row is not None and row.arch else None

    def probe(self, host: Host) -> Probe:
        from . import _probe

        def pin(positions: list[int]) -> str | None:
            try:
                env = self.visibility_env(positions, host=host)
            except Exception:  # the writer cannot express it: say nothing rather than guess
                return None
            return " ".join(f"{k}={v}" for k, v in env.items()) or None

        return _probe.probe(self.name, host, pin, self.arch_of)

    def device_support(self, host: Host) -> tuple[DeviceSupport, ...]:
        """Which AMD devices no ROCm build of torch can run on (the core's one verdict per
        device)."""
        from . import _support

        return _support.device_support(host, self.arch_of)

    def make_device(
        self,
        index: int,
        physical_index: int,
        hd: HostDevice | None,
        sub_index: int | None,
        label: str | None,
    ) -> Device:
        dev = super().make_device(index, physical_index, hd, sub_index, label)
        from ._arch import GFX, pci_row

        if dev.name is None and hd is not None:
            # sysfs gives AMD GPUs no model name: the device id names the product, else the
            # gfx target names the product family.
            by_id = pci_row(hd.pci_device_id)
            row = GFX.get(dev.arch or "")
            if by_id is not None and by_id.product:
                dev = replace(dev, name=f"AMD {by_id.product}")
            elif row is not None:
                dev = replace(dev, name=f"AMD {row.products}")
        return dev

    def capabilities(
        self, device: Device | None = None, *, host: Host | None = None
    ) -> Capabilities:
        from hwbackends.facts import (
            USE_KERNELS_ADVICE,
            flash_attention_options,
            kernel_layers,
            kernels_state,
            quant_support,
            transformers_tables,
        )

        from . import _probe
        from ._arch import GFX, capability
        from ._attention import FLASH
        from ._quant import VERDICTS

        arch = device.arch if device is not None else None
        if device is None and host is not None:
            usable = [g for g in _probe.classify(host, self.arch_of) if g.usable]
            arch = usable[0].arch if usable else None
        row = GFX.get(arch or "")
        cap = capability(arch)
        tables = transformers_tables(host)
        flash, skipped = flash_attention_options(
            FLASH,
            arch=arch,
            capability=cap,
            device_key="rocm",
            rocm=True,
            host=host,
            tables=tables,
        )
        dtypes = ["float32", "float16", "bfloat16"]  # torch.cuda.is_bf16_supported() on ROCm
        if row is not None and row.fp8 == "fnuz":
            dtypes += ["float8_e4m3fnuz", "float8_e5m2fnuz"]
        elif row is not None and row.fp8 == "ocp":
            dtypes += ["float8_e4m3fn", "float8_e5m2"]
        if row is None:
            precision_src = (
                f"{arch or 'architecture'} unknown to hwbackends: fp16 is the safe choice"
            )
        else:
            precision_src = (
                f"{row.arch} ({row.family}: {row.products}): "
                + ("fast bf16 matrix instructions" if row.bf16 else "no fast bf16 matrix path")
                + f"; {row.source}"
            )
        limits = [CODECARBON, USE_KERNELS_ADVICE]
        kstate = kernels_state(host, tables)
        if kstate.usable is False:
            off = f"use_kernels=True and hub attention fallbacks are off here: {kstate.reason}"
            limits.append(Limitation(off, f"transformers is_kernels_available ({HF} §0, §2.1)"))
        return Capabilities(
            backend=self.name,
            device_type=self.device_type,
            arch=arch,
            dtypes=tuple(dtypes),
            training_precision="bf16" if row is not None and row.bf16 else "fp16",
            attention=(*flash, *common_attention()),
            distributed_backend=self.distributed_backend,
            kernel_device="rocm",
            kernel_layers=kernel_layers("rocm", cap, tables),
            quantization=quant_support(VERDICTS, arch),
            device_map_auto=True,
            limitations=tuple(limits),
            sources={
                **_SOURCES,
                "dtypes": precision_src,
                "training_precision": precision_src,
                "attention": f"{tables.origin}; not offered: {'; '.join(skipped) or 'none'}",
                "kernel_layers": tables.origin,
            },
        )
