"""The one vendor list in the core: known plugin distributions and the hardware they serve.

Used only to say which plugin to install when hardware is found that no installed backend
claims (fsspec's ``known_implementations`` plays the same part for filesystems), and which
such hardware needs no plugin or has none (``KNOWN_FUNCTIONS``). Selection, host reading and
visibility never depend on it: an installed backend's own declarations are what count, and a
vendor's plugin missing from this list works exactly as well. Hardware of a vendor not listed
here is still named, from the machine's PCI ID database (``_machine.pciids``).

How a vendor gets listed: a pull request that adds one ``KnownPlugin`` line below (backend
name, host-device key, display name, PCI vendor ids; classes, ``/dev`` patterns and device ids
where the vendor id also covers other functions). ``tests/test_catalog.py`` checks that every
line names a distribution and entry point that exist and the PCI vendor ids its plugin
declares.
"""

from __future__ import annotations

import os

from hwbackends._base.errors import BackendNotFoundError
from hwbackends._base.files import normalize_dist_name
from hwbackends._base.settings import close_matches

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from hwbackends._base.settings import Settings
    from hwbackends._discovery.scan import EntryPointSpec

__all__ = [
    "KNOWN_FUNCTIONS",
    "KNOWN_FUNCTION_VENDORS",
    "KNOWN_PLUGINS",
    "KNOWN_VENDOR_WIDE",
    "KnownFunction",
    "KnownPlugin",
    "check_listed_names",
    "install_command",
    "known_for",
    "known_function",
    "not_installed_fix",
]


class KnownPlugin:
    """One known plugin distribution and the hardware ids that mean it is needed."""

    __slots__ = (
        "backend",
        "device_nodes",
        "display",
        "distribution",
        "pci_classes",
        "pci_device_ids",
        "pci_vendor_ids",
        "vendor",
    )

    def __init__(
        self,
        backend: str,
        vendor: str,
        display: str,
        pci_vendor_ids: tuple[int, ...],
        pci_classes: tuple[int, ...] = (),
        device_nodes: tuple[str, ...] = (),
        pci_device_ids: tuple[int, ...] = (),
    ) -> None:
        self.backend = backend
        self.distribution = f"hwbackends-{backend}"
        self.vendor = vendor
        self.display = display
        self.pci_vendor_ids = pci_vendor_ids
        self.pci_classes = pci_classes
        self.device_nodes = device_nodes
        self.pci_device_ids = pci_device_ids

    def __repr__(self) -> str:
        return f"KnownPlugin({self.distribution!r})"


# Classes and device ids narrow a vendor id that also covers NICs, chipsets, storage or
# crypto functions; they mirror each plugin's own declarations (tests/test_catalog.py).
_GPU = (0x03, 0x12)
_ACCEL = (0x03, 0x12, 0x0B, 0x08, 0x00, 0xFF)
KNOWN_PLUGINS: tuple[KnownPlugin, ...] = (
    KnownPlugin("cuda", "nvidia", "NVIDIA GPU", (0x10DE,), _GPU, ("nvidia{n}",)),
    KnownPlugin("rocm", "amd", "AMD GPU", (0x1002,), _GPU, ("kfd",)),
    KnownPlugin("xpu", "intel", "Intel GPU", (0x8086,), _GPU),
    KnownPlugin(
        "neuron", "aws", "AWS Neuron", (0x1D0F,), _ACCEL, ("neuron{n}",),
        (0x7064, 0x7065, 0x7066, 0x7067, 0x7164, 0x7264, 0x7364, 0x7564, 0x7565),
    ),
    KnownPlugin(
        "tpu", "google", "Google TPU", (0x1AE0,), _ACCEL, ("accel{n}",),
        (0x0027, 0x005E, 0x0062, 0x0063, 0x006F, 0x0076),
    ),
    KnownPlugin("hpu", "habana", "Intel Gaudi", (0x1DA3,), _ACCEL, ("hl{n}",)),
    KnownPlugin(
        "npu", "huawei", "Huawei Ascend", (0x19E5,), _ACCEL, ("davinci{n}",),
        (0xD100, 0xD500, 0xD801, 0xD802, 0xD803),
    ),
    KnownPlugin("mlu", "cambricon", "Cambricon MLU", (0xCABC,), _ACCEL, ("cambricon_dev{n}",)),
    KnownPlugin("musa", "mthreads", "Moore Threads GPU", (0x1ED5,), _ACCEL),
    KnownPlugin("mps", "apple", "Apple Silicon GPU", ()),
)  # fmt: skip


