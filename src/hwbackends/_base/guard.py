"""Running plugin code: its failures and hangs isolated and named, its edits reported.

Installed plugins are trusted code, as in pluggy, fsspec or torch's backend autoload; this is
no sandbox (what plugins are trusted with: docs/concepts.md). Every call into a plugin goes
through ``call`` / ``call_many``: on a worker thread, within ``HWBACKENDS_TIMEOUT`` per call
and a selection's ``HWBACKENDS_DEADLINE`` (``Scope``); a call past its limit is abandoned and
its ``owner`` not called again while it runs, across ``reset()`` too. Any exception, even a
``BaseException``, becomes a ``PluginFault`` naming the call; values cross as exact builtin
copies (``plain``); the edits a call makes to what selection reads (``watch``), ``sys.path``,
the working directory, the recursion limit and descriptors 0-2 are reported
(``take_reports``), never undone (a fault under ``HWBACKENDS_STRICT=1``). A fork waits
briefly for hwbackends' own work in other threads, never for the application's.

This module imports only builtins and the settings, so the selection path stays cheap.
"""

from __future__ import annotations

import _thread
import os
import sys
from time import monotonic

from hwbackends._base.settings import _TRUE, SETTINGS_VARS, timeout_from

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, TypeVar

    _T = TypeVar("_T")
    _F = TypeVar("_F", bound=Callable[..., Any])
    Job = tuple[str, Callable[[], Any]] | tuple[str, Callable[[], Any], str | None]

__all__ = ["NOT_UNDONE", "PluginFault", "ResultError", "Scope", "call", "call_many", "describe",
           "plain", "refuse_nested", "running_plugin_code", "take_reports", "watch",
           "working"]  # fmt: skip

_MAX_TEXT = 500  # characters of a plugin's exception message kept in a report
_IDLE_S = 10.0  # an idle worker thread exits after this many seconds
_MAX_WORKERS = 32  # workers running plugin code at once; abandoned ones do not count
_FORK_WAIT_S = 2.0  # the longest a fork waits for hwbackends' own work in other threads
_MAX_REPORTS = 64
_INF = float("inf")
NOT_UNDONE = "not undone"  # in every report of an edit (``hwbackends plugins --check``)

_lock = _thread.allocate_lock()  # the pool, the hung owners, the reports
_idle: list[_Worker] = []
_busy = 0  # workers running plugin code now (abandoned ones excluded)
_plugin_threads: set[int] = set()  # idents of the worker threads
_inline: set[int] = set()  # idents of threads running a plugin call inline now
_scopes: dict[int, Scope] = {}  # ident -> the entry point or selection it runs
_hung: dict[str, str] = {}  # owner -> why it is not called while its hung call runs
_reports: list[str] = []  # edits seen, for the next report
_watched: set[str] = set(SETTINGS_VARS)  # the environment variables compared around calls


class ResultError(TypeError):
    """Raised by the checks of a plugin's return value: its message is the whole reason."""


class PluginFault(Exception):
    """Plugin code failed: ``reason`` says how, ``tb`` is its traceback when there is one."""

    def __init__(self, reason: str, tb: str | None = None) -> None:
        super().__init__(reason)
        self.reason, self.tb = reason, tb


def describe(exc: BaseException) -> str:
    """``Type: message`` of a plugin's exception, even when its ``__str__`` misbehaves.

    Runs plugin code (the exception's ``__str__``): call it where plugin code may run."""
    name = type.__dict__["__name__"].__get__(type(exc))  # the real name, not a metaclass's
    try:
        text = plain(str(exc))
    except BaseException:  # a hostile __str__ must not escape either
        text = "<the exception's message could not be read>"
    if len(text) > _MAX_TEXT:
        text = text[:_MAX_TEXT] + "…"
    return f"{name}: {text}" if text else name


