"""NVIDIA CUDA: ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER`` (spec §1, §12).

Physical index
    Whole GPUs are numbered by their position among the host's NVIDIA devices, which is
    NVML / ``nvidia-smi`` order (DESIGN.md). MIG instances (``extra["mig"]`` of a GPU, each
    ``{"uuid": "MIG-...", "gi": int?, "ci": int?, ...}``) are numbered after all GPUs: the
    first instance of the first MIG-enabled GPU is ``n_gpus``, and so on in host order, then
    in the order the GPU lists them. So a GPU's number never moves when MIG is switched on
    elsewhere. A GPU with a non-empty ``mig`` list is in MIG mode: CUDA cannot use it whole,
    and it stands for its instances.

Rules (each tagged with its confidence in the spec):

* Unset -> every unit in CUDA_DEVICE_ORDER order; ``""`` -> none (§1.1, documented).
* Entries are read left to right; the first one that names nothing ends the list (§1.1 rule
  2, documented for invalid indices; out-of-range and ambiguous-prefix ends are inferred and
  consistent with PyTorch and measurements in pytorch/pytorch#92315).
* Integers are read like ``strtoul(s, &end, 10)``: leading C blanks skipped, ``+`` accepted,
  trailing garbage ignored (``1gpu2`` is 1, ``0-2`` is 0) (§1.1 rules 6-7; base 10 inferred).
  They index the CUDA enumeration chosen by CUDA_DEVICE_ORDER, not NVML order (§1.1 rule 3).
* ``GPU-`` entries are unique prefixes of NVML UUIDs, compared case-sensitively (§1.1 rule 8;
  case sensitivity inferred from NVML's lower-case output and PyTorch).
* MIG: ``MIG-<uuid>`` (R470+) as a unique prefix of a MIG UUID, and the legacy
  ``MIG-GPU-<uuid>/<gi>/<ci>`` form (§1.2), which needs ``gi`` and ``ci`` in the host.
* Duplicates (two entries naming the same unit before any invalid entry) -> the empty set:
  PyTorch's model of the driver (§1.1 rule 5; inferred for the driver) -> warning, uncertain.
* ``CUDA_DEVICE_ORDER``: ``PCI_BUS_ID`` sorts by PCI bus id; unset or ``FASTEST_FIRST`` uses
  ``host.cuda_fastest_first`` when known; otherwise PCI order is assumed (for identical GPUs
  this is what practitioners observe; for different GPUs it is a guess: warning, uncertain).
  Other values are undocumented: treated as the default, with a warning.
"""

from __future__ import annotations

from _collections_abc import (  # collections.abc's classes, without importing collections
    Mapping,
    Sequence,
)

from hwbackends._base.errors import VisibilityError
from hwbackends._base.record import frozen, mutable
from hwbackends._visibility.base import (
    C_SPACE,
    Trace,
    VisibleUnit,
    c_strtoul,
    devices_of,
    differ,
    require_indices,
    show,
    units_from,
)
from hwbackends._visibility.kinds import CudaDevices

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from hwbackends._visibility.shapes import DeviceLike, HostLike

VENDOR = "GPU"
VARIABLES = CudaDevices.variables
UNSET = CudaDevices.unset
_UUIDS = ("GPU-", "MIG-")


@frozen
class _Unit:
    physical: int
    gpu: int  # device position
    sub: int | None  # MIG instance position within the GPU
    label: str
    gi: int | None = None


@mutable
class _Topo:
    gpus: list[DeviceLike]
    units: list[_Unit]  # indexed by physical index
    mig_of: list[list[int]]  # gpu position -> physical indices of its MIG instances
    gpu_uuids: list[str | None]
    driver_major: int | None

    @property
    def n(self) -> int:
        return len(self.gpus)

    def mig_mode(self, g: int) -> bool:
        return bool(self.mig_of[g])


