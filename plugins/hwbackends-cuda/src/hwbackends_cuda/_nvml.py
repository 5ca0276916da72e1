"""Optional enrichment of the real machine's NVIDIA devices through NVML (``nvidia-ml-py``).

NVML is the management library behind ``nvidia-smi``: it reads the driver without creating a
CUDA context, so a process stays fork-safe (vLLM and Ray probe the same way: vllm-project/vllm
``vllm/platforms/cuda.py``, ray-project/ray ``python/ray/_private/accelerators/nvidia_gpu.py``).
It is asked only by ``CudaBackend.confirm()``, the opt-in
runtime check, never by selection or ``devices()`` (which read files only), never about a
simulated host, and only when ``pynvml`` imports: ``nvmlInit`` then ``nvmlShutdown`` in one
call, nothing kept open or cached. It fills what the files do not give: compute capability, memory,
and the MIG instances of MIG-enabled GPUs (``extra["mig"]``, the format the visibility layer
reads). Values already in the host win.

NVML calls used (nvidia-ml-py, NVML API reference https://docs.nvidia.com/deploy/nvml-api/):
nvmlDeviceGetCount, nvmlDeviceGetHandleByIndex, nvmlDeviceGetPciInfo, nvmlDeviceGetName,
nvmlDeviceGetUUID, nvmlDeviceGetCudaComputeCapability, nvmlDeviceGetMemoryInfo,
nvmlDeviceGetMigMode, nvmlDeviceGetMaxMigDeviceCount, nvmlDeviceGetMigDeviceHandleByIndex,
nvmlDeviceGetGpuInstanceId, nvmlDeviceGetComputeInstanceId.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import TYPE_CHECKING, Any

from hwbackends.plugin import replace

if TYPE_CHECKING:
    from hwbackends import Host, HostDevice

__all__ = ["enrich"]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _bus(raw: Any) -> str:
    """NVML's ``00000000:3B:00.0`` as sysfs writes it: ``0000:3b:00.0``."""
    text = _text(raw).strip().lower()
    domain, _, rest = text.partition(":")
    return f"{int(domain, 16):04x}:{rest}" if rest else text


def _mig(nvml: Any, handle: Any) -> list[dict[str, Any]] | None:
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except Exception:  # NVML_ERROR_NOT_SUPPORTED on GPUs without MIG
        return None
    if current != getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1):
        return None
    out: list[dict[str, Any]] = []
    for j in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            mh = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, j)
        except Exception:  # an empty slot
            continue
        name = _text(nvml.nvmlDeviceGetName(mh))
        out.append(
            {
                "uuid": _text(nvml.nvmlDeviceGetUUID(mh)),
                "gi": int(nvml.nvmlDeviceGetGpuInstanceId(mh)),
                "ci": int(nvml.nvmlDeviceGetComputeInstanceId(mh)),
                "profile": name.rpartition("MIG ")[2] if "MIG " in name else name,
                "memory_bytes": int(nvml.nvmlDeviceGetMemoryInfo(mh).total),
            }
        )
    return out


def _read(nvml: Any) -> dict[str, dict[str, Any]]:
    """bus id -> facts, for every GPU NVML lists."""
    found: dict[str, dict[str, Any]] = {}
    for i in range(nvml.nvmlDeviceGetCount()):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        major, minor = nvml.nvmlDeviceGetCudaComputeCapability(h)
        facts: dict[str, Any] = {
            "name": _text(nvml.nvmlDeviceGetName(h)),
            "uuid": _text(nvml.nvmlDeviceGetUUID(h)),
            "arch": f"sm_{int(major)}{int(minor)}",
            "memory_bytes": int(nvml.nvmlDeviceGetMemoryInfo(h).total),
        }
        mig = _mig(nvml, h)
        if mig is not None:
            facts["mig"] = mig
        found[_bus(nvml.nvmlDeviceGetPciInfo(h).busId)] = facts
    return found


def _merge(hd: HostDevice, facts: dict[str, Any]) -> HostDevice:
    extra = dict(hd.extra)
    if "mig" in facts and "mig" not in extra:
        extra["mig"] = facts["mig"]
    extra.setdefault("enriched_by", "nvml")
    return replace(
        hd,
        name=hd.name or facts["name"],
        uuid=hd.uuid or facts["uuid"],
        arch=hd.arch or facts["arch"],
        memory_bytes=hd.memory_bytes if hd.memory_bytes is not None else facts["memory_bytes"],
        extra=extra,
    )


def enrich(host: Host) -> Host:
    """The host with NVML facts added to its NVIDIA devices (the same host when not possible)."""
    if host.simulated or not host.devices_of("nvidia"):
        return host
    result = host
    try:
        pynvml: Any = importlib.import_module("pynvml")  # the nvidia-ml-py distribution
    except ImportError:
        pynvml = None
    if pynvml is not None:
        try:
            pynvml.nvmlInit()
        except Exception:  # no driver, no libnvidia-ml.so: the files are all we have
            pass
        else:
            try:
                facts = _read(pynvml)
            except Exception:
                facts = {}
            finally:
                with contextlib.suppress(Exception):
                    pynvml.nvmlShutdown()
            if facts:
                devices = tuple(
                    _merge(d, facts[d.pci_bus_id])
                    if d.vendor == "nvidia" and d.pci_bus_id in facts
                    else d
                    for d in host.devices
                )
                result = replace(host, devices=devices)
    return result
