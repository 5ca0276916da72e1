"""Which other threads of the application may have run during a plugin call: the guard puts
back a process-wide edit that nothing attributes (``sys.path``, the recursion limit, thread
hooks, closed descriptors) and blames the plugin only when none may have. This module imports
only builtins, like the guard."""

from __future__ import annotations

import _thread
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


# sys._current_frames() can deadlock the process before CPython 3.11.12 (every 3.10): it
# holds the runtime's thread-list lock while it allocates, the allocation can start a
# collection whose finalizers let go of the GIL, and a thread starting or ending then takes
# the GIL and waits for that lock (python/cpython#106883, "Fix deadlock in threaded
# application when using sys._current_frames", in the 3.11.12 release notes; 3.12 collects
# only between bytecodes). There the other threads are counted instead.
FRAMES_SAFE = sys.version_info[:3] >= (3, 11, 12)


def others(ident: int, caller: int | None, ours: set[int]) -> dict[int, tuple[Any, int]] | None:
    """Where every other Python thread is (its innermost frame and instruction), the plugin
    call's (``ident``), its waiting caller's and the guard's workers (``ours``) aside; None
    if it cannot be read.

    The frames are held until the call is compared, so that a frame object seen again after
    the call is the same frame, not a new one at a reused address. Where reading them is
    unsafe (``FRAMES_SAFE``) the threads are only counted: ``{}`` when there is none but
    these, else None (so a waiting thread counts as one that may run)."""
    if not FRAMES_SAFE:
        return _alone(ident, caller, ours)
    try:
        frames = sys._current_frames()
        return {
            t: (f, f.f_lasti)
            for t, f in frames.items()
            if t != ident and t != caller and t not in ours
        }
    except Exception:  # pragma: no cover - an interpreter without it: assume they ran
        return None


def _alone(ident: int, caller: int | None, ours: set[int]) -> dict[int, tuple[Any, int]] | None:
    """``{}`` when the threads ``_thread`` started, and the main thread, are all the plugin
    call's, its caller's or the guard's workers; else None. (A thread a C extension created
    and that runs Python code is not counted: the price of not reading the frames.)"""
    threading = sys.modules.get("threading")
    main = threading.main_thread().ident if threading is not None else None
    mine = {ident, caller, *ours} - {None}
    if main is None or main not in mine:
        return None
    return {} if 1 + _thread._count() == len(mine) else None


def _waits() -> set[Any]:
    """The code of standard-library functions that block once and return: a thread seen in
    one of them, in the same frame at the same instruction before and after a call, waited
    the whole call. (Not any frame: a loop around ``time.sleep`` comes back to the same
    frame and instruction after running an iteration.)

    Blind spot: a Python signal handler runs in the main thread even while it waits here
    (the wait resumes at the same instruction after it, PEP 475), so an edit a handler makes
    during the call is taken for the plugin's."""
    codes = set()
    for mod, cls, names in (
        ("threading", "Condition", ("wait",)),
        ("threading", "Thread", ("join", "_wait_for_tstate_lock")),
        ("selectors", "SelectSelector", ("select",)),
        ("selectors", "PollSelector", ("select",)),
        ("selectors", "EpollSelector", ("select",)),
        ("selectors", "KqueueSelector", ("select",)),
    ):
        owner = getattr(sys.modules.get(mod), cls, None)
        for name in names:
            code = getattr(getattr(owner, name, None), "__code__", None)
            if code is not None:
                codes.add(code)
    return codes


def others_ran(
    before: dict[int, tuple[Any, int]] | None, ident: int, caller: int | None, ours: set[int]
) -> bool:
    """Whether another thread may have run Python code during the call: one started or
    ended, or one not seen waiting in the same blocking call before and after it."""
    after = others(ident, caller, ours)
    if before is None or after is None or before.keys() != after.keys():
        return True
    if not before:
        return False
    waits = _waits()
    return any(
        after[t][0] is not f or after[t][1] != i or f.f_code not in waits
        for t, (f, i) in before.items()
    )
