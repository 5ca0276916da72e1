"""Quantization methods on AMD GPUs with ROCm: one verdict per method, each with its source.

On ROCm ``torch.cuda.is_available()`` is True and the capability torch reports is the gfx
major/minor (9.4 on MI300), so Transformers' CUDA gates usually *pass*: what fails is the
method's own kernel, at load or at the first forward. The verdicts below say so; the shared
catalogue ``hwbackends.facts.QUANT_METHODS`` gives the packages and the gate of each method.
"""

from __future__ import annotations

from hwbackends.facts import HF_REF, QuantVerdict, SupportLevel

from ._arch import GFX, gfx_where

__all__ = ["VERDICTS"]

DOCS = f"transformers docs quantization/overview.md table, ROCm column ({HF_REF} §4.1)"
OLD = f"{DOCS} (older revision of the table)"
GATE = (
    "transformers 5.22.2 quantizers/ (read): CUDA gates pass on ROCm because "
    f"torch.cuda.is_available() is True there ({HF_REF} §4.2)"
)

_FP8 = gfx_where(fp8=True)
_OCP_FP8 = frozenset(a for a in _FP8 if GFX[a].fp8 == "ocp")
_FNUZ_FP8 = frozenset(a for a in _FP8 if GFX[a].fp8 == "fnuz")


def _v(
    method: str,
    status: SupportLevel,
    reason: str,
    source: str = DOCS,
    *,
    archs: frozenset[str] | None = None,
    min_arch: str | None = None,
    otherwise: tuple[SupportLevel, str] | None = None,
    packages: tuple[str, ...] | None = None,
) -> QuantVerdict:
    return QuantVerdict(method, status, reason, source, archs, otherwise, min_arch, packages)


_NO_FP8_UNITS = (
    "Transformers' FP8 gate compares the reported capability (>= 9.0 on every ROCm GPU) with "
    "8.9, so it does not dequantize, but this GPU has no FP8 matrix units; load with "
    "FineGrainedFP8Config(dequantize=True) (inferred)"
)

_FNUZ = (
    "MI300 FP8 units use the FNUZ encodings while checkpoints use OCP E4M3; Transformers' "
    "gate passes (capability 9.4 >= 8.9) and its Triton FP8 kernels expect OCP FP8, so "
    "loading may fail or convert (inferred); AMD Quark or vLLM convert to FNUZ"
)

VERDICTS: tuple[QuantVerdict, ...] = (
    _v("aqlm", "unsupported", "no ROCm kernels"),
    _v("auto_round", "unsupported", "the docs table marks ROCm unsupported"),
    _v("awq", "supported", "AWQ through gptqmodel, which builds for ROCm"),
    _v("bitnet", "unknown", "Transformers only warns without a GPU; the unpacking is PyTorch "
       "ops, no ROCm statement found", GATE),
    _v("bitsandbytes", "partial", "the ROCm build of bitsandbytes covers part of the 4/8-bit "
       "features (docs: partial)"),
    _v("compressed_tensors", "supported", "FP8 checkpoints use FP8 matmuls", f"{DOCS}; {GATE}",
       archs=_FP8, min_arch="gfx942",
       otherwise=("partial", "loads; Transformers' FP8-kernel gate passes on the reported "
                  "capability but this GPU has no FP8 units: pass use_optimized_inference="
                  "False for FP8 checkpoints (inferred)")),
    _v("eetq", "unsupported", "EETQ kernels are CUDA-only: the hub kernel has no ROCm build, "
       "loading fails", f"{OLD}; {GATE}"),
    _v("fbgemm_fp8", "unsupported", "the docs table marks ROCm unsupported; Transformers' "
       "capability gate (major >= 9) passes on every Instinct GPU, so the failure comes from "
       "fbgemm-gpu at load", f"{OLD}; {GATE}"),
    _v("fouroversix", "unknown", "Transformers checks only for the package; no ROCm statement "
       "found", GATE),
    _v("fp8", "supported", "native OCP FP8 (E4M3) matches FP8 checkpoints", GATE,
       archs=_OCP_FP8, min_arch="gfx942"),
    _v("fp8", "partial", _FNUZ, GATE, archs=_FNUZ_FP8, min_arch="gfx942",
       otherwise=("unsupported", _NO_FP8_UNITS)),
    _v("mxfp8", "partial", "the FP8 quantizer with E8M0 scales on native OCP FP8 (inferred)",
       GATE, archs=_OCP_FP8, min_arch="gfx950"),
    _v("mxfp8", "partial", _FNUZ, GATE, archs=_FNUZ_FP8, min_arch="gfx942",
       otherwise=("unsupported", _NO_FP8_UNITS)),
    _v("fp_quant", "unsupported", "real FP-Quant needs qutlass, an NVIDIA Blackwell library",
       GATE),
    _v("gemma", "supported", "pre-quantized Gemma checkpoints: plain PyTorch int2/4/8 layers, "
       "no CUDA-only kernel (read from the code, not run on ROCm)", GATE),
    _v("gguf", "partial", "GGUF loads but is dequantized at load: no GGUF matmul kernel is "
       "published for rocm", f"{OLD}; {GATE}"),
    _v("gptq", "supported", "GPTQ through gptqmodel (docs: GPTQModel supports ROCm)", OLD),
    _v("higgs", "unsupported", "FLUTE kernels are CUDA-only", OLD),
    _v("hqq", "unsupported", "the docs table marks ROCm unsupported", OLD),
    _v("metal", "unsupported", "Apple MPS only", GATE),
    _v("mxfp4", "partial", "passes Transformers' gate (reported capability >= 7.5); the "
       "Triton MXFP4 kernels from kernels-community are written for NVIDIA and untested on "
       "ROCm (inferred); use Mxfp4Config(dequantize=True) if loading fails", GATE,
       packages=("pytorch-triton-rocm", "kernels", "accelerate")),
    _v("nvfp4", "unsupported", "NVFP4 is an NVIDIA Blackwell format; Transformers refuses "
       "capability < 10.0 and RDNA3.5/4 (11.x/12.x) pass the number but lack the units", GATE),
    _v("quanto", "unsupported", "the docs table marks ROCm unsupported", OLD),
    _v("quark", "supported", "AMD Quark, AMD's own quantizer; native FP8 kernels on MI300+"),
    _v("sinq", "unknown", "one device; no ROCm statement found", GATE),
    _v("spqr", "unsupported", "SpQR kernels are CUDA extensions", GATE),
    _v("torchao", "unsupported", "the (older) docs table marks ROCm unsupported; newer torchao "
       "releases publish ROCm builds, not verified here", OLD),
    _v("vptq", "partial", "the docs table marks ROCm partial", OLD),
)  # fmt: skip
