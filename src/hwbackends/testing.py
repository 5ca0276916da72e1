"""The conformance kit: the tests every backend plugin runs in its own CI, without hardware.

Enable it with one class::

    from hwbackends.testing import BackendContract
    from hwbackends_acme import AcmeBackend

    class TestAcmeContract(BackendContract):
        backend_cls = AcmeBackend
        hosts = ["tests/hosts/acme-4.json"]        # simulated hosts that must select it
        sdk_modules = ("acme_sdk",)                # must not be imported by the plugin module

It checks: the protocol (with pinned messages), the hardware declarations, that ``probe``
never raises and always explains, that devices agree with the probe, re-entrant results, that
importing the plugin module pulls in no vendor SDK and changes no environment variable,
visibility round-trips (every device can be selected alone), that what ``hwbackends pin`` and
``hwbackends launch-plan`` print really selects the devices they name, that capability data is
well-formed and sourced, and that its simulated hosts select it. The same checks are available
as plain functions (``check_*``) returning problem lists.

The ``hwbackends_host`` fixture (a factory for simulated hosts) is in every pytest session
where hwbackends is installed: the core's ``pytest11`` entry point registers it without
loading this module (``hwbackends._pytest_plugin``). The kit needs pytest, which the core does
not: importing it without pytest fails with a message that says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

try:
    import pytest
except ModuleNotFoundError as exc:  # the core runs without pytest; only the kit needs it
    if exc.name != "pytest":
        raise
    raise ModuleNotFoundError(
        "hwbackends.testing, the conformance kit, runs under pytest, which is not installed "
        "here. Expected pytest>=8 in this environment. Fix: pip install pytest",
        name="pytest",
    ) from None

from hwbackends._base.errors import VisibilityError
from hwbackends._base.protocol import Backend, Capabilities, Device, Probe
from hwbackends._base.settings import Settings
from hwbackends._discovery.loading import api_problem, protocol_problems
from hwbackends._discovery.scan import EntryPointSpec
from hwbackends._machine.host import Host
from hwbackends._pytest_plugin import hwbackends_host
from hwbackends._selection.registry import Registry

__all__ = [
    "BackendContract",
    "check_capabilities",
    "check_declarations",
    "check_devices_agree",
    "check_import_is_clean",
    "check_machine_tree",
    "check_pin_and_launch_plan",
    "check_probe",
    "check_protocol",
    "check_visibility_round_trip",
    "hwbackends_host",
    "machine_tree",
    "make_registry",
]

#: Hosts every backend must handle without raising: nothing at all, and odd leftovers.
EDGE_HOSTS: tuple[Mapping[str, Any], ...] = (
    {},
    {"system": "Darwin", "machine": "arm64"},
    {"torch": {"version": "2.13.0+cpu"}, "device_nodes": ["/dev/null"]},
    {"devices": [{"vendor": "unknownvendor", "name": "mystery"}], "packages": {"torch": "0"}},
)


def _as_host(h: str | os.PathLike[str] | Host | Mapping[str, Any]) -> Host:
    if isinstance(h, Host):
        return h
    if isinstance(h, Mapping):
        return Host.from_dict(h)
    return Host.from_file(h)


def make_registry(*backend_classes: type[Any], dist: str = "test") -> Registry:
    """A registry of in-memory backend classes (plus the built-in cpu), no install needed.

    ``registry.select(env, host)`` then gives the ``SelectionReport`` those backends make.

    :param backend_classes: the backend classes, each registered under its ``name`` (its
        module must be imported).
    :param dist: the distribution name their entry points are reported under
        (``BackendStatus.origin``).
    """
    specs = []
    for cls in backend_classes:
        mod = sys.modules[cls.__module__]
        specs.append(EntryPointSpec(cls.name, f"{mod.__name__}:{cls.__qualname__}", dist, "0"))
    return Registry(specs)


def check_protocol(cls: type, expected_name: str | None = None) -> list[str]:
    """Pinned messages for everything that keeps ``cls`` from being loaded as a backend.

    :param cls: the backend class; it is constructed once, without arguments.
    :param expected_name: the name its entry point declares, which its ``name`` must equal;
        None: not compared.
    """
    problem = api_problem(cls)
    if problem:
        return [problem]
    try:
        inst = cls()
    except Exception as exc:
        return [
            f"{cls.__name__}() raised {type(exc).__name__}: {exc}; a backend must construct "
            "without arguments and without touching hardware"
        ]
    problems = protocol_problems(inst, expected_name)
    if not problems and not isinstance(inst, Backend):
        problems.append(f"{cls.__name__} is not a hwbackends.Backend")
    return problems


def check_probe(backend: Backend, host: Host) -> list[str]:
    """``probe`` never raises, returns a Probe for itself, and always explains.

    :param backend: the backend instance to check.
    :param host: the machine to probe (``Host.from_file`` of a simulated one).
    """
    name = backend.name
    try:
        p = backend.probe(host)
    except Exception as exc:
        return [f"{name}.probe() raised {type(exc).__name__}: {exc} on host {host.source}"]
    if not isinstance(p, Probe):
        return [f"{name}.probe() returned {type(p).__name__}, expected hwbackends.Probe"]
    problems = []
    if p.backend != name:
        problems.append(f"{name}.probe() returned a Probe for {p.backend!r}")
    if not p.reason.strip():
        problems.append(f"{name}.probe() gave no reason on host {host.source}")
    if p.hardware_present and not p.software_ready and not p.hint:
        problems.append(
            f"{name}.probe() found hardware but not the software, and gave no hint naming the "
            f"fix (host {host.source})"
        )
    return problems


def check_devices_agree(backend: Backend, host: Host, env: Mapping[str, str]) -> list[str]:
    """``devices`` never raises, lists devices only where the probe found hardware, and
    numbers them 0..n-1 without naming a physical device twice.

    :param backend: the backend instance to check.
    :param host: the machine to probe and list devices on.
    :param env: the environment ``devices`` reads (visibility variables), name to value.
    """
    try:
        p = backend.probe(host)
        devs = backend.devices(host, env)
    except VisibilityError as exc:
        return [f"{backend.name}.devices() refused host {host.source} with env {dict(env)}: {exc}"]
    except Exception as exc:
        return [
            f"{backend.name}.devices() raised {type(exc).__name__}: {exc} on host {host.source}; "
            "it must return a list (empty where there is no hardware)"
        ]
    if not isinstance(devs, list) or not all(isinstance(d, Device) for d in devs):
        return [f"{backend.name}.devices() must return a list of hwbackends.Device"]
    problems = []
    if not p.hardware_present and devs:
        problems.append(
            f"{backend.name}.devices() lists {len(devs)} device(s) on host {host.source} where "
            "its probe found no hardware"
        )
    if [d.index for d in devs] != list(range(len(devs))):
        problems.append(f"{backend.name}.devices() logical indices are not 0..n-1")
    if len({(d.physical_index, d.sub_index) for d in devs}) != len(devs):
        problems.append(f"{backend.name}.devices() names one physical device twice")
    if any(d.backend != backend.name or not d.device_type for d in devs):
        problems.append(f"{backend.name}.devices() returned a Device of another backend")
    return problems


def check_declarations(cls: type) -> list[str]:
    """The hardware declarations the core reads the machine with are well-formed."""
    name = getattr(cls, "name", cls.__name__)
    return [
        *_vendor_problems(cls, name),
        *_pci_problems(cls, name),
        *_node_problems(cls, name),
        *_string_tuple_problems(cls, name),
        *_rule_problems(cls, name),
    ]


def _vendor_problems(cls: type, name: str) -> list[str]:
    """Decides whether the vendor key is a plain word."""
    vendor = getattr(cls, "vendor", None)
    if vendor is not None and (
        not isinstance(vendor, str) or not vendor or not vendor.replace("_", "").isalnum()
    ):
        return [f"{name}: vendor = {vendor!r}; expected letters, digits and underscores"]
    return []


def _pci_problems(cls: type, name: str) -> list[str]:
    """Decides whether the PCI ids and classes are 16-bit integers, and PCI vendor ids come
    with a vendor key."""
    problems = []
    for attr, top in (("pci_vendor_ids", 0xFFFF), ("pci_device_ids", 0xFFFF)):
        ids = getattr(cls, attr, ())
        if not isinstance(ids, tuple) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i <= top for i in ids
        ):
            problems.append(f"{name}: {attr} = {ids!r}; expected a tuple of 16-bit integers")
    classes = getattr(cls, "pci_classes", ())
    if not isinstance(classes, tuple) or not all(
        isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 0xFFFF for c in classes
    ):
        problems.append(
            f"{name}: pci_classes = {classes!r}; expected base classes (0x12) or base class "
            "and subclass (0x0b40)"
        )
    if getattr(cls, "pci_vendor_ids", ()) and not getattr(cls, "vendor", None):
        problems.append(f"{name}: declares pci_vendor_ids but no vendor key for those devices")
    return problems


def _node_problems(cls: type, name: str) -> list[str]:
    """Decides whether each /dev pattern is a name under /dev with at most one {n} that
    matches a name."""
    from hwbackends.plugin import match_node

    nodes = getattr(cls, "device_nodes", ())
    if not isinstance(nodes, tuple) or not all(isinstance(n, str) and n for n in nodes):
        return [f"{name}: device_nodes = {nodes!r}; expected a tuple of /dev patterns"]
    problems = []
    for pat in nodes:
        if pat.startswith("/") or ".." in pat.split("/") or pat.count("{n}") > 1:
            problems.append(
                f"{name}: device node pattern {pat!r}; expected a name under /dev such as "
                "'acme{n}' (one {n} at most, no leading /dev/)"
            )
        elif "{n}" in pat and not match_node(pat, pat.replace("{n}", "0")):
            problems.append(f"{name}: device node pattern {pat!r} matches no name")
    return problems


def _string_tuple_problems(cls: type, name: str) -> list[str]:
    """Decides whether driver modules, packages and watched paths are tuples of strings."""
    problems = []
    for attr in ("driver_modules", "packages", "watch_paths"):
        v = getattr(cls, attr, ())
        if not isinstance(v, tuple) or not all(isinstance(x, str) and x for x in v):
            problems.append(f"{name}: {attr} = {v!r}; expected a tuple of strings")
    return problems


def _rule_problems(cls: type, name: str) -> list[str]:
    """Decides whether the visibility declaration is one of hwbackends.visibility's rules."""
    from hwbackends.visibility import VisibilityRule

    rule = getattr(cls, "visibility", None)
    if rule is not None and not isinstance(rule, VisibilityRule):
        return [
            f"{name}: visibility = {rule!r}; expected a hwbackends.visibility rule such as "
            "IndexList('ACME_VISIBLE_DEVICES')"
        ]
    return []


