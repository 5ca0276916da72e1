"""Running plugin code so that it cannot hang, crash or edit the process that asked.

Every call into a plugin (import, constructor, probe, ``devices()``, the host-reading hooks,
``capabilities()``) goes through ``call``:

- **Time limit.** The call runs on a worker thread; the caller waits at most
  ``HWBACKENDS_TIMEOUT`` seconds (default 30; ``0`` runs the call inline with no limit). A
  call that does not return in time is a fault: the worker is abandoned (Python cannot stop a
  thread) and the plugin reported broken. Workers are reused, so a selection costs one thread.
- **Any exception is the plugin's.** ``Exception``, ``SystemExit``, ``GeneratorExit``,
  ``KeyboardInterrupt`` raised *by plugin code* and custom ``BaseException`` subclasses become
  a ``PluginFault``. A real Ctrl-C is delivered to the caller's thread, which is waiting, not
  running plugin code, so it stops the program as usual.
- **Environment writes are attributed, never guessed.** An audit hook (PEP 578 events
  ``os.putenv`` / ``os.unsetenv``) records the writes made *by the thread running the plugin
  call*, with each variable's value before. Writes by other threads of the application are
  neither recorded nor undone, so a busy application never loses a write and a plugin is
  never blamed for a race. After the call, a variable the plugin changed is put back only if
  it still holds the plugin's value (a later write by anyone else wins), and the plugin is
  reported broken.

This module imports only builtins, so the selection path stays cheap.
"""

from __future__ import annotations

import _thread
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, TypeVar

    _T = TypeVar("_T")
    _Writes = dict[str, list[str | None]]
    # (failed, the value or the exception, its traceback, the env writes of the call)
    _Outcome = tuple[bool, Any, str | None, _Writes]


__all__ = [
    "DEFAULT_TIMEOUT",
    "PluginFault",
    "ResultError",
    "call",
    "call_many",
    "describe",
    "running_plugin_code",
    "timeout_from",
]

#: Seconds a single plugin call may take before it is reported as hanging.
DEFAULT_TIMEOUT = 30.0
_MAX_TEXT = 500  # characters of a plugin's exception message kept in a report


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
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e6:  # also refuses nan and inf
        from hwbackends._base.errors import HwBackendsError

        raise HwBackendsError(
            f"HWBACKENDS_TIMEOUT={raw!r} is not a number of seconds",
            "a positive number of seconds, or 0 / off for no limit",
            "set HWBACKENDS_TIMEOUT=30 (the default) or unset it",
        )
    return value


def describe(exc: BaseException) -> str:
    """``Type: message`` of a plugin's exception, even when its ``__str__`` misbehaves."""
    try:
        text = str(exc)
    except BaseException:  # a hostile __str__ must not escape either
        text = "<the exception's message could not be read>"
    if len(text) > _MAX_TEXT:
        text = text[:_MAX_TEXT] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# -- environment-write attribution ---------------------------------------------------------

# thread ident -> {variable: [value before the call, value the plugin left]} for the threads
# running a plugin call right now; empty almost always, which is all the hook checks.
_recorders: dict[int, _Writes] = {}
_hook_installed = False


def _text(v: object) -> str:
    return os.fsdecode(v) if isinstance(v, bytes) else str(v)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _recorders:
        return
    if event != "os.putenv" and event != "os.unsetenv":
        return
    rec = _recorders.get(_thread.get_ident())
    if rec is None:
        return  # another thread of the application: not ours to judge
    try:
        key = _text(args[0])
        new = _text(args[1]) if event == "os.putenv" else None
        entry = rec.get(key)
        if entry is None:
            # the audit event fires before os.environ's mapping is updated: this is the old value
            rec[key] = [os.environ.get(key), new]
        else:
            entry[1] = new
    except Exception:
        pass  # an audit hook must never break the write it observes


def _install_hook() -> None:
    global _hook_installed
    _hook_installed = True
    # another hook may veto adding hooks: then writes go undetected, nothing else changes
    try:  # noqa: SIM105 - contextlib is not imported on the selection path
        sys.addaudithook(_audit)
    except Exception:
        pass


