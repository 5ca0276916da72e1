"""Reading the real machine's NVIDIA GPUs from the driver's files (no NVML, no CUDA).

``/proc/driver/nvidia/gpus/<bus>/information`` gives each GPU's model, UUID and bus location,
and ``/proc/driver/nvidia/version`` the loaded driver (NVIDIA driver README, "Procfs
interface"). These files exist whenever the kernel module runs, also where ``/sys/bus/pci`` is
hidden (LXD and some container runtimes): they find GPUs on their own. The folder itself is
the trace: the driver makes one per GPU it drives, named by its bus id, when it probes the GPU
(``nv_procfs_add_gpu`` in ``kernel-open/nvidia/nv-procfs.c``, NVIDIA/open-gpu-kernel-modules),
so a copy that kept only a GPU's ``numa_status`` (POWER9 with NVLink-attached V100s) or no file
at all still shows the GPU at that bus id; the PCI function's ``class`` and ``device`` files
add what they say when the copy has them. The core hands over the
PCI functions this backend claims; both are merged by bus id and kept in bus order, which is
NVML's order.

Under WSL2 the Windows driver exposes GPUs through ``/dev/dxg`` and stubs its CUDA driver as
``/usr/lib/wsl/lib/libcuda.so*`` (Microsoft, "GPU accelerated ML training in WSL"; NVIDIA,
"CUDA on WSL User Guide"); no file says how many GPUs or which: one NVIDIA GPU of unknown model
is all these files prove.
"""

from __future__ import annotations

import os

from hwbackends.plugin import list_dir, normalise_bus_id, read_text, replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hwbackends import HostDevice

__all__ = [
    "GPUS",
    "PROC",
    "WSL",
    "WSL_LIB",
    "bound_elsewhere",
    "driver_version",
    "enrich",
    "normalise_bus",
    "read",
]

GPUS = "proc/driver/nvidia/gpus"
WSL_LIB = "usr/lib/wsl/lib"
#: Evidence names (``HostDevice.extra["evidence"]``).
PROC, WSL = "nvidia-proc", "wsl"
#: A machine has at most a few dozen GPUs; a hostile /proc copy cannot make the reader read more.
MAX_GPUS = 1024
_HEX = frozenset("0123456789abcdef")


def normalise_bus(text: str) -> str | None:
    """``domain:bus:device.function`` in sysfs's spelling (4-digit domain, lower case): the
    driver writes ``0000:01:00.0``, nvidia-smi ``00000000:01:00.0``. None when malformed."""
    return normalise_bus_id(text)


def _bus_key(bus: str | None) -> tuple[int, ...]:
    if bus is None:
        return (1 << 40,)
    domain, b, rest = bus.split(":")
    dev, _, fn = rest.partition(".")
    return (int(domain, 16), int(b, 16), int(dev, 16), int(fn, 16))


def read_information(root: str) -> dict[str, dict[str, str]]:
    """Bus id -> the fields of that GPU's ``information`` file; a folder named by a bus id
    without a readable one (a partial copy, or a FIFO planted there) gives no fields, and is
    still that GPU."""
    gpus = os.path.join(root, GPUS)
    info: dict[str, dict[str, str]] = {}
    for name in list_dir(gpus)[:MAX_GPUS]:
        text = read_text(os.path.join(gpus, name, "information"), 4096)
        if text is None:
            bus = normalise_bus(name)
            if bus is not None:
                info.setdefault(bus, {})
            continue
        fields = {}
        for line in text.splitlines():
            k, sep, v = line.partition(":")
            if sep:
                fields[k.strip()] = v.strip()
        bus = normalise_bus(fields.get("Bus Location", "")) or normalise_bus(name)
        if bus is not None:
            info[bus] = fields
    return info


def _facts(fields: dict[str, str]) -> dict[str, str | None]:
    uuid = fields.get("GPU UUID")
    return {
        "uuid": uuid if uuid and uuid.startswith("GPU-") else None,
        "name": fields.get("Model") or None,
    }


def enrich(root: str, found: tuple[HostDevice, ...]) -> tuple[HostDevice, ...]:
    """Model name and UUID from the driver's per-GPU ``information`` file."""
    return read(root, found)


