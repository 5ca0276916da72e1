"""Probing and choosing a backend, with the report that explains it; the process-wide entry
points (``current``, ``explain``, ``get``) over the default registry.

Every plugin runs behind a guard: an import that fails, a class that does not satisfy the
protocol, a probe that raises or returns the wrong type, a name claimed twice, a plugin that
edits ``os.environ``: each is recorded as a broken ``BackendStatus`` and skipped. Strict mode
(``HWBACKENDS_STRICT=1``) turns any of them into a ``PluginError`` after the report is made.
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
    VisibilityError,
)
from hwbackends._base.guard import ResultError, call_many
from hwbackends._base.protocol import Device, Probe, checked
from hwbackends._base.record import mutable
from hwbackends._base.settings import (
    SETTINGS_VARS,
    Settings,
    allowed,
    close_matches,
    listed,
    unknown_settings,
)
from hwbackends._discovery import loading
from hwbackends._discovery.loading import (
    Broken,
    Meta,
    Plugins,
    default_plugins,
    guarded,
)
from hwbackends._discovery.loading import (
    installed_backends as _installed_backends,
)
from hwbackends._machine.host import Host
from hwbackends._selection.report import (
    BackendStatus,
    SelectionReport,
    _replace_state,
    _unserved_hardware,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, Literal, TypeVar

    from hwbackends._base.protocol import Backend
    from hwbackends._discovery.scan import EntryPointSpec

    State = Literal["selected", "available", "unavailable", "broken", "disabled", "not-probed"]
    _T = TypeVar("_T")


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


# -- guarded plugin calls ------------------------------------------------------------------


def plugin_call(
    name: str,
    method: str,
    fn: Callable[[], _T],
    expect: type | None = None,
    passthrough: tuple[type[BaseException], ...] = (),
) -> _T:
    """Call a backend's method for an integration (``capabilities()``, ``devices()``...).

    The call runs under the plugin guard; a result of the wrong type, an exception, a hang
    or an environment edit becomes a ``PluginError`` that names the backend and its method.
    ``expect`` is a protocol value class (``Capabilities``, ``Probe``) checked field by field,
    ``list`` for a list of ``Device``, or ``dict`` for variable names to string values.
    """
    what = f"{name}.{method}()"

    def run() -> Any:
        got = fn()
        if expect is list:
            if not isinstance(got, list):
                raise ResultError(f"{what} returned {type(got).__name__}, expected a list")
            return [checked(d, Device, what) for d in got]
        if expect is dict:
            if not isinstance(got, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in got.items()
            ):
                raise ResultError(
                    f"{what} returned {type(got).__name__}, expected a dict of variable names "
                    "to string values"
                )
            return dict(got)
        return checked(got, expect, what) if expect is not None else got

    try:
        return guarded(what, run, passthrough=passthrough)  # type: ignore[no-any-return]
    except Broken as exc:
        raise PluginError(
            f"the {name} backend is broken: {exc.reason}",
            "a plugin whose methods return what the hwbackends.Backend protocol describes",
            "update or uninstall the plugin; `hwbackends plugins --check` lists broken plugins",
        ) from None


def _probe(backend: Backend, meta: Meta, host: Host, timeout: float | None) -> Probe:
    what = f"{meta.name}.probe()"
    p: Probe = guarded(what, lambda: checked(backend.probe(host), Probe, what), timeout=timeout)
    if p.backend != meta.name:
        raise Broken(f"{what} returned a Probe for {p.backend!r}")
    return p


def _devices(
    backend: Backend, name: str, host: Host, env: Mapping[str, str], timeout: float | None
) -> list[Device]:
    what = f"{name}.devices()"

    def run() -> list[Device]:
        got = backend.devices(host, env)
        if not isinstance(got, list):
            raise ResultError(f"{what} returned {type(got).__name__}, expected a list of Device")
        return [checked(d, Device, what) for d in got]

    return guarded(what, run, timeout=timeout)


# -- the registry --------------------------------------------------------------------------


@mutable
class _Candidate:
    spec: EntryPointSpec
    backend: Backend | None = None
    meta: Meta | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def priority(self) -> int:
        return self.meta.priority if self.meta is not None else 0

    @property
    def device_type(self) -> str:
        return self.meta.device_type if self.meta is not None else self.spec.name


def _status(c: _Candidate, state: State, **kw: Any) -> BackendStatus:
    m = c.meta
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


def _vendor_of(b: object) -> str | None:
    v = getattr(b, "vendor", None) if b is not None else None
    return v if isinstance(v, str) and v else None


def _check_listed_names(settings: Settings, installed: Mapping[str, list[EntryPointSpec]]) -> None:
    """HWBACKENDS_PLUGINS / HWBACKENDS_DISABLE may name installed backends or distributions
    and the known plugins of the catalog (a cluster-wide setting names plugins some machines
    lack); any other name is a typo, refused as HWBACKENDS_BACKEND refuses one."""
    from hwbackends._discovery.catalog import KNOWN_PLUGINS

    names = set(installed) | {k.backend for k in KNOWN_PLUGINS}
    dists = {s.dist for specs in installed.values() for s in specs}
    dists |= {k.distribution for k in KNOWN_PLUGINS}
    for var, names_listed in (
        ("HWBACKENDS_PLUGINS", settings.allow or frozenset()),
        ("HWBACKENDS_DISABLE", settings.deny),
    ):
        for name in sorted(names_listed):
            if name in names or name in dists:
                continue
            raise BackendNotFoundError(
                f"{var} names {name!r}, which is no backend{close_matches(name, names)}",
                f"comma-separated backend names from {', '.join(sorted(names))}",
                f"correct or remove {name!r} in {var} (`hwbackends plugins` lists the installed "
                "ones)",
            )


class Registry(Plugins):
    """The discovered backends of one search path. ``select`` makes a ``SelectionReport``."""

    def _load_and_probe(self, c: _Candidate, host: Host) -> tuple[Backend, Meta, Probe, float]:
        """Plugin code for one candidate (run on a guard worker): its instance and identity,
        its probe, and how long both took. Returned, not stored: a call abandoned for hanging
        must not change the candidate later."""
        t0 = time.perf_counter()
        backend, meta = self.loaded(c.spec)
        if c.name in host.reader_errors:
            raise Broken(f"reading the machine: {host.reader_errors[c.name]}")
        probe = _probe(backend, meta, host, None)
        return backend, meta, probe, (time.perf_counter() - t0) * 1000

    def get(self, name: str) -> Backend:
        key = name.strip().lower()
        specs = [s for s in self.specs if s.name == key]
        if not specs:
            raise BackendNotFoundError(
                f"no backend named {name!r} is installed{close_matches(key, self.names())}",
                f"one of {', '.join(self.names())}",
                f"install its plugin (pip install hwbackends-{key}) or pick an installed name",
            )
        conflict = _conflict(specs)
        if conflict and not specs[0].value.startswith("hwbackends._"):
            raise PluginError(conflict, fix="uninstall all but one of these distributions")
        # a plugin claiming a built-in name is reported by selection; the built-in stands
        try:
            return self.load(specs[0])
        except Broken as exc:
            raise PluginError(
                f"the {key} backend is broken: {exc.reason}",
                fix=f"reinstall or update {specs[0].dist}, or run `hwbackends plugins --check`",
            ) from None

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

        if settings.forced is not None and settings.forced not in by_name:
            raise BackendNotFoundError(
                f"HWBACKENDS_BACKEND={settings.forced!r} names no installed backend"
                f"{close_matches(settings.forced, by_name)}",
                f"one of {', '.join(sorted(by_name))}",
                f"install hwbackends-{settings.forced}, or unset HWBACKENDS_BACKEND",
            )
        _check_listed_names(settings, by_name)
        warnings.extend(unknown_settings(env))

        statuses: dict[str, BackendStatus] = {}
        impostors: list[BackendStatus] = []
        ready: list[tuple[Backend, Probe, _Candidate]] = []
        hardware_unready: list[Probe] = []
        limit = settings.timeout
        to_probe: list[_Candidate] = []
        for name in sorted(by_name):
            specs = by_name[name]
            c = _Candidate(specs[0])
            conflict = _conflict(specs)
            if conflict and c.spec.value.startswith("hwbackends._"):
                # The built-in keeps working; each impostor is reported on its own line.
                impostors.extend(
                    _status(_Candidate(s), "broken", error=conflict) for s in specs[1:]
                )
            elif conflict:
                statuses[name] = _status(c, "broken", error=conflict)
                continue
            if not allowed(c.spec, settings):
                why = (
                    "listed in HWBACKENDS_DISABLE"
                    if listed(c.spec, settings.deny)
                    else "not listed in HWBACKENDS_PLUGINS"
                )
                statuses[name] = _status(c, "disabled", error=why)
                continue
            if settings.forced is not None and name not in (settings.forced, "cpu"):
                statuses[name] = _status(
                    c, "not-probed", error=f"not probed: HWBACKENDS_BACKEND={settings.forced}"
                )
                continue
            to_probe.append(c)

        # Every plugin is loaded, then probed, on one worker each time: two thread hand-offs
        # for the lot, each call still with its own time limit (see guarded.call_many).
        self.preload([c.spec for c in to_probe], limit)
        outcomes = call_many(
            [(f"{c.name}.probe()", partial(self._load_and_probe, c, host)) for c in to_probe],
            timeout=limit,
        )
        for c, (ok, value) in zip(to_probe, outcomes, strict=True):
            name = c.name
            if not ok:
                got = self._loaded.get(id(c.spec))  # loaded but broken in its probe: say who
                if isinstance(got, tuple):
                    c.backend, c.meta = got
                statuses[name] = _status(c, "broken", error=value.reason, traceback=value.tb)
                timings[f"probe:{name}"] = 0.0
                continue
            c.backend, c.meta, probe, ms = value
            timings[f"probe:{name}"] = ms
            state: State = "available" if probe.available else "unavailable"
            statuses[name] = _status(c, state, probe=probe, probe_ms=ms)
            if probe.available:
                ready.append((c.backend, probe, c))
            elif probe.hardware_present:
                hardware_unready.append(probe)

        if settings.forced is not None:
            forced = statuses[settings.forced]
            if forced.state != "available":
                hint = forced.probe.hint if forced.probe and forced.probe.hint else None
                # the others were skipped for the forced one; probed now, the error can name
                # every backend that would work instead of only cpu
                usable = {c.name for _, _, c in ready}
                for name, st in statuses.items():
                    if st.state == "not-probed":
                        try:
                            b, meta = self.loaded(by_name[name][0], limit)
                            if _probe(b, meta, host, limit).available:
                                usable.add(name)
                        except Broken:
                            pass  # a broken plugin is not an alternative to offer
                raise BackendUnavailableError(
                    f"HWBACKENDS_BACKEND={settings.forced} but that backend is {forced.state}: "
                    f"{forced.reason}",
                    f"an available backend ({', '.join(sorted(usable)) or 'none'})",
                    hint or "fix the reason above, or unset HWBACKENDS_BACKEND",
                )
            ready = [r for r in ready if r[2].name == settings.forced]

        ready.sort(key=lambda r: (-r[2].priority, r[2].name))
        chosen: _Candidate | None = None
        devices: list[Device] = []
        vis_report: Any = None
        passed_over: list[str] = []  # ready backends that could not be used after all
        for backend, _probe_result, c in ready:
            t0 = time.perf_counter()
            try:
                # The core reads the visibility variables with the backend's declared rule
                # first: a value the runtime would reject is the user's error (raised as
                # is), while a VisibilityError from the plugin's own devices() is its fault.
                vis_report = _visibility(backend, c, env, host, limit)
                devices = _devices(backend, c.name, host, env, limit)
            except Broken as exc:
                statuses[c.name] = _status(c, "broken", error=exc.reason, traceback=exc.tb)
                passed_over.append(c.name)
                continue
            finally:
                timings[f"devices:{c.name}"] = (time.perf_counter() - t0) * 1000
            if not devices and c.name != "cpu":
                old = statuses[c.name]
                shown = _visible_vars(env, vis_report)
                if shown:
                    why = (
                        f"{c.name} hardware is present, but the visibility variables "
                        f"hide every device from this process ({shown})"
                    )
                else:
                    why = (
                        f"{c.name} hardware evidence was found ({old.reason}), but no "
                        "device could be enumerated from the host's PCI devices"
                    )
                statuses[c.name] = _status(
                    c, "unavailable", probe=old.probe, probe_ms=old.probe_ms, error=why
                )
                warnings.append(f"{why}; this process cannot use it")
                passed_over.append(c.name)
                continue
            chosen = c
            break

        if chosen is None and settings.forced is not None:
            forced = statuses[settings.forced]
            raise BackendUnavailableError(
                f"HWBACKENDS_BACKEND={settings.forced} but that backend is {forced.state}: "
                f"{forced.reason}",
                "a forced backend that shows this process at least one device",
                "change the visibility variables, or unset HWBACKENDS_BACKEND",
            )
        if chosen is None:
            raise BackendUnavailableError(
                "no backend is available, not even cpu",
                "at least the built-in cpu backend",
                "remove cpu from HWBACKENDS_DISABLE / add it to HWBACKENDS_PLUGINS",
            )
        statuses[chosen.name] = _replace_state(statuses[chosen.name], "selected")

        others = [r[2].name for r in ready if r[2].name != chosen.name]
        unserved = _unserved_hardware(host, statuses, by_name)
        if settings.forced is not None:
            rule = "forced"
            reason = f"HWBACKENDS_BACKEND={settings.forced} forces it"
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
        warnings.extend(unserved)

        env_read: dict[str, str | None] = {k: env.get(k) for k in SETTINGS_VARS}
        vis = None
        if vis_report is not None:
            rep, declared = vis_report
            for k in declared:
                env_read[k] = env.get(k)
            vis = rep.to_dict()
            warnings.extend(rep.warnings)
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
        )


def _visibility(
    backend: Backend, c: _Candidate, env: Mapping[str, str], host: Host, limit: float | None
) -> tuple[Any, tuple[str, ...]]:
    """The backend's visibility report and declared variables, read by the core.

    A declaration that is not a rule, or a rule that fails, is the plugin's fault
    (``Broken``); a ``VisibilityError`` from reading the values is the user's, raised as is.
    """
    from hwbackends._visibility.explain import explain_visibility, rule_of

    rule = guarded(f"{c.name}.visibility", lambda: rule_of(backend), timeout=limit)
    variables = tuple(v for v in rule.variables if isinstance(v, str))
    rep = guarded(
        f"the {c.name} visibility rule",
        lambda: explain_visibility(backend, env, host),
        passthrough=(VisibilityError,),
        timeout=limit,
    )
    return rep, variables


def _visible_vars(env: Mapping[str, str], vis_report: tuple[Any, tuple[str, ...]] | None) -> str:
    keys = [k for k in vis_report[1] if k in env] if vis_report is not None else []
    return ", ".join(f"{k}={env[k]!r}" for k in keys)


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


def explain(*, env: Mapping[str, str] | None = None, host: Host | None = None) -> SelectionReport:
    """The selection report: every candidate, its probe, the rule that decided, timings.

    With neither ``env`` nor ``host`` given, the answer is computed once per process (under a
    lock, so concurrent first calls get the same object) and cached. ``env`` defaults to
    ``os.environ`` or, for a simulated host that declares one, the host file's ``env``.
    """
    global _cached
    if env is None and host is None:
        if _cached is not None:
            return _cached
        with _get_lock():
            if _cached is None:
                e, h, s = resolve_inputs(None, None)
                report = _default_registry().select(e, h, s)
                _strict_check(report, s)
                _cached = report
            return _cached
    e, h, s = resolve_inputs(env, host)
    report = _default_registry().select(e, h, s)
    _strict_check(report, s)
    return report


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
    report = explain(env=env, host=host)
    return _default_registry().get(report.chosen)


def backends(
    *, env: Mapping[str, str] | None = None, host: Host | None = None
) -> list[BackendStatus]:
    """Every discovered backend with its state and reason."""
    return list(explain(env=env, host=host).candidates)


def get(name: str) -> Backend:
    """A backend by name, whether or not it is available here."""
    return _default_registry().get(name)


def watch_lists() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What selection read beyond the selection cache's base fingerprint, as the installed
    backends declare it: every visibility variable, and the ``/dev`` folders of their node
    patterns plus their ``watch_paths`` (relative to the root)."""
    from hwbackends._visibility.explain import rule_of

    names: set[str] = set()
    paths: set[str] = set()
    for b in installed_backends():
        try:  # noqa: SIM105 - contextlib is not imported on the selection path
            names.update(v for v in rule_of(b).variables if isinstance(v, str))
        except Exception:  # a broken declaration: selection reports it
            pass
        for p in getattr(b, "watch_paths", ()) or ():
            if isinstance(p, str) and not p.startswith("/") and ".." not in p.split("/"):
                paths.add(p)
        for pat in getattr(b, "device_nodes", ()) or ():
            if isinstance(pat, str) and "/" in pat and ".." not in pat.split("/"):
                paths.add("dev/" + pat.rpartition("/")[0])
    return tuple(sorted(names)), tuple(sorted(paths))


def installed_backends(env: Mapping[str, str] | None = None) -> list[Backend]:
    """The default registry's backends that load and are not disabled by the settings."""
    return _installed_backends(env, _default_registry())


def installed_names() -> list[str]:
    """The names of every discovered backend, the built-in cpu included."""
    return _default_registry().names()


def entry_point_source(name: str) -> tuple[str, str] | None:
    """``(module:attr, *.dist-info folder)`` the default registry loads for ``name``; the folder
    is ``""`` for the built-in. None: unknown name, or found without a folder (importlib)."""
    for s in _default_registry().specs:
        if s.name == name:
            builtin = s.value.startswith("hwbackends._")
            return (s.value, s.source) if builtin or s.source else None
    return None


def get_from_report(report: SelectionReport) -> Backend:
    """The backend instance a report chose (the same object selection probed)."""
    return _default_registry().get(report.chosen)
