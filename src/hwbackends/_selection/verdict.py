"""One verdict per host device: the backend that serves it (or would) with which torch build,
or why none can, and the one fix. Built once per selection from the backends' probes, their
optional per-device facts (``device_support``), and the catalog for hardware no backend
claims; the Hardware line, the backend lines, every fix, the Install line, ``--json`` and
``SelectionReport.verdicts`` render these records and decide nothing of their own."""

from __future__ import annotations

from hwbackends._base.record import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, Literal

    from hwbackends._base.protocol import Backend, DeviceSupport, Probe
    from hwbackends._machine.host import Host
    from hwbackends._machine.values import HostDevice
    from hwbackends._selection.report import BackendStatus

    VerdictState = Literal["served", "install", "unusable", "no-backend"]

__all__ = [
    "Verdict",
    "backend_fix",
    "build_verdicts",
    "install_choice",
    "unready_warnings",
    "unusable_note",
    "verdict_groups",
    "with_fixes",
]

#: What each state means, in the words the reports use.
STATE_WORDS: Mapping[str, str] = {
    "served": "served here",
    "install": "needs an install",
    "unusable": "not usable here",
    "no-backend": "no backend",
}

#: The build of a device no torch build of its backend runs on.
NO_WHEEL = "no PyTorch wheel supports it"


