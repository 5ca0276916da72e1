"""Huawei Ascend (NPU): ``ASCEND_RT_VISIBLE_DEVICES`` (spec §6).

Physical index
    The Ascend logical device id: position among the host's Huawei devices.

Documented (CANN, envref_07_0028): a comma list of logical ids, re-indexed from 0 in list
order; "other characters or invalid device IDs are not allowed; if contained, only the
device IDs before them are read" (``1, 2,3`` -> ``[1]``; ``1,3,8`` on 8 devices -> ``[1,3]``);
only ascending ids are supported.

Chosen here:

* The value is scanned character by character: digits form an id, ``,`` closes it, and any
  other character ends the list. An id whose digits come right before that character (``1 ,2``,
  ``1a``) is kept, since it stands before the offending character (inferred, uncertain).
* An empty id (``,,``, a leading or trailing comma) ends the list.
* An id that is not above the previous one (descending or repeated) ends the list, like an
  invalid id (warning, uncertain). The sources disagree: CANN 8.5 (envref_07_0028 above) says
  only ascending ids are supported, while the CANN 6.3 documentation of the same variable
  (hiascend.com, canncommercial 6.3.RC1 environment-variable reference) shows a descending
  list kept in its order. Which one a given runtime follows is not known here.
* ``""`` is undocumented: no device assumed (as Ray reads it), uncertain.

``ASCEND_VISIBLE_DEVICES`` belongs to the Ascend Docker Runtime (physical ids, mounted at
container start) and is not read by the process.
"""

from __future__ import annotations

from hwbackends._base.errors import VisibilityError
from hwbackends._visibility.base import (
    ASCII_DIGITS,
    Trace,
    VisibleUnit,
    devices_of,
    plain_uint,
    require_ascending,
    require_indices,
    show,
    units_from,
)
from hwbackends._visibility.kinds import AscendDevices

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from hwbackends._visibility.shapes import HostLike

VENDOR = "Ascend"
VARIABLES = AscendDevices.variables
UNSET = AscendDevices.unset


def _ids(value: str, n: int, t: Trace) -> list[int]:
    picked: list[int] = []

    def accept(digits: str) -> bool:
        if not digits:
            t.step(f"An empty id ends the list; {len(picked)} kept.")
            return False
        k = plain_uint(digits)
        assert k is not None
        if k >= n:
            t.step(f"Id {show(digits)} is not a device of this host: the list ends.")
            return False
        if picked and k <= picked[-1]:
            t.warn(
                f"ASCEND_RT_VISIBLE_DEVICES lists {k} after {picked[-1]}: CANN 8.5 documents "
                "only ascending ids as supported (envref_07_0028), while CANN 6.3's "
                "documentation shows a descending list kept in order; hwbackends takes the "
                "list to end here, which may not be what this runtime does. List ids in "
                "ascending order.",
                uncertain=True,
            )
            return False
        picked.append(k)
        t.entry(f"Id {k} -> logical {len(picked) - 1}.")
        return True

    start = 0
    for i, ch in enumerate(value):
        if ch in ASCII_DIGITS:
            continue
        digits = value[start:i]
        if ch == ",":
            if not accept(digits):
                return picked
            start = i + 1
            continue
        t.step(f"Character {show(ch)} at position {i} is not allowed: reading stops.")
        if digits:
            t.infer(f"The id {show(digits)} right before it is kept")
            accept(digits)
        return picked
    accept(value[start:])
    return picked


def read(env: Mapping[str, str], host: HostLike, t: Trace) -> list[VisibleUnit]:
    n = len(devices_of(host))
    t.step(f"Host: {n} Ascend device(s) (logical ids 0..{n - 1}).")
    value = t.read("ASCEND_RT_VISIBLE_DEVICES")
    t.note_if_set("ASCEND_VISIBLE_DEVICES", "it is read by the Ascend Docker Runtime at start")
    if value is None:
        t.step("Unset: every device is visible.")
        picked = list(range(n))
    elif value == "":
        t.warn(
            "ASCEND_RT_VISIBLE_DEVICES is set but empty: no device assumed (undocumented).",
            uncertain=True,
        )
        picked = []
    else:
        picked = _ids(value, n, t)
    return units_from([(k, k, None, str(k)) for k in picked])


def write(
    physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``ASCEND_RT_VISIBLE_DEVICES`` with ascending logical ids; descending or empty raise."""
    n = len(devices_of(host))
    sel = require_indices("npu", physical, n, "Ascend devices")
    require_ascending("npu", sel, "CANN supports only ascending ids")
    if not sel:
        raise VisibilityError(
            "ASCEND_RT_VISIBLE_DEVICES has no documented value that selects no device",
            "at least one device",
            "do not start the process, or run it on the cpu backend",
        )
    return {"ASCEND_RT_VISIBLE_DEVICES": ",".join(str(k) for k in sel)}