def _driver_major(host: HostLike, module: str | None) -> int | None:
    drivers = getattr(host, "drivers", None)
    if module is None or not isinstance(drivers, Mapping):
        return None
    version = drivers.get(module)
    if not isinstance(version, str):
        return None
    head = version.strip().partition(".")[0]
    return int(head) if head.isascii() and head.isdigit() and len(head) < 6 else None


def _opt_int(value: object, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise VisibilityError(
            f"{where} is {value!r}", "a non-negative integer", "fix the host description"
        )
    return value


def topology(host: HostLike, driver_module: str | None = None) -> _Topo:
    gpus = devices_of(host)
    n = len(gpus)
    units = [
        _Unit(physical=g, gpu=g, sub=None, label=d.uuid if d.uuid else f"gpu{g}")
        for g, d in enumerate(gpus)
    ]
    mig_of: list[list[int]] = []
    for g, d in enumerate(gpus):
        raw = (d.extra or {}).get("mig")
        mine: list[int] = []
        if raw:
            if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)):
                raise VisibilityError(
                    f"GPU {g} has mig={raw!r}",
                    'a list of MIG instances such as [{"uuid": "MIG-...", "gi": 1, "ci": 0}]',
                    "fix the 'mig' field of that device in the host description",
                )
            for k, inst in enumerate(raw):
                where = f"GPU {g} mig[{k}]"
                uuid = inst.get("uuid") if isinstance(inst, Mapping) else None
                if not isinstance(uuid, str) or not uuid.startswith("MIG-"):
                    raise VisibilityError(
                        f"{where} has no MIG UUID ({inst!r})",
                        'an object with "uuid": "MIG-..." as nvidia-smi -L prints it',
                        "fix the 'mig' field of that device in the host description",
                    )
                assert isinstance(inst, Mapping)
                gi = _opt_int(inst.get("gi"), f"{where}.gi")
                _opt_int(inst.get("ci"), f"{where}.ci")
                p = n + sum(len(m) for m in mig_of) + len(mine)
                units.append(_Unit(physical=p, gpu=g, sub=k, label=uuid, gi=gi))
                mine.append(p)
        mig_of.append(mine)
    return _Topo(
        gpus=gpus,
        units=units,
        mig_of=mig_of,
        gpu_uuids=[d.uuid for d in gpus],
        driver_major=_driver_major(host, driver_module),
    )


def _pci_key(d: DeviceLike, g: int) -> tuple[str, int]:
    bus = (d.pci_bus_id or "").lower()
    if bus.count(":") == 1:  # "0c:00.0" -> "0000:0c:00.0"
        bus = "0000:" + bus
    return bus, g


def pci_order(topo: _Topo) -> list[int]:
    """GPU positions sorted by PCI bus id (host order when any bus id is missing)."""
    if all(d.pci_bus_id for d in topo.gpus):
        return sorted(range(topo.n), key=lambda g: _pci_key(topo.gpus[g], g))
    return list(range(topo.n))


