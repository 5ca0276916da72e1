"""Google TPU: ``TPU_VISIBLE_CHIPS`` and the libtpu bounds variables (spec §4).

Physical index
    The chip index (``/dev/accel<N>``): position among the host's Google devices.

There is no public libtpu specification; the reference is a JAX maintainer's gist
(https://gist.github.com/skye/f82ba45d2445bb19d53545538754f9a3). Choices made here:

* ``TPU_VISIBLE_CHIPS`` wins over the older spelling ``TPU_VISIBLE_DEVICES``; the latter is
  read only when the former is unset (equivalence inferred; warning when both differ).
* The chips are a set opened by one process: repeats are merged and the chips are numbered in
  ascending chip order (inferred; warning when the list was not ascending). Blanks around
  entries are ignored.
* A value libtpu cannot open (not a number, a chip the host lacks) or a malformed bounds value
  (not three positive integers ``x,y,z``) is a :class:`VisibilityError`: libtpu fails at start.
* ``""`` is undocumented: read as no chip (as Ray does), uncertain.
* Bounds: ``TPU_CHIPS_PER_PROCESS_BOUNDS`` (older ``TPU_CHIPS_PER_HOST_BOUNDS``) must multiply
  to the number of visible chips and ``TPU_PROCESS_BOUNDS`` (older ``TPU_HOST_BOUNDS``) gives
  the process grid; a product that does not match is a *warning* (libtpu reports it when it
  starts; the chips the process opens are still those listed). A subset of chips without
  chips-per-process bounds is also a warning (the gist sets both).
"""

from __future__ import annotations

from hwbackends._base.errors import VisibilityError
from hwbackends._visibility.base import (
    C_SPACE,
    Trace,
    VisibleUnit,
    devices_of,
    plain_uint,
    require_ascending,
    require_indices,
    show,
    units_from,
)
from hwbackends._visibility.kinds import TpuChips

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from hwbackends._visibility.shapes import HostLike

VENDOR = "TPU"
VARIABLES = TpuChips.variables
UNSET = TpuChips.unset
_SHAPES = {1: "1,1,1", 2: "1,2,1", 4: "2,2,1"}


def _pick(t: Trace, new: str, old: str) -> tuple[str, str | None]:
    a, b = t.read(new), t.read(old)
    if a is not None and b is not None and a != b:
        t.warn(f"{new} and the older {old} are both set and differ; {new} is used.", uncertain=True)
    if a is None and b is not None:
        t.step(f"{new} is unset; the older spelling {old} is used.")
        return old, b
    return new, a


def _bounds(name: str, raw: str) -> tuple[int, int, int]:
    parts = [p.strip(C_SPACE) for p in raw.split(",")]
    values = [plain_uint(p) for p in parts]
    if len(values) != 3 or any(v is None or v == 0 or v > 4096 for v in values):
        raise VisibilityError(
            f"{name}={show(raw)} is not a bounds triple",
            "three positive integers x,y,z such as 1,1,1 or 2,2,1",
            f"fix or unset {name}",
        )
    x, y, z = (v or 1 for v in values)
    return x, y, z


def read(env: Mapping[str, str], host: HostLike, t: Trace) -> list[VisibleUnit]:
    chips = devices_of(host)
    n = len(chips)
    t.step(f"Host: {n} TPU chip(s).")
    name, value = _pick(t, "TPU_VISIBLE_CHIPS", "TPU_VISIBLE_DEVICES")
    if value is None:
        t.step("No chip list: every chip is visible.")
        picked = list(range(n))
    elif value == "":
        t.warn(
            f"{name} is set but empty; libtpu's reading is undocumented (no chip assumed).",
            uncertain=True,
        )
        picked = []
    else:
        listed: list[int] = []
        for token in value.split(","):
            k = plain_uint(token.strip(C_SPACE))
            if k is None or k >= n:
                raise VisibilityError(
                    f"{name}={show(value)} names {show(token)}, which is not a chip of this host",
                    f"chip indices in 0..{n - 1}" if n else "no chip: the host has none",
                    f"fix or unset {name}",
                )
            if k in listed:
                t.warn(f"{name} names chip {k} twice; repeats are merged.", uncertain=True)
                continue
            listed.append(k)
            t.entry(f"Entry {show(token)} is chip {k}.")
        picked = sorted(listed)
        if picked != listed:
            t.warn(
                f"{name} is not ascending; libtpu numbers the chips it opens by position, "
                "assumed ascending (undocumented). List chips ascending.",
                uncertain=True,
            )
    _check_bounds(t, len(picked), n)
    return units_from([(k, k, None, str(k)) for k in picked])


def _check_bounds(t: Trace, visible: int, n: int) -> None:
    cname, craw = _pick(t, "TPU_CHIPS_PER_PROCESS_BOUNDS", "TPU_CHIPS_PER_HOST_BOUNDS")
    pname, praw = _pick(t, "TPU_PROCESS_BOUNDS", "TPU_HOST_BOUNDS")
    if craw is not None:
        x, y, z = _bounds(cname, craw)
        if x * y * z != visible:
            t.warn(
                f"{cname}={show(craw)} describes {x * y * z} chip(s) but {visible} are "
                "visible; libtpu will most likely refuse to start. Make the product match.",
                uncertain=True,
            )
        else:
            t.step(f"{cname} matches the {visible} visible chip(s).")
    elif visible != n:
        t.warn(
            "Only some chips are visible but TPU_CHIPS_PER_PROCESS_BOUNDS is unset; libtpu "
            "then assumes the host's whole topology. Set TPU_CHIPS_PER_PROCESS_BOUNDS and "
            "TPU_PROCESS_BOUNDS (see hwbackends' visibility_env('tpu', ...))."
        )
    if praw is not None:
        x, y, z = _bounds(pname, praw)
        if x * y * z > 1:
            t.step(
                f"{pname} describes {x * y * z} processes: each also needs "
                "TPU_PROCESS_ADDRESSES, TPU_PROCESS_PORT and CLOUD_TPU_TASK_ID."
            )


def write(
    physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """All chips: nothing to set (remove every TPU variable, see ``UNSET``). A subset of 1, 2
    or 4 ascending chips: ``TPU_VISIBLE_CHIPS`` with the gist's bounds (``1,1,1``, ``1,2,1``,
    ``2,2,1``) and ``TPU_PROCESS_BOUNDS=1,1,1``; the chips of a 2- or 4-chip subset must be
    neighbours on the board, which the host description cannot check. Other sizes and an
    empty selection have no documented expression and raise VisibilityError."""
    n = len(devices_of(host))
    sel = require_indices("tpu", physical, n, "TPU chips")
    require_ascending("tpu", sel, "libtpu numbers the chips it opens by position")
    if sel and len(sel) == n:
        return {}
    if len(sel) not in _SHAPES:
        raise VisibilityError(
            f"{len(sel)} of {n} TPU chips cannot be given to one process",
            "1, 2 or 4 chips, or all chips (libtpu needs a chips-per-process shape)",
            "select 1, 2 or 4 chips, or all of them",
        )
    return {
        "TPU_VISIBLE_CHIPS": ",".join(str(k) for k in sel),
        "TPU_CHIPS_PER_PROCESS_BOUNDS": _SHAPES[len(sel)],
        "TPU_PROCESS_BOUNDS": "1,1,1",
    }