@frozen
class Verdict:
    """One host device and what can run it."""

    position: int
    """Its index in the host's devices (``Host.devices``, physical order)."""
    label: str
    """The device in words: its backend's name for it, else the host's, else its PCI id."""
    pci_bus_id: str | None
    """Its PCI address, or None when it has none."""
    vendor: str
    """The host-device vendor key (``nvidia``, ``amd``, ``pci_8086``...)."""
    backend: str | None
    """The backend that serves it or would serve it; None when no installed backend claims it
    (a plugin that is not installed, broken or disabled, or a function that is no
    accelerator)."""
    state: VerdictState
    """``"served"`` (its backend is ready here), ``"install"`` (its backend can serve it once
    something is installed: the fix), ``"unusable"`` (its backend can never serve it here: no
    torch build runs on it) or ``"no-backend"``."""
    reason: str
    """Why, in one sentence (the backend's own words where it gave them)."""
    fix: str | None = None
    """The one fix (a command to run), or None: nothing to fix, or nothing that would help."""
    build: str | None = None
    """The torch build it needs in words: ``"torch from https://download.pytorch.org/whl/
    cu126"``, the backend's own build, or ``"no PyTorch wheel supports it"``; None without a
    backend."""
    torch_index: str | None = None
    """The PyTorch wheel index that has kernels for it, when its backend says so."""
    torch_pin: str | None = None
    """The torch release line to take from that index (``"2.11"``), when not the newest."""
    last_release: str | None = None
    """For a device no wheel supports: the last torch release with kernels for it, if known."""

    @property
    def servable(self) -> bool:
        """Whether its backend serves it here or can once the fix is applied."""
        return self.state in ("served", "install")

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON values."""
        return {
            "position": self.position,
            "label": self.label,
            "pci_bus_id": self.pci_bus_id,
            "vendor": self.vendor,
            "backend": self.backend,
            "state": self.state,
            "reason": self.reason,
            "fix": self.fix,
            "build": self.build,
            "torch_index": self.torch_index,
            "torch_pin": self.torch_pin,
            "last_release": self.last_release,
        }


# -- building ------------------------------------------------------------------------------


def build_verdicts(
    host: Host,
    statuses: Sequence[BackendStatus],
    load: Callable[[str], Backend | None],
    chosen: str,
    timeout: float | None,
    names: Mapping[str, str] | None = None,
) -> tuple[tuple[Verdict, ...], list[str]]:
    """The verdict of every host device, and the plugin failures met on the way (warnings).

    :param statuses: every candidate's status (``SelectionReport.candidates``).
    :param load: the backend instance of a loaded candidate by name, or None.
    :param chosen: the chosen backend's name (it claims a shared device first).
    :param timeout: the plugin time limit of each call, in seconds (None: the default).
    :param names: PCI address -> the name the chosen backend gives a device it shows.
    """
    problems: list[str] = []
    claims = _claims(host, statuses, load, chosen, timeout, problems)
    out = []
    for i, d in enumerate(host.devices):
        claim = claims.get(i)
        if claim is None:
            out.append(_unclaimed(i, d, host, statuses))
        else:
            status, support = claim
            named = (names or {}).get(d.pci_bus_id or "")
            out.append(_claimed(i, d, host, status, support, named))
    return tuple(out), problems


def _claims(
    host: Host,
    statuses: Sequence[BackendStatus],
    load: Callable[[str], Backend | None],
    chosen: str,
    timeout: float | None,
    problems: list[str],
) -> dict[int, tuple[BackendStatus, DeviceSupport | None]]:
    """Host position -> the backend that claims the device (the chosen one first, then those
    whose probe found hardware) and its per-device facts, if it gives them."""
    order = sorted(
        (s for s in statuses if s.state in ("selected", "available", "unavailable") and s.vendor),
        key=lambda s: (s.name != chosen, not (s.probe and s.probe.hardware_present), s.name),
    )
    claims: dict[int, tuple[BackendStatus, DeviceSupport | None]] = {}
    for s in order:
        positions = [i for i, d in enumerate(host.devices) if d.vendor == s.vendor]
        if not positions or all(i in claims for i in positions):
            continue
        backend = load(s.name)
        if backend is None:
            continue
        own = _own(backend, s.name, host, timeout, problems)
        facts = _support(backend, s.name, host, timeout, problems)
        by_bus = {f.pci_bus_id: f for f in facts if f.pci_bus_id}
        for i in positions:
            d = host.devices[i]
            if i in claims or not _owns(d, own):
                continue
            fact = by_bus.get(d.pci_bus_id or "")
            if fact is None and not d.pci_bus_id and own is not None and len(facts) == len(own):
                fact = next((f for f, o in zip(facts, own, strict=True) if o == d), None)
            claims[i] = (s, fact)
    return claims


def _owns(d: HostDevice, own: Sequence[HostDevice] | None) -> bool:
    """Whether ``d`` is among a backend's host devices (by PCI address, which a backend's
    enriched copy keeps; a device without one by equality); None: it has no such hook."""
    if own is None:
        return True
    if d.pci_bus_id:
        return any(o.pci_bus_id == d.pci_bus_id for o in own)
    return d in own


def _own(
    backend: Backend, name: str, host: Host, timeout: float | None, problems: list[str]
) -> tuple[HostDevice, ...] | None:
    """The backend's ``host_devices(host)`` under the guard; None when it has no such hook
    (then every device of its vendor is its own) or the call failed (a warning)."""
    from hwbackends._discovery.loading import Broken, guarded

    method = getattr(backend, "host_devices", None)
    if method is None:
        return None
    try:
        got = guarded(f"{name}.host_devices()", lambda: tuple(method(host)), timeout=timeout,
                      owner=name)  # fmt: skip
    except Broken as exc:
        problems.append(f"{name}: host_devices() failed ({exc.reason}); its vendor's devices are "
                        "all taken to be its own. Fix: update or uninstall the plugin")  # fmt: skip
        return None
    return got


def _support(
    backend: Backend, name: str, host: Host, timeout: float | None, problems: list[str]
) -> tuple[DeviceSupport, ...]:
    """The backend's optional ``device_support(host)``, each record checked; empty without
    the hook or when it fails (a warning: the verdicts then come from the probe alone)."""
    from hwbackends._base.guard import ResultError
    from hwbackends._base.protocol import DeviceSupport, checked
    from hwbackends._discovery.loading import Broken, guarded

    method = getattr(backend, "device_support", None)
    if method is None:
        return ()
    what = f"{name}.device_support()"

    def run() -> tuple[DeviceSupport, ...]:
        got = method(host)
        if not isinstance(got, (tuple, list)):
            raise ResultError(f"{what} returned {type(got).__name__}, expected a tuple of "
                              "DeviceSupport")  # fmt: skip
        return tuple(checked(x, DeviceSupport, what) for x in got)

    try:
        return guarded(what, run, timeout=timeout, owner=name)
    except Broken as exc:
        problems.append(f"{name}: {what} failed ({exc.reason}); its devices' verdicts come from "
                        "its probe alone. Fix: update or uninstall the plugin")  # fmt: skip
        return ()


def _index_in(hint: str | None) -> str | None:
    """The wheel index a probe's fix installs torch from (its ``--index-url``, which replaces
    PyPI), if it names one; an ``--extra-index-url`` is a vendor's repository beside PyPI, which
    the Install line leaves to the backend's own step."""
    import re

    m = re.search(r"--index-url[ =](\S+)", hint or "")
    return m.group(1).rstrip("):;,.'\"") if m else None