def _cuda_order(topo: _Topo, host: HostLike, t: Trace) -> tuple[list[int], bool, bool]:
    """The CUDA enumeration of whole GPUs, whether it is known to differ from NVML order, and
    whether it is a guess (different GPUs, FASTEST_FIRST, permutation unknown)."""
    order_var = t.read("CUDA_DEVICE_ORDER")
    pci = pci_order(topo)
    if order_var == "PCI_BUS_ID":
        t.step("CUDA enumerates GPUs by ascending PCI bus id (spec §1.3, documented).")
        return pci, pci != list(range(topo.n)), False
    if order_var not in (None, "FASTEST_FIRST"):
        t.warn(
            f"CUDA_DEVICE_ORDER={show(order_var)} is not one of the documented values "
            "FASTEST_FIRST and PCI_BUS_ID; its effect is undocumented, so the default "
            "FASTEST_FIRST is assumed. Set CUDA_DEVICE_ORDER=PCI_BUS_ID.",
            uncertain=True,
        )
    heterogeneous = differ(topo.gpus)
    ff = host.cuda_fastest_first
    if ff is not None:
        order = list(ff)
        if sorted(order) != list(range(topo.n)) or any(
            isinstance(i, bool) or not isinstance(i, int) for i in order
        ):
            raise VisibilityError(
                f"host.cuda_fastest_first is {order!r}",
                f"a permutation of the {topo.n} NVIDIA device positions",
                "fix cuda_fastest_first in the host description, or use null",
            )
        t.step(f"FASTEST_FIRST order taken from the host description: {order}.")
    else:
        order = pci
        if heterogeneous:
            t.step("FASTEST_FIRST permutation unknown; PCI bus order assumed.")
        elif topo.n > 1:
            t.step(
                "FASTEST_FIRST with identical GPUs: assumed equal to PCI bus order "
                "(spec §1.3, inferred)."
            )
    if heterogeneous:
        t.warn(
            "The NVIDIA GPUs differ and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA numbers them "
            "fastest first with an undocumented heuristic, so CUDA_VISIBLE_DEVICES=0 may not "
            "be nvidia-smi's GPU 0. Set CUDA_DEVICE_ORDER=PCI_BUS_ID."
        )
    return order, order != list(range(topo.n)), heterogeneous and ff is None


def _default_units(topo: _Topo, g: int, t: Trace) -> list[int]:
    """What CUDA enumerates for one GPU when nothing narrower is asked (spec §1.2)."""
    if not topo.mig_mode(g):
        return [g]
    picked: list[int] = []
    gis: set[int] = set()
    for p in topo.mig_of[g]:
        gi = topo.units[p].gi
        if gi is not None:
            if gi in gis:
                t.warn(
                    f"GPU {g} has several compute instances in GPU instance {gi}; CUDA picks "
                    "one of them (which one is undocumented); the first listed is assumed.",
                    uncertain=True,
                )
                continue
            gis.add(gi)
        picked.append(p)
    return picked


def _mig_rules(topo: _Topo, picked: list[int], t: Trace) -> list[int]:
    """Apply the driver's limits on enumerating MIG instances (spec §1.2)."""
    migs = [p for p in picked if topo.units[p].sub is not None]
    plain = [p for p in picked if topo.units[p].sub is None]
    if not migs or (len(migs) == 1 and not plain):
        return picked
    major = topo.driver_major
    if major is not None and major < 570:
        t.step(
            f"NVIDIA driver {major} (< R570) enumerates a single MIG instance and then no "
            "non-MIG GPU (MIG user guide, spec §1.2): only the first MIG instance is kept."
        )
        return migs[:1]
    if major is None:
        t.warn(
            "Several MIG instances, or MIG instances and whole GPUs, are selected: drivers "
            "from R570 enumerate them all, older drivers only one MIG instance (spec §1.2). "
            "The driver version is unknown; R570+ is assumed.",
            uncertain=True,
        )
    if migs and plain:
        t.infer("The relative order of MIG instances and whole GPUs is undocumented")
    return picked


def _unique_prefix(token: str, names: Sequence[str | None]) -> tuple[int | None, int]:
    """Index of the one name that starts with token, and how many matched."""
    hits = _prefix_hits(token, names)
    return (hits[0] if len(hits) == 1 else None), len(hits)


_LONGEST: list[Any] = [None, 0]  # (the names list last measured, its longest name)


def _prefix_hits(token: str, names: Sequence[str | None]) -> list[int]:
    # A full UUID is the common case: no other name can extend it when none is longer, and
    # the C-level membership test replaces a Python loop over every GPU (64 GPUs: ~3x).
    if _LONGEST[0] is not names:  # one list serves every entry of a variable
        _LONGEST[:] = [names, max((len(u) for u in names if u is not None), default=0)]
    if token in names and len(token) >= _LONGEST[1] and names.count(token) == 1:
        return [names.index(token)]
    return [i for i, u in enumerate(names) if u is not None and u.startswith(token)]


