"""Whether torch will know a backend's device type: its own types, and device-backend autoload.

Torch parses a device string (``torch.device("tt:0")``, a ``device_map``) against the device
types it was built with; any other name exists only once an out-of-tree extension has
registered it (``torch.utils.rename_privateuse1_backend``), which happens when the extension is
imported. Since torch 2.5 an extension can have torch import it at ``import torch``: torch
loads and calls every ``torch.backends`` entry point (torch 2.13 ``torch/__init__.py``
``_import_device_backends``, RFC pytorch/pytorch#122468) unless ``TORCH_DEVICE_BACKEND_AUTOLOAD``
is set to anything but ``1`` (``_is_device_backend_autoload_enabled``). Both facts are read
here from files, never by importing torch or the extension.
"""

from __future__ import annotations

import os

from hwbackends._base.files import _read_text
from hwbackends._discovery.dists import iter_dist_infos
from hwbackends._discovery.entry_points import parse_entry_points

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["AUTOLOAD_GROUP", "TORCH_DEVICE_TYPES", "autoload_entry_points"]

#: The entry-point group torch imports at start-up.
AUTOLOAD_GROUP = "torch.backends"
#: The device types torch itself parses: torch 2.13's ``torch.device("tt")`` error, "Expected one
#: of cpu, cuda, ipu, ... privateuseone device type" (c10/core/Device.cpp ``parse_type``);
#: ``privateuseone`` is the slot an extension renames.
TORCH_DEVICE_TYPES = frozenset(
    ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga",
     "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")
)  # fmt: skip


def autoload_entry_points(path: Iterable[str]) -> list[tuple[str, str]]:
    """``(distribution, entry point)`` of every installed distribution that declares a
    ``torch.backends`` entry point, read from its ``entry_points.txt``."""
    out: list[tuple[str, str]] = []
    for norm, _version, info in iter_dist_infos(path):
        text = _read_text(os.path.join(info, "entry_points.txt"), 1 << 16) or ""
        if f"[{AUTOLOAD_GROUP}]" in text:
            out += [(norm, f"{n} = {v}") for n, v in parse_entry_points(text, AUTOLOAD_GROUP)]
    return out
