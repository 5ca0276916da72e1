"""The core's own sources of evidence that a device is there, and what binds it to a driver.

Every trace a driver leaves finds a device on its own (issue 20): the PCI folders
(``/sys/bus/pci/devices``, or the ``/sys/devices/pci*`` tree when that folder is missing), the
DRM and accel class folders (``/sys/class/drm/card<N>``, ``/sys/class/accel/accel<N>``: what a
container that mounts only part of ``/sys`` still shows), and ``/dev`` nodes a backend declares
one device each. A backend's own driver files (AMD's KFD topology, NVIDIA's ``/proc``) are read
by its ``read_devices`` hook and named by its ``evidence_sources``; the core names no vendor.

Every read is bounded: regular files only, a size cap, no FIFO followed, a cap on the number of
entries listed.
"""

from __future__ import annotations

import os

from hwbackends._base.files import _islink, _listdir, _read_text, _readlink, match_node

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from typing import Any

__all__ = [
    "ACCEL",
    "DEV",
    "DRM",
    "PCI",
    "WATCH",
    "bound_driver",
    "functions",
    "node_devices",
    "normalise_bus_id",
    "sources_of",
    "uevent",
]

#: Evidence names of the core's sources (``HostDevice.extra["evidence"]``).
PCI, DRM, ACCEL, DEV = "pci", "drm", "accel", "dev"
#: Folders the selection cache watches besides the PCI folder and ``/dev``.
WATCH = ("sys/class/drm", "sys/class/accel")
#: The most functions, class entries and tree folders read: a large server has a few hundred
#: PCI functions; a hostile tree must not stall the reader.
MAX_ENTRIES = 4096
_MAX_DEPTH = 8
_HEX = frozenset("0123456789abcdef")


def normalise_bus_id(text: str) -> str | None:
    """``domain:bus:device.function`` as sysfs spells it (a 4-digit domain, lower case), from
    any spelling the kernel or tools use (nvidia-smi writes 8 domain digits); None when it is
    not a PCI address."""
    parts = text.strip().lower().split(":")
    if len(parts) != 3:
        return None
    domain, bus, rest = parts
    dev, dot, fn = rest.partition(".")
    if not dot or not all(0 < len(p) <= 8 and set(p) <= _HEX for p in (domain, bus, dev, fn)):
        return None
    d, b, v, f = int(domain, 16), int(bus, 16), int(dev, 16), int(fn, 16)
    if b > 0xFF or v > 0x1F or f > 7:
        return None
    return f"{d:04x}:{b:02x}:{v:02x}.{f}"


def uevent(folder: str) -> dict[str, str]:
    """``KEY=value`` lines of a sysfs ``uevent`` file (``DRIVER``, ``PCI_ID``,
    ``PCI_SLOT_NAME``, ``PCI_CLASS``); empty when there is none."""
    out: dict[str, str] = {}
    for line in (_read_text(os.path.join(folder, "uevent"), 4096) or "").splitlines():
        k, sep, v = line.partition("=")
        if sep and k.isupper() and len(k) < 32:
            out[k] = v.strip()
    return out


def bound_driver(folder: str, event: Mapping[str, str] | None = None) -> str | None:
    """The driver bound to a PCI function: the name its ``driver`` link points at, else the
    ``DRIVER=`` line of its ``uevent`` (both written by the kernel's driver core). None when no
    driver is bound."""
    try:
        target = _readlink(os.path.join(folder, "driver"))
    except (OSError, ValueError):
        target = ""
    name = target.rstrip("/").rpartition("/")[2]
    if not name:
        name = (uevent(folder) if event is None else event).get("DRIVER", "")
    return name if 0 < len(name) <= 64 and name.isprintable() and "/" not in name else None


def _pci_tree(root: str) -> Iterator[tuple[str, str]]:
    """``(bus id, folder)`` of the functions under ``/sys/devices/pci*``: the same functions
    ``/sys/bus/pci/devices`` links to, for a copy of ``/sys`` that lacks that folder."""
    base = os.path.join(root, "sys/devices")
    stack = [(os.path.join(base, n), 0) for n in reversed(_listdir(base)) if n.startswith("pci")]
    seen = 0
    while stack and seen < MAX_ENTRIES:
        folder, depth = stack.pop()
        children = []
        for name in _listdir(folder):
            bus = normalise_bus_id(name) if len(name) in (12, 16) else None
            if bus is not None and not _islink(os.path.join(folder, name)):
                seen += 1
                yield bus, os.path.join(folder, name)
                if depth < _MAX_DEPTH:
                    children.append((os.path.join(folder, name), depth + 1))
        stack.extend(reversed(children))