def _case_hint(token: str, names: Sequence[str | None], t: Trace) -> None:
    low = token.lower()
    if any(u is not None and u.lower().startswith(low) for u in names):
        t.warn(
            f"{show(token)} matches a UUID only when case is ignored; NVML prints lower-case "
            "hex and the driver's case handling is undocumented (PyTorch compares exactly). "
            "Copy the UUID from nvidia-smi -L.",
            uncertain=True,
        )


def _resolve(
    token: str, topo: _Topo, order: list[int], t: Trace
) -> tuple[str, list[int] | None, str]:
    """Resolve one entry: (kind, physical units or None for invalid, explanation)."""
    body = _uuid_body(token, t)
    if body.startswith("MIG-GPU-"):
        return _resolve_mig_path(body, topo)
    if body.startswith("MIG-"):
        return _resolve_mig_uuid(body, topo, t)
    if body.startswith("GPU-"):
        return _resolve_gpu_uuid(body, topo, t)
    return _resolve_ordinal(token, body, topo, order, t)


def _uuid_body(token: str, t: Trace) -> str:
    """Decides the text an entry is read from: a UUID entry without its blanks (warned), any
    other entry without its leading blanks."""
    body = token.lstrip(C_SPACE)
    lead = len(token) - len(body)
    if body[:4] not in ("GPU-", "MIG-"):
        return body
    stripped = body.rstrip(C_SPACE)
    if lead or stripped != body:
        t.warn(
            f"UUID entry {show(token)} has blanks around it; the driver's handling is "
            "undocumented (blanks are ignored here), and PyTorch's pre-init parser does "
            "not strip them (spec §12.5). Remove the blanks.",
            uncertain=True,
        )
    return stripped


def _resolve_mig_path(body: str, topo: _Topo) -> tuple[str, list[int] | None, str]:
    """Decides which MIG instance ``MIG-GPU-<uuid>/<gi>/<ci>`` names (the legacy form)."""
    gpu_part, _, rest = body[4:].partition("/")
    gi_s, _, ci_s = rest.partition("/")
    g, hits = _unique_prefix(gpu_part, topo.gpu_uuids)
    if g is None:
        return "mig", None, f"names {'several GPUs' if hits else 'no GPU'}"
    if not (gi_s.isascii() and gi_s.isdigit() and ci_s.isascii() and ci_s.isdigit()):
        return "mig", None, "is not MIG-GPU-<uuid>/<gi>/<ci>"
    if len(gi_s) > 9 or len(ci_s) > 9:
        return "mig", None, "names no MIG instance"
    gi, ci = int(gi_s), int(ci_s)
    for p in topo.mig_of[g]:
        inst = (topo.gpus[g].extra or {})["mig"][topo.units[p].sub or 0]
        if inst.get("gi") == gi and inst.get("ci") == ci:
            return "mig", [p], f"is MIG instance {topo.units[p].label} of GPU {g}"
    return "mig", None, f"names no MIG instance gi={gi} ci={ci} of GPU {g}"


def _resolve_mig_uuid(body: str, topo: _Topo, t: Trace) -> tuple[str, list[int] | None, str]:
    """Decides which MIG instance a ``MIG-<uuid>`` prefix names (a unique prefix only)."""
    mig_units = topo.units[topo.n :]
    k, hits = _unique_prefix(body, [u.label for u in mig_units])
    if k is None:
        if not hits:
            _case_hint(body, [u.label for u in mig_units], t)
        return "mig", None, "is an ambiguous MIG prefix" if hits else "names no MIG instance"
    u = mig_units[k]
    return "mig", [u.physical], f"is MIG instance {u.label} of GPU {u.gpu}"


