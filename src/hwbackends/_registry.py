"""Discovery, loading, probing and selection of backends, with the report that explains it.

Every plugin runs behind a guard: an import that fails, a class that does not satisfy the
protocol, a probe that raises or returns the wrong type, a name claimed twice, a plugin that
edits ``os.environ``: each is recorded as a broken ``BackendStatus`` and skipped. Strict mode
(``HWBACKENDS_STRICT=1``) turns any of them into a ``PluginError`` after the report is made.
"""

from __future__ import annotations

import _thread
import os
import sys
import time
from functools import partial

from ._discovery import EntryPointSpec, discover
from ._errors import BackendNotFoundError, BackendUnavailableError, PluginError, VisibilityError
from ._guard import (
    DEFAULT_TIMEOUT,
    PluginFault,
    ResultError,
    call,
    call_many,
    describe,
    timeout_from,
)
from ._host import Host
from ._protocol import API_VERSION, Device, Probe, checked
from ._record import frozen, mutable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any, Literal, TypeVar

    from ._protocol import Backend

    State = Literal["selected", "available", "unavailable", "broken", "disabled", "not-probed"]
    _T = TypeVar("_T")


__all__ = [
    "BackendStatus",
    "SelectionReport",
    "Settings",
    "backends",
    "current",
    "explain",
    "get",
    "reset",
]


#: The library's own variables, read from the environment given (or os.environ).
SETTINGS_VARS = (
    "HWBACKENDS_BACKEND",
    "HWBACKENDS_PLUGINS",
    "HWBACKENDS_DISABLE",
    "HWBACKENDS_STRICT",
    "HWBACKENDS_HOST",
    "HWBACKENDS_DEBUG",
    "HWBACKENDS_DISCOVERY",
    "HWBACKENDS_NO_CACHE",
    "HWBACKENDS_TIMEOUT",
)


def _names(value: str | None) -> frozenset[str] | None:
    if value is None:
        return None
    return frozenset(p.strip().lower() for p in value.split(",") if p.strip())


@frozen
class Settings:
    """The ``HWBACKENDS_*`` variables, parsed once."""

    forced: str | None = None
    allow: frozenset[str] | None = None  # None: every plugin; empty: none but the built-in cpu
    deny: frozenset[str] = frozenset()
    strict: bool = False
    debug: bool = False
    host_file: str | None = None
    timeout: float = DEFAULT_TIMEOUT  # seconds per plugin call; 0: no limit
    no_cache: bool = False
    discovery: str = "auto"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        forced = (env.get("HWBACKENDS_BACKEND") or "").strip().lower() or None
        return cls(
            forced=forced,
            allow=_names(env.get("HWBACKENDS_PLUGINS")),
            deny=_names(env.get("HWBACKENDS_DISABLE")) or frozenset(),
            strict=_truthy(env.get("HWBACKENDS_STRICT"), "HWBACKENDS_STRICT"),
            debug=_truthy(env.get("HWBACKENDS_DEBUG"), "HWBACKENDS_DEBUG"),
            host_file=env.get("HWBACKENDS_HOST") or None,
            timeout=timeout_from(env),
            no_cache=_truthy(env.get("HWBACKENDS_NO_CACHE"), "HWBACKENDS_NO_CACHE"),
            discovery=_choice(env.get("HWBACKENDS_DISCOVERY"), "HWBACKENDS_DISCOVERY"),
        )


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")
#: HWBACKENDS_DISCOVERY: "" / "auto" scan sys.path directly where possible, "importlib" always
#: asks importlib.metadata (see _discovery.fast_scan_possible).
_DISCOVERY = ("auto", "importlib")


def _truthy(v: str | None, name: str = "the switch") -> bool:
    """A switch's value; a typo (``maybe``, ``ture``) is refused, never read as off."""
    word = (v or "").strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    from ._errors import SettingsError

    raise SettingsError(
        f"{name}={v!r} is not a switch value{_close_matches(word, _TRUE + _FALSE[1:])}",
        f"one of {', '.join(_TRUE)} to turn it on, or {', '.join(_FALSE[1:])} or empty for off",
        f"set {name}=1 or {name}=0, or unset it",
    )