def check_capabilities(caps: Capabilities, backend: Backend) -> list[str]:
    """Well-formed and sourced: every fact that can carry a source carries one.

    :param caps: the capabilities to check (``backend.capabilities(device, host=host)``).
    :param backend: the backend they come from, whose name they must carry.
    """
    problems = []
    where = f"{backend.name} capabilities ({caps.arch or 'default'})"
    if caps.backend != backend.name or not caps.device_type:
        problems.append(f"{where} name another backend, or no device type")
    if not caps.attention:
        problems.append(f"{where} list no attention implementation")
    elif caps.attention[-1].packages or caps.attention[-1].hub_kernel:
        problems.append(f"{where}: the last attention option must need nothing (e.g. eager)")
    for a in caps.attention:
        if not a.source.strip():
            problems.append(f"{where}: attention {a.name!r} has no source")
    for q in caps.quantization:
        if not q.source.strip():
            problems.append(f"{where}: quantization {q.method!r} has no source")
        if q.status not in ("supported", "partial", "unsupported", "unknown"):
            problems.append(f"{where}: quantization {q.method!r} has status {q.status!r}")
    for lim in caps.limitations:
        if not lim.source.strip():
            problems.append(f"{where}: limitation {lim.text!r} has no source")
    if not caps.distributed_backend:
        problems.append(f"{where} name no distributed backend")
    if "training_precision" not in caps.sources:
        problems.append(f"{where}: training_precision has no source")
    if caps.training_precision not in ("bf16", "fp16", "fp32"):
        problems.append(f"{where}: training_precision {caps.training_precision!r}")
    if caps.load_dtype not in caps.dtypes:
        problems.append(f"{where}: load dtype {caps.load_dtype} is not among dtypes {caps.dtypes}")
    try:
        json.dumps(caps.to_dict())
    except TypeError as exc:
        problems.append(f"{where} are not JSON-able: {exc}")
    return problems


