"""Where each flash-attention version runs on AMD GPUs (rows in order of preference).

The mechanism is ``hwbackends.facts.flash_attention_options``; this table only says which gfx
targets each implementation supports. On ROCm, Transformers' fallback table maps both
flash_attention_2 and flash_attention_3 to ``kernels-community/aiter-flash-attn`` and FA4 to a
CUDA-only kernel (read from the installed Transformers at run time).
"""

from __future__ import annotations

from hwbackends.facts import FlashRow

__all__ = ["FLASH"]

_CK = frozenset({"gfx90a", "gfx942", "gfx950"})
_TRITON_RDNA = frozenset({"gfx1100", "gfx1101", "gfx1102", "gfx1200", "gfx1201"})
_AITER = frozenset({"gfx942", "gfx950"})

_FA2_SOURCE = (
    "ROCm/flash-attention README (composable_kernel backend: MI200, MI300, MI350; Triton "
    "backend: CDNA and RDNA3/RDNA4, enabled with FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE)"
)
_AITER_SOURCE = "ROCm/aiter README (kernels for Instinct MI300 gfx942 and MI350 gfx950)"
_FA3_SOURCE = (
    "Dao-AILab/flash-attention hopper/ (the flash-attn-3 package is Hopper-only); " + _AITER_SOURCE
)

FLASH: tuple[FlashRow, ...] = (
    FlashRow(
        2,
        _CK | _TRITON_RDNA,
        _AITER,
        f"{_FA2_SOURCE}; {_AITER_SOURCE}",
        note="aiter on MI300/MI350",
        package_note=(
            "the ROCm build of flash-attn (composable_kernel on MI200/MI300/MI350; on Radeon "
            "RDNA3/RDNA4 only its Triton backend, FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE)"
        ),
    ),
    FlashRow(
        3,
        frozenset(),
        _AITER,
        _FA3_SOURCE,
        note="the same aiter kernel as flash_attention_2 on ROCm",
    ),
    FlashRow(4, frozenset(), frozenset(), "flash-attn-4 and its hub kernel are CUDA-only"),
)
