"""Intel Gaudi (HPU): ``HABANA_VISIBLE_MODULES`` (spec §5).

Physical index
    Position among the host's Habana devices, which are listed in module order. Each device's
    module id is ``extra["module_id"]`` (default: its position); ``HABANA_VISIBLE_MODULES``
    names module ids, which are mapped back to positions. Labels are the module ids.

Documented (docs.habana.ai, Multiple_Workloads_Single_Docker): a comma list of unique module
ids; within a process group the process of local rank ``r`` takes the module at position
``r`` of the list, so the list order is kept. Undocumented, chosen here (uncertain): blanks
around entries are ignored; an entry that is not a module id of this host ends the list (as
for the other ``*_VISIBLE_*`` variables); a repeated id is skipped; ``""`` means no module
(as Ray reads it). ``HABANA_VISIBLE_DEVICES`` is the container runtime's variable (device
indices, applied when the container starts) and is not read by the process.
"""

from __future__ import annotations

from hwbackends._base.errors import VisibilityError
from hwbackends._visibility.base import (
    C_SPACE,
    Trace,
    VisibleUnit,
    devices_of,
    int_extra,
    plain_uint,
    require_indices,
    show,
    units_from,
)
from hwbackends._visibility.kinds import GaudiModules

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from hwbackends._visibility.shapes import HostLike

VENDOR = "Gaudi"
VARIABLES = GaudiModules.variables
UNSET = GaudiModules.unset


def module_ids(host: HostLike) -> list[int]:
    ids = []
    for pos, dev in enumerate(devices_of(host)):
        mid = int_extra(dev, "module_id", pos, VENDOR)
        ids.append(pos if mid is None else mid)
    if len(set(ids)) != len(ids):
        raise VisibilityError(
            f"the host's Gaudi module ids {ids} repeat",
            "one unique module_id per Gaudi device (hl-smi -Q index,module_id -f csv)",
            "fix module_id in the host description",
        )
    return ids


def read(env: Mapping[str, str], host: HostLike, t: Trace) -> list[VisibleUnit]:
    ids = module_ids(host)
    where = {m: pos for pos, m in enumerate(ids)}
    t.step(f"Host: {len(ids)} Gaudi device(s) with module ids {ids[:64]}.")
    value = t.read("HABANA_VISIBLE_MODULES")
    t.note_if_set("HABANA_VISIBLE_DEVICES", "it is read by the container runtime at start")
    picked: list[int] = []
    if value is None:
        t.step("Unset: every module is visible, in module order.")
        picked = list(range(len(ids)))
    elif value == "":
        t.warn(
            "HABANA_VISIBLE_MODULES is set but empty: no module assumed (undocumented).",
            uncertain=True,
        )
    else:
        for i, token in enumerate(value.split(",")):
            tok = token.strip(C_SPACE)
            mid = plain_uint(tok)
            if mid is None or mid not in where:
                t.warn(
                    f"HABANA_VISIBLE_MODULES entry {i} {show(token)} is not a module id of this "
                    f"host (ids {ids[:16]}); the list is assumed to end there (undocumented).",
                    uncertain=True,
                )
                break
            pos = where[mid]
            if pos in picked:
                t.warn(
                    f"HABANA_VISIBLE_MODULES repeats module {mid}; the ids must be unique "
                    "(documented); the repeat is skipped.",
                    uncertain=True,
                )
                continue
            picked.append(pos)
            t.entry(f"Entry {i} {show(token)} is module {mid} = device {pos}.")
        if picked:
            t.step("With a process group, local rank r opens the module at position r.")
    return units_from([(p, p, None, str(ids[p])) for p in picked])


def write(
    physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``HABANA_VISIBLE_MODULES`` with the module ids of the selected devices, in order.

    Habana documents only 2- and 4-module partial selections (``0,1`` ... ``4,5,6,7``); other
    selections are written too. There is no documented "no module" value: empty raises.
    """
    ids = module_ids(host)
    sel = require_indices("hpu", physical, len(ids), "Gaudi devices")
    if not sel:
        raise VisibilityError(
            "HABANA_VISIBLE_MODULES has no documented value that selects no module",
            "at least one device",
            "do not start the process, or run it on the cpu backend",
        )
    return {"HABANA_VISIBLE_MODULES": ",".join(str(ids[p]) for p in sel)}
