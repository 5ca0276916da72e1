"""Where each flash-attention version runs on NVIDIA GPUs (rows in order of preference).

The mechanism (installed package first, else the hub kernel Transformers falls back to, read
from the installed Transformers) is ``hwbackends.facts.flash_attention_options``; this table
only says which architectures each implementation supports.
"""

from __future__ import annotations

from hwbackends.facts import FlashRow

from ._arch import sm_at_least

__all__ = ["FLASH"]

_FA2 = (
    "Dao-AILab/flash-attention README (FlashAttention-2: Ampere, Ada and Hopper GPUs; Turing "
    "not supported); Blackwell builds exist from flash-attn 2.7.4 with CUDA 12.8 (inferred "
    "from its release wheels)"
)
_FA3 = (
    "Dao-AILab/flash-attention README hopper/ (FlashAttention-3 is for Hopper GPUs, H100/H800); "
    "vllm-project/flash-attention builds FA3 for sm_90 only"
)
_FA4 = (
    "Dao-AILab/flash-attention flash_attn/cute (FlashAttention-4, CuTe DSL) targets SM90 and "
    "SM100-class GPUs; consumer Blackwell (sm_120) is not a target (inferred)"
)

_HOPPER = frozenset({"sm_90"})
_FA4_ARCHS = frozenset({"sm_90", "sm_100", "sm_103"})

#: Preference: FA3 on Hopper, FA4 on datacenter Blackwell, FA2 from Ampere on.
FLASH: tuple[FlashRow, ...] = (
    FlashRow(3, _HOPPER, _HOPPER, _FA3, note="Hopper only"),
    FlashRow(4, _FA4_ARCHS, _FA4_ARCHS, _FA4, note="Hopper and datacenter Blackwell"),
    FlashRow(2, sm_at_least(80), sm_at_least(80), _FA2, note="Ampere and newer"),
)
