"""Building blocks for a backend's fact tables: public names for plugin authors.

The declarative pieces (:class:`Stack`, :class:`PciModel`, :class:`ArchFacts`), the
declaration-driven :class:`AcceleratorBackend`, the readers of the installed Transformers /
``kernels`` tables, version helpers and the quantization catalogue. The in-repo plugins use
these names and nothing private, so an outside plugin can do everything they do.

Nothing here imports torch, transformers or a vendor SDK.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
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
    from ._confirm import Confirmation
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


# Every name loads on first use (PEP 562): a plugin's top module imports the base class it
# declares with, and the fact tables, Transformers readers and version helpers behind the
# other names are imported only when a capability question is asked.
_WHERE = {
    "AcceleratorBackend": "_accel_facts",
    "ArchFacts": "_accel_facts",
    "PciModel": "_accel_facts",
    "Stack": "_accel_facts",
    "code_gated_quantization": "_accel_facts",
    "flash_attention_2": "_accel_facts",
    "hub_kernel_attention": "_accel_facts",
    "major_minor": "_accel_facts",
    "FLASH_PACKAGES": "_facts",
    "HF_REF": "_facts",
    "QUANT_METHODS": "_facts",
    "TORCH_INDEXES": "_versions",
    "USE_KERNELS_ADVICE": "_facts",
    "FlashRow": "_facts",
    "KernelsState": "_facts",
    "QuantMethod": "_facts",
    "QuantVerdict": "_facts",
    "TransformersTables": "_facts",
    "describes_drivers": "_versions",
    "flash_attention_options": "_facts",
    "kernel_layers": "_facts",
    "kernels_state": "_facts",
    "quant_support": "_facts",
    "release": "_versions",
    "torch_build_problem": "_versions",
    "torch_install_hint": "_versions",
    "transformers_tables": "_facts",
    "version_in_range": "_versions",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is not None:
        import sys

        full = f"{__package__}.{module}"
        __import__(full)  # importlib itself costs more than the lookup
        value = getattr(sys.modules[full], name)
        globals()[name] = value
        return value
    # loaded on first use: the runtime check's module is not needed to declare a backend
    if name == "Confirmation":
        from ._confirm import Confirmation

        return Confirmation
    if name in ("Precision", "SupportLevel"):
        from . import _protocol

        return getattr(_protocol, name)
    raise AttributeError(f"module 'hwbackends.facts' has no attribute {name!r}")
