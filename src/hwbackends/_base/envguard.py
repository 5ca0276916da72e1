"""What a plugin call did to the process besides its result: environment writes, attributed
to the thread that made them, and process-wide edits (``sys.path``, ``sys.modules``, the working
directory, standard streams, the recursion limit, thread hooks), put back where they are
surely the plugin's and nobody has changed them since. Used by ``hwbackends._base.guard``
around every plugin call.

While plugin calls run, and only then, ``os.putenv`` / ``os.unsetenv`` (which ``os.environ``
writes through) and ``os.chdir`` / ``os.fchdir`` are wrapped, to tell which thread made each
change; outside them the application's functions are the originals and no audit hook is
installed, so the rest of the program pays nothing.

This module imports only builtins."""

from __future__ import annotations

import _thread
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    _Writes = dict[str, list[str | None]]


# -- environment-write attribution ---------------------------------------------------------

# thread ident -> {variable: [value before the call, value the plugin left]} for the threads
# running a plugin call right now.
_recorders: dict[int, _Writes] = {}
_env_lock = _thread.RLock()  # one write or one undo at a time, while plugin calls run
_active = 0  # plugin calls under way (entered, not yet settled)
_saved: tuple[Any, Any] | None = None  # the os.putenv / os.unsetenv that the wrappers replaced
_seq = 0  # counts the writes seen while wrapped
_last: dict[str, tuple[int, int]] = {}  # variable -> (thread ident, seq) of its last write
# variable -> the value an undo puts back: the application's latest write, or the value before
# the first plugin write (several plugin calls may write one variable at once)
_base: dict[str, str | None] = {}
_undoing: set[int] = set()  # threads running hwbackends' own undo: not a plugin's write
_abandoned: dict[int, str] = {}  # ident of a worker abandoned for hanging -> its call
_cwd_last: tuple[int, int] | None = None  # (thread ident, seq) of the last chdir while wrapped
_saved_cwd: tuple[Any, Any] | None = None  # the os.chdir / os.fchdir the wrappers replaced
_late: list[str] = []  # writes refused to abandoned calls, for the next report


def _text(v: object) -> str:
    return os.fsdecode(v) if isinstance(v, bytes) else str(v)


def _note(key: object, new: str | None) -> None:
    """Record one write (called with ``_env_lock`` held, before the write happens)."""
    global _seq
    ident = _thread.get_ident()
    if ident in _undoing:
        return
    k = _text(key)
    _refuse_if_abandoned(ident, f"wrote {k}")
    _seq += 1
    _last[k] = (ident, _seq)
    rec = _recorders.get(ident)
    if rec is None:
        _base[k] = new  # the application's write: what any undo must keep
        return  # another thread of the application: not ours to judge
    if k not in _base:
        _base[k] = os.environ.get(k)
    entry = rec.get(k)
    if entry is None:
        rec[k] = [os.environ.get(k), new]  # os.environ's mapping is updated after putenv
    else:
        entry[1] = new


def _refuse_if_abandoned(ident: int, did: str) -> None:
    what = _abandoned.get(ident)
    if what is not None:
        msg = f"{what} {did} after it was abandoned for hanging; the change was refused"
        if len(_late) < 64:
            _late.append(msg)
        raise PermissionError(f"hwbackends: {msg}")


def _putenv(key: Any, value: Any) -> None:
    with _env_lock:
        _note(key, _text(value))
        (_saved or _originals)[0](key, value)


def _unsetenv(key: Any) -> None:
    with _env_lock:
        _note(key, None)
        (_saved or _originals)[1](key)


_originals = (os.putenv, os.unsetenv)
_cwd_originals: tuple[Any, Any] = (os.chdir, getattr(os, "fchdir", None))


def _note_cwd() -> None:
    """Record which thread changes the working directory (``_env_lock`` held)."""
    global _seq, _cwd_last
    ident = _thread.get_ident()
    _refuse_if_abandoned(ident, "changed the working directory")
    _seq += 1
    _cwd_last = (ident, _seq)


def _chdir(path: Any) -> None:
    with _env_lock:
        _note_cwd()
        (_saved_cwd or _cwd_originals)[0](path)


def _fchdir(fd: Any) -> None:
    with _env_lock:
        _note_cwd()
        (_saved_cwd or _cwd_originals)[1](fd)


def _enter() -> None:
    """A plugin call begins: wrap the environment writers (the first one only)."""
    global _active, _saved, _saved_cwd
    with _env_lock:
        _active += 1
        if _active == 1 and os.putenv is not _putenv:
            _saved = (os.putenv, os.unsetenv)
            os.putenv, os.unsetenv = _putenv, _unsetenv
        if _active == 1 and os.chdir is not _chdir:
            _saved_cwd = (os.chdir, getattr(os, "fchdir", None))
            os.chdir = _chdir
            if _saved_cwd[1] is not None:
                os.fchdir = _fchdir