def plain(v: Any) -> Any:
    """An exact builtin copy of a plugin's value (``str``, ``int``, ``float``, ``bool``,
    ``None``, and tuples, lists, dicts and frozensets of them); ``ResultError`` otherwise.

    A ``str`` subclass's ``__format__``/``__str__`` is plugin code: copied with
    ``str.__str__``, the value that leaves the guard has none of its methods."""
    t = type(v)
    if t is str or t is int or t is bool or t is float or v is None:
        return v
    if isinstance(v, str):
        return str.__str__(v)
    if isinstance(v, int):
        return int.__int__(v)
    if isinstance(v, float):
        return float.__float__(v)
    if isinstance(v, tuple):
        return tuple([plain(x) for x in tuple.__iter__(v)])
    if isinstance(v, list):
        return [plain(x) for x in list.__iter__(v)]
    if isinstance(v, frozenset):
        return frozenset([plain(x) for x in frozenset.__iter__(v)])
    if isinstance(v, dict):
        return {plain(k): plain(x) for k, x in dict.items(v)}
    raise ResultError(f"a {t.__name__} where a plain value (str, int, tuple...) was expected")


def watch(names: Iterable[str]) -> None:
    """Compare these environment variables around plugin calls too (a backend's declared
    visibility variables, once read)."""
    _watched.update(names)


class Scope:
    """``with Scope(deadline_s, strict):`` around a selection: the plugin calls this thread
    makes end by the deadline (0: none; an outer scope's may end first), and their edits are
    faults when ``strict`` (None: as ``HWBACKENDS_STRICT`` in ``os.environ`` says)."""

    __slots__ = ("ends", "outer", "strict")

    def __init__(self, deadline_s: float, strict: bool | None) -> None:
        self.ends, self.strict = deadline_s, strict  # ends: seconds, a time once entered
        self.outer: Scope | None = None

    def __enter__(self) -> Scope:
        self.outer = _scopes.get(_thread.get_ident())
        mine = monotonic() + self.ends if self.ends > 0 else _INF
        self.ends = min(mine, self.outer.ends if self.outer is not None else _INF)
        _scopes[_thread.get_ident()] = self
        return self

    def __exit__(self, *exc: object) -> None:
        if self.outer is None:
            _scopes.pop(_thread.get_ident(), None)
        else:
            _scopes[_thread.get_ident()] = self.outer


def working(fn: _F) -> _F:
    """Decorates an entry point (``explain``): a fork in another thread waits for it."""

    def run(*args: Any, **kwargs: Any) -> Any:
        with Scope(0.0, None):
            return fn(*args, **kwargs)

    # functools.wraps, without importing functools (1 ms with collections) on this path
    run.__name__, run.__qualname__ = fn.__name__, fn.__qualname__
    run.__doc__, run.__wrapped__ = fn.__doc__, fn  # type: ignore[attr-defined]
    return run  # type: ignore[return-value]


# -- one call, on the thread that runs it --------------------------------------------------


def _fd_open(fd: int) -> bool:
    try:
        return os.fstat(fd) is not None
    except OSError:
        return False


def _state() -> tuple[Any, ...]:
    """What the edit check compares: O(environment + sys.path), never O(sys.modules)."""
    try:
        cwd: str | None = os.getcwd()
    except OSError:
        cwd = None
    env = getattr(os.environ, "_data", os.environ)  # the encoded mapping: a C-speed copy
    return dict(env), list(sys.path), cwd, sys.getrecursionlimit(), [_fd_open(0), _fd_open(1),
                                                                     _fd_open(2)]  # fmt: skip