def _choice(v: str | None, name: str) -> str:
    word = (v or "").strip().lower()
    if word in ("", *_DISCOVERY):
        return word or "auto"
    from ._errors import SettingsError

    raise SettingsError(
        f"{name}={v!r} is not a discovery method{_close_matches(word, _DISCOVERY)}",
        f"one of {', '.join(_DISCOVERY)} (or unset, which is auto)",
        f"set {name}=importlib to ask importlib.metadata, or unset it",
    )


@frozen
class BackendStatus:
    """One candidate backend and what became of it."""

    name: str
    origin: str  # "builtin" or the distribution that declared it
    version: str
    target: str  # "module:attr"
    state: State
    probe: Probe | None = None
    error: str | None = None
    traceback: str | None = None
    priority: int | None = None
    device_type: str | None = None
    probe_ms: float = 0.0
    vendor: str | None = None  # the host-device key the backend declares

    @property
    def broken(self) -> bool:
        return self.state == "broken"

    @property
    def reason(self) -> str:
        if self.error:
            return self.error
        if self.probe is not None:
            return self.probe.reason
        return ""

    def to_dict(self, *, debug: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "origin": self.origin,
            "version": self.version,
            "target": self.target,
            "state": self.state,
            "priority": self.priority,
            "device_type": self.device_type,
            "vendor": self.vendor,
            "reason": self.reason,
            "probe": self.probe.to_dict() if self.probe else None,
            "error": self.error,
            "probe_ms": round(self.probe_ms, 3),
        }
        if debug:
            d["traceback"] = self.traceback
        return d


@frozen
class SelectionReport:
    """Why this process uses the backend it uses."""

    chosen: str
    device_type: str
    rule: str  # "forced", "priority", "only-available", "cpu-fallback"
    reason: str
    candidates: tuple[BackendStatus, ...]
    devices: tuple[Device, ...]
    env_read: Mapping[str, str | None]
    warnings: tuple[str, ...]
    timings_ms: Mapping[str, float]
    discovery: str
    host: Host
    visibility: Mapping[str, Any] | None = None
    debug: bool = False

    def status(self, name: str) -> BackendStatus:
        for c in self.candidates:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def broken(self) -> tuple[BackendStatus, ...]:
        return tuple(c for c in self.candidates if c.broken)

    def to_dict(self) -> dict[str, Any]:
        h = self.host
        return {
            "chosen": self.chosen,
            "device_type": self.device_type,
            "rule": self.rule,
            "reason": self.reason,
            "candidates": [c.to_dict(debug=self.debug) for c in self.candidates],
            "devices": [d.to_dict() for d in self.devices],
            "env_read": dict(self.env_read),
            "warnings": list(self.warnings),
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
            "discovery": self.discovery,
            "visibility": dict(self.visibility) if self.visibility is not None else None,
            "host": {
                "source": h.source,
                "system": h.system,
                "machine": h.machine,
                "cpu": h.cpu.model,
                "cpu_count": h.cpu.count,
                "torch": h.torch.to_dict() if h.torch else None,
                "accelerators": [d.to_dict() for d in h.devices],
            },
        }


# -- guarded plugin calls ------------------------------------------------------------------


_Broken = PluginFault  # what every guarded plugin call raises


def _guard(
    what: str,
    fn: Callable[[], _T],
    passthrough: tuple[type[BaseException], ...] = (),
    timeout: float | None = None,
) -> _T:
    """Run plugin code under ``hwbackends._guard.call``: a time limit, every exception and
    every environment write the plugin's own thread made become ``_Broken``."""
    return call(what, fn, timeout=timeout, passthrough=passthrough)


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
        return _guard(what, run, passthrough=passthrough)  # type: ignore[no-any-return]
    except _Broken as exc:
        raise PluginError(
            f"the {name} backend is broken: {exc.reason}",
            "a plugin whose methods return what the hwbackends.Backend protocol describes",
            "update or uninstall the plugin; `hwbackends plugins --check` lists broken plugins",
        ) from None