def _applied(
    base: Mapping[str, str], unset: Sequence[str], assign: Mapping[str, str]
) -> dict[str, str]:
    """``base`` with ``unset`` removed and ``assign`` laid on top, as ``env -u ... K=V`` does."""
    out = {k: v for k, v in base.items() if k not in unset}
    out.update(assign)
    return out


_NO_RULE = (
    "declare the runtime's visibility rule on the backend class (for example "
    "visibility = IndexList('ACME_VISIBLE_DEVICES'); see hwbackends.visibility)"
)


def check_visibility_round_trip(backend: Backend, host: Host) -> list[str]:
    """Selecting physical devices through ``visibility_env`` shows exactly those, in order.

    Every visible unit must be selectable alone (one process per device needs it); a
    reordering or a subset the runtime cannot express may be refused with ``VisibilityError``.

    :param backend: the backend instance to check.
    :param host: a machine with its devices; its ``env`` (if any) is the starting environment.
    """
    from hwbackends.visibility import visibility_unset

    env = dict(host.env or {})
    try:
        devs = backend.devices(host, env)
        unset = visibility_unset(backend)
    except Exception as exc:
        return [f"{backend.name}: devices() or its visibility rule failed on {host.source}: {exc}"]
    physical = [d.physical_index for d in devs]
    whole = [d.physical_index for d in devs if d.sub_index is None]
    required = [[p] for p in physical]
    optional = [s for s in ([whole[::-1], whole[1::2]] if len(whole) > 1 else []) if len(s) > 1]
    problems = []
    for sel in required + optional:
        if not sel:
            continue
        try:
            out = backend.visibility_env(sel, host=host, env=env)
        except VisibilityError as exc:
            if sel in required:
                problems.append(
                    f"{backend.name}: device {sel[0]} cannot be selected alone on host "
                    f"{host.source} ({exc.what}), but `hwbackends pin` and launch plans need "
                    "it. Fix: " + _NO_RULE
                )
            continue
        got = [d.physical_index for d in backend.devices(host, _applied(env, unset, out))]
        if got != sel:
            problems.append(
                f"{backend.name}: visibility_env({sel}) = {out} shows physical {got}, not {sel}"
            )
    return problems