def _changes(before: tuple[Any, ...]) -> list[str]:
    (env0, path0, cwd0, rec0, fds0), (env1, path1, cwd1, rec1, fds1) = before, _state()
    out = []
    if env1 != env0:  # of the variables whose value changed, came or went: those read
        names = {os.fsdecode(k) for k, _ in env0.items() ^ env1.items()}
        names = {n for n in names if n in _watched or n.startswith("HWBACKENDS_")}
        out += [f"the environment variables {', '.join(sorted(names))}"] if names else []
    if path1 != path0:
        added = ", ".join(repr(p) for p in path1 if p not in path0)
        out.append(f"sys.path (added {added or 'nothing'})")
    out += ["the working directory"] if cwd1 != cwd0 else []
    out += [f"the recursion limit ({rec0} to {rec1})"] if rec1 != rec0 else []
    return out + [f"file descriptor {fd} (closed)" for fd in (0, 1, 2) if fds0[fd] > fds1[fd]]


class _Call:
    """One plugin call and what came of it, read on the thread that ran it."""

    __slots__ = ("edits", "exc", "fn", "owner", "tb", "text", "value", "what")

    def __init__(self, job: Job) -> None:
        self.what, self.fn = job[0], job[1]
        self.owner: str | None = job[2] if len(job) > 2 else None
        self.value: Any = None
        self.exc: type[BaseException] | None = None  # the type of what it raised, if it did
        self.text, self.tb = "", None
        self.edits: list[str] = []

    def run(self, compare: bool) -> None:
        before = _state() if compare else None
        try:
            self.value = self.fn()
        except BaseException as exc:  # everything plugin code raises is the plugin's
            self.value, self.exc = exc, type(exc)
            self.text = describe(exc)  # here: its __str__ is plugin code, under the limit
            try:
                import traceback

                self.tb = plain(traceback.format_exc())
            except BaseException:
                self.tb = None
        self.edits = _changes(before) if before is not None else []

    def settle(self, strict: bool, passthrough: tuple[type[BaseException], ...],
               ctrl_c: bool) -> Any:  # fmt: skip
        """The value, or the ``PluginFault`` that says what went wrong. No plugin code runs:
        classes are compared with ``issubclass`` on the real type. ``ctrl_c``: run inline
        with no limit, where the user's Ctrl-C cannot be told from the plugin's own."""
        t = self.exc
        if self.edits:
            text = (f"{self.what} changed {'; '.join(self.edits)}: {NOT_UNDONE} (it may have "
                    "been another thread of the application)")  # fmt: skip
            if strict and t is None:
                raise PluginFault(f"{text}; HWBACKENDS_STRICT=1 makes this a fault")
            _report(text)
        if t is None:
            return self.value
        if issubclass(t, (*passthrough, PluginFault)) or (ctrl_c and t is KeyboardInterrupt):
            raise self.value  # a PluginFault: hwbackends' own checks inside the call
        if issubclass(t, ResultError):
            raise PluginFault(self.text.partition(": ")[2], None)
        raise PluginFault(f"{self.what} raised {self.text}", self.tb)


def _report(text: str) -> None:
    with _lock:
        if len(_reports) < _MAX_REPORTS and text not in _reports:
            _reports.append(text)


def take_reports() -> list[str]:
    """The edits plugin calls were seen to make since the last ask (then forgotten)."""
    with _lock:
        out, _reports[:] = list(_reports), []
    return out


# -- the worker threads --------------------------------------------------------------------


class _Worker:
    __slots__ = ("abandoned", "calls", "done", "go", "k", "started")

    def __init__(self) -> None:
        # threading must be imported by the caller's thread first: imported first by plugin
        # code in a worker, it would take the worker for the main thread and hang at exit.
        import threading  # noqa: F401

        self.go, self.done = _thread.allocate_lock(), _thread.allocate_lock()
        self.go.acquire()
        self.done.acquire()
        self.calls: list[_Call] = []
        self.k, self.started, self.abandoned = 0, 0.0, False
        _thread.start_new_thread(self._loop, ())

    def _loop(self) -> None:
        ident = _thread.get_ident()
        _plugin_threads.add(ident)
        try:
            while True:
                if not self.go.acquire(True, _IDLE_S):
                    with _lock:
                        if self in _idle:  # nobody took it meanwhile: the pool shrinks
                            _idle.remove(self)
                            return
                    self.go.acquire()  # taken just now: its calls are coming
                while self.k < len(self.calls):
                    c = self.calls[self.k]
                    c.run(compare=True)
                    with _lock:  # the caller gives up on a call only under this lock
                        if self.abandoned:  # it did: the owner may be called again
                            _hung.pop(c.owner or "", None)
                            if c.edits and len(_reports) < _MAX_REPORTS:
                                _reports.append(f"{c.what} returned after it was abandoned "
                                                "for hanging; meanwhile the process changed "
                                                f"{'; '.join(c.edits)}")  # fmt: skip
                            return
                        self.k, self.started = self.k + 1, monotonic()
                self.done.release()
        finally:
            _plugin_threads.discard(ident)


