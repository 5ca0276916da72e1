"""``hwbackends smoke``: prove the recommended settings on this machine with a tiny model.

Builds a random causal LM from a config (no download), saves it, reloads it with
``pretrained_kwargs()``, generates a few tokens, then loads it again with the training plan
(``training_plan()``: fp32 master weights under mixed precision) and runs one training step
with its ``TrainingArguments``. Each step is timed.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from hwbackends._base.errors import HwBackendsError
from hwbackends._base.record import field, mutable

__all__ = ["SmokeError", "SmokeResult", "run_smoke"]


class SmokeError(HwBackendsError):
    """A smoke-test step failed; the message names the step and the cause."""


@mutable
class SmokeResult:
    backend: str
    device: str
    settings: dict[str, Any] = field(default_factory=dict)
    timings_s: dict[str, float] = field(default_factory=dict)
    tokens: list[int] = field(default_factory=list)
    loss: float | None = None
    #: The training plan the train step ran: its precision, ``from_pretrained`` and
    #: ``TrainingArguments`` settings, and the dtype the trained weights really had.
    training: dict[str, Any] = field(default_factory=dict)
    #: What was exercised beyond the load: ``use_kernels`` (kernelize run, layers given a hub
    #: kernel, layers kept on their own forward and why), the attention, the dtype.
    exercised: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "device": self.device,
            "settings": self.settings,
            "timings_s": {k: round(v, 4) for k, v in self.timings_s.items()},
            "tokens": self.tokens,
            "loss": self.loss,
            "training": self.training,
            "exercised": self.exercised,
        }


def tiny_llama_config() -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=False,
    )


@contextmanager
def _step(result: SmokeResult, name: str, log: Callable[[str], None]) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    except HwBackendsError:
        raise
    except Exception as exc:
        raise SmokeError(
            f"smoke step {name!r} failed on {result.device}: {type(exc).__name__}: {exc}",
            fix="check the settings with `hwbackends env`; HWBACKENDS_DEBUG=1 shows the traceback",
        ) from exc
    dt = time.perf_counter() - t0
    result.timings_s[name] = dt
    log(f"  {name:<10} {dt * 1000:8.1f} ms")


def _torch_fix(name: str, env: Mapping[str, str] | None) -> str:
    from hwbackends._selection.registry import get, resolve_inputs
    from hwbackends._selection.target import torch_fix

    return torch_fix(get(name), resolve_inputs(env, None)[1])


def run_smoke(
    *,
    backend: str | None = None,
    env: Mapping[str, str] | None = None,
    new_tokens: int = 5,
    log: Callable[[str], None] = print,
    model: str | None = None,
) -> SmokeResult:
    """Run every step; raises ``SmokeError`` naming the step that failed.

    ``model``: a folder or cached hub id to load instead of the tiny Llama; the settings are
    planned for the class it names either way (``pretrained_kwargs(model=...)``)."""
    with tempfile.TemporaryDirectory(prefix="hwbackends-smoke-") as tmp:
        return _run(backend, env, new_tokens, log, model, tmp)


def _build_tiny(tmp: str) -> None:
    """The tiny random Llama smoke loads by default, saved to ``tmp`` (no download)."""
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    llama: Any = LlamaForCausalLM
    llama(tiny_llama_config()).save_pretrained(tmp)


def _run(
    backend: str | None,
    env: Mapping[str, str] | None,
    new_tokens: int,
    log: Callable[[str], None],
    given: str | None,
    tmp: str,
) -> SmokeResult:
    """Run every step; raises ``SmokeError`` naming the step that failed."""
    from hwbackends.accelerate import training_plan
    from hwbackends.transformers import plan_pretrained

    t0 = time.perf_counter()
    # the backend checked before torch is imported; the settings are planned again below
    # for the class of the model loaded, as `hwbackends env --model` plans them
    plan = plan_pretrained(backend=backend, env=env, model=given)
    plan_s = time.perf_counter() - t0
    result = SmokeResult(backend=plan.backend, device=str(plan.kwargs["device_map"]))
    log(f"hwbackends smoke on {plan.backend} ({result.device})")

    with _step(result, "import", log):
        try:
            import torch
        except ImportError as exc:
            raise SmokeError(
                f"smoke needs torch, and torch cannot be imported here: {type(exc).__name__}: "
                f"{exc}",
                f"torch importable by {sys.executable}",
                _torch_fix(plan.backend, env),
            ) from exc
        import transformers
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
        from transformers.trainer_callback import PrinterCallback

        tlog: Any = transformers.utils.logging
        tlog.disable_progress_bar()
        tlog.set_verbosity_error()
    path = given or tmp
    if given is None:
        with _step(result, "build", log):
            _build_tiny(tmp)
    t1 = time.perf_counter()
    plan = plan_pretrained(backend=backend, env=env, model=path)
    result.timings_s["plan"] = plan_s + time.perf_counter() - t1
    kw = plan.kwargs
    result.settings = {k: str(v).removeprefix("torch.") for k, v in kw.items()}
    log("  from_pretrained(" + ", ".join(f"{k}={v}" for k, v in result.settings.items()) + ")")

    with _step(result, "load", log), _hub_offline():
        # offline: kernelize runs for real with the installed kernels package, and a layer
        # whose hub kernel is not in the local cache keeps its own forward (nothing is
        # downloaded; the report says which layers would need the Hub)
        model: Any = AutoModelForCausalLM.from_pretrained(path, **kw)
    result.exercised = _exercised(model, kw, plan)
    for line in _exercised_lines(result.exercised):
        log(f"  {line}")
    with _step(result, "generate", log):
        ids = torch.tensor([[1, 2, 3, 4]], device=model.device)
        out = model.generate(
            ids,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            pad_token_id=0,
        )
        result.tokens = [int(x) for x in out[0, ids.shape[1] :]]
    # training loads its own weights: fp32 master weights under mixed precision
    setup = training_plan(backend=backend, env=env, model=path)
    targs = setup.training_kwargs
    shown = {k: str(v).removeprefix("torch.") for k, v in setup.pretrained_kwargs.items()}
    result.training = {"precision": setup.precision, "from_pretrained": shown,
                       "training_arguments": dict(targs)}  # fmt: skip
    log(f"  training plan ({setup.precision}): from_pretrained("
        + ", ".join(f"{k}={v}" for k, v in shown.items()) + ")")  # fmt: skip
    log("  TrainingArguments(" + ", ".join(f"{k}={v}" for k, v in targs.items()) + ")")
    with _step(result, "train", log):
        with _hub_offline():
            model = AutoModelForCausalLM.from_pretrained(path, **setup.pretrained_kwargs)
        # token ids inside the vocabulary of the model loaded (--model may be any size)
        vocab = min(int(model.config.get_text_config().vocab_size or 256), 256)
        data = [
            {"input_ids": torch.randint(0, vocab, (16,)), "labels": torch.randint(0, vocab, (16,))}
            for _ in range(4)
        ]
        args = TrainingArguments(
            output_dir=tmp,
            max_steps=1,
            per_device_train_batch_size=2,
            report_to="none",
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            **targs,
        )
        trainer = Trainer(model=model, args=args, train_dataset=data)
        trainer.remove_callback(PrinterCallback)  # keep the report to our own lines
        out_train = trainer.train()
        result.loss = float(out_train.training_loss)
        result.training["trained_dtype"] = str(model.dtype).removeprefix("torch.")
    log(f"  tokens {result.tokens}, training loss {result.loss:.4f}")
    return result


@contextmanager
def _hub_offline() -> Iterator[None]:
    """Hugging Face Hub access off for the load (``HF_HUB_OFFLINE``), then as it was.

    huggingface_hub reads the variable once, into ``constants.HF_HUB_OFFLINE``, when first
    imported; both are set, and both restored."""
    import os

    old_env = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    consts = sys.modules.get("huggingface_hub.constants")
    old_const = getattr(consts, "HF_HUB_OFFLINE", None)
    if consts is not None:
        consts.HF_HUB_OFFLINE = True  # type: ignore[attr-defined]
    try:
        yield
    finally:
        if old_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old_env
        if consts is not None:
            consts.HF_HUB_OFFLINE = old_const  # type: ignore[attr-defined]


def _exercised(model: Any, kw: Mapping[str, Any], plan: Any) -> dict[str, Any]:
    """What the load really did with the recommended settings."""
    out: dict[str, Any] = {
        "attn_implementation": str(getattr(model.config, "_attn_implementation", "")),
        "dtype": str(getattr(model, "dtype", "")).removeprefix("torch."),
    }
    if not kw.get("use_kernels"):
        out["use_kernels"] = {
            "requested": False,
            "why": plan.reasons.get("use_kernels", "not enabled (kernels=False)"),
        }
        return out
    hub: list[str] = []
    kept: list[str] = []
    for name, mod in model.named_modules():
        layer = getattr(mod, "kernel_layer_name", None)
        if layer is None:
            continue  # not a layer kernels can replace
        bound = getattr(mod.forward, "__func__", None)
        own = getattr(type(mod), "forward", None)
        (kept if bound is None or bound is own else hub).append(f"{name} ({layer})")
    out["use_kernels"] = {
        "requested": True,
        "kernelized": bool(getattr(model, "use_kernels", False) or hub or kept),
        "hub_kernels": hub,
        "own_forward": kept,
        "why": _kernels_why(hub, kept, plan),
    }
    return out


def _kernels_why(hub: list[str], kept: list[str], plan: Any) -> str:
    """What became of the layers kernelize saw, true for this device: only the layers the
    installed kernels map for its device key can get a hub kernel at all."""
    if hub and not kept:
        return "every replaceable layer got a kernel from the local cache"
    key = plan.kernels.device_key
    if plan.hub_kernels is not None:  # the plan read the mapping for this device and mode
        mapped = {k.layer for k in plan.hub_kernels}
    else:
        from hwbackends._kit.hf_tables import kernel_layers, transformers_tables

        mapped = set(kernel_layers(key, None, transformers_tables(None))) if key else set()
    fetchable = [k for k in kept if k.rsplit("(", 1)[-1].rstrip(")") in mapped]
    if not fetchable:
        return (
            f"no kept layer has a hub kernel for device key {key!r}: they "
            "keep their own forward with or without Hub access"
        )
    return (
        "the Hub was not asked (offline): layers whose kernel is not in the local cache keep "
        f"their own forward; a run with Hub access downloads {len(fetchable)} of them"
    )


def _exercised_lines(ex: Mapping[str, Any]) -> list[str]:
    lines = [f"exercised: attn_implementation={ex['attn_implementation']}, dtype={ex['dtype']}"]
    k = ex.get("use_kernels") or {}
    if not k.get("requested"):
        lines.append(f"use_kernels not requested: {k.get('why', '')}")
        return lines
    n_hub, n_own = len(k["hub_kernels"]), len(k["own_forward"])
    lines.append(
        f"use_kernels=True: kernelize ran over {n_hub + n_own} replaceable layer(s); "
        f"{n_hub} got a hub kernel, {n_own} kept their own forward ({k['why']})"
    )
    return lines
