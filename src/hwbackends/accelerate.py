"""``TrainingArguments`` / Accelerate settings for this hardware (imports stay inside)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hwbackends._base.record import frozen
from hwbackends._integrations.rank import process_rank
from hwbackends._selection.target import resolve_target

if TYPE_CHECKING:
    from hwbackends._base.protocol import Backend, Device
    from hwbackends._machine.host import Host

__all__ = ["TrainingPlan", "accelerate_group_devices", "plan_training", "training_kwargs"]

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


# Accelerate 1.15.0 accelerate/state.py PartialState._prepare_backend: the device types it
# creates a process group for (under LOCAL_RANK; xla always). Read from the installed
# Accelerate when it can be; this copy is used when it cannot.
_GROUP_DEVICES_FALLBACK = ("xla", "mlu", "sdaa", "musa", "npu", "hpu", "cuda", "xpu", "neuron")
_STATE_PY = "accelerate/state.py PartialState._prepare_backend"
_group_cache: list[tuple[frozenset[str], str]] = []


def _devices_in(tree: Any) -> list[str]:
    """Device names tested by ``is_<dev>_available()`` / ``torch.<dev>.is_available()``."""
    import ast

    out: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        if isinstance(fn, ast.Name) and fn.id.startswith("is_") and fn.id.endswith("_available"):
            out.append(fn.id[3 : -len("_available")].removeprefix("torch_"))
        elif (
            isinstance(fn, ast.Attribute)
            and fn.attr == "is_available"
            and isinstance(fn.value, ast.Attribute)
            and isinstance(fn.value.value, ast.Name)
            and fn.value.value.id == "torch"
        ):
            out.append(fn.value.attr)
    return out


def accelerate_group_devices() -> tuple[frozenset[str], str]:
    """The torch device types Accelerate creates a process group for, and where that was read.

    Read (never imported) from the installed ``accelerate/state.py``: the devices that
    ``PartialState._prepare_backend`` tests for. A device type outside the set (``mps``,
    a native ``tpu``) runs each launched rank as its own single process.
    """
    if _group_cache:
        return _group_cache[0]
    import ast
    import importlib.util
    import os

    found: tuple[frozenset[str], str] | None = None
    try:
        spec = importlib.util.find_spec("accelerate")
        base = next(iter(spec.submodule_search_locations or []), None) if spec else None
        if base is not None:
            with open(os.path.join(base, "state.py"), encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and node.name == "_prepare_backend":
                    # the tests that pick a device; mpi/xccl/sagemaker are not device types
                    names = {n for n in _devices_in(node) if n not in ("mpi", "xccl")}
                    if "cuda" in names:
                        found = (frozenset(names), f"the installed {_STATE_PY}")
                    break
    except (ImportError, ValueError, OSError, SyntaxError):
        found = None
    if found is None:
        found = (frozenset(_GROUP_DEVICES_FALLBACK), f"{_STATE_PY}, accelerate 1.15.0")
    _group_cache.append(found)
    return found


# PartialState._prepare_backend on CPU (accelerate 1.15.0 accelerate/state.py): a group when
# LOCAL_RANK is not -1 or get_int_from_env over these sizes, in this order, is above one.
_GROUP_SIZES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "WORLD_SIZE")


class _Unreadable(Exception):
    """A variable Accelerate passes to ``int()`` that ``int()`` refuses: Accelerate raises."""


def _accel_int(env: Mapping[str, str], name: str, default: int) -> int:
    """``int(os.environ.get(name, default))``, as Accelerate reads LOCAL_RANK."""
    if name not in env:
        return default
    try:
        return int(env[name])
    except ValueError:
        raise _Unreadable(name) from None


def _accel_int_from_env(env: Mapping[str, str], names: Sequence[str], default: int) -> int:
    """Accelerate's ``get_int_from_env`` (utils/environment.py): the first value ≥ 0."""
    for name in names:
        value = _accel_int(env, name, -1)
        if value >= 0:
            return value
    return default