def _batch(calls: list[_Call], limit: float, ends: float) -> tuple[int, PluginFault | None]:
    """Run ``calls`` on one worker, each within ``limit`` and all by ``ends``: how many
    finished, and the fault of the one past its limit, abandoned with its worker."""
    global _busy
    while True:
        with _lock:
            if _busy < _MAX_WORKERS:
                _busy += 1
                w = _idle.pop() if _idle else None
                break
        import time  # every busy worker is bounded by its caller's limit: a slot frees soon

        time.sleep(0.001)
    w = w or _Worker()
    w.calls, w.k, w.started = calls, 0, monotonic()
    w.go.release()
    try:
        while not w.done.acquire(True, max(min(w.started + limit, ends) - monotonic(), 0.001)):
            with _lock:  # the worker moves on only under this lock: k and started agree
                if monotonic() >= min(w.started + limit, ends) and w.k < len(calls):
                    w.abandoned, _busy = True, _busy - 1
                    return w.k, _hung_fault(calls[w.k], limit, ends <= w.started + limit)
    except BaseException:  # a real Ctrl-C while waiting: the program stops
        with _lock:
            w.abandoned, _busy = True, _busy - 1
        raise
    with _lock:
        _busy -= 1
        w.calls, w.k = [], 0
        _idle.append(w)
    return len(calls), None


def _hung_fault(c: _Call, limit: float, cut: bool) -> PluginFault:
    """The fault of a call abandoned for hanging; its owner is marked hung (``_lock`` held,
    so that its worker, which unmarks it when the call returns, cannot come first)."""
    why, knob = f"did not return within {limit:g} s", "HWBACKENDS_TIMEOUT"
    if cut:
        why, knob = "was cut at the selection's overall deadline", "HWBACKENDS_DEADLINE"
    if c.owner is not None:
        _hung[c.owner] = (
            f"{c.what} {why} earlier in this process and is still running; the plugin is not "
            f"called again until that call returns (raise {knob} if it is only slow)"
        )
    return PluginFault(f"{c.what} {why} and was abandoned (it may hang); raise {knob} if it "
                       "is only slow")  # fmt: skip