def _leave() -> None:
    """A plugin call is settled: the last one puts the application's writers back."""
    global _active, _saved, _saved_cwd, _cwd_last
    with _env_lock:
        _active -= 1
        if _active <= 0:
            _active = 0
            if _saved is not None and os.putenv is _putenv:
                os.putenv, os.unsetenv = _saved
            _saved = None
            _put_back_cwd_functions()
            _cwd_last = None
            _last.clear()
            _base.clear()


def _put_back_cwd_functions() -> None:
    global _saved_cwd
    if _saved_cwd is not None and os.chdir is _chdir:
        os.chdir = _saved_cwd[0]
        if _saved_cwd[1] is not None and getattr(os, "fchdir", None) is _fchdir:
            os.fchdir = _saved_cwd[1]
    _saved_cwd = None


def _write_back(key: str, value: str | None) -> None:
    """Set or remove one variable in os.environ and the C environment (lock held)."""
    env = os.environ
    ident = _thread.get_ident()
    _undoing.add(ident)
    try:
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    finally:
        _undoing.discard(ident)


def _undo(writes: _Writes, ident: int) -> list[str]:
    """Put back what the plugin's thread changed, where nobody has written since; the names."""
    changed = []
    with _env_lock:
        for key, (before, after) in writes.items():
            # what an undo would put back: another plugin call's write of the same variable
            # may be what this one found, and it is no more the application's than this one
            base = _base.get(key, before)
            if base == after and os.environ.get(key) == after:
                continue
            changed.append(key)
            last = _last.get(key)
            if last is not None and last[0] != ident:
                continue  # written again since, by someone else: theirs stands
            try:  # noqa: SIM105 - contextlib is not imported on the selection path
                _write_back(key, base)
            except Exception:
                pass
    return sorted(changed)


_libc: Any = None


def _c_environ() -> dict[bytes, bytes] | None:
    """The C environment (what a runtime's ``getenv`` reads), where ``ctypes`` is already
    loaded and this is Linux; None otherwise (importing ctypes costs more than a selection)."""
    ctypes = sys.modules.get("ctypes")
    if ctypes is None or not sys.platform.startswith("linux"):
        return None
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None)
        env = ctypes.POINTER(ctypes.c_char_p).in_dll(_libc, "environ")
        out: dict[bytes, bytes] = {}
        i = 0
        while env[i] is not None and i < 100_000:
            k, _, v = env[i].partition(b"=")
            out.setdefault(k, v)
            i += 1
        return out
    except Exception:
        return None


