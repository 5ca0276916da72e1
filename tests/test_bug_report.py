"""What a bug reporter pastes (``hwbackends env --issue`` and ``env --json``'s ``system``):
OS release, glibc, numpy, the torch build's CUDA/cuDNN/NCCL, the Accelerate config in use,
read from files and metadata, without importing torch."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest

from hwbackends import Host
from hwbackends.cli import main
from hwbackends.cli._issue import os_release, system_facts

ROOT = Path(__file__).resolve().parents[1]


def _version_or_none(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def test_this_machines_facts_agree_with_python_and_the_metadata(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    (tmp_path / "accelerate").mkdir()
    (tmp_path / "accelerate" / "default_config.yaml").write_text("mixed_precision: bf16\n")
    assert main(["env", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)["system"]
    lib, ver = platform.libc_ver()
    if lib == "glibc":
        assert facts["glibc"] == f"glibc {ver}"
    numpy = _version_or_none("numpy")  # the wheels' run has no numpy: None, "not installed"
    assert facts["numpy"] == numpy
    assert facts["accelerate_config"]["text"] == "mixed_precision: bf16\n"
    assert main(["env", "--issue"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Copy and paste the text below into your GitHub issue.")
    for needle in (
        f"- NumPy version: {numpy or 'not installed'}",
        "- PyTorch version: ",
        "mixed_precision: bf16",
    ):
        assert needle in out, needle
    if facts["os_release"]:
        assert facts["os_release"] in out


def test_the_os_release_of_a_tree(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "os-release").write_text('NAME="X"\nPRETTY_NAME="Tree OS 1.0"\n')
    assert os_release(str(tmp_path)) == "Tree OS 1.0"
    assert os_release(str(tmp_path / "none")) is None


def test_the_torch_builds_runtime_versions_come_from_its_wheels() -> None:
    data = json.loads((ROOT / "docs" / "hosts" / "eight-h100.json").read_text())
    data["packages"].update({"nvidia-cudnn-cu12": "9.10.2.21", "nvidia-nccl-cu12": "2.27.3"})
    facts = system_facts(Host.from_dict(data, source="test"), {})
    assert facts["runtime"] == {
        "cuda": "12.8", "cudnn": "9.10.2.21", "nccl": "2.27.3", "hip": None, "rccl": None
    }  # fmt: skip
    assert facts["os_release"] is None and facts["accelerate_config"] is None  # simulated


def test_the_issue_block_imports_no_torch_and_is_quick() -> None:
    code = (
        "import sys, time\n"
        "t = time.perf_counter()\n"
        "from hwbackends.cli import main\n"
        "main(['env', '--issue'])\n"
        "print('torch' in sys.modules, time.perf_counter() - t)\n"
    )
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded, seconds = out.stdout.strip().splitlines()[-1].split()
    assert loaded == "False"
    assert float(seconds) < 1.5 and time.perf_counter() - t0 < 5  # about 0.2 s on 2 cores