def check_pin_and_launch_plan(backend: Backend, host: Host) -> list[str]:
    """What ``hwbackends pin`` and ``hwbackends launch-plan`` print selects what they say.

    The launch plan over every visible unit must pin them (no "cannot be pinned" problem), and
    each rank's environment must show that rank's device as its logical device 0.

    :param backend: the backend instance to check.
    :param host: a machine with its devices; its ``env`` (if any) is the starting environment.
    """
    from hwbackends.distributed import launch_plan

    env = dict(host.env or {})
    devs = backend.devices(host, env)
    if not devs:
        return []
    try:
        plan = launch_plan(len(devs), backend=backend, env=env, host=host)
    except Exception as exc:
        return [f"{backend.name}: launch_plan() raised {type(exc).__name__}: {exc}"]
    problems = [
        f"{backend.name}: the launch plan on host {host.source} says: {p}; " + _NO_RULE
        for p in plan.problems
        if "cannot be pinned" in p
    ]
    for r in plan.ranks:
        seen = backend.devices(host, _applied(env, plan.node_unset, r.env))
        if r.local_rank >= len(seen) or (seen[r.local_rank].physical_index,) != r.physical:
            problems.append(
                f"{backend.name}: rank {r.rank} of the launch plan on host {host.source} would "
                f"use {backend.name}:{r.local_rank} = physical "
                f"{[d.physical_index for d in seen][r.local_rank : r.local_rank + 1]}, "
                f"not {list(r.physical)}"
            )
    return problems


