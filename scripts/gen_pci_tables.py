#!/usr/bin/env python3
"""Generate the PCI device-id tables of the cuda and rocm plugins from public id lists.

    python scripts/gen_pci_tables.py --pci-ids /usr/share/misc/pci.ids \\
        --amdgpu-drv path/to/linux/drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c

Writes ``plugins/hwbackends-cuda/src/hwbackends_cuda/_pciids.py`` and
``plugins/hwbackends-rocm/src/hwbackends_rocm/_pciids.py``. Nothing is downloaded: give the
files (``apt-get install pciutils hwdata`` installs a ``pci.ids``; a newer one is in the
pciutils/pciids repository; ``amdgpu_drv.c`` is in any Linux source tree). The generated
tables are committed; their inputs are not.

What comes from where:

* Device id -> product name and chip: the PCI ID Repository's ``pci.ids`` (vendor 10de and
  1002), whose entries read ``GP102 [GeForce GTX 1080 Ti]`` (chip, then product in brackets).
* NVIDIA chip -> compute capability: ``NV_CHIPS`` below, one row per chip, from NVIDIA's "CUDA
  GPUs - Compute Capability" list (https://developer.nvidia.com/cuda-gpus), which names the
  products of each chip in pci.ids.
* AMD device id -> ASIC for GCN through RDNA2 and CDNA1/2: the amdgpu kernel driver's
  ``pciidlist`` (``drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c``, ``CHIP_*`` per id); later ASICs
  are matched by IP discovery, not by id, so their ids come from pci.ids names
  (``AMD_CODENAMES``). ASIC -> gfx target: the LLVM AMDGPU processor table
  (https://llvm.org/docs/AMDGPUUsage.html#processors).
* AMD pre-GCN GPUs: ``amdgpu_unsupported_pciidlist`` in the same file ("These devices are not
  supported by amdgpu. They are supported by the mach64, r128, radeon drivers").
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CUDA_OUT = ROOT / "plugins/hwbackends-cuda/src/hwbackends_cuda/_pciids.py"
ROCM_OUT = ROOT / "plugins/hwbackends-rocm/src/hwbackends_rocm/_pciids.py"

CC_LIST = "https://developer.nvidia.com/cuda-gpus"
LLVM = "https://llvm.org/docs/AMDGPUUsage.html#processors"
KERNEL = "Linux drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c"

#: NVIDIA chip -> (arch, family). Maxwell onward; Tegra-only chips (GM20B, GP10B, GV10B,
#: GA10B) are not PCI devices and are left out. GB10B is Jetson Thor (compute capability
#: 11.0 from CUDA 13, 10.1 before), GB20B the GB10 of DGX Spark (12.1), GB110 B300/GB300 (10.3).
NV_CHIPS: dict[str, tuple[str, str]] = {
    "GM107": ("sm_50", "Maxwell"), "GM108": ("sm_50", "Maxwell"),
    "GM200": ("sm_52", "Maxwell"), "GM204": ("sm_52", "Maxwell"), "GM206": ("sm_52", "Maxwell"),
    "GP100": ("sm_60", "Pascal"),
    "GP102": ("sm_61", "Pascal"), "GP104": ("sm_61", "Pascal"), "GP106": ("sm_61", "Pascal"),
    "GP107": ("sm_61", "Pascal"), "GP108": ("sm_61", "Pascal"),
    "GV100": ("sm_70", "Volta"),
    "TU102": ("sm_75", "Turing"), "TU104": ("sm_75", "Turing"), "TU106": ("sm_75", "Turing"),
    "TU116": ("sm_75", "Turing"), "TU117": ("sm_75", "Turing"),
    "GA100": ("sm_80", "Ampere"),
    "GA102": ("sm_86", "Ampere"), "GA103": ("sm_86", "Ampere"), "GA104": ("sm_86", "Ampere"),
    "GA106": ("sm_86", "Ampere"), "GA107": ("sm_86", "Ampere"),
    "AD102": ("sm_89", "Ada Lovelace"), "AD103": ("sm_89", "Ada Lovelace"),
    "AD104": ("sm_89", "Ada Lovelace"), "AD106": ("sm_89", "Ada Lovelace"),
    "AD107": ("sm_89", "Ada Lovelace"),
    "GH100": ("sm_90", "Hopper"),
    "GB100": ("sm_100", "Blackwell"), "GB102": ("sm_100", "Blackwell"),
    "GB110": ("sm_103", "Blackwell"),
    "GB10B": ("sm_110", "Blackwell"),
    "GB202": ("sm_120", "Blackwell"), "GB203": ("sm_120", "Blackwell"),
    "GB205": ("sm_120", "Blackwell"), "GB206": ("sm_120", "Blackwell"),
    "GB207": ("sm_120", "Blackwell"),
    "GB20B": ("sm_121", "Blackwell"),
}  # fmt: skip

#: amdgpu CHIP_* -> (gfx target, family). gfx names and the ASIC each stands for: LLVM's
#: processor table ("Alternative processor" names tahiti ... stoney; products for gfx9+).
AMD_CHIPS: dict[str, tuple[str, str]] = {
    "TAHITI": ("gfx600", "GCN1"), "PITCAIRN": ("gfx601", "GCN1"), "VERDE": ("gfx601", "GCN1"),
    "OLAND": ("gfx602", "GCN1"), "HAINAN": ("gfx602", "GCN1"),
    "KAVERI": ("gfx700", "GCN2"), "HAWAII": ("gfx701", "GCN2"), "KABINI": ("gfx703", "GCN2"),
    "MULLINS": ("gfx703", "GCN2"), "BONAIRE": ("gfx704", "GCN2"),
    "CARRIZO": ("gfx801", "GCN3"), "TOPAZ": ("gfx802", "GCN3"), "TONGA": ("gfx802", "GCN3"),
    "FIJI": ("gfx803", "GCN3"), "STONEY": ("gfx810", "GCN3"),
    "POLARIS10": ("gfx803", "GCN4"), "POLARIS11": ("gfx803", "GCN4"),
    "POLARIS12": ("gfx803", "GCN4"), "VEGAM": ("gfx803", "GCN4"),
    "VEGA10": ("gfx900", "GCN5"), "RAVEN": ("gfx902", "GCN5"), "VEGA12": ("gfx904", "GCN5"),
    "VEGA20": ("gfx906", "GCN5"), "RENOIR": ("gfx90c", "GCN5"),
    "ARCTURUS": ("gfx908", "CDNA"), "ALDEBARAN": ("gfx90a", "CDNA2"),
    "NAVI10": ("gfx1010", "RDNA1"), "NAVI12": ("gfx1011", "RDNA1"), "NAVI14": ("gfx1012", "RDNA1"),
    "CYAN_SKILLFISH": ("gfx1013", "RDNA1"),
    "SIENNA_CICHLID": ("gfx1030", "RDNA2"), "NAVY_FLOUNDER": ("gfx1031", "RDNA2"),
    "DIMGREY_CAVEFISH": ("gfx1032", "RDNA2"), "BEIGE_GOBY": ("gfx1034", "RDNA2"),
    "YELLOW_CARP": ("gfx1035", "RDNA2"),
}  # fmt: skip

#: pci.ids codename (the text before the bracket) -> (gfx, family), for the ASICs amdgpu
#: finds by IP discovery. The products in pci.ids' brackets match LLVM's product column.
AMD_CODENAMES: dict[str, tuple[str, str]] = {
    "Aqua Vanjaram": ("gfx942", "CDNA3"),
    "Navi 31": ("gfx1100", "RDNA3"), "Navi 32": ("gfx1101", "RDNA3"),
    "Navi 33": ("gfx1102", "RDNA3"),
    "Phoenix": ("gfx1103", "RDNA3"), "Phoenix1": ("gfx1103", "RDNA3"),
    "Phoenix2": ("gfx1103", "RDNA3"), "HawkPoint1": ("gfx1103", "RDNA3"),
    "HawkPoint2": ("gfx1103", "RDNA3"),
    "VanGogh": ("gfx1033", "RDNA2"), "Raphael": ("gfx1036", "RDNA2"),
    "Granite Ridge": ("gfx1036", "RDNA2"), "Mendocino": ("gfx1037", "RDNA2"),
    "Strix": ("gfx1150", "RDNA3.5"), "Strix Halo": ("gfx1151", "RDNA3.5"),
    "Krackan": ("gfx1152", "RDNA3.5"),
    "Navi 44": ("gfx1200", "RDNA4"), "Navi 48": ("gfx1201", "RDNA4"),
}  # fmt: skip
#: Products that share a codename with another target (pci.ids calls MI350 Aqua Vanjaram too).
AMD_PRODUCT_OVERRIDES: tuple[tuple[str, tuple[str, str]], ...] = (
    ("MI350", ("gfx950", "CDNA4")),
    ("MI355", ("gfx950", "CDNA4")),
)

#: Functions of a GPU's chip that are not the GPU (pci.ids lists them under the chip's name).
NOT_GPU = re.compile(
    r"audio|usb|ucsi|nvswitch|bridge|pcie host|serial|smbus|reserved|dummy function", re.I
)

# Pre-GCN codenames whose shader core is TeraScale (R600 through Northern Islands, and the
# APUs built on them); other radeon-owned ids are older (R100-R500 and Mach/Rage).
TERASCALE = re.compile(
    r"^(R6\d0|R680|R700|RV6\d\d|RV7\d\d|RS[78]80\w*|Cedar|Redwood|Juniper|Cypress|"
    r"Hemlock|Barts|Turks|Caicos|Cayman|Antilles|Park|Madison|Broadway|Seymour|Whistler|"
    r"Blackcomb|Robson|Granville|Lexington|Thames|Wrestler|Sumo|SuperSumo|Trinity|Richland|"
    r"Devastator|Scrapper|Capilano|Manhattan|Vancouver|Chelsea LP)\b"
)


def read_pci_ids(path: Path, vendor: str) -> tuple[str, dict[int, str]]:
    """(version line, device id -> name) for one vendor of a pci.ids file."""
    version = ""
    out: dict[int, str] = {}
    inside = False
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("#\tVersion:"):
            version = line.split(":", 1)[1].strip()
        if re.match(r"^[0-9a-f]{4}\s", line):
            inside = line.startswith(vendor + " ")
        elif inside and re.match(r"^\t[0-9a-f]{4}\s", line):
            out[int(line[1:5], 16)] = line[5:].strip()
    return version, out


def split_name(text: str) -> tuple[str, str]:
    """``GP102 [GeForce GTX 1080 Ti]`` -> (``GP102``, ``GeForce GTX 1080 Ti``)."""
    head, sep, rest = text.partition("[")
    return head.strip(), rest.rpartition("]")[0].strip() if sep else ""


def nvidia_rows(names: dict[int, str]) -> dict[int, tuple[str, str]]:
    rows: dict[int, tuple[str, str]] = {}
    for did, text in sorted(names.items()):
        if NOT_GPU.search(text):
            continue
        m = re.match(r"^((?:GM|GP|GV|TU|GA|AD|GH|GB)\d\d[0-9B])", text)
        if m is None or m.group(1) not in NV_CHIPS:
            continue
        rows[did] = (m.group(1), split_name(text)[1])
    return rows


def amdgpu_ids(path: Path) -> tuple[dict[int, str], set[int]]:
    """(device id -> CHIP name, pre-GCN ids) from amdgpu_drv.c."""
    text = path.read_text(encoding="utf-8", errors="replace")
    chips = {
        int(did, 16): chip
        for did, chip in re.findall(
            r"\{0x1002,\s*0x([0-9a-fA-F]{4}),\s*PCI_ANY_ID,\s*PCI_ANY_ID,\s*0,\s*0,\s*CHIP_(\w+)",
            text,
        )
    }
    m = re.search(r"amdgpu_unsupported_pciidlist\[\]\s*=\s*\{(.*?)\};", text, re.S)
    if m is None:
        raise SystemExit(f"{path}: no amdgpu_unsupported_pciidlist; expected {KERNEL}")
    old = {int(x, 16) for x in re.findall(r"0x([0-9a-fA-F]{4})", m.group(1))}
    return chips, old


def amd_rows(
    names: dict[int, str], chips: dict[int, str], old: set[int]
) -> dict[int, tuple[str, str, str]]:
    """device id -> (gfx or "", family, product name)."""
    rows: dict[int, tuple[str, str, str]] = {}
    for did, chip in sorted(chips.items()):
        if chip not in AMD_CHIPS:
            continue
        gfx, family = AMD_CHIPS[chip]
        text = names.get(did, "")
        head, product = split_name(text)
        rows[did] = (gfx, family, product or head)
    for did, text in sorted(names.items()):
        if did in rows or did in old or NOT_GPU.search(text):
            continue
        head, product = split_name(text)
        code = AMD_CODENAMES.get(head.split("/")[0].strip())
        if code is None:
            continue
        for needle, override in AMD_PRODUCT_OVERRIDES:
            if needle in product:
                code = override
        rows[did] = (code[0], code[1], product or head)
    for did in sorted(old):
        text = names.get(did, "")
        head, product = split_name(text)
        if NOT_GPU.search(text):
            continue
        family = "TeraScale" if TERASCALE.match(head) else "pre-TeraScale" if head else "pre-GCN"
        rows[did] = ("", family, product or head)
    return rows


def _q(s: str) -> str:
    return repr(s).replace("'", '"') if '"' not in s else repr(s)


def write_cuda(version: str, rows: dict[int, tuple[str, str]]) -> str:
    out = [
        '"""NVIDIA PCI device ids: each GPU\'s chip and product, and each chip\'s arch.',
        "",
        "Generated by scripts/gen_pci_tables.py from public lists; do not edit by hand, rerun it.",
        "",
        f"* ``DEVICES`` (device id -> chip, product): the PCI ID Repository's pci.ids {version}",
        "  (https://pci-ids.ucw.cz/, BSD-3-Clause or GPL-2.0+), vendor 10de, GPU functions only",
        "  (its audio, USB, UCSI and NVSwitch functions are left out).",
        "* ``CHIPS`` (chip -> arch, family), Maxwell on: NVIDIA's CUDA GPUs list",
        f"  ({CC_LIST}).",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "TYPE_CHECKING = False",
        "if TYPE_CHECKING:",
        "    from collections.abc import Mapping",
        "",
        '__all__ = ["CHIPS", "DEVICES", "SOURCE"]',
        "",
        f'SOURCE = "pci.ids {version} (https://pci-ids.ucw.cz/) and {CC_LIST}"',
        "",
        "#: chip -> (arch, family)",
        "CHIPS: Mapping[str, tuple[str, str]] = {",
    ]
    for chip, (arch, fam) in NV_CHIPS.items():
        out.append(f"    {_q(chip)}: ({_q(arch)}, {_q(fam)}),")
    out += ["}", "", "#: PCI device id -> (chip, product name; empty when pci.ids names none)"]
    out.append("DEVICES: Mapping[int, tuple[str, str]] = {")
    for did, (chip, name) in rows.items():
        out.append(f"    0x{did:04X}: ({_q(chip)}, {_q(name)}),")
    out += ["}  # fmt: skip", ""]
    return "\n".join(out)


