"""Reading the real machine's NVIDIA GPUs from the driver's files (no NVML, no CUDA).

``/proc/driver/nvidia/gpus/<bus>/information`` gives each GPU's model and UUID, and
``/proc/driver/nvidia/version`` the loaded driver (NVIDIA driver README, "Procfs interface").
The core hands over the PCI functions this backend claims, in bus order, which is NVML's
order.
"""

from __future__ import annotations

import os

from hwbackends.plugin import list_dir, read_text, replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hwbackends import HostDevice

__all__ = ["driver_version", "enrich"]


def enrich(root: str, found: tuple[HostDevice, ...]) -> tuple[HostDevice, ...]:
    """Model name and UUID from the driver's per-GPU ``information`` file."""
    gpus = os.path.join(root, "proc/driver/nvidia/gpus")
    info: dict[str, dict[str, str]] = {}
    for bus in list_dir(gpus):
        text = read_text(os.path.join(gpus, bus, "information")) or ""
        fields = {}
        for line in text.splitlines():
            k, sep, v = line.partition(":")
            if sep:
                fields[k.strip()] = v.strip()
        info[bus.lower()] = fields
    out = []
    for dev in found:
        f = info.get(dev.pci_bus_id or "")
        if f is None:
            out.append(dev)
            continue
        uuid = f.get("GPU UUID")
        out.append(
            replace(
                dev,
                uuid=uuid if uuid and uuid.startswith("GPU-") else None,
                name=f.get("Model") or None,
            )
        )
    return tuple(out)


def driver_version(root: str) -> str | None:
    """The loaded driver's version, or None when no NVIDIA driver is loaded.

    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ..." and, for the
    open modules, "... NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build
    ...": the version is the first dotted number after "Module".
    """
    text = read_text(os.path.join(root, "proc/driver/nvidia/version"), 4096)
    if not text:
        return None
    words = text.split()
    after = words[words.index("Module") + 1 :] if "Module" in words else []
    return next((w for w in after if w[:1].isdigit() and "." in w), "")