def _undo(writes: _Writes) -> list[str]:
    """Put back what the plugin changed, where nobody has written since; the names changed."""
    changed = []
    for key, (before, after) in writes.items():
        if before == after:
            continue
        changed.append(key)
        env = os.environ
        try:
            if env.get(key) != after:
                continue  # written again since, by someone else: theirs stands
            if before is None:
                env.pop(key, None)
            else:
                env[key] = before
        except Exception:
            pass
    return sorted(changed)


# -- the worker threads --------------------------------------------------------------------


def _run(fn: Callable[[], Any]) -> _Outcome:
    ident = _thread.get_ident()
    writes: _Writes = {}
    outer = _recorders.get(ident)  # plugin code calling back into hwbackends: a nested call
    _recorders[ident] = writes
    try:
        return (False, fn(), None, writes)
    except BaseException as exc:  # everything plugin code raises is the plugin's
        import traceback

        try:
            tb = traceback.format_exc()
        except BaseException:
            tb = None
        return (True, exc, tb, writes)
    finally:
        if outer is None:
            _recorders.pop(ident, None)
        else:
            _recorders[ident] = outer


_plugin_threads: set[int] = set()  # idents of the worker threads (plugin code runs there)
_idle: list[_Worker] = []
_pool_lock = _thread.allocate_lock()


class _Worker:
    __slots__ = ("abandoned", "done", "go", "job", "out")

    def __init__(self) -> None:
        # threading must be imported by the caller's thread first: imported first by plugin
        # code in a worker, it would take the worker for the main thread and hang at exit.
        import threading  # noqa: F401

        self.go = _thread.allocate_lock()
        self.go.acquire()
        self.done = _thread.allocate_lock()
        self.done.acquire()
        self.job: Callable[[], Any] | None = None
        self.out: _Outcome | None = None
        self.abandoned = False
        _thread.start_new_thread(self._loop, ())

    def _loop(self) -> None:
        _plugin_threads.add(_thread.get_ident())
        while True:
            self.go.acquire()
            job = self.job
            if job is None:
                return
            self.out = _run(job)
            self.done.release()
            if self.abandoned:
                return  # its caller gave up on it: nobody will hand it work again


def _take() -> _Worker:
    with _pool_lock:
        if _idle:
            return _idle.pop()
    return _Worker()


def _give_back(w: _Worker) -> None:
    w.job = None
    w.out = None
    with _pool_lock:
        _idle.append(w)


def call(
    what: str,
    fn: Callable[[], _T],
    *,
    timeout: float | None = None,
    passthrough: tuple[type[BaseException], ...] = (),
) -> _T:
    """Run plugin code ``fn``; raise ``PluginFault`` for any failure, hang or env edit.

    ``what`` names the call in messages (``"acme.probe()"``). ``timeout`` defaults to
    ``HWBACKENDS_TIMEOUT`` from ``os.environ``. ``passthrough`` exceptions propagate as they are.
    """
    if not _hook_installed:
        _install_hook()
    limit = timeout_from(os.environ) if timeout is None else timeout
    inline = limit <= 0 or _thread.get_ident() in _plugin_threads
    out: _Outcome | None
    if inline:  # no limit asked, or plugin code calling back into hwbackends
        out = _run(fn)
    else:
        w = _take()
        w.job = fn
        w.go.release()
        try:
            finished = w.done.acquire(True, limit)
        except BaseException:  # a real Ctrl-C while waiting: the program stops, the worker is left
            w.abandoned = True
            raise
        if not finished:
            w.abandoned = True
            raise _hung(what, limit)
        out = w.out
        _give_back(w)
    if out is None:  # pragma: no cover - the worker always sets it before releasing done
        raise PluginFault(f"{what} gave no result")
    return _settle(what, out, inline=inline, limit=limit, passthrough=passthrough)  # type: ignore[no-any-return]


