"""NVIDIA architectures: compute capability per model name, and what each capability can do.

Two declarative tables, each row with its source:

* ``SM`` — one row per compute capability: family, whether bf16 and FP8 run natively, and the
  CUDA releases that can build for it (a torch wheel outside that range has no kernels for it,
  the "no kernel image is available for execution on the device" failure).
* ``MODELS`` — product-name patterns as the driver prints them (``/proc/driver/nvidia/gpus/*/
  information`` "Model:", ``nvidia-smi -L``) mapped to a compute capability.

Capabilities come from NVIDIA's "CUDA GPUs - Compute Capability" list; the bf16/FP8 rules
and CUDA release limits from the CUDA programming guide and toolkit release notes (cited
per row).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "MODELS",
    "PRE_MAXWELL",
    "SM",
    "ModelName",
    "OldChip",
    "SmArch",
    "arch_for_device_id",
    "arch_for_name",
    "normalise",
    "sm_at_least",
]

CC_LIST = "https://developer.nvidia.com/cuda-gpus (compute capability per product)"
GUIDE_CC = (
    "CUDA C++ Programming Guide, 'Compute Capabilities' (bf16 tensor cores from 8.0, FP8 from 8.9)"
)
RN_128 = "CUDA 12.8 release notes: first toolkit with sm_100 / sm_120 (Blackwell) targets"
RN_129 = "CUDA 12.9 release notes: sm_103 / sm_121 targets"
RN_130 = (
    "CUDA 13.0 release notes: offline compilation and library support removed for "
    "Maxwell, Pascal and Volta (sm_5x-sm_7x before 7.5)"
)


@dataclass(frozen=True)
class SmArch:
    """One compute capability. ``cuda_min``/``cuda_max_major`` bound the toolkits that build it."""

    arch: str  # "sm_90"
    capability: int  # major*10+minor, as torch.cuda.get_device_capability() reports it
    family: str
    bf16: bool
    fp8: bool
    source: str
    cuda_min: str = "11.0"
    cuda_max_major: int | None = None

    @property
    def major_minor(self) -> str:
        return f"{self.capability // 10}.{self.capability % 10}"


def _sm(
    cap: int, family: str, source: str, cuda_min: str = "11.0", cuda_max: int | None = None
) -> SmArch:
    """bf16 from 8.0 and FP8 from 8.9 hold for every row (GUIDE_CC)."""
    src = f"{CC_LIST}; {GUIDE_CC}; {source}"
    return SmArch(f"sm_{cap}", cap, family, cap >= 80, cap >= 89, src, cuda_min, cuda_max)


RN_90 = "CUDA 9.0 release notes: Fermi (sm_2x) removed from the toolkit"
RN_110 = "CUDA 11.0 release notes: sm_30/sm_32 (Kepler) removed"
RN_120 = "CUDA 12.0 release notes: sm_35/sm_37 (Kepler) removed"

SM: Mapping[str, SmArch] = {
    a.arch: a
    for a in (
        # older than Maxwell: no toolkit current PyTorch builds with can build for them
        _sm(20, "Fermi", RN_90, "3.0", 8),
        _sm(30, "Kepler", RN_110, "4.2", 10),
        _sm(35, "Kepler", RN_120, "5.0", 11),
        _sm(37, "Kepler", RN_120 + " (Tesla K80)", "6.5", 11),
        _sm(50, "Maxwell", RN_130, "6.5", 12),
        _sm(52, "Maxwell", RN_130, "6.5", 12),
        _sm(53, "Maxwell", RN_130 + " (Jetson TX1)", "6.5", 12),
        _sm(60, "Pascal", RN_130, "8.0", 12),
        _sm(61, "Pascal", RN_130, "8.0", 12),
        _sm(62, "Pascal", RN_130 + " (Jetson TX2)", "8.0", 12),
        _sm(70, "Volta", RN_130, "9.0", 12),
        _sm(72, "Volta", RN_130, "10.0", 12),
        _sm(75, "Turing", "CUDA 10.0 release notes"),
        _sm(80, "Ampere", "CUDA 11.0 release notes"),
        _sm(86, "Ampere", "CUDA 11.1 release notes", "11.1"),
        _sm(87, "Ampere", "CUDA 11.4 release notes (Jetson Orin)", "11.4"),
        _sm(89, "Ada Lovelace", "CUDA 11.8 release notes", "11.8"),
        _sm(90, "Hopper", "CUDA 11.8 release notes", "11.8"),
        _sm(100, "Blackwell", RN_128, "12.8"),
        _sm(103, "Blackwell", RN_129, "12.9"),
        _sm(110, "Blackwell", "CUDA 13.0 release notes (Jetson Thor)", "13.0"),
        _sm(120, "Blackwell", RN_128, "12.8"),
        _sm(121, "Blackwell", RN_129 + " (DGX Spark GB10)", "12.9"),
    )
}


def sm_at_least(capability: int) -> frozenset[str]:
    """Every known ``sm_XX`` with at least this capability."""
    return frozenset(a for a, row in SM.items() if row.capability >= capability)


def normalise(value: str | None) -> str | None:
    """``sm_90`` from ``sm_90``, ``sm90``, ``9.0``, ``90`` or ``compute_90``; else None."""
    if not value:
        return None
    v = value.strip().lower()
    for prefix in ("sm_", "sm", "compute_"):
        if v.startswith(prefix):
            v = v[len(prefix) :]
            break
    if "." in v:
        major, _, minor = v.partition(".")
        v = major + minor if major.isdigit() and minor.isdigit() and len(minor) == 1 else ""
    return f"sm_{int(v)}" if v.isdigit() else None


@dataclass(frozen=True)
class ModelName:
    """A run of upper-case name tokens; ``#`` in a token matches one digit."""

    tokens: tuple[str, ...]
    arch: str
    source: str = CC_LIST


