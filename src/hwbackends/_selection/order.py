"""The candidates of a selection and the orders among them: the user's (``HWBACKENDS_BACKEND``
as a list of preferences), a plugin's ``replaces`` of another backend name, and the warning
when two available backends claim the same physical devices; each backend's declared
visibility variables, and its names for the machine's devices whatever this process sees."""

from __future__ import annotations

from hwbackends._base.errors import (
    BackendNotFoundError,
    BackendUnavailableError,
    VisibilityError,
)
from hwbackends._base.guard import plain
from hwbackends._base.protocol import Probe, checked
from hwbackends._base.record import mutable
from hwbackends._base.settings import Settings, close_matches
from hwbackends._discovery.loading import Broken, Meta, Plugins, guarded
from hwbackends._selection.report import BackendStatus

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, Literal

    from hwbackends._base.protocol import Backend, Device
    from hwbackends._discovery.scan import EntryPointSpec
    from hwbackends._machine.host import Host
    from hwbackends._selection.report import SelectionReport

    State = Literal["selected", "available", "unavailable", "broken", "disabled", "not-probed"]


def probe_of(backend: Backend, meta: Meta, host: Host, timeout: float | None) -> Probe:
    what = f"{meta.name}.probe()"
    p: Probe = guarded(
        what, lambda: checked(backend.probe(host), Probe, what), timeout=timeout, owner=meta.name
    )
    if p.backend != meta.name:
        raise Broken(f"{what} returned a Probe for {p.backend!r}")
    systems = getattr(backend, "systems", None)  # the operating systems its runtime ships for
    if p.available and isinstance(systems, tuple) and systems and host.system not in systems:
        from hwbackends._base.record import replace

        return replace(
            p,
            software_ready=False,
            reason=f"{meta.name} hardware found"
            + (f" ({p.evidence[0]})" if p.evidence else "")
            + f", but its runtime has no build for {host.system} (it runs on "
            f"{', '.join(systems)})",
            hint=None,
        )
    return p


@mutable
class Candidate:
    spec: EntryPointSpec
    backend: Backend | None = None
    meta: Meta | None = None
    replaces: tuple[str, ...] = ()  # the distributions this one replaces
    claim: str | None = None  # how the installed torch is a build it claims (torch_builds)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def priority(self) -> int:
        return self.meta.priority if self.meta is not None else 0

    @property
    def device_type(self) -> str:
        return self.meta.device_type if self.meta is not None else self.spec.name


def status_of(c: Candidate, state: State, **kw: Any) -> BackendStatus:
    m = c.meta
    if c.replaces:
        kw.setdefault("replaces", ", ".join(c.replaces))
    return BackendStatus(
        name=c.spec.name,
        origin="builtin" if c.spec.value.startswith("hwbackends._") else c.spec.dist,
        version=c.spec.version,
        target=c.spec.value,
        state=state,
        priority=m.priority if m is not None else None,
        device_type=m.device_type if m is not None else None,
        vendor=m.vendor if m is not None else None,
        **kw,
    )


def torch_claim(backend: Backend, host: Host) -> str | None:
    """How the installed torch is a build ``backend`` claims (its ``torch_builds`` /
    ``torch_distributions``), or None; plugin code: call it under the guard."""
    from hwbackends._base.protocol import claimed_torch

    builds, dists = (getattr(backend, a, ()) for a in ("torch_builds", "torch_distributions"))
    if not builds and not dists:
        return None  # the common case: nothing declared, nothing to read
    claim = claimed_torch(
        tuple(plain(x) for x in builds if isinstance(x, str)) if isinstance(builds, tuple) else (),
        tuple(plain(x) for x in dists if isinstance(x, str)) if isinstance(dists, tuple) else (),
        host.torch.version if host.torch is not None else None,
        host.packages,
    )
    return None if claim is None else plain(claim)


def replaced_by_name(
    plugins: Plugins,
    to_probe: list[Candidate],
    statuses: dict[str, BackendStatus],
    limit: float | None,
) -> list[Candidate]:
    """Candidates left after each loaded plugin's ``replaces = "<other name>"``: the
    replaced backend (from another distribution, never the built-in) is set aside."""
    by_name = {c.name: c for c in to_probe}
    gone: set[str] = set()
    for c in to_probe:
        try:
            target = plugins.loaded(c.spec, limit)[1].replaces
        except Broken:
            continue  # its probe reports it
        old = by_name.get(target) if target and target != c.name else None
        if old is None or old.name in gone or c.name in gone:
            continue
        if old.spec.value.startswith("hwbackends._") or old.spec.dist == c.spec.dist:
            continue
        gone.add(old.name)
        c.replaces += (old.spec.dist,)
        statuses[old.name] = status_of(
            old,
            "disabled",
            error=f"replaced by {c.spec.dist} (it declares replaces = {target!r})",
            replaced_by=c.spec.dist,
        )
    return [c for c in to_probe if c.name not in gone]