def _settle(
    what: str,
    out: _Outcome,
    *,
    inline: bool,
    limit: float,
    passthrough: tuple[type[BaseException], ...] = (),
) -> Any:
    """The value of one finished call, or the ``PluginFault`` that says what went wrong."""
    failed, value, tb, writes = out
    # hwbackends' own undo must not count as a write of an enclosing plugin call
    ident = _thread.get_ident()
    enclosing = _recorders.pop(ident, None)
    try:
        changed = _undo(writes)
    finally:
        if enclosing is not None:
            _recorders[ident] = enclosing
    if failed:
        if isinstance(value, passthrough):
            raise value
        if isinstance(value, PluginFault):  # raised by hwbackends' own checks inside the call
            raise value
        if inline and isinstance(value, KeyboardInterrupt) and limit <= 0:
            raise value  # inline, a Ctrl-C cannot be told from the plugin's own: let it stop us
        if isinstance(value, ResultError):
            raise PluginFault(describe(value).partition(": ")[2], None)
        raise PluginFault(f"{what} raised {describe(value)}", tb)
    if changed:
        raise PluginFault(
            f"{what} changed os.environ ({', '.join(changed)}); a plugin must not edit the "
            "environment of the process that imports or probes it"
        )
    return value


def call_many(
    jobs: Sequence[tuple[str, Callable[[], Any]]], *, timeout: float | None = None
) -> list[tuple[bool, Any]]:
    """Several plugin calls on one worker, each with its own time limit: one thread hand-off
    for the lot instead of one per call (a hand-off can wait for the interpreter's switch
    interval in a busy process). Returns ``(True, value)`` or ``(False, PluginFault)`` per job,
    in order; a call that hangs is abandoned with its worker and the rest go to a new one."""
    limit = timeout_from(os.environ) if timeout is None else timeout
    results: list[tuple[bool, Any]] = []
    if limit <= 0 or _thread.get_ident() in _plugin_threads or len(jobs) < 2:
        for what, fn in jobs:
            try:
                results.append((True, call(what, fn, timeout=limit)))
            except PluginFault as fault:
                results.append((False, fault))
        return results
    if not _hook_installed:
        _install_hook()
    from time import monotonic

    while len(results) < len(jobs):
        batch = jobs[len(results) :]
        progress = [0, monotonic()]  # the job running now, and when it started
        outcomes: list[_Outcome] = []

        # bound as defaults: an abandoned worker still running an earlier batch writes only
        # into that batch's lists, never into this one's
        def run_batch(
            batch: Sequence[tuple[str, Callable[[], Any]]] = batch,
            progress: list[Any] = progress,
            outcomes: list[_Outcome] = outcomes,
        ) -> None:
            for k, (_what, fn) in enumerate(batch):
                progress[0], progress[1] = k, monotonic()
                outcomes.append(_run(fn))

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
            w.abandoned = True
            raise
        settled = list(outcomes)  # a worker past its limit may still append: judge this copy
        finished = len(settled) == len(batch)
        for (what, _fn), out in zip(batch, settled, strict=False):
            try:
                results.append((True, _settle(what, out, inline=False, limit=limit)))
            except PluginFault as fault:
                results.append((False, fault))
        if finished:
            _give_back(w)
        else:
            w.abandoned = True
            results.append((False, _hung(batch[len(settled)][0], limit)))
    return results


def _hung(what: str, limit: float) -> PluginFault:
    return PluginFault(
        f"{what} did not return within {limit:g} s and was abandoned (it may hang); "
        "raise HWBACKENDS_TIMEOUT if it is only slow"
    )


def running_plugin_code() -> bool:
    """Whether the calling thread is running a plugin call right now (or is a worker)."""
    ident = _thread.get_ident()
    return ident in _plugin_threads or ident in _recorders


def _after_fork_in_child() -> None:
    # Only the forking thread survives: workers and their locks belong to the parent.
    global _pool_lock
    _pool_lock = _thread.allocate_lock()
    _idle.clear()
    _plugin_threads.clear()
    _recorders.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
