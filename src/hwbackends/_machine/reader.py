"""Reading a real machine (or a copy of one under ``root``) into a ``Host``.

Only files are read: sysfs, ``/dev``, ``/proc`` and the ``*.dist-info`` folders on
``sys.path``. What counts as hardware comes from the installed backends' declarations (PCI
ids, ``/dev`` patterns) and their ``read_devices``/``read_drivers`` hooks, which run under the
plugin guard. Torch and vendor SDKs are never imported and no device is opened, so a process
can fork safely after probing (DESIGN.md, rule 2)."""

from __future__ import annotations

import os
import sys
from _collections_abc import Mapping  # collections.abc's classes, without importing collections

from hwbackends._base.files import _listdir, _read_text, match_node
from hwbackends._base.guard import PluginFault, call, describe
from hwbackends._discovery.catalog import (
    KNOWN_FUNCTION_VENDORS,
    KNOWN_PLUGINS,
    KnownFunction,
    known_function,
)
from hwbackends._discovery.dists import _scan_packages
from hwbackends._discovery.loading import installed_backends
from hwbackends._machine.evidence import (
    DEV,
    bound_driver,
    functions,
    ids,
    node_devices,
    normalise_bus_id,
)
from hwbackends._machine.values import CpuInfo, HostDevice, TorchBuild

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, TypeVar

    _R = TypeVar("_R")


