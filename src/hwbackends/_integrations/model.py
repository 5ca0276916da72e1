"""The model class the user will load, as the installed Transformers resolves it: from a local
folder, a config, a class, or a hub id found in the local cache (never a download), without
building the model. Its attention declarations (the class flags ``PreTrainedModel``'s checks
read), the layers it marks for hub kernels, and the features some attention implementations
cannot run."""

from __future__ import annotations

import os
from typing import Any

from hwbackends._base.errors import ModelError
from hwbackends._base.record import frozen

__all__ = ["ModelFacts", "model_facts"]

_EXPECTED = (
    "a folder save_pretrained wrote (with its config.json), a transformers config, a model "
    "class, or the id of a hub model already in the local Hugging Face cache"
)


@frozen
class ModelFacts:
    """What the installed Transformers declares about one model class."""

    class_name: str
    """The class ``from_pretrained`` builds (``LlamaForCausalLM``)."""
    model_type: str
    """Its config's ``model_type`` (``llama``)."""
    given: str
    """The model as it was given, in words, for reasons and errors."""
    sdpa: bool
    """``_supports_sdpa``: ``_sdpa_can_dispatch`` refuses ``sdpa`` without it."""
    flash: bool
    """``_supports_flash_attn``: ``_flash_attn_can_dispatch`` refuses flash without it."""
    flex: bool
    """``_supports_flex_attn``: ``_flex_attn_can_dispatch`` refuses flex without it."""
    compatible_flash: tuple[str, ...] | None
    """``_compatible_flash_implementations``: when set, Transformers swaps any other flash
    name for one of these (``_check_and_adjust_attn_implementation``)."""
    kernel_layers: tuple[str, ...]
    """Layer names its modeling file marks with ``use_kernel_forward_from_hub`` /
    ``use_kernel_func_from_hub``: what ``use_kernels=True`` can replace in it."""
    sinks: bool
    """Whether its attention passes attention sinks (``s_aux``), which flex attention cannot
    run on CPU (transformers integrations/flex_attention.py)."""
    attention_dropout: float
    """The config's attention dropout; flex attention refuses dropout while training."""

    def refusal(self, impl: str) -> str | None:
        """Why this class refuses ``impl`` at load, in the words of Transformers' checks; None
        when it accepts it (names it has no flag for, such as registered custom ones).

        :param impl: an ``attn_implementation`` name or hub kernel id.
        """
        impl = impl.removeprefix("paged|")
        flag = {"sdpa": self.sdpa, "flex_attention": self.flex}.get(impl)
        if "flash" in impl:  # is_flash_attention_requested: any name containing "flash"
            if not self.flash:
                return f"{self.class_name} does not support flash attention (_supports_flash_attn)"
            if self.compatible_flash is not None and impl not in self.compatible_flash:
                return (
                    f"{self.class_name} lists {', '.join(self.compatible_flash)} as its only "
                    "flash implementations (_compatible_flash_implementations): Transformers "
                    f"replaces {impl} with one of them"
                )
            return None
        if flag is False:
            attr = "_supports_flex_attn" if impl == "flex_attention" else "_supports_sdpa"
            return f"{self.class_name} does not support {impl} ({attr})"
        return None

    def to_dict(self) -> dict[str, Any]:
        """These facts as JSON-able data."""
        return {
            "class": self.class_name,
            "model_type": self.model_type,
            "given": self.given,
            "supports": {"sdpa": self.sdpa, "flash": self.flash, "flex_attention": self.flex},
            "compatible_flash": list(self.compatible_flash) if self.compatible_flash else None,
            "kernel_layers": list(self.kernel_layers),
        }


def model_facts(model: Any) -> ModelFacts:
    """The facts of the class ``from_pretrained(model)`` builds, read from the installed
    Transformers without building it or downloading anything.

    :param model: a local folder (``str`` or path), a hub id in the local cache, a
        ``PretrainedConfig``, a ``PreTrainedModel`` subclass, or ``ModelFacts`` (returned as is).
    :raises ModelError: when ``model`` is none of those, or names no model Transformers knows.
    """
    if isinstance(model, ModelFacts):
        return model
    try:
        from transformers import PretrainedConfig, PreTrainedModel
    except ImportError as exc:
        raise ModelError(
            f"planning for a model needs transformers, which cannot be imported: {exc}",
            "transformers installed",
            "pip install transformers, or leave model= out",
        ) from exc
    if isinstance(model, type) and issubclass(model, PreTrainedModel):
        return _facts(model, None, f"class {model.__name__}")
    if isinstance(model, PretrainedConfig):
        return _facts(_class_for(model, repr(type(model).__name__)), model, type(model).__name__)
    if isinstance(model, (str, os.PathLike)):
        text = os.fspath(model)
        config = _config_from(str(text))
        return _facts(_class_for(config, repr(text)), config, repr(text))
    raise ModelError(
        f"model={model!r} is not a model hwbackends can plan for", _EXPECTED, "pass one of those"
    )


