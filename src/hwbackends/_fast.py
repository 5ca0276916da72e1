"""The selection cache: ``hwbackends.current()`` in a few milliseconds on a known machine.

A full selection imports every plugin and probes it (tens of milliseconds, most of it in
importing ``dataclasses``/``typing`` and the plugins' fact tables). Its answer depends only on
inputs that are cheap to fingerprint: the interpreter and ``sys.path`` (each directory's
mtime changes when a distribution is installed or removed), the PCI devices, ``/dev`` nodes and
loaded kernel modules, and the environment variables selection reads. When the fingerprint
matches the cached one, only the chosen backend's module is imported.

The fingerprint names no vendor: a full selection records, with its answer, what the installed
backends declare that it read (their visibility variables, the ``/dev`` folders of their node
patterns, their ``watch_paths``), and a later lookup compares exactly those. A ``marshal`` file
keyed on directory mtimes, written atomically, tolerant of read-only homes, with a bypass
switch.
Bypass: ``HWBACKENDS_NO_CACHE=1``. Never used with ``HWBACKENDS_HOST`` (a simulated host) or
``HWBACKENDS_STRICT`` (which must load every plugin). An edit of a plugin's source in place
(an editable install) is not noticed: use the bypass while developing a plugin.

This module imports only builtins: no typing, no dataclasses.
"""

from __future__ import annotations

import marshal
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._protocol import Backend

_FORMAT = 3
_KEEP = 16  # answers kept per interpreter

#: Backend instances made here, by entry-point value, so the registry reuses them.
INSTANCES: dict[str, Backend] = {}
#: "hit", "miss", "off" or "" (not asked yet): for tests and the benchmark.
LAST = ""
_chosen: Backend | None = None
_lock = None


def _listing(path: str) -> tuple[str, ...]:
    try:
        return tuple(sorted(os.listdir(path)))
    except OSError:
        return ()


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def fingerprint(root: str = "/") -> tuple[object, ...]:
    """Everything the default selection depends on, cheaply."""
    env = os.environ
    relevant = tuple(
        sorted((k, env[k]) for k in env if k.startswith("HWBACKENDS_") or "VISIBLE" in k)
    )
    return (_machine_part(root), relevant, _paths_part())


def _paths_part() -> tuple[object, ...]:
    # sys.path[0] is the script's folder ('' for -c): it changes with the program and the
    # working directory, and holds a distribution only in odd layouts, so it counts only then.
    entries = list(sys.path)
    if entries and not any(n.endswith((".dist-info", ".egg-info")) for n in
                           _listing(entries[0] or ".")):  # fmt: skip
        entries = entries[1:]
    return tuple((p, _mtime(p or ".")) for p in entries)


def _machine_part(root: str) -> tuple[object, ...]:
    from ._version import API_VERSION, __version__

    j = os.path.join
    modules = tuple(m for m in _listing(j(root, "sys/module")) if not m.startswith("_"))
    return (
        _FORMAT,
        __version__,
        API_VERSION,
        sys.executable,
        sys.version,
        _listing(j(root, "sys/bus/pci/devices")),
        _listing(j(root, "dev")),
        modules,
        os.uname().sysname if hasattr(os, "uname") else sys.platform,
    )


def detail(watch: tuple[tuple[str, ...], tuple[str, ...]], root: str = "/") -> tuple[object, ...]:
    """The values of what the installed backends declared they read (see ``watch_lists``)."""
    env = os.environ
    names, paths = watch
    return (
        tuple(env.get(k) for k in names),
        tuple((_listing(os.path.join(root, p)), _mtime(os.path.join(root, p))) for p in paths),
    )


def cache_file() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    tag = 2166136261  # FNV-1a of the interpreter: one file per environment, no zlib import
    for ch in f"{sys.executable}\0{sys.prefix}".encode():
        tag = ((tag ^ ch) * 16777619) & 0xFFFFFFFF
    return os.path.join(base, "hwbackends", f"selection-{tag:08x}.marshal")


def enabled() -> bool:
    env = os.environ
    return not any(
        (env.get(k) or "").strip() not in ("", "0")
        for k in ("HWBACKENDS_NO_CACHE", "HWBACKENDS_HOST", "HWBACKENDS_STRICT")
    )


def _instantiate(value: str) -> Backend:
    module, _, attr = value.partition(":")
    name = module.strip()
    __import__(name)  # cheaper than importing importlib for one import
    obj: object = sys.modules[name]
    for part in attr.partition("[")[0].strip().split("."):
        obj = getattr(obj, part)
    inst = INSTANCES.get(value)
    if inst is None:
        inst = INSTANCES[value] = obj()  # type: ignore[operator]
    return inst


def cached_backend() -> Backend | None:
    """The cached choice for this fingerprint, or None (then the full selection runs).

    Thread-safe: concurrent first calls get one answer."""
    global _lock
    if _chosen is not None:
        return _chosen
    if _lock is None:
        import _thread

        _lock = _thread.allocate_lock()
    with _lock:
        if _chosen is not None:
            return _chosen
        return _select()


def _select() -> Backend | None:
    global LAST, _chosen
    reg = sys.modules.get("hwbackends._registry")  # not imported: no registry exists yet
    if reg is not None and (reg._registry is not None or reg._cached is not None):
        LAST = "off"  # the process already has a registry: its answer is authoritative
        return None
    if not enabled():
        LAST = "off"
        return None
    fp = fingerprint()
    path = cache_file()
    try:
        with open(path, "rb") as f:
            stored = marshal.load(f)
    except (OSError, EOFError, ValueError, TypeError):
        stored = None
    answers = stored if isinstance(stored, dict) else {}
    entry = answers.get(fp)
    found = None
    if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], dict):
        watch = entry[0]
        if (
            isinstance(watch, tuple)
            and len(watch) == 2
            and all(isinstance(w, tuple) and all(isinstance(x, str) for x in w) for w in watch)
        ):
            found = entry[1].get(detail(watch))
    if isinstance(found, tuple) and len(found) == 2:
        try:
            backend = _instantiate(found[1])
        except Exception:
            backend = None  # a plugin that fails now: the full selection will say why
        if backend is not None and getattr(backend, "name", None) == found[0]:
            LAST = "hit"
            _chosen = backend
            return backend
    LAST = "miss"
    from . import _registry

    chosen = _registry.current()
    value = _registry.entry_point_value(chosen.name)
    if value is not None:
        INSTANCES.setdefault(value, chosen)
        watch = _registry.watch_lists()
        old = answers.pop(fp, None)
        by_detail = old[1] if isinstance(old, tuple) and old[0] == watch else {}
        by_detail.pop(detail(watch), None)
        by_detail[detail(watch)] = (chosen.name, value)
        # Several answers per interpreter (programs whose paths or variables differ), the
        # most recent last; the oldest go first.
        answers[fp] = (watch, dict(list(by_detail.items())[-_KEEP:]))
        _store(path, dict(list(answers.items())[-_KEEP:]))
    _chosen = chosen
    return chosen


def _store(path: str, record: dict[Any, Any]) -> None:
    """Write atomically; a read-only or missing home is not an error."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            marshal.dump(record, f)
        os.replace(tmp, path)
    except (OSError, ValueError):
        pass
