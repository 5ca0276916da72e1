"""AWS Trainium and Inferentia (Neuron) through torch-neuronx.

Available means: a Neuron device (PCI id of the Neuron driver, or /dev/neuron<N>) and a
torch-neuronx stack that supports its generation: the native TorchNeuron backend (device
``neuron``, Trn2/Trn3) or the XLA-based torch-neuronx with torch-xla (device ``xla``, Trn1,
Inf2, Trn2). Devices are NeuronCores, resolved by ``hwbackends.visibility`` from
NEURON_RT_VISIBLE_CORES, NEURON_RT_NUM_CORES and NEURON_LOGICAL_NC_CONFIG.
"""

from __future__ import annotations

from hwbackends.facts import AcceleratorBackend, ArchFacts, Stack
from hwbackends.plugin import lazy
from hwbackends.visibility import NeuronCores

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

__all__ = ["NeuronBackend"]
__version__ = "0.1.0"


class NeuronBackend(AcceleratorBackend):
    name: ClassVar[str] = "neuron"
    # The plugin API this class was written for; the core refuses it when it speaks another
    # (docs/writing-a-backend.md maps API versions to hwbackends releases).
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "neuron"
    priority: ClassVar[int] = 50
    vendor: ClassVar[str | None] = "aws"
    display: ClassVar[str] = "AWS Neuron"
    pci_vendor_ids: ClassVar[tuple[int, ...]] = (0x1D0F,)
    pci_classes: ClassVar[tuple[int, ...]] = (0x03, 0x12, 0x0B, 0x08, 0x00, 0xFF)
    device_nodes: ClassVar[tuple[str, ...]] = ("neuron{n}",)
    device_node_units: ClassVar[tuple[str, ...]] = ("neuron{n}",)  # one device per node
    driver_modules: ClassVar[tuple[str, ...]] = ("neuron",)
    visibility = NeuronCores()
    pci_models = lazy("hwbackends_neuron._facts", "PCI_MODELS")
    # Amazon's vendor id also covers the EC2 VGA function, ENA and NVMe: only the Neuron
    # driver's device ids count.
    only_known_ids: ClassVar[bool] = True
    # XLA first: where torch-xla is installed next to torch-neuronx, that stack is in use.
    stacks: ClassVar[tuple[Stack, ...]] = lazy("hwbackends_neuron._facts", "STACKS")
    packages: ClassVar[tuple[str, ...]] = ("torch-neuronx",)
    distributed_backend: ClassVar[str] = "neuron"
    install_hint: ClassVar[str] = (
        "install torch-neuronx from the Neuron pip repository "
        "(--extra-index-url https://pip.repos.neuron.amazonaws.com): the TorchNeuron family "
        "matching your torch (e.g. torch-neuronx==2.13.* for torch 2.13) on Trn2/Trn3, or the "
        "XLA-based torch-neuronx with torch-xla (Neuron SDK <= 2.31) on Trn1/Inf2"
    )
    hardware_hint: ClassVar[str] = (
        "no Neuron device is visible: run on a trn1/trn2/trn3/inf2 instance, check "
        "`neuron-ls` and the aws-neuronx-dkms driver, and pass /dev/neuron* to the container"
    )
    arch_facts = lazy("hwbackends_neuron._facts", "ARCH_FACTS")
    default_facts: ClassVar[ArchFacts] = lazy("hwbackends_neuron._facts", "DEFAULT_FACTS")
    limitations = lazy("hwbackends_neuron._facts", "LIMITATIONS")
