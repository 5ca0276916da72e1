"""The selection cache: ``hwbackends.current()`` in a few milliseconds on a known machine.

A full selection imports every plugin and probes it (tens of milliseconds, most of it in
importing ``dataclasses``/``typing`` and the plugins' fact tables). Its answer depends only on
inputs that are cheap to fingerprint: the interpreter and ``sys.path`` (each directory's
mtime changes when a distribution is installed or removed), where ``torch/version.py`` is and
its stat, the PCI devices, ``/dev`` nodes and loaded kernel modules, and the environment
variables selection reads. When the fingerprint matches the cached one, only the chosen
backend's module is imported.

The fingerprint names no vendor: a full selection records, with its answer, what the installed
backends declare that it read (their visibility variables, the ``/dev`` folders of their node
patterns, their ``watch_paths``), and a later lookup compares exactly those.

What is stored, and how it is trusted:

- The folder is ``$XDG_CACHE_HOME/hwbackends`` (an absolute ``XDG_CACHE_HOME`` only, as the
  XDG spec says) or ``~/.cache/hwbackends``; with no home directory there is no cache. It is
  created 0700 and opened with ``O_NOFOLLOW``; it is used only if it is a real directory owned
  by this user, and its group/other permissions are removed. Another user's folder, or a
  symlink planted in its place, turns the cache off for this process.
- Files are opened relative to that folder's descriptor with ``O_NOFOLLOW | O_NONBLOCK`` and
  used only if they are regular files owned by this user, at most ``_MAX_BYTES`` long. A FIFO,
  a symlink or a huge file is ignored, never waited on.
- Writes go to a fresh ``O_CREAT | O_EXCL`` file, mode 0600, then ``os.replace``.
- The payload starts with a BLAKE2b digest of itself: ``marshal`` only ever reads bytes this
  code wrote, so a truncated or corrupt file cannot make it allocate gigabytes.
- Keys are BLAKE2b digests of the fingerprint and of the watched values: no variable's value
  (a ``TPU_*`` token, say) is written to disk.
- An answer is a backend *name* and the ``*.dist-info`` folder that declared it. A hit reads
  that folder's ``entry_points.txt`` (it must be directly on ``sys.path``) and imports what the
  installed metadata says, as discovery would; nothing read from the cache is imported.

Bypass: ``HWBACKENDS_NO_CACHE=1``. Never used with ``HWBACKENDS_HOST`` (a simulated host) or
``HWBACKENDS_STRICT`` (which must load every plugin). An edit of a plugin's source in place
(an editable install) is not noticed: use the bypass while developing a plugin.

This module imports only builtins: no typing, no dataclasses.
"""

from __future__ import annotations

import _thread
import marshal
import os
import sys

from hwbackends._discovery.instances import INSTANCES
from hwbackends._selection.snapshot import environ_snapshot
from hwbackends._selection.view import BackendView, _views, view_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from hwbackends._base.protocol import Backend

_FORMAT = 5
_MAGIC = b"hwbsel5\n"
_KEEP = 16  # answers kept per interpreter
_MAX_BYTES = 1 << 20  # a full file is ~10 kB; anything far larger is not ours
_GROUP = "hwbackends.backends"
_BUILTIN = {"cpu": "hwbackends._kit.cpu:CpuBackend"}

#: "hit", "miss", "off" or "" (not asked yet): for tests and the benchmark.
LAST = ""
_chosen: Backend | None = None
_identity: tuple[str, str, int] | None = None  # _chosen's, copied on a hit: no loading import
#: The environment's copy a cached answer was looked up with: the process's selection, made
#: later (an integration call, ``explain()``), reads the same one, so both answer one state.
answered_env: dict[str, str] | None = None
_lock = _thread.allocate_lock()  # at import: two threads must never each make their own


def _after_fork_in_child() -> None:
    global _lock
    _lock = _thread.allocate_lock()  # one held by a thread absent from the child never opens


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


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


def fingerprint(root: str = "/", env: Any = None) -> tuple[object, ...]:
    """Everything the default selection depends on, cheaply; ``env``: the environment's
    snapshot (None: a new one)."""
    if env is None:
        env = environ_snapshot()
    relevant = tuple(
        sorted((k, env[k]) for k in env if k.startswith("HWBACKENDS_") or "VISIBLE" in k)
    )
    return (_machine_part(root), relevant, _paths_part(), _torch_part())