def api_problem(cls: type, dist: str = "the plugin") -> str | None:
    """Why a backend class's declared API version is refused, or None."""
    api = getattr(cls, "api_version", None)
    if api == API_VERSION:
        return None
    return (
        f"{cls.__name__} declares plugin API version {api!r} but this hwbackends speaks "
        f"version {API_VERSION}; install a release of {dist} built for hwbackends "
        f"API {API_VERSION}, or a hwbackends release matching the plugin"
    )


_IDENTITY = ("name", "device_type", "priority")
_METHODS = ("probe", "devices", "capabilities", "visibility_env")


def protocol_problems(
    inst: object, expected_name: str | None = None, *, values: Mapping[str, Any] | None = None
) -> list[str]:
    """What keeps a backend instance from satisfying the protocol (empty: nothing).

    ``values``: the attributes already read once from ``inst`` (each read exactly once, so a
    property that changes on a later access is judged by what selection will use)."""
    cls = type(inst).__name__
    got = (
        values
        if values is not None
        else {a: getattr(inst, a, None) for a in (*_IDENTITY, *_METHODS)}
    )
    missing = [
        attr
        for attr, kind in (("name", str), ("device_type", str), ("priority", int))
        if not isinstance(got.get(attr), kind) or isinstance(got.get(attr), bool)
    ]
    missing += [m for m in _METHODS if not callable(got.get(m))]
    problems = []
    if missing:
        problems.append(
            f"{cls} does not satisfy the Backend protocol: missing or mistyped "
            f"{', '.join(missing)} (see hwbackends.Backend; subclass hwbackends.plugin.BaseBackend)"
        )
    name = got.get("name")
    if expected_name is not None and isinstance(name, str) and name != expected_name:
        problems.append(
            f"{cls}.name is {name!r} but its entry point is named {expected_name!r}; "
            "they must be equal"
        )
    return problems


@frozen
class _Meta:
    """A backend's identity, read once when it loads: selection uses these copies, so an
    attribute that raises or changes type on a later access cannot derail it."""

    name: str
    device_type: str
    priority: int
    vendor: str | None


def _inspect(inst: object, expected_name: str) -> _Meta:
    values: dict[str, Any] = {a: getattr(inst, a, None) for a in (*_IDENTITY, *_METHODS, "vendor")}
    problems = protocol_problems(inst, expected_name, values=values)
    if problems:
        raise _Broken(problems[0])
    if expected_name != expected_name.lower():
        raise _Broken(
            f"the entry point name {expected_name!r} has upper-case letters, but backend names "
            f"are lower case (HWBACKENDS_BACKEND and get() lower-case what they are given); "
            f"rename the entry point and the class's name to {expected_name.lower()!r}"
        )
    vendor = values["vendor"]
    return _Meta(
        values["name"],
        values["device_type"],
        values["priority"],
        vendor if isinstance(vendor, str) and vendor else None,
    )


def _load(spec: EntryPointSpec, timeout: float | None = None) -> tuple[Backend, _Meta]:
    """Import, check and construct one plugin: one guarded call (one thread hand-off), each
    step named in the fault it raises."""

    def fail(step: str, exc: BaseException) -> PluginFault:
        import traceback

        return PluginFault(f"{step} raised {describe(exc)}", traceback.format_exc())

    def steps() -> tuple[Backend, _Meta]:
        try:
            __import__(spec.module)  # importlib itself is not needed for one import
            obj: Any = sys.modules[spec.module]
            for part in spec.attr.split(".") if spec.attr else ():
                obj = getattr(obj, part)
        except KeyboardInterrupt:
            raise  # inline: the user's Ctrl-C; on a worker the guard reports it as the plugin's
        except BaseException as exc:
            raise fail(f"importing {spec.value!r}", exc) from None
        if not isinstance(obj, type):
            raise _Broken(f"{spec.value!r} is a {type(obj).__name__}, expected a backend class")
        cls: type = obj
        try:
            problem = api_problem(cls, spec.dist)
        except Exception as exc:
            raise fail(f"reading {spec.value!r}.api_version", exc) from None
        if problem:
            raise _Broken(problem)
        try:
            inst = cls()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            raise fail(f"constructing {cls.__name__}()", exc) from None
        try:
            return inst, _inspect(inst, spec.name)
        except PluginFault:
            raise
        except Exception as exc:
            raise fail(f"reading the attributes of {cls.__name__}()", exc) from None

    return _guard(f"loading {spec.value!r}", steps, timeout=timeout)