def none_preferred(
    plugins: Plugins,
    pref: tuple[str, ...],
    settings: Settings,
    statuses: Mapping[str, BackendStatus],
    ready: list[tuple[Backend, Probe, Candidate]],
    skipped: Mapping[str, EntryPointSpec],
    host: Host,
) -> BackendUnavailableError:
    """The error when no backend HWBACKENDS_BACKEND names is available: the others were
    skipped for it; probed now, the error can name every backend that would work."""
    usable = {c.name for _, _, c in ready}
    for name, spec in skipped.items():
        try:
            b, meta = plugins.loaded(spec, settings.timeout)
            if probe_of(b, meta, host, settings.timeout).available:
                usable.add(name)
        except Broken:
            pass  # a broken plugin is not an alternative to offer
    hints = [p.hint for n in pref if (p := statuses[n].probe) is not None and p.hint]
    if len(pref) == 1:
        what = f"that backend is {statuses[pref[0]].state}: {statuses[pref[0]].reason}"
    else:
        what = "; ".join(f"{n} is {statuses[n].state}: {statuses[n].reason}" for n in pref)
    return BackendUnavailableError(
        f"HWBACKENDS_BACKEND={settings.forced} but {what}",
        f"an available backend ({', '.join(sorted(usable)) or 'none'})",
        hints[0] if hints else "fix the reason above, or unset HWBACKENDS_BACKEND",
    )


def _bound(fn: Callable[[Host], Any], host: Host) -> Callable[[], Any]:
    return lambda: fn(host)  # functools.partial: 1 ms of imports


def shared_devices(
    ready: list[tuple[Backend, Probe, Candidate]],
    host: Host,
    limit: float | None,
    pref: tuple[str, ...],
    settings: Settings,
) -> list[str]:
    """A warning for each two available backends that claim the same physical devices (the
    same PCI bus ids): which one is used, and the setting that decides."""
    claims: list[tuple[Candidate, set[str]]] = []
    if sum(1 for _b, _p, c in ready if c.name != "cpu") < 2:
        return []  # the common case: no second accelerator backend, no plugin call
    for backend, _p, c in ready:
        own = getattr(backend, "host_devices", None)
        if c.name == "cpu" or not callable(own):
            continue
        try:
            devs = guarded(
                f"{c.name}.host_devices()", _bound(own, host), timeout=limit, owner=c.name
            )
            buses = {d.pci_bus_id.lower() for d in devs if getattr(d, "pci_bus_id", None)}
        except (Broken, AttributeError, TypeError):
            continue  # its own faults are reported where it is used
        if buses:
            claims.append((c, buses))
    out: list[str] = []
    for i, (a, abus) in enumerate(claims):
        for b, bbus in claims[i + 1 :]:
            both = sorted(abus & bbus)
            if not both or (a.name in pref and b.name in pref):
                continue  # the user's order already decides between them
            first, second = sorted((a, b), key=lambda c: (-c.priority, c.name))
            if first.name not in pref and second.name in pref:
                first, second = second, first
            why = (
                f"HWBACKENDS_BACKEND={settings.forced} lists it"
                if first.name in pref
                else f"priority {first.priority} vs {second.priority}"
                + (", a tie broken by name" if first.priority == second.priority else "")
            )
            shown = ", ".join(both[:4]) + (f" and {len(both) - 4} more" if len(both) > 4 else "")
            out.append(
                f"{first.name} and {second.name} both claim the same devices ({shown}); "
                f"{first.name} is used ({why}). HWBACKENDS_BACKEND decides: set "
                f"HWBACKENDS_BACKEND={second.name},{first.name} to prefer {second.name}, or "
                f"HWBACKENDS_DISABLE={second.name} to keep {first.name} alone"
            )
    return out


