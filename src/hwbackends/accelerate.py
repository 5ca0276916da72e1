"""``TrainingArguments`` / Accelerate settings for this hardware (imports stay inside)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._target import resolve_target

if TYPE_CHECKING:
    from ._host import Host
    from ._protocol import Backend, Device

__all__ = ["TrainingPlan", "plan_training", "training_kwargs"]

# transformers/training_args.py declares these as the argparse choices of ddp_backend
# (docs/reference/hf-integration.md §3.3); read at run time when transformers is installed.
_DDP_CHOICES_FALLBACK = ("nccl", "gloo", "mpi", "xccl", "hccl", "cncl", "mccl")


def _ddp_choices() -> tuple[str, ...]:
    try:
        import dataclasses

        from transformers import TrainingArguments
    except ImportError:
        return _DDP_CHOICES_FALLBACK
    for f in dataclasses.fields(TrainingArguments):
        if f.name == "ddp_backend":
            choices = f.metadata.get("choices")
            if choices:
                return tuple(str(c) for c in choices)
    return _DDP_CHOICES_FALLBACK


def _launched(env: Mapping[str, str]) -> bool:
    """Under torchrun / accelerate launch / mpirun (one process of several)."""
    if "LOCAL_RANK" in env:
        return True
    for k in ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        v = env.get(k, "")
        if v.isdigit() and int(v) > 1:
            return True
    return False


def _available_reporters() -> list[str]:
    try:
        from transformers import integrations
    except ImportError:
        return []
    found: Any = integrations.get_available_reporting_integrations()  # type: ignore[attr-defined,no-untyped-call]
    return [str(r) for r in found]


@dataclass(frozen=True)
class TrainingPlan:
    """``TrainingArguments`` keyword arguments with the reason for each."""

    kwargs: dict[str, Any]
    backend: str
    reasons: Mapping[str, str]
    dropped_reporters: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kwargs": dict(self.kwargs),
            "backend": self.backend,
            "reasons": dict(self.reasons),
            "dropped_reporters": list(self.dropped_reporters),
        }


def plan_training(
    *,
    backend: str | Backend | None = None,
    device: Device | int | None = None,
    report_to: str | Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    host: Host | None = None,
) -> TrainingPlan:
    """``training_kwargs`` with the reason for each setting."""
    t = resolve_target(backend, device, env=env, host=host)
    caps = t.caps
    kw: dict[str, Any] = {}
    why: dict[str, str] = {}
    if t.name == "cpu":
        kw["use_cpu"] = True
        why["use_cpu"] = "no accelerator is available to this process"
    src = caps.sources.get("training_precision", "capability table")
    if caps.training_precision == "bf16":
        kw["bf16"] = True
        why["bf16"] = f"native bf16 on {caps.arch or caps.device_type}: {src}"
    elif caps.training_precision == "fp16":
        kw["fp16"] = True
        why["fp16"] = f"no native bf16 on {caps.arch or caps.device_type}, fp16 is: {src}"
    else:
        why["precision"] = f"fp32: {src}"

    if _launched(t.env):
        collective = caps.distributed_backend
        if collective in _ddp_choices():
            kw["ddp_backend"] = collective
            why["ddp_backend"] = f"{collective} is the collective for {t.name} devices"
        else:
            why["ddp_backend"] = (
                f"{collective} is the collective for {t.name}, but TrainingArguments does not "
                "accept it as ddp_backend; Accelerate selects it by itself"
            )
    else:
        why["ddp_backend"] = (
            "not set: a single process has no process group (TrainingArguments would fail)"
        )

    dropped: list[str] = []
    exclude = {r for lim in caps.limitations for r in lim.report_to_exclude}
    if report_to is not None:
        wanted = [report_to] if isinstance(report_to, str) else list(report_to)
        if wanted == ["all"]:
            wanted = _available_reporters()
        if wanted == ["none"]:
            wanted = []
        kept = [r for r in wanted if r not in exclude]
        dropped = [r for r in wanted if r in exclude]
        kw["report_to"] = kept or "none"
        for r in dropped:
            lim = next(lim for lim in caps.limitations if r in lim.report_to_exclude)
            why[f"report_to:{r}"] = f"dropped: {lim.text} ({lim.source})"
    return TrainingPlan(kw, t.name, why, tuple(dropped))


def training_kwargs(
    *,
    backend: str | Backend | None = None,
    device: Device | int | None = None,
    report_to: str | Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    host: Host | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``transformers.TrainingArguments`` on this hardware.

    ``bf16``/``fp16`` by architecture, ``use_cpu`` without an accelerator, ``ddp_backend``
    under a launcher, and ``report_to`` (when given) without integrations known to break here.
    """
    return plan_training(
        backend=backend, device=device, report_to=report_to, env=env, host=host
    ).kwargs
