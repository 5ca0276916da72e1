"""Cambricon MLU and Moore Threads MUSA (spec §8), Apple MPS (spec §9), CPU."""

from __future__ import annotations

import pytest

from hwbackends import Host, VisibilityError
from hwbackends.visibility import (
    explain_visibility,
    variables_for,
    visibility_env,
    visible_devices,
)

HOST = Host.from_dict(
    {
        "devices": [
            *[{"vendor": "cambricon"} for _ in range(4)],
            *[{"vendor": "mthreads"} for _ in range(2)],
            {"vendor": "apple", "name": "Apple M3"},
        ]
    }
)


@pytest.mark.parametrize(
    ("backend", "var", "n"),
    [("mlu", "MLU_VISIBLE_DEVICES", 4), ("musa", "MUSA_VISIBLE_DEVICES", 2)],
)
def test_cuda_like_lists_are_inferred(backend: str, var: str, n: int) -> None:
    # spec §8: vendor examples (MLU_VISIBLE_DEVICES=0,1,2,3; MUSA_VISIBLE_DEVICES=0,1) -> inferred
    assert visible_devices(backend, {}, HOST) == list(range(n))
    report = explain_visibility(backend, {var: "1,0"}, HOST)
    assert report.physical == [1, 0]
    assert report.uncertain and report.warnings
    assert visible_devices(backend, {var: ""}, HOST) == []
    assert visible_devices(backend, {var: "1,-1,0"}, HOST) == [1]
    assert visible_devices(backend, {var: "1,1"}, HOST) == []
    assert visibility_env(backend, [1, 0], HOST) == {var: "1,0"}
    with pytest.raises(VisibilityError):
        visibility_env(backend, [], HOST)


def test_mps_has_no_variable() -> None:
    # spec §9: no visibility variable; one GPU (pytorch torch/mps/__init__.py)
    assert variables_for("mps") == ()
    report = explain_visibility("mps", {"PYTORCH_ENABLE_MPS_FALLBACK": "0"}, HOST)
    assert report.physical == [0]
    assert report.units[0].label == "mps"
    assert any("no visibility" in s for s in report.steps)
    assert visible_devices("mps", {}, Host.from_dict({})) == []
    assert visibility_env("mps", [0], HOST) == {}
    with pytest.raises(VisibilityError):
        visibility_env("mps", [], HOST)


def test_cpu_has_no_variable_and_no_units() -> None:
    report = explain_visibility("cpu", {"CUDA_VISIBLE_DEVICES": "0"}, HOST)
    assert report.physical == [] and report.steps
    assert visibility_env("cpu", [], HOST) == {}
    with pytest.raises(VisibilityError):
        visibility_env("cpu", [0], HOST)
