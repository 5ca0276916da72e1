"""What the installed Accelerate and Transformers decide for a training process, read from
their source where they are installed: ``ddp_backend``'s choices, the device types
Accelerate's ``PartialState`` forms a process group for, and whether it forms one here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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
