"""Huawei Ascend NPUs through torch_npu (Ascend Extension for PyTorch).

Available means: an Ascend NPU (Huawei PCI id of an Ascend chip, or /dev/davinci<N>) and
torch-npu installed for the installed torch. Devices are resolved by
``hwbackends.visibility`` from ASCEND_RT_VISIBLE_DEVICES.
"""

from __future__ import annotations

from hwbackends.facts import AcceleratorBackend, ArchFacts, Stack
from hwbackends.plugin import AttentionOption, Capabilities, Device, lazy, replace
from hwbackends.visibility import AscendDevices

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

    from hwbackends import Host

__all__ = ["NpuBackend"]
__version__ = "0.1.0"


class NpuBackend(AcceleratorBackend):
    name: ClassVar[str] = "npu"
    # The plugin API this class was written for; the core refuses it when it speaks another
    # (docs/writing-a-backend.md maps API versions to hwbackends releases).
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "npu"
    priority: ClassVar[int] = 50
    vendor: ClassVar[str | None] = "huawei"
    display: ClassVar[str] = "Huawei Ascend"
    pci_vendor_ids: ClassVar[tuple[int, ...]] = (0x19E5,)
    pci_classes: ClassVar[tuple[int, ...]] = (0x03, 0x12, 0x0B, 0x08, 0x00, 0xFF)
    device_nodes: ClassVar[tuple[str, ...]] = ("davinci{n}",)
    device_node_units: ClassVar[tuple[str, ...]] = ("davinci{n}",)  # one device per node
    driver_modules: ClassVar[tuple[str, ...]] = ("drv_pcie_host",)
    visibility = AscendDevices()
    pci_models = lazy("hwbackends_npu._facts", "PCI_MODELS")
    # Huawei's vendor id also covers HiSilicon NICs, SAS, ZIP/SEC/HPRE engines and DMA on
    # Kunpeng hosts (some in the accelerator class): only Ascend ids count.
    only_known_ids: ClassVar[bool] = True
    stacks: ClassVar[tuple[Stack, ...]] = lazy("hwbackends_npu._facts", "STACKS")
    packages: ClassVar[tuple[str, ...]] = ("torch-npu",)
    distributed_backend: ClassVar[str] = "hccl"
    install_hint: ClassVar[str] = (
        "install the Ascend driver and CANN toolkit, then pip install torch-npu matching your "
        "torch version (e.g. torch 2.5.1 -> torch-npu 2.5.1)"
    )
    hardware_hint: ClassVar[str] = (
        "no Ascend NPU is visible: check `npu-smi info`, the Ascend driver, and that "
        "/dev/davinci* are mounted in the container (ASCEND_VISIBLE_DEVICES)"
    )
    arch_facts = lazy("hwbackends_npu._facts", "ARCH_FACTS")
    default_facts: ClassVar[ArchFacts] = lazy("hwbackends_npu._facts", "DEFAULT_FACTS")
    limitations = lazy("hwbackends_npu._facts", "LIMITATIONS")

    def attention_for(self, arch: str | None, stack: Stack) -> tuple[AttentionOption, ...]:
        from . import _facts

        return _facts.ATTENTION_FA2 if arch in _facts.FA2_ARCHS else self.attention

    def capabilities(
        self, device: Device | None = None, *, host: Host | None = None
    ) -> Capabilities:
        from . import _facts

        caps = super().capabilities(device, host=host)
        if caps.arch in ("ascend310", "ascend310p"):
            return replace(caps, limitations=(*caps.limitations, _facts.INFERENCE_ONLY))
        return caps