def write_rocm(version: str, rows: dict[int, tuple[str, str, str]]) -> str:
    out = [
        "# ruff: noqa: E501  (generated data rows)",
        '"""AMD PCI device ids: each GPU\'s gfx target (GCN on), or that it predates GCN.',
        "",
        "Generated by scripts/gen_pci_tables.py from public lists; do not edit by hand, rerun it.",
        "",
        "``DEVICES`` maps a device id to (gfx target, family, product). Sources:",
        "",
        "* GCN1 to RDNA2 and CDNA1/2: the amdgpu driver's ``pciidlist``",
        f"  ({KERNEL}), whose ``CHIP_*`` names map to gfx targets in LLVM's",
        f"  processor table ({LLVM}).",
        "* Later ASICs (found by IP discovery, not listed by id): the PCI ID Repository's",
        f"  pci.ids {version} (https://pci-ids.ucw.cz/, BSD-3-Clause or GPL-2.0+) codenames",
        "  (Navi 31, Aqua Vanjaram, Strix Halo, ...) with LLVM's product lists per target.",
        "* Pre-GCN GPUs (gfx target empty): ``amdgpu_unsupported_pciidlist`` in the same driver",
        '  file ("not supported by amdgpu ... supported by the mach64, r128, radeon drivers");',
        "  family TeraScale for R600 through Northern Islands and their APUs, pre-TeraScale for",
        "  older ones, pre-GCN where pci.ids names no chip. Products from pci.ids.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "TYPE_CHECKING = False",
        "if TYPE_CHECKING:",
        "    from collections.abc import Mapping",
        "",
        '__all__ = ["DEVICES", "SOURCE"]',
        "",
        f'SOURCE = "{KERNEL} pciidlist, pci.ids {version} (https://pci-ids.ucw.cz/), {LLVM}"',
        "",
        "#: PCI device id -> (gfx target or empty for pre-GCN, family, product name)",
        "DEVICES: Mapping[int, tuple[str, str, str]] = {",
    ]
    for did, (gfx, fam, name) in rows.items():
        out.append(f"    0x{did:04X}: ({_q(gfx)}, {_q(fam)}, {_q(name)}),")
    out += ["}  # fmt: skip", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pci-ids", type=Path, default=Path("/usr/share/misc/pci.ids"))
    p.add_argument("--amdgpu-drv", type=Path, required=True, help="amdgpu_drv.c of a Linux tree")
    args = p.parse_args(argv)
    for f in (args.pci_ids, args.amdgpu_drv):
        if not f.is_file():
            print(f"{f}: not a file; see this script's docstring for where to get it")
            return 2
    version, nv = read_pci_ids(args.pci_ids, "10de")
    _, amd = read_pci_ids(args.pci_ids, "1002")
    chips, old = amdgpu_ids(args.amdgpu_drv)
    CUDA_OUT.write_text(write_cuda(version, nvidia_rows(nv)), encoding="utf-8")
    ROCM_OUT.write_text(write_rocm(version, amd_rows(amd, chips, old)), encoding="utf-8")
    print(f"wrote {CUDA_OUT.relative_to(ROOT)} and {ROCM_OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
