"""One selection's steps after probing: the first ready backend that shows this process a
device, the rule that decided and its reason, and what the selection read
(``Registry.select`` runs them in order over one ``_Round``)."""

from __future__ import annotations

import time

from hwbackends._base.errors import BackendUnavailableError
from hwbackends._base.settings import SETTINGS_VARS
from hwbackends._discovery.loading import Broken
from hwbackends._selection.calls import _devices
from hwbackends._selection.order import (
    Candidate,
    status_of,
    visibility_of,
    visible_vars,
)
from hwbackends._selection.report import BackendStatus, hidden_backend, unusable_why

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from hwbackends._base.protocol import Backend, Device, Probe
    from hwbackends._base.settings import Settings
    from hwbackends._discovery.scan import EntryPointSpec
    from hwbackends._machine.host import Host


def _builtin(spec: EntryPointSpec) -> bool:
    return spec.value.startswith("hwbackends._") and spec.dist == "hwbackends"


class _Round:
    """One selection's working state, shared by its steps (``Registry.select``)."""

    def __init__(self, env: Mapping[str, str], host: Host, settings: Settings, ms: float) -> None:
        self.env, self.host, self.settings = env, host, settings
        self.timings: dict[str, float] = {"discovery": ms}
        self.warnings: list[str] = []
        self.by_name: dict[str, list[EntryPointSpec]] = {}
        self.pref: tuple[str, ...] = ()
        self.statuses: dict[str, BackendStatus] = {}
        self.impostors: list[BackendStatus] = []
        self.ready: list[tuple[Backend, Probe, Candidate]] = []
        self.hardware_unready: list[Probe] = []
        self.skipped: dict[str, EntryPointSpec] = {}  # not probed: HWBACKENDS_BACKEND names others
        self.devices: list[Device] = []
        self.vis_report: Any = None
        self.hidden: list[dict[str, Any]] = []  # backends whose every device visibility hides
        self.passed_over: list[str] = []  # ready backends that could not be used after all


def step_aside(w: _Round, probed: list[Candidate]) -> None:
    """A backend that claims the installed torch build (``torch_builds``: Iluvatar's
    ``2.4.1+corex.4.3.0``) owns torch's device of its ``device_type`` in this process, so
    every other probed backend of that device type steps aside: not ready whatever its probe
    found (``cuda:0`` is the vendor's card there, not an NVIDIA GPU), with no fix that
    would replace the vendor's torch, its row naming the claimant (``replaced_by``) and a
    warning naming both when it found hardware. A claimant that is broken or disabled claims
    nothing (``HWBACKENDS_DISABLE=<claimant>`` ends the claim)."""
    from hwbackends._base.record import replace

    claimants = [c for c in probed if c.claim and c.name in w.statuses
                 and w.statuses[c.name].state in ("available", "unavailable")]  # fmt: skip
    for c in probed:
        owner = next((o for o in claimants if o.device_type == c.device_type), None)
        st = w.statuses.get(c.name)
        if owner is None or c.claim or _builtin(c.spec) or st is None or st.probe is None:
            continue
        p = st.probe
        why = (
            f"{c.name} steps aside: {owner.claim} is claimed by {owner.name} "
            f"({owner.spec.dist}), so torch's '{c.device_type}' device is {owner.name}'s in "
            "this process"
        )
        seen = f" ({p.evidence[0]})" if p.hardware_present and p.evidence else ""
        probe = replace(
            p,
            software_ready=False,
            reason=why + (f"; its hardware{seen} is not used here" if p.hardware_present else ""),
            hint=None,  # its own fix would install another torch over the vendor's
        )
        w.statuses[c.name] = status_of(
            c, "unavailable", probe=probe, probe_ms=st.probe_ms, replaced_by=owner.spec.dist
        )
        w.ready = [r for r in w.ready if r[2] is not c]
        w.hardware_unready = [q for q in w.hardware_unready if q.backend != c.name]
        if p.hardware_present:
            w.warnings.append(
                f"{why}: the {c.name} hardware{seen} is not used here (a Python environment "
                f"with a stock torch build, not this one, can use it); "
                f"HWBACKENDS_DISABLE={owner.name} ends the claim if this torch is not "
                f"{owner.name}'s"
            )


