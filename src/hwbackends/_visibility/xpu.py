"""Intel GPU (XPU): Level Zero ``ZE_AFFINITY_MASK`` and the SYCL ``ONEAPI_DEVICE_SELECTOR``.

Physical index
    The Level Zero root-device enumeration under ``ZE_FLAT_DEVICE_HIERARCHY``, with cards in
    ascending PCI bus order (what ``ZE_ENABLE_PCI_ID_DEVICE_ORDER=1`` forces):

    * ``FLAT`` and ``COMBINED``: every tile is a root device, numbered flat across cards (card
      ``c`` has ``extra["tiles"]`` tiles, default 1). Units are tiles: ``sub_index`` is the
      tile within the card, label ``"<flat index>"``.
    * ``COMPOSITE``: every card is a root device. A unit is a whole card (``sub_index`` None,
      label ``"<card>"``), one tile exposed as a device (``sub_index`` = tile, label
      ``"<card>.<tile>"``), or a card limited to some of its tiles (label ``"<card>.{a,b}"``).
      Tiles that SYCL exposes as devices (``N.M`` selector terms) share their card's physical
      index and differ by ``sub_index``.

Level Zero (spec §7.1, level-zero-spec PROG.html "Affinity Mask", documented): the mask is a
comma list of ``<dev>`` and ``<dev>.<sub>`` in the chosen hierarchy, and it never reorders
devices. Chosen here where the spec is silent (uncertain when used):

* Default hierarchy: ``FLAT`` (Intel's driver default since late 2023 on Data Center GPU Max;
  the Level Zero spec's table says COMPOSITE). A warning is given when it is unset and a card
  has more than one tile; on single-tile cards the two coincide.
* ``N.M`` in FLAT/COMBINED (tiles have no sub-devices), malformed and out-of-range entries are
  ignored, each with a warning; repeats are harmless (a set).
* ``ZE_AFFINITY_MASK=""`` is read like unset (all devices), with a warning.
* Without ``ZE_ENABLE_PCI_ID_DEVICE_ORDER=1`` the driver's card order is
  implementation-specific: PCI order is assumed, and with several cards the report is
  uncertain.

SYCL (spec §7.2, intel/llvm ``sycl/doc/EnvironmentVariables.md``): ``ONEAPI_DEVICE_SELECTOR``
is parsed with its whole grammar (accept and ``!`` discard filters separated by ``;``,
backends ``level_zero opencl cuda hip native_cpu *``, devices ``* cpu gpu fpga N N.M N.*
*.* N.M.K N.M.* N.*.* *.*.*``). A malformed selector makes the SYCL runtime throw, so it
raises :class:`VisibilityError`. Only ``level_zero`` and ``*`` terms select Level Zero GPUs;
``N`` indexes the Level Zero devices left by the mask; ``N.M`` picks sub-device ``M`` of
root ``N`` (tiles of a COMPOSITE card; none in FLAT/COMBINED); three-level terms name
sub-sub-devices, which are not modelled (they select nothing, with a warning). Discards win
over accepts; a selector with discards only accepts every root device first. The selector
filters but does not reorder: devices keep Level Zero order, a root before its sub-devices
(inferred).
"""

from __future__ import annotations

from hwbackends._base.errors import VisibilityError
from hwbackends._base.record import frozen
from hwbackends._visibility.base import (
    C_SPACE,
    Trace,
    VisibleUnit,
    c_strtoul,
    devices_of,
    int_extra,
    plain_uint,
    require_ascending,
    require_indices,
    show,
    units_from,
)
from hwbackends._visibility.kinds import LevelZeroDevices

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from hwbackends._visibility.shapes import DeviceLike, HostLike

VENDOR = "Intel GPU"
VARIABLES = LevelZeroDevices.variables
UNSET = LevelZeroDevices.unset
DEFAULT_HIERARCHY = "FLAT"
_HIERARCHIES = ("FLAT", "COMPOSITE", "COMBINED")
_BACKENDS = ("level_zero", "opencl", "cuda", "hip", "native_cpu", "*")


@frozen
class _Card:
    position: int  # among host.devices of the vendor
    tiles: int


@frozen
class _Root:
    """A Level Zero root device after the mask, and the tiles it holds (its sub-devices)."""

    physical: int
    card: _Card
    tiles: tuple[int, ...]
    sub: int | None  # the tile when the root is one tile
    label: str


