"""The oldest NVIDIA driver each CUDA major runs on (minor version compatibility).

NVIDIA CUDA Compatibility, "Minor Version Compatibility", Table 1 (CUDA 13.x >= 580, 12.x >=
525, 11.x >= 450) and its note (the 11.x family from 450.80.02), with the CUDA Toolkit
release notes' table "CUDA Toolkit and Minimum Required Driver Version for CUDA Minor Version
Compatibility" (12.x: 525.60.13). Linux drivers; a table of its own, read by the probe (an
installed torch) and by the wheel advice (which index the loaded driver can run).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["MIN_DRIVER", "SOURCE"]

#: CUDA major -> the oldest Linux driver that runs it.
MIN_DRIVER: Mapping[int, str] = {11: "450.80.02", 12: "525.60.13", 13: "580"}
SOURCE = (
    "NVIDIA CUDA Compatibility, 'Minor Version Compatibility' Table 1 "
    "(https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html)"
)
