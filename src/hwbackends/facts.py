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
    from hwbackends._base.protocol import Precision, SupportLevel
    from hwbackends._base.versions import (
        TORCH_INDEXES,
        describes_drivers,
        release,
        torch_build_problem,
        torch_install_hint,
        version_in_range,
    )
    from hwbackends._kit.accel import (
        AcceleratorBackend,
        ArchFacts,
        PciModel,
        Stack,
        code_gated_quantization,
        flash_attention_2,
        hub_kernel_attention,
        major_minor,
    )
    from hwbackends._kit.hf_facts import (
        FLASH_PACKAGES,
        QUANT_METHODS,
        FlashRow,
        QuantMethod,
        QuantVerdict,
        flash_attention_options,
        quant_support,
    )
    from hwbackends._kit.hf_tables import (
        HF_REF,
        USE_KERNELS_ADVICE,
        KernelsState,
        TransformersTables,
        kernel_layers,
        kernels_state,
        transformers_tables,
    )
    from hwbackends._kit.wheels import WheelAdvice, pip_command
    from hwbackends._selection.confirm import Confirmation

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
    "WheelAdvice",
    "code_gated_quantization",
    "describes_drivers",
    "flash_attention_2",
    "flash_attention_options",
    "hub_kernel_attention",
    "kernel_layers",
    "kernels_state",
    "major_minor",
    "pip_command",
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
    "AcceleratorBackend": "_kit.accel",
    "ArchFacts": "_kit.accel",
    "PciModel": "_kit.accel",
    "Stack": "_kit.accel",
    "code_gated_quantization": "_kit.accel",
    "flash_attention_2": "_kit.accel",
    "hub_kernel_attention": "_kit.accel",
    "major_minor": "_kit.accel",
    "FLASH_PACKAGES": "_kit.hf_facts",
    "HF_REF": "_kit.hf_tables",
    "QUANT_METHODS": "_kit.hf_facts",
    "TORCH_INDEXES": "_base.versions",
    "USE_KERNELS_ADVICE": "_kit.hf_tables",
    "FlashRow": "_kit.hf_facts",
    "KernelsState": "_kit.hf_tables",
    "QuantMethod": "_kit.hf_facts",
    "QuantVerdict": "_kit.hf_facts",
    "TransformersTables": "_kit.hf_tables",
    "describes_drivers": "_base.versions",
    "flash_attention_options": "_kit.hf_facts",
    "kernel_layers": "_kit.hf_tables",
    "kernels_state": "_kit.hf_tables",
    "quant_support": "_kit.hf_facts",
    "release": "_base.versions",
    "torch_build_problem": "_base.versions",
    "torch_install_hint": "_base.versions",
    "transformers_tables": "_kit.hf_tables",
    "version_in_range": "_base.versions",
    "WheelAdvice": "_kit.wheels",
    "pip_command": "_kit.wheels",
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
        from hwbackends._selection.confirm import Confirmation

        return Confirmation
    if name in ("Precision", "SupportLevel"):
        from hwbackends._base import protocol as _protocol

        return getattr(_protocol, name)
    raise AttributeError(f"module 'hwbackends.facts' has no attribute {name!r}")