def read_system(
    root: str = "/",
    *,
    path: Sequence[str] | None = None,
    system: str | None = None,
    backends: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """The fields of ``Host.from_system(...)``: this machine, or the copy of one under ``root``.

    ``backends`` default to the installed ones (less those disabled by the settings).
    """
    if hasattr(os, "uname"):  # what platform.system()/machine() return, without importing it
        uts = os.uname()
        sysname, machine = system or uts.sysname, uts.machine
    else:  # pragma: no cover - Windows
        import platform

        sysname, machine = system or platform.system(), platform.machine()
    if backends is None:
        backends = installed_backends()
    search = list(sys.path if path is None else path)
    packages = dict(_scan_packages(search))
    errors: dict[str, str] = {}
    nodes = _read_dev_nodes(root, backends)
    devices = _read_devices(root, sysname, machine, backends, errors, nodes)
    return dict(
        system=sysname,
        machine=machine,
        torch=_read_torch_build(search),
        packages=packages,
        devices=devices,
        env=None,
        cpu=_read_cpu(root),
        device_nodes=nodes,
        drivers=_read_drivers(root, backends, errors),
        source="system",
        python=".".join(map(str, sys.version_info[:3])),
        memory_bytes=_read_memtotal(root),
        reader_errors=errors,
    )


# PCI classes that are accelerators whoever makes them: processing accelerators (0x12) and
# co-processors (0x0b40). Found and claimed by no installed backend, they are shown as
# unclaimed hardware.
_ACCEL_BASE_CLASS = 0x12


_COPROCESSOR_CLASS = 0x0B40
# What a backend that declares no ``pci_classes`` counts among its vendor's functions: display
# controllers, processing accelerators and co-processors, never its NICs, audio or bridges.
_COMPUTE_CLASSES = (0x03, _ACCEL_BASE_CLASS, _COPROCESSOR_CLASS)


def _read_torch_build(path: Iterable[str]) -> TorchBuild | None:
    for entry in path:
        text = _read_text(os.path.join(entry or ".", "torch", "version.py"))
        if text is None:
            continue
        values: dict[str, str | None] = {}
        for line in text.splitlines():
            name, sep, rhs = line.partition("=")
            if not sep:
                continue
            name = name.partition(":")[0].strip()
            rhs = rhs.strip()
            if rhs == "None":
                values[name] = None
            elif len(rhs) >= 2 and rhs[0] == rhs[-1] and rhs[0] in "'\"":
                values[name] = rhs[1:-1]
        version = values.get("__version__")
        if not version:
            return None
        return TorchBuild(
            version=version, cuda=values.get("cuda"), hip=values.get("hip"), xpu=values.get("xpu")
        )
    return None


def _hex(text: str | None) -> int | None:
    t = (text or "").strip().lower()
    if not t.startswith("0x") or not 2 < len(t) <= 10:
        return None
    try:
        return int(t, 16)
    except ValueError:
        return None


def _class_ok(klass: int, allowed: Sequence[int]) -> bool:
    """``allowed`` entries up to 0xff match the base class, longer ones class and subclass;
    none declared means the compute classes (``_COMPUTE_CLASSES``)."""
    if not allowed:
        allowed = _COMPUTE_CLASSES
    base, sub = klass >> 16, klass >> 8
    return any((a == base) if a <= 0xFF else (a == sub) for a in allowed)


def _claims(obj: Any, vid: int, did: int | None, klass: int) -> bool:
    ids = getattr(obj, "pci_vendor_ids", ())
    if vid not in ids:
        return False
    dids = getattr(obj, "pci_device_ids", ())
    if dids and did not in dids:
        return False
    return _class_ok(klass, getattr(obj, "pci_classes", ()))


def _hook(errors: dict[str, str], backend: Any, what: str, fn: Callable[[], _R]) -> _R | None:
    """Run a plugin's reading hook under the plugin guard; a failure is recorded, not raised.

    A hook the plugin does not override is ``BaseBackend``'s own code: it runs inline (no
    thread hand-off), its errors recorded the same way."""
    name = backend.name if isinstance(getattr(backend, "name", None), str) else "?"
    method = what.partition("(")[0]
    # BaseBackend marks its own hooks (the reader sits below the plugin kit and cannot import
    # it): those run inline, with no thread hand-off.
    if getattr(getattr(type(backend), method, None), "hwbackends_default", False):
        try:
            return fn()
        except Exception as exc:
            errors.setdefault(name, f"{name}.{what} raised {describe(exc)}")
            return None
    try:
        return call(f"{name}.{what}", fn)
    except PluginFault as exc:
        errors.setdefault(name, exc.reason)
        return None


class _Function:
    """One PCI function being read."""

    __slots__ = ("bus", "did", "folder", "klass", "source", "vid")

    def __init__(
        self, folder: str, bus: str, vid: int, did: int | None, klass: str, source: str
    ) -> None:
        self.folder, self.bus, self.vid, self.did, self.klass = folder, bus, vid, did, klass
        self.source = source

    def driver(self) -> str | None:
        """The bound driver: the ``driver`` link's name, else ``DRIVER=`` in ``uevent``."""
        return bound_driver(self.folder)

    def device(
        self,
        vendor: str,
        unclaimed: bool = False,
        known: KnownFunction | None = None,
        root: str = "",
        modules: Sequence[str] = (),
    ) -> HostDevice:
        # amdgpu exposes the VRAM size here; other drivers leave it out
        mem = _read_text(os.path.join(self.folder, "mem_info_vram_total"), 32)
        extra: dict[str, Any] = {"pci_class": self.klass, "evidence": [self.source]}
        driver = self.driver()
        if driver is None:  # a capture that kept the driver's folder but not the link
            drivers = os.path.join(root, "sys/bus/pci/drivers")
            driver = next(
                (m for m in modules if isinstance(m, str) and "/" not in m
                 and os.path.lexists(os.path.join(drivers, m, self.bus))),
                None,
            )  # fmt: skip
        if driver is not None:
            extra["driver"] = driver
        if unclaimed or known is not None:
            extra["pci_vendor_id"] = f"0x{self.vid:04x}"
        if unclaimed:
            extra["unclaimed"] = True
        if known is not None:
            extra["known_function"] = known.kind
        return HostDevice(
            vendor=vendor,
            name=known.what if known is not None else None,
            pci_bus_id=self.bus,
            pci_device_id=f"0x{self.did:04x}" if self.did is not None else None,
            memory_bytes=int(mem) if mem and mem.strip().isdigit() else None,
            extra=extra,
        )


def _read_devices(
    root: str,
    sysname: str,
    machine: str,
    backends: Sequence[Any],
    errors: dict[str, str],
    nodes: Sequence[str] = (),
) -> tuple[HostDevice, ...]:
    """The devices every source of evidence shows: PCI functions claimed by ``backends`` (PCI
    folders, DRM and accel classes), then each backend's hook (its driver files; ordering),
    then ``/dev`` nodes of backends nothing else found; plus known and unclaimed
    accelerators."""
    claimers = [b for b in backends if getattr(b, "vendor", None) and b.pci_vendor_ids]
    served = {getattr(b, "vendor", None) for b in backends}
    known = [k for k in KNOWN_PLUGINS if k.vendor not in served and k.pci_vendor_ids]
    own: dict[int, list[HostDevice]] = {id(b): [] for b in backends}
    others: list[HostDevice] = []
    for bus, d, source in functions(root):  # bus order, which is NVML's order
        vid, did, klass_text = ids(d)
        if vid is None:
            continue
        klass = _hex(klass_text) or 0
        fn = _Function(d, bus, vid, did, klass_text, source)
        # Every backend that claims the function gets it under its own vendor key (two
        # plugins for the same cards must both see them: selection then warns and names the
        # setting that decides); one device per key.
        owners = [b for b in claimers if _claims(b, vid, did, klass)]
        owner = owners[0] if owners else None
        cat = (
            None
            if owner is not None
            else next((k for k in known if _claims(k, vid, did, klass)), None)
        )
        accel = klass >> 16 == _ACCEL_BASE_CLASS or klass >> 8 == _COPROCESSOR_CLASS
        if owner is None and cat is None and not accel:
            continue
        # Crypto/compression engines and compute devices no plugin exists for are named, never
        # counted as a backend's hardware nor "install a plugin" (the catalog's
        # KNOWN_FUNCTIONS, by device id or bound driver). A backend that lists the device id
        # in its own pci_device_ids is more specific than that table, and keeps it.
        kf = known_function(vid, did, fn.driver) if vid in KNOWN_FUNCTION_VENDORS else None
        if kf is not None and not any(did in getattr(o, "pci_device_ids", ()) for o in owners):
            others.append(fn.device(f"pci_{vid:04x}", known=kf))
        elif owner is not None:
            keys: set[str] = set()
            for o in owners:
                if o.vendor in keys:
                    continue
                keys.add(o.vendor)
                mods = getattr(o, "driver_modules", ())
                mods = mods if isinstance(mods, tuple) else ()
                own[id(o)].append(fn.device(o.vendor, root=root, modules=mods))
        elif cat is not None:
            others.append(fn.device(cat.vendor))
        else:
            others.append(fn.device(f"pci_{vid:04x}", unclaimed=True))
    out: list[HostDevice] = []
    for b in backends:
        found = tuple(own[id(b)])

        def read(b: Any = b, found: tuple[HostDevice, ...] = found) -> tuple[HostDevice, ...]:
            got = b.read_devices(root, found, system=sysname, machine=machine)
            if not isinstance(got, (tuple, list)) or not all(type(x) is HostDevice for x in got):
                raise TypeError(f"returned {type(got).__name__}, expected a tuple of HostDevice")
            return tuple(got)

        got = _hook(errors, b, "read_devices()", read)
        mine = list(found if got is None else got)
        vendor = getattr(b, "vendor", None)
        if not mine and isinstance(vendor, str) and vendor:
            # A container given only the device nodes: each declared unit node is a device.
            mine = [
                HostDevice(vendor=vendor, extra={"evidence": [DEV], "dev_node": f"/dev/{n}"})
                for _, n in node_devices(b, nodes)
            ]
        out.extend(_normalised(d) for d in mine)
    return tuple(out + _named(root, others))


def _named(root: str, devices: list[HostDevice]) -> list[HostDevice]:
    """Unclaimed accelerators with their vendor's and model's names from the machine's PCI ID
    database (read only when there is one to name), so the report can say whose they are."""
    wanted: dict[int, set[int]] = {}
    for d in devices:
        vid = _hex(str(d.extra.get("pci_vendor_id", ""))) if d.extra.get("unclaimed") else None
        if vid is not None:
            did = _hex(d.pci_device_id or "")
            wanted.setdefault(vid, set()).update(() if did is None else (did,))
    if not wanted:
        return devices
    from hwbackends._base.record import replace
    from hwbackends._machine.pciids import lookup

    names = lookup(root, wanted)
    out = []
    for d in devices:
        vid = _hex(str(d.extra.get("pci_vendor_id", ""))) if d.extra.get("unclaimed") else None
        vendor = names.get((vid, None)) if vid is not None else None
        if vid is None or vendor is None:
            out.append(d)
            continue
        extra = dict(d.extra, pci_vendor_name=vendor)
        model = names.get((vid, _hex(d.pci_device_id or "")))
        if model:
            extra["pci_device_name"] = model
        out.append(replace(d, extra=extra, name=d.name or model))
    return out


def _normalised(d: HostDevice) -> HostDevice:
    """A hook's device with its bus id in sysfs's spelling, so that sources merge by it."""
    bus = d.pci_bus_id
    norm = normalise_bus_id(bus) if isinstance(bus, str) else None
    if norm is None or norm == bus:
        return d
    from hwbackends._base.record import replace

    return replace(d, pci_bus_id=norm)


def _read_memtotal(root: str) -> int | None:
    """System RAM from ``/proc/meminfo`` (``MemTotal:  N kB``); None where it is absent."""
    text = _read_text(os.path.join(root, "proc/meminfo"), 1 << 12) or ""
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key == "MemTotal":
            parts = rest.split()
            if parts and parts[0].isdigit():
                return int(parts[0]) * 1024
    return None


def _read_cpu(root: str) -> CpuInfo:
    model = ""
    flags: frozenset[str] = frozenset()
    try:
        with open(os.path.join(root, "proc/cpuinfo"), encoding="utf-8", errors="replace") as f:
            for line in f:  # the first processor block is enough
                if not line.strip():
                    break
                k, _, v = line.partition(":")
                k = k.strip()
                if k == "model name":
                    model = v.strip()
                elif k in ("flags", "Features"):
                    flags = frozenset(v.split())
    except OSError:
        pass
    return CpuInfo(model=model, count=os.cpu_count() or 1, flags=flags)


def _read_dev_nodes(root: str, backends: Sequence[Any]) -> tuple[str, ...]:
    """``/dev`` names that match a declared pattern of an installed or known backend."""
    patterns: set[str] = set()
    for b in (*backends, *KNOWN_PLUGINS):
        for attr in ("device_nodes", "device_node_units"):
            pats = getattr(b, attr, ())
            if isinstance(pats, tuple):
                patterns.update(p for p in pats if isinstance(p, str) and ".." not in p)
    by_dir: dict[str, list[str]] = {}
    for p in patterns:
        folder, _, _ = p.rpartition("/")
        by_dir.setdefault(folder, []).append(p)
    found: list[str] = []
    for folder, pats in by_dir.items():
        for name in _listdir(os.path.join(root, "dev", folder)):
            rel = f"{folder}/{name}" if folder else name
            if any(match_node(p, rel) for p in pats):
                found.append(rel)
    return tuple(sorted(set(found)))


def _read_drivers(root: str, backends: Sequence[Any], errors: dict[str, str]) -> dict[str, str]:
    drivers: dict[str, str] = {}
    for b in backends:

        def read(b: Any = b) -> dict[str, str]:
            got = b.read_drivers(root)
            if not isinstance(got, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in got.items()
            ):
                raise TypeError(f"returned {type(got).__name__}, expected dict[str, str]")
            return dict(got)

        got = _hook(errors, b, "read_drivers()", read)
        if got is not None:
            drivers.update(got)
    return drivers
