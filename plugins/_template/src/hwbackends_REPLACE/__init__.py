"""hwbackends backend for REPLACE_DISPLAY accelerators.

This module is a declaration: every selection imports it, on every machine, so it imports no
vendor SDK, no fact table and not even ``typing`` at run time, and changes nothing. What the
devices can do lives in ``_facts``, imported by the method that answers it.
"""

from __future__ import annotations

from hwbackends.plugin import BaseBackend
from hwbackends.visibility import REPLACE_VISIBILITY_IMPORT

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import ClassVar

    from hwbackends import Capabilities, Device, Host

__all__ = ["REPLACE_CLASSBackend"]

__version__ = "0.1.0"


class REPLACE_CLASSBackend(BaseBackend):
    """REPLACE_DISPLAY: every declaration below is read by the core (see BaseBackend)."""

    name: ClassVar[str] = "REPLACE"
    # The plugin API this class was written for; the core refuses it when it speaks another
    # (docs/writing-a-backend.md maps API versions to hwbackends releases).
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "REPLACE_DEVICE"
    display: ClassVar[str] = "REPLACE_DISPLAY"
    priority: ClassVar[int] = 50
    # The key of these devices in a Host (host files use it too).
    vendor: ClassVar[str | None] = "REPLACE_VENDOR"
    # The PCI functions that are this hardware: Host.from_system reads exactly these.
    pci_vendor_ids: ClassVar[tuple[int, ...]] = REPLACE_PCI_IDS
    # Processing accelerators (0x12); add classes your cards use, never ones your NICs use.
    pci_classes: ClassVar[tuple[int, ...]] = (0x12,)
    # /dev names that show the driver is loaded: {n} stands for digits (REPLACE0, REPLACE1).
    device_nodes: ClassVar[tuple[str, ...]] = ("REPLACE{n}",)
    packages: ClassVar[tuple[str, ...]] = ("REPLACE_PACKAGE",)
    install_hint: ClassVar[str] = "pip install REPLACE_PACKAGE"
    distributed_backend: ClassVar[str] = "gloo"
    # How the runtime reads its visibility variable. Until it is declared no device can be
    # selected alone, and the conformance kit fails: for a CUDA-style list of indices write
    # IndexList("REPLACE_UPPER_VISIBLE_DEVICES"); hwbackends.visibility has the other kinds.
    visibility: ClassVar[VisibilityRule | None] = REPLACE_VISIBILITY

    def capabilities(
        self, device: Device | None = None, *, host: Host | None = None
    ) -> Capabilities:
        from ._facts import capabilities_for  # the facts load when a capability is asked

        return capabilities_for(self, device)