def _looks_like_path(text: str) -> bool:
    # a hub id is org/name: one slash, no leading dot, slash or tilde
    return text.startswith((".", "/", "~")) or text.count("/") > 1 or "\\" in text


def _config_from(text: str) -> Any:
    """The config of a local folder or a cached hub id, with ``local_files_only`` so nothing is
    fetched."""
    from transformers import AutoConfig

    path = os.path.expanduser(text)
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise ModelError(
                f"{text!r} is a folder without a config.json, so not a model Transformers loads",
                _EXPECTED,
                "pass the folder save_pretrained wrote (config.json beside the weights)",
            )
    elif os.path.exists(path) or _looks_like_path(text):
        raise ModelError(
            f"{text!r} is not a model folder: "
            + ("it is a file" if os.path.exists(path) else "no such folder"),
            _EXPECTED,
            "pass the folder that holds config.json",
        )
    try:
        return AutoConfig.from_pretrained(path, local_files_only=True)
    except OSError as exc:
        raise ModelError(
            f"{text!r} is not in the local Hugging Face cache (nor a local folder), and "
            f"hwbackends never downloads a model to plan for it: {str(exc).splitlines()[0]}",
            _EXPECTED,
            f"download it first (hf download {text}), or pass its local folder",
        ) from exc
    except (ValueError, KeyError) as exc:
        raise ModelError(
            f"{text!r} names a model the installed Transformers does not know: "
            f"{str(exc).splitlines()[0]}",
            "a model type of the installed Transformers (transformers.CONFIG_MAPPING), "
            "without custom code (trust_remote_code)",
            "upgrade transformers (pip install -U transformers), or plan without model=",
        ) from exc


def _class_for(config: Any, given: str) -> type:
    """The class the Auto classes build for ``config``: its ``architectures``, else the
    causal-LM, seq2seq and base mappings of its ``model_type``."""
    import transformers
    from transformers import CONFIG_MAPPING
    from transformers.models.auto import modeling_auto

    model_type = str(getattr(config, "model_type", "") or "")
    if model_type not in CONFIG_MAPPING:
        raise ModelError(
            f"{given} has model_type {model_type!r}, which the installed Transformers "
            f"{transformers.__version__} does not know",
            "a model type of transformers.CONFIG_MAPPING",
            "upgrade transformers (pip install -U transformers), or plan without model=",
        )
    names = [str(a) for a in (getattr(config, "architectures", None) or [])]
    for mapping in (
        modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
        modeling_auto.MODEL_MAPPING_NAMES,
    ):
        found = mapping.get(model_type)
        names += [found] if isinstance(found, str) else list(found or ())
    for name in names:
        cls = getattr(transformers, name, None)
        if isinstance(cls, type):
            return cls
    raise ModelError(
        f"{given} (model_type {model_type!r}) names no model class of the installed Transformers",
        "a model type with a class in the Auto mappings",
        "pass the model class itself (model=MyModelClass)",
    )


def _facts(cls: type, config: Any, given: str) -> ModelFacts:
    import inspect
    import re
    import sys

    try:
        text = inspect.getsource(sys.modules[cls.__module__])
    except (OSError, TypeError, KeyError):
        text = ""  # no source to read: no kernel layers or sinks claimed
    layers = re.findall(r"use_kernel_(?:forward|func)_from_hub\(\s*[\"'](\w+)[\"']", text)
    if config is None:
        config_class = getattr(cls, "config_class", None)
        model_type = str(getattr(config_class, "model_type", "") or "")
    else:
        model_type = str(config.model_type)
    dropout = getattr(config, "attention_dropout", 0.0) if config is not None else 0.0
    compatible = getattr(cls, "_compatible_flash_implementations", None)
    return ModelFacts(
        class_name=cls.__name__,
        model_type=model_type,
        given=given,
        sdpa=bool(getattr(cls, "_supports_sdpa", False)),
        flash=bool(getattr(cls, "_supports_flash_attn", False)),
        flex=bool(getattr(cls, "_supports_flex_attn", False)),
        compatible_flash=tuple(compatible) if compatible is not None else None,
        kernel_layers=tuple(sorted(set(layers))),
        sinks="s_aux=" in text,
        attention_dropout=float(dropout) if isinstance(dropout, (int, float)) else 0.0,
    )