def check_import_is_clean(module: str, sdk_modules: Iterable[str] = ()) -> list[str]:
    """Importing the plugin module in a fresh interpreter imports no SDK and edits no env.

    :param module: the module to import (``hwbackends_acme``).
    :param sdk_modules: top-level names of vendor SDK modules it must not import, besides
        torch, transformers and accelerate.
    """
    heavy = ["torch", "transformers", "accelerate", *sdk_modules]
    code = (
        "import os, sys\n"
        "before, loaded = dict(os.environ), set(sys.modules)\n"
        f"import {module}\n"
        "keys = set(before) | set(os.environ)\n"
        "changed = sorted(k for k in keys if before.get(k) != os.environ.get(k))\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - loaded}\n"
        f"heavy = sorted(new & set({heavy!r}))\n"
        "import json\n"
        "print(json.dumps({'changed': changed, 'heavy': heavy}))\n"
    )
    from hwbackends._selection.confirm import python_argv

    # isolated: a module in the working directory must not stand in for the plugin's
    proc = subprocess.run(python_argv(code), capture_output=True, text=True)
    if proc.returncode != 0:
        return [f"importing {module} failed: {proc.stderr.strip().splitlines()[-1:]}"]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    problems = []
    if got["heavy"]:
        problems.append(f"importing {module} imported {', '.join(got['heavy'])}")
    if got["changed"]:
        problems.append(f"importing {module} changed os.environ: {', '.join(got['changed'])}")
    return problems


def machine_tree(
    root: str | os.PathLike[str],
    *,
    pci: Iterable[tuple[str, int, int, int] | tuple[str, int, int, int, str]] = (),
    files: Mapping[str, str] | None = None,
    dev: Iterable[str] = (),
) -> Path:
    """Write a machine's file tree under ``root`` for the real reader (``--root``): PCI
    functions as sysfs shows them, the driver's files, and ``/dev`` nodes.

    :param root: the folder to write in (created when missing).
    :param pci: ``(bus id, vendor id, device id, class)`` of each function, optionally with the
        name of its bound driver (a ``driver`` link, as the kernel makes it), e.g.
        ``("0000:01:00.0", 0x1E52, 0x401E, 0x120000, "tenstorrent")``.
    :param files: more files, path under ``root`` -> text (``"proc/driver/acme/version"``).
    :param dev: ``/dev`` names (``"acme0"``, ``"tenstorrent/0"``), written as empty files.
    :returns: ``root`` as a ``Path``.
    """
    base = Path(root)
    for bus, vendor, device, klass, *driver in pci:
        fn = base / "sys/bus/pci/devices" / bus
        fn.mkdir(parents=True, exist_ok=True)
        for name, value in (("vendor", f"0x{vendor:04x}"), ("device", f"0x{device:04x}"),
                            ("class", f"0x{klass:06x}")):  # fmt: skip
            (fn / name).write_text(value + "\n", encoding="utf-8")
        if driver:
            target = base / "sys/bus/pci/drivers" / driver[0]
            target.mkdir(parents=True, exist_ok=True)
            if not os.path.lexists(fn / "driver"):
                os.symlink(os.path.relpath(target, fn), fn / "driver")
    for rel, text in (files or {}).items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text, encoding="utf-8")
    for node in dev:
        (base / "dev" / node).parent.mkdir(parents=True, exist_ok=True)
        (base / "dev" / node).write_text("", encoding="utf-8")
    return base


