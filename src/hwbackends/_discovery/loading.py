"""Loading plugins: import an entry point under the guard, check it, construct it, once.

The installed backends' declarations (PCI ids, ``/dev`` patterns, hooks) are what the machine
reader reads through, so loading sits below the machine model and selection: the default
:class:`Plugins` is shared by the reader and the selection registry, and one instance of each
plugin serves both."""

from __future__ import annotations

import _thread
import os
import sys
import time

from hwbackends._base.guard import PluginFault, Scope, call, call_many, describe, plain
from hwbackends._base.protocol import API_VERSION
from hwbackends._base.record import frozen
from hwbackends._base.settings import Settings, allowed, disabled_reason
from hwbackends._discovery.instances import INSTANCES
from hwbackends._discovery.scan import EntryPointSpec, discover

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any, TypeVar

    from hwbackends._base.protocol import Backend

    _T = TypeVar("_T")
    _Select = TypeVar("_Select", bound=Callable[..., Any])

Broken = PluginFault  # what every guarded plugin call raises


def guarded(
    what: str,
    fn: Callable[[], _T],
    passthrough: tuple[type[BaseException], ...] = (),
    timeout: float | None = None,
    owner: str | None = None,
) -> _T:
    """Run plugin code under ``hwbackends._base.guard.call``: a time limit, every exception and
    every environment write the plugin's own thread made become ``Broken``; once a call of
    ``owner`` hangs, its later calls fail at once."""
    return call(what, fn, timeout=timeout, passthrough=passthrough, owner=owner)


def selecting(select: _Select) -> _Select:
    """Decorates ``Registry.select(env, host, settings)``: its plugin calls end by the overall
    deadline (``HWBACKENDS_DEADLINE``), and under ``HWBACKENDS_STRICT=1`` an edit a plugin
    call makes is a fault, as a broken plugin is."""

    def run(self: Any, env: Mapping[str, str], host: Any, settings: Settings | None = None) -> Any:
        s = Settings.from_env(env) if settings is None else settings
        with Scope(s.deadline, s.strict):
            return select(self, env, host, s)

    # functools.wraps, without importing functools (1 ms with collections) on this path
    run.__name__, run.__qualname__ = select.__name__, select.__qualname__
    run.__doc__, run.__wrapped__ = select.__doc__, select  # type: ignore[attr-defined]
    return run  # type: ignore[return-value]