def _first_usable(w: _Round) -> Candidate:
    """The first ready backend that shows this process a device (cpu always does), its
    devices and visibility report kept in ``w``; else the error that says why none is."""
    limit, env, host = w.settings.timeout, w.env, w.host
    for backend, _probe_result, c in w.ready:
        t0 = time.perf_counter()
        try:
            # The core reads the visibility variables with the backend's declared rule
            # first: a value the runtime would reject is the user's error (raised as
            # is), while a VisibilityError from the plugin's own devices() is its fault.
            own = 0.0 if _builtin(c.spec) else limit
            w.vis_report = visibility_of(backend, c, env, host, own)
            w.devices = _devices(backend, c.name, host, env, own)
        except Broken as exc:
            w.statuses[c.name] = status_of(c, "broken", error=exc.reason, traceback=exc.tb)
            w.passed_over.append(c.name)
            continue
        finally:
            w.timings[f"devices:{c.name}"] = (time.perf_counter() - t0) * 1000
        if w.devices or c.name == "cpu":
            return c
        _hidden_from_process(w, backend, c)
    raise _none_usable(w)


def _hidden_from_process(w: _Round, backend: Backend, c: Candidate) -> None:
    """A ready backend that shows this process no device: its row and the warning say why
    (the visibility variables hide every device, and the fix, when they do)."""
    env, host, vis_report = w.env, w.host, w.vis_report
    old = w.statuses[c.name]
    shown = visible_vars(env, vis_report)
    gone = shown and hidden_backend(c.name, backend, env, host, vis_report, w.settings.timeout)
    if gone:  # the engine's reasons and the fix go with the report
        w.hidden.append(gone)
    why, warning = unusable_why(c.name, old.reason, shown, gone or None)
    w.statuses[c.name] = status_of(
        c, "unavailable", probe=old.probe, probe_ms=old.probe_ms, error=why
    )
    w.warnings.append(warning)
    if vis_report is not None and not gone:
        w.warnings.extend(vis_report[0].warnings)
    w.passed_over.append(c.name)


def _none_usable(w: _Round) -> BackendUnavailableError:
    pref, statuses, settings = w.pref, w.statuses, w.settings
    if pref:
        reasons = "; ".join(f"{n} is {statuses[n].state}: {statuses[n].reason}" for n in pref)
        return BackendUnavailableError(
            f"HWBACKENDS_BACKEND={settings.forced} but "
            + (f"that backend is {reasons.partition(' is ')[2]}" if len(pref) == 1 else reasons),
            "a forced backend that shows this process at least one device",
            "change the visibility variables, or unset HWBACKENDS_BACKEND",
        )
    cpu = statuses.get("cpu")
    if cpu is not None and cpu.state == "disabled":
        fix = "remove cpu from HWBACKENDS_DISABLE"
    else:
        fix = (
            "this is a bug in hwbackends or its installation: reinstall hwbackends and "
            "report the reason above"
        )
    return BackendUnavailableError(
        "no backend is available, not even cpu"
        + (f" (cpu is {cpu.state}: {cpu.reason})" if cpu is not None else ""),
        "at least the built-in cpu backend",
        fix,
    )


def _rule(w: _Round, chosen: Candidate, unserved: list[str]) -> tuple[str, str]:
    """The rule that decided, and the reason the report gives."""
    settings, statuses = w.settings, w.statuses
    others = [r[2].name for r in w.ready if r[2].name != chosen.name]
    listed = settings.preferred
    if len(listed) == 1:
        return "forced", f"HWBACKENDS_BACKEND={settings.forced} forces it"
    if w.pref:
        before = listed[: listed.index(chosen.name)] if chosen.name in listed else listed
        reason = f"the first usable backend in HWBACKENDS_BACKEND={settings.forced}"
        if before:
            states = (f"{n}: {statuses[n].state if n in statuses else 'not installed'}"
                      for n in before)  # fmt: skip
            reason += " (" + "; ".join(states) + ")"
        return "preferred", reason
    if chosen.name == "cpu" and (w.hardware_unready or w.passed_over or unserved):
        reason = "no accelerator backend is ready; using the CPU"
        if w.passed_over:
            reason += f" ({', '.join(w.passed_over)} could not be used: see its reason)"
        return "cpu-fallback", reason
    if others:
        return "priority", (
            f"highest priority ({chosen.priority}) among the available backends "
            f"({', '.join([chosen.name, *others])}); ties break by name"
        )
    return "only-available", "the only available backend"


def _what_was_read(w: _Round) -> tuple[dict[str, str | None], Any]:
    """The variables the selection read, with their values, and the chosen backend's
    visibility report (its warnings added to ``w``)."""
    env = w.env
    env_read: dict[str, str | None] = {k: env.get(k) for k in SETTINGS_VARS}
    vis = None
    if w.vis_report is not None:
        rep, declared = w.vis_report
        for k in declared:
            env_read[k] = env.get(k)
        # cpu declares no variable: its "every device is visible" would contradict the
        # hidden backend's reasons, which are the answer
        vis = rep.to_dict() if declared or not w.hidden else None
        w.warnings.extend(wr for wr in rep.warnings if not w.hidden or declared)
    for gone in w.hidden:
        for k in gone["variables"]:
            env_read[k] = env.get(k)
    return env_read, vis
