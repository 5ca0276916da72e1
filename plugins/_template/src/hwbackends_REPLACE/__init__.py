"""hwbackends backend for REPLACE_DISPLAY accelerators.

This module is a declaration: every selection imports it, on every machine, so
it imports no vendor SDK, no fact table and not even ``typing`` at run time, and
changes nothing. What the devices can do lives in ``_facts``, imported by the
method that answers it.
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
    """REPLACE_DISPLAY: every declaration below is read by the core."""

    name: ClassVar[str] = "REPLACE"
    # The plugin API this class was written for: the core refuses it when it speaks
    # another ("Plugin API versions" in the hwbackends docs maps them to releases).
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "REPLACE_DEVICE"
    display: ClassVar[str] = "REPLACE_DISPLAY"
    priority: ClassVar[int] = 50
    # The key of these devices in a Host (host files use it too).
    vendor: ClassVar[str | None] = "REPLACE_VENDOR"
    # The PCI functions that are this hardware: Host.from_system reads these.
    pci_vendor_ids: ClassVar[tuple[int, ...]] = REPLACE_PCI_IDS
    # Processing accelerators (0x12); add your cards' classes, never your NICs'.
    pci_classes: ClassVar[tuple[int, ...]] = (0x12,)
    # /dev names that show the driver is loaded: {n} stands for digits.
    device_nodes: ClassVar[tuple[str, ...]] = ("REPLACE{n}",)
    # Kernel modules whose /sys/module/<m>/version is the driver version
    # (Host.drivers); empty when the driver publishes no version there.
    driver_modules: ClassVar[tuple[str, ...]] = ()
    packages: ClassVar[tuple[str, ...]] = ("REPLACE_PACKAGE",)
    install_hint: ClassVar[str] = "pip install REPLACE_PACKAGE"
    # A torch of the vendor's own (device type "cuda" on a CUDA-compatible card): claim
    # its builds by their local version tag, ("corex",) for 2.4.1+corex.4.3.0, so that
    # the stock backend of the same device type steps aside on it; () for an extension
    # beside a stock torch.
    torch_builds: ClassVar[tuple[str, ...]] = ()
    # Where the torch comes from: None (PyTorch's index for torch_flavour), a wheel
    # index URL, the vendor's instructions as text, or TORCH_PREINSTALLED.
    torch_source: ClassVar[str | None] = None
    # The Slurm GRES the devices are scheduled as ("gpu", another name), or None.
    slurm_gres: ClassVar[str | None] = None
    distributed_backend: ClassVar[str] = "gloo"
    # How the runtime reads its visibility variable. Until it is declared no
    # device can be selected alone, and the conformance kit fails. A CUDA-style
    # list of indices: IndexList("<NAME>_VISIBLE_DEVICES"); with UUIDs too:
    # IndexOrUuidList(variable, "PREFIX-"). Their policies and the other kinds
    # are in hwbackends.visibility.
    visibility: ClassVar[VisibilityRule | None] = REPLACE_VISIBILITY

    def capabilities(
        self, device: Device | None = None, *, host: Host | None = None
    ) -> Capabilities:
        # the facts load when a capability is asked, not at import
        from ._facts import capabilities_for

        return capabilities_for(self, device)