def check_machine_tree(
    backend_cls: type[Any],
    root: str | os.PathLike[str],
    devices: int,
    *,
    packages: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    competitors: Sequence[type[Any]] = (),
) -> list[str]:
    """Read a machine tree through the real reader with this backend (and the core's catalog
    of known hardware), then select: the backend gets ``devices`` devices, each card once, none
    left to the catalog or unclaimed, and it is selected with that many devices.

    Host files cannot catch what this does: which PCI functions the reader gives the backend.

    :param backend_cls: the backend class (its module imported).
    :param root: a tree as :func:`machine_tree` writes it, or a copy of a real machine's files.
    :param devices: how many devices the backend must get.
    :param packages: installed distributions to assume (``{"torch-acme": "1.0"}``) beside this
        interpreter's, so that the software is ready.
    :param env: the environment to select under; None: empty.
    :param competitors: other backend classes read and selected beside it.
    """
    from hwbackends._base.record import replace

    backend = backend_cls()
    name, vendor = backend.name, getattr(backend, "vendor", None)
    host = Host.from_system(str(root), backends=[backend, *(c() for c in competitors)])
    if packages:
        host = replace(host, packages={**host.packages, **packages})
    problems: list[str] = []
    mine = [d for d in host.devices if d.vendor == vendor]
    if len(mine) != devices:
        problems.append(f"{name}: the reader gave it {len(mine)} device(s) under vendor "
                        f"{vendor!r}, expected {devices}")  # fmt: skip
    buses = [d.pci_bus_id for d in host.devices if d.pci_bus_id]
    twice = sorted({b for b in buses if buses.count(b) > 1})
    if twice:
        problems.append(f"{name}: the host lists these PCI functions more than once: {twice}")
    ids = {f"0x{v:04x}" for v in getattr(backend, "pci_vendor_ids", ())}
    taken = [d.pci_bus_id for d in host.devices
             if d.vendor != vendor and d.extra.get("pci_vendor_id") in ids]  # fmt: skip
    if taken:
        problems.append(f"{name}: functions of its PCI vendor ids went to the core's catalog or "
                        f"stayed unclaimed: {taken}")  # fmt: skip
    env = dict(env or {})
    report = make_registry(backend_cls, *competitors).select(env, host, Settings.from_env(env))
    if report.chosen != name:
        problems.append(f"{name}: {report.chosen} was selected: {report.status(name).reason}")
    elif len(report.devices) != devices:
        problems.append(f"{name}: selected with {len(report.devices)} device(s), expected "
                        f"{devices}")  # fmt: skip
    unserved = ("no hwbackends plugin exists", "no installed backend claims")
    problems += [f"{name}: warning: {w}" for w in report.warnings if any(u in w for u in unserved)]
    return problems


def _fail(problems: Sequence[str]) -> None:
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