def _probe(backend: Backend, meta: _Meta, host: Host, timeout: float | None) -> Probe:
    what = f"{meta.name}.probe()"
    p: Probe = _guard(what, lambda: checked(backend.probe(host), Probe, what), timeout=timeout)
    if p.backend != meta.name:
        raise _Broken(f"{what} returned a Probe for {p.backend!r}")
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

    return _guard(what, run, timeout=timeout)


# -- the registry --------------------------------------------------------------------------


@mutable
class _Candidate:
    spec: EntryPointSpec
    backend: Backend | None = None
    meta: _Meta | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def priority(self) -> int:
        return self.meta.priority if self.meta is not None else 0

    @property
    def device_type(self) -> str:
        return self.meta.device_type if self.meta is not None else self.spec.name


def _builtin_specs() -> list[EntryPointSpec]:
    return [EntryPointSpec("cpu", "hwbackends._cpu:CpuBackend", "hwbackends", _version())]


def _version() -> str:
    from ._version import __version__

    return __version__


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
    from ._catalog import KNOWN_PLUGINS

    names = set(installed) | {k.backend for k in KNOWN_PLUGINS}
    dists = {s.dist for specs in installed.values() for s in specs}
    dists |= {k.distribution for k in KNOWN_PLUGINS}
    for var, listed in (
        ("HWBACKENDS_PLUGINS", settings.allow or frozenset()),
        ("HWBACKENDS_DISABLE", settings.deny),
    ):
        for name in sorted(listed):
            if name in names or name in dists:
                continue
            raise BackendNotFoundError(
                f"{var} names {name!r}, which is no backend{_close_matches(name, names)}",
                f"comma-separated backend names from {', '.join(sorted(names))}",
                f"correct or remove {name!r} in {var} (`hwbackends plugins` lists the installed "
                "ones)",
            )


def _unknown_settings(env: Mapping[str, str]) -> list[str]:
    """A misspelled HWBACKENDS_* variable is otherwise ignored without a word."""
    out = []
    for key in sorted(k for k in env if k.startswith("HWBACKENDS_") and k not in SETTINGS_VARS):
        near = _close_matches(key, SETTINGS_VARS)
        known = near or f" (the variables are {', '.join(SETTINGS_VARS)})"
        out.append(f"{key} is not a hwbackends variable and is ignored{known}")
    return out


def _close_matches(name: str, names: Iterable[str]) -> str:
    import difflib

    near = difflib.get_close_matches(name, sorted(names), n=3, cutoff=0.5)
    return f" (did you mean {', '.join(map(repr, near))}?)" if near else ""


