"""Facts about Intel GPUs under PyTorch's built-in XPU backend, each with its source."""

from __future__ import annotations

from hwbackends.facts import (
    ArchFacts,
    PciModel,
    Stack,
    flash_attention_2,
    torch_install_hint,
)
from hwbackends.plugin import Limitation, QuantSupport, common_attention

HF = "docs/reference/hf-integration.md"

# Device ids from pytorch/pytorch torch/testing/_internal/common_xpu.py (_DEVICE_ID_TO_CODENAME,
# itself taken from intel/intel-graphics-compiler inc/common/igfxfmid.h).
_PVC_SOURCE = "pytorch torch/testing/_internal/common_xpu.py: PVC = Data Center GPU Max (Xe-HPC)"
_BMG_SOURCE = "pytorch torch/testing/_internal/common_xpu.py: BMG = Arc Pro Battlemage (Xe2)"
PCI_MODELS: dict[str, PciModel] = {
    **{
        did: PciModel("Intel Data Center GPU Max", "pvc", _PVC_SOURCE)
        for did in (
            "0x0bd0",
            "0x0bd4",
            "0x0bd5",
            "0x0bd6",
            "0x0bd7",
            "0x0bd8",
            "0x0bd9",
            "0x0bda",
            "0x0bdb",
            "0x0b69",
            "0x0b6e",
        )
    },
    **{
        did: PciModel("Intel Arc B-series (Battlemage)", "bmg", _BMG_SOURCE)
        for did in (
            "0xe202",
            "0xe20b",
            "0xe20c",
            "0xe20d",
            "0xe210",
            "0xe212",
            "0xe215",
            "0xe216",
            "0xe220",
            "0xe221",
            "0xe222",
            "0xe223",
        )
    },
}

STACK = Stack(
    label="torch XPU build (built-in torch.xpu)",
    device_type="xpu",
    distributed_backend="xccl",
    torch_flavour="xpu",
    # Accelerate's is_xpu_available() is False for torch <= 2.6 and is_xccl_available() needs
    # torch >= 2.7; Transformers wants >= 2.6. The stricter bound wins.
    min_torch="2.7",
    kernel_device="xpu",
    device_map_auto=True,
    source=(
        "torch wheels built for XPU set torch/version.py xpu='<oneAPI version>' (read as text); "
        f"accelerate state.py picks xccl for XPU, torch >= 2.7 ({HF} §3.4, §5.1); "
        "accelerate utils/imports.py is_xpu_available: torch > 2.6"
    ),
)

_BF16 = ArchFacts(
    ("float32", "bfloat16", "float16"),
    "bf16",
    "transformers is_torch_bf16_gpu_available -> torch.xpu.is_bf16_supported(); PVC and BMG "
    f"have bf16 matrix engines (XMX) ({HF} §3.5)",
)
ARCH_FACTS = {"pvc": _BF16, "bmg": _BF16}
DEFAULT_FACTS = ArchFacts(
    ("float32", "float16"),
    "fp32",
    "device id not in the table: bf16 support is decided at run time by "
    "torch.xpu.is_bf16_supported(); fp32 is the safe recommendation",
)
INTEGRATED_FACTS = ArchFacts(
    ("float32", "float16"),
    "fp32",
    "integrated Intel GPU: shares system memory and has no data-center matrix engines; "
    "check torch.xpu.is_bf16_supported() before choosing bf16",
)

ATTENTION = (
    flash_attention_2(
        hub_kernel="kernels-community/flash-attn2",
        packages=("kernels",),
        note="on XPU Transformers counts the flash-attn2 hub kernel as native FA2",
        source=(
            "transformers modeling_flash_attention_utils.py FLASH_ATTENTION_COMPATIBILITY_MATRIX"
            f"[2] custom_supported_devices (xpu) and FLASH_ATTN_KERNEL_DEVICES ({HF} §1.2, §1.3)"
        ),
    ),
    *common_attention(),
)

_DOCS = f"transformers docs quantization/overview.md table, Intel GPU column ({HF} §4.1)"
QUANTIZATION = (
    QuantSupport("aqlm", "supported", "docs table: Intel GPU supported", _DOCS, packages=("aqlm",)),
    QuantSupport(
        "auto_round",
        "supported",
        "docs table: Intel GPU supported",
        _DOCS,
        packages=("auto-round",),
    ),
    QuantSupport(
        "awq",
        "supported",
        "docs table: Intel GPU supported; needs gptqmodel",
        _DOCS,
        packages=("gptqmodel",),
    ),
    QuantSupport(
        "gptq",
        "supported",
        "docs table (GPTQModel): Intel GPU supported",
        _DOCS,
        packages=("optimum", "gptqmodel"),
    ),
    QuantSupport(
        "bitsandbytes",
        "supported",
        "docs table: Intel GPU supported (a bitsandbytes build with XPU support is needed)",
        _DOCS,
        packages=("bitsandbytes",),
    ),
    QuantSupport(
        "compressed_tensors",
        "supported",
        "FP8 fast path on xpu",
        f"transformers quantizer_compressed_tensors.py ({HF} §4.2)",
        packages=("compressed-tensors",),
    ),
    QuantSupport(
        "fp8",
        "supported",
        "the fine-grained FP8 quantizer accepts xpu (on-the-fly and pre-quantized)",
        f"transformers quantizer_finegrained_fp8.py ({HF} §4.2)",
        packages=("accelerate",),
    ),
    QuantSupport(
        "fbgemm_fp8",
        "partial",
        "accepted on xpu, but needs a compatible kernels",
        f"transformers quantizer_fbgemm_fp8.py ({HF} §4.2)",
        packages=("kernels",),
    ),
    QuantSupport(
        "mxfp4",
        "partial",
        "accepted on xpu with triton >= 3.5 and kernels; "
        "pre-quantized checkpoints are dequantized otherwise",
        f"transformers quantizer_mxfp4.py ({HF} §4.2)",
        packages=("triton", "kernels"),
    ),
)

LIMITATIONS = (
    Limitation(
        "PyTorch's SDPA uses its flash kernel on XPU only on Xe2 (Battlemage) and later; "
        "on Data Center GPU Max it takes the math / memory-efficient paths",
        "pytorch torch/testing/_internal/common_xpu.py PLATFORM_SUPPORTS_FLASH_ATTENTION_XPU",
    ),
    Limitation(
        "Whether a tile or a whole card is one torch device depends on "
        "ZE_FLAT_DEVICE_HIERARCHY (FLAT: one device per tile; COMPOSITE: per card); set it "
        "explicitly, the default differs between driver releases",
        "docs/reference/visibility.md §7.1",
    ),
)

#: The stacks in order of preference (the backend's ``stacks`` declaration).
STACKS = (STACK,)

#: How to get a torch that drives Intel GPUs (the PyTorch install selector's XPU index).
INSTALL_HINT = (
    f"install a torch XPU build: {torch_install_hint('xpu')} (and the Intel GPU driver "
    "and Level Zero runtime)"
)
