"""Hidden devices: when the visibility variables leave a backend with
hardware no device, every surface (``devices``, ``env``, ``env --verbose``, ``explain``, each
with ``--json``, and ``hwbackends.explain()``) carries the engine's reason for each entry and
the fix, and none prints a line that contradicts it (the cpu backend's "all 0 device(s) are
visible").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from coretest import needs_plugins

from hwbackends import Host, explain
from hwbackends.cli import main

PLUGINS = Path(__file__).resolve().parent.parent / "plugins"
HOSTS = {
    "h100": PLUGINS / "hwbackends-cuda" / "tests" / "hosts" / "h100-sxm-8.json",
    "a100-mig": PLUGINS / "hwbackends-cuda" / "tests" / "hosts" / "a100-mig.json",
    "mi300x": PLUGINS / "hwbackends-rocm" / "tests" / "hosts" / "mi300x-8.json",
}

pytestmark = needs_plugins

# (host, variables, backend, a fragment of the engine's per-entry reason, devices the host has)
CASES = [
    ("h100", {"CUDA_VISIBLE_DEVICES": "GPU-0"}, "cuda", "'GPU-0' is a prefix of 8 GPU UUIDs", 8),
    ("h100", {"CUDA_VISIBLE_DEVICES": "1,1"}, "cuda", "Duplicate entry: no GPU is visible", 8),
    ("h100", {"CUDA_VISIBLE_DEVICES": "-1"}, "cuda", "Entry 0 '-1' is negative", 8),
    ("h100", {"CUDA_VISIBLE_DEVICES": "all"}, "cuda", "'all' is not a number or UUID", 8),
    ("h100", {"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, "cuda", "'NoDevFiles' is not a number", 8),
    ("h100", {"CUDA_VISIBLE_DEVICES": "\uff11"}, "cuda", "is not a number or UUID", 8),
    (
        "a100-mig",
        {"CUDA_VISIBLE_DEVICES": "MIG-GPU-ffffffff-0000/1/0"},
        "cuda",
        "names no GPU",
        3,
    ),
    (
        "mi300x",
        {"HIP_VISIBLE_DEVICES": "1", "ROCR_VISIBLE_DEVICES": "0"},
        "rocm",
        "HIP_VISIBLE_DEVICES entry 0 '1' is not a valid index of the 1 ROCr-visible GPU(s)",
        8,
    ),
]
IDS = [f"{c[0]}-{'-'.join(f'{k}={v}' for k, v in c[1].items())}" for c in CASES]
CONTRADICTIONS = ("No visibility variable is declared", "all 0 device(s)")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(("host", "env", "backend", "reason", "n"), CASES, ids=IDS)
def test_every_surface_says_why_and_how_to_fix(
    host: str,
    env: dict[str, str],
    backend: str,
    reason: str,
    n: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["--host", str(HOSTS[host])] + [a for k, v in env.items() for a in ("--env", f"{k}={v}")]
    names = " and ".join(env) if len(env) == 1 else None
    for command in (["devices"], ["env"], ["env", "--verbose"], ["explain"]):
        out = flat(run(capsys, *command, *args))
        assert reason in out, (command, out)
        assert f"{backend}: " in out and f"hides all {n} device(s)" in out, command
        assert "Fix: unset" in out and f"to see all {n} {backend} device(s)" in out, command
        if names:
            assert f"unset {names}" in out
        for bad in CONTRADICTIONS:
            assert bad not in out, (command, bad)
    for command in ("devices", "env", "explain"):
        d = json.loads(run(capsys, command, "--json", *args))
        (gone,) = d["hidden"]
        assert gone["backend"] == backend
        assert gone["variables"] == env
        assert any(reason in r for r in gone["reasons"]), gone["reasons"]
        assert gone["physical_devices"] == n
        assert gone["fix"].startswith("unset ")
        assert any(w.startswith(f"{backend} hardware is present") for w in d["warnings"])
        text = json.dumps(d)
        for bad in CONTRADICTIONS:
            assert bad not in text, (command, bad)


@pytest.mark.parametrize(("host", "env", "backend", "reason", "n"), CASES, ids=IDS)
def test_the_python_report_carries_the_reasons(
    host: str, env: dict[str, str], backend: str, reason: str, n: int
) -> None:
    report = explain(env=env, host=Host.from_file(HOSTS[host]))
    assert report.chosen == "cpu"
    (gone,) = report.hidden
    assert gone["backend"] == backend and gone["physical_devices"] == n
    assert any(reason in r for r in gone["reasons"])
    assert report.visibility is None  # cpu's own "every device is visible" is not the answer
    status = report.status(backend)
    assert reason.split(":")[0] in status.reason or reason in " ".join(gone["reasons"])
    warning = next(w for w in report.warnings if w.startswith(f"{backend} hardware is present"))
    assert "Fix: unset" in warning


def test_pin_selects_the_hidden_backends_devices(capsys: pytest.CaptureFixture[str]) -> None:
    """The fix says `hwbackends pin 0,1`: under the hiding variable it must print the cuda
    setting, not refuse because the cpu backend was chosen."""
    out = run(capsys, "pin", "0,1", "--host", str(HOSTS["h100"]), "--env",
              "CUDA_VISIBLE_DEVICES=GPU-0")  # fmt: skip
    assert out.strip() == "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0,1"


def test_a_partial_list_is_not_reported_as_hidden() -> None:
    report = explain(env={"CUDA_VISIBLE_DEVICES": "4,5"}, host=Host.from_file(HOSTS["h100"]))
    assert report.chosen == "cuda" and report.hidden == ()
    assert report.visibility is not None and report.visibility["physical"] == [4, 5]