def call_many(
    jobs: Sequence[Job],
    *,
    timeout: float | None = None,
    passthrough: tuple[type[BaseException], ...] = (),
) -> list[tuple[bool, Any]]:
    """Several plugin calls on one worker (one thread hand-off for the lot), each with its own
    time limit. A job is ``(what, fn)`` or ``(what, fn, owner)``. Returns ``(True, value)`` or
    ``(False, PluginFault)`` per job, in order; after one that hangs the rest go on."""
    limit = timeout_from(os.environ) if timeout is None else timeout
    ident = _thread.get_ident()
    scope = _scopes.get(ident)
    strict = scope.strict if scope is not None else None
    if strict is None:  # outside a selection: as os.environ says (a typo is not strict)
        strict = (os.environ.get("HWBACKENDS_STRICT") or "").strip().lower() in _TRUE
    ends = scope.ends if scope is not None else _INF
    nested = ident in _plugin_threads or ident in _inline  # plugin code calling back
    calls, i = [_Call(j) for j in jobs], 0
    faults: dict[int, PluginFault] = {}
    while i < len(calls):
        with _lock:
            todo: list[_Call] = []
            for c in calls[i:]:
                if c.owner in _hung:
                    break
                todo.append(c)
            if not todo:  # the next call's owner hangs in an earlier call: not called
                faults[i], i = PluginFault(_hung[calls[i].owner or ""]), i + 1
                continue
        if nested:  # plugin code calling back: here, under its caller's limit
            for c in todo:
                c.run(compare=False)
            i += len(todo)
        elif limit <= 0:  # no limit: here
            _inline.add(ident)
            try:
                for c in todo:
                    c.run(compare=True)
            finally:
                _inline.discard(ident)
            i += len(todo)
        elif monotonic() >= ends:
            for k, c in enumerate(todo, i):
                faults[k] = PluginFault(f"{c.what} was not called: the selection's overall "
                                        "deadline (HWBACKENDS_DEADLINE) had passed")  # fmt: skip
            i += len(todo)
        else:
            done, fault = _batch(todo, limit, ends)
            i += done
            if fault is not None:
                faults[i], i = fault, i + 1
    out: list[tuple[bool, Any]] = []
    for k, c in enumerate(calls):
        try:
            if k in faults:
                raise faults[k]
            out.append((True, c.settle(strict, passthrough, ctrl_c=limit <= 0 and not nested)))
        except PluginFault as fault:
            out.append((False, fault))
    return out


def call(
    what: str,
    fn: Callable[[], _T],
    *,
    timeout: float | None = None,
    passthrough: tuple[type[BaseException], ...] = (),
    owner: str | None = None,
) -> _T:
    """Run plugin code ``fn``; raise ``PluginFault`` for any failure or hang.

    ``what`` names the call in messages (``"acme.probe()"``). ``timeout`` defaults to
    ``HWBACKENDS_TIMEOUT`` from ``os.environ``. ``passthrough`` exceptions propagate as they are.
    ``owner`` (a backend's name) is not called while an earlier call of it hangs."""
    ((ok, value),) = call_many([(what, fn, owner)], timeout=timeout, passthrough=passthrough)
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def running_plugin_code() -> bool:
    """Whether the calling thread is running a plugin call right now (or is a worker)."""
    ident = _thread.get_ident()
    return ident in _plugin_threads or ident in _inline


def refuse_nested() -> None:
    """Plugin code asking for the selection while it is being selected would wait for itself
    (the selection lock is held by the caller it runs for): refuse at once instead."""
    if running_plugin_code():
        from hwbackends._base.errors import PluginError

        raise PluginError(
            "a plugin called hwbackends.current() / explain() from its own code (its import, "
            "probe or another hook), while hwbackends was selecting a backend",
            "plugin code that does not ask hwbackends for the selection it is part of",
            "remove the call from the plugin: a plugin is given the host and environment it "
            "needs as arguments",
        )


# -- fork ----------------------------------------------------------------------------------


def _before_fork() -> None:
    # A fork in the middle of a plugin's import (or the selection's own lazy imports around
    # it) leaves the child that module's lock held by a thread it does not have: wait a
    # little for hwbackends' own work in other threads, never for the application's.
    ident = _thread.get_ident()
    if ident in _plugin_threads or ident in _inline:
        return  # plugin code forking: it cannot wait for itself
    import time

    give_up = monotonic() + _FORK_WAIT_S
    while (_busy or _inline or len(_scopes) > (ident in _scopes)) and monotonic() < give_up:
        time.sleep(0.002)


def _after_fork_in_child() -> None:
    # Only the forking thread survives: workers, hung calls and their locks are the parent's.
    global _lock, _busy
    _lock, _busy, me = _thread.allocate_lock(), 0, _scopes.get(_thread.get_ident())
    for state in (_idle, _plugin_threads, _inline, _hung, _scopes):
        state.clear()
    if me is not None:
        _scopes[_thread.get_ident()] = me


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
