"""Intel Gaudi accelerators (HPU) through the Intel Gaudi PyTorch bridge.

Available means: a Gaudi device (Habana PCI id, or /dev/hl<N>) and habana-torch-plugin
installed. Devices are listed in module-id order and resolved by ``hwbackends.visibility``
from HABANA_VISIBLE_MODULES.
"""

from __future__ import annotations

from hwbackends.facts import AcceleratorBackend, ArchFacts, Stack
from hwbackends.plugin import lazy
from hwbackends.visibility import GaudiModules

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

__all__ = ["HpuBackend"]
__version__ = "0.1.0"


class HpuBackend(AcceleratorBackend):
    name: ClassVar[str] = "hpu"
    # The plugin API this class was written for; the core refuses it when it speaks another
    # (docs/writing-a-backend.md maps API versions to hwbackends releases).
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "hpu"
    priority: ClassVar[int] = 50
    vendor: ClassVar[str | None] = "habana"
    display: ClassVar[str] = "Intel Gaudi"
    pci_vendor_ids: ClassVar[tuple[int, ...]] = (0x1DA3,)
    pci_classes: ClassVar[tuple[int, ...]] = (0x03, 0x12, 0x0B, 0x08, 0x00, 0xFF)
    device_nodes: ClassVar[tuple[str, ...]] = ("hl{n}",)
    device_node_units: ClassVar[tuple[str, ...]] = ("hl{n}",)  # one device per node
    driver_modules: ClassVar[tuple[str, ...]] = ("habanalabs",)
    visibility = GaudiModules()
    pci_models = lazy("hwbackends_hpu._facts", "PCI_MODELS")
    stacks: ClassVar[tuple[Stack, ...]] = lazy("hwbackends_hpu._facts", "STACKS")
    packages: ClassVar[tuple[str, ...]] = ("habana-torch-plugin",)
    distributed_backend: ClassVar[str] = "hccl"
    install_hint: ClassVar[str] = (
        "install the Intel Gaudi software (habanalabs driver, then the PyTorch packages "
        "torch + habana-torch-plugin from vault.habana.ai, e.g. with habanalabs-installer.sh "
        "install --type pytorch), or use an Intel Gaudi PyTorch container"
    )
    hardware_hint: ClassVar[str] = (
        "no Gaudi device is visible: check `hl-smi`, the habanalabs driver, and that the "
        "container runtime exposes the modules (HABANA_VISIBLE_DEVICES)"
    )
    # The current installer's support matrix lists Gaudi 2 and 3 only; 1.21 is the last release
    # whose matrix lists first-gen Gaudi (docs.habana.ai Support_Matrix/Support_Matrix_v1.21.0
    # and Support_Matrix_v1.22.0, "Supported Configurations and Components")
    gaudi1_install_hint: ClassVar[str] = (
        "first-gen Gaudi needs Intel Gaudi software 1.21 or earlier (1.21 is the last release "
        "that supports it; 1.22 and later support Gaudi 2 and Gaudi 3 only): install the 1.21 "
        "habanalabs driver and PyTorch packages (the 1.21 habanalabs-installer.sh install "
        "--type pytorch), or use an Intel Gaudi 1.21 PyTorch container"
    )
    arch_facts = lazy("hwbackends_hpu._facts", "ARCH_FACTS")
    default_facts: ClassVar[ArchFacts] = lazy("hwbackends_hpu._facts", "DEFAULT_FACTS")
    limitations = lazy("hwbackends_hpu._facts", "LIMITATIONS")

    def install_hint_for(self, archs: frozenset[str]) -> str:
        return self.gaudi1_install_hint if "gaudi1" in archs else self.install_hint
