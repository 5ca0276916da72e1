"""The one vendor list in the core: known plugin distributions and the hardware they serve.

Used only to say which plugin to install when hardware is found that no installed backend
claims (fsspec's ``known_implementations`` plays the same part for filesystems). Selection,
host reading and visibility never depend on it: an installed backend's own declarations are
what count, and a vendor's plugin missing from this list works exactly as well.
"""

from __future__ import annotations

import os

__all__ = ["KNOWN_PLUGINS", "KnownPlugin", "install_command", "known_for"]


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


def install_command(distribution: str, checkout: str | None) -> tuple[str, str]:
    """``(command, which)``: the pip line that installs a plugin, and where it comes from.

    From a checkout of the hwbackends repository (the core was installed from a local path
    that holds ``plugins/<distribution>``) that is the local path; otherwise the package name,
    for a published release.
    """
    if checkout is not None:
        local = os.path.join(checkout, "plugins", distribution)
        if os.path.isfile(os.path.join(local, "pyproject.toml")):
            return f"pip install {local}", "from this checkout"
    return f"pip install {distribution}", "published package"


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