def _m(pattern: str, cap: int) -> ModelName:
    return ModelName(tuple(pattern.upper().split()), f"sm_{cap}")


def _geforce(series: str, cap: int) -> list[ModelName]:
    return [_m(f"RTX {series}0{x}0", cap) for x in "98765"]


# Longer patterns are tried first (stable sort below), so "QUADRO RTX 4000" (Turing) wins over
# "RTX 40x0" (Ada) and "RTX 5000 ADA" over a GeForce name.
_ROWS: list[ModelName] = [
    # Blackwell
    _m("GB300", 103), _m("B300", 103), _m("GB200", 100), _m("B200", 100), _m("B100", 100),
    _m("GB10", 121), _m("RTX PRO 6000", 120), _m("RTX PRO 5000", 120), _m("RTX PRO 4500", 120),
    _m("RTX PRO 4000", 120), *_geforce("5", 120),
    # Hopper
    _m("GH200", 90), _m("H200", 90), _m("H100", 90), _m("H800", 90), _m("H20", 90),
    # Ada Lovelace
    _m("L40S", 89), _m("L40", 89), _m("L20", 89), _m("L4", 89), _m("RTX 6000 ADA", 89),
    _m("RTX 5000 ADA", 89), _m("RTX 4500 ADA", 89), _m("RTX 4000 ADA", 89), _m("RTX 2000 ADA", 89),
    _m("RTX 4000 SFF ADA", 89), *_geforce("4", 89),
    # Ampere
    _m("A100", 80), _m("A800", 80), _m("A30", 80), _m("A10G", 86), _m("A10", 86), _m("A16", 86),
    _m("A40", 86), _m("A2", 86), _m("RTX A6000", 86), _m("RTX A5500", 86), _m("RTX A5000", 86),
    _m("RTX A4500", 86), _m("RTX A4000", 86), _m("RTX A2000", 86), *_geforce("3", 86),
    _m("JETSON AGX ORIN", 87), _m("ORIN", 87),
    # Turing
    _m("T4", 75), _m("QUADRO RTX 8000", 75), _m("QUADRO RTX 6000", 75), _m("QUADRO RTX 5000", 75),
    _m("QUADRO RTX 4000", 75), _m("TITAN RTX", 75), *_geforce("2", 75), _m("GTX 1660", 75),
    _m("GTX 1650", 75),
    # Volta
    _m("V100", 70), _m("V100S", 70), _m("TITAN V", 70), _m("QUADRO GV100", 70),
    # Pascal ("TITAN X (Pascal)" and "TITAN Xp" are GP102; the Maxwell one is "GTX TITAN X")
    _m("P100", 60), _m("QUADRO GP100", 60), _m("P40", 61), _m("P4", 61), _m("P6", 61),
    _m("P10", 61), _m("TITAN X PASCAL", 61), _m("TITAN XP", 61), _m("GTX 10#0", 61),
    _m("GT 1030", 61), _m("GT 1010", 61), _m("QUADRO P#000", 61), _m("QUADRO P#200", 61),
    _m("QUADRO P#00", 61), _m("QUADRO P#20", 61), _m("MX150", 61), _m("MX230", 61),
    _m("MX250", 61), _m("MX330", 61), _m("MX350", 61),
    # Maxwell (GM107/GM108 are 5.0, GM20x 5.2)
    _m("M60", 52), _m("M40", 52), _m("M6", 52), _m("M4", 52), _m("M10", 50),
    _m("GTX TITAN X", 52), _m("GTX 9#0", 52), _m("GTX 965M", 52), _m("GTX 970M", 52),
    _m("GTX 980M", 52), _m("GTX 950M", 50), _m("GTX 960M", 50), _m("GTX 750", 50),
    _m("GTX 750 TI", 50), _m("GTX 745", 50), _m("QUADRO M#000", 52), _m("QUADRO M3000M", 52),
    _m("QUADRO M4000M", 52), _m("QUADRO M5000M", 52), _m("QUADRO M2200", 52),
    _m("QUADRO M1000M", 50), _m("QUADRO M2000M", 50), _m("QUADRO M1200", 50),
    _m("QUADRO M600M", 50), _m("QUADRO M500M", 50), _m("QUADRO M520", 50),
    _m("QUADRO K2200", 50), _m("QUADRO K1200", 50), _m("QUADRO K620", 50), _m("MX130", 50),
    _m("MX110", 50), _m("940MX", 50), _m("930MX", 50),
]  # fmt: skip
MODELS: tuple[ModelName, ...] = tuple(sorted(_ROWS, key=lambda r: -len(r.tokens)))


