"""Facts about AWS Trainium and Inferentia (Neuron), each with its source."""

from __future__ import annotations

from hwbackends.facts import ArchFacts, PciModel, Stack
from hwbackends.plugin import Limitation

HF = "docs/reference/hf-integration.md"

# aws-neuron/aws-neuron-driver neuron_device.h / neuron_pci.c: the driver's PCI id table
# (vendor 0x1d0f). Trn1 and Inf2 share NeuronCore-v2, Trn2 is v3, Trn3 is v4.
_DRV = "aws-neuron/aws-neuron-driver neuron_device.h (PCI ids) and neuron_pci.c (arch)"
PCI_MODELS: dict[str, PciModel] = {
    **{
        did: PciModel("AWS Inferentia", "inf1", _DRV)
        for did in ("0x7064", "0x7065", "0x7066", "0x7067")
    },
    "0x7164": PciModel("AWS Trainium", "trn1", _DRV),
    "0x7264": PciModel("AWS Inferentia2", "inf2", _DRV),
    "0x7364": PciModel("AWS Trainium2", "trn2", _DRV),
    "0x7564": PciModel("AWS Trainium3", "trn3", _DRV),
    "0x7565": PciModel("AWS Trainium3", "trn3", _DRV),
}

_EXPLICIT = Limitation(
    "Accelerate's device_map='auto' cannot see Neuron devices (get_max_memory has no neuron "
    "or xla branch): load with an explicit device",
    f"accelerate utils/modeling.py get_max_memory ({HF} §3.1, §3.2)",
)

# The XLA-based torch-neuronx (NeuronCore-v2 and v3: Trn1, Inf2, Trn2) drives the cores
# through torch-xla: the device is "xla" and collectives go through XLA.
XLA_STACK = Stack(
    label="torch-neuronx (XLA-based) with torch-xla",
    device_type="xla",
    distributed_backend="xla",
    packages=("torch-neuronx", "torch-xla"),
    torch_matches="torch-xla",
    archs=frozenset({"trn1", "inf2", "trn2"}),
    kernel_device=None,
    device_map_auto=False,
    limitations=(
        _EXPLICIT,
        Limitation(
            "under torch-xla the device is 'xla'; kernels has no variant for it (its Neuron "
            "backend needs the native torch.neuron)",
            f"kernels backends.py _backend() ({HF} §2.3)",
        ),
    ),
    source=(
        "awsdocs-neuron frameworks/torch/index: torch-neuronx is the XLA-based integration "
        "for NeuronCore-v2 (Trn1, Trn2, Inf2), not shipped from Neuron 2.32 on; accelerate "
        f"state.py: torch_xla -> backend xla ({HF} §3.4)"
    ),
)

# TorchNeuron: the native PrivateUse1 backend in torch-neuronx from Neuron 2.33 (public beta,
# Trn2 and Trn3 only). Its package family follows torch: torch-neuronx 2.13.* for torch 2.13.
NATIVE_STACK = Stack(
    label="torch-neuronx (TorchNeuron native backend)",
    device_type="neuron",
    distributed_backend="neuron",
    packages=("torch-neuronx",),
    torch_matches="torch-neuronx",
    archs=frozenset({"trn2", "trn3"}),
    kernel_device="neuron",
    device_map_auto=False,
    limitations=(_EXPLICIT,),
    source=(
        "awsdocs-neuron torch/about-pytorch-neuron: TorchNeuron registers the 'neuron' device "
        "through PrivateUse1, beta on Trn2/Trn3; aws-neuron/torch-neuronx release v2.33.0 "
        "(package family matches the torch version); accelerate state.py and transformers "
        f"distributed/utils.py: neuron -> backend 'neuron' ({HF} §3.4, §5.2)"
    ),
)

_BF16 = ArchFacts(
    ("float32", "bfloat16", "float16"),
    "bf16",
    "NeuronCore-v2/v3 compute natively in bf16; transformers is_torch_bf16_gpu_available -> "
    f"torch.neuron.is_bf16_supported() ({HF} §3.5)",
)
ARCH_FACTS = {"trn1": _BF16, "inf2": _BF16, "trn2": _BF16, "trn3": _BF16}
DEFAULT_FACTS = _BF16

LIMITATIONS = (
    Limitation(
        "Accelerate refuses fp16 mixed precision on Neuron (its fp16 device list excludes "
        "neuron); train in bf16",
        f"accelerate accelerator.py mixed_precision checks ({HF} §3.5)",
    ),
    Limitation(
        "TrainingArguments' --ddp_backend choices lack 'neuron'; leave ddp_backend unset and "
        "Accelerate picks it",
        f"transformers training_args.py ({HF} §3.3)",
    ),
    Limitation(
        "each device is one NeuronCore (a logical core under NEURON_LOGICAL_NC_CONFIG=2 on "
        "Trn2/Trn3), and a core reserved by one process cannot be used by another",
        "docs/reference/visibility.md §3",
    ),
)

#: The stacks in order of preference (the backend's ``stacks`` declaration).
STACKS = (XLA_STACK, NATIVE_STACK)