def read(root: str, found: tuple[HostDevice, ...]) -> tuple[HostDevice, ...]:
    """The NVIDIA GPUs: PCI functions enriched by the driver's files, plus GPUs only the driver's
    files (or WSL's) show, in bus order."""
    from hwbackends import HostDevice

    info = read_information(root)
    out: list[HostDevice] = []
    seen: set[str] = set()
    for dev in found:
        bus = normalise_bus(dev.pci_bus_id or "")
        f = info.get(bus or "")
        if f is None:
            out.append(dev)
            continue
        seen.add(bus or "")
        facts = _facts(f)
        ev = list(dev.extra.get("evidence", ()))
        out.append(
            replace(
                dev,
                uuid=facts["uuid"],
                name=facts["name"],
                extra={**dev.extra, "evidence": [*ev, PROC]},
            )
        )
    for bus, f in info.items():
        if bus in seen:
            continue
        facts = _facts(f)
        minor = f.get("Device Minor", "")
        extra: dict[str, object] = {"evidence": [PROC]}
        if minor.isdigit() and len(minor) < 6:
            extra["device_minor"] = int(minor)
        klass, did = _pci_files(root, bus)
        if klass is not None:
            extra["pci_class"] = klass
        out.append(
            HostDevice(
                vendor="nvidia",
                pci_bus_id=bus,
                uuid=facts["uuid"],
                name=facts["name"],
                pci_device_id=did,
                extra=extra,
            )
        )
    out.sort(key=lambda d: _bus_key(normalise_bus(d.pci_bus_id or "")))
    if not out and is_wsl_gpu(root):
        out.append(HostDevice(vendor="nvidia", extra={"evidence": [WSL]}))
    return tuple(out)


def _pci_files(root: str, bus: str) -> tuple[str | None, str | None]:
    """``(class, device id)`` from the PCI function's own files, where a copy kept them
    without the ``vendor`` file the core needs to claim the function itself."""
    folder = os.path.join(root, "sys/bus/pci/devices", bus)
    out: list[str | None] = []
    for leaf, width in (("class", 6), ("device", 4)):
        t = (read_text(os.path.join(folder, leaf), 32) or "").strip().lower()
        ok = t.startswith("0x") and 2 < len(t) <= 2 + width and set(t[2:]) <= _HEX
        out.append(f"0x{int(t, 16):0{width}x}" if ok else None)
    return out[0], out[1]


def is_wsl_gpu(root: str) -> bool:
    """``/dev/dxg`` beside NVIDIA's ``libcuda.so`` stub in ``/usr/lib/wsl/lib``."""
    if not os.path.lexists(os.path.join(root, "dev/dxg")):
        return False
    return any(n.startswith("libcuda.so") for n in list_dir(os.path.join(root, WSL_LIB)))


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


#: Drivers other than NVIDIA's that a GPU's PCI function is seen bound to (its ``driver``
#: link, Documentation/ABI/stable/sysfs-bus-pci), what each means, and the fix.
OTHER_DRIVERS: dict[str, tuple[str, str]] = {
    "vfio-pci": (
        "reserved for a virtual machine: VFIO hands the whole device to a guest "
        "(Linux Documentation/driver-api/vfio.rst)",
        "use the GPU inside the VM it is passed to; to use it on this machine, take its id "
        "out of the vfio-pci.ids= kernel option (or the driverctl override) and reboot, so "
        "the NVIDIA driver binds it",
    ),
    "pci-stub": (
        "held back from every driver by pci-stub (its ids= option: drivers/pci/pci-stub.c)",
        "take its id out of the pci-stub.ids= kernel option and reboot, so the NVIDIA driver "
        "binds it",
    ),
    "nouveau": (
        "the open-source nouveau driver, which runs no CUDA",
        "disable nouveau and install the NVIDIA driver (CUDA Installation Guide for Linux, "
        "'Disabling Nouveau': https://docs.nvidia.com/cuda/cuda-installation-guide-linux/), "
        "then reboot",
    ),
}


def bound_elsewhere(gpus: tuple[HostDevice, ...]) -> tuple[str, str] | None:
    """``(problem, fix)`` for GPUs bound to a driver that is not NVIDIA's (``vfio-pci``,
    ``pci-stub``, ``nouveau``, ...), naming each driver and its GPUs; None when none is."""
    by: dict[str, list[str]] = {}
    for d in gpus:
        drv = d.extra.get("driver")
        if isinstance(drv, str) and drv not in ("", "nvidia", "nvgpu"):  # nvgpu: a Jetson's
            by.setdefault(drv, []).append(d.pci_bus_id or "a GPU")
    if not by:
        return None
    problems, fixes = [], []
    for drv, buses in by.items():
        what, fix = OTHER_DRIVERS.get(drv, (
            "not NVIDIA's driver", f"unbind it from {drv} and load the NVIDIA driver"))  # fmt: skip
        verb = "is" if len(buses) == 1 else "are"
        problems.append(f"{', '.join(buses)} {verb} bound to {drv}, {what}")
        fixes.append(fix)
    return "; ".join(problems), "; ".join(dict.fromkeys(fixes))