def _resolve_gpu_uuid(body: str, topo: _Topo, t: Trace) -> tuple[str, list[int] | None, str]:
    """Decides which GPU a ``GPU-<uuid>`` prefix names (a unique prefix only)."""
    g, hits = _unique_prefix(body, topo.gpu_uuids)
    if g is None:
        if hits:
            t.infer(f"{show(body)} is a prefix of {hits} GPU UUIDs: treated as invalid")
        else:
            _case_hint(body, topo.gpu_uuids, t)
        return "uuid", None, "is an ambiguous UUID prefix" if hits else "names no GPU"
    return "uuid", _expand(topo, g, t), f"is GPU {g}"


def _resolve_ordinal(
    token: str, body: str, topo: _Topo, order: list[int], t: Trace
) -> tuple[str, list[int] | None, str]:
    """Decides which GPU a CUDA ordinal names, read as the driver's strtoul reads it."""
    value, rest = c_strtoul(token)
    if value is None:
        return "int", None, "is not a number or UUID"
    if value < 0:
        return "int", None, "is negative"
    if value >= topo.n:
        return "int", None, f"is out of range (only {topo.n} GPUs)"
    note = ""
    if body[:1] == "+":
        t.infer(f"{show(token)}: a leading '+' is accepted as by strtoul")
    if rest and rest[0] in "xX" and value == 0:
        t.infer(f"{show(token)}: read in base 10, so it is 0")
    elif rest:
        note = f" (strtoul stops at {show(rest[:10])})"
    g = order[value]
    return "int", _expand(topo, g, t), f"is CUDA device {value} = GPU {g}{note}"


def _expand(topo: _Topo, g: int, t: Trace) -> list[int]:
    if topo.mig_mode(g):
        t.warn(
            f"GPU {g} is in MIG mode and is selected as a whole; what CUDA enumerates then is "
            "undocumented (assumed: one instance per GPU instance). Select MIG-<uuid> entries.",
            uncertain=True,
        )
        return _default_units(topo, g, t)
    return [g]


def read(
    env: Mapping[str, str], host: HostLike, t: Trace, driver_module: str | None = None
) -> list[VisibleUnit]:
    topo = topology(host, driver_module)
    t.step(
        f"Host: {topo.n} NVIDIA GPU(s), {len(topo.units) - topo.n} MIG instance(s) "
        "(physical indices: GPUs by NVML position, then MIG instances)."
    )
    order, permuted, guessed = _cuda_order(topo, host, t)
    value = t.read("CUDA_VISIBLE_DEVICES")
    t.note_if_set("NVIDIA_VISIBLE_DEVICES", "it is read by the container runtime at start")
    picked: list[int] = []
    if value is None:
        t.step("Unset: every GPU is visible, in CUDA enumeration order.")
        for g in order:
            picked.extend(_default_units(topo, g, t))
        kinds = {"int"}
    elif value == "":
        t.step("Set but empty: no GPU is visible (spec §1.1, documented).")
        kinds = set()
    else:
        picked, kinds = _read_list(value, topo, order, t)
    if guessed and "int" in kinds and len(picked) > 0:
        t.infer("Which GPU each CUDA ordinal is depends on the unknown FASTEST_FIRST order")
    picked = _mig_rules(topo, picked, t)
    _torch_checks(value, topo, picked, permuted, t)
    return units_from(
        [(p, topo.units[p].gpu, topo.units[p].sub, topo.units[p].label) for p in picked]
    )