def _claimed(
    i: int,
    d: HostDevice,
    host: Host,
    s: BackendStatus,
    fact: DeviceSupport | None,
    named: str | None = None,
) -> Verdict:
    """Decides the verdict of a device an installed backend claims: from its per-device fact
    where it gave one, else from its probe."""
    from hwbackends._base.record import replace

    probe: Probe | None = s.probe
    label = fact.label if fact is not None else (named or _label(d))
    reason = probe.reason if probe is not None else s.reason
    base = Verdict(i, label, d.pci_bus_id, d.vendor, s.name, "unusable", reason)
    if fact is not None and fact.supported is False:
        build = NO_WHEEL + (f" (the last release with kernels for it: torch {fact.last_release})"
                            if fact.last_release else "")  # fmt: skip
        return replace(base, reason=fact.reason, fix=fact.fix, build=build,
                       last_release=fact.last_release)  # fmt: skip
    if probe is None:
        return base
    if probe.available:
        torch = host.torch.version if host.torch is not None else None
        return replace(base, state="served",
                       build=f"the installed torch {torch}" if torch else None)  # fmt: skip
    if not probe.hardware_present:
        return base  # its backend does not count it (an iGPU outside the vendor's targets)
    if not probe.hint:  # present, not ready, no fix named: its own build, from its own source
        return replace(base, state="install", build=f"the {s.name} backend's torch build")
    # a backend that gives no per-device facts: the index its fix installs from
    index = _index_in(probe.hint) if fact is None else fact.torch_index
    pin = fact.torch_pin if fact is not None else None
    build = f"torch from {index}" if index else f"the {s.name} backend's torch build"
    if fact is not None and fact.supported is None:
        build += f" (unknown whether it has kernels for it: {fact.reason})"
    if pin:
        build = f"torch {pin} from {index}" if index else f"torch {pin}"
    return replace(base, state="install", fix=probe.hint, build=build, torch_index=index,
                   torch_pin=pin)  # fmt: skip


def _label(d: HostDevice) -> str:
    return d.name or (f"PCI device {d.pci_device_id}" if d.pci_device_id else "unnamed device")


def _unclaimed(i: int, d: HostDevice, host: Host, statuses: Sequence[BackendStatus]) -> Verdict:
    """Decides the verdict of a device no installed backend claims: a function that is no
    accelerator, one for which no plugin exists, or one whose plugin is missing, broken or
    disabled (the same words as the report's warning)."""
    from hwbackends._selection.report import _known_unserved
    from hwbackends._selection.report import _unclaimed as _unclaimed_line

    def verdict(reason: str, fix: str | None = None) -> Verdict:
        return Verdict(i, _label(d), d.pci_bus_id, d.vendor, None, "no-backend", reason, fix)

    kind = d.extra.get("known_function")
    if kind == "no-plugin":
        return verdict("no hwbackends plugin exists for this hardware, so no backend can use it")
    if kind:
        return verdict("not an accelerator: no backend computes on it")
    # a vendor an installed backend serves: this function is not one of its devices
    for s in statuses:
        if s.vendor == d.vendor and s.state in ("selected", "available", "unavailable"):
            return verdict(f"not used by the {s.name} backend (not one of its devices: a "
                           "bridge, a BMC's display, another function)")  # fmt: skip
    from hwbackends._discovery.catalog import known_for

    k = known_for(d.vendor)
    by_name = {s.name: s for s in statuses}
    line = (
        _unclaimed_line(d, [d]) if k is None
        else _known_unserved(k, [d], by_name.get(k.backend), by_name, [])
    )  # fmt: skip
    line = line or f"{_label(d)} is not served by an installed backend"
    why, _, fix = line.partition(" Fix: ")
    return verdict(why.rstrip(". "), fix or None)


