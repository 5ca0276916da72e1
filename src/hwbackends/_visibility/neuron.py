"""AWS Neuron: ``NEURON_RT_VISIBLE_CORES``, ``NEURON_RT_NUM_CORES``, ``NEURON_LOGICAL_NC_CONFIG``.

Physical index
    The (logical) NeuronCore index the runtime uses: device ``d`` contributes
    ``extra["cores"] // LNC`` consecutive indices, devices in host order (spec §3). Under
    ``NEURON_LOGICAL_NC_CONFIG=2`` two physical NeuronCores form one logical core, and indices
    count logical cores (aws-neuron-sdk ``logical-neuroncore-config.rst``). ``sub_index`` is
    the core's position within its device; labels are ``nc<k>``.

Defaults chosen here (sources are silent on some):

* Physical cores per device when ``extra["cores"]`` is missing, by ``arch``: Inferentia 4,
  Inferentia2 2, Trainium 2, Trainium2 8, Trainium3 8 (Trainium3 inferred); unknown arch ->
  1 with a warning.
* Default LNC: 2 on Trainium2 and Trainium3 (documented for Trn2; Trn3 inferred), 1 elsewhere.
  LNC=2 on a generation without LNC is ignored with a warning.

Rules:

* ``NEURON_RT_VISIBLE_CORES``: a single index, an inclusive range ``a-b`` (documented), or a
  comma list of indices and ranges (runtime >= 2.16, from a closed AWS doc PR: inferred).
  The runtime reserves a *set* of cores: repeats are merged and the cores are numbered in
  ascending order (inferred; warning when the list was not ascending). Blanks around entries
  are tolerated (inferred). A value the runtime cannot honour (not a number, a reversed range,
  a core the host lacks, an invalid LNC) fails runtime initialisation: the reader raises
  VisibilityError. ``""`` is undocumented: read as no core (like Ray), uncertain.
* ``NEURON_RT_NUM_CORES=n`` (when VISIBLE_CORES is unset): the runtime reserves ``n`` free
  cores, which ones is unspecified: the first ``n`` are assumed (uncertain). 0 = all.
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
    require_ascending,
    require_indices,
    show,
    units_from,
)
from hwbackends._visibility.kinds import NeuronCores

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from hwbackends._visibility.shapes import DeviceLike, HostLike

VENDOR = "Neuron"
VARIABLES = NeuronCores.variables
UNSET = NeuronCores.unset

# (arch keys, physical cores per device, default LNC); most specific names first.
_GENERATIONS: tuple[tuple[tuple[str, ...], str, int, int], ...] = (
    (("trainium3", "trn3"), "Trainium3", 8, 2),
    (("trainium2", "trn2"), "Trainium2", 8, 2),
    (("trainium", "trn1"), "Trainium", 2, 1),
    (("inferentia2", "inf2"), "Inferentia2", 2, 1),
    (("inferentia", "inf1"), "Inferentia", 4, 1),
)


def _generation(dev: DeviceLike) -> tuple[str, int, int] | None:
    arch = (dev.arch or dev.name or "").lower()
    for keys, name, cores, lnc in _GENERATIONS:
        if any(k in arch for k in keys):
            return name, cores, lnc
    return None


def default_lnc(devices: Sequence[DeviceLike]) -> tuple[int, bool]:
    """(default LNC, whether this generation supports LNC > 1)."""
    gens = [_generation(d) for d in devices]
    lnc = max((g[2] for g in gens if g is not None), default=1)
    return lnc, lnc > 1


def _layout(devices: Sequence[DeviceLike], lnc: int, t: Trace | None) -> list[tuple[int, int]]:
    """Logical cores as (device position, core within device)."""
    cores: list[tuple[int, int]] = []
    for pos, dev in enumerate(devices):
        phys = int_extra(dev, "cores", pos, VENDOR)
        if phys is None:
            gen = _generation(dev)
            if gen is None:
                phys = 1
                if t is not None:
                    t.warn(
                        f"Neuron device {pos} has no 'cores' and an unknown arch "
                        f"{dev.arch!r}: 1 NeuronCore assumed. Add 'cores' to the host.",
                        uncertain=True,
                    )
            else:
                phys = gen[1]
        if phys % lnc:
            raise VisibilityError(
                f"Neuron device {pos} has {phys} NeuronCores, which LNC={lnc} cannot pair",
                f"a core count divisible by {lnc}",
                "fix 'cores' in the host description or NEURON_LOGICAL_NC_CONFIG",
            )
        cores.extend((pos, k) for k in range(phys // lnc))
    return cores


def _read_lnc(devices: Sequence[DeviceLike], t: Trace) -> int:
    default, supported = default_lnc(devices)
    gens = {g[0] for g in (_generation(d) for d in devices) if g is not None}
    if len(gens) > 1:
        t.warn(f"Neuron devices of several generations ({sorted(gens)}).", uncertain=True)
    raw = t.read("NEURON_LOGICAL_NC_CONFIG")
    if raw is None:
        t.step(f"Logical NeuronCore config: default LNC={default} for this generation.")
        return default
    value = raw.strip(C_SPACE)
    if value not in ("1", "2"):
        raise VisibilityError(
            f"NEURON_LOGICAL_NC_CONFIG={show(raw)} is not a logical NeuronCore size",
            "1 or 2 (aws-neuron-sdk logical-neuroncore-config)",
            "set NEURON_LOGICAL_NC_CONFIG to 1 or 2, or unset it",
        )
    lnc = int(value)
    if lnc == 2 and not supported:
        t.warn(
            "NEURON_LOGICAL_NC_CONFIG=2 on a generation without logical NeuronCores "
            "(only Trainium2/3 have them): ignored, LNC=1.",
            uncertain=True,
        )
        return 1
    t.step(f"LNC={lnc}: indices count logical NeuronCores of {lnc} physical core(s).")
    return lnc


def _bad(raw: str, token: str, expected: str) -> VisibilityError:
    return VisibilityError(
        f"NEURON_RT_VISIBLE_CORES={show(raw)} has the entry {show(token)}, which the Neuron "
        "runtime cannot honour",
        expected,
        "use a core index, an inclusive range such as 0-3, or a comma list of those",
    )


def parse_cores(raw: str, total: int, t: Trace) -> list[int]:
    if raw == "":
        t.warn(
            "NEURON_RT_VISIBLE_CORES is set but empty; the runtime's reading is undocumented "
            "(no core assumed, as Ray does). Unset it or name cores.",
            uncertain=True,
        )
        return []
    tokens = raw.split(",")
    if len(tokens) > 1:
        t.infer("Comma lists need Neuron runtime 2.16 or later (from a closed AWS doc PR)")
    listed: list[int] = []
    seen: set[int] = set()
    repeats = blanks = False
    for token in tokens:
        tok = token.strip(C_SPACE)
        blanks = blanks or tok != token
        lo_s, dash, hi_s = tok.partition("-")
        lo = plain_uint(lo_s)
        hi = plain_uint(hi_s) if dash else lo
        if lo is None or hi is None:
            raise _bad(raw, token, "an index or an inclusive range a-b of non-negative integers")
        if hi < lo:
            raise _bad(raw, token, "a range whose start is not above its end")
        if hi >= total:
            raise _bad(raw, token, f"cores in 0..{total - 1} (the host has {total})")
        for k in range(lo, hi + 1):
            if k in seen:
                repeats = True
                continue
            seen.add(k)
            listed.append(k)
        t.entry(f"Entry {show(token)} -> cores {lo}..{hi}.")
    if blanks:
        t.infer("Blanks around entries are ignored")
    if repeats:
        t.warn("NEURON_RT_VISIBLE_CORES names some cores twice; they are merged.", uncertain=True)
    ordered = sorted(listed)
    if ordered != listed:
        t.warn(
            "NEURON_RT_VISIBLE_CORES is not in ascending order; the runtime reserves a set of "
            "cores, assumed numbered in ascending order (undocumented). List cores ascending.",
            uncertain=True,
        )
    return ordered


def read(env: Mapping[str, str], host: HostLike, t: Trace) -> list[VisibleUnit]:
    devices = devices_of(host)
    lnc = _read_lnc(devices, t)
    layout = _layout(devices, lnc, t)
    total = len(layout)
    t.step(f"Host: {len(devices)} Neuron device(s), {total} NeuronCore(s) at LNC={lnc}.")
    visible = t.read("NEURON_RT_VISIBLE_CORES")
    num = t.read("NEURON_RT_NUM_CORES")
    if visible is not None:
        if num is not None:
            t.step("NEURON_RT_VISIBLE_CORES takes precedence over NEURON_RT_NUM_CORES.")
        picked = parse_cores(visible, total, t)
    elif num is not None and num.strip(C_SPACE) not in ("", "0"):
        n = plain_uint(num.strip(C_SPACE))
        if n is None or n > total:
            raise VisibilityError(
                f"NEURON_RT_NUM_CORES={show(num)} cannot be honoured on {total} NeuronCore(s)",
                f"a whole number from 0 (all) to {total}",
                "fix NEURON_RT_NUM_CORES or use NEURON_RT_VISIBLE_CORES",
            )
        t.warn(
            f"NEURON_RT_NUM_CORES={n}: the runtime reserves {n} free NeuronCore(s) and which "
            "ones is unspecified; the first free ones are assumed. Use NEURON_RT_VISIBLE_CORES "
            "to choose.",
            uncertain=True,
        )
        picked = list(range(n))
    else:
        if num is not None:
            t.step("NEURON_RT_NUM_CORES empty or 0: all cores (the default).")
        t.step("Every NeuronCore is visible.")
        picked = list(range(total))
    return units_from([(k, layout[k][0], layout[k][1], f"nc{k}") for k in picked])


def render_ranges(indices: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"`` (ascending input)."""
    parts: list[str] = []
    i = 0
    while i < len(indices):
        j = i
        while j + 1 < len(indices) and indices[j + 1] == indices[j] + 1:
            j += 1
        parts.append(str(indices[i]) if i == j else f"{indices[i]}-{indices[j]}")
        i = j + 1
    return ",".join(parts)