def _read_list(value: str, topo: _Topo, order: list[int], t: Trace) -> tuple[list[int], set[str]]:
    picked: list[int] = []
    seen: set[int] = set()
    gi_seen: dict[tuple[int, int], int] = {}
    kinds: set[str] = set()
    for i, token in enumerate(value.split(",")):
        kind, units, why = _resolve(token, topo, order, t)
        if units is None:
            t.step(f"Entry {i} {show(token)} {why}: the list ends here; {len(picked)} kept.")
            break
        kinds.add(kind)
        if seen.intersection(units):
            t.warn(
                f"Entry {i} {show(token)} repeats a device already selected. PyTorch's model "
                "of the driver makes the whole list empty (NVIDIA does not document "
                "duplicates). Remove the repeated entry.",
                uncertain=True,
            )
            t.step("Duplicate entry: no GPU is visible (PyTorch's model, spec §1.1 rule 5).")
            return [], kinds
        kept: list[int] = []
        for p in units:
            u = topo.units[p]
            if u.gi is not None and (u.gpu, u.gi) in gi_seen:
                t.warn(
                    f"Entry {i} {show(token)} is a second compute instance of GPU instance "
                    f"{u.gi} on GPU {u.gpu}; CUDA enumerates one compute instance per GPU "
                    "instance and picks one (the first listed is assumed) (spec §1.2).",
                    uncertain=True,
                )
                continue
            if u.gi is not None:
                gi_seen[(u.gpu, u.gi)] = p
            kept.append(p)
        seen.update(units)
        picked.extend(kept)
        t.entry(f"Entry {i} {show(token)} {why} -> logical {len(picked) - len(kept)}.")
    if len(kinds) > 1:
        t.warn(
            "The list mixes integers, GPU UUIDs and MIG UUIDs; the driver's handling of mixed "
            "lists is undocumented, and PyTorch's parser takes the first entry's kind for the "
            "whole list (spec §12.6). Use one kind.",
            uncertain=True,
        )
    return picked, kinds


# -- PyTorch's pre-init model (spec §1.5, §12), re-implemented to report disagreements --------


def _torch_strtoul(s: str) -> int:
    """PyTorch's lenient number reader: Unicode digits, one leading sign; may raise."""
    k = 0
    for idx, c in enumerate(s):
        if c.isdigit() or (idx == 0 and c in "+-"):
            k = idx + 1
        else:
            break
    return int(s[:k]) if k else -1


def torch_parse(value: str | None) -> list[int] | list[str]:
    """PyTorch's ``_parse_visible_devices`` for one value (spec §1.5); may raise ValueError.

    A repeated entry gives ``[]`` as in PyTorch ("repeated ordinal results in empty set").
    """
    if value is None:
        return list(range(64))
    if value.startswith(_UUIDS):
        prefix = value[:4]
        cands: list[str] = []
        seen_text: set[str] = set()  # beside the list: membership tests stay O(1)
        for elem in value.split(","):
            if elem in seen_text:
                return []
            if not elem.startswith(prefix):
                break
            cands.append(elem)
            seen_text.add(elem)
        return cands
    ints: list[int] = []
    seen: set[int] = set()
    for elem in value.split(","):
        x = _torch_strtoul(elem.strip())
        if x in seen:
            return []
        if x < 0:
            break
        ints.append(x)
        seen.add(x)
    return ints


def torch_count_list(
    parsed: list[int] | list[str], uuids: Sequence[str | None], n: int
) -> int | None:
    """PyTorch's NVML/amdsmi count of a parsed list; None defers to the runtime's count."""
    if parsed and isinstance(parsed[0], str):
        if parsed[0].startswith("MIG-"):
            return None
        ids: list[int] = []
        for c in parsed:
            assert isinstance(c, str)
            hits = _prefix_hits(c, uuids)
            if len(hits) != 1:
                break
            if hits[0] in ids:
                return 0
            ids.append(hits[0])
        return len(ids)
    for i, x in enumerate(parsed):
        assert isinstance(x, int)
        if x >= n:
            return i
    return len(parsed)


def torch_count(value: str | None, uuids: Sequence[str | None], n: int) -> int | None:
    """PyTorch's pre-init ``torch.cuda.device_count()``; None defers to the runtime.

    Raises ValueError exactly where PyTorch's parser does (spec §12.2).
    """
    return torch_count_list(torch_parse(value), uuids, n)


