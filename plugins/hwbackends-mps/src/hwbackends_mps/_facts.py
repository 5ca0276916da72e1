"""Facts about Apple Silicon GPUs under PyTorch's MPS backend, each with its source."""

from __future__ import annotations

from hwbackends.facts import ArchFacts, hub_kernel_attention
from hwbackends.plugin import Limitation, QuantSupport, common_attention

HF = "docs/reference/hf-integration.md"

#: PyTorch's MPS backend needs macOS 12.3 or later (pytorch docs, notes/mps.rst).
MIN_MACOS = "12.3"
#: Transformers: bf16 on MPS is torch.backends.mps.is_macos_or_newer(14, 0).
BF16_MACOS = "14.0"
#: Accelerate: bf16 mixed precision on MPS needs torch >= 2.6, fp16 needs torch >= 2.5.
BF16_TORCH = "2.6"


BF16 = ArchFacts(
    ("float32", "float16", "bfloat16"),
    "bf16",
    f"macOS >= {BF16_MACOS} (transformers is_torch_bf16_gpu_available) and torch >= "
    f"{BF16_TORCH} (accelerate Accelerator bf16 on MPS) ({HF} §3.5)",
)
NO_BF16 = ArchFacts(
    ("float32", "float16"),
    "fp32",
    f"bf16 on MPS needs macOS >= {BF16_MACOS} and torch >= {BF16_TORCH} ({HF} §3.5); fp16 "
    "mixed precision is possible with torch >= 2.5 but not recommended for training",
)
UNKNOWN_MACOS = ArchFacts(
    ("float32", "float16"),
    "fp32",
    f"the macOS version is unknown (the host gives none); bf16 needs macOS >= {BF16_MACOS} "
    f"and torch >= {BF16_TORCH} ({HF} §3.5)",
)

ATTENTION = (
    common_attention()[0],
    hub_kernel_attention(
        "kernels-community/metal-flash-sdpa",
        note="Metal flash SDPA hub kernel; Transformers does not map flash_attention_2 to it, "
        "it is used by name (or by models that list it as compatible)",
        source=(
            "transformers modeling_flash_attention_utils.py FLASH_ATTN_KERNEL_DEVICES "
            f"(metal-flash-sdpa: mps) and FLASH_ATTN_KERNEL_VERSIONS (2) ({HF} §1.3)"
        ),
    ),
    common_attention()[1],
)

_DOCS = f"transformers docs quantization/overview.md table, Metal column ({HF} §4.1)"
QUANTIZATION = (
    QuantSupport(
        "bitsandbytes", "partial", "docs table: Metal partial", _DOCS, packages=("bitsandbytes",)
    ),
    QuantSupport(
        "gptq",
        "supported",
        "docs table (GPTQModel): Metal supported",
        _DOCS,
        packages=("optimum", "gptqmodel"),
    ),
    QuantSupport(
        "quanto",
        "supported",
        "docs table (optimum-quanto): Metal supported",
        _DOCS,
        packages=("optimum-quanto",),
    ),
    QuantSupport(
        "torchao",
        "partial",
        "docs table: Metal int4 weight-only only",
        _DOCS,
        packages=("torchao",),
    ),
    QuantSupport("gguf", "supported", "docs table: Metal supported", _DOCS, packages=("gguf",)),
    QuantSupport(
        "metal",
        "partial",
        "the metal quantizer needs MPS and a compatible kernels",
        f"transformers quantizer_metal.py ({HF} §4.2)",
        packages=("kernels",),
    ),
)

LIMITATIONS = (
    Limitation(
        "one GPU per machine, no collective backend: multi-process training runs over gloo "
        "on the CPU, and Transformers' tensor parallelism raises RuntimeError on mps",
        f"transformers distributed/utils.py ({HF} §5.2)",
    ),
    Limitation(
        "Accelerate sets PYTORCH_ENABLE_MPS_FALLBACK=1: ops MPS lacks run on the CPU (slowly) "
        "instead of failing",
        f"accelerate state.py default_device ({HF} §3.4)",
    ),
    Limitation(
        "Intel Macs with AMD GPUs can also run MPS; the host reader only reports Apple "
        "Silicon, so this plugin covers arm64 Macs only",
        "hwbackends _host.py: the apple device is added on Darwin/arm64",
    ),
)
