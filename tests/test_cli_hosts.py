"""CLI commands on simulated GPU hosts: devices, pin, launch-plan, colour."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from coretest import run_main

from hwbackends.cli import _Style

PLUGINS = Path(__file__).resolve().parent.parent / "plugins"
MIXED = str(PLUGINS / "hwbackends-cuda" / "tests" / "hosts" / "mixed-4-unknown-order.json")
MI300 = str(PLUGINS / "hwbackends-rocm" / "tests" / "hosts" / "mi300x-8.json")


def test_devices_table_and_uncertainty_warning(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "devices", "--host", MIXED, "--env", "CUDA_VISIBLE_DEVICES=3,1")
    assert code == 0
    rows = [line.split() for line in out.splitlines() if line.lstrip().startswith("cuda:")]
    assert [(r[0], r[2]) for r in rows] == [("cuda:0", "3"), ("cuda:1", "1")]
    assert "Set CUDA_DEVICE_ORDER=PCI_BUS_ID" in " ".join(out.split())


def test_pin_round_trips_through_devices(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "pin", "2,0", "--host", MIXED)
    assert (code, out.strip()) == (0, "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=2,0")
    env = [f"--env={w}" for w in out.split()]
    code, out, _ = run_main(capsys, "devices", "--host", MIXED, "--json", *env)
    assert [d["physical_index"] for d in json.loads(out)["devices"]] == [2, 0]


def test_pin_rocm_names_what_to_unset(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "pin", "1", "--host", MI300, "--json")
    assert code == 0
    d = json.loads(out)
    assert d["set"] == {"ROCR_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "0"}
    assert d["unset"] == ["CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"]


def test_launch_plan_on_rocm(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(
        capsys, "launch-plan", "--nproc-per-node", "2", "--host", MI300,
        "--env", "ROCR_VISIBLE_DEVICES=4,5,6,7", "--json", "train.py", "--lr", "1e-4",
    )  # fmt: skip
    assert code == 0
    plan = json.loads(out)
    assert plan["collective"] == "nccl"
    assert [r["physical"] for r in plan["ranks"]] == [[4], [5]]
    assert plan["node_env"] == {"ROCR_VISIBLE_DEVICES": "4,5", "HIP_VISIBLE_DEVICES": "0,1"}
    assert plan["torchrun"].endswith("torchrun --nproc-per-node 2 train.py --lr 1e-4")


def test_launch_plan_problems_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "launch-plan", "--nproc-per-node", "16", "--host", MI300,
                       "--tp-size", "3")  # fmt: skip
    assert code == 1
    assert "16 processes per node but only 8 rocm device(s) are visible" in out
    assert "tp_size × fsdp_size = 3 does not divide the world size 16" in out


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_and_not_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert _Style(Tty()).green("x") == "\033[32mx\033[0m"
    assert _Style(io.StringIO()).green("x") == "x"
    monkeypatch.setenv("NO_COLOR", "1")
    assert _Style(Tty()).green("x") == "x"


def test_a_value_the_runtime_rejects_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    trn1 = str(PLUGINS / "hwbackends-neuron" / "tests" / "hosts" / "trn1_32xlarge.json")
    code, out, err = run_main(
        capsys, "devices", "--host", trn1, "--env", "NEURON_RT_VISIBLE_CORES=3-1"
    )
    assert (code, out) == (2, "")
    assert err.startswith(
        "hwbackends: error: NEURON_RT_VISIBLE_CORES='3-1' has the entry '3-1', which the Neuron "
        "runtime cannot honour."
    )
    assert "Fix: use a core index, an inclusive range such as 0-3" in err


def test_pin_and_launch_plan_follow_the_xpu_hierarchy(capsys: pytest.CaptureFixture[str]) -> None:
    """Under COMPOSITE a physical index is a card; under FLAT (the default) a tile."""
    max1550 = str(PLUGINS / "hwbackends-xpu" / "tests" / "hosts" / "max1550_x4.json")
    composite = "ZE_FLAT_DEVICE_HIERARCHY=COMPOSITE"
    _, out, _ = run_main(capsys, "pin", "1,2", "--host", max1550, "--env", composite, "--json")
    pinned = json.loads(out)["set"]
    assert pinned["ZE_FLAT_DEVICE_HIERARCHY"] == "COMPOSITE"
    assert pinned["ZE_AFFINITY_MASK"] == "1,2"
    env = [f"--env={k}={v}" for k, v in pinned.items()]
    _, out, _ = run_main(capsys, "devices", "--host", max1550, "--json", *env)
    assert [(d["physical_index"], d["sub_index"]) for d in json.loads(out)["devices"]] == [
        (1, None),
        (2, None),
    ]
    _, out, _ = run_main(capsys, "launch-plan", "--nproc-per-node", "2", "--host", max1550, "--env",
                    composite, "--json")  # fmt: skip
    plan = json.loads(out)
    assert plan["node_env"]["ZE_FLAT_DEVICE_HIERARCHY"] == "COMPOSITE"
    assert plan["node_env"]["ZE_AFFINITY_MASK"] == "0,1"  # cards 0 and 1, not card 0's tiles
