"""Building blocks for a backend's fact tables: public names for plugin authors.

The declarative pieces (:class:`Stack`, :class:`PciModel`, :class:`ArchFacts`), the
declaration-driven :class:`AcceleratorBackend`, the readers of the installed Transformers /
``kernels`` tables, version helpers and the quantization catalogue. The in-repo plugins use
these names and nothing private, so an outside plugin can do everything they do.

Nothing here imports torch, transformers or a vendor SDK.
"""

from __future__ import annotations

from ._accel_facts import (
    AcceleratorBackend,
    ArchFacts,
    PciModel,
    Stack,
    code_gated_quantization,
    flash_attention_2,
    hub_kernel_attention,
    major_minor,
)
from ._facts import (
    FLASH_PACKAGES,
    HF_REF,
    QUANT_METHODS,
    TORCH_INDEXES,
    USE_KERNELS_ADVICE,
    FlashRow,
    KernelsState,
    QuantMethod,
    QuantVerdict,
    TransformersTables,
    describes_drivers,
    flash_attention_options,
    kernel_layers,
    kernels_state,
    quant_support,
    release,
    torch_build_problem,
    torch_install_hint,
    transformers_tables,
    version_in_range,
)
from ._protocol import Precision, SupportLevel

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._confirm import Confirmation

__all__ = [
    "FLASH_PACKAGES",
    "HF_REF",
    "QUANT_METHODS",
    "TORCH_INDEXES",
    "USE_KERNELS_ADVICE",
    "AcceleratorBackend",
    "ArchFacts",
    "Confirmation",
    "FlashRow",
    "KernelsState",
    "PciModel",
    "Precision",
    "QuantMethod",
    "QuantVerdict",
    "Stack",
    "SupportLevel",
    "TransformersTables",
    "code_gated_quantization",
    "describes_drivers",
    "flash_attention_2",
    "flash_attention_options",
    "hub_kernel_attention",
    "kernel_layers",
    "kernels_state",
    "major_minor",
    "quant_support",
    "release",
    "torch_build_problem",
    "torch_install_hint",
    "transformers_tables",
    "version_in_range",
]


def __getattr__(name: str) -> object:
    # loaded on first use: the runtime check's module is not needed to declare a backend
    if name == "Confirmation":
        from ._confirm import Confirmation

        return Confirmation
    raise AttributeError(f"module 'hwbackends.facts' has no attribute {name!r}")