def _cards(host: HostLike) -> list[_Card]:
    devices: list[DeviceLike] = devices_of(host)
    cards = []
    for pos, dev in enumerate(devices):
        tiles = int_extra(dev, "tiles", pos, VENDOR)
        if tiles == 0:
            raise VisibilityError(
                f"intel device {pos} has tiles=0",
                "'tiles' to be at least 1",
                "fix the 'tiles' field of that device in the host description",
            )
        cards.append(_Card(pos, tiles or 1))
    if all(d.pci_bus_id for d in devices):
        order = sorted(range(len(cards)), key=lambda i: ((devices[i].pci_bus_id or ""), i))
        cards = [cards[i] for i in order]
    return cards


def _flat_roots(cards: Sequence[_Card]) -> list[_Root]:
    roots: list[_Root] = []
    for card in cards:
        for tile in range(card.tiles):
            k = len(roots)
            roots.append(_Root(k, card, (tile,), tile, str(k)))
    return roots


def _read_hierarchy(cards: Sequence[_Card], t: Trace) -> str:
    raw = t.read("ZE_FLAT_DEVICE_HIERARCHY")
    multi = any(c.tiles > 1 for c in cards)
    if raw is None:
        t.step(f"Hierarchy unset: {DEFAULT_HIERARCHY} assumed (Intel's driver default).")
        if multi:
            t.warn(
                "ZE_FLAT_DEVICE_HIERARCHY is unset on a multi-tile Intel GPU: the driver "
                "default is FLAT (Intel) but the Level Zero spec says COMPOSITE, and it decides "
                "whether each tile or each card is a device. Set it explicitly.",
                uncertain=True,
            )
        return DEFAULT_HIERARCHY
    if raw not in _HIERARCHIES:
        t.warn(
            f"ZE_FLAT_DEVICE_HIERARCHY={show(raw)} is not FLAT, COMPOSITE or COMBINED; "
            f"{DEFAULT_HIERARCHY} is assumed. Fix the value.",
            uncertain=multi,
        )
        return DEFAULT_HIERARCHY
    return raw


def _read_pci_order(cards: Sequence[_Card], t: Trace) -> None:
    raw = t.read("ZE_ENABLE_PCI_ID_DEVICE_ORDER")
    on = False
    if raw is not None:
        number, rest = c_strtoul(raw)
        on = number is not None and number != 0 and not rest.strip(C_SPACE)
    if on:
        t.step("Cards are enumerated by ascending PCI bus id.")
    elif len(cards) > 1:
        t.warn(
            "ZE_ENABLE_PCI_ID_DEVICE_ORDER is not 1: Level Zero's card order is "
            "implementation-specific (PCI order assumed). Set ZE_ENABLE_PCI_ID_DEVICE_ORDER=1.",
            uncertain=True,
        )


def _apply_mask(mask: str | None, hierarchy: str, cards: Sequence[_Card], t: Trace) -> list[_Root]:
    composite = hierarchy == "COMPOSITE"
    flat = _flat_roots(cards)
    if mask is None or mask == "":
        return _unmasked(mask, composite, cards, flat, t)
    whole, tiles = _read_mask(mask, hierarchy, cards, len(cards) if composite else len(flat), t)
    t.step("The mask selects devices but never reorders them (spec §7.1, documented).")
    if not composite:
        return [flat[k] for k in sorted(whole)]
    return _composite_roots(cards, whole, tiles)


def _unmasked(
    mask: str | None, composite: bool, cards: Sequence[_Card], flat: list[_Root], t: Trace
) -> list[_Root]:
    """Decides the roots without a mask (unset, or set but empty: read like unset)."""
    if mask == "":
        t.warn(
            "ZE_AFFINITY_MASK is set but empty; Level Zero does not document it "
            "(read like unset: every device). Unset it or name devices.",
            uncertain=True,
        )
    else:
        t.step("ZE_AFFINITY_MASK unset: every device is visible.")
    if composite:
        return [
            _Root(c, card, tuple(range(card.tiles)), None, str(c)) for c, card in enumerate(cards)
        ]
    return flat


def _read_mask(
    mask: str, hierarchy: str, cards: Sequence[_Card], n_roots: int, t: Trace
) -> tuple[set[int], dict[int, set[int]]]:
    """Decides which root devices (whole) and which tiles of each the mask's valid entries
    select; an invalid entry is warned about and ignored."""
    whole: set[int] = set()
    tiles: dict[int, set[int]] = {}
    for i, token in enumerate(mask.split(",")):
        tok = token.strip(C_SPACE)
        dev_s, dot, sub_s = tok.partition(".")
        dev = plain_uint(dev_s)
        sub = plain_uint(sub_s) if dot else None
        problem = _mask_entry_problem(dev, bool(dot), sub, hierarchy, cards, n_roots)
        if problem:
            t.warn(
                f"ZE_AFFINITY_MASK entry {i} {show(token)} {problem}; it is ignored "
                "(undocumented). Fix the entry.",
                uncertain=True,
            )
            continue
        assert dev is not None
        if dot and sub is not None:
            tiles.setdefault(dev, set()).add(sub)
        else:
            whole.add(dev)
        t.entry(f"Mask entry {show(token)} accepted.")
    return whole, tiles


