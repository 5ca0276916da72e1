"""Facts about Moore Threads GPUs under torch_musa, each with its source."""

from __future__ import annotations

from hwbackends.facts import ArchFacts, Stack, flash_attention_2
from hwbackends.plugin import Limitation, common_attention

HF = "docs/reference/hf-integration.md"

STACK = Stack(
    label="torch_musa (Moore Threads PyTorch extension)",
    device_type="musa",
    distributed_backend="mccl",
    packages=("torch-musa",),
    kernel_device=None,
    device_map_auto=True,
    source=(
        "accelerate/transformers is_musa_available: the torch_musa module; accelerate "
        f"state.py: musa -> mccl; get_max_memory has a musa branch ({HF} §3.2, §3.4)"
    ),
)

DEFAULT_FACTS = ArchFacts(
    ("float32", "float16"),
    "fp32",
    "no public per-model table: bf16 is decided at run time by torch.musa.is_bf16_supported() "
    f"(transformers is_torch_bf16_gpu_available) ({HF} §3.5); fp32 is the safe "
    "recommendation",
)

ATTENTION = (
    flash_attention_2(
        packages=("flash-attn",),
        note="needs Moore Threads' build of the flash-attn distribution, version >= 2.3.3",
        source=(
            "transformers utils/import_utils.py is_flash_attn_2_available (flash-attn >= "
            f"2.3.3 and cuda, mlu or musa) ({HF} §1.2)"
        ),
    ),
    *common_attention(),
)

LIMITATIONS = (
    Limitation(
        "Transformers' DistributedConfig has no musa entry in DISTRIBUTED_BACKEND_MAP: call "
        "torch.distributed.init_process_group('mccl') yourself first",
        f"transformers distributed/utils.py ({HF} §5.2)",
    ),
    Limitation(
        "kernels has no musa device key: use_kernels / KernelConfig cannot target MUSA",
        f"kernels layer/repos.py DeviceRepos.create_repo ({HF} §2.3)",
    ),
    Limitation(
        "tf32 on MUSA needs compute capability >= 2.2 (TrainingArguments tf32=True)",
        f"transformers is_torch_tf32_available ({HF} §3.3)",
    ),
    Limitation(
        "MUSA_VISIBLE_DEVICES has no public specification; it is read like "
        "CUDA_VISIBLE_DEVICES (comma list, re-indexed from 0)",
        "docs/reference/visibility.md §8 (inferred)",
    ),
)

#: The stacks in order of preference (the backend's ``stacks`` declaration).
STACKS = (STACK,)