class _State:
    """The process-wide state a plugin call must leave as it found it, read before the call."""

    __slots__ = ("c_env", "cwd", "data", "fds", "modules", "path", "profile", "rec", "seq", "trace")

    def __init__(self) -> None:
        self.seq = _seq
        self.data = dict(os.environ._data)  # type: ignore[attr-defined]
        self.c_env = _c_environ()
        self.path = list(sys.path)
        self.modules = sys.modules.copy()
        try:
            self.cwd: str | None = os.getcwd()
        except OSError:
            self.cwd = None
        self.fds = tuple(_fd_open(fd) for fd in (0, 1, 2))
        self.rec = sys.getrecursionlimit()
        threading = sys.modules.get("threading")
        self.trace = getattr(threading, "_trace_hook", None)
        self.profile = getattr(threading, "_profile_hook", None)

    def edits(self, writes: _Writes, ident: int, alone: bool = True) -> tuple[list[str], list[str]]:
        """What the call changed besides its recorded env writes, put back where safe: the
        plugin's edits, and the edits that may be another thread's (left as they are).

        A ``chdir`` is the thread's that made it (recorded by the wrappers); a replaced
        ``sys.modules`` entry is always the plugin's (how a plugin would hijack the
        application's imports). For the rest nothing records a writer: they are the plugin's
        only when no other thread of the application may have run during the call
        (``alone``); otherwise they are neither put back nor blamed on it. A call abandoned
        for hanging is compared when it returns (its caller has gone on), and its edits are
        reported but not put back: by then the application may have made the same kind of
        edit itself."""
        out: list[str] = []
        put_back = ident not in _abandoned
        mine = out if alone else []  # the edits that no writer is recorded for
        keep = put_back and alone
        added = [p for p in sys.path if p not in self.path]
        if added or len(sys.path) < len(self.path):
            what = ", ".join(map(repr, added[:3])) or "nothing"
            mine.append(f"changed sys.path (added {what})")
            for p in added if keep else ():
                while p in sys.path:
                    sys.path.remove(p)
        mods = sys.modules
        replaced = [k for k, m in self.modules.items() if mods.get(k, m) is not m]
        if replaced:
            out.append(f"replaced sys.modules entries ({', '.join(sorted(replaced)[:3])})")
            for k in replaced if put_back else ():
                mods[k] = self.modules[k]
        try:
            cwd: str | None = os.getcwd()
        except OSError:
            cwd = None
        if cwd != self.cwd:
            last = _cwd_last if _cwd_last is not None and _cwd_last[1] > self.seq else None
            if last is None or last[0] == ident:  # the plugin's, or nobody's on record
                (out if last is not None else mine).append(
                    "changed the working directory (os.chdir)"
                )
                if self.cwd is not None and (put_back if last is not None else keep):
                    try:  # noqa: SIM105 - contextlib is not imported on the selection path
                        (_saved_cwd or _cwd_originals)[0](self.cwd)
                    except OSError:
                        pass
        for fd, was in zip((0, 1, 2), self.fds, strict=True):
            if was and not _fd_open(fd):
                mine.append(f"closed file descriptor {fd} (cannot be undone)")
        if sys.getrecursionlimit() != self.rec:
            mine.append("changed the recursion limit (sys.setrecursionlimit)")
            if keep:
                try:  # noqa: SIM105
                    sys.setrecursionlimit(self.rec)
                except Exception:
                    pass
        thr = sys.modules.get("threading")
        if thr is not None:
            for attr, hook, how in (
                ("_trace_hook", self.trace, "threading.settrace"),
                ("_profile_hook", self.profile, "threading.setprofile"),
            ):
                if getattr(thr, attr, None) is not hook:
                    mine.append(f"installed a hook for every new thread ({how})")
                    if keep:
                        setattr(thr, attr, hook)
        out.extend(self._env_bypass(writes, ident))
        return out, ([] if alone else mine)

    def _env_bypass(self, writes: _Writes, ident: int) -> list[str]:
        """Environment changes that did not go through os.putenv/os.unsetenv: judged only
        where the C environment was read before the call too (``ctypes`` loaded), because
        only it tells an edit of os.environ's mapping from an application write still under
        way (``os.environ`` calls putenv first, then updates its mapping)."""
        if self.c_env is None:
            return []
        found: list[str] = []
        data = os.environ._data  # type: ignore[attr-defined]
        fsdecode = os.fsdecode

        def others(key: str) -> bool:  # written through os.environ by another thread
            last = _last.get(key)
            return last is not None and last[0] != ident

        with _env_lock:
            # The mapping first, then the C environment: os.environ writes putenv before they
            # update the mapping, so an application write under way never looks like an edit
            # of the mapping (the C side is always at least as new as the copy read here).
            mapping = dict(data)
            after = _c_environ()
            if after is None:
                return []
            before = self.c_env
            real_put, real_unset = _saved or _originals
            for k in set(self.data) | set(mapping):
                key = fsdecode(k)
                now = mapping.get(k)
                if (
                    now != self.data.get(k)
                    and now != after.get(k)
                    and key not in writes
                    and not others(key)
                ):  # the mapping changed and no longer says what the C environment holds
                    found.append(f"{key} (edited os.environ's mapping)")
                    if k in after:
                        data[k] = after[k]
                    else:
                        data.pop(k, None)
            for k in set(before) | set(after):
                key = fsdecode(k)
                if (
                    after.get(k) != before.get(k)
                    and key not in writes
                    and not others(key)
                    and data.get(k) != after.get(k)
                ):  # the C value changed behind os.environ's back
                    found.append(f"{key} (set in the C environment, bypassing os.environ)")
                    try:
                        if data.get(k) is not None:
                            real_put(k, data[k])
                        else:
                            real_unset(k)
                    except Exception:
                        pass
        return [f"changed the environment: {', '.join(sorted(found))}"] if found else []


def _fd_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def reset_after_fork() -> None:
    """In a forked child: only the forking thread survives, and no plugin call runs."""
    global _env_lock, _active, _saved, _cwd_last
    _env_lock = _thread.RLock()
    _recorders.clear()
    _abandoned.clear()
    _undoing.clear()
    _last.clear()
    _base.clear()
    _active = 0
    if _saved is not None and os.putenv is _putenv:
        os.putenv, os.unsetenv = _saved
    _saved = None
    _put_back_cwd_functions()
    _cwd_last = None