def _mask_entry_problem(
    dev: int | None,
    dot: bool,
    sub: int | None,
    hierarchy: str,
    cards: Sequence[_Card],
    n_roots: int,
) -> str:
    """Decides what is wrong with one mask entry ``dev[.sub]`` ("" when nothing is)."""
    if dev is None or (dot and sub is None):
        return "is not <device> or <device>.<sub-device>"
    if dev >= n_roots:
        return f"is out of range ({n_roots} root devices)"
    if dot and hierarchy != "COMPOSITE":
        return f"names a sub-device, and {hierarchy} root devices have none"
    if dot and sub is not None and sub >= cards[dev].tiles:
        return f"is out of range (card {dev} has {cards[dev].tiles} tile(s))"
    return ""


def _composite_roots(
    cards: Sequence[_Card], whole: set[int], tiles: dict[int, set[int]]
) -> list[_Root]:
    """Decides the COMPOSITE roots the mask leaves: whole cards (every tile named counts as
    the card), else one root per card holding the tiles it names."""
    roots: list[_Root] = []
    for c, card in enumerate(cards):
        if c in whole or (c in tiles and len(tiles[c]) == card.tiles):
            roots.append(_Root(c, card, tuple(range(card.tiles)), None, str(c)))
        elif c in tiles:
            sel = tuple(sorted(tiles[c]))
            if len(sel) == 1:
                roots.append(_Root(c, card, sel, sel[0], f"{c}.{sel[0]}"))
            else:
                label = f"{c}.{{{','.join(str(s) for s in sel)}}}"
                roots.append(_Root(c, card, sel, None, label))
    return roots


@frozen
class _Term:
    discard: bool
    backend: str
    devices: tuple[tuple[str, ...], ...]  # each device spec split on "."
    text: str


def _selector_error(raw: str, what: str) -> VisibilityError:
    return VisibilityError(
        f"ONEAPI_DEVICE_SELECTOR={show(raw)} is malformed: {what}; the SYCL runtime throws",
        "filters such as 'level_zero:0,1', 'level_zero:gpu;!opencl:*' or '*:0.*'",
        "fix the selector (intel/llvm sycl/doc/EnvironmentVariables.md) or unset it",
    )


def parse_selector(raw: str) -> list[_Term]:
    terms: list[_Term] = []
    seen_discard = False
    for part in raw.split(";"):
        text = part.strip(C_SPACE)
        discard = text.startswith("!")
        body = text[1:] if discard else text
        backend, colon, devs = body.partition(":")
        backend = backend.strip(C_SPACE).lower()
        if not colon or not backend:
            raise _selector_error(raw, f"{show(part)} has no 'backend:devices' form")
        if backend not in _BACKENDS:
            raise _selector_error(raw, f"unknown backend {show(backend)}")
        if discard:
            seen_discard = True
        elif seen_discard:
            raise _selector_error(raw, "accept filters must come before discard filters")
        specs: list[tuple[str, ...]] = []
        for dev in devs.split(","):
            spec = dev.strip(C_SPACE).lower()
            parts = tuple(spec.split("."))
            if spec in ("*", "cpu", "gpu", "fpga"):
                specs.append((spec,))
                continue
            if not 1 <= len(parts) <= 3 or not _valid_levels(parts):
                raise _selector_error(raw, f"{show(dev)} is not a device specification")
            specs.append(parts)
        terms.append(_Term(discard, backend, tuple(specs), text))
    return terms


def _valid_levels(parts: tuple[str, ...]) -> bool:
    star = False
    for p in parts:
        if p == "*":
            star = True
        elif star or plain_uint(p) is None:
            return False  # a number after "*" ("*.0") is not in the grammar
    return True


def _matches(spec: tuple[str, ...], roots: Sequence[_Root]) -> set[tuple[int, int | None]]:
    """Keys (root index, sub-device index or None) that one device spec selects."""
    if spec in (("*",), ("gpu",)):
        return {(r, None) for r in range(len(roots))}
    if spec in (("cpu",), ("fpga",)) or len(spec) == 3:
        return set()
    head = spec[0]
    idx = range(len(roots)) if head == "*" else [plain_uint(head) or 0]
    out: set[tuple[int, int | None]] = set()
    for r in idx:
        if r >= len(roots):
            continue
        if len(spec) == 1:
            out.add((r, None))
            continue
        subs = roots[r].tiles if roots[r].sub is None and len(roots[r].tiles) > 1 else ()
        picks = range(len(subs)) if spec[1] == "*" else [plain_uint(spec[1]) or 0]
        out.update((r, m) for m in picks if m < len(subs))
    return out


