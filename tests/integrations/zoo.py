"""The causal-LM zoo of the installed Transformers, at a tiny size: for each model type of
``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``, a random model built from a shrunk config and saved to a
folder, loaded (a) with Transformers' defaults and (b) with ``pretrained_kwargs(model=path)``,
one forward pass each, then 2 ``Trainer`` steps (c) with defaults and (d) with the recommended
training settings. Shared by ``tests/integrations/test_model_zoo.py`` (a deterministic sample)
and ``bench/zoo.py`` (the whole zoo, the table in ``bench/README.md``)."""

from __future__ import annotations

import contextlib
import io
import logging
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

#: The shrunk value of each size field, wherever a config (or a sub-config) has it.
SMALL: dict[str, int] = {
    "hidden_size": 64, "d_model": 64, "n_embd": 64, "embed_dim": 64, "dim": 64,
    "num_hidden_layers": 2, "num_layers": 2, "n_layer": 2, "n_layers": 2, "decoder_layers": 2,
    "encoder_layers": 2, "num_decoder_layers": 2,
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "num_heads": 4,
    "decoder_attention_heads": 4, "encoder_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "attention_head_dim": 16,
    "intermediate_size": 64, "ffn_dim": 64, "n_inner": 64, "decoder_ffn_dim": 64,
    "encoder_ffn_dim": 64, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
    "vocab_size": 256, "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4,
    "num_experts_per_tok": 2, "moe_topk": 2, "top_k": 2, "n_shared_experts": 1,
    "kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
    "v_head_dim": 16, "max_position_embeddings": 256, "n_positions": 256,
    "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1,
}  # fmt: skip

#: Token-id fields: a default past the tiny vocabulary is moved inside it.
_TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")

SEQ = 8


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Transformers' and torch's chatter off (warnings, logs, prints) for one model's legs."""
    import transformers

    tlog: Any = transformers.utils.logging
    old = tlog.get_verbosity()
    tlog.set_verbosity_error()
    tlog.disable_progress_bar()
    logging.disable(logging.WARNING)
    sink = io.StringIO()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                yield
    finally:
        logging.disable(logging.NOTSET)
        tlog.set_verbosity(old)


def model_types() -> list[str]:
    """Every model type of the installed Transformers' causal-LM auto mapping, sorted."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def sample(types: list[str], n: int, always: tuple[str, ...] = ()) -> list[str]:
    """A deterministic sample of ``n`` types: the ``always`` ones, then evenly spaced others."""
    rest = [t for t in types if t not in always]
    step = max(1, len(rest) // max(1, n - len(always)))
    return [t for t in always if t in types] + rest[::step][: max(0, n - len(always))]


_LAYERS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "decoder_layers")


def _shrink(d: dict[str, Any]) -> dict[str, Any]:
    layers = next((d[k] for k in _LAYERS if isinstance(d.get(k), int)), None)
    small_layers = SMALL["num_hidden_layers"]
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and k.endswith("config"):
            out[k] = _shrink(v)
        elif k in SMALL and isinstance(v, int) and not isinstance(v, bool):
            out[k] = min(v, SMALL[k]) if v > 0 else v
        elif isinstance(v, list) and layers and len(v) == layers:
            out[k] = v[:small_layers]  # one entry per layer: layer_types, intermediate sizes
        elif isinstance(v, dict) and v and all(str(x).isdigit() for x in v):
            out[k] = {x: y for x, y in v.items() if int(x) < small_layers}  # per-layer configs
        else:
            out[k] = v
    vocab = out.get("vocab_size")
    for k in _TOKEN_IDS:
        if isinstance(vocab, int) and isinstance(out.get(k), int) and out[k] >= vocab:
            out[k] = vocab - 1
    return out


def tiny_config(model_type: str) -> Any:
    """The type's default config with every size field shrunk (raises when it cannot be)."""
    from transformers import AutoConfig

    default = AutoConfig.for_model(model_type).to_dict()
    small = _shrink(default)
    small.pop("model_type", None)
    small.pop("transformers_version", None)
    return AutoConfig.for_model(model_type, **small)