def write(
    physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``NEURON_RT_VISIBLE_CORES`` as ranges, counted at the LNC the indices were read under
    (``env``'s ``NEURON_LOGICAL_NC_CONFIG`` when it is 1 or 2, else the host's default).

    On Trainium2/3 ``NEURON_LOGICAL_NC_CONFIG`` is pinned to that LNC so that the indices
    keep their meaning. Cores must be ascending (the runtime reserves a set). The runtime has
    no documented "no core" value, so an empty selection is an error.
    """
    devices = devices_of(host)
    lnc, supported = default_lnc(devices)
    asked = (env or {}).get("NEURON_LOGICAL_NC_CONFIG", "").strip()
    if supported and asked in ("1", "2"):
        lnc = int(asked)
    total = len(_layout(devices, lnc, None))
    sel = require_indices("neuron", physical, total, "NeuronCores")
    if not sel:
        raise VisibilityError(
            "the Neuron runtime has no documented value that selects no NeuronCore",
            "at least one core index",
            "do not start the process, or run it on the cpu backend",
        )
    require_ascending("neuron", sel, "the runtime reserves a set of cores, numbered ascending")
    out = {"NEURON_RT_VISIBLE_CORES": render_ranges(sel)}
    if supported:
        out["NEURON_LOGICAL_NC_CONFIG"] = str(lnc)
    return out