def _paths_part() -> tuple[object, ...]:
    # sys.path[0] is the script's folder ('' for -c): it changes with the program and the
    # working directory, and holds a distribution only in odd layouts, so it counts only then.
    entries = list(sys.path)
    if entries and not any(n.endswith((".dist-info", ".egg-info")) for n in
                           _listing(entries[0] or ".")):  # fmt: skip
        entries = entries[1:]
    return tuple((p, _mtime(p or ".")) for p in entries)


def _torch_part() -> tuple[object, ...]:
    # The host reader takes torch's build from the first torch/version.py on sys.path, the
    # script's folder included: a torch/ folder where `python -c` runs, or torch rebuilt in
    # place (version.py rewritten, the dist-info untouched), changes the answer.
    for entry in sys.path:
        try:
            st = os.stat(os.path.join(entry or ".", "torch", "version.py"))
        except OSError:
            continue
        return (entry, st.st_mtime_ns, st.st_size, st.st_ino)
    return ()


def _machine_part(root: str) -> tuple[object, ...]:
    from hwbackends._version import API_VERSION, __version__

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


def detail(
    watch: tuple[tuple[str, ...], tuple[str, ...]], root: str = "/", env: Any = None
) -> tuple[object, ...]:
    """The values of what the installed backends declared they read (see ``watch_lists``):
    variables from ``env`` (the environment's snapshot; None: a new one), each path's listing,
    mtime and, for a file (a driver's ``/sys/module/<m>/version``), its first bytes."""
    if env is None:
        env = environ_snapshot()
    names, paths = watch
    return (
        tuple(env.get(k) for k in names),
        tuple(_trace(os.path.join(root, p)) for p in paths),
    )


def _trace(path: str) -> tuple[object, ...]:
    # a file's content counts: sysfs and procfs keep a file's mtime when the driver behind it
    # is replaced, and its version is what selection reads
    try:
        fd = os.open(path, os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC)
    except FileNotFoundError:  # most watched paths, on most machines: one syscall, not three
        return ((), -1)
    except OSError:
        return (_listing(path), _mtime(path))
    try:
        st = os.fstat(fd)
        if st.st_mode & _S_IFMT == _S_IFDIR:
            return (_listing(path), st.st_mtime_ns)
        if st.st_mode & _S_IFMT != _S_IFREG:
            return ((), st.st_mtime_ns)
        return ((), st.st_mtime_ns, os.read(fd, 4096))
    except OSError:
        return ((), -1)
    finally:
        os.close(fd)


def _digest(data: bytes) -> bytes:
    try:
        from _blake2 import blake2b  # the C module itself: hashlib costs ten times more
    except ImportError:  # pragma: no cover - Pythons built without it
        from hashlib import blake2b
    return blake2b(data, digest_size=16).digest()


def _key(obj: object) -> bytes:
    # repr of nested tuples of str/int/None is stable across processes (hash() is not)
    return _digest(repr(obj).encode("utf-8", "surrogatepass"))


def cache_dir() -> str | None:
    """The cache folder for this user, or None when there is no safe place for one."""
    env = os.environ
    base = env.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(base):  # relative or unset: invalid per the XDG spec
        home = env.get("HOME")
        if home is None:
            home = os.path.expanduser("~")  # the passwd entry; "~" back when there is none
        if not os.path.isabs(home):  # empty, relative or unknown: never write to "./~"
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "hwbackends")


def cache_file() -> str | None:
    """The cache file of this interpreter (one per environment), or None."""
    folder = cache_dir()
    return os.path.join(folder, _file_name()) if folder else None


def _file_name() -> str:
    tag = 2166136261  # FNV-1a of the interpreter: one file per environment
    for ch in f"{sys.executable}\0{sys.prefix}".encode("utf-8", "surrogatepass"):
        tag = ((tag ^ ch) * 16777619) & 0xFFFFFFFF
    return f"selection-{tag:08x}.bin"


_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_S_IFMT, _S_IFREG, _S_IFDIR = 0o170000, 0o100000, 0o040000


