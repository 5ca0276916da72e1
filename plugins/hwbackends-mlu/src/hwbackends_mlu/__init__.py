"""Cambricon MLUs through torch_mlu.

Available means: a Cambricon device (PCI vendor 0xcabc, or /dev/cambricon_dev<N>) and
torch-mlu installed. Devices are resolved by ``hwbackends.visibility`` from
MLU_VISIBLE_DEVICES.
"""

from __future__ import annotations

from hwbackends.facts import AcceleratorBackend, ArchFacts, Stack
from hwbackends.plugin import AttentionOption, lazy
from hwbackends.visibility import IndexList

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

__all__ = ["MluBackend"]
__version__ = "0.1.0"


class MluBackend(AcceleratorBackend):
    name: ClassVar[str] = "mlu"
    # The plugin API this class was written for; the core refuses it when it speaks another
    # (docs/writing-a-backend.md maps API versions to hwbackends releases).
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "mlu"
    priority: ClassVar[int] = 50
    vendor: ClassVar[str | None] = "cambricon"
    display: ClassVar[str] = "Cambricon MLU"
    pci_vendor_ids: ClassVar[tuple[int, ...]] = (0xCABC,)
    pci_classes: ClassVar[tuple[int, ...]] = (0x03, 0x12, 0x0B, 0x08, 0x00, 0xFF)
    device_nodes: ClassVar[tuple[str, ...]] = ("cambricon_dev{n}",)
    device_node_units: ClassVar[tuple[str, ...]] = ("cambricon_dev{n}",)  # one device per node
    driver_modules: ClassVar[tuple[str, ...]] = ("cambricon_drv",)
    visibility = IndexList(
        "MLU_VISIBLE_DEVICES",
        inferred=True,
        empty_means_none=False,
        source="no vendor specification; inferred from vendor examples",
    )
    stacks: ClassVar[tuple[Stack, ...]] = lazy("hwbackends_mlu._facts", "STACKS")
    packages: ClassVar[tuple[str, ...]] = ("torch-mlu",)
    distributed_backend: ClassVar[str] = "cncl"
    install_hint: ClassVar[str] = (
        "install the Cambricon driver and Neuware SDK, then the torch_mlu wheel built for "
        "your torch version from Cambricon's developer portal (or a Cambricon PyTorch image)"
    )
    hardware_hint: ClassVar[str] = (
        "no Cambricon MLU is visible: check `cnmon`, the cambricon driver, and that "
        "/dev/cambricon_dev* are mounted in the container"
    )
    default_facts: ClassVar[ArchFacts] = lazy("hwbackends_mlu._facts", "DEFAULT_FACTS")
    attention: ClassVar[tuple[AttentionOption, ...]] = lazy("hwbackends_mlu._facts", "ATTENTION")
    limitations = lazy("hwbackends_mlu._facts", "LIMITATIONS")
