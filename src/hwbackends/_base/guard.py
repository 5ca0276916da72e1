"""Running plugin code so that it cannot hang, crash or edit the process that asked.

Every call into a plugin (import, constructor, probe, ``devices()``, the host-reading hooks,
``capabilities()``) goes through ``call``:

- **Time limit.** The call runs on a worker thread; the caller waits at most
  ``HWBACKENDS_TIMEOUT`` seconds (default 30; ``0`` runs the call inline with no limit). A
  call that does not return in time is a fault: the worker is abandoned (Python cannot stop a
  thread), the plugin reported broken, and nothing of that plugin (its ``owner``) is called
  again in this process until ``hwbackends.reset()``. Workers are reused; an idle one exits
  after ``_IDLE_S`` seconds, and at most ``_MAX_WORKERS`` run plugin code at once (more
  callers wait for one: every call is bounded, so the wait is too).
- **Any exception is the plugin's.** ``Exception``, ``SystemExit``, ``GeneratorExit``,
  ``KeyboardInterrupt`` raised *by plugin code* and custom ``BaseException`` subclasses become
  a ``PluginFault``. The exception's message is read on the worker, under the time limit (its
  ``__str__`` is plugin code too). A real Ctrl-C is delivered to the caller's thread, which is
  waiting, not running plugin code, so it stops the program as usual.
- **Environment writes are attributed, never guessed.** While plugin calls run (and only
  then), ``os.putenv``/``os.unsetenv``, which ``os.environ`` writes through, are wrapped: each
  write records which thread made it. The writes *of the thread running the plugin call* are
  the plugin's; writes by other threads of the application are neither recorded as the
  plugin's nor undone. After the call, a variable the plugin changed is put back only if
  nobody wrote it since, atomically against application writes (both take one lock), and the
  plugin is reported broken. What bypasses ``os.putenv`` is caught by comparing after the call:
  ``os.environ``'s own mapping and the C environment (what CUDA reads), whenever
  ``ctypes`` was loaded before the call (never imported here: it costs more than a
  selection). A call abandoned
  for hanging that writes later gets a ``PermissionError`` and its write does not happen.
- **Process-wide edits are reported.** ``sys.path`` insertions, replaced ``sys.modules``
  entries, ``os.chdir``, a closed standard output or error, ``sys.setrecursionlimit`` and
  ``threading.settrace``/``setprofile`` are compared around each call, put back where nobody
  changed them since, and reported as the plugin's fault. Who made an edit is known for
  ``os.chdir`` (wrapped, like ``os.putenv``: another thread's stands) and assumed for a
  replaced ``sys.modules`` entry (always the plugin's: that is how a plugin would hijack the
  application's imports). For the others nothing tells the plugin's edit from another
  application thread's: when such a thread may have run during the call (it was not seen
  waiting in the same blocking call before and after), the edit is neither put back nor
  blamed on the plugin, only reported (``late_writes()``). A call abandoned for
  hanging is compared when it returns, and its edits are reported (``late_writes()``) but not
  put back: the application has gone on meanwhile and may have made the same kind of edit.

Outside plugin calls nothing of this runs: no audit hook is installed, ``os.putenv`` is the
original function. This module imports only builtins, so the selection path stays cheap.
"""

from __future__ import annotations

import _thread
import os
import sys

from hwbackends._base import company as _company
from hwbackends._base import envguard as _eg
from hwbackends._base.envguard import _enter, _leave, _recorders, _State, _undo

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, TypeVar

    _T = TypeVar("_T")
    _Writes = dict[str, list[str | None]]


__all__ = [
    "DEFAULT_TIMEOUT",
    "MIN_TIMEOUT",
    "PluginFault",
    "ResultError",
    "call",
    "call_many",
    "describe",
    "forget_hung",
    "late_writes",
    "plain",
    "refuse_nested",
    "running_plugin_code",
    "timeout_from",
]

#: Seconds a single plugin call may take before it is reported as hanging.
DEFAULT_TIMEOUT = 30.0
#: The smallest limit accepted: below it not even a thread hand-off fits, and every plugin
#: would be reported hanging.
MIN_TIMEOUT = 0.01
_MAX_TEXT = 500  # characters of a plugin's exception message kept in a report
_IDLE_S = 10.0  # an idle worker thread exits after this many seconds
_MAX_WORKERS = 32  # workers running plugin code at once; abandoned ones do not count