def _apply_selector(raw: str | None, roots: list[_Root], hierarchy: str, t: Trace) -> list[_Root]:
    if raw is None:
        return roots
    terms = parse_selector(raw)
    if any(c in raw for c in C_SPACE):
        t.infer("Blanks in ONEAPI_DEVICE_SELECTOR are ignored")
    accept: set[tuple[int, int | None]] = set()
    discard: set[tuple[int, int | None]] = set()
    has_accept = any(not term.discard for term in terms)
    if not has_accept:
        t.step("Only discard filters: every root device is accepted first (documented).")
        accept = {(r, None) for r in range(len(roots))}
    for term in terms:
        if term.backend not in ("level_zero", "*"):
            t.step(f"Filter {show(term.text)} is for another backend: no Level Zero GPU.")
            continue
        hit: set[tuple[int, int | None]] = set()
        for spec in term.devices:
            if len(spec) == 3:
                t.warn(
                    f"{show('.'.join(spec))} names sub-sub-devices, which are not modelled; "
                    "it selects nothing here.",
                    uncertain=True,
                )
            hit |= _matches(spec, roots)
        if not hit:
            t.warn(f"ONEAPI_DEVICE_SELECTOR filter {show(term.text)} matches no Level Zero GPU.")
        (discard if term.discard else accept).update(hit)
        t.entry(f"Filter {show(term.text)} {'discards' if term.discard else 'accepts'} {len(hit)}.")
    keys = sorted(accept - discard, key=lambda k: (k[0], -1 if k[1] is None else k[1]))
    if has_accept and not any(
        not term.discard and term.backend in ("level_zero", "*") for term in terms
    ):
        t.step("No accept filter names level_zero or '*': no Level Zero GPU is visible.")
        return []
    out: list[_Root] = []
    for r, m in keys:
        root = roots[r]
        if m is None:
            out.append(root)
        else:
            tile = root.tiles[m]
            c = root.physical
            out.append(_Root(c, root.card, (tile,), tile, f"{c}.{tile}"))
    if any(m is not None for _, m in keys):
        t.infer(f"Sub-devices exposed by the selector follow their root ({hierarchy})")
    return out


def read(env: Mapping[str, str], host: HostLike, t: Trace) -> list[VisibleUnit]:
    cards = _cards(host)
    t.step(f"Host: {len(cards)} Intel GPU card(s), {sum(c.tiles for c in cards)} tile(s) in all.")
    hierarchy = _read_hierarchy(cards, t)
    _read_pci_order(cards, t)
    mask = t.read("ZE_AFFINITY_MASK")
    roots = _apply_mask(mask, hierarchy, cards, t)
    t.step(f"Level Zero exposes {len(roots)} device(s) under {hierarchy}.")
    selector = t.read("ONEAPI_DEVICE_SELECTOR")
    roots = _apply_selector(selector, roots, hierarchy, t)
    return units_from([(r.physical, r.card.position, r.sub, r.label) for r in roots])


def write(
    physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``ZE_AFFINITY_MASK`` over root-device indices, with cards pinned to PCI order.

    The indices are read in the hierarchy ``env`` sets: whole cards under COMPOSITE, else
    flat tiles (FLAT is pinned then). The mask never reorders, so the indices must be
    ascending. An empty selection is ``ONEAPI_DEVICE_SELECTOR=!*:gpu`` (discard every GPU; it
    acts on SYCL programs such as PyTorch, not on programs that call Level Zero directly)."""
    cards = _cards(host)
    composite = (env or {}).get("ZE_FLAT_DEVICE_HIERARCHY", "").strip().upper() == "COMPOSITE"
    if composite:
        n, what, hierarchy = len(cards), "Intel GPU cards (COMPOSITE hierarchy)", "COMPOSITE"
    else:
        n, what = sum(c.tiles for c in cards), "Intel GPU tiles (FLAT hierarchy)"
        hierarchy = DEFAULT_HIERARCHY
    sel = require_indices("xpu", physical, n, what)
    require_ascending("xpu", sel, "ZE_AFFINITY_MASK never reorders devices")
    out = {"ZE_FLAT_DEVICE_HIERARCHY": hierarchy, "ZE_ENABLE_PCI_ID_DEVICE_ORDER": "1"}
    if not sel:
        out["ONEAPI_DEVICE_SELECTOR"] = "!*:gpu"
    else:
        out["ZE_AFFINITY_MASK"] = ",".join(str(k) for k in sel)
    return out