def preferred(settings: Settings, by_name: Mapping[str, list[EntryPointSpec]]) -> tuple[str, ...]:
    """The installed names of HWBACKENDS_BACKEND, in its order. A name that is not installed
    is refused when it is the only one, or a typo; a known plugin missing on this machine is
    passed over (a cluster-wide setting names plugins some machines lack)."""
    from hwbackends._discovery.catalog import KNOWN_PLUGINS, not_installed_fix

    known = {k.backend for k in KNOWN_PLUGINS}
    out = tuple(n for n in settings.preferred if n in by_name)
    for name in settings.preferred:
        if name in by_name or (out and name in known):
            continue
        listing = (
            "names no installed backend"
            if len(settings.preferred) == 1
            else (f"lists {name!r}, which is no installed backend")
        )
        raise BackendNotFoundError(
            f"HWBACKENDS_BACKEND={settings.forced!r} {listing}{close_matches(name, by_name)}",
            f"one of {', '.join(sorted(by_name))}"
            + (
                ", or a comma list of them in order of preference"
                if len(settings.preferred) > 1
                else ""
            ),
            not_installed_fix(name, by_name, "unset HWBACKENDS_BACKEND")
            if len(settings.preferred) == 1
            else not_installed_fix(name, by_name, f"remove {name!r} from HWBACKENDS_BACKEND"),
        )
    return out


def declared_variables(backend: Backend, name: str, limit: float | None) -> tuple[str, ...]:
    """The visibility variables a backend declares (its rule's), read under the guard.

    :raises Broken: when the declaration is not a rule, or reading it fails.
    """
    from hwbackends._base.guard import plain, watch
    from hwbackends._visibility.explain import rule_of

    rule = guarded(f"{name}.visibility", lambda: rule_of(backend), timeout=limit, owner=name)
    names = tuple(plain(v) for v in rule.variables if isinstance(v, str))
    watch(names)  # the guard reports a plugin call's change of them from now on
    return names


def visibility_of(
    backend: Backend, c: Candidate, env: Mapping[str, str], host: Host, limit: float | None
) -> tuple[Any, tuple[str, ...]]:
    """The backend's visibility report and declared variables, read by the core.

    A declaration that is not a rule, or a rule that fails, is the plugin's fault
    (``Broken``); a ``VisibilityError`` from reading the values is the user's, raised as is.
    """
    from hwbackends._visibility.explain import explain_visibility

    variables = declared_variables(backend, c.name, limit)
    rep = guarded(
        f"the {c.name} visibility rule",
        lambda: explain_visibility(backend, env, host),
        passthrough=(VisibilityError,),
        timeout=limit,
        owner=c.name,
    )
    return rep, variables


def visible_vars(env: Mapping[str, str], vis_report: tuple[Any, tuple[str, ...]] | None) -> str:
    keys = [k for k in vis_report[1] if k in env] if vis_report is not None else []
    return ", ".join(f"{k}={env[k]!r}" for k in keys)


def device_names(
    report: SelectionReport,
    env: Mapping[str, str],
    load: Callable[[str], Any],
    timeout: float | None,
) -> dict[str, Device]:
    """PCI bus id -> the ``Device`` its backend makes of it with that backend's visibility
    variables unset: the machine's devices as their backends name them, whatever this
    process sees. A device hidden by ``CUDA_VISIBLE_DEVICES``, or of a backend whose
    software is missing, is still an H100; the hardware summary describes the machine.

    Every probed backend: the chosen one first (its names are those of the device rows),
    then those whose probe found hardware, each by name (a backend that does not support a
    device, an integrated GPU say, still names it); one that is broken, disabled or fails
    here is left out, and its devices keep the host's own names.

    :param report: the selection whose candidates name the backends.
    :param env: the environment of the selection; each backend's own visibility variables
        are dropped from it.
    :param load: the backend instance of a candidate, by name.
    :param timeout: the plugin time limit of each call, in seconds (None: the default).
    """
    from hwbackends._base.errors import HwBackendsError
    from hwbackends._selection.calls import _devices

    names = {d.pci_bus_id: d for d in report.devices if d.pci_bus_id}
    # only the vendors of devices this process does not see cost a plugin call
    vendors = {d.vendor for d in report.host.devices if d.pci_bus_id not in names}
    order = sorted(
        report.candidates,
        key=lambda c: (c.name != report.chosen, not (c.probe and c.probe.hardware_present), c.name),
    )
    for c in order:
        if c.state in ("broken", "disabled", "not-probed") or c.vendor not in (None, *vendors):
            continue
        try:
            backend = load(c.name)
            drop = declared_variables(backend, c.name, timeout)
            bare = {k: v for k, v in env.items() if k not in drop}
            devices = _devices(backend, c.name, report.host, bare, timeout)
        except (Broken, HwBackendsError):
            continue
        for d in devices:
            if d.pci_bus_id and d.pci_bus_id not in names:
                names[d.pci_bus_id] = d
    return names
