"""Google Cloud TPUs through TorchTPU (``torch-tpu``, device ``tpu``) or PyTorch/XLA.

Available means: a TPU chip (Google PCI device id of a TPU, or /dev/accel<N> on v2-v4) and
torch-tpu or torch-xla installed; torch-tpu is preferred when both are. Chips are resolved
by ``hwbackends.visibility`` from TPU_VISIBLE_CHIPS and the bounds variables.
"""

from __future__ import annotations

from hwbackends.facts import AcceleratorBackend, ArchFacts, Stack
from hwbackends.plugin import lazy
from hwbackends.visibility import TpuChips

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

__all__ = ["TpuBackend"]
__version__ = "0.1.0"


class TpuBackend(AcceleratorBackend):
    name: ClassVar[str] = "tpu"
    # The plugin API this class was written for; the core refuses it when it speaks another
    # (docs/writing-a-backend.md maps API versions to hwbackends releases).
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "tpu"
    priority: ClassVar[int] = 50
    vendor: ClassVar[str | None] = "google"
    display: ClassVar[str] = "Google TPU"
    pci_vendor_ids: ClassVar[tuple[int, ...]] = (0x1AE0,)
    pci_classes: ClassVar[tuple[int, ...]] = (0x03, 0x12, 0x0B, 0x08, 0x00, 0xFF)
    device_nodes: ClassVar[tuple[str, ...]] = ("accel{n}",)
    device_node_units: ClassVar[tuple[str, ...]] = ("accel{n}",)  # one device per node
    visibility = TpuChips()
    pci_models = lazy("hwbackends_tpu._facts", "PCI_MODELS")
    # Google's vendor id also covers gVNIC and other virtual functions: only TPU ids count.
    only_known_ids: ClassVar[bool] = True
    # /dev/accel<N> on v2-v4 (v5e and later use /dev/vfio/<N>, which any passthrough uses).
    stacks: ClassVar[tuple[Stack, ...]] = lazy("hwbackends_tpu._facts", "STACKS")
    packages: ClassVar[tuple[str, ...]] = ("torch-tpu",)
    software_packages: ClassVar[tuple[str, ...]] = ("torch-tpu", "torch-xla")
    distributed_backend: ClassVar[str] = "tpu_dist"
    install_hint: ClassVar[str] = (
        "install TorchTPU (pip install torch-tpu, see torchtpu.readthedocs.io) or PyTorch/XLA "
        "(pip install torch 'torch_xla[tpu]' with matching versions)"
    )
    hardware_hint: ClassVar[str] = (
        "no TPU chip is visible: run on a TPU VM, check `tpu-info`, and pass /dev/vfio "
        "(v5e and later) or /dev/accel* (v4 and earlier) to the container"
    )
    default_facts: ClassVar[ArchFacts] = lazy("hwbackends_tpu._facts", "BF16")
    limitations = lazy("hwbackends_tpu._facts", "LIMITATIONS")