def _truthy(value: str) -> bool:
    """Transformers' ``strtobool`` on ACCELERATE_USE_CPU, without its error on other text."""
    return value.strip().lower() in ("y", "yes", "t", "true", "on", "1")


def _accelerate_forms_group(env: Mapping[str, str], device_type: str, cpu: bool) -> bool:
    """Whether Accelerate's ``PartialState`` will create a process group in this process.

    As ``_prepare_backend`` decides, reading values with ``int()`` (`` 2`` is 2, ``-1`` is
    "no launcher"): on CPU (``use_cpu``) when ``int(LOCAL_RANK) != -1`` or the first
    non-negative of PMI_SIZE, OMPI_COMM_WORLD_SIZE, MV2_COMM_WORLD_SIZE, WORLD_SIZE is above
    one; on a device only when ``int(LOCAL_RANK) != -1`` and only for the device types it
    knows. A ``ddp_backend`` set anywhere else makes TrainingArguments fail with "Default
    process group has not been initialized". Raises ``_Unreadable`` where Accelerate's
    ``int()`` would raise.
    """
    local = _accel_int(env, "LOCAL_RANK", -1) != -1
    if cpu:
        return local or _accel_int_from_env(env, _GROUP_SIZES, 1) > 1
    return local and device_type in accelerate_group_devices()[0]


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
    """
    _check_report_to(report_to)
    t = resolve_target(backend, device, env=env, host=host, rank_of=process_rank)
    caps = t.caps
    kw: dict[str, Any] = {}
    why: dict[str, str] = {}
    if t.name == "cpu":
        kw["use_cpu"] = True
        why["use_cpu"] = "no accelerator is available to this process"
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
    elif caps.training_precision == "bf16":
        kw["bf16"] = True
        why["bf16"] = f"native bf16 on {caps.arch or caps.device_type}: {src}"
    elif caps.training_precision == "fp16":
        kw["fp16"] = True
        why["fp16"] = f"no native bf16 on {caps.arch or caps.device_type}, fp16 is: {src}"
    else:
        why["precision"] = f"fp32: {src}"

    cpu = t.name == "cpu" or _truthy(t.env.get("ACCELERATE_USE_CPU", ""))
    try:
        group = _accelerate_forms_group(t.env, caps.device_type, cpu=cpu)
    except _Unreadable as exc:
        group = False
        why["ddp_backend"] = (
            f"not set: {exc}={t.env[str(exc)]!r} is not a number, and Accelerate reads it with "
            "int(), so PartialState (and TrainingArguments) will raise ValueError; unset it or "
            "start the script with its launcher"
        )
    if group:
        collective = caps.distributed_backend
        if collective in _ddp_choices():
            kw["ddp_backend"] = collective
            why["ddp_backend"] = f"{collective} is the collective for {t.name} devices"
        else:
            why["ddp_backend"] = (
                f"{collective} is the collective for {t.name}, but TrainingArguments does not "
                "accept it as ddp_backend; Accelerate selects it by itself"
            )
    elif "ddp_backend" in why:
        pass
    elif _accel_int(t.env, "LOCAL_RANK", -1) != -1 and not cpu:
        why["ddp_backend"] = (
            f"not set: Accelerate creates no process group on {caps.device_type} "
            f"({accelerate_group_devices()[1]}); each launched rank trains alone"
        )
    else:
        why["ddp_backend"] = (
            "not set: Accelerate forms no process group here (it needs LOCAL_RANK other than "
            "-1, or on CPU an MPI/torch world size above one), and without one "
            "TrainingArguments would fail; under srun or mpirun call "
            "hwbackends.distributed.init_process_group() before TrainingArguments"
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

    ``bf16``/``fp16`` by architecture, ``use_cpu`` without an accelerator, ``ddp_backend``
    under a launcher, and ``report_to`` (when given) without integrations known to break here.
    See ``plan_training`` for the reasons.

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
    """
    return plan_training(
        backend=backend, device=device, report_to=report_to, env=env, host=host
    ).kwargs
