"""Facts about Huawei Ascend NPUs under torch_npu, each with its source."""

from __future__ import annotations

from hwbackends.facts import ArchFacts, PciModel, Stack, flash_attention_2
from hwbackends.plugin import Limitation, common_attention

HF = "docs/reference/hf-integration.md"

# PCI device ids (vendor 0x19e5), from Huawei's own tooling: the Ascend log collector script
# (PCIE_BDF_310=19e5:d100, _310P=d500, _910=d801, _910B=d802, _910_93=d803) and msit's NpuType
# enum (d100 Atlas 300, d500 300I Duo, d801 800I A1, d802 800I A2, d803 800I A3).
_IDS = "Huawei Ascend tooling: ascend log collector PCIE_BDF_* and msit NpuType (19e5:dXXX)"
PCI_MODELS: dict[str, PciModel] = {
    "0xd100": PciModel("Huawei Ascend 310", "ascend310", _IDS),
    "0xd500": PciModel("Huawei Ascend 310P", "ascend310p", _IDS),
    "0xd801": PciModel("Huawei Ascend 910", "ascend910", _IDS),
    "0xd802": PciModel("Huawei Ascend 910B", "ascend910b", _IDS),
    "0xd803": PciModel("Huawei Ascend 910C (910_93)", "ascend910_93", _IDS),
}

STACK = Stack(
    label="torch_npu (Ascend Extension for PyTorch)",
    device_type="npu",
    distributed_backend="hccl",
    packages=("torch-npu",),
    torch_matches="torch-npu",
    kernel_device="npu",
    device_map_auto=True,
    limitations=(
        Limitation(
            "Transformers' DistributedConfig has no npu entry in DISTRIBUTED_BACKEND_MAP: call "
            "torch.distributed.init_process_group('hccl') yourself before from_pretrained "
            "with tp_size/fsdp_size",
            f"transformers distributed/utils.py ({HF} §5.2)",
        ),
    ),
    source=(
        "accelerate/transformers is_npu_available: the torch_npu module; accelerate state.py "
        f"npu -> hccl, get_max_memory has an npu branch ({HF} §3.2, §3.4); torch_npu releases "
        "follow torch (torch-npu 2.x.y for torch 2.x.y)"
    ),
)

# torch_npu csrc/core/npu/NpuVariables.cpp: IsBF16Supported() is SocVersion >= Ascend910B1,
# so the first-generation 910 and the 310 inference chips have no bf16.
_NPU_VARS = "Ascend/pytorch torch_npu/csrc/core/npu/NpuVariables.cpp IsBF16Supported"
BF16 = ArchFacts(
    ("float32", "bfloat16", "float16"),
    "bf16",
    f"{_NPU_VARS}: bf16 from Ascend910B on; transformers is_torch_bf16_gpu_available -> "
    "torch.npu.is_bf16_supported()",
)
FP16 = ArchFacts(
    ("float32", "float16"),
    "fp16",
    f"{_NPU_VARS}: no bf16 before Ascend910B; fp16 mixed precision instead",
)
ARCH_FACTS = {
    "ascend910b": BF16,
    "ascend910_93": BF16,
    "ascend910": FP16,
    "ascend310p": FP16,
    "ascend310": FP16,
}
DEFAULT_FACTS = ArchFacts(
    ("float32", "float16"),
    "fp16",
    f"chip unknown: fp16 works on every Ascend; bf16 only from Ascend910B ({_NPU_VARS})",
)

FA2 = flash_attention_2(
    packages=("torch-npu",),
    note="torch_npu.npu_fusion_attention through transformers' npu_flash_attention; the "
    "causal mask alignment follows NPU_FA2_SPARSE_MODE (3 = bottom-right, default; 2 = "
    "top-left)",
    source=(
        "transformers integrations/npu_flash_attention.py and FLASH_ATTENTION_COMPATIBILITY_"
        f"MATRIX[2] custom_supported_devices (npu) ({HF} §1.2)"
    ),
)
# Offered on the Atlas A2/A3 training chips; on the others it is not claimed here.
FA2_ARCHS = frozenset({"ascend910b", "ascend910_93"})
ATTENTION_FA2 = (FA2, *common_attention())

LIMITATIONS = (
    Limitation(
        "the flash-attention hub-kernel fallback is disabled on NPU (Transformers checks "
        "not is_torch_npu_available()); FA2 always goes through torch_npu",
        f"transformers modeling_utils _check_and_adjust_attn_implementation ({HF} §1.1)",
    ),
    Limitation(
        "ASCEND_RT_VISIBLE_DEVICES takes logical ids in ascending order only; inside a "
        "container restricted by ASCEND_VISIBLE_DEVICES the ids are container-local",
        "docs/reference/visibility.md §6",
    ),
)
INFERENCE_ONLY = Limitation(
    "Ascend 310/310P are inference chips: no training recommendation applies",
    _IDS,
)

#: The stacks in order of preference (the backend's ``stacks`` declaration).
STACKS = (STACK,)
