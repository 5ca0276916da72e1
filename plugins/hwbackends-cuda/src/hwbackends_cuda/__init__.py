"""hwbackends plugin for NVIDIA GPUs through CUDA builds of torch.

Importing this module imports neither torch, transformers nor pynvml: the probe reads files
(``/sys/bus/pci``, ``/proc/driver/nvidia``, ``/dev``) through the ``Host`` it is given, and so
do ``devices()`` and selection. NVML is asked only by ``confirm()``, the opt-in runtime check
(see ``_nvml``).
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
from hwbackends.visibility import CudaDevices

# A declaration module: the fact tables (_arch, _attention, _quant), the driver readers
# (_system, _nvml) and the probe's rules (_probe) are imported by the methods that use them,
# so a machine without NVIDIA hardware never loads them.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import ClassVar

    from hwbackends import Host, HostDevice, Probe
    from hwbackends.facts import Confirmation
    from hwbackends.plugin import DeviceSupport

__all__ = ["CudaBackend"]

__version__ = "0.1.0"

_MIG_LIMIT = Limitation(
    text=(
        "this is a MIG instance: no peer-to-peer between GPUs in MIG mode, so NCCL cannot "
        "join MIG instances into one fast group; run one process per instance"
    ),
    source="NVIDIA MIG User Guide, 'Application Considerations' (no GPU-to-GPU P2P in MIG mode)",
)
HF = "docs/reference/hf-integration.md"
_DIST_SOURCE = (
    "accelerate/state.py _prepare_backend: cuda -> nccl; transformers DISTRIBUTED_BACKEND_MAP "
    f"cuda -> nccl ({HF} §5)"
)


class CudaBackend(BaseBackend):
    """NVIDIA GPUs. ``priority`` 100 equals rocm's: one torch build serves only one of them."""

    name: ClassVar[str] = "cuda"
    # The plugin API this class was written for; the core refuses it when it speaks another
    # (docs/writing-a-backend.md maps API versions to hwbackends releases).
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "cuda"
    priority: ClassVar[int] = 100
    display: ClassVar[str] = "NVIDIA CUDA"
    vendor: ClassVar[str | None] = "nvidia"
    pci_vendor_ids: ClassVar[tuple[int, ...]] = (0x10DE,)
    # NVIDIA also makes audio functions, USB controllers and NVSwitch bridges: GPUs are
    # display controllers (0x03) or 3D/processing accelerators (0x12).
    pci_classes: ClassVar[tuple[int, ...]] = (0x03, 0x12)
    device_nodes: ClassVar[tuple[str, ...]] = ("nvidia{n}",)
    device_node_units: ClassVar[tuple[str, ...]] = ("nvidia{n}",)  # one device per node
    # read_devices finds GPUs in the driver's /proc files and in WSL's files on their own
    evidence_sources: ClassVar[tuple[str, ...]] = ("nvidia-proc", "wsl", "tegra")
    driver_modules: ClassVar[tuple[str, ...]] = ("nvidia",)
    # the driver files read_devices reads (hwbackends_cuda._system)
    watch_paths: ClassVar[tuple[str, ...]] = (
        "proc/driver/nvidia/version",
        "proc/driver/nvidia/gpus",
        "usr/lib/wsl/lib",
        "etc/nv_tegra_release",
    )
    torch_flavour: ClassVar[str | None] = "cuda"
    install_hint: ClassVar[str] = lazy("hwbackends_cuda._probe", "INSTALL_HINT")
    distributed_backend: ClassVar[str] = "nccl"
    # Slurm schedules GPUs as the "gpu" GRES and sets the runtime's visibility variable per step
    # (https://slurm.schedmd.com/gres.html, "GPU Management")
    slurm_gres: ClassVar[str | None] = "gpu"
    # torch wheels with this runtime exist for Linux and Windows only (pytorch.org, "Start Locally")
    systems: ClassVar[tuple[str, ...]] = ("Linux", "Windows")
    visibility = CudaDevices(driver_module="nvidia")

    # -- reading the machine -----------------------------------------------------------------

    def read_devices(
        self, root: str, found: tuple[HostDevice, ...], *, system: str, machine: str
    ) -> tuple[HostDevice, ...]:
        # The driver's files find GPUs on their own (a container without /sys/bus/pci), and so
        # do WSL's and a Jetson's (L4T); a machine with none costs a few stats.
        import os

        from . import _tegra

        j = os.path.join
        jetson = _tegra.is_jetson(root)
        if not found and not jetson and not (os.path.isdir(j(root, "proc/driver/nvidia/gpus"))
                                             or os.path.lexists(j(root, "dev/dxg"))):  # fmt: skip
            return found
        from . import _system

        got = _system.read(root, found)
        igpu = _tegra.read(root) if jetson else None
        return got if igpu is None else (*got, igpu)

    def read_drivers(self, root: str) -> dict[str, str]:
        from . import _system

        out = super().read_drivers(root)
        version = _system.driver_version(root)
        if version is not None:
            out["nvidia"] = version or out.get("nvidia", "")
        return out

    # -- probe -------------------------------------------------------------------------------

    def probe(self, host: Host) -> Probe:
        from . import _probe

        own = self.host_devices(host)
        archs = [self.arch_of(d) for d in own]
        return _probe.probe(self.name, host, archs, [self.label_of(d) for d in own])

    def device_support(self, host: Host) -> tuple[DeviceSupport, ...]:
        """Each GPU's wheel index, or that no PyTorch wheel has kernels for it (the core's
        one verdict per device)."""
        from . import _support

        own = self.host_devices(host)
        archs = [self.arch_of(d) for d in own]
        return _support.device_support(host, own, archs, [self.label_of(d) for d in own])

    # -- devices -----------------------------------------------------------------------------

    def arch_of(self, hd: HostDevice) -> str | None:
        """The host's arch (any spelling), else NVML's, else the model-name table's, else the
        PCI device-id table's (a bare PCI function: no driver, no NVML)."""
        from . import _arch

        arch = _arch.normalise(hd.arch)
        if arch is None:
            row = _arch.arch_for_name(hd.name)
            arch = row.arch if row else None
        if arch is None:
            by_id = _arch.arch_for_device_id(hd.pci_device_id)
            arch = by_id[0] if by_id else None
        return arch

    def label_of(self, hd: HostDevice) -> str:
        """The device's name, else its product from the PCI id table, else its PCI id."""
        if hd.name:
            return hd.name
        from . import _arch

        by_id = _arch.arch_for_device_id(hd.pci_device_id)
        if by_id is not None and by_id[1]:
            return f"NVIDIA {by_id[1]}"
        return hd.pci_device_id or "unknown model"

    def known_archs(self) -> tuple[str, ...]:
        from ._arch import SM

        return tuple(SM)

    def confirm(self, host: Host, env: Mapping[str, str], *, timeout: float = 60.0) -> Confirmation:
        """The runtime check, predicted from the host enriched by NVML (MIG instances,
        memory, compute capability): the user asked for the driver to be consulted."""
        from . import _nvml

        return super().confirm(_nvml.enrich(host), env, timeout=timeout)

    def make_device(
        self,
        index: int,
        physical_index: int,
        hd: HostDevice | None,
        sub_index: int | None,
        label: str | None,
    ) -> Device:
        dev = super().make_device(index, physical_index, hd, sub_index, label)
        if dev.name is None and hd is not None and hd.pci_device_id:
            # no driver name (bare PCI function): the product the device id stands for
            named = self.label_of(hd)
            dev = replace(dev, name=named) if named != hd.pci_device_id else dev
        mig = hd.extra.get("mig") if hd is not None else None
        if sub_index is None or not isinstance(mig, list) or not 0 <= sub_index < len(mig):
            return dev
        inst = mig[sub_index] if isinstance(mig[sub_index], dict) else {}
        profile = inst.get("profile")
        mem = inst.get("memory_bytes")
        return replace(
            dev,
            uuid=inst.get("uuid") if isinstance(inst.get("uuid"), str) else dev.uuid,
            name=f"{dev.name} MIG {profile}" if dev.name and profile else dev.name,
            memory_bytes=mem if isinstance(mem, int) else None,
        )

    # -- capabilities ------------------------------------------------------------------------

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

        from . import _arch
        from ._attention import FLASH
        from ._quant import VERDICTS

        arch = device.arch if device is not None else None
        if device is None and host is not None:
            own = self.host_devices(host)
            arch = self.arch_of(own[0]) if own else None
        row = _arch.SM.get(arch or "")
        cap = row.capability if row else None
        tables = transformers_tables(host)
        flash, skipped = flash_attention_options(
            FLASH,
            arch=arch,
            capability=cap,
            device_key="cuda",
            rocm=False,
            host=host,
            tables=tables,
        )
        dtypes = ["float32", "float16"]
        if row is None or row.bf16:
            dtypes.append("bfloat16")
        if row is not None and row.fp8:
            dtypes += ["float8_e4m3fn", "float8_e5m2"]
        if row is None:
            known = f"{arch} is not in the architecture table" if arch else "unknown"
            precision_src = f"architecture {known}: fp16 runs on every CUDA GPU since Pascal"
        else:
            precision_src = (
                f"{row.arch} ({row.family}, compute capability {row.major_minor}): {row.source}"
            )
        limits = [USE_KERNELS_ADVICE]
        kstate = kernels_state(host, tables)
        if kstate.usable is False:
            limits.append(
                Limitation(
                    f"use_kernels=True and hub attention fallbacks are off here: {kstate.reason}",
                    "transformers modeling_utils.set_use_kernels / is_kernels_available "
                    f"({HF} §0, §2.1)",
                )
            )
        if device is not None and device.sub_index is not None:
            limits.append(_MIG_LIMIT)
        return Capabilities(
            backend=self.name,
            device_type=self.device_type,
            arch=arch,
            dtypes=tuple(dtypes),
            training_precision="bf16" if row is not None and row.bf16 else "fp16",
            attention=(*flash, *common_attention()),
            distributed_backend=self.distributed_backend,
            kernel_device="cuda",
            kernel_layers=kernel_layers("cuda", cap, tables),
            # an arch missing from the table (sm_999) is unknown, not older than every row
            quantization=quant_support(VERDICTS, arch if row is not None else None),
            device_map_auto=True,
            limitations=tuple(limits),
            sources={
                "arch": "host arch, NVML compute capability, the model-name table "
                f"(hwbackends_cuda/_arch.py, {_arch.CC_LIST}), or the PCI device-id table "
                "(hwbackends_cuda/_pciids.py: pci.ids and the same list)",
                "dtypes": precision_src,
                "training_precision": precision_src,
                "attention": f"{tables.origin}; not offered: {'; '.join(skipped) or 'none'}",
                "kernel_device": f"kernels Device type 'cuda' ({HF} §2.3)",
                "kernel_layers": tables.origin,
                "distributed_backend": _DIST_SOURCE,
                "device_map_auto": f"accelerate utils/modeling.py get_max_memory: cuda branch "
                f"({HF} §3.2)",
            },
        )
