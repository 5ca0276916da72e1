"""Probing and choosing a backend, with the report that explains it; the process-wide entry
points (``current``, ``explain``, ``get``) over the default registry.

Every plugin runs behind a guard: an import that fails, a class that does not satisfy the
protocol, a probe that raises or returns the wrong type, a name claimed twice: each is
recorded as a broken ``BackendStatus`` and skipped. Strict mode (``HWBACKENDS_STRICT=1``)
turns any of them into a ``PluginError`` after the report is made.
"""

from __future__ import annotations

import _thread
import os
import time
from functools import partial

from hwbackends._base.errors import (
    BackendNotFoundError,
    BackendUnavailableError,
    PluginError,
)
from hwbackends._base.guard import (
    call_many,
    refuse_nested,
    take_reports,
    working,
)
from hwbackends._base.protocol import Device, Probe
from hwbackends._base.settings import (
    SETTINGS_VARS,
    Settings,
    allowed,
    close_matches,
    disabled_reason,
    unknown_settings,
    warn_once,
)
from hwbackends._discovery import loading
from hwbackends._discovery.catalog import check_listed_names, not_installed_fix
from hwbackends._discovery.loading import (
    Broken,
    Meta,
    Plugins,
    clash_error,
    clash_message,
    default_plugins,
    resolve_claims,
    selecting,
)
from hwbackends._discovery.loading import (
    installed_backends as _installed_backends,
)
from hwbackends._machine.host import Host
from hwbackends._selection.calls import _devices
from hwbackends._selection.calls import plugin_call as plugin_call  # imported from here too
from hwbackends._selection.order import (
    Candidate,
    declared_variables,
    none_preferred,
    preferred,
    probe_of,
    replaced_by_name,
    shared_devices,
    status_of,
    visibility_of,
    visible_vars,
)
from hwbackends._selection.report import (
    BackendStatus,
    SelectionReport,
    _replace_state,
    _unserved_hardware,
    hidden_backend,
    unregistered_device,
    unusable_why,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Literal

    from hwbackends._base.protocol import Backend
    from hwbackends._discovery.scan import EntryPointSpec

    State = Literal["selected", "available", "unavailable", "broken", "disabled", "not-probed"]


__all__ = [
    "BackendStatus",
    "Registry",
    "SelectionReport",
    "Settings",
    "backends",
    "current",
    "explain",
    "get",
]


# -- the registry --------------------------------------------------------------------------


class Registry(Plugins):
    """The discovered backends of one search path. ``select`` makes a ``SelectionReport``."""

    def _load_and_probe(self, c: Candidate, host: Host) -> tuple[Backend, Meta, Probe, float]:
        """Plugin code for one candidate (run on a guard worker): its instance and identity,
        its probe, and how long both took. Returned, not stored: a call abandoned for hanging
        must not change the candidate later."""
        t0 = time.perf_counter()
        backend, meta = self.loaded(c.spec)
        if c.name in host.reader_errors:
            raise Broken(f"reading the machine: {host.reader_errors[c.name]}")
        probe = probe_of(backend, meta, host, None)
        return backend, meta, probe, (time.perf_counter() - t0) * 1000

    def get(self, name: str, settings: Settings | None = None) -> Backend:
        """A backend by name; of plugins claiming it, the one ``settings`` (default: the
        ``HWBACKENDS_*`` of ``os.environ``) and ``replaces`` pick, else a clash error."""
        key = name.strip().lower()
        specs = [s for s in self.specs if s.name == key]
        if not key:
            raise BackendNotFoundError(
                f"backend name {name!r} is empty",
                f"one of {', '.join(self.names())}",
                "pass a backend's name, or use hwbackends.current() for the selected one",
            )
        if not specs:
            raise BackendNotFoundError(
                f"no backend named {name!r} is installed{close_matches(key, self.names())}",
                f"one of {', '.join(self.names())}",
                not_installed_fix(key, self.names(), "pick an installed name"),
            )
        spec = specs[0]  # a plugin claiming a built-in name is reported; the built-in stands
        if len(specs) > 1 and not spec.value.startswith("hwbackends._"):
            settings = settings or Settings.from_env(os.environ)
            winner, _aside, clash = resolve_claims(self, specs, settings, settings.timeout)
            if winner is None and not clash:  # every claimant disabled: still a clash to name
                clash = specs
            if clash:
                what, fix = clash_message(key, clash)
                raise PluginError(what, fix=fix)
            assert winner is not None
            spec = winner
        try:
            return self.load(spec)
        except Broken as exc:
            raise PluginError(
                f"the {key} backend is broken: {exc.reason}",
                fix=f"reinstall or update {spec.dist}, or run `hwbackends plugins --check`",
            ) from None

    @selecting
    def select(
        self, env: Mapping[str, str], host: Host, settings: Settings | None = None
    ) -> SelectionReport:
        """Probe, choose and explain. ``settings`` default to the ``HWBACKENDS_*`` in ``env``."""
        if settings is None:
            settings = Settings.from_env(env)
        timings: dict[str, float] = {"discovery": self.discovery_ms}
        warnings: list[str] = []
        by_name: dict[str, list[EntryPointSpec]] = {}
        for s in self.specs:
            by_name.setdefault(s.name, []).append(s)

        pref = preferred(settings, by_name)
        said = check_listed_names(settings, by_name) + unknown_settings(env)
        warn_once(said)
        warnings.extend(said)

        statuses: dict[str, BackendStatus] = {}
        impostors: list[BackendStatus] = []
        ready: list[tuple[Backend, Probe, Candidate]] = []
        hardware_unready: list[Probe] = []
        limit = settings.timeout
        to_probe: list[Candidate] = []
        skipped: dict[str, EntryPointSpec] = {}  # not probed: HWBACKENDS_BACKEND names others
        for name in sorted(by_name):
            specs = by_name[name]
            if specs[0].value.startswith("hwbackends._"):
                c = Candidate(specs[0])
                if len(specs) > 1:
                    # The built-in keeps working; each impostor is reported on its own line.
                    conflict = _conflict(specs)
                    impostors.extend(
                        status_of(Candidate(s), "broken", error=conflict) for s in specs[1:]
                    )
                if not allowed(c.spec, settings):
                    statuses[name] = status_of(
                        c, "disabled", error=disabled_reason(c.spec, settings)
                    )
                    continue
            else:
                winner, aside, clash = resolve_claims(self, specs, settings, limit)
                for s, why, by in aside:
                    st = status_of(Candidate(s), "disabled", error=why, replaced_by=by)
                    if winner is None and not clash and name not in statuses:
                        statuses[name] = st  # every claimant disabled: the first is the row
                    else:
                        impostors.append(st)
                if clash:
                    statuses[name] = status_of(
                        Candidate(clash[0]), "broken", error=clash_error(name, clash)
                    )
                    impostors.extend(
                        status_of(Candidate(s), "broken", error=clash_error(name, clash))
                        for s in clash[1:]
                    )
                    continue
                if winner is None:
                    continue
                c = Candidate(winner)
                c.replaces = tuple(s.dist for s, _why, by in aside if by)
            if pref and name not in (*pref, "cpu"):
                skipped[name] = c.spec
                statuses[name] = status_of(
                    c, "not-probed", error=f"not probed: HWBACKENDS_BACKEND={settings.forced}"
                )
                continue
            to_probe.append(c)

        # Every plugin is loaded, then probed, on one worker each time: two thread hand-offs
        # for the lot, each call still with its own time limit (see guarded.call_many).
        # The built-in cpu is hwbackends' own code: never subject to the plugin time limit, so
        # a tiny HWBACKENDS_TIMEOUT or a loaded machine cannot leave a process with no backend.
        self.preload([c.spec for c in to_probe if not _builtin(c.spec)], limit)
        to_probe = replaced_by_name(self, to_probe, statuses, limit)
        builtin = [c for c in to_probe if _builtin(c.spec)]
        plugins = [c for c in to_probe if not _builtin(c.spec)]
        outcomes = call_many(
            [
                (f"{c.name}.probe()", partial(self._load_and_probe, c, host), c.name)
                for c in plugins
            ],
            timeout=limit,
        ) + call_many(
            [(f"{c.name}.probe()", partial(self._load_and_probe, c, host)) for c in builtin],
            timeout=0.0,
        )
        for c, (ok, value) in zip(plugins + builtin, outcomes, strict=True):
            name = c.name
            if not ok:
                got = self._loaded.get(id(c.spec))  # loaded but broken in its probe: say who
                if isinstance(got, tuple):
                    c.backend, c.meta = got
                statuses[name] = status_of(c, "broken", error=value.reason, traceback=value.tb)
                timings[f"probe:{name}"] = 0.0
                continue
            c.backend, c.meta, probe, ms = value
            timings[f"probe:{name}"] = ms
            state: State = "available" if probe.available else "unavailable"
            statuses[name] = status_of(c, state, probe=probe, probe_ms=ms)
            if probe.available:
                ready.append((c.backend, probe, c))
            elif probe.hardware_present:
                hardware_unready.append(probe)

        warnings.extend(shared_devices(ready, host, limit, pref, settings))
        if pref:
            if not any(statuses[n].state == "available" for n in pref):
                raise none_preferred(self, pref, settings, statuses, ready, skipped, host)
            ready = [r for r in ready if r[2].name in pref]
            ready.sort(key=lambda r: pref.index(r[2].name))
        else:
            ready.sort(key=lambda r: (-r[2].priority, r[2].name))
        chosen: Candidate | None = None
        devices: list[Device] = []
        vis_report: Any = None
        hidden: list[dict[str, Any]] = []  # backends whose every device visibility hides
        passed_over: list[str] = []  # ready backends that could not be used after all
        for backend, _probe_result, c in ready:
            t0 = time.perf_counter()
            try:
                # The core reads the visibility variables with the backend's declared rule
                # first: a value the runtime would reject is the user's error (raised as
                # is), while a VisibilityError from the plugin's own devices() is its fault.
                own = 0.0 if _builtin(c.spec) else limit
                vis_report = visibility_of(backend, c, env, host, own)
                devices = _devices(backend, c.name, host, env, own)
            except Broken as exc:
                statuses[c.name] = status_of(c, "broken", error=exc.reason, traceback=exc.tb)
                passed_over.append(c.name)
                continue
            finally:
                timings[f"devices:{c.name}"] = (time.perf_counter() - t0) * 1000
            if not devices and c.name != "cpu":
                old = statuses[c.name]
                shown = visible_vars(env, vis_report)
                gone = shown and hidden_backend(c.name, backend, env, host, vis_report, limit)
                if gone:  # the engine's reasons and the fix go with the report
                    hidden.append(gone)
                why, warning = unusable_why(c.name, old.reason, shown, gone or None)
                statuses[c.name] = status_of(
                    c, "unavailable", probe=old.probe, probe_ms=old.probe_ms, error=why
                )
                warnings.append(warning)
                if vis_report is not None and not gone:
                    warnings.extend(vis_report[0].warnings)
                passed_over.append(c.name)
                continue
            chosen = c
            break

        if chosen is None and pref:
            reasons = "; ".join(f"{n} is {statuses[n].state}: {statuses[n].reason}" for n in pref)
            raise BackendUnavailableError(
                f"HWBACKENDS_BACKEND={settings.forced} but "
                + (
                    f"that backend is {reasons.partition(' is ')[2]}" if len(pref) == 1 else reasons
                ),
                "a forced backend that shows this process at least one device",
                "change the visibility variables, or unset HWBACKENDS_BACKEND",
            )
        if chosen is None:
            cpu = statuses.get("cpu")
            if cpu is not None and cpu.state == "disabled":
                fix = "remove cpu from HWBACKENDS_DISABLE"
            else:
                fix = (
                    "this is a bug in hwbackends or its installation: reinstall hwbackends and "
                    "report the reason above"
                )
            raise BackendUnavailableError(
                "no backend is available, not even cpu"
                + (f" (cpu is {cpu.state}: {cpu.reason})" if cpu is not None else ""),
                "at least the built-in cpu backend",
                fix,
            )
        statuses[chosen.name] = _replace_state(statuses[chosen.name], "selected")

        others = [r[2].name for r in ready if r[2].name != chosen.name]
        unserved = _unserved_hardware(host, statuses, by_name)
        listed = settings.preferred
        if len(listed) == 1:
            rule = "forced"
            reason = f"HWBACKENDS_BACKEND={settings.forced} forces it"
        elif pref:
            rule = "preferred"
            before = listed[: listed.index(chosen.name)] if chosen.name in listed else listed
            reason = f"the first usable backend in HWBACKENDS_BACKEND={settings.forced}"
            if before:
                reason += (
                    " ("
                    + "; ".join(
                        f"{n}: {statuses[n].state if n in statuses else 'not installed'}"
                        for n in before
                    )
                    + ")"
                )
        elif chosen.name == "cpu" and (hardware_unready or passed_over or unserved):
            rule = "cpu-fallback"
            reason = "no accelerator backend is ready; using the CPU"
            if passed_over:
                reason += f" ({', '.join(passed_over)} could not be used: see its reason)"
        elif others:
            rule = "priority"
            reason = (
                f"highest priority ({chosen.priority}) among the available backends "
                f"({', '.join([chosen.name, *others])}); ties break by name"
            )
        else:
            rule = "only-available"
            reason = "the only available backend"
        for p in hardware_unready:
            fix = f" Fix: {p.hint}" if p.hint else ""
            warnings.append(f"{p.backend}: {p.reason}.{fix}")
        warnings.extend(take_reports())
        warnings.extend(unserved)
        dt = devices[0].device_type if devices else chosen.device_type
        warnings.extend(unregistered_device(chosen.name, dt, host))

        env_read: dict[str, str | None] = {k: env.get(k) for k in SETTINGS_VARS}
        vis = None
        if vis_report is not None:
            rep, declared = vis_report
            for k in declared:
                env_read[k] = env.get(k)
            # cpu declares no variable: its "every device is visible" would contradict the
            # hidden backend's reasons, which are the answer
            vis = rep.to_dict() if declared or not hidden else None
            warnings.extend(w for w in rep.warnings if not hidden or declared)
        for gone in hidden:
            for k in gone["variables"]:
                env_read[k] = env.get(k)
        return SelectionReport(
            chosen=chosen.name,
            # a backend whose device string depends on the software stack (neuron/xla)
            # reports it on its devices
            device_type=devices[0].device_type if devices else chosen.device_type,
            rule=rule,
            reason=reason,
            candidates=tuple(statuses[n] for n in sorted(statuses)) + tuple(impostors),
            devices=tuple(devices),
            env_read=env_read,
            warnings=tuple(warnings),
            timings_ms=timings,
            discovery=self.discovery,
            host=host,
            visibility=vis,
            debug=settings.debug,
            hidden=tuple(hidden),
        )


def _builtin(spec: EntryPointSpec) -> bool:
    return spec.value.startswith("hwbackends._") and spec.dist == "hwbackends"


def _conflict(specs: list[EntryPointSpec]) -> str | None:
    dists = sorted({s.dist for s in specs})
    if len(specs) < 2:
        return None
    name = specs[0].name
    if any(s.value.startswith("hwbackends._") for s in specs):
        others = [d for d in dists if d != "hwbackends"]
        return (
            f"{', '.join(others)} declares a backend named {name!r}, which is built into "
            "hwbackends; rename the plugin's entry point"
        )
    targets = "; ".join(f"{s.dist} {s.version} ({s.value})" for s in specs)
    return f"backend name {name!r} is claimed more than once: {targets}"


# -- process-wide entry points -------------------------------------------------------------

# Made at import, not on first use: two threads must never each make their own.
_lock = _thread.allocate_lock()
_cached: SelectionReport | None = None
_registry: Registry | None = None


def _get_lock() -> Any:
    return _lock


def _after_fork_in_child() -> None:
    # A thread of the parent may have held these at fork; it does not exist in the child.
    global _lock
    _lock = _thread.allocate_lock()
    if _registry is not None:
        # Sharing the default plugins: their lock, which discovery's own fork handler has
        # just renewed (it runs first: registered at an earlier import). Otherwise a new one.
        shared = loading._default
        _registry._load_lock = (
            shared._load_lock
            if shared is not None and shared._loaded is _registry._loaded
            else _thread.RLock()
        )


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _default_registry() -> Registry:
    global _registry
    if _registry is None:
        reg = Registry([])
        reg.share(default_plugins())  # the machine reader's plugins: one load of each
        _registry = reg
    return _registry


def resolve_inputs(
    env: Mapping[str, str] | None, host: Host | None
) -> tuple[Mapping[str, str], Host, Settings]:
    """The environment, host and settings a call works with (see ``current``)."""
    if host is not None and not isinstance(host, Host):
        from hwbackends._base.errors import HostFileError

        shown = repr(host) if isinstance(host, (str, os.PathLike)) else type(host).__name__
        raise HostFileError(
            f"host={shown} is not a Host",
            "a hwbackends.Host (or None for this machine)",
            f"pass host=Host.from_file({shown})"
            if isinstance(host, (str, os.PathLike))
            else "build one with Host.from_file(path) or Host.from_dict(data)",
        )
    settings = Settings.from_env(os.environ if env is None else env)
    if host is None:
        host = (
            Host.from_file(settings.host_file)
            if settings.host_file
            else Host.from_system(backends=installed_backends(os.environ if env is None else env))
        )
    if env is None:
        env = host.env if host.simulated and host.env is not None else os.environ
    return env, host, settings


@working  # a fork in another thread waits for it (briefly): no lazy import cut in half
def explain(*, env: Mapping[str, str] | None = None, host: Host | None = None) -> SelectionReport:
    """The selection report: every candidate, its probe, the rule that decided, timings.

    With neither ``env`` nor ``host`` given, the answer is computed once per process (under a
    lock, so concurrent first calls get the same object) and cached until
    ``hwbackends.reset()``; with either, it is computed again on every call.

    :param env: the environment to select in (``HWBACKENDS_*`` settings, visibility
        variables), name to value; a name left out is unset. None: ``os.environ``, or the
        ``env`` of a simulated ``host`` whose host file declares one.
    :param host: the machine to select for: a ``Host`` (``Host.from_file(path)`` for a
        simulated one). None: the host file ``HWBACKENDS_HOST`` names, else this machine.
    :raises HostFileError: when ``host`` is not a ``Host``, or the ``HWBACKENDS_HOST`` file is
        missing or malformed.
    :raises SettingsError: when an ``HWBACKENDS_*`` variable holds a value it does not take.
    :raises BackendUnavailableError: when no backend ``HWBACKENDS_BACKEND`` names can be used
        here, or no backend at all (cpu disabled).
    :raises VisibilityError: when a visibility variable holds a value the runtime refuses.
    :raises PluginError: under ``HWBACKENDS_STRICT=1`` when a plugin is broken, or when a
        plugin's own code calls it.
    """
    global _cached
    refuse_nested()
    if env is None and host is None:
        if _cached is not None:
            return _cached
        with _get_lock():
            if _cached is None:
                e, h, s = resolve_inputs(None, None)
                report = _default_registry().select(e, h, s)
                _strict_check(report, s)
                _cached = _agree_with_cache(report)
            return _cached
    e, h, s = resolve_inputs(env, host)
    report = _default_registry().select(e, h, s)
    _strict_check(report, s)
    return report


def _agree_with_cache(report: SelectionReport) -> SelectionReport:
    """``current()`` may have answered from the selection cache earlier in this process; the
    full selection is the truth: when it differs, the report says so, the stored answer is
    dropped, and ``current()`` answers the report's backend from now on."""
    import sys

    cache = sys.modules.get("hwbackends._selection.cache")
    given = getattr(cache, "_chosen", None) if cache is not None else None
    if given is None or getattr(given, "name", None) == report.chosen:
        return report
    cache.drop_answer()  # type: ignore[union-attr]
    from hwbackends._base.record import replace

    note = (
        f"current() answered {given.name!r} earlier in this process from the selection cache, "
        f"but a full selection chooses {report.chosen!r}; the cached answer was dropped and "
        f"current() returns {report.chosen!r} from now on"
    )
    warn_once([note])
    return replace(report, warnings=(*report.warnings, note))


def _strict_check(report: SelectionReport, s: Settings) -> None:
    if s.strict and report.broken:
        lines = "; ".join(f"{b.name} ({b.origin}): {b.reason}" for b in report.broken)
        raise PluginError(
            f"HWBACKENDS_STRICT=1 and {len(report.broken)} plugin(s) are broken: {lines}",
            "every installed plugin to load and probe cleanly",
            "fix or uninstall the plugin, or unset HWBACKENDS_STRICT",
        )


def current(*, env: Mapping[str, str] | None = None, host: Host | None = None) -> Backend:
    """The backend this process should use (cached per process for the defaults)."""
    return get_from_report(explain(env=env, host=host))


def backends(
    *, env: Mapping[str, str] | None = None, host: Host | None = None
) -> list[BackendStatus]:
    """Every discovered backend with its state and reason: ``explain()``'s ``candidates``.

    :param env: the environment to select in, as for ``explain``; None: ``os.environ``, or
        a simulated ``host``'s own ``env``.
    :param host: the machine, as for ``explain``; None: ``HWBACKENDS_HOST``'s file, else this
        machine.
    """
    return list(explain(env=env, host=host).candidates)


def get(name: str) -> Backend:
    """A backend by name, whether or not it is available here.

    :param name: the backend's name, any case (``"cuda"``); ``hwbackends.backends()`` lists them.
    :raises BackendNotFoundError: when no installed backend has that name.
    :raises PluginError: when that backend is broken, or several plugins claim the name.
    """
    return _default_registry().get(name)


def watch_lists() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What selection read beyond the selection cache's base fingerprint, as the installed
    backends declare it: every visibility variable, and the ``/dev`` folders of their node
    patterns plus their ``watch_paths`` (relative to the root), and the class folders the
    machine reader reads as evidence of devices. Every declaration is read under the guard
    (the node patterns and watch paths once, at load)."""
    from hwbackends._discovery.loading import meta_of
    from hwbackends._machine.evidence import WATCH

    names: set[str] = set()
    paths: set[str] = set(WATCH)  # the core's own sources: DRM and accel class folders
    for b in installed_backends():
        try:
            meta = meta_of(b)
        except Broken:  # a broken declaration: selection reports it
            continue

        try:  # noqa: SIM105 - contextlib is not imported on the selection path
            names.update(declared_variables(b, meta.name, None))
        except Broken:
            pass
        for p in meta.watch_paths:
            if not p.startswith("/") and ".." not in p.split("/"):
                paths.add(p)
        for pat in meta.device_nodes:
            if "/" in pat and ".." not in pat.split("/"):
                paths.add("dev/" + pat.rpartition("/")[0])
    return tuple(sorted(names)), tuple(sorted(paths))


def installed_backends(env: Mapping[str, str] | None = None) -> list[Backend]:
    """The default registry's backends that load and are not disabled by the settings."""
    return _installed_backends(env, _default_registry())


def installed_names() -> list[str]:
    """The names of every discovered backend, the built-in cpu included."""
    return _default_registry().names()


def entry_point_source(name: str, backend: object = None) -> tuple[str, str] | None:
    """``(module:attr, *.dist-info folder)`` the default registry loads for ``name`` (of
    plugins claiming one name, the one whose instance ``backend`` is); the folder is ``""``
    for the built-in. None: unknown name, or found without a folder (importlib)."""
    reg = _default_registry()
    specs = [s for s in reg.specs if s.name == name]
    if backend is not None and len(specs) > 1:
        loaded = {id(s): reg._loaded.get(id(s)) for s in specs}
        specs = [s for s in specs if isinstance(got := loaded[id(s)], tuple) and got[0] is backend]
    for s in specs:
        builtin = s.value.startswith("hwbackends._")
        return (s.value, s.source) if builtin or s.source else None
    return None


def get_from_report(report: SelectionReport, name: str | None = None) -> Backend:
    """The backend instance a report chose, or the candidate ``name`` of it (the same object
    selection probed): of plugins claiming one name, the one the report's settings picked."""
    reg = _default_registry()
    chosen = report.status(name or report.chosen)
    for s in reg.specs:
        if (
            s.name == chosen.name
            and s.value == chosen.target
            and chosen.origin in (s.dist, "builtin")
        ):
            try:
                return reg.load(s)
            except Broken:
                break  # get() raises the error that names it
    return reg.get(chosen.name)