def api_problem(cls: type, dist: str = "the plugin") -> str | None:
    """Why a backend class's declared plugin API version is refused, or None.

    The class must declare ``api_version`` itself (``BaseBackend`` carries none): a plugin
    written for API 1 must not pass for one written for whatever the installed core speaks."""
    from hwbackends._version import __version__

    api = getattr(cls, "api_version", None)
    if type(api) is int and api == API_VERSION:
        return None
    speaks = f"hwbackends {__version__} speaks plugin API version {API_VERSION}"
    if api is None:
        return (
            f"{cls.__name__} declares no plugin API version (no api_version in its class); "
            f"{speaks}: install a release of {dist} that declares it, or add "
            f"`api_version = {API_VERSION}` to the class if it is written for that API"
        )
    if type(api) is not int:
        return (
            f"{cls.__name__}.api_version is {api!r}, expected an int (the plugin API version "
            f"it was written for); {speaks}"
        )
    return (
        f"{cls.__name__} was written for plugin API version {api}, but {speaks}; install a "
        f"release of {dist} written for API {API_VERSION}, or a hwbackends release that "
        f"speaks API {api} (the docs list them: Writing a backend, 'Plugin API versions')"
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
class Meta:
    """A backend's identity and declarations, read once (inside the guard) when it loads:
    selection and the machine reader use these plain copies, so an attribute that raises,
    hangs or changes type on a later access cannot derail them, and no plugin object (a
    ``str`` subclass with its own ``__format__``) leaves the guard."""

    name: str
    device_type: str
    priority: int
    vendor: str | None
    replaces: str | None = None  # the backend name this one declares it replaces
    pci_vendor_ids: tuple[int, ...] = ()
    #: None: not read at load, because it may load a fact table (``only_known_ids``); the
    #: reader reads it, under the guard, when a PCI function of one of the vendor ids is found
    pci_device_ids: tuple[int, ...] | None = None
    pci_classes: tuple[int, ...] = ()
    device_nodes: tuple[str, ...] = ()
    watch_paths: tuple[str, ...] = ()
    device_node_units: tuple[str, ...] = ()
    driver_modules: tuple[str, ...] = ()
    evidence_sources: tuple[str, ...] = ()
    #: reading hooks the plugin overrides (BaseBackend's own run inline, without a hand-off)
    own_hooks: tuple[str, ...] = ("read_devices", "read_drivers")


def read_ints(v: object) -> tuple[int, ...]:
    """A declaration's integers as exact builtin copies (what is not an int is left out)."""
    return _ints(v)


def _ints(v: object) -> tuple[int, ...]:
    if not isinstance(v, (tuple, list, frozenset, set)):
        return ()
    return tuple(plain(x) for x in v if isinstance(x, int) and not isinstance(x, bool))


def _strs(v: object) -> tuple[str, ...]:
    if not isinstance(v, (tuple, list)):
        return ()
    return tuple(plain(x) for x in v if isinstance(x, str))


_DECLARED = ("vendor", "pci_vendor_ids", "pci_classes", "device_nodes", "watch_paths",
             "device_node_units", "driver_modules", "evidence_sources")  # fmt: skip


def inspect_backend(inst: object, expected_name: str | None) -> Meta:
    """Read every attribute selection and the reader use, once: call it under the guard."""
    values: dict[str, Any] = {
        a: getattr(inst, a, None) for a in (*_IDENTITY, *_METHODS, "replaces")
    }
    problems = protocol_problems(inst, expected_name, values=values)
    if problems:
        raise Broken(problems[0])
    if expected_name is not None and expected_name != expected_name.lower():
        raise Broken(
            f"the entry point name {expected_name!r} has upper-case letters, but backend names "
            f"are lower case (HWBACKENDS_BACKEND and get() lower-case what they are given); "
            f"rename the entry point and the class's name to {expected_name.lower()!r}"
        )
    declared = {a: getattr(inst, a, None) for a in _DECLARED}
    vendor = declared["vendor"]
    replaces = values["replaces"]
    if replaces is not None and (
        not isinstance(replaces, str) or not replaces or replaces != replaces.strip().lower()
    ):
        raise Broken(
            f"{type(inst).__name__}.replaces is {replaces!r}, expected None or the lower-case "
            "name of the backend it replaces (such as 'cuda')"
        )
    cls = type(inst)
    return Meta(
        plain(values["name"]),
        plain(values["device_type"]),
        plain(values["priority"]),
        plain(vendor) if isinstance(vendor, str) and vendor else None,
        plain(replaces),
        _ints(declared["pci_vendor_ids"]),
        None,
        _ints(declared["pci_classes"]),
        _strs(declared["device_nodes"]),
        _strs(declared["watch_paths"]),
        _strs(declared["device_node_units"]),
        _strs(declared["driver_modules"]),
        _strs(declared["evidence_sources"]),
        tuple(
            h
            for h in ("read_devices", "read_drivers")
            if not getattr(getattr(cls, h, None), "hwbackends_default", False)
        ),
    )


# id(instance) -> (instance, its Meta): the reader and watch lists look declarations up here
_declared: dict[int, tuple[object, Meta]] = {}


def _remember(inst: object, meta: Meta) -> Meta:
    _declared[id(inst)] = (inst, meta)
    return meta


def meta_of(inst: object, timeout: float | None = None) -> Meta:
    """The declarations of a backend instance, read once under the guard (``Broken`` if
    reading them fails): those of a loaded plugin, or read now for one made elsewhere."""
    got = _declared.get(id(inst))
    if got is not None and got[0] is inst:
        return got[1]
    meta = guarded(
        f"reading the declarations of {type(inst).__name__}()",
        lambda: inspect_backend(inst, None),
        timeout=timeout,
    )
    return _remember(inst, meta)


def _load_job(spec: EntryPointSpec) -> Callable[[], tuple[Backend, Meta]]:
    return lambda: load_plugin(spec, 0.0)  # functools.partial: 1 ms of imports


def load_plugin(spec: EntryPointSpec, timeout: float | None = None) -> tuple[Backend, Meta]:
    """Import, check and construct one plugin: one guarded call (one thread hand-off), each
    step named in the fault it raises."""

    def fail(step: str, exc: BaseException) -> PluginFault:
        import traceback

        return PluginFault(f"{step} raised {describe(exc)}", traceback.format_exc())

    def steps() -> tuple[Backend, Meta]:
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
            raise Broken(f"{spec.value!r} is a {type(obj).__name__}, expected a backend class")
        cls: type = obj
        try:
            problem = api_problem(cls, spec.dist)
        except Exception as exc:
            raise fail(f"reading {spec.value!r}.api_version", exc) from None
        if problem:
            raise Broken(problem)
        try:
            inst = cls()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            raise fail(f"constructing {cls.__name__}()", exc) from None
        try:
            return inst, _remember(inst, inspect_backend(inst, spec.name))
        except PluginFault:
            raise
        except Exception as exc:
            raise fail(f"reading the attributes of {cls.__name__}()", exc) from None

    return guarded(f"loading {spec.value!r}", steps, timeout=timeout, owner=spec.name)


def builtin_specs() -> list[EntryPointSpec]:
    return [EntryPointSpec("cpu", "hwbackends._kit.cpu:CpuBackend", "hwbackends", _version())]


def _version() -> str:
    from hwbackends._version import __version__

    return __version__


class Plugins:
    """The entry points of one search path, each plugin loaded (imported, checked,
    constructed) at most once."""

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
        self.specs = builtin_specs() + found
        self._loaded: dict[int, tuple[Backend, Meta] | Broken] = {}
        self._load_lock = _thread.RLock()

    def share(self, other: Plugins) -> None:
        """Use ``other``'s entry points and loaded plugins (the same objects, not copies)."""
        self.__dict__.update(other.__dict__)

    def names(self) -> list[str]:
        return sorted({s.name for s in self.specs})

    def load(self, spec: EntryPointSpec, timeout: float | None = None) -> Backend:
        """Import one plugin (once); raises ``Broken``."""
        return self.loaded(spec, timeout)[0]

    def loaded(self, spec: EntryPointSpec, timeout: float | None = None) -> tuple[Backend, Meta]:
        """The plugin's instance and the identity read from it at load; raises ``Broken``."""
        key = id(spec)
        got = self._loaded.get(key)
        if got is None:
            with self._load_lock:  # threads asking at once import and construct it once
                got = self._loaded.get(key)
                if got is None:
                    got = self._loaded[key] = self._load_now(spec, timeout)
        if isinstance(got, Broken):
            raise got
        return got

    def preload(self, specs: Iterable[EntryPointSpec], timeout: float | None = None) -> None:
        """Load several plugins with one thread hand-off (``guarded.call_many``); the registry
        lock is not held while plugin code runs, so a plugin that hangs blocks nobody."""
        todo = [
            s
            for s in specs
            if id(s) not in self._loaded
            and INSTANCES.get(s.value) is None
            and not (s.value.startswith("hwbackends._") and s.dist == "hwbackends")
        ]
        if len(todo) < 2:
            return  # loaded() does it, with the same guard
        results = call_many(
            [(f"loading {s.value!r}", _load_job(s), s.name) for s in todo],
            timeout=timeout,
        )
        with self._load_lock:
            for s, (_ok, value) in zip(todo, results, strict=True):
                self._loaded.setdefault(id(s), value)  # (instance, meta) or the fault

    def _load_now(
        self, spec: EntryPointSpec, timeout: float | None
    ) -> tuple[Backend, Meta] | Broken:
        known = INSTANCES.get(spec.value)  # made by the selection cache in this process
        if spec.value.startswith("hwbackends._") and spec.dist == "hwbackends":
            timeout = 0.0  # the built-in is hwbackends' own code: no plugin time limit
        try:
            if known is None:
                return load_plugin(spec, timeout)
            meta = guarded(
                f"reading the attributes of {type(known).__name__}()",
                lambda: inspect_backend(known, spec.name),
                timeout=timeout,
                owner=spec.name,
            )
            return known, _remember(known, meta)
        except Broken as exc:
            return exc


# -- several distributions claiming one backend name -------------------------------------


def clash_message(name: str, specs: list[EntryPointSpec]) -> tuple[str, str]:
    """``(what, fix)`` for a name several distributions claim: one wording for every surface
    (selection's report, ``get``, ``env``, ``plugins --check``)."""
    targets = "; ".join(f"{s.dist} {s.version} ({s.value})" for s in specs)
    dists = sorted({s.dist for s in specs})
    what = f"backend name {name!r} is claimed by {len(specs)} plugins: {targets}"
    if len(dists) > 1:
        keep = " or ".join(
            f"HWBACKENDS_DISABLE={','.join(o for o in dists if o != d)} to use {d}" for d in dists
        )
        fix = f"set {keep} (or uninstall all but one)"
    else:
        fix = f"reinstall or update {dists[0]}: it declares {name!r} more than once"
    return what, (
        f"{fix}; a plugin meant to replace another declares replaces = {name!r} in its backend"
    )


def clash_error(name: str, specs: list[EntryPointSpec]) -> str:
    """The clash as one line: what ``str(PluginError(what, fix=fix))`` says."""
    what, fix = clash_message(name, specs)
    return f"{what}. Fix: {fix}."


def resolve_claims(
    plugins: Plugins,
    specs: list[EntryPointSpec],
    settings: Settings,
    timeout: float | None = None,
) -> tuple[
    EntryPointSpec | None, list[tuple[EntryPointSpec, str, str | None]], list[EntryPointSpec]
]:
    """Which of the plugins claiming one name is used: ``(winner, set aside, clash)``.

    The settings come first (a distribution name in ``HWBACKENDS_DISABLE`` or
    ``HWBACKENDS_PLUGINS`` picks one); of two or more left, the one plugin that declares
    ``replaces = <this name>`` wins and the others are set aside as replaced. Otherwise no
    winner, and ``clash`` lists the claimants. Set aside: ``(spec, reason, replaced by)``.
    """
    active = [s for s in specs if allowed(s, settings)]
    aside: list[tuple[EntryPointSpec, str, str | None]] = [
        (s, disabled_reason(s, settings), None) for s in specs if not allowed(s, settings)
    ]
    if len(active) < 2:
        return (active[0] if active else None), aside, []
    name = specs[0].name
    replacing: list[EntryPointSpec] = []
    for s in active:
        try:
            if plugins.loaded(s, timeout)[1].replaces == name:
                replacing.append(s)
        except Broken:
            continue  # reported as the clash; a broken plugin replaces nothing
    if len(replacing) == 1 and len({s.dist for s in active}) == len(active):
        w = replacing[0]
        aside += [
            (s, f"replaced by {w.dist} (it declares replaces = {name!r})", w.dist)
            for s in active
            if s is not w
        ]
        return w, aside, []
    return None, aside, active


# -- the installed plugins of this process --------------------------------------------------

# Made at import, not on first use: two threads must never each make their own.
_default_lock = _thread.allocate_lock()
_default: Plugins | None = None


def default_plugins() -> Plugins:
    """The plugins installed on ``sys.path``, discovered once per process (``reset`` forgets)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Plugins()
    return _default


def installed_backends(
    env: Mapping[str, str] | None = None, plugins: Plugins | None = None
) -> list[Backend]:
    """Every backend of ``plugins`` (default: the installed ones) that loads, less those
    disabled by ``HWBACKENDS_PLUGINS`` / ``HWBACKENDS_DISABLE``: whose declarations say what
    hardware to read."""
    settings = Settings.from_env(os.environ if env is None else env)
    if plugins is None:
        plugins = default_plugins()
    out: list[Backend] = []
    by_name: dict[str, list[EntryPointSpec]] = {}
    for s in plugins.specs:
        by_name.setdefault(s.name, []).append(s)
    plugins.preload([s for s in plugins.specs if allowed(s, settings)], timeout=settings.timeout)
    for specs in by_name.values():
        builtin = [s for s in specs if s.value.startswith("hwbackends._")]
        if builtin:  # a plugin cannot take a built-in's name (selection reports it)
            use: EntryPointSpec | None = builtin[0] if allowed(builtin[0], settings) else None
        else:
            winner, _aside, clash = resolve_claims(plugins, specs, settings, settings.timeout)
            # an unresolved clash: selection reports it; the first claimant's declarations
            # still say what hardware to read
            use = winner or (clash[0] if clash else None)
        if use is None:
            continue
        try:
            out.append(plugins.load(use))
        except Broken:
            continue  # selection reports it
    return out


def forget() -> None:
    """Forget the discovered entry points and loaded plugins (``hwbackends.reset``)."""
    global _default
    _default = None
    INSTANCES.clear()
    _declared.clear()  # a plugin whose call still hangs stays refused (the guard's hung list)


def _after_fork_in_child() -> None:
    # A thread of the parent may have held these at fork; it does not exist in the child.
    global _default_lock
    _default_lock = _thread.allocate_lock()
    if _default is not None:
        _default._load_lock = _thread.RLock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)