def _open_dir(create: bool) -> int | None:
    """A descriptor of the cache folder if it is this user's own private folder, else None."""
    if not (_O_NOFOLLOW and _O_DIRECTORY) or os.open not in os.supports_dir_fd:
        return None  # no safe relative opens on this platform: no cache
    path = cache_dir()
    if path is None:
        return None
    if create:
        try:
            os.makedirs(os.path.dirname(path), 0o700, exist_ok=True)
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return None
    try:
        fd = os.open(path, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        uid = os.getuid()
        if st.st_mode & _S_IFMT != _S_IFDIR or st.st_uid != uid:
            os.close(fd)
            return None  # another user's folder, whatever its mode: not ours to trust
        if st.st_mode & 0o077:
            os.fchmod(fd, st.st_mode & 0o700)  # ours, but made by an older release or umask
    except OSError:
        os.close(fd)
        return None
    return fd


def _read(dfd: int) -> dict[Any, Any]:
    try:
        fd = os.open(_file_name(), os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return {}
    try:
        st = os.fstat(fd)
        if (
            st.st_mode & _S_IFMT != _S_IFREG  # a FIFO or device: never read, never wait
            or st.st_uid != os.getuid()
            or st.st_size > _MAX_BYTES
        ):
            return {}
        chunks, size = [], 0
        while size <= _MAX_BYTES:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        return {}
    finally:
        os.close(fd)
    data = b"".join(chunks)
    head = len(_MAGIC) + 16
    if (
        size > _MAX_BYTES
        or data[: len(_MAGIC)] != _MAGIC
        or _digest(data[head:]) != data[len(_MAGIC) : head]
    ):
        return {}
    try:
        stored = marshal.loads(data[head:])
    except Exception:
        return {}
    return stored if isinstance(stored, dict) else {}


def _store(dfd: int, record: dict[Any, Any]) -> None:
    """Write atomically into the private folder; a failure is never an error."""
    try:
        payload = marshal.dumps(record)
    except ValueError:
        return
    data = _MAGIC + _digest(payload) + payload
    tmp = f".selection-{os.getpid()}-{os.urandom(8).hex()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o600, dir_fd=dfd)
    except OSError:
        return
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, _file_name(), src_dir_fd=dfd, dst_dir_fd=dfd)
    except OSError:
        try:  # noqa: SIM105 - contextlib is not imported on this path
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass


def enabled(env: Any = None) -> bool:
    """False when a setting asks for the full selection: the bypass, strict mode, a
    simulated host, or a value only the full path can judge (it reports the typo)."""
    if env is None:
        env = environ_snapshot()
    if (env.get("HWBACKENDS_HOST") or "").strip():
        return False
    return all(
        (env.get(k) or "").strip().lower() in ("", "0", "false", "no", "off")
        for k in ("HWBACKENDS_NO_CACHE", "HWBACKENDS_STRICT")
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


def _declared_value(name: str, source: str) -> str | None:
    """What the installed metadata in ``source`` declares for ``name``, or None.

    ``source`` comes from the cache: it is accepted only as a ``*.dist-info``/``*.egg-info``
    folder directly on ``sys.path``, and only the entry point it declares is used."""
    if not isinstance(source, str) or not source.endswith((".dist-info", ".egg-info")):
        return None
    base = os.path.basename(source)
    if (
        os.sep in base
        or base.startswith(".")
        or not any(os.path.join(p or ".", base) == source for p in sys.path)
    ):
        return None
    try:
        fd = os.open(
            os.path.join(source, "entry_points.txt"), os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC
        )
    except OSError:
        return None
    try:
        if os.fstat(fd).st_mode & _S_IFMT != _S_IFREG:
            return None
        text = os.read(fd, _MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)
    from hwbackends._discovery.entry_points import parse_entry_points

    for ep_name, value in parse_entry_points(text, _GROUP):
        if ep_name == name:
            return value
    return None


def cached_backend() -> Backend | None:
    """The cached choice for this fingerprint, or None (then the full selection runs).

    Thread-safe: concurrent first calls get one answer."""
    if _chosen is not None:
        return _chosen
    # not imported (or being imported by another thread right now): no plugin code runs yet
    refuse = getattr(sys.modules.get("hwbackends._base.guard"), "refuse_nested", None)
    if refuse is not None:
        refuse()  # plugin code asking would wait on the lock its own caller holds
    with _lock:
        if _chosen is not None:
            return _chosen
        return _select()


def _select() -> Backend | None:
    global LAST, _chosen, _identity, answered_env
    reg = sys.modules.get("hwbackends._selection.registry")  # not imported: no registry exists yet
    # getattr: another thread may be importing the registry right now, half-initialised
    if reg is not None and any(
        getattr(reg, k, None) is not None for k in ("_registry", "_cached", "_inputs")
    ):
        LAST = "off"  # the process already has a registry: its answer is authoritative
        return None
    # One snapshot of the environment: the key is made of it, and the selection reads it.
    env = environ_snapshot()
    if not enabled(env):
        LAST = "off"
        return None
    raw = fingerprint(env=env)
    fp = _key(raw)
    dfd = _open_dir(create=False)
    try:
        answers = _read(dfd) if dfd is not None else {}
        hit = _lookup(answers.get(fp), env)
        if hit is not None:
            _chosen, _identity, answered_env = hit[0], hit[2], env
            LAST = "hit"
            _said_on_hit(env, hit[0], hit[1])
            return _chosen
    finally:
        if dfd is not None:
            os.close(dfd)
    LAST = "miss"
    _identity = None  # a full selection's: read from what it loaded
    _chosen = _select_and_store(env, fp, raw)
    return _chosen


def cached_view() -> BackendView | None:
    """``cached_backend()`` as it leaves the selection layer: its guarded view."""
    found = cached_backend()
    if found is None or isinstance(found, BackendView):
        return found
    return view_of(found, _identity)


def _said_on_hit(env: dict[str, str], backend: Backend, caveats: tuple[str, ...]) -> None:
    said: list[str] = []
    if any(k[:9].upper() == "HWBACKEND" for k in env):  # settings: only then
        from hwbackends._base.settings import unknown_settings

        said = unknown_settings(env)
    if caveats:
        said.append(
            f"hwbackends.current() answered {backend.name!r} from the selection cache; "
            f"the selection that stored it said: {'; '.join(caveats)} (run "
            "`hwbackends env` for the full report)"
        )
    if said:
        from hwbackends._base.settings import warn_once

        warn_once(said)


def _select_and_store(env: dict[str, str], fp: bytes, raw: tuple[object, ...] = ()) -> Backend:
    """The full selection from ``env``, its answer stored under the key of exactly its inputs:
    the fingerprint and the watched values, both taken before it runs (``raw``: the
    fingerprint itself, to recognise a run that only wrote bytecode; see ``_also_after``)."""
    from hwbackends._selection import registry as _registry

    names = _path_names() if raw else ()

    watch = _registry.watch_lists(env)  # loads the plugins, as the selection would
    key = _key(detail(watch, env=env))
    report = _registry.process_report(env)
    chosen = _registry.get_from_report(report)
    inputs = _registry._inputs
    found = _registry.entry_point_source(chosen.name, chosen)
    # Only a settled answer is stored: a candidate that was broken (an import past the time
    # limit on a cold file system, a probe that raised EAGAIN once) may be healthy in the next
    # process, which must select again rather than inherit this one's fallback. Only one made
    # from this snapshot: another thread's first call may have taken the process's inputs.
    if (
        found is None
        or report is not _registry._cached
        or inputs is None
        or inputs.env is not env
        or not settled(report)
    ):
        return chosen
    value, source = found
    INSTANCES.setdefault(value, chosen)
    dfd = _open_dir(create=True)
    if dfd is None:
        return chosen
    try:
        answers = _read(dfd)  # again: another process may have added its answer
        old = answers.pop(fp, None)
        by_detail = old[1] if isinstance(old, tuple) and old[0] == watch else {}
        by_detail.pop(key, None)
        by_detail[key] = (chosen.name, source, _caveats(report, env), _identity_of(chosen))
        # Several answers per interpreter (programs whose paths or variables differ), the most
        # recent last; the oldest go first.
        answers[fp] = (watch, dict(list(by_detail.items())[-_KEEP:]))
        after = _also_after(raw, names, env)
        if after is not None:
            answers.pop(after, None)
            answers[after] = answers[fp]
        _store(dfd, dict(list(answers.items())[-_KEEP:]))
    finally:
        os.close(dfd)
    return chosen


def _path_names() -> tuple[tuple[str, ...], ...]:
    # what each sys.path folder holds, less the bytecode folder an import may create in it
    return tuple(tuple(n for n in _listing(p or ".") if n != "__pycache__") for p in sys.path)


def _also_after(
    raw: tuple[object, ...], names: tuple[tuple[str, ...], ...], env: dict[str, str]
) -> bytes | None:
    """The key of the fingerprint taken after the selection when the selection itself changed
    it only by writing bytecode: importing a plugin that is a top-level module creates
    ``__pycache__`` in its sys.path folder, which moves that folder's mtime, and without this
    the next process would miss once. None when nothing else may have changed."""
    if not raw:
        return None
    now = fingerprint(env=env)
    if now == raw or len(now) != len(raw) or now[:2] != raw[:2]:
        return None
    folders = [[p for p, _ in part] for part in (now[2], raw[2])]  # type: ignore[attr-defined]
    if now[3:] != raw[3:] or folders[0] != folders[1] or _path_names() != names:
        return None
    return _key(now)


def settled(report: Any) -> bool:
    """Whether a selection's answer may be stored: no candidate broken, no reader error."""
    return not report.broken and not getattr(report.host, "reader_errors", None)


def _caveats(report: Any, env: dict[str, str]) -> tuple[str, ...]:
    # what the report warned about, less the settings warnings (recomputed on every hit)
    from hwbackends._base.settings import unknown_settings

    mine = set(unknown_settings(env))
    return tuple(w[:300] for w in report.warnings if w not in mine)[:8]


def drop_answer() -> None:
    """Forget this fingerprint's stored answer, and the one this process gave (a full selection
    in this process chose differently: ``registry._agree_with_cache``)."""
    global _chosen
    _chosen = None
    dfd = _open_dir(create=False)
    if dfd is None:
        return
    try:
        answers = _read(dfd)
        if answers.pop(_key(fingerprint()), None) is not None:
            _store(dfd, answers)
    finally:
        os.close(dfd)


def _lookup(
    entry: object, env: Any = None
) -> tuple[Backend, tuple[str, ...], tuple[str, str, int]] | None:
    """The backend a cached entry names, resolved through installed metadata, the caveats
    its selection reported, and its identity (name, device type, priority: copies); or None."""
    if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], dict)):
        return None
    watch = entry[0]
    if not (
        isinstance(watch, tuple)
        and len(watch) == 2
        and all(isinstance(w, tuple) and all(isinstance(x, str) for x in w) for w in watch)
    ):
        return None
    found = entry[1].get(_key(detail(watch, env=env)))
    if not (isinstance(found, tuple) and len(found) == 4 and isinstance(found[0], str)):
        return None
    name, source, caveats, stored = found
    if not (isinstance(caveats, tuple) and all(isinstance(c, str) for c in caveats)):
        return None
    value = _BUILTIN.get(name) if source == "" else _declared_value(name, source)
    if value is None:
        return None
    if source == "":  # the built-in: hwbackends' own code, made when first used
        identity = _checked(stored)
        if identity is None or identity[0] != name:
            return None
        lazy = BackendView(None, *identity, load=lambda: _instantiate(value))
        return lazy, caveats, identity  # type: ignore[return-value]  # a Backend, structurally
    from hwbackends._base.guard import call

    # a plugin: the same time limit and isolation as a full selection's import
    def load() -> tuple[Backend, Any]:
        b = _instantiate(value)
        return b, _identity_of(b)  # its attributes are plugin code too

    try:
        backend, identity = call(f"importing {value!r}", load)
    except Exception:
        return None  # a plugin that fails now: the full selection will say why
    if identity is None or identity[0] != name:
        return None
    return backend, caveats, identity


def _identity_of(b: object) -> tuple[str, str, int] | None:
    return _checked(tuple(getattr(b, k, None) for k in ("name", "device_type", "priority")))


def _checked(t: object) -> tuple[str, str, int] | None:
    """``(name, device_type, priority)`` of exact builtin types (no subclass), else None."""
    if isinstance(t, tuple) and len(t) == 3 and type(t[0]) is str and type(t[1]) is str:
        return t if type(t[2]) is int else None
    return None


def reset() -> None:
    """Forget the cached selection and discovery (tests; after installing a plugin)."""
    global _chosen, _identity, answered_env
    from hwbackends._discovery import loading
    from hwbackends._selection import registry

    registry._cached = None
    registry._inputs = None
    registry._recent = None
    registry._registry = None
    loading.forget()  # also lets plugins that hung be called again
    _chosen = _identity = answered_env = None
    _views.clear()