def known_for(vendor: str) -> KnownPlugin | None:
    """The known plugin for a host device's vendor key, or None."""
    for k in KNOWN_PLUGINS:
        if k.vendor == vendor:
            return k
    return None


# -- PCI functions that are not hwbackends hardware ----------------------------------------
#
# Vendor data like the list above, and used the same way: only to word the report about a
# PCI function no installed backend claims. "not-compute" functions (crypto, compression,
# data-movement and queueing engines that share the co-processor or accelerator class with
# compute devices) are named and otherwise left alone; "no-plugin" devices are compute
# hardware that no hwbackends plugin is known for, so "install the vendor's plugin" would be
# wrong advice. An installed backend that claims such a device is its plugin and takes it
# (the machine reader); an engine stays out of a vendor-wide claim unless the backend lists
# its device id. Device ids from the PCI ID Repository (pci.ids, https://pci-ids.ucw.cz/);
# driver names from the Linux drivers that bind them (cited per row).


class KnownFunction:
    """PCI functions of one kind: ``what`` they are, and whether they compute (``kind``)."""

    __slots__ = ("device_ids", "drivers", "kind", "pci_vendor_id", "source", "what")

    def __init__(
        self,
        kind: str,
        what: str,
        pci_vendor_id: int,
        device_ids: tuple[int, ...],
        drivers: tuple[str, ...],
        source: str,
    ) -> None:
        self.kind = kind  # "not-compute" or "no-plugin"
        self.what = what
        self.pci_vendor_id = pci_vendor_id
        self.device_ids = device_ids
        self.drivers = drivers
        self.source = source

    def __repr__(self) -> str:
        return f"KnownFunction({self.what!r})"


