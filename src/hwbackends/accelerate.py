"""``TrainingArguments`` / Accelerate settings for this hardware (imports stay inside)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hwbackends._base.record import frozen
from hwbackends._integrations.accelerate_state import (
    _GROUP_SIZES,
    _accel_int,
    _accelerate_forms_group,
    _ddp_choices,
    _truthy,
    _Unreadable,
    accelerate_group_devices,
)
from hwbackends._integrations.launch import LaunchError, LaunchInfo, detect_launch
from hwbackends._integrations.placement import _spread_caps
from hwbackends._integrations.rank import process_rank
from hwbackends._selection.target import resolve_target

if TYPE_CHECKING:
    from hwbackends._base.protocol import Backend, Capabilities, Device
    from hwbackends._machine.host import Host
    from hwbackends._selection.target import Target
    from hwbackends.transformers import PretrainedPlan

__all__ = [
    "TrainingPlan",
    "TrainingSetup",
    "accelerate_group_devices",
    "plan_training",
    "training_kwargs",
    "training_plan",
]


def _available_reporters() -> list[str]:
    try:
        from transformers import integrations
    except ImportError:
        return []
    found: Any = integrations.get_available_reporting_integrations()  # type: ignore[attr-defined,no-untyped-call]
    return [str(r) for r in found]


@frozen
class TrainingPlan:
    """``TrainingArguments`` keyword arguments with the reason for each."""

    kwargs: dict[str, Any]
    """The keyword arguments for ``transformers.TrainingArguments``: ``use_cpu``, ``bf16`` or
    ``fp16``, ``ddp_backend`` and ``report_to``, each only where it applies."""
    backend: str
    """The name of the backend the plan is for."""
    reasons: Mapping[str, str]
    """Why, by name: ``use_cpu``; ``bf16``, ``fp16`` or ``precision`` (neither set);
    ``ddp_backend`` (always, set or not); ``report_to:<name>`` for each reporter dropped."""
    dropped_reporters: tuple[str, ...] = ()
    """The ``report_to`` integrations dropped because the backend lists them as broken on
    this device (its limitations' ``report_to_exclude``)."""

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-able data."""
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
    """``training_kwargs`` with the reason for each setting.

    Every parameter, and every error, is as ``training_kwargs`` describes it in full.

    :param backend: the backend to plan for (``training_kwargs``'s ``backend``).
    :param device: the device whose capabilities decide (``training_kwargs``'s ``device``).
    :param report_to: ``TrainingArguments.report_to`` to filter, or None to leave it unset.
    :param env: the environment to read; None: ``os.environ`` (or a simulated host's ``env``).
    :param host: the machine to plan for; None: ``HWBACKENDS_HOST``'s file, else this one.
    :raises UnsupportedSettingError: when ``report_to`` is not a name or a list of names.
    :raises RankError: when this process's local rank has no visible device.
    :raises LaunchError: where ``TrainingArguments`` would fail or lose the launch's ranks
        (``training_kwargs`` says when).
    """
    _check_report_to(report_to)
    t = resolve_target(backend, device, env=env, host=host, rank_of=process_rank)
    return _training_for(t, report_to, live=env is None)


def _training_for(t: Target, report_to: str | Sequence[str] | None, live: bool) -> TrainingPlan:
    """``plan_training`` for a resolved target; ``live``: the environment is this process's
    own (an existing process group counts)."""
    kw: dict[str, Any] = {}
    why: dict[str, str] = {}
    if t.name == "cpu":
        kw["use_cpu"] = True
        why["use_cpu"] = "no accelerator is available to this process"
    _plan_precision(t, kw, why)
    _plan_ddp_backend(t, kw, why, live=live)
    dropped = _plan_report_to(t.caps, report_to, kw, why)
    return TrainingPlan(kw, t.name, why, dropped)


def _trained_on(t: Target) -> list[Capabilities]:
    """The devices one training process computes on: its own, or with no launcher and no
    device named every visible CUDA/ROCm device (the Trainer wraps the model in
    ``nn.DataParallel`` over ``torch.cuda.device_count()`` devices, transformers
    training_args.py ``_setup_devices``; other device types train on device 0)."""
    if t.rank is not None or t.chosen or t.caps.device_type != "cuda" or len(t.devices) < 2:
        return [t.caps]
    return _spread_caps(t)


def _plan_precision(t: Target, kw: dict[str, Any], why: dict[str, str]) -> None:
    """``bf16``/``fp16`` by architecture, or the launcher's own choice left in place."""
    caps = t.caps
    src = caps.sources.get("training_precision", "capability table")
    chosen = t.env.get("ACCELERATE_MIXED_PRECISION")
    if chosen is not None:
        # accelerate launch --mixed_precision (or its config file) exports it, and
        # TrainingArguments reads it when neither bf16 nor fp16 is passed
        # (transformers training_args.py __post_init__, "Mixed Precision"); an explicit
        # bf16=True here would override the launcher's choice.
        native = caps.training_precision or "fp32"
        why["precision"] = (
            f"{chosen.strip() or 'no'} as chosen by ACCELERATE_MIXED_PRECISION (accelerate "
            f"launch --mixed_precision), which TrainingArguments reads; not overridden (this "
            f"device's own choice would be {native}: {src})"
        )
        return
    spread = _trained_on(t)
    precision = _common_precision(spread)
    where = caps.arch or caps.device_type
    texts = {
        "bf16": f"native bf16 on {where}: {src}",
        "fp16": f"no native bf16 on {where}, fp16 is: {src}",
        "fp32": f"fp32: {src}",
    }
    if len({c.arch for c in spread}) > 1:
        archs = ", ".join(sorted({c.arch or c.device_type for c in spread}))
        every = f"every device the Trainer's DataParallel uses ({archs})"
        texts = {
            "bf16": f"native bf16 on {every}",
            "fp16": f"fp16, which {every} runs: not all of them run bf16 natively",
            "fp32": f"fp32: not all of {every} run bf16 or fp16 natively",
        }
    if precision in ("bf16", "fp16"):
        kw[precision] = True
        why[precision] = texts[precision]
    else:
        why["precision"] = texts["fp32"]


def _common_precision(spread: Sequence[Capabilities]) -> str:
    """bf16 where every device runs it natively, else fp16 where every device runs fp16
    well or natively, else fp32."""
    natives = {c.training_precision for c in spread}
    if natives == {"bf16"}:
        return "bf16"
    if natives <= {"bf16", "fp16"} and all("float16" in c.dtypes for c in spread):
        return "fp16"
    return "fp32"


def _rendezvous_missing(env: Mapping[str, str], cpu: bool) -> list[str]:
    """The variables the process group Accelerate starts will need and not find.

    On a device Accelerate calls ``init_process_group(backend)`` with neither rank nor
    address, so torch's ``env://`` rendezvous reads RANK, WORLD_SIZE, MASTER_ADDR and
    MASTER_PORT (torch/distributed/rendezvous.py ``_env_rendezvous_handler``: an unset or
    empty one raises "environment variable ... expected, but not set"). On CPU it passes
    rank and world size and sets MASTER_PORT to 29500 itself (accelerate/state.py
    ``PartialState.__init__``): MASTER_ADDR is left.
    """
    names = ("MASTER_ADDR",) if cpu else ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    return [n for n in names if not env.get(n)]


_INIT_FIX = (
    "call hwbackends.distributed.init_process_group() before training_kwargs() and "
    "TrainingArguments: it starts the group with the launcher's ranks and exports RANK, "
    "WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT"
)


def _launch_here(t: Target, live: bool) -> LaunchInfo | LaunchError:
    """``detect_launch`` for the plan's environment (an existing group counts under
    ``os.environ``), or why its variables describe no launch."""
    try:
        return detect_launch(None) if live else detect_launch(t.env)
    except LaunchError as exc:
        return exc


def _group_exists(live: bool) -> bool:
    import sys

    dist: Any = sys.modules.get("torch.distributed") if live else None
    return bool(dist is not None and dist.is_available() and dist.is_initialized())


def _group_cause(env: Mapping[str, str]) -> str:
    """The variable that makes Accelerate start a group, as ``NAME=value``: LOCAL_RANK, else
    (on CPU) the first world size it reads above one."""
    if _accel_int(env, "LOCAL_RANK", -1) != -1:
        return f"LOCAL_RANK={env['LOCAL_RANK'].strip()}"
    name = next((n for n in _GROUP_SIZES if _accel_int(env, n, -1) >= 0), "WORLD_SIZE")
    return f"{name}={env.get(name, '').strip()}"


def _refuse_broken_group(t: Target, cpu: bool, live: bool, info: LaunchInfo | LaunchError) -> None:
    """Raise where Accelerate will start a process group that cannot form: the rendezvous
    variables torch needs are not all set and no group exists yet."""
    missing = [] if _group_exists(live) else _rendezvous_missing(t.env, cpu)
    if not missing:
        return
    if isinstance(info, LaunchError):
        what = f"Accelerate starts a process group, though the launcher variables say: {info.what}"
        fix = info.fix or _INIT_FIX
    elif info.launcher == "none":
        cause = _group_cause(t.env)
        what = f"{cause} is set without a launcher, so Accelerate starts a process group"
        fix = (
            f"unset {cause.partition('=')[0]}"
            + (
                " (name the device with device=N or a visibility variable)"
                if "LOCAL" in cause
                else ""
            )
            + ", start the script with torchrun, or "
            + _INIT_FIX
        )
    else:
        what = f"this process was started by {info.launcher} and Accelerate starts a process group"
        fix = _INIT_FIX
    raise LaunchError(
        f"{what}, but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set: "
        f"TrainingArguments would fail ('environment variable {missing[0]} expected, but not "
        "set' from torch's env:// rendezvous, or Accelerate's own MASTER_ADDR error)",
        "the variables torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, "
        "MASTER_PORT), or a process group that already exists",
        fix,
    )


def _refuse_lost_ranks(t: Target, cpu: bool, info: LaunchInfo | LaunchError) -> None:
    """Raise where the launcher started several processes and Accelerate forms no group
    (it reads LOCAL_RANK, and on CPU the MPI and torch sizes): each would train alone."""
    if isinstance(info, LaunchError) or info.world_size < 2 or t.caps.device_type == "xla":
        return  # torch_xla: Accelerate always uses the xla group
    if not cpu and t.caps.device_type not in accelerate_group_devices()[0]:
        return  # Accelerate forms no group on this device type at all: said in the reason
    if info.launcher == "process_group":
        fix = (
            "export LOCAL_RANK (this process's index on its node) before TrainingArguments; "
            "Accelerate reads the existing group only under LOCAL_RANK"
        )
    else:
        fix = _INIT_FIX
    raise LaunchError(
        f"{info.launcher} started {info.world_size} processes (rank {info.rank} here: "
        f"{info.sources.get('rank', 'rank')}), but Accelerate reads neither that launcher's "
        "variables nor a LOCAL_RANK here, so TrainingArguments would form no process group "
        "and each process would train alone" + ("" if cpu else f" on {t.caps.device_type}:0"),
        "one process group over every rank",
        fix,
    )


def _plan_ddp_backend(t: Target, kw: dict[str, Any], why: dict[str, str], live: bool) -> None:
    """``ddp_backend`` exactly where Accelerate forms a process group; a refusal (with the
    fix) where TrainingArguments would fail or lose the launcher's ranks."""
    caps = t.caps
    cpu = t.name == "cpu" or _truthy(t.env.get("ACCELERATE_USE_CPU", ""))
    try:
        group = _accelerate_forms_group(t.env, caps.device_type, cpu=cpu)
    except _Unreadable as exc:
        why["ddp_backend"] = (
            f"not set: {exc}={t.env[str(exc)]!r} is not a number, and Accelerate reads it with "
            "int(), so PartialState (and TrainingArguments) will raise ValueError; unset it or "
            "start the script with its launcher"
        )
        return
    info = _launch_here(t, live)
    if group:
        _refuse_broken_group(t, cpu, live, info)
        collective = caps.distributed_backend
        if collective in _ddp_choices():
            kw["ddp_backend"] = collective
            why["ddp_backend"] = f"{collective} is the collective for {t.name} devices"
        else:
            why["ddp_backend"] = (
                f"{collective} is the collective for {t.name}, but TrainingArguments does not "
                "accept it as ddp_backend; Accelerate selects it by itself"
            )
        return
    _refuse_lost_ranks(t, cpu, info)
    if _accel_int(t.env, "LOCAL_RANK", -1) != -1 and not cpu:
        why["ddp_backend"] = (
            f"not set: Accelerate creates no process group on {caps.device_type} "
            f"({accelerate_group_devices()[1]}); each launched rank trains alone"
        )
    else:
        why["ddp_backend"] = (
            "not set: one process, and Accelerate forms no process group here (it needs "
            "LOCAL_RANK other than -1, or on CPU an MPI/torch world size above one); under "
            "srun or mpirun call hwbackends.distributed.init_process_group() before "
            "TrainingArguments"
        )


def _plan_report_to(
    caps: Capabilities, report_to: str | Sequence[str] | None, kw: dict[str, Any],
    why: dict[str, str],
) -> tuple[str, ...]:  # fmt: skip
    """``report_to`` without the integrations the backend lists as broken here."""
    if report_to is None:
        return ()
    exclude = {r for lim in caps.limitations for r in lim.report_to_exclude}
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
    return tuple(dropped)


def _check_report_to(report_to: object) -> None:
    """``report_to`` as TrainingArguments takes it: a name, a list of names, or None."""
    ok = report_to is None or isinstance(report_to, str)
    if not ok and isinstance(report_to, (list, tuple)):
        ok = all(isinstance(r, str) for r in report_to)
    if not ok:
        from hwbackends._base.errors import UnsupportedSettingError

        raise UnsupportedSettingError(
            f"report_to={report_to!r} is not a reporter name or a list of them",
            "None, 'all', 'none', a name such as 'tensorboard', or a list of names",
            "pass report_to='tensorboard' or report_to=['wandb', 'tensorboard']",
        )
    from hwbackends._kit.hf_tables import check_reporter_names

    check_reporter_names(report_to)


def training_kwargs(
    *,
    backend: str | Backend | None = None,
    device: Device | int | None = None,
    report_to: str | Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    host: Host | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``transformers.TrainingArguments`` on this hardware.

    ``bf16``/``fp16`` by architecture (with no launcher, every CUDA device the Trainer's
    ``DataParallel`` uses must run it natively), ``use_cpu`` without an accelerator,
    ``ddp_backend`` under a launcher, and ``report_to`` (when given) without integrations known
    to break here. See ``plan_training`` for the reasons. To load the model you will train,
    use ``training_plan``: fp32 master weights under mixed precision.

    :param backend: the backend to plan for. None: the one selected here (as
        ``hwbackends.explain()`` reports it). A name (``"cuda"``, any case): that backend, which
        must be installed and available here. A ``Backend`` object: used as it is.
    :param device: the device whose capabilities decide (precision, collective). None: this
        process's device: under a launcher its local rank's, else the first visible one. An
        ``int``: that logical index among the backend's visible devices. A ``Device``: that
        device. No device is set in the arguments: Accelerate picks it.
    :param report_to: ``TrainingArguments.report_to`` to filter: a name (``"wandb"``), a list
        of names, ``"all"`` (the integrations the installed Transformers finds) or ``"none"``.
        Integrations the backend lists as broken here are dropped (``"none"`` when nothing is
        left). None: ``report_to`` is not set. Another type raises ``UnsupportedSettingError``.
    :param env: the environment to read, name to value (a name left out is unset): the
        ``HWBACKENDS_*`` settings, the visibility variables, ``LOCAL_RANK`` and the launchers'
        variables, ``ACCELERATE_MIXED_PRECISION``, ``ACCELERATE_USE_CPU``. None:
        ``os.environ``, or a simulated ``host``'s own ``env``.
    :param host: the machine to plan for: a ``Host`` (``Host.from_file(path)`` for a simulated
        one). None: the host file ``HWBACKENDS_HOST`` names, else this machine.
    :raises UnsupportedSettingError: when ``report_to`` is not a name or a list of names.
    :raises RankError: when this process's local rank is not a number, is negative, or has no
        visible device.
    :raises BackendNotFoundError: when ``backend`` names no installed backend.
    :raises BackendUnavailableError: when ``backend`` names one that cannot run here.
    :raises HwBackendsError: when ``device`` is out of range or not a device.
    :raises LaunchError: where ``TrainingArguments`` with these settings would fail or train
        each launched rank alone, naming the fix (usually: call
        ``hwbackends.distributed.init_process_group()`` first): Accelerate would start a
        process group whose rendezvous variables are not all set (``mpiexec``/``mpirun``
        export no ``MASTER_ADDR``; a lone ``LOCAL_RANK`` has no ``RANK``), or a launcher
        started several processes and Accelerate would form no group (``srun``; ``mpirun`` on
        a device, where Accelerate reads only ``LOCAL_RANK``). Not raised where a process
        group already exists and Accelerate will use it.
    """
    return plan_training(
        backend=backend, device=device, report_to=report_to, env=env, host=host
    ).kwargs


@frozen
class TrainingSetup:
    """One plan for loading a model to train and for training it: ``from_pretrained`` and
    ``TrainingArguments`` keyword arguments that fit together (``training_plan``)."""

    pretrained: PretrainedPlan
    """The load: ``plan_pretrained``'s plan with the training dtype (``float32`` master
    weights under mixed precision; ``bfloat16`` for pure bf16)."""
    training: TrainingPlan
    """The ``TrainingArguments`` plan: ``plan_training``'s, for the same device."""
    precision: str
    """How the model trains: ``"bf16-mixed"`` or ``"fp16-mixed"`` (fp32 weights, autocast in
    the half type), ``"bf16-pure"`` (bf16 weights, asked for with ``pure_bf16=True``),
    ``"fp32"``, or ``"launcher:<value>"`` for the ``ACCELERATE_MIXED_PRECISION`` that
    ``accelerate launch --mixed_precision`` exported (the weights are fp32 then)."""

    @property
    def pretrained_kwargs(self) -> dict[str, Any]:
        """The keyword arguments for ``from_pretrained``."""
        return self.pretrained.kwargs

    @property
    def training_kwargs(self) -> dict[str, Any]:
        """The keyword arguments for ``TrainingArguments``."""
        return self.training.kwargs

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-able data."""
        return {
            "precision": self.precision,
            "pretrained": self.pretrained.to_dict(),
            "training": self.training.to_dict(),
        }


# Why fp16 weights must not meet fp16 mixed precision: Accelerate's fp16 mode creates a
# torch GradScaler, whose unscale_ refuses fp16 gradients (torch/amp/grad_scaler.py
# _unscale_grads_: "Attempting to unscale FP16 gradients."); Transformers' guide keeps the
# fp32 master weights (docs/source/en/perf_train_gpu_one.md, "Mixed precision").
_MASTER = (
    "float32: master weights for {amp} mixed precision (autocast computes in {amp}, the "
    "optimizer updates fp32 weights)"
)
_HALF_WEIGHTS = {
    "fp16": "; fp16 weights under fp16 mixed precision fail in GradScaler.unscale_ "
    "('Attempting to unscale FP16 gradients')",
    "bf16": "; bf16 weights would train with no fp32 copy (pure_bf16=True asks for that)",
}


def _amp_of(plan: TrainingPlan, env: Mapping[str, str]) -> str:
    """The mixed precision TrainingArguments will run: bf16/fp16 from the plan, else the
    launcher's ACCELERATE_MIXED_PRECISION (``launcher:<value>``), else fp32."""
    if plan.kwargs.get("bf16"):
        return "bf16"
    if plan.kwargs.get("fp16"):
        return "fp16"
    chosen = env.get("ACCELERATE_MIXED_PRECISION")
    if chosen is not None and chosen.strip().lower() not in ("", "no"):
        return f"launcher:{chosen.strip().lower()}"
    return "fp32"


def _pure_bf16_checked(t: Target, amp: str) -> None:
    """Pure bf16 needs native bf16 on every device the Trainer uses, and no fp16 AMP."""
    from hwbackends._base.errors import UnsupportedSettingError

    slow = [c.arch or c.device_type for c in _trained_on(t) if c.training_precision != "bf16"]
    if slow:
        raise UnsupportedSettingError(
            f"pure_bf16=True, but {', '.join(sorted(set(slow)))} ({t.name}) has no native bf16",
            "a device whose training precision is bf16 (capabilities().training_precision)",
            "leave pure_bf16=False: fp32 weights with this device's mixed precision",
        )
    if amp not in ("bf16", "fp32", "launcher:bf16"):
        raise UnsupportedSettingError(
            f"pure_bf16=True, but ACCELERATE_MIXED_PRECISION={amp.removeprefix('launcher:')} "
            "(accelerate launch --mixed_precision) asks for another mixed precision",
            "--mixed_precision bf16 or no with pure bf16 weights",
            "launch with --mixed_precision bf16, or leave pure_bf16=False",
        )


def training_plan(
    *,
    backend: str | Backend | None = None,
    device: Device | int | None = None,
    pure_bf16: bool = False,
    attention: str = "auto",
    kernels: bool | str = "auto",
    quantization: Any = None,
    report_to: str | Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    host: Host | None = None,
    model: Any = None,
) -> TrainingSetup:
    """The load and the training settings of a model you will train, planned together.

    ``pretrained_kwargs()`` loads for inference (weights in the device's half type);
    training those weights under the matching ``training_kwargs()`` precision would train
    without fp32 master weights, and fp16 weights under ``fp16=True`` fail in the first
    optimizer step. Here the weights are ``float32`` whenever the training runs mixed
    precision (``bf16``/``fp16``, or the launcher's ``--mixed_precision``) or fp32; they are
    ``bfloat16`` only with ``pure_bf16=True``, on devices that run bf16 natively. Every other
    setting is ``plan_pretrained``'s and ``plan_training``'s, for the same device.

    :param backend: the backend to plan for (``training_kwargs``'s ``backend``).
    :param device: the device to load onto and train on (``pretrained_kwargs``'s ``device``).
    :param pure_bf16: True to train bf16 weights with no fp32 copy (less memory, less
        precision in the updates): refused with ``UnsupportedSettingError`` where a device
        the Trainer uses has no native bf16, or the launcher chose fp16.
    :param attention: ``pretrained_kwargs``'s ``attention``.
    :param kernels: ``pretrained_kwargs``'s ``kernels``.
    :param quantization: ``pretrained_kwargs``'s ``quantization``.
    :param report_to: ``training_kwargs``'s ``report_to``.
    :param env: the environment to read; None: ``os.environ`` (or a simulated host's ``env``).
    :param host: the machine to plan for; None: ``HWBACKENDS_HOST``'s file, else this one.
    :param model: the model you will train (``pretrained_kwargs``'s ``model``): the attention
        is one its class supports in training.
    :raises UnsupportedSettingError: for ``pure_bf16`` where it cannot run, and as
        ``pretrained_kwargs`` and ``training_kwargs`` raise.
    :raises LaunchError: as ``training_kwargs`` raises, where ``TrainingArguments`` would fail
        or lose the launcher's ranks.
    """
    from hwbackends._integrations.placement import _device_map
    from hwbackends.transformers import PretrainedPlan, plan_for_target

    _check_report_to(report_to)
    t = resolve_target(backend, device, env=env, host=host, rank_of=process_rank)
    train = _training_for(t, report_to, live=env is None)
    amp = _amp_of(train, t.env)
    if pure_bf16:
        _pure_bf16_checked(t, amp)
    dtype = "bfloat16" if pure_bf16 else "float32"
    load = plan_for_target(
        t,
        attention=attention,
        kernels=kernels,
        quantization=quantization,
        dtype=dtype,
        model=model,
        purpose="training",
    )
    reasons = dict(load.reasons)
    if pure_bf16:
        reasons["dtype"] = "bfloat16: pure bf16 training, as asked (pure_bf16=True)"
        precision = "bf16-pure"
    elif amp == "fp32":
        reasons["dtype"] = "float32: the training runs in fp32"
        precision = "fp32"
    else:
        half = amp.removeprefix("launcher:")
        reasons["dtype"] = _MASTER.format(amp=half) + _HALF_WEIGHTS.get(half, "")
        precision = amp if amp.startswith("launcher:") else f"{amp}-mixed"
    if _device_map(t)[0] == "auto" and "device_map" in reasons:
        reasons["device_map"] += "; the Trainer then trains the spread model in one process"
    load = PretrainedPlan(
        load.kwargs, load.backend, load.device, reasons, load.warnings, load.kernels,
        load.quantization,
    )  # fmt: skip
    return TrainingSetup(load, train, precision)
