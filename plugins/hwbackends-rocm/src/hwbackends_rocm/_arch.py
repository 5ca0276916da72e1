"""AMD GPU architectures (gfx targets): what each is, whether ROCm supports it, what it runs.

One declarative row per gfx target. ``capability`` is what torch reports on ROCm
(``torch.cuda.get_device_capability()`` = gfx major and minor, so gfx942 is 9.4 and gfx1151 is
11.5; Transformers' and kernels' capability checks compare against these numbers).

Sources: product names and gfx targets from the LLVM AMDGPU processor table; support status
from the ROCm compatibility matrices (Instinct and Radeon on Linux, Ryzen APUs); precision
from the CDNA/RDNA ISA guides (cited per row). "community" means not on AMD's support list
but run by users (e.g. TheRock nightly builds); "unsupported" means no ROCm kernels are built
for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["GFX", "GfxArch", "PciRow", "capability", "gfx_where", "pci_row"]

Support = Literal["supported", "deprecated", "community", "unsupported"]

LLVM = "https://llvm.org/docs/AMDGPUUsage.html#processors (gfx target -> products)"
SYSREQ = (
    "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/reference/"
    "system-requirements.html (supported Instinct and Radeon GPUs)"
)
RYZEN = (
    "https://rocm.docs.amd.com/projects/radeon-ryzen/en/latest/ (ROCm on Radeon and Ryzen: "
    "Ryzen AI Max 300 / gfx1151)"
)
CDNA2 = "AMD CDNA 2 ISA reference guide (MFMA bf16 instructions at full rate)"
CDNA3 = "AMD CDNA 3 ISA reference guide (MFMA FP8/BF8 in the FNUZ encodings)"
CDNA4 = "AMD CDNA 4 ISA reference guide (MFMA FP8 in the OCP E4M3/E5M2 encodings)"
RDNA3 = "AMD RDNA 3 ISA reference guide (WMMA fp16/bf16)"
RDNA4 = "AMD RDNA 4 ISA reference guide (WMMA fp16/bf16 and FP8/BF8)"
MI100 = "AMD Instinct MI100 datasheet (matrix bf16 rate is half the fp16 rate): fp16 recommended"


@dataclass(frozen=True)
class GfxArch:
    """One gfx target. ``fp8`` is the FP8 encoding its matrix units use, if any."""

    arch: str
    family: str
    products: str
    support: Support
    integrated: bool
    bf16: bool  # bf16 recommended for training (fast matrix bf16)
    fp8: Literal["fnuz", "ocp"] | None
    source: str
    min_rocm: str | None = None  # oldest ROCm release that builds for it

    @property
    def capability(self) -> int:
        return capability(self.arch) or 0


def _g(arch: str, family: str, products: str, support: Support, *, igpu: bool = False,
       bf16: bool = False, fp8: Literal["fnuz", "ocp"] | None = None, source: str = "",
       min_rocm: str | None = None) -> GfxArch:  # fmt: skip
    where = RYZEN if igpu and support != "unsupported" else SYSREQ
    return GfxArch(arch, family, products, support, igpu, bf16, fp8,
                   f"{LLVM}; {where}" + (f"; {source}" if source else ""), min_rocm)  # fmt: skip


GFX: Mapping[str, GfxArch] = {
    a.arch: a
    for a in (
        # GCN1-GCN4 and most of GCN5/RDNA1/RDNA2: real amdgpu targets, but not on AMD's ROCm
        # support list (SYSREQ names none of them); LLVM's table gives the products.
        _g("gfx600", "GCN1", "Radeon HD 7970/7950, R9 280X (Tahiti)", "unsupported"),
        _g("gfx601", "GCN1", "Radeon HD 7870/7770, R7 370 (Pitcairn, Cape Verde)", "unsupported"),
        _g("gfx602", "GCN1", "Radeon R7 240/250, HD 8570 (Oland, Hainan)", "unsupported"),
        _g("gfx700", "GCN2", "Kaveri APUs (A10-7850K)", "unsupported", igpu=True),
        _g("gfx701", "GCN2", "Radeon R9 290/390, FirePro W9100 (Hawaii)", "unsupported"),
        _g("gfx703", "GCN2", "Kabini/Mullins APUs", "unsupported", igpu=True),
        _g("gfx704", "GCN2", "Radeon R7 260X, HD 7790 (Bonaire)", "unsupported"),
        _g("gfx801", "GCN3", "Carrizo APUs", "unsupported", igpu=True),
        _g("gfx802", "GCN3", "Radeon R9 285/380 (Tonga), R7 M260 (Iceland)", "unsupported"),
        _g("gfx803", "GCN3/GCN4", "Radeon R9 Fury (Fiji), RX 470/480/570/580/590 (Polaris)",
           "unsupported"),
        _g("gfx810", "GCN3", "Stoney Ridge APUs", "unsupported", igpu=True),
        _g("gfx900", "GCN5 (Vega 10)", "Instinct MI25, Radeon RX Vega 56/64", "unsupported"),
        _g("gfx902", "GCN5 (Vega)", "Ryzen 2000/3000 APUs (Raven, Picasso)", "unsupported",
           igpu=True),
        _g("gfx904", "GCN5 (Vega 12)", "Radeon Pro Vega 20 (Vega 12)", "unsupported"),
        _g("gfx906", "GCN5 (Vega 20)", "Instinct MI50/MI60, Radeon VII", "deprecated"),
        _g("gfx908", "CDNA", "Instinct MI100", "supported", source=MI100),
        _g("gfx90a", "CDNA2", "Instinct MI210/MI250/MI250X", "supported", bf16=True,
           source=CDNA2),
        _g("gfx942", "CDNA3", "Instinct MI300X/MI300A/MI325X", "supported", bf16=True,
           fp8="fnuz", source=CDNA3),
        _g("gfx950", "CDNA4", "Instinct MI350X/MI355X", "supported", bf16=True, fp8="ocp",
           source=CDNA4, min_rocm="7.0"),
        _g("gfx1010", "RDNA1", "Radeon RX 5700/5700 XT, PRO W5700 (Navi 10)", "unsupported"),
        _g("gfx1011", "RDNA1", "Radeon Pro V520, Pro 5600M (Navi 12)", "unsupported"),
        _g("gfx1012", "RDNA1", "Radeon RX 5500/5300, PRO W5500 (Navi 14)", "unsupported"),
        _g("gfx1013", "RDNA1", "Cyan Skillfish (PlayStation 5 APU, BC-250)", "unsupported",
           igpu=True),
        _g("gfx1030", "RDNA2", "Radeon PRO W6800/V620, RX 6800/6900", "supported"),
        _g("gfx1031", "RDNA2", "Radeon RX 6700/6700 XT/6750 XT (Navi 22)", "unsupported"),
        _g("gfx1032", "RDNA2", "Radeon RX 6600/6650 XT, PRO W6600 (Navi 23)", "unsupported"),
        _g("gfx1033", "RDNA2", "Van Gogh APU (Steam Deck)", "unsupported", igpu=True),
        _g("gfx1034", "RDNA2", "Radeon RX 6500 XT/6400 (Navi 24)", "unsupported"),
        _g("gfx1037", "RDNA2", "Ryzen 7020 APUs (Mendocino), Radeon 610M", "unsupported",
           igpu=True),
        _g("gfx1100", "RDNA3", "Radeon RX 7900 XTX/XT, PRO W7900/W7800", "supported",
           bf16=True, source=RDNA3),
        _g("gfx1101", "RDNA3", "Radeon RX 7800 XT/7700 XT, PRO W7700", "supported", bf16=True,
           source=RDNA3),
        _g("gfx1102", "RDNA3", "Radeon RX 7600", "community", bf16=True, source=RDNA3),
        _g("gfx1200", "RDNA4", "Radeon RX 9060 XT", "supported", bf16=True, fp8="ocp",
           source=RDNA4, min_rocm="6.4"),
        _g("gfx1201", "RDNA4", "Radeon RX 9070/9070 XT, AI PRO R9700", "supported", bf16=True,
           fp8="ocp", source=RDNA4, min_rocm="6.4"),
        # integrated GPUs (APUs)
        _g("gfx1151", "RDNA3.5", "Ryzen AI Max 300 (Strix Halo), Radeon 8060S/8050S",
           "supported", igpu=True, bf16=True, source=RDNA3, min_rocm="6.4"),
        _g("gfx1150", "RDNA3.5", "Ryzen AI 300 (Strix Point), Radeon 890M/880M", "community",
           igpu=True, bf16=True, source=RDNA3),
        _g("gfx1152", "RDNA3.5", "Ryzen AI 5/7 300 (Krackan Point)", "community", igpu=True,
           bf16=True, source=RDNA3),
        _g("gfx1103", "RDNA3", "Ryzen 7040/8040 (Phoenix, Hawk Point), Radeon 780M/760M",
           "unsupported", igpu=True),
        _g("gfx1036", "RDNA2", "Ryzen 7000/9000 desktop iGPU (Raphael, Granite Ridge)",
           "unsupported", igpu=True),
        _g("gfx1035", "RDNA2", "Ryzen 6000 (Rembrandt), Radeon 680M/660M", "unsupported",
           igpu=True),
        _g("gfx90c", "GCN5 (Vega)", "Ryzen 4000/5000 APUs (Renoir, Cezanne)", "unsupported",
           igpu=True),
    )
}  # fmt: skip


def capability(arch: str | None) -> int | None:
    """torch's ``major*10+minor`` for a gfx target: gfx942 -> 94, gfx90a -> 90, gfx1151 -> 115.

    The last two characters of the target are minor and stepping (hex digits), the rest is
    the major version (LLVM's target naming).
    """
    if not arch or not arch.startswith("gfx") or len(arch) < 6:
        return None
    major, minor = arch[3:-2], arch[-2]
    if not major.isdigit() or minor not in "0123456789abcdef":
        return None
    return int(major) * 10 + int(minor, 16)


def gfx_where(
    *, bf16: bool | None = None, fp8: bool | None = None, families: tuple[str, ...] = ()
) -> frozenset[str]:
    """Targets matching every condition given (``families`` by prefix, e.g. ``"CDNA"``)."""
    out = set()
    for a in GFX.values():
        if bf16 is not None and a.bf16 != bf16:
            continue
        if fp8 is not None and (a.fp8 is not None) != fp8:
            continue
        if families and not a.family.startswith(families):
            continue
        out.add(a.arch)
    return frozenset(out)


@dataclass(frozen=True)
class PciRow:
    """What an AMD PCI device id stands for: ``arch`` is empty for a pre-GCN GPU."""

    arch: str
    family: str
    product: str

    @property
    def pre_gcn(self) -> bool:
        return not self.arch


def pci_row(device_id: str | int | None) -> PciRow | None:
    """The generated ``_pciids`` row of an AMD PCI device id (``"0x740c"``), or None."""
    from hwbackends.plugin import pci_id

    did = pci_id(device_id)
    if did is None:
        return None
    from ._pciids import DEVICES  # ~1000 rows: only where an id must be looked up

    row = DEVICES.get(did)
    return PciRow(*row) if row is not None else None