_QAT_SRC = (
    "pci.ids 8086 (… QAT, QuickAssist Technology); Linux drivers/crypto/intel/qat "
    "adf_accel_devices.h (ADF_*_DEVICE_NAME: dh895xcc, c6xx, c3xxx, 200xx, d15xx, c4xxx, 4xxx, "
    "420xx and their vf drivers)"
)
KNOWN_FUNCTIONS: tuple[KnownFunction, ...] = (
    # a server board's management display, like the ASPEED and Matrox ones no backend claims:
    # 2D only (xf86-video-ati radeon_kms.c turns render acceleration off for RN50; Mesa's
    # radeon_screen.c radeon_set_screen_flags refuses it)
    KnownFunction(
        "not-compute",
        "ATI ES1000 (RN50) server-management display",
        0x1002,
        (0x515E, 0x5969),
        (),
        "pci.ids 1002:515e ES1000, 1002:5969 ES1000; xf86-video-ati radeon_kms.c "
        "(PCI_CHIP_RN50_515E/_5969: no render acceleration)",
    ),
    KnownFunction(
        "not-compute",
        "Intel QuickAssist Technology (crypto and compression offload)",
        0x8086,
        (0x0434, 0x0435, 0x0442, 0x0443, 0x128C, 0x128D, 0x18A0, 0x18A1, 0x18EE, 0x18EF,
         0x19E2, 0x19E3, 0x1F18, 0x1F19, 0x37C8, 0x37C9, 0x4940, 0x4941, 0x4942, 0x4943,
         0x4944, 0x4945, 0x4946, 0x4947, 0x4948, 0x4949, 0x6F54, 0x6F55),
        ("dh895xcc", "dh895xccvf", "c6xx", "c6xxvf", "c3xxx", "c3xxxvf", "200xx", "200xxvf",
         "d15xx", "d15xxvf", "c4xxx", "c4xxxvf", "4xxx", "4xxxvf", "420xx", "qat_*"),
        _QAT_SRC,
    ),
    KnownFunction(
        "not-compute",
        "Intel Data Streaming / In-Memory Analytics Accelerator (DSA/IAA: memory copy and "
        "compression offload)",
        0x8086,
        (0x0B25, 0x0CFE, 0xB02D),
        ("idxd",),
        "pci.ids 8086:0b25 Data Streaming Accelerator (DSA), 0cfe In-Memory Analytics "
        "Accelerator (IAA); Linux drivers/dma/idxd (driver idxd)",
    ),
    KnownFunction(
        "not-compute",
        "Intel Dynamic Load Balancer (DLB: hardware queue management)",
        0x8086,
        (0x2710, 0x2714, 0x2715),
        ("dlb2",),
        "pci.ids 8086:2710 Dynamic Load Balancer 2.0, 2714 2.5, 2715 VF; Intel DLB driver dlb2",
    ),
    KnownFunction(
        "no-plugin",
        "NEC SX-Aurora TSUBASA Vector Engine",
        0x1BCF,
        (0x001C,),
        ("ve_drv",),
        "pci.ids 1bcf:001c Vector Engine 1.0; NEC VEOS kernel module ve_drv",
    ),
    KnownFunction(
        "no-plugin",
        "Intel Xeon Phi co-processor (Knights Ferry/Corner/Landing card)",
        0x8086,
        (0x2249, 0x224A, 0x2250, 0x225C, 0x225D, 0x225E, 0x2262),
        ("mic", "mic_x100"),
        "pci.ids 8086:2250-225e Xeon Phi coprocessor 5100/SE10/7120/3120/31S1, 2262 7220",
    ),
    # an inference engine on every Core Ultra laptop, but no torch device: named, and quiet
    KnownFunction(
        "not-compute",
        "Intel NPU (AI Boost, driven through OpenVINO; not a torch device)",
        0x8086,
        (0x643E, 0x7D1D, 0xAD1D, 0xB03E),
        ("intel_vpu",),
        "pci.ids 8086:7d1d/643e/ad1d/b03e Core Ultra … NPU; Linux drivers/accel/ivpu "
        "(driver intel_vpu)",
    ),
    KnownFunction(
        "no-plugin",
        "Tenstorrent AI accelerator (Grayskull, Wormhole, Blackhole)",
        0x1E52,
        (0xFACA, 0x401E, 0xB140),
        ("tenstorrent",),
        "pci.ids 1e52 Tenstorrent: faca Grayskull, 401e Wormhole, b140 Blackhole; "
        "tenstorrent/tt-kmd (driver tenstorrent)",
    ),
    # every function of the vendor (pci.ids lists no device ids for it); CUDA-compatible:
    # its cards run under the vendor's own torch build, whose device type is "cuda"
    KnownFunction(
        "no-plugin",
        "Iluvatar CoreX GPU (CUDA-compatible, driven by Iluvatar's own torch build)",
        0x1E3E,
        (),
        (),
        "pci.ids 1e3e Shanghai Iluvatar CoreX Semiconductor Co., Ltd. (no device ids listed)",
    ),
    KnownFunction(
        "no-plugin",
        "Baidu Kunlun AI accelerator",
        0x1D22,
        (0x3684, 0x3685),
        (),
        "pci.ids 1d22:3684 Kunlun AI Accelerator, 3685 Kunlun2 [VF]",
    ),
)  # fmt: skip


#: The vendor ids of ``KNOWN_FUNCTIONS``: the reader consults the table only for these.
KNOWN_FUNCTION_VENDORS = frozenset(k.pci_vendor_id for k in KNOWN_FUNCTIONS)
#: Vendors whose row takes every function (no device id, no driver listed): the reader also
#: consults it for their display controllers, the class a CUDA-compatible card may show.
KNOWN_VENDOR_WIDE = frozenset(
    k.pci_vendor_id for k in KNOWN_FUNCTIONS if not k.device_ids and not k.drivers
)


def known_function(
    vid: int, did: int | None, driver: Callable[[], str | None] | None = None
) -> KnownFunction | None:
    """The known non-hwbackends PCI function with this vendor/device id, else with this bound
    driver (``driver()`` is read only when no device id matched)."""
    rows = [k for k in KNOWN_FUNCTIONS if k.pci_vendor_id == vid]
    for k in rows:
        if (did is not None and did in k.device_ids) or not (k.device_ids or k.drivers):
            return k
    bound = driver() if driver is not None and rows else None
    for k in rows:
        if bound and any(
            bound == d or (d.endswith("*") and bound.startswith(d[:-1])) for d in k.drivers
        ):
            return k
    return None


