"""Moore Threads GPUs (MTT S-series) through torch_musa.

Available means: a Moore Threads GPU (PCI vendor 0x1ed5) and torch-musa installed. Devices
are resolved by ``hwbackends.visibility`` from MUSA_VISIBLE_DEVICES.
"""

from __future__ import annotations

from hwbackends.facts import AcceleratorBackend, ArchFacts, Stack
from hwbackends.plugin import AttentionOption, lazy
from hwbackends.visibility import IndexList

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

__all__ = ["MusaBackend"]
__version__ = "0.1.0"


class MusaBackend(AcceleratorBackend):
    name: ClassVar[str] = "musa"
    # The plugin API this class was written for; the core refuses it when it speaks another
    # (docs/writing-a-backend.md maps API versions to hwbackends releases).
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "musa"
    priority: ClassVar[int] = 50
    vendor: ClassVar[str | None] = "mthreads"
    display: ClassVar[str] = "Moore Threads GPU"
    pci_vendor_ids: ClassVar[tuple[int, ...]] = (0x1ED5,)
    pci_classes: ClassVar[tuple[int, ...]] = (0x03, 0x12, 0x0B, 0x08, 0x00, 0xFF)
    driver_modules: ClassVar[tuple[str, ...]] = ("mtgpu",)
    visibility = IndexList(
        "MUSA_VISIBLE_DEVICES",
        inferred=True,
        empty_means_none=False,
        source="no vendor specification; inferred from vendor examples",
    )
    stacks: ClassVar[tuple[Stack, ...]] = lazy("hwbackends_musa._facts", "STACKS")
    packages: ClassVar[tuple[str, ...]] = ("torch-musa",)
    distributed_backend: ClassVar[str] = "mccl"
    install_hint: ClassVar[str] = (
        "install the Moore Threads driver and MUSA toolkit, then the torch_musa wheel built "
        "for your torch version (or a Moore Threads PyTorch image)"
    )
    hardware_hint: ClassVar[str] = (
        "no Moore Threads GPU is visible: check `mthreads-gmi`, the mtgpu driver, and that "
        "the container runtime exposes the GPUs"
    )
    default_facts: ClassVar[ArchFacts] = lazy("hwbackends_musa._facts", "DEFAULT_FACTS")
    attention: ClassVar[tuple[AttentionOption, ...]] = lazy("hwbackends_musa._facts", "ATTENTION")
    limitations = lazy("hwbackends_musa._facts", "LIMITATIONS")