def training_settings(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The one place the recommended training settings come from: ``(from_pretrained kwargs,
    TrainingArguments kwargs)`` of the training plan for the model at ``path``."""
    from hwbackends.accelerate import training_plan

    setup = training_plan(model=path)
    return setup.pretrained_kwargs, setup.training_kwargs


def inference_settings(path: str) -> dict[str, Any]:
    """The recommended ``from_pretrained`` kwargs for inference with the model at ``path``."""
    from hwbackends.transformers import pretrained_kwargs

    return pretrained_kwargs(model=path)


def _forward(path: str, kwargs: dict[str, Any]) -> str:
    import torch
    from transformers import AutoModelForCausalLM

    model: Any = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    vocab = int(getattr(model.config.get_text_config(), "vocab_size", 256) or 256)
    ids = torch.randint(0, min(vocab, 256), (1, SEQ), device=model.device)
    with torch.no_grad():
        model(input_ids=ids)
    return str(getattr(model.config, "_attn_implementation", ""))


def _train(path: str, kwargs: dict[str, Any], targs: dict[str, Any], out: str) -> str:
    import torch
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
    from transformers.trainer_callback import PrinterCallback

    model: Any = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    vocab = min(int(getattr(model.config.get_text_config(), "vocab_size", 256) or 256), 256)
    data = [
        {"input_ids": ids, "labels": ids.clone()}
        for ids in (torch.randint(0, vocab, (SEQ,)) for _ in range(4))
    ]
    args = TrainingArguments(
        output_dir=out,
        max_steps=2,
        per_device_train_batch_size=2,
        report_to="none",
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        **targs,
    )
    trainer = Trainer(model=model, args=args, train_dataset=data)
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    return str(getattr(model.config, "_attn_implementation", ""))


def _leg(fn: Callable[[], str]) -> tuple[bool, str]:
    try:
        return True, fn()
    except Exception as exc:  # a leg's failure is a result, recorded with its cause
        first = (str(exc).splitlines() or [""])[0]
        return False, f"{type(exc).__name__}: {first[:160]}"


def run_type(model_type: str, *, train: bool = True) -> dict[str, Any]:
    """One model type through every leg: a row of the zoo table."""
    import torch

    row: dict[str, Any] = {"type": model_type}
    t0 = time.perf_counter()
    with quiet(), tempfile.TemporaryDirectory(prefix=f"zoo-{model_type}-") as tmp:
        from transformers import AutoModelForCausalLM

        def build() -> str:
            torch.manual_seed(0)
            model: Any = AutoModelForCausalLM.from_config(tiny_config(model_type))
            model.save_pretrained(tmp)
            return type(model).__name__

        row["built"], row["class"] = _leg(build)
        if row["built"]:
            row["default_load"], row["default_attn"] = _leg(lambda: _forward(tmp, {}))
            row["ours_load"], row["ours_attn"] = _leg(
                lambda: _forward(tmp, inference_settings(tmp))
            )
            if train:
                row["default_train"], row["default_train_note"] = _leg(
                    lambda: _train(tmp, {}, {}, tmp + "/out-a")
                )

                def ours_train() -> str:
                    kw, targs = training_settings(tmp)
                    return _train(tmp, kw, targs, tmp + "/out-b")

                row["ours_train"], row["ours_train_note"] = _leg(ours_train)
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


def regressions(row: dict[str, Any]) -> list[str]:
    """The legs where the recommended settings fail and Transformers' defaults work."""
    out = []
    if row.get("default_load") and not row.get("ours_load"):
        out.append(f"{row['type']}: load+forward: {row['ours_attn']}")
    if row.get("default_train") and not row.get("ours_train"):
        out.append(f"{row['type']}: train: {row['ours_train_note']}")
    return out
