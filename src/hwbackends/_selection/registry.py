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
import sys
import time

from hwbackends._base.args import check_env, check_name
from hwbackends._base.errors import (
    BackendNotFoundError,
    PluginError,
)
from hwbackends._base.guard import (
    call_many,
    refuse_nested,
    take_reports,
    working,
)
from hwbackends._base.protocol import Probe
from hwbackends._base.record import frozen
from hwbackends._base.settings import (
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
from hwbackends._selection.calls import plugin_call as plugin_call  # imported from here too
from hwbackends._selection.choose import (
    _builtin,
    _first_usable,
    _Round,
    _rule,
    _what_was_read,
    step_aside,
)
from hwbackends._selection.order import (
    Candidate,
    declared_variables,
    none_preferred,
    preferred,
    probe_of,
    replaced_by_name,
    shared_devices,
    status_of,
    torch_claim,
)
from hwbackends._selection.report import (
    BackendStatus,
    SelectionReport,
    _replace_state,
    _unserved_hardware,
    unregistered_device,
)
from hwbackends._selection.snapshot import environ_snapshot
from hwbackends._selection.verdict import build_verdicts, unready_warnings, with_fixes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
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

    def _load_and_probe(
        self, c: Candidate, host: Host
    ) -> tuple[Backend, Meta, Probe, float, str | None]:
        """Plugin code for one candidate (run on a guard worker): its instance and identity,
        its probe, how long both took, and its claim on the installed torch build. Returned,
        not stored: a call abandoned for hanging must not change the candidate later."""
        t0 = time.perf_counter()
        backend, meta = self.loaded(c.spec)
        if c.name in host.reader_errors:
            raise Broken(f"reading the machine: {host.reader_errors[c.name]}")
        probe = probe_of(backend, meta, host, None)
        claim = torch_claim(backend, host)
        return backend, meta, probe, (time.perf_counter() - t0) * 1000, claim

    def _probe_job(self, c: Candidate, host: Host) -> Callable[[], Any]:
        return lambda: self._load_and_probe(c, host)  # functools.partial: 1 ms of imports

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
        w = _Round(env, host, settings, self.discovery_ms)
        for s in self.specs:
            w.by_name.setdefault(s.name, []).append(s)
        w.pref = preferred(settings, w.by_name)
        said = check_listed_names(settings, w.by_name) + unknown_settings(env)
        warn_once(said)
        w.warnings.extend(said)

        to_probe = [c for name in sorted(w.by_name) if (c := self._candidate(w, name))]
        self._probe_all(w, to_probe)
        step_aside(w, to_probe)
        w.warnings.extend(shared_devices(w.ready, host, settings.timeout, w.pref, settings))
        if w.pref:
            if not any(w.statuses[n].state == "available" for n in w.pref):
                raise none_preferred(self, w.pref, settings, w.statuses, w.ready, w.skipped, host)
            w.ready = [r for r in w.ready if r[2].name in w.pref]
            w.ready.sort(key=lambda r: w.pref.index(r[2].name))
        else:
            w.ready.sort(key=lambda r: (-r[2].priority, r[2].name))
        chosen = _first_usable(w)
        w.statuses[chosen.name] = _replace_state(w.statuses[chosen.name], "selected")
        unserved = _unserved_hardware(host, w.statuses, w.by_name)
        rule, reason = _rule(w, chosen, unserved)
        loaded = {c.name: c.backend for c in to_probe if c.backend is not None}
        verdicts, failed = build_verdicts(
            host, [w.statuses[n] for n in sorted(w.statuses)], loaded.get, chosen.name,
            settings.timeout, {d.pci_bus_id: d.name for d in w.devices if d.pci_bus_id and d.name},
        )  # fmt: skip
        w.statuses = with_fixes(w.statuses, verdicts)
        w.warnings.extend(unready_warnings(w.hardware_unready, verdicts))
        w.warnings.extend(failed)
        w.warnings.extend(take_reports())
        w.warnings.extend(unserved)
        dt = w.devices[0].device_type if w.devices else chosen.device_type
        w.warnings.extend(unregistered_device(chosen.name, dt, host))
        env_read, vis = _what_was_read(w)
        return SelectionReport(
            chosen=chosen.name,
            # a backend whose device string depends on the software stack (neuron/xla)
            # reports it on its devices
            device_type=w.devices[0].device_type if w.devices else chosen.device_type,
            rule=rule,
            reason=reason,
            candidates=tuple(w.statuses[n] for n in sorted(w.statuses)) + tuple(w.impostors),
            devices=tuple(w.devices),
            env_read=env_read,
            warnings=tuple(w.warnings),
            timings_ms=w.timings,
            discovery=self.discovery,
            host=host,
            visibility=vis,
            debug=settings.debug,
            hidden=tuple(w.hidden),
            verdicts=verdicts,
        )

    def _candidate(self, w: _Round, name: str) -> Candidate | None:
        """The candidate to probe for ``name``, or None with its row (disabled, a clash, not
        probed) recorded; the built-in keeps working beside an impostor, each reported."""
        specs, settings = w.by_name[name], w.settings
        if specs[0].value.startswith("hwbackends._"):
            c = Candidate(specs[0])
            if len(specs) > 1:  # each impostor is reported on its own line
                conflict = _conflict(specs)
                w.impostors.extend(
                    status_of(Candidate(s), "broken", error=conflict) for s in specs[1:]
                )
            if not allowed(c.spec, settings):
                w.statuses[name] = status_of(c, "disabled", error=disabled_reason(c.spec, settings))
                return None
        else:
            winner, aside, clash = resolve_claims(self, specs, settings, settings.timeout)
            for s, why, by in aside:
                st = status_of(Candidate(s), "disabled", error=why, replaced_by=by)
                if winner is None and not clash and name not in w.statuses:
                    w.statuses[name] = st  # every claimant disabled: the first is the row
                else:
                    w.impostors.append(st)
            if clash:
                error = clash_error(name, clash)
                w.statuses[name] = status_of(Candidate(clash[0]), "broken", error=error)
                w.impostors.extend(
                    status_of(Candidate(s), "broken", error=error) for s in clash[1:]
                )
                return None
            if winner is None:
                return None
            c = Candidate(winner)
            c.replaces = tuple(s.dist for s, _why, by in aside if by)
        if w.pref and name not in (*w.pref, "cpu"):
            w.skipped[name] = c.spec
            w.statuses[name] = status_of(
                c, "not-probed", error=f"not probed: HWBACKENDS_BACKEND={settings.forced}"
            )
            return None
        return c

    def _probe_all(self, w: _Round, to_probe: list[Candidate]) -> None:
        """Load and probe every candidate; each one's row, the ready ones, and the probes that
        found hardware whose software is not ready.

        Every plugin is loaded, then probed, on one worker each time: two thread hand-offs
        for the lot, each call still with its own time limit (see guarded.call_many). The
        built-in cpu is hwbackends' own code: never subject to the plugin time limit, so a
        tiny HWBACKENDS_TIMEOUT or a loaded machine cannot leave a process with no backend."""
        limit, host = w.settings.timeout, w.host
        self.preload([c.spec for c in to_probe if not _builtin(c.spec)], limit)
        to_probe = replaced_by_name(self, to_probe, w.statuses, limit)
        builtin = [c for c in to_probe if _builtin(c.spec)]
        plugins = [c for c in to_probe if not _builtin(c.spec)]
        outcomes = call_many(
            [(f"{c.name}.probe()", self._probe_job(c, host), c.name) for c in plugins],
            timeout=limit,
        ) + call_many(
            [(f"{c.name}.probe()", self._probe_job(c, host)) for c in builtin],
            timeout=0.0,
        )
        for c, (ok, value) in zip(plugins + builtin, outcomes, strict=True):
            name = c.name
            if not ok:
                got = self._loaded.get(id(c.spec))  # loaded but broken in its probe: say who
                if isinstance(got, tuple):
                    c.backend, c.meta = got
                w.statuses[name] = status_of(c, "broken", error=value.reason, traceback=value.tb)
                w.timings[f"probe:{name}"] = 0.0
                continue
            c.backend, c.meta, probe, ms, c.claim = value
            w.timings[f"probe:{name}"] = ms
            state: State = "available" if probe.available else "unavailable"
            w.statuses[name] = status_of(c, state, probe=probe, probe_ms=ms)
            if probe.available:
                w.ready.append((c.backend, probe, c))
            elif probe.hardware_present:
                w.hardware_unready.append(probe)


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
_inputs: Inputs | None = None
_recent: tuple[Inputs, SelectionReport] | None = None  # the last explicit explain()
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


@frozen
class Inputs:
    """What one selection reads: the environment (a snapshot), the machine, the settings."""

    env: Mapping[str, str]
    host: Host
    settings: Settings


def resolve_inputs(
    env: Mapping[str, str] | None, host: Host | None
) -> tuple[Mapping[str, str], Host, Settings]:
    """The environment, host and settings a call works with (see ``current``); for the
    defaults, the process's own (``process_inputs``): the machine is not read again."""
    if env is None and host is None:
        got = process_inputs()
        return got.env, got.host, got.settings
    got = _make_inputs(env, host, None)
    return got.env, got.host, got.settings


def _make_inputs(
    env: Mapping[str, str] | None, host: Host | None, snapshot: Mapping[str, str] | None
) -> Inputs:
    check_env(env)
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
    if env is None or env is os.environ:
        live = environ_snapshot() if snapshot is None else snapshot
    else:
        live = dict(env)  # the caller's mapping may change later: the answer is of this copy
    settings = Settings.from_env(live)
    if host is None:
        host = (
            Host.from_file(settings.host_file)
            if settings.host_file
            else Host.from_system(backends=installed_backends(live))
        )
    if env is not None:
        env = live
    elif host.simulated and host.env is not None:
        env = host.env
    else:
        env = live
    return Inputs(env=env, host=host, settings=settings)


def process_inputs(snapshot: Mapping[str, str] | None = None) -> Inputs:
    """This process's inputs for the defaults (``env=None, host=None``): one snapshot of
    ``os.environ`` and one reading of the machine, kept until ``hwbackends.reset()``.
    ``snapshot``: the environment to take them from on the first call (the selection cache
    passes the one its key was made of)."""
    got = _inputs
    if got is not None:
        return got
    with _get_lock():
        return _process_inputs_locked(snapshot)


def _process_inputs_locked(snapshot: Mapping[str, str] | None) -> Inputs:
    global _inputs
    if _inputs is None:
        if snapshot is None:  # the copy current() answered from the selection cache, if it did
            cache = sys.modules.get("hwbackends._selection.cache")
            snapshot = getattr(cache, "answered_env", None)
        _inputs = _make_inputs(None, None, snapshot)
    return _inputs


def select_inputs(inputs: Inputs) -> SelectionReport:
    """The selection report for ``inputs``, strict mode applied."""
    report = _default_registry().select(inputs.env, inputs.host, inputs.settings)
    _strict_check(report, inputs.settings)
    return report


def explain_inputs(inputs: Inputs) -> SelectionReport:
    """``explain`` for inputs already read (``resolve_inputs``): not read again."""
    refuse_nested()
    return select_inputs(inputs)


@working  # a fork in another thread waits for it (briefly): no lazy import cut in half
def explain(*, env: Mapping[str, str] | None = None, host: Host | None = None) -> SelectionReport:
    """The selection report: every candidate, its probe, the rule that decided, timings.

    With neither ``env`` nor ``host`` given, the answer is computed once per process (under a
    lock, so concurrent first calls get the same object) from one snapshot of ``os.environ``
    and cached until ``hwbackends.reset()``; with either, it is computed again on every call.

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
    refuse_nested()
    if env is None and host is None:
        return process_report()
    global _recent
    inputs = _make_inputs(env, host, None)
    report = select_inputs(inputs)
    _recent = (inputs, report)
    return report


def report_for(env: Mapping[str, str], host: Host) -> SelectionReport | None:
    """A report already made from exactly these inputs (resolved, as ``resolve_inputs``
    gives them), or None: the process's own for its inputs, else the last one ``explain``
    made for an explicit ``env``/``host`` (the same ``Host`` object, an equal environment),
    so that ``hwbackends env`` or ``explain()`` then ``pretrained_kwargs()`` select once."""
    own, recent = _inputs, _recent
    if own is not None and _cached is not None and own.host is host and own.env is env:
        return _cached
    if recent is not None and recent[0].host is host and recent[0].env == dict(env):
        return recent[1]
    return None


def process_report(snapshot: Mapping[str, str] | None = None) -> SelectionReport:
    """``explain()`` for the defaults: selected once per process from ``process_inputs``."""
    global _cached
    if _cached is not None:
        return _cached
    with _get_lock():
        if _cached is None:
            _cached = _agree_with_cache(select_inputs(_process_inputs_locked(snapshot)))
        return _cached


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
    check_name(name, "name", "hwbackends.get", "cuda")
    return _default_registry().get(name)


def watch_lists(
    env: Mapping[str, str] | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What selection read beyond the selection cache's base fingerprint, as the installed
    backends (not disabled by ``env``'s settings) declare it: every visibility variable, and
    the ``/dev`` folders of their node patterns plus their ``watch_paths`` and the version
    files of their ``driver_modules`` (relative to the root), and the class folders the
    machine reader reads as evidence of devices. Every declaration is read under the guard
    (the node patterns and watch paths once, at load)."""
    from hwbackends._discovery.loading import meta_of
    from hwbackends._machine.evidence import WATCH

    names: set[str] = set()
    paths: set[str] = set(WATCH)  # the core's own sources: DRM and accel class folders
    for b in installed_backends(env):
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
        for m in meta.driver_modules:  # the driver's version: read_drivers' first source
            if m and "/" not in m and m != "..":
                paths.add(f"sys/module/{m}/version")
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
