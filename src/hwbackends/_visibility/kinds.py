"""The runtime-specific rule kinds, as light declarations.

"Visibility reference §N" is section N of the documentation page "Visibility semantics per
runtime" (``docs/reference/visibility.md``): each rule there has its public source.

A plugin declares ``visibility = CudaDevices(...)`` when its module is imported, on every
selection; the readers and writers behind each kind (hundreds of lines per runtime) are in
``cuda``, ``rocm``, … and are imported the first time a rule reads or writes.
"""

from __future__ import annotations

import sys

from hwbackends._visibility.base import VisibilityRule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from types import ModuleType

    from hwbackends._visibility.base import Trace, VisibleUnit
    from hwbackends._visibility.shapes import HostLike

__all__ = [
    "AscendDevices",
    "CudaDevices",
    "GaudiModules",
    "LevelZeroDevices",
    "NeuronCores",
    "RocmDevices",
    "TpuChips",
]


def _impl(module: str) -> ModuleType:
    full = f"{__package__}.{module}"
    __import__(full)
    return sys.modules[full]


class _Kind(VisibilityRule):
    """A kind whose reader and writer are ``read`` / ``write`` of ``_module``."""

    _module = ""

    def read(self, env: Mapping[str, str], host: HostLike, trace: Trace) -> list[VisibleUnit]:
        result: list[VisibleUnit] = _impl(self._module).read(env, host, trace)
        return result

    def write(
        self, physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        result: dict[str, str] = _impl(self._module).write(physical, host, env)
        return result


class CudaDevices(VisibilityRule):
    """The CUDA runtime's ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER`` (visibility
    reference §1).

    ``driver_module`` names the kernel module whose version (``Host.drivers``) selects the
    MIG enumeration rules of that driver generation; without it the R570+ rules apply.
    """

    variables = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
    unset: tuple[str, ...] = ()

    def __init__(self, *, driver_module: str | None = None) -> None:
        self.driver_module = driver_module

    def __repr__(self) -> str:
        return f"CudaDevices(driver_module={self.driver_module!r})"

    def read(self, env: Mapping[str, str], host: HostLike, trace: Trace) -> list[VisibleUnit]:
        result: list[VisibleUnit] = _impl("cuda").read(env, host, trace, self.driver_module)
        return result

    def write(
        self, physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        result: dict[str, str] = _impl("cuda").write(physical, host, env, self.driver_module)
        return result


class RocmDevices(_Kind):
    """ROCm's two layers: ``ROCR_VISIBLE_DEVICES``, then ``HIP_VISIBLE_DEVICES`` or
    ``CUDA_VISIBLE_DEVICES`` over the ROCr-filtered GPUs (visibility reference §2)."""

    _module = "rocm"
    variables = (
        "ROCR_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "CUDA_VISIBLE_DEVICES",
        "GPU_DEVICE_ORDINAL",
    )
    unset = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")


class LevelZeroDevices(_Kind):
    """Level Zero's ``ONEAPI_DEVICE_SELECTOR`` and ``ZE_AFFINITY_MASK`` with
    ``ZE_FLAT_DEVICE_HIERARCHY`` (cards or tiles; visibility reference §7)."""

    _module = "xpu"
    variables = (
        "ZE_AFFINITY_MASK",
        "ZE_FLAT_DEVICE_HIERARCHY",
        "ZE_ENABLE_PCI_ID_DEVICE_ORDER",
        "ONEAPI_DEVICE_SELECTOR",
    )
    unset = ("ZE_AFFINITY_MASK", "ONEAPI_DEVICE_SELECTOR")


class NeuronCores(_Kind):
    """The Neuron runtime's ``NEURON_RT_VISIBLE_CORES`` / ``NEURON_RT_NUM_CORES`` over
    NeuronCores, at the logical core size ``NEURON_LOGICAL_NC_CONFIG`` (visibility reference §3)."""

    _module = "neuron"
    variables = ("NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES", "NEURON_LOGICAL_NC_CONFIG")
    unset = ("NEURON_RT_NUM_CORES",)


class TpuChips(_Kind):
    """libtpu's ``TPU_VISIBLE_CHIPS`` with the process and host bounds (visibility reference §4)."""

    _module = "tpu"
    variables = (
        "TPU_VISIBLE_CHIPS",
        "TPU_VISIBLE_DEVICES",
        "TPU_CHIPS_PER_PROCESS_BOUNDS",
        "TPU_CHIPS_PER_HOST_BOUNDS",
        "TPU_PROCESS_BOUNDS",
        "TPU_HOST_BOUNDS",
    )
    unset = variables


class GaudiModules(_Kind):
    """``HABANA_VISIBLE_MODULES``: a list of module ids (visibility reference §5)."""

    _module = "hpu"
    variables = ("HABANA_VISIBLE_MODULES",)
    unset: tuple[str, ...] = ()


class AscendDevices(_Kind):
    """``ASCEND_RT_VISIBLE_DEVICES``: ascending logical device ids (visibility reference §6)."""

    _module = "npu"
    variables = ("ASCEND_RT_VISIBLE_DEVICES",)
    unset: tuple[str, ...] = ()