def _torch_checks(
    value: str | None, topo: _Topo, picked: list[int], permuted: bool, t: Trace
) -> None:
    try:
        count = torch_count(value, topo.gpu_uuids, topo.n)
    except ValueError:
        t.warn(
            "PyTorch's own pre-init parser raises ValueError for this CUDA_VISIBLE_DEVICES, so "
            "torch.cuda.device_count() fails before CUDA is initialised, while the driver "
            f"sees {len(picked)} device(s) (spec §12.2). Use plain integers or UUIDs."
        )
        return
    if count is not None and count != len(picked):
        t.warn(
            f"Before CUDA is initialised, torch.cuda.device_count() reports {count} device(s) "
            f"but the driver exposes {len(picked)}; the count changes once CUDA starts "
            "(spec §12). The driver's answer is shown."
        )
    integer_list = value is None or (value != "" and value.lstrip(C_SPACE)[:4] not in _UUIDS)
    if permuted and integer_list:
        t.warn(
            "CUDA's device order differs from NVML order here: PyTorch's NVML helpers "
            "(torch.cuda.utilization, memory_usage, temperature, ...) read NVML index "
            "visible[i] and so may describe another GPU (spec §12.1). Set "
            "CUDA_DEVICE_ORDER=PCI_BUS_ID or use UUIDs."
        )


# -- writer ----------------------------------------------------------------------------------


def write(
    physical: Sequence[int],
    host: HostLike,
    env: Mapping[str, str] | None = None,
    driver_module: str | None = None,
) -> dict[str, str]:
    """``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and ``CUDA_VISIBLE_DEVICES`` for exactly ``physical``.

    Whole GPUs are written as integers in PCI bus order, so the result does not depend on the
    FASTEST_FIRST heuristic. When a MIG instance is selected, or any GPU of the host is in MIG
    mode (where integer numbering is undocumented), every entry is written as a UUID. An
    empty selection is ``CUDA_VISIBLE_DEVICES=""``, CUDA's documented "no GPU".
    """
    topo = topology(host, driver_module)
    sel = require_indices("cuda", physical, len(topo.units), "NVIDIA GPUs and MIG instances")
    out = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    for p in sel:
        if p < topo.n and topo.mig_mode(p):
            raise VisibilityError(
                f"GPU {p} is in MIG mode and cannot be made visible as a whole",
                "the physical indices of its MIG instances: "
                + ", ".join(str(q) for q in topo.mig_of[p]),
                "select MIG instances instead of the GPU",
            )
    migs = [p for p in sel if p >= topo.n]
    gis = [(topo.units[p].gpu, topo.units[p].gi) for p in migs if topo.units[p].gi is not None]
    if len(gis) != len(set(gis)):
        raise VisibilityError(
            "two selected MIG instances are compute instances of one GPU instance",
            "at most one compute instance per GPU instance (CUDA picks one, spec §1.2)",
            "select one compute instance from each GPU instance",
        )
    major = topo.driver_major
    if major is not None and major < 570 and migs and len(sel) > 1:
        raise VisibilityError(
            f"NVIDIA driver {major} enumerates a single MIG instance per process",
            "one MIG instance alone, or whole GPUs only (spec §1.2)",
            "run one process per MIG instance, or upgrade to an R570+ driver",
        )
    use_uuids = bool(migs) or any(topo.mig_mode(g) for g in range(topo.n))
    if use_uuids:
        missing = [p for p in sel if p < topo.n and not topo.gpu_uuids[p]]
        if missing:
            raise VisibilityError(
                f"GPU(s) {missing} have no UUID in the host description",
                "UUIDs for every selected GPU when MIG is in use",
                "add each GPU's 'uuid' (nvidia-smi -L) to the host description",
            )
        out["CUDA_VISIBLE_DEVICES"] = ",".join(topo.units[p].label for p in sel)
    else:
        rank = {g: i for i, g in enumerate(pci_order(topo))}
        out["CUDA_VISIBLE_DEVICES"] = ",".join(str(rank[p]) for p in sel)
    return out
