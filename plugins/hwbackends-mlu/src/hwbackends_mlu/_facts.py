"""Facts about Cambricon MLUs under torch_mlu, each with its source."""

from __future__ import annotations

from hwbackends.facts import ArchFacts, Stack, flash_attention_2
from hwbackends.plugin import Limitation, common_attention

HF = "docs/reference/hf-integration.md"

STACK = Stack(
    label="torch_mlu (Cambricon PyTorch extension)",
    device_type="mlu",
    distributed_backend="cncl",
    packages=("torch-mlu",),
    kernel_device=None,
    device_map_auto=True,
    source=(
        "accelerate/transformers is_mlu_available: the torch_mlu module (checked through "
        "cndev, PYTORCH_CNDEV_BASED_MLU_CHECK=1); accelerate state.py: mlu -> cncl; "
        f"get_max_memory has an mlu branch ({HF} §3.2, §3.4)"
    ),
)

DEFAULT_FACTS = ArchFacts(
    ("float32", "float16"),
    "fp32",
    "no public per-model table: bf16 is decided at run time by torch.mlu.is_bf16_supported() "
    f"(transformers is_torch_bf16_gpu_available, accelerate is_bf16_available) ({HF} §3.5); "
    "fp32 is the safe recommendation",
)

ATTENTION = (
    flash_attention_2(
        packages=("flash-attn",),
        note="needs Cambricon's build of the flash-attn distribution, version >= 2.3.3",
        source=(
            "transformers utils/import_utils.py is_flash_attn_2_available (flash-attn >= "
            f"2.3.3 and cuda, mlu or musa) ({HF} §1.2)"
        ),
    ),
    *common_attention(),
)

LIMITATIONS = (
    Limitation(
        "Transformers' DistributedConfig has no mlu entry in DISTRIBUTED_BACKEND_MAP: call "
        "torch.distributed.init_process_group('cncl') yourself first",
        f"transformers distributed/utils.py ({HF} §5.2)",
    ),
    Limitation(
        "kernels has no mlu device key: use_kernels / KernelConfig cannot target MLUs",
        f"kernels layer/repos.py DeviceRepos.create_repo ({HF} §2.3)",
    ),
    Limitation(
        "MLU_VISIBLE_DEVICES has no public specification; it is read like "
        "CUDA_VISIBLE_DEVICES (comma list, re-indexed from 0)",
        "docs/reference/visibility.md §8 (inferred)",
    ),
)

#: The stacks in order of preference (the backend's ``stacks`` declaration).
STACKS = (STACK,)