class Registry:
    """The discovered backends of one search path. ``select`` makes a ``SelectionReport``."""

    def __init__(
        self,
        specs: Iterable[EntryPointSpec] | None = None,
        *,
        path: list[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        t0 = time.perf_counter()
        if specs is None:
            found, method = discover(path, env=env)
        else:
            found, method = list(specs), "given"
        self.discovery = method
        self.discovery_ms = (time.perf_counter() - t0) * 1000
        self.specs = _builtin_specs() + found
        self._loaded: dict[int, tuple[Backend, _Meta] | _Broken] = {}
        self._load_lock = _thread.RLock()

    def names(self) -> list[str]:
        return sorted({s.name for s in self.specs})

    def load(self, spec: EntryPointSpec, timeout: float | None = None) -> Backend:
        """Import one plugin (once); raises ``_Broken``."""
        return self.loaded(spec, timeout)[0]

    def loaded(self, spec: EntryPointSpec, timeout: float | None = None) -> tuple[Backend, _Meta]:
        """The plugin's instance and the identity read from it at load; raises ``_Broken``."""
        key = id(spec)
        got = self._loaded.get(key)
        if got is None:
            with self._load_lock:  # threads asking at once import and construct it once
                got = self._loaded.get(key)
                if got is None:
                    got = self._loaded[key] = self._load_now(spec, timeout)
        if isinstance(got, _Broken):
            raise got
        return got

    def _load_and_probe(self, c: _Candidate, host: Host) -> tuple[Backend, _Meta, Probe, float]:
        """Plugin code for one candidate (run on a guard worker): its instance and identity,
        its probe, and how long both took. Returned, not stored: a call abandoned for hanging
        must not change the candidate later."""
        t0 = time.perf_counter()
        backend, meta = self.loaded(c.spec)
        if c.name in host.reader_errors:
            raise _Broken(f"reading the machine: {host.reader_errors[c.name]}")
        probe = _probe(backend, meta, host, None)
        return backend, meta, probe, (time.perf_counter() - t0) * 1000

    def preload(self, specs: Iterable[EntryPointSpec], timeout: float | None = None) -> None:
        """Load several plugins with one thread hand-off (``_guard.call_many``); the registry
        lock is not held while plugin code runs, so a plugin that hangs blocks nobody."""
        from ._fast import INSTANCES

        todo = [s for s in specs if id(s) not in self._loaded and INSTANCES.get(s.value) is None]
        if len(todo) < 2:
            return  # loaded() does it, with the same guard
        results = call_many(
            [(f"loading {s.value!r}", partial(_load, s, 0.0)) for s in todo], timeout=timeout
        )
        with self._load_lock:
            for s, (_ok, value) in zip(todo, results, strict=True):
                self._loaded.setdefault(id(s), value)  # (instance, meta) or the fault

    def _load_now(
        self, spec: EntryPointSpec, timeout: float | None
    ) -> tuple[Backend, _Meta] | _Broken:
        from ._fast import INSTANCES

        known = INSTANCES.get(spec.value)  # made by the selection cache in this process
        try:
            if known is None:
                return _load(spec, timeout)
            meta = _guard(
                f"reading the attributes of {type(known).__name__}()",
                lambda: _inspect(known, spec.name),
                timeout=timeout,
            )
            return known, meta
        except _Broken as exc:
            return exc

    def get(self, name: str) -> Backend:
        key = name.strip().lower()
        specs = [s for s in self.specs if s.name == key]
        if not specs:
            raise BackendNotFoundError(
                f"no backend named {name!r} is installed{_close_matches(key, self.names())}",
                f"one of {', '.join(self.names())}",
                f"install its plugin (pip install hwbackends-{key}) or pick an installed name",
            )
        conflict = _conflict(specs)
        if conflict and not specs[0].value.startswith("hwbackends._"):
            raise PluginError(conflict, fix="uninstall all but one of these distributions")
        # a plugin claiming a built-in name is reported by selection; the built-in stands
        try:
            return self.load(specs[0])
        except _Broken as exc:
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
                f"{_close_matches(settings.forced, by_name)}",
                f"one of {', '.join(sorted(by_name))}",
                f"install hwbackends-{settings.forced}, or unset HWBACKENDS_BACKEND",
            )
        _check_listed_names(settings, by_name)
        warnings.extend(_unknown_settings(env))

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
            if not _allowed(c.spec, settings):
                why = (
                    "listed in HWBACKENDS_DISABLE"
                    if _listed(c.spec, settings.deny)
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
        # for the lot, each call still with its own time limit (see _guard.call_many).
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
                        except _Broken:
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
            except _Broken as exc:
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
    (``_Broken``); a ``VisibilityError`` from reading the values is the user's, raised as is.
    """
    from .visibility import explain_visibility, rule_of

    rule = _guard(f"{c.name}.visibility", lambda: rule_of(backend), timeout=limit)
    variables = tuple(v for v in rule.variables if isinstance(v, str))
    rep = _guard(
        f"the {c.name} visibility rule",
        lambda: explain_visibility(backend, env, host),
        passthrough=(VisibilityError,),
        timeout=limit,
    )
    return rep, variables


def _replace_state(s: BackendStatus, state: State) -> BackendStatus:
    from ._record import replace

    return replace(s, state=state)


def _visible_vars(env: Mapping[str, str], vis_report: tuple[Any, tuple[str, ...]] | None) -> str:
    keys = [k for k in vis_report[1] if k in env] if vis_report is not None else []
    return ", ".join(f"{k}={env[k]!r}" for k in keys)


def _unserved_hardware(
    host: Host, statuses: Mapping[str, BackendStatus], by_name: Mapping[str, Any]
) -> list[str]:
    """Warnings for host hardware that no ready backend serves, each with the fix.

    Hardware a loaded backend claims is explained by that backend's probe; this covers the
    rest: a known plugin that is not installed, one that is broken or disabled, and
    accelerators nobody claims.
    """
    from ._catalog import core_checkout, install_command, known_for

    claimed: set[str] = set()
    for st in statuses.values():
        if st.state in ("available", "unavailable", "selected", "not-probed"):
            v = st.vendor
            if v:
                claimed.add(v)
    out: list[str] = []
    checkout: list[str | None] = []
    seen: set[str] = set()
    for d in host.devices:
        if d.vendor in claimed or d.vendor in seen:
            continue
        seen.add(d.vendor)
        n = sum(1 for x in host.devices if x.vendor == d.vendor)
        where = ", ".join(x.pci_bus_id or "?" for x in host.devices if x.vendor == d.vendor)
        k = known_for(d.vendor)
        if k is None:
            pid = f"{d.extra.get('pci_vendor_id', d.vendor)}:{d.pci_device_id or '?'}"
            out.append(
                f"{n} accelerator(s) that no installed backend claims (PCI {pid} at {where}). "
                "Fix: install the vendor's hwbackends plugin; `hwbackends plugins` lists the "
                "installed ones"
            )
            continue
        known_status = statuses.get(k.backend)
        if known_status is not None and known_status.state == "broken":
            out.append(
                f"{n} {k.display}(s) found, but the {k.backend} backend is broken: "
                f"{known_status.reason}. Fix: reinstall or update {known_status.origin}; "
                "`hwbackends plugins --check` shows the "
                "traceback"
            )
            continue
        if known_status is not None and known_status.state == "disabled":
            out.append(
                f"{n} {k.display}(s) found, but the {k.backend} backend is {known_status.reason}. "
                "Fix: change HWBACKENDS_PLUGINS / HWBACKENDS_DISABLE"
            )
            continue
        if k.backend in by_name:
            continue  # installed under this name but serving another vendor key: its probe says
        if not checkout:
            checkout.append(core_checkout())
        cmd, which = install_command(k.distribution, checkout[0])
        out.append(
            f"{n} {k.display}(s) found ({where}), but {k.distribution} is not installed. "
            f"Fix: {cmd} ({which})"
        )
    return out


def _listed(spec: EntryPointSpec, names: frozenset[str]) -> bool:
    return spec.name in names or spec.dist in names


def _allowed(spec: EntryPointSpec, s: Settings) -> bool:
    if _listed(spec, s.deny):
        return False
    if s.allow is None or spec.name == "cpu":
        return True  # the built-in cpu cannot be filtered out by an allow-list, only denied
    return _listed(spec, s.allow)


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
        _registry._load_lock = _thread.RLock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _default_registry() -> Registry:
    global _registry
    if _registry is None:
        _registry = Registry()
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
    from .visibility import rule_of

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


def installed_names() -> list[str]:
    """The names of every discovered backend, the built-in cpu included."""
    return _default_registry().names()


def installed_backends(env: Mapping[str, str] | None = None) -> list[Backend]:
    """Every backend that loads, less those disabled by ``HWBACKENDS_PLUGINS`` /
    ``HWBACKENDS_DISABLE``: whose declarations say what hardware to read."""
    settings = Settings.from_env(os.environ if env is None else env)
    reg = _default_registry()
    out: list[Backend] = []
    seen: set[str] = set()
    first = {s.name: s for s in reversed(reg.specs)}  # the first spec of each name wins
    reg.preload([s for s in first.values() if _allowed(s, settings)], timeout=settings.timeout)
    for spec in reg.specs:
        if spec.name in seen or not _allowed(spec, settings):
            continue
        seen.add(spec.name)
        try:
            out.append(reg.load(spec))
        except _Broken:
            continue  # selection reports it
    return out


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


def reset() -> None:
    """Forget the cached selection and discovery (tests; after installing a plugin)."""
    global _cached, _registry
    from . import _fast

    _cached = None
    _registry = None
    _fast._chosen = None
    _fast.INSTANCES.clear()
