"""``hwbackends smoke``: prove the recommended settings on this machine with a tiny model.

Builds a random causal LM from a config (no download), saves it, reloads it with
``pretrained_kwargs()``, generates a few tokens, and runs one training step with
``training_kwargs()``. Each step is timed.
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "device": self.device,
            "settings": self.settings,
            "timings_s": {k: round(v, 4) for k, v in self.timings_s.items()},
            "tokens": self.tokens,
            "loss": self.loss,
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
) -> SmokeResult:
    """Run every step; raises ``SmokeError`` naming the step that failed."""
    from hwbackends.accelerate import training_kwargs
    from hwbackends.transformers import plan_pretrained

    t0 = time.perf_counter()
    plan = plan_pretrained(backend=backend, env=env, kernels=False)
    plan_s = time.perf_counter() - t0
    kw = plan.kwargs
    result = SmokeResult(
        backend=plan.backend,
        device=str(kw["device_map"]),
        settings={k: str(v).removeprefix("torch.") for k, v in kw.items()},
    )
    log(f"hwbackends smoke on {plan.backend} ({result.device})")
    log("  from_pretrained(" + ", ".join(f"{k}={v}" for k, v in result.settings.items()) + ")")

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
        from transformers import AutoModelForCausalLM, LlamaForCausalLM, Trainer, TrainingArguments
        from transformers.trainer_callback import PrinterCallback

        tlog: Any = transformers.utils.logging
        tlog.disable_progress_bar()
        tlog.set_verbosity_error()
    result.timings_s["plan"] = plan_s

    with tempfile.TemporaryDirectory(prefix="hwbackends-smoke-") as tmp:
        with _step(result, "build", log):
            torch.manual_seed(0)
            llama: Any = LlamaForCausalLM
            llama(tiny_llama_config()).save_pretrained(tmp)
        with _step(result, "load", log):
            model: Any = AutoModelForCausalLM.from_pretrained(tmp, **kw)
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
        targs = training_kwargs(backend=backend, env=env)
        log("  TrainingArguments(" + ", ".join(f"{k}={v}" for k, v in targs.items()) + ")")
        with _step(result, "train", log):
            data = [
                {"input_ids": torch.randint(0, 256, (16,)), "labels": torch.randint(0, 256, (16,))}
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
    log(f"  tokens {result.tokens}, training loss {result.loss:.4f}")
    return result
