"""Quantization methods on NVIDIA GPUs: one verdict per method, each with its source.

"Supported" means: passes the method's ``validate_environment`` in Transformers 5.22 on such
a GPU and the Transformers docs table marks CUDA green. The packages each method needs and
what its gate checks come from the shared catalogue ``hwbackends.facts.QUANT_METHODS``.
"""

from __future__ import annotations

from hwbackends.facts import HF_REF, QuantVerdict, SupportLevel

from ._arch import sm_at_least

__all__ = ["VERDICTS"]

DOCS = f"transformers docs quantization/overview.md table, CUDA column ({HF_REF} §4.1)"
CODE = "transformers 5.22.2 quantizers/ (read)"

_SM75, _SM80, _SM89, _SM90, _SM100 = (sm_at_least(c) for c in (75, 80, 89, 90, 100))


def _v(
    method: str,
    status: SupportLevel,
    reason: str,
    source: str = DOCS,
    *,
    archs: frozenset[str] | None = None,
    min_arch: str | None = None,
    otherwise: tuple[SupportLevel, str] | None = None,
) -> QuantVerdict:
    return QuantVerdict(method, status, reason, source, archs, otherwise, min_arch)


VERDICTS: tuple[QuantVerdict, ...] = (
    _v("aqlm", "supported", "AQLM CUDA kernels"),
    _v("auto_round", "supported", "AutoRound checkpoints load on CUDA"),
    _v("awq", "supported", "AWQ through gptqmodel's CUDA kernels"),
    _v("bitnet", "supported", "weights unpacked on the GPU", CODE),
    _v("bitsandbytes", "supported", "4-bit and 8-bit, including on-the-fly quantization"),
    _v("compressed_tensors", "supported", "FP8 checkpoints use FP8 matmul kernels", DOCS,
       archs=_SM89, min_arch="sm_89",
       otherwise=("supported", "loads; FP8 checkpoints take the slower non-FP8 path before "
                  "sm_89 (Transformers warns)")),
    _v("eetq", "supported", "int8 weight-only through the hub EETQ kernel (needs a kernels "
       "release that this Transformers accepts)", f"{DOCS} (older revision); {CODE}"),
    _v("fbgemm_fp8", "supported", "FP8 rowwise kernels of fbgemm-gpu", f"{DOCS}; {CODE}",
       archs=_SM90, min_arch="sm_90",
       otherwise=("unsupported", "Transformers raises ValueError: fbgemm FP8 needs compute "
                  "capability >= 9.0")),
    _v("fouroversix", "unknown", "Transformers checks only for the fouroversix package; no "
       "hardware statement found", CODE),
    _v("fp8", "supported", "FineGrained FP8 matmuls on FP8 tensor cores", CODE,
       archs=_SM89, min_arch="sm_89",
       otherwise=("partial", "Transformers dequantizes FP8 checkpoints to bf16 below "
                  "compute capability 8.9 (no FP8 tensor cores)")),
    _v("mxfp8", "supported", "the FP8 quantizer with E8M0 block scales", CODE,
       archs=_SM89, min_arch="sm_89",
       otherwise=("partial", "dequantized to bf16 below compute capability 8.9")),
    _v("fp_quant", "supported", "real FP-Quant through qutlass on Blackwell", CODE,
       archs=_SM100, min_arch="sm_100",
       otherwise=("partial", "only pseudo-quantization (Triton emulation, no speed-up) before "
                  "Blackwell; NVFP4 pseudo-quantization needs sm_90")),
    _v("gemma", "supported", "pre-quantized Gemma checkpoints: plain PyTorch int2/4/8 layers, "
       "no CUDA-only kernel", CODE),
    _v("gguf", "supported", "quantized matmul through the hub GGUF kernel when kernels is "
       "compatible, else the weights are dequantized at load", f"{DOCS} (older revision); {CODE}"),
    _v("gptq", "supported", "GPTQ through gptqmodel"),
    _v("higgs", "supported", "FLUTE kernels", f"{DOCS} (older revision); FLUTE README "
       "(Ampere and newer, inferred)", archs=_SM80, min_arch="sm_80",
       otherwise=("unknown", "FLUTE kernels are built for Ampere and newer (inferred)")),
    _v("hqq", "supported", "HQQ on-the-fly quantization; no cpu/disk offload"),
    _v("metal", "unsupported", "Apple MPS only", CODE),
    _v("mxfp4", "supported", "Triton MXFP4 kernels (triton >= 3.4 and kernels)", CODE,
       archs=_SM75, min_arch="sm_75",
       otherwise=("partial", "pre-quantized MXFP4 is dequantized to bf16 below compute "
                  "capability 7.5")),
    _v("nvfp4", "partial", "on-the-fly NVFP4 on one Blackwell GPU only; pre-quantized NVFP4 "
       "checkpoints are refused by Transformers 5.22", CODE, archs=_SM100, min_arch="sm_100",
       otherwise=("unsupported", "Transformers raises RuntimeError: NVFP4 needs sm_100+ "
                  "block-scaled tensor cores")),
    _v("quanto", "supported", "optimum-quanto", f"{DOCS} (older revision)"),
    _v("quark", "partial", "Transformers checks only for amd-quark; Quark's fast kernels "
       "target AMD Instinct, elsewhere it runs through PyTorch ops (inferred)", CODE),
    _v("sinq", "supported", "one CUDA device only", CODE),
    _v("spqr", "supported", "SpQR CUDA kernels", CODE),
    _v("torchao", "supported", "torchao int4/int8/float8 recipes", f"{DOCS} (older revision)"),
    _v("vptq", "supported", "VPTQ CUDA kernels", f"{DOCS} (older revision)"),
)  # fmt: skip
