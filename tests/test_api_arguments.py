"""The public functions check their arguments: a wrong type or an impossible size is an
``ArgumentError`` (a ``HwBackendsError`` and a ``TypeError``) that says what was wrong, what
is expected and the fix, never an ``AttributeError`` from deep inside."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import hwbackends
from hwbackends import ArgumentError, Host, HwBackendsError, UnsupportedSettingError, explain
from hwbackends._base.errors import (
    BackendNotFoundError,
    HostFileError,
    VisibilityError,
)
from hwbackends.accelerate import training_kwargs
from hwbackends.visibility import visibility_env

ROOT = Path(__file__).resolve().parents[1]


def _pretrained(**kw: Any) -> Any:
    import hwbackends.transformers as hwt

    return hwt.pretrained_kwargs(**kw)


def _training(**kw: Any) -> Any:
    import hwbackends.accelerate as hwa

    return hwa.training_kwargs(**kw)


def _plan(*args: Any, **kw: Any) -> Any:
    from hwbackends.distributed import launch_plan

    return launch_plan(*args, **kw)


@pytest.mark.parametrize(
    ("call", "where"),
    [
        (lambda: _pretrained(env=["CUDA_VISIBLE_DEVICES=0"]), "env=['CUDA_VISIBLE_DEVICES=0']"),
        (lambda: hwbackends.explain(env="CUDA_VISIBLE_DEVICES=0"), "env='CUDA_VISIBLE_DEVICES=0'"),
        (lambda: hwbackends.current(env={"CUDA_VISIBLE_DEVICES": 0}), "'CUDA_VISIBLE_DEVICES': 0"),
        (lambda: _training(env=("A=1",)), "env=('A=1',)"),
        (lambda: hwbackends.get(None), "hwbackends.get(name=None)"),
        (lambda: _plan("2"), "launch_plan(nproc_per_node='2')"),
        (lambda: _plan(2, nnodes=True), "launch_plan(nnodes=True)"),
        (lambda: _plan(0), "launch_plan(nproc_per_node=0)"),
    ],
)
def test_a_wrong_argument_is_named_with_the_fix(call: Callable[[], Any], where: str) -> None:
    with pytest.raises(ArgumentError) as info:
        call()
    exc = info.value
    assert isinstance(exc, HwBackendsError) and isinstance(exc, TypeError)
    assert where in exc.what and exc.expected and exc.fix


def test_a_huge_process_count_is_refused_at_once() -> None:
    t0 = time.perf_counter()
    with pytest.raises(ArgumentError, match="out of range") as info:
        _plan(100_000_000)
    assert time.perf_counter() - t0 < 1.0  # 1e6 took 17.7 s and 1.6 GB on 74a0405
    assert "4,096" in str(info.value.expected)


def test_more_processes_than_cores_is_warned() -> None:
    host = Host.from_file(ROOT / "docs" / "hosts" / "eight-h100.json")
    cores = host.cpu.count
    plan = _plan(cores + 1, backend="cpu", host=host, env={})
    assert any("oversubscribe" in w and f"{cores} CPU core" in w for w in plan.warnings)
    assert not any(
        "oversubscribe" in w for w in _plan(2, backend="cpu", host=host, env={}).warnings
    )


def test_a_misspelt_reporter_is_refused_with_the_name_meant() -> None:
    pytest.importorskip("transformers")
    with pytest.raises(UnsupportedSettingError, match=r"did you mean 'wandb'\?"):
        _training(report_to="wandbb", env={})
    with pytest.raises(UnsupportedSettingError, match="tensorbord"):
        _training(report_to=["wandb", "tensorbord"], env={})
    # the installed Transformers accepts the names the check lets through
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    from hwbackends._kit.hf_tables import reporter_names

    assert set(reporter_names() or ()) == {"all", "none", *INTEGRATION_TO_CALLBACK}


PLUGINS = ROOT / "plugins"
H100 = str(PLUGINS / "hwbackends-cuda" / "tests" / "hosts" / "h100-sxm-8.json")


def test_python_api_refusals_are_clear() -> None:
    with pytest.raises(HostFileError, match=r"host='file.json' is not a Host.*Host.from_file"):
        explain(host="file.json")  # type: ignore[arg-type]
    with pytest.raises(UnsupportedSettingError, match="report_to=5 is not a reporter name"):
        training_kwargs(report_to=5, host=Host.from_file(H100), env={})  # type: ignore[arg-type]
    with pytest.raises(BackendNotFoundError, match="backend name '' is empty"):
        hwbackends.get("")
    with pytest.raises(VisibilityError) as exc:
        visibility_env("cdua", [0], host=Host.from_file(H100), env={})
    msg = str(exc.value)
    assert msg.count("Expected") == 1 and msg.count("Fix:") == 1, msg
    assert "did you mean 'cuda'" in msg
    assert not re.search(r"pip install hwbackends-\W", msg)
    assert os.environ.get("HWBACKENDS_BACKEND") is None