def _class_entries(root: str) -> Iterator[tuple[str, str, str]]:
    """``(bus id, device folder, evidence)`` of DRM cards and render nodes (a compute-only GPU
    may have no card) and accel devices on PCI."""
    for cls, prefixes, source in (("drm", ("card", "renderD"), DRM), ("accel", ("accel",), ACCEL)):
        base = os.path.join(root, "sys/class", cls)
        names = [
            n for n in _listdir(base) for p in prefixes if n.startswith(p) and n[len(p) :].isdigit()
        ]
        for name in names[:MAX_ENTRIES]:
            folder = os.path.join(base, name, "device")
            bus = normalise_bus_id(uevent(folder).get("PCI_SLOT_NAME", ""))
            if bus is None:  # the device link's own name: ../../../0000:09:00.0
                try:
                    bus = normalise_bus_id(_readlink(folder).rstrip("/").rpartition("/")[2])
                except (OSError, ValueError):
                    bus = None
            if bus is not None:  # a platform GPU (no PCI) is no function of ours
                yield bus, folder, source


def functions(root: str) -> list[tuple[str, str, str]]:
    """``(bus id, folder, evidence)`` of every PCI function the machine shows, in bus order:
    the PCI folders first, then DRM and accel devices no PCI folder showed."""
    out: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    base = os.path.join(root, "sys/bus/pci/devices")
    names = _listdir(base)
    listed: Sequence[tuple[str, str]] = [
        (b, os.path.join(base, n)) for n in names[:MAX_ENTRIES] if (b := normalise_bus_id(n))
    ]
    if not names:
        listed = sorted(_pci_tree(root))
    for bus, folder in listed:
        if bus not in seen:
            seen.add(bus)
            out.append((bus, folder, PCI))
    for bus, folder, source in _class_entries(root):
        if bus not in seen:
            seen.add(bus)
            out.append((bus, folder, source))
    out.sort()  # bus order (fixed-width hex), NVML's order
    return out


def ids(folder: str) -> tuple[int | None, int | None, str]:
    """``(vendor id, device id, class text)`` of a function: its ``vendor``, ``device`` and
    ``class`` files, else its ``uevent`` (``PCI_ID=1002:687F``, ``PCI_CLASS=30000``)."""
    vid = _hex(_read_text(os.path.join(folder, "vendor"), 32))
    did = _hex(_read_text(os.path.join(folder, "device"), 32))
    klass = (_read_text(os.path.join(folder, "class"), 32) or "").strip().lower()
    if vid is None or not klass:
        ev = uevent(folder)
        v, _, d = ev.get("PCI_ID", "").lower().partition(":")
        if vid is None and len(v) == 4 and set(v) <= _HEX:
            vid = int(v, 16)
            did = int(d, 16) if len(d) == 4 and set(d) <= _HEX else did
        c = ev.get("PCI_CLASS", "").lower()
        if not klass and 0 < len(c) <= 6 and set(c) <= _HEX:
            klass = f"0x{int(c, 16):06x}"
    return vid, did, klass


def _hex(text: str | None) -> int | None:
    t = (text or "").strip().lower()
    if not t.startswith("0x") or not 2 < len(t) <= 10 or not set(t[2:]) <= _HEX:
        return None
    return int(t, 16)


def node_devices(backend: Any, nodes: Sequence[str]) -> list[tuple[int, str]]:
    """``(number, node)`` of the ``/dev`` names matching a backend's ``device_node_units``
    (each such node is one device), in number order."""
    pats = getattr(backend, "device_node_units", ()) or ()
    if not isinstance(pats, tuple):
        return []
    out = []
    for n in nodes:
        for p in pats:
            if isinstance(p, str) and match_node(p, n):
                head, _, tail = p.partition("{n}")
                digits = n[len(head) : len(n) - len(tail)] if "{n}" in p else "0"
                ok = digits.isdigit() and digits.isascii() and len(digits) <= 9
                out.append((int(digits) if ok else 0, n))
                break
    return sorted(out)


def sources_of(backend: Any) -> list[str]:
    """The evidence sources the reader consults for a backend: the core's PCI, DRM and accel
    folders when it declares PCI ids, the sources its ``read_devices`` declares
    (``evidence_sources``), and ``/dev`` when it declares unit nodes."""
    out = [PCI, DRM, ACCEL] if getattr(backend, "pci_vendor_ids", ()) else []
    own = getattr(backend, "evidence_sources", ()) or ()
    if isinstance(own, tuple):
        out += [s for s in own if isinstance(s, str) and 0 < len(s) <= 32 and s not in out]
    if getattr(backend, "device_node_units", ()):
        out.append(DEV)
    return out
