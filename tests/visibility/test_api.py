"""The public surface of hwbackends.visibility: names, errors, reports, import cost."""

from __future__ import annotations

import ast
import dataclasses
import json
import pathlib

import pytest

import hwbackends.visibility as vis
from hwbackends import Host, VisibilityError
from hwbackends.visibility import (
    VisibilityReport,
    VisibleUnit,
    explain_visibility,
    variables_for,
    visibility_env,
    visibility_unset,
    visible_devices,
)

BACKENDS = ["cuda", "rocm", "xpu", "neuron", "tpu", "hpu", "npu", "mlu", "musa", "mps", "cpu"]
PKG = pathlib.Path(vis.__file__).parent / "_visibility"  # the engine behind the public module


def test_all_names_exist() -> None:
    for name in vis.__all__:
        assert hasattr(vis, name)
    assert {"visible_devices", "explain_visibility", "visibility_env", "variables_for"} <= set(
        vis.__all__
    )


@pytest.mark.parametrize("name", ["", "CUDA", "gpu", "nvidia", " cuda"])
def test_unknown_backend_lists_known_names(name: str) -> None:
    with pytest.raises(VisibilityError) as info:
        visible_devices(name, {}, Host.from_dict({}))
    for known in BACKENDS:
        assert known in str(info.value)
    assert info.value.expected and info.value.fix


def test_non_string_backend_and_env() -> None:
    with pytest.raises(VisibilityError):
        variables_for(3)  # type: ignore[arg-type]
    with pytest.raises(VisibilityError):
        explain_visibility("cuda", ["CUDA_VISIBLE_DEVICES"], Host.from_dict({}))  # type: ignore[arg-type]
    with pytest.raises(VisibilityError):
        explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": 0}, Host.from_dict({}))  # type: ignore[dict-item]


def test_variables_for_every_backend() -> None:
    expected = {
        "cuda": ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"),
        "rocm": (
            "ROCR_VISIBLE_DEVICES",
            "HIP_VISIBLE_DEVICES",
            "CUDA_VISIBLE_DEVICES",
            "GPU_DEVICE_ORDINAL",
        ),
        "neuron": ("NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES", "NEURON_LOGICAL_NC_CONFIG"),
        "hpu": ("HABANA_VISIBLE_MODULES",),
        "npu": ("ASCEND_RT_VISIBLE_DEVICES",),
        "mlu": ("MLU_VISIBLE_DEVICES",),
        "musa": ("MUSA_VISIBLE_DEVICES",),
        "mps": (),
        "cpu": (),
    }
    for name, want in expected.items():
        assert variables_for(name) == want
    assert "TPU_VISIBLE_CHIPS" in variables_for("tpu")
    assert "TPU_CHIPS_PER_PROCESS_BOUNDS" in variables_for("tpu")
    assert set(variables_for("xpu")) == {
        "ZE_AFFINITY_MASK",
        "ZE_FLAT_DEVICE_HIERARCHY",
        "ZE_ENABLE_PCI_ID_DEVICE_ORDER",
        "ONEAPI_DEVICE_SELECTOR",
    }
    for name in BACKENDS:
        assert isinstance(visibility_unset(name), tuple)


def test_report_is_frozen_and_json_able() -> None:
    host = Host.from_dict(
        {"devices": [{"vendor": "nvidia", "uuid": "GPU-1"}, {"vendor": "nvidia", "uuid": "GPU-2"}]}
    )
    report = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "1"}, host)
    assert isinstance(report, VisibilityReport)
    assert report.physical == [1]
    assert report.units == (VisibleUnit(0, 1, 1, None, "GPU-2"),)
    assert report.variables == {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": None}
    data = json.loads(json.dumps(report.to_dict()))
    assert data["physical"] == [1]
    assert data["units"][0]["label"] == "GPU-2"
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.units[0].physical_index = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        report.variables["X"] = "1"  # type: ignore[index]


def test_steps_name_every_variable_read() -> None:
    host = Host.from_dict({"devices": [{"vendor": "amd"}]})
    report = explain_visibility("rocm", {"HIP_VISIBLE_DEVICES": "0"}, host)
    text = "\n".join(report.steps)
    for name in variables_for("rocm"):
        assert name in text
        assert name in report.variables


def test_writer_rejects_bad_selections() -> None:
    host = Host.from_dict({"devices": [{"vendor": "nvidia"}, {"vendor": "nvidia"}]})
    for bad in ([2], [-1], [0, 0], ["0"], [True], "01"):
        with pytest.raises(VisibilityError):
            visibility_env("cuda", bad, host)  # type: ignore[arg-type]


def test_writer_verifies_itself_against_the_reader() -> None:
    # Two GPUs whose UUIDs are prefixes of each other: the short one is ambiguous to CUDA
    # (spec §1.1 rule 8, unique prefixes), so the writer must refuse rather than lie.
    host = Host.from_dict(
        {
            "devices": [
                {"vendor": "nvidia", "uuid": "GPU-12"},
                {"vendor": "nvidia", "uuid": "GPU-123", "mig": [{"uuid": "MIG-9"}]},
            ]
        }
    )
    with pytest.raises(VisibilityError, match="cannot express"):
        visibility_env("cuda", [0], host)


def test_package_imports_stay_cheap() -> None:
    # Module-level imports of the engine: standard library only, never re, json, typing or
    # dataclasses (the selection path reads visibility); only the Protocol shapes need typing.
    # Within hwbackends: the engine itself and the bottom layer's errors and records.
    own = {
        "hwbackends._base.errors",
        "hwbackends._base.record",
        *(f"hwbackends._visibility.{p.stem}" for p in PKG.glob("*.py")),
    }
    for path in PKG.glob("*.py"):
        allowed = {"__future__", "_collections_abc", "sys", "types", *own}
        if path.name == "shapes.py":
            allowed |= {"collections.abc", "typing"}
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Import):
                names = {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                names = {node.module or ""}
            else:
                continue
            assert names <= allowed, f"{path.name} imports {names}"


def test_the_engine_reaches_only_the_layers_below_it() -> None:
    # The engine is pure: no selection, no plugin kit. Name lookup among the installed
    # plugins is hwbackends.visibility's, above it.
    below = ("hwbackends._base.", "hwbackends._machine.host", "hwbackends._visibility")
    for path in PKG.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hwbackends"):
                assert node.module.startswith(below), f"{path.name} imports {node.module}"
            assert not (isinstance(node, ast.ImportFrom) and node.level), path.name


def test_a_backend_name_accepts_any_hostlike() -> None:
    from types import SimpleNamespace as NS

    gpu = NS(vendor="nvidia", uuid="GPU-a", pci_bus_id="0000:01:00.0", name="x", arch=None,
             extra={})  # fmt: skip
    other = NS(vendor="amd", uuid=None, pci_bus_id="0000:02:00.0", name="y", arch=None, extra={})
    host = NS(devices=[other, gpu, gpu], cuda_fastest_first=None)
    assert visible_devices("cuda", {"CUDA_VISIBLE_DEVICES": "1"}, host) == [1]
    with pytest.raises(VisibilityError, match="the host object has no usable device list"):
        visible_devices("cuda", {}, 5)  # type: ignore[arg-type]