def install_command(distribution: str, checkout: str | None) -> tuple[str, str]:
    """``(command, which)``: the pip line that installs a plugin, and where it comes from.

    From a checkout of the hwbackends repository (the core was installed from a local path
    that holds ``plugins/<distribution>``) that is the local path; otherwise the package name,
    for a published release.
    """
    import shlex

    spec, which = install_spec(distribution, checkout)
    return f"pip install {shlex.quote(spec)}", which


def install_spec(distribution: str, checkout: str | None) -> tuple[str, str]:
    """``(spec, which)``: what pip installs a plugin from (the local path in a checkout, else
    the package name), unquoted, and where it comes from (see ``install_command``)."""
    if checkout is not None:
        local = os.path.join(checkout, "plugins", distribution)
        if os.path.isfile(os.path.join(local, "pyproject.toml")):
            return local, "from this checkout"
    return distribution, "published package"


def core_checkout(path: list[str] | None = None) -> str | None:
    """The local folder the core was installed from (PEP 610 ``direct_url.json``), or None."""
    import json
    import sys
    from urllib.parse import unquote, urlparse

    from hwbackends._base.files import _read_text
    from hwbackends._discovery.dists import iter_dist_infos

    for norm, _version, info in iter_dist_infos(sys.path if path is None else path):
        if norm != "hwbackends":
            continue
        text = _read_text(os.path.join(info, "direct_url.json"), 1 << 14)
        if not text:
            return None
        try:
            data = json.loads(text)
        except ValueError:
            return None
        url = data.get("url") if isinstance(data, dict) else None
        if not isinstance(url, str) or not url.startswith("file://"):
            return None
        folder = unquote(urlparse(url).path)
        return folder if os.path.isdir(os.path.join(folder, "plugins")) else None
    return None


def not_installed_fix(key: str, names: Iterable[str], otherwise: str) -> str:
    """The fix for a backend name nothing installed provides: the installed name it is a slip
    for (``cdua``), else the known plugin that provides it, else the installed names. Never
    "install hwbackends-<typo>": no such distribution exists, and a name someone registers
    later could be anything."""
    import difflib

    near = difflib.get_close_matches(key, sorted(names), n=1, cutoff=0.75)
    if near:
        return f"use {near[0]!r} (an installed backend), or {otherwise}"
    known = next((k for k in KNOWN_PLUGINS if k.backend == key), None)
    if known is not None:
        return f"pip install {known.distribution}, or {otherwise}"
    return f"{otherwise}; `hwbackends plugins` lists the installed backends"


def check_listed_names(
    settings: Settings, installed: Mapping[str, Sequence[EntryPointSpec]]
) -> list[str]:
    """HWBACKENDS_PLUGINS / HWBACKENDS_DISABLE may name plugins this machine lacks: a
    cluster-wide setting names plugins some nodes do not have, and must not fail their jobs.
    A name that is neither installed nor a known plugin is ignored with a warning (a typo,
    with the close matches); only an allow-list of which nothing is installed is refused,
    because then the setting cannot mean anything here."""
    names = set(installed)
    dists = {s.dist for specs in installed.values() for s in specs}
    known = {k.backend for k in KNOWN_PLUGINS} | {k.distribution for k in KNOWN_PLUGINS}
    out: list[str] = []
    for var, names_listed in (
        ("HWBACKENDS_PLUGINS", settings.allow or frozenset()),
        ("HWBACKENDS_DISABLE", settings.deny),
    ):
        for name in sorted(names_listed):
            if name in names or name in dists or name in known:
                continue
            if normalize_dist_name(name) in dists or normalize_dist_name(name) in known:
                continue
            out.append(
                f"{var} names {name[:60]!r}, which is no installed or known backend"
                f"{close_matches(name, names | known)}; ignored"
            )
    allow = settings.allow
    if allow and not any(
        n in names or n in dists or normalize_dist_name(n) in dists for n in allow
    ):
        raise BackendNotFoundError(
            f"HWBACKENDS_PLUGINS names {', '.join(map(repr, sorted(allow)))[:200]}, "
            f"none of which is installed here{close_matches(sorted(allow)[0], names)}",
            f"at least one installed backend name from {', '.join(sorted(names))}",
            "correct HWBACKENDS_PLUGINS, install the plugin it names, or unset it "
            "(`hwbackends plugins` lists the installed ones)",
        )
    return out