class ResultError(TypeError):
    """Raised by the checks of a plugin's return value: its message is the whole reason."""


class PluginFault(Exception):
    """Plugin code failed: ``reason`` says how, ``tb`` is its traceback when there is one."""

    def __init__(self, reason: str, tb: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.tb = tb


def timeout_from(env: Mapping[str, str]) -> float:
    """``HWBACKENDS_TIMEOUT`` as seconds (0: no limit, run inline)."""
    raw = (env.get("HWBACKENDS_TIMEOUT") or "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    if raw.lower() in ("0", "off", "none"):
        return 0.0
    try:
        value = float(raw) if len(raw) < 40 else -1.0
    except ValueError:
        value = -1.0
    from hwbackends._base.errors import HwBackendsError

    if not 0 < value < 1e6:  # also refuses nan and inf
        raise HwBackendsError(
            f"HWBACKENDS_TIMEOUT={raw[:40]!r} is not a number of seconds",
            "a positive number of seconds, or 0 / off for no limit",
            "set HWBACKENDS_TIMEOUT=30 (the default) or unset it",
        )
    if value < MIN_TIMEOUT:
        raise HwBackendsError(
            f"HWBACKENDS_TIMEOUT={raw!r} is too small for any plugin call to finish in "
            "(a thread hand-off alone can take 5 ms)",
            f"at least {MIN_TIMEOUT:g} seconds, or 0 / off for no limit",
            "set HWBACKENDS_TIMEOUT=30 (the default) or unset it",
        )
    return value


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


# -- running one call ----------------------------------------------------------------------


class _Outcome:
    """One finished call: its value or exception, read on the thread that ran it."""

    __slots__ = ("edits", "exc_type", "failed", "ident", "tb", "text", "unsure", "value", "writes")

    def __init__(self, ident: int) -> None:
        self.ident = ident
        self.failed = False
        self.value: Any = None
        self.exc_type: type | None = None
        self.text = ""
        self.tb: str | None = None
        self.writes: _Writes = {}
        self.edits: list[str] = []
        self.unsure: list[str] = []  # edits that another thread of the application may have made


_running: dict[int, float] = {}  # ident -> deadline, for the threads running plugin code now
# ident -> where the other threads were when its call began (``company.others``): dropped when
# the call is abandoned, so that a hung call does not keep the application's frames (and their
# locals)
_frames: dict[int, Any] = {}


def _run(fn: Callable[[], Any], deadline: float, caller: int | None = None) -> _Outcome:
    ident = _thread.get_ident()
    out = _Outcome(ident)
    outer = _recorders.get(ident)  # plugin code calling back into hwbackends: a nested call
    state = _State() if outer is None else None
    if state is not None:
        _frames[ident] = _company.others(ident, caller, _plugin_threads)
    _recorders[ident] = out.writes
    _running[ident] = deadline
    try:
        out.value = fn()
    except BaseException as exc:  # everything plugin code raises is the plugin's
        out.failed = True
        out.value = exc
        out.exc_type = type(exc)
        out.text = describe(exc)  # here: its __str__ is plugin code, under the time limit
        try:
            import traceback

            out.tb = plain(traceback.format_exc())
        except BaseException:
            out.tb = None
    finally:
        if outer is None:
            _recorders.pop(ident, None)
            _running.pop(ident, None)
        else:
            _recorders[ident] = outer
    if state is not None:
        try:
            # an abandoned call's snapshot is gone: it is judged as not alone
            before = _frames.pop(ident, None)
            alone = not _company.others_ran(before, ident, caller, _plugin_threads)
            out.edits, out.unsure = state.edits(out.writes, ident, alone)
        except Exception:  # pragma: no cover - a comparison must never fail the call
            out.edits = []
    return out


# -- the worker threads --------------------------------------------------------------------

_plugin_threads: set[int] = set()  # idents of the worker threads (plugin code runs there)
_idle: list[_Worker] = []
_pool_lock = _thread.allocate_lock()
_slots = _thread.allocate_lock()  # guards _busy
_busy = 0  # workers running plugin code now (abandoned ones excluded)
_hung: dict[str, str] = {}  # owner -> why it is not called again until reset()


class _Worker:
    __slots__ = ("abandoned", "done", "go", "ident", "job", "out")

    def __init__(self) -> None:
        # threading must be imported by the caller's thread first: imported first by plugin
        # code in a worker, it would take the worker for the main thread and hang at exit.
        import threading  # noqa: F401

        self.go = _thread.allocate_lock()
        self.go.acquire()
        self.done = _thread.allocate_lock()
        self.done.acquire()
        self.job: Callable[[], Any] | None = None
        self.out: Any = None
        self.abandoned = False
        self.ident = 0
        _thread.start_new_thread(self._loop, ())

    def _loop(self) -> None:
        self.ident = ident = _thread.get_ident()
        _plugin_threads.add(ident)
        try:
            while True:
                if not self.go.acquire(True, _IDLE_S):
                    with _pool_lock:
                        if self in _idle:  # nobody took it meanwhile: the pool shrinks
                            _idle.remove(self)
                            return
                    self.go.acquire()  # taken just now: its job is coming
                job = self.job
                if job is None:
                    return
                self.out = job()
                self.done.release()
                if self.abandoned:
                    what = _eg._abandoned.get(ident, "a plugin call")
                    edits = getattr(self.out, "edits", None)
                    edits = [*(edits or ()), *getattr(self.out, "unsure", ())]
                    if edits and len(_eg._late) < 64:
                        _eg._late.append(f"{what}, abandoned for hanging, {'; '.join(edits)}")
                    return  # its caller gave up on it: nobody will hand it work again
        finally:
            _plugin_threads.discard(ident)
            if _eg._abandoned.pop(ident, None) is not None:
                _leave()


def _take() -> _Worker:
    global _busy
    while True:
        with _slots:
            if _busy < _MAX_WORKERS:
                _busy += 1
                break
        # every busy worker is bounded by its caller's limit: a slot frees soon
        import time

        time.sleep(0.001)
    with _pool_lock:
        if _idle:
            return _idle.pop()
    return _Worker()


def _release_slot() -> None:
    global _busy
    with _slots:
        _busy -= 1


def _give_back(w: _Worker) -> None:
    w.job = None
    w.out = None
    _release_slot()
    with _pool_lock:
        _idle.append(w)


def _abandon(w: _Worker, what: str) -> list[str]:
    """Give up on a worker past its limit: what it wrote so far is undone (the names), its
    later writes are refused, and the writers stay wrapped until its call ends."""
    w.abandoned = True
    _release_slot()
    if not w.ident:
        return []  # pragma: no cover - a worker sets its ident before it takes a job
    _enter()  # left when the abandoned call returns, if ever
    _frames.pop(w.ident, None)
    with _eg._env_lock:
        _eg._abandoned[w.ident] = what
        writes = _recorders.get(w.ident)
        return _undo(dict(writes), w.ident) if writes else []


def _monotonic() -> float:
    from time import monotonic

    return monotonic()


def call(
    what: str,
    fn: Callable[[], _T],
    *,
    timeout: float | None = None,
    passthrough: tuple[type[BaseException], ...] = (),
    owner: str | None = None,
) -> _T:
    """Run plugin code ``fn``; raise ``PluginFault`` for any failure, hang or env edit.

    ``what`` names the call in messages (``"acme.probe()"``). ``timeout`` defaults to
    ``HWBACKENDS_TIMEOUT`` from ``os.environ``. ``passthrough`` exceptions propagate as they are.
    ``owner`` (a backend's name or entry point) is not called again once one of its calls hung.
    """
    limit = timeout_from(os.environ) if timeout is None else timeout
    if owner is not None and owner in _hung:
        raise PluginFault(_hung[owner])
    ident = _thread.get_ident()
    # no limit asked, or called from plugin code (a worker, or an inline call with no limit,
    # such as the built-in cpu's): the enclosing call's limit covers it
    inline = limit <= 0 or ident in _plugin_threads or ident in _recorders
    _enter()
    try:
        if inline:
            out = _run(fn, _monotonic() + DEFAULT_TIMEOUT)
        else:
            w = _take()
            w.job = partial_run(fn, _monotonic() + limit, ident)
            w.go.release()
            try:
                finished = w.done.acquire(True, limit)
            except BaseException:  # a real Ctrl-C while waiting: the program stops
                _abandon(w, what)
                raise
            if not finished:
                undone = _abandon(w, what)
                raise _hung_fault(what, limit, owner, undone)
            out = w.out
            _give_back(w)
        return _settle(what, out, inline=inline, limit=limit, passthrough=passthrough)  # type: ignore[no-any-return]
    finally:
        _leave()


def partial_run(
    fn: Callable[[], Any], deadline: float, caller: int | None = None
) -> Callable[[], _Outcome]:
    return lambda: _run(fn, deadline, caller)


def _settle(
    what: str,
    out: _Outcome,
    *,
    inline: bool,
    limit: float,
    passthrough: tuple[type[BaseException], ...] = (),
) -> Any:
    """The value of one finished call, or the ``PluginFault`` that says what went wrong.

    Runs no plugin code: the exception's type and text were read on the plugin's thread, and
    classes are compared with ``issubclass`` on the real type (not ``isinstance``, which would
    read a ``__class__`` the plugin may define)."""
    changed = _undo(out.writes, out.ident)
    for edit in out.unsure:
        if len(_eg._late) < 64:
            _eg._late.append(
                f"while {what} ran beside another thread of the application, the process "
                f"{edit}: neither put back nor blamed on the plugin (either may have done it)"
            )
    if out.failed:
        t = out.exc_type or BaseException
        if passthrough and issubclass(t, passthrough):
            raise out.value
        if issubclass(t, PluginFault):  # raised by hwbackends' own checks inside the call
            raise out.value
        if inline and issubclass(t, KeyboardInterrupt) and limit <= 0:
            raise out.value  # inline, a Ctrl-C cannot be told from the plugin's own
        if issubclass(t, ResultError):
            raise PluginFault(out.text.partition(": ")[2], None)
        raise PluginFault(f"{what} raised {out.text}", out.tb)
    problems = []
    if changed:
        problems.append(f"changed os.environ ({', '.join(changed)})")
    problems.extend(out.edits)
    if problems:
        raise PluginFault(
            f"{what} {'; '.join(problems)}; a plugin must not change the environment or "
            "process-wide state of the process that imports or probes it"
        )
    return out.value


def call_many(
    jobs: Sequence[tuple[str, Callable[[], Any]] | tuple[str, Callable[[], Any], str | None]],
    *,
    timeout: float | None = None,
) -> list[tuple[bool, Any]]:
    """Several plugin calls on one worker, each with its own time limit: one thread hand-off
    for the lot instead of one per call (a hand-off can wait for the interpreter's switch
    interval in a busy process). A job is ``(what, fn)`` or ``(what, fn, owner)``. Returns
    ``(True, value)`` or ``(False, PluginFault)`` per job, in order; a call that hangs is
    abandoned with its worker and the rest go to a new one."""
    limit = timeout_from(os.environ) if timeout is None else timeout
    results: list[tuple[bool, Any]] = []

    def owner_of(job: Sequence[Any]) -> str | None:
        return job[2] if len(job) > 2 else None

    ident = _thread.get_ident()
    if limit <= 0 or ident in _plugin_threads or ident in _recorders or len(jobs) < 2:
        for job in jobs:
            try:
                results.append((True, call(job[0], job[1], timeout=limit, owner=owner_of(job))))
            except PluginFault as fault:
                results.append((False, fault))
        return results
    from time import monotonic

    _enter()
    try:
        while len(results) < len(jobs):
            job = jobs[len(results)]
            owner = owner_of(job)
            if owner is not None and owner in _hung:
                results.append((False, PluginFault(_hung[owner])))
                continue
            batch = []
            for job in jobs[len(results) :]:
                if owner_of(job) is not None and owner_of(job) in _hung:
                    break
                batch.append(job)
            progress = [0, monotonic()]  # the job running now, and when it started
            outcomes: list[_Outcome] = []

            # bound as defaults: an abandoned worker still running an earlier batch writes
            # only into that batch's lists, never into this one's
            def run_batch(
                batch: Sequence[Any] = batch,
                progress: list[Any] = progress,
                outcomes: list[_Outcome] = outcomes,
            ) -> None:
                for k, job in enumerate(batch):
                    progress[0], progress[1] = k, monotonic()
                    outcomes.append(_run(job[1], progress[1] + limit, ident))

            w = _take()
            w.job = run_batch
            w.go.release()
            try:
                while True:
                    k, started = progress
                    if w.done.acquire(True, max(started + limit - monotonic(), 0.001)):
                        break
                    if progress[0] == k and monotonic() - progress[1] >= limit:
                        break  # job k has run past its limit
            except BaseException:  # a real Ctrl-C while waiting
                _abandon(w, batch[int(progress[0])][0])
                raise
            settled = list(outcomes)  # a worker past its limit may still append: this copy
            finished = len(settled) == len(batch)
            undone: list[str] = []
            if not finished:
                undone = _abandon(w, batch[len(settled)][0])
            for job, out in zip(batch, settled, strict=False):
                try:
                    results.append((True, _settle(job[0], out, inline=False, limit=limit)))
                except PluginFault as fault:
                    results.append((False, fault))
            if finished:
                _give_back(w)
            else:
                job = batch[len(settled)]
                results.append((False, _hung_fault(job[0], limit, owner_of(job), undone)))
        return results
    finally:
        _leave()


def _hung_fault(
    what: str, limit: float, owner: str | None, undone: list[str] | None = None
) -> PluginFault:
    wrote = f"; its writes to {', '.join(undone)} were undone" if undone else ""
    fault = PluginFault(
        f"{what} did not return within {limit:g} s and was abandoned (it may hang){wrote}; "
        "raise HWBACKENDS_TIMEOUT if it is only slow"
    )
    if owner is not None:
        _hung[owner] = (
            f"{what} did not return within {limit:g} s earlier in this process; the plugin is "
            "not called again until hwbackends.reset() (raise HWBACKENDS_TIMEOUT if it is "
            "only slow)"
        )
    return fault


def forget_hung() -> None:
    """Let plugins that hung be called again (``hwbackends.reset``)."""
    _hung.clear()


def late_writes() -> list[str]:
    """Environment writes refused to abandoned calls, and the edits such a call was found to
    have made when it returned, since the last ask (then forgotten)."""
    out = list(_eg._late)
    del _eg._late[: len(out)]
    return out


def running_plugin_code() -> bool:
    """Whether the calling thread is running a plugin call right now (or is a worker)."""
    ident = _thread.get_ident()
    return ident in _plugin_threads or ident in _recorders


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


_FORK_IMPORT_WAIT_S = 2.0  # how long a fork waits for another thread's import to finish


def _importing_elsewhere(ident: int) -> bool:
    """Whether a thread other than ``ident`` holds a module's import lock: it is running that
    module's import (read from the import system's table of module locks, where present). A
    worker abandoned for hanging does not count: its import may never end."""
    locks = getattr(sys.modules.get("_frozen_importlib"), "_module_locks", None)
    try:
        refs = list(locks.values()) if isinstance(locks, dict) else []
        for ref in refs:
            owner = getattr(ref() if callable(ref) else ref, "owner", None)
            if owner is not None and owner != ident and owner not in _eg._abandoned:
                return True
    except Exception:  # pragma: no cover - another Python's internals: no wait
        return False
    return False


def _before_fork() -> None:
    # Wait (bounded by each call's own limit) until no other thread runs plugin code: a fork
    # in the middle of a plugin's import would leave the child with that module's import lock
    # held by a thread that does not exist there, or a half-initialised module. The same holds
    # for any import under way in another thread, such as the selection's own lazy imports
    # right after a plugin call (the child then hangs importing that module): wait for those
    # too, at most _FORK_IMPORT_WAIT_S.
    ident = _thread.get_ident()
    if ident in _plugin_threads or ident in _recorders:
        return  # plugin code forking: it cannot wait for itself
    import time

    give_up: float | None = None
    while True:
        now = time.monotonic()
        waiting = [
            t for t, deadline in list(_running.items()) if t != ident and deadline > now
            and t not in _eg._abandoned
        ]  # fmt: skip
        if not waiting:
            if not _importing_elsewhere(ident):
                return
            if give_up is None:
                give_up = now + _FORK_IMPORT_WAIT_S
            elif now >= give_up:
                return
        time.sleep(0.002)


def _after_fork_in_child() -> None:
    # Only the forking thread survives: workers and their locks belong to the parent.
    global _pool_lock, _slots, _busy
    _pool_lock = _thread.allocate_lock()
    _slots = _thread.allocate_lock()
    _busy = 0
    _idle.clear()
    _plugin_threads.clear()
    _running.clear()
    _frames.clear()
    _eg.reset_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