class BackendContract:
    """Subclass with ``backend_cls`` (and ``hosts``) to run the whole kit as pytest tests."""

    backend_cls: ClassVar[type[Any]]
    """The backend class under test (required); the ``backend`` fixture is a new instance."""
    hosts: ClassVar[Sequence[Any]] = ()
    """Simulated hosts (paths, dicts or Host objects) on which this backend must be selected;
    a relative path is relative to the file that defines the test class."""
    other_hosts: ClassVar[Sequence[Any]] = ()
    """More hosts for the per-host checks, on which it need not be selected (e.g. hardware
    without its package)."""
    sdk_modules: ClassVar[Sequence[str]] = ()
    """Vendor SDK module names that importing the plugin module must not import."""
    competitors: ClassVar[Sequence[type[Any]]] = ()
    """Extra backend classes that compete in the selection (e.g. cuda next to rocm)."""
    machine_trees: ClassVar[Sequence[tuple[Any, int]]] = ()
    """``(root, devices)`` pairs: machine trees (:func:`machine_tree`, or a copy of a real
    machine's files; a relative path is relative to the test file) on which the real reader
    must give this backend that many devices (:func:`check_machine_tree`)."""
    tree_packages: ClassVar[Mapping[str, str]] = {}
    """Distributions assumed installed on ``machine_trees`` (the vendor's torch extension)."""

    @pytest.fixture
    def backend(self) -> Backend:
        backend: Backend = self.backend_cls()
        return backend

    def all_hosts(self) -> list[Host]:
        """``hosts``, ``other_hosts`` and the edge hosts every backend must survive (an empty
        machine, a Mac, odd leftovers), as ``Host`` objects."""
        # Relative host paths are relative to the file that defines the test class.
        import inspect

        base = Path(inspect.getfile(type(self))).parent
        out = []
        for h in [*self.hosts, *self.other_hosts, *EDGE_HOSTS]:
            if isinstance(h, (str, os.PathLike)) and not Path(h).is_absolute():
                h = base / h
            out.append(_as_host(h))
        return out

    def selecting_hosts(self) -> list[Host]:
        """``hosts`` as ``Host`` objects: those that must select this backend."""
        return self.all_hosts()[: len(self.hosts)]

    def test_protocol(self) -> None:
        """``check_protocol`` of ``backend_cls``, with its ``name`` as the expected name."""
        _fail(check_protocol(self.backend_cls, getattr(self.backend_cls, "name", None)))

    def test_declarations(self) -> None:
        """``check_declarations`` of ``backend_cls``."""
        _fail(check_declarations(self.backend_cls))

    def test_probe_never_raises_and_explains(self, backend: Backend) -> None:
        """``check_probe`` on every host of ``all_hosts``.

        :param backend: the fixture's instance of ``backend_cls``.
        """
        _fail([p for h in self.all_hosts() for p in check_probe(backend, h)])

    def test_devices_agree_with_probe(self, backend: Backend) -> None:
        """``check_devices_agree`` on every host of ``all_hosts``, with an empty environment.

        :param backend: the fixture's instance of ``backend_cls``.
        """
        _fail([p for h in self.all_hosts() for p in check_devices_agree(backend, h, {})])

    def test_reentrant(self, backend: Backend) -> None:
        """Two calls of ``probe`` and of ``devices`` agree, and so does a second instance's probe.

        :param backend: the fixture's instance of ``backend_cls``.
        """
        problems = []
        for h in self.all_hosts():
            if backend.probe(h) != backend.probe(h) or backend.devices(h, {}) != backend.devices(
                h, {}
            ):
                problems.append(f"{backend.name}: two calls on host {h.source} disagree")
            other = self.backend_cls()
            if other.probe(h) != backend.probe(h):
                problems.append(f"{backend.name}: a second instance disagrees on {h.source}")
        _fail(problems)

    def test_import_is_clean(self) -> None:
        """``check_import_is_clean`` of the plugin's top-level package, with ``sdk_modules``."""
        _fail(check_import_is_clean(self.backend_cls.__module__.split(".")[0], self.sdk_modules))

    def test_visibility_round_trip(self, backend: Backend) -> None:
        """``check_visibility_round_trip`` on every host of ``hosts``.

        :param backend: the fixture's instance of ``backend_cls``.
        """
        _fail([p for h in self.selecting_hosts() for p in check_visibility_round_trip(backend, h)])

    def test_pin_and_launch_plan(self, backend: Backend) -> None:
        """``check_pin_and_launch_plan`` on every host of ``hosts``.

        :param backend: the fixture's instance of ``backend_cls``.
        """
        _fail([p for h in self.selecting_hosts() for p in check_pin_and_launch_plan(backend, h)])

    def test_capabilities_well_formed_and_sourced(self, backend: Backend) -> None:
        """``check_capabilities`` of the default capabilities and of those of the first four
        devices on every host of ``all_hosts``.

        :param backend: the fixture's instance of ``backend_cls``.
        """
        problems = check_capabilities(backend.capabilities(None), backend)
        for h in self.all_hosts():
            for d in backend.devices(h, {})[:4]:
                problems += check_capabilities(backend.capabilities(d, host=h), backend)
        _fail(problems)

    def test_simulated_hosts_select_it(self) -> None:
        """Each host of ``hosts``, with its own ``env``, selects ``backend_cls`` among it, the
        built-in cpu and ``competitors``; skipped when ``hosts`` is empty."""
        if not self.hosts:
            pytest.skip("no simulated hosts declared")
        reg = make_registry(self.backend_cls, *self.competitors)
        problems = []
        for h in self.selecting_hosts():
            env = dict(h.env or {})
            r = reg.select(env, h, Settings.from_env(env))
            name = self.backend_cls.name
            if r.chosen != name:
                why = r.status(name).reason
                problems.append(f"host {h.source} selected {r.chosen}, not {name}: {why}")
        _fail(problems)

    def test_machine_trees_give_it_its_hardware(self) -> None:
        """``check_machine_tree`` on each of ``machine_trees``; skipped when there is none."""
        if not self.machine_trees:
            pytest.skip("no machine trees declared")
        import inspect

        base = Path(inspect.getfile(type(self))).parent
        problems = []
        for root, n in self.machine_trees:
            where = base / root if not Path(root).is_absolute() else Path(root)
            problems += check_machine_tree(self.backend_cls, where, n,
                                           packages=self.tree_packages,
                                           competitors=self.competitors)  # fmt: skip
        _fail(problems)