# -- rendering helpers the surfaces share ---------------------------------------------------


def backend_fix(name: str, probe: Probe | None, verdicts: Sequence[Verdict]) -> str | None:
    """The fix a backend's line and warning show: its probe's where one of its devices can be
    served once it is applied, else the devices' own fix (none: nothing would help)."""
    mine = [v for v in verdicts if v.backend == name]
    if probe is None or not probe.hint:
        return None
    if not mine or any(v.state == "install" for v in mine):
        return probe.hint
    fixes = list(dict.fromkeys(v.fix for v in mine if v.fix))
    return "; ".join(fixes) or None


def unusable_note(name: str, verdicts: Sequence[Verdict]) -> str | None:
    """Why none of a backend's devices can be served, when none can (its fix is then not
    shown: it would install a build that does not run them)."""
    mine = [v for v in verdicts if v.backend == name]
    if not mine or any(v.servable for v in mine):
        return None
    return "; ".join(dict.fromkeys(v.reason for v in mine))


def with_fixes(
    statuses: Mapping[str, BackendStatus], verdicts: Sequence[Verdict]
) -> dict[str, BackendStatus]:
    """Each probed status with the fix its devices' verdicts allow (``BackendStatus.fix``)."""
    from hwbackends._base.record import replace

    return {
        name: replace(s, fix=backend_fix(name, s.probe, verdicts)) if s.probe is not None else s
        for name, s in statuses.items()
    }


def unready_warnings(probes: Sequence[Probe], verdicts: Sequence[Verdict]) -> list[str]:
    """A warning for each backend whose hardware is present but not ready: its reason, then the
    fix its devices' verdicts allow, or why no build would run them."""
    out = []
    for p in probes:
        fix = backend_fix(p.backend, p, verdicts)
        note = None if fix else unusable_note(p.backend, verdicts)
        tail = f" Fix: {fix}" if fix else (f" No fix: {note}" if note else "")
        out.append(f"{p.backend}: {p.reason}.{tail}")
    return out


def install_choice(verdicts: Sequence[Verdict], chosen: str) -> tuple[str | None, Verdict | None]:
    """The backend the Install line is for and the verdict whose build it installs: the chosen
    backend when it serves a device here, else the first backend (in device order) that
    can serve one once installed; ``(None, None)``: the CPU (no device can be served)."""
    for v in verdicts:
        if v.backend == chosen and v.servable and chosen != "cpu":
            return chosen, _with_index(verdicts, chosen, v)
    for v in verdicts:
        if v.backend is not None and v.state == "install":
            return v.backend, _with_index(verdicts, v.backend, v)
    return None, None


def _with_index(verdicts: Sequence[Verdict], name: str, first: Verdict) -> Verdict:
    """Of a backend's servable devices, the first whose verdict names a wheel index."""
    return next((v for v in verdicts if v.backend == name and v.servable and v.torch_index), first)


def verdict_groups(verdicts: Sequence[Verdict]) -> list[tuple[Verdict, int]]:
    """Identical verdicts (label, vendor, backend, state, build, reason, fix) as one row each,
    with their count, in device order: for display."""
    groups: dict[tuple[object, ...], list[Verdict]] = {}
    for v in verdicts:
        key = (v.label, v.vendor, v.backend, v.state, v.build, v.reason, v.fix)
        groups.setdefault(key, []).append(v)
    return [(vs[0], len(vs)) for vs in groups.values()]
