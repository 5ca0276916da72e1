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

from hwbackends._base.files import _listdir, _read_text, confine, match_node, release
from hwbackends._base.guard import PluginFault, call, describe, plain
from hwbackends._discovery.catalog import (
    KNOWN_FUNCTION_VENDORS,
    KNOWN_PLUGINS,
    KNOWN_VENDOR_WIDE,
    KnownFunction,
    known_function,
)
from hwbackends._discovery.dists import _scan_packages
from hwbackends._discovery.loading import Meta, installed_backends, meta_of, read_ints
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

    ``backends`` default to the installed ones (less those disabled by the settings). Under
    another ``root`` its symbolic links resolve inside it (``files.confine``): an absolute
    link in a copied tree names a file of that tree, not of this machine.
    """
    key = confine(root)
    try:
        return _read_system(root, path, system, backends)
    finally:
        release(key)


def _read_system(
    root: str, path: Sequence[str] | None, system: str | None, backends: Sequence[Any] | None
) -> dict[str, Any]:
    here = os.path.realpath(root) == "/"
    if hasattr(os, "uname"):  # what platform.system()/machine() return, without importing it
        uts = os.uname()
        sysname, machine = system or uts.sysname, uts.machine
    else:  # pragma: no cover - Windows
        import platform

        sysname, machine = system or platform.system(), platform.machine()
    if not here:  # another machine's tree: its own CPU, never this one's (issue 34)
        from hwbackends._machine.cpuinfo import tree_machine

        sysname, machine = system or "Linux", tree_machine(root)
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
        cpu=_read_cpu(root, here),
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


def _claims(
    obj: Any, vid: int, did: int | None, klass: int, dids: tuple[int, ...] | None = None
) -> bool:
    """Whether a declaration (a backend's ``Meta`` or a known plugin) claims a PCI function;
    ``dids``: its device ids when the declaration does not hold them (read lazily)."""
    if vid not in obj.pci_vendor_ids:
        return False
    if dids is None:
        dids = obj.pci_device_ids or ()
    if dids and did not in dids:
        return False
    return _class_ok(klass, obj.pci_classes)


def _hook(
    errors: dict[str, str], meta: Meta, what: str, fn: Callable[[], _R], owner: str | None
) -> _R | None:
    """Run a plugin's reading hook under the plugin guard; a failure is recorded, not raised.

    A hook the plugin does not override is ``BaseBackend``'s own code: it runs inline (no
    thread hand-off), its errors recorded the same way."""
    name = meta.name
    method = what.partition("(")[0]
    # BaseBackend marks its own hooks (the reader sits below the plugin kit and cannot import
    # it): those run inline, with no thread hand-off.
    if method not in meta.own_hooks:
        try:
            return fn()
        except Exception as exc:
            errors.setdefault(name, f"{name}.{what} raised {describe(exc)}")
            return None
    try:
        return call(f"{name}.{what}", fn, owner=owner)
    except PluginFault as exc:
        errors.setdefault(name, exc.reason)
        return None


def _metas(backends: Sequence[Any], errors: dict[str, str]) -> list[tuple[Any, Meta]]:
    """Each backend with its declarations, read once under the guard; one whose declarations
    cannot be read is recorded in ``errors`` and left out."""
    out = []
    for b in backends:
        try:
            out.append((b, meta_of(b)))
        except PluginFault as exc:
            errors.setdefault(f"{type(b).__name__}", exc.reason)
    return out


def _owner(b: Any) -> str | None:
    # the name a plugin's calls are blocked under once one hangs (loading's entry-point name)
    from hwbackends._discovery.loading import _declared

    got = _declared.get(id(b))
    return got[1].name if got is not None and got[0] is b else None


def _device_ids(
    b: Any, m: Meta, known: dict[int, tuple[int, ...]], errors: dict[str, str]
) -> tuple[int, ...]:
    """A backend's ``pci_device_ids``, read once under the guard when first needed (it may
    load the plugin's fact table, which a machine without its vendor's devices never needs)."""
    if m.pci_device_ids is not None:
        return m.pci_device_ids
    got = known.get(id(b))
    if got is None:
        try:
            got = call(
                f"{m.name}.pci_device_ids",
                lambda: read_ints(getattr(b, "pci_device_ids", ())),
                owner=_owner(b),
            )
        except PluginFault as exc:
            errors.setdefault(m.name, exc.reason)
            got = ()
        known[id(b)] = got
    return got


def _plain_device(d: HostDevice) -> HostDevice:
    """A HostDevice whose fields are exact builtin copies (run inside the guard)."""
    fields = type(d).__dict__.get("__record_fields__", ())
    return HostDevice(**{f.name: plain(getattr(d, f.name)) for f in fields})


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
    metas = _metas(backends, errors)
    own, others = _pci_devices(root, metas, errors)
    out: list[HostDevice] = []
    for b, m in metas:
        found = tuple(own[id(b)])
        out.extend(_backend_devices(root, sysname, machine, b, m, found, nodes, errors))
    return tuple(out + _named(root, others))


def _pci_devices(
    root: str, metas: Sequence[tuple[Any, Any]], errors: dict[str, str]
) -> tuple[dict[int, list[HostDevice]], list[HostDevice]]:
    """Decides whose device each PCI function is, in bus order (NVML's order): every claiming
    backend's (by ``id`` of the backend), else a device of the others (a known function, a
    catalogued plugin's hardware, an unclaimed accelerator); any other function is skipped."""
    claimers = [(b, m) for b, m in metas if m.vendor and m.pci_vendor_ids]
    device_ids: dict[int, tuple[int, ...]] = {}
    served = {m.vendor for _, m in metas}
    known = [k for k in KNOWN_PLUGINS if k.vendor not in served and k.pci_vendor_ids]
    own: dict[int, list[HostDevice]] = {id(b): [] for b, _ in metas}
    others: list[HostDevice] = []
    for bus, d, source in functions(root):
        vid, did, klass_text = ids(d)
        if vid is None:
            continue
        klass = _hex(klass_text) or 0
        fn = _Function(d, bus, vid, did, klass_text, source)
        owners = _claimed_by(claimers, fn, klass, device_ids, errors)
        other = _other_device(fn, klass, owners, known, device_ids)
        if other is not None:
            others.append(other)
        elif owners:
            _give_to_owners(fn, owners, own, root)
    return own, others


def _claimed_by(
    claimers: Sequence[tuple[Any, Any]],
    fn: _Function,
    klass: int,
    device_ids: dict[int, tuple[int, ...]],
    errors: dict[str, str],
) -> list[tuple[Any, Any]]:
    """Decides which backends claim a PCI function: every one whose declarations take it (two
    plugins for the same cards must both see them: selection then warns and names the setting
    that decides)."""
    return [
        (b, m)
        for b, m in claimers
        if fn.vid in m.pci_vendor_ids
        and _claims(m, fn.vid, fn.did, klass, _device_ids(b, m, device_ids, errors))
    ]


def _other_device(
    fn: _Function,
    klass: int,
    owners: Sequence[tuple[Any, Any]],
    known: Sequence[Any],
    device_ids: dict[int, tuple[int, ...]],
) -> HostDevice | None:
    """Decides the device a PCI function is when its claiming backends do not keep it: a known
    function, a catalogued plugin's hardware or an unclaimed accelerator; None when the owners
    keep it or it is no accelerator anyone knows."""
    vid, did = fn.vid, fn.did
    cat = None if owners else next((k for k in known if _claims(k, vid, did, klass)), None)
    accel = klass >> 16 == _ACCEL_BASE_CLASS or klass >> 8 == _COPROCESSOR_CLASS
    # a vendor the catalog knows whole (Iluvatar) is named for its display controllers too
    known_card = klass >> 16 == 0x03 and vid in KNOWN_VENDOR_WIDE
    if not owners and cat is None and not accel and not known_card:
        return None
    # Crypto/compression engines and compute devices no plugin exists for are named, never
    # counted as a backend's hardware nor "install a plugin" (the catalog's
    # KNOWN_FUNCTIONS, by device id or bound driver). An installed backend always wins over
    # that table for the hardware it declares: compute hardware "no plugin exists for" goes
    # to any backend that claims it (that backend is the plugin), and an engine to one that
    # lists the device id in its own pci_device_ids (a vendor-wide class claim, as an Intel
    # GPU plugin makes, must not take Intel's NPU or QAT).
    kf = known_function(vid, did, fn.driver) if vid in KNOWN_FUNCTION_VENDORS else None
    if kf is not None and not (
        (owners and kf.kind == "no-plugin")
        or any(did in device_ids.get(id(b), m.pci_device_ids or ()) for b, m in owners)
    ):
        return fn.device(f"pci_{vid:04x}", known=kf)
    if owners:
        return None
    if cat is not None:
        return fn.device(cat.vendor)
    return fn.device(f"pci_{vid:04x}", unclaimed=True)


def _give_to_owners(
    fn: _Function,
    owners: Sequence[tuple[Any, Any]],
    own: dict[int, list[HostDevice]],
    root: str,
) -> None:
    """Decides the device each claiming backend gets: one per vendor key (the first backend
    of a vendor keeps it)."""
    keys: set[str] = set()
    for b, m in owners:
        vendor = m.vendor or ""
        if vendor in keys:
            continue
        keys.add(vendor)
        own[id(b)].append(fn.device(vendor, root=root, modules=m.driver_modules))


def _backend_devices(
    root: str,
    sysname: str,
    machine: str,
    b: Any,
    m: Any,
    found: tuple[HostDevice, ...],
    nodes: Sequence[str],
    errors: dict[str, str],
) -> list[HostDevice]:
    """Decides a backend's devices: its ``read_devices`` hook's answer from the PCI devices it
    claimed (those as they are when the hook fails), else its declared ``/dev`` nodes."""

    def read() -> tuple[HostDevice, ...]:
        got = b.read_devices(root, found, system=sysname, machine=machine)
        if not isinstance(got, (tuple, list)) or not all(type(x) is HostDevice for x in got):
            raise TypeError(f"returned {type(got).__name__}, expected a tuple of HostDevice")
        return tuple(_plain_device(x) for x in got)

    got = _hook(errors, m, "read_devices()", read, _owner(b))
    mine = list(found if got is None else got)
    if not mine and m.vendor:
        # A container given only the device nodes: each declared unit node is a device.
        mine = [
            HostDevice(vendor=m.vendor, extra={"evidence": [DEV], "dev_node": f"/dev/{n}"})
            for _, n in node_devices(m, nodes)
        ]
    return [_normalised(d) for d in mine]


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
            if parts and parts[0].isdigit() and len(parts[0]) <= 20:
                return int(parts[0]) * 1024
    return None


def _read_cpu(root: str, here: bool = True) -> CpuInfo:
    """The CPU's model and flags from ``/proc/cpuinfo``; its logical cores from this process
    (``os.cpu_count()``) on this machine, from the tree itself under another root (0 when the
    tree does not show them)."""
    model = ""
    flags: frozenset[str] = frozenset()
    # bounded and non-blocking: a FIFO or a link to /dev/zero under --root must not hang or
    # grow; the first processor block is well inside the first 64 KiB
    text = _read_text(os.path.join(root, "proc/cpuinfo"), 1 << 16) or ""
    for line in text.splitlines():  # the first processor block is enough
        if not line.strip():
            break
        k, _, v = line.partition(":")
        k = k.strip()
        if k == "model name" or (k == "cpu" and not model):  # POWER names it in "cpu"
            model = v.strip()[:200]
        elif k in ("flags", "Features"):
            flags = frozenset(v.split())
    if here:
        count = os.cpu_count() or 1
    else:
        from hwbackends._machine.cpuinfo import tree_cores

        count = tree_cores(root) or 0
    return CpuInfo(model=model, count=count, flags=flags)


def _read_dev_nodes(root: str, backends: Sequence[Any]) -> tuple[str, ...]:
    """``/dev`` names that match a declared pattern of an installed or known backend."""
    patterns: set[str] = set()
    declared = [m for _, m in _metas(backends, {})]  # read once, under the guard
    for b in (*declared, *KNOWN_PLUGINS):
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
    for b, m in _metas(backends, errors):

        def read(b: Any = b) -> dict[str, str]:
            got = b.read_drivers(root)
            if not isinstance(got, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in got.items()
            ):
                raise TypeError(f"returned {type(got).__name__}, expected dict[str, str]")
            return {plain(k): plain(v) for k, v in dict(got).items()}

        got = _hook(errors, m, "read_drivers()", read, _owner(b))
        if got is not None:
            drivers.update(got)
    return drivers