def _tokens(name: str) -> list[str]:
    out, cur = [], []
    for ch in name.upper():
        if ch.isalnum():
            cur.append(ch)
        elif cur:
            out.append("".join(cur))
            cur = []
    if cur:
        out.append("".join(cur))
    return out


def _token_match(pattern: str, token: str) -> bool:
    return len(pattern) == len(token) and all(
        p == t or (p == "#" and t.isdigit()) for p, t in zip(pattern, token, strict=True)
    )


_BY_NAME: dict[str, ModelName | None] = {}


def arch_for_name(name: str | None) -> ModelName | None:
    """The table row whose tokens appear, in order and adjacent, in a product name."""
    if not name:
        return None
    if name not in _BY_NAME:  # a box has few distinct names and many GPUs: match each once
        _BY_NAME[name] = _match(name)
    return _BY_NAME[name]


PRE_MAXWELL_SOURCE = (
    "pci.ids (https://pci-ids.ucw.cz/): the GF100/GF110/GK10x/GK110/GK208 device-id blocks "
    f"and their products; {CC_LIST}, legacy GPUs: Fermi 2.0, GK10x 3.0, GK110/GK208 3.5, "
    "GK210 3.7"
)


@dataclass(frozen=True)
class OldChip:
    """A block of pre-Maxwell device ids (the generated ``_pciids`` table starts at Maxwell)."""

    first: int
    last: int
    chip: str
    arch: str
    products: Mapping[int, str]


# The datacenter parts among them are named: they are the ones still found in racks.
PRE_MAXWELL: tuple[OldChip, ...] = (
    OldChip(0x06C0, 0x06DF, "GF100", "sm_20", {0x06D1: "Tesla C2050 / C2070",
            0x06D2: "Tesla M2070", 0x06DE: "Tesla T20", 0x06C0: "GeForce GTX 480"}),
    OldChip(0x1080, 0x109F, "GF110", "sm_20", {0x1091: "Tesla M2090", 0x1094: "Tesla M2075",
            0x1096: "Tesla C2075", 0x1080: "GeForce GTX 580"}),
    OldChip(0x0FC0, 0x0FFF, "GK107", "sm_30", {0x0FF2: "GRID K1"}),
    OldChip(0x1180, 0x11BF, "GK104", "sm_30", {0x118F: "Tesla K10", 0x11BF: "GRID K2",
            0x1180: "GeForce GTX 680"}),
    OldChip(0x11C0, 0x11FF, "GK106", "sm_30", {}),
    OldChip(0x102D, 0x102D, "GK210", "sm_37", {0x102D: "Tesla K80"}),
    OldChip(0x1000, 0x103F, "GK110", "sm_35", {0x1021: "Tesla K20Xm", 0x1022: "Tesla K20c",
            0x1023: "Tesla K40m", 0x1024: "Tesla K40c", 0x1026: "Tesla K20s",
            0x1028: "Tesla K20m", 0x1005: "GeForce GTX TITAN"}),
    OldChip(0x1280, 0x12BF, "GK208", "sm_35", {}),
)  # fmt: skip


def arch_for_device_id(device_id: str | int | None) -> tuple[str, str | None] | None:
    """``(arch, product name)`` for an NVIDIA PCI device id (``"0x1b06"``), from the generated
    ``_pciids`` table (pci.ids + NVIDIA's compute-capability list), else the pre-Maxwell
    blocks (``PRE_MAXWELL``); None when not listed."""
    from hwbackends.plugin import pci_id

    did = pci_id(device_id)
    if did is None:
        return None
    from ._pciids import CHIPS, DEVICES  # ~700 rows: only where an id must be looked up

    row = DEVICES.get(did)
    if row is None:
        # the first block that holds it (GK210's one id sits inside GK110's block)
        old = next((c for c in PRE_MAXWELL if c.first <= did <= c.last), None)
        return (old.arch, old.products.get(did)) if old is not None else None
    return CHIPS[row[0]][0], row[1] or None


def _match(name: str) -> ModelName | None:
    toks = _tokens(name)
    for row in MODELS:
        n = len(row.tokens)
        for i in range(len(toks) - n + 1):
            if all(_token_match(p, t) for p, t in zip(row.tokens, toks[i : i + n], strict=True)):
                return row
    return None
