"""scripts/test.sh takes torch from PyTorch's CPU wheel index where no GPU is present (on PyPI,
torch for Linux is the CUDA build), and says that it installs into the README's .venv."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = (ROOT / "scripts" / "test.sh").read_text()
GPU_NODES = ("/dev/nvidiactl", "/dev/kfd", "/dev/dxg")


def _torch_step() -> list[str]:
    line = next(x for x in SCRIPT.splitlines() if x.endswith('"torch==2.13.0"'))
    return shlex.split(line.replace('${torch_index[@]+"${torch_index[@]}"}', "INDEX"))


def test_the_cpu_index_is_written_in_the_script_and_used_without_a_gpu() -> None:
    assert "TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu\n" in SCRIPT
    assert 'torch_index=(--extra-index-url "$TORCH_CPU_INDEX")' in SCRIPT
    for node in GPU_NODES:
        assert f"[ -e {node} ]" in SCRIPT
    step = _torch_step()
    assert step[:4] == [".venv/bin/python", "-m", "pip", "install"] and "INDEX" in step
    # the main install comes after torch, under the same constraints
    assert SCRIPT.index('"torch==2.13.0"') < SCRIPT.index(
        '--group dev --group docs -e ".[transformers]"'
    )


def test_the_script_says_it_shares_the_readme_venv() -> None:
    assert "This is the same .venv as the README's first command" in SCRIPT
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "into the same `.venv`" in readme


@pytest.mark.skipif(
    any(os.path.exists(n) for n in GPU_NODES), reason="a GPU machine keeps the default build"
)
def test_the_torch_step_resolves_the_cpu_wheel_without_hanging() -> None:
    """Resolve (not install) exactly what the script asks for; an unreachable index costs a
    warning, not minutes."""
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        # .ci/wheels.sh: another Python, for which this machine's indexes may hold no CPU wheel
        pytest.skip("the script installs torch with .venv/bin/python; this is another interpreter")
    step = _torch_step()
    at = step.index("INDEX")
    index = re.search(r"TORCH_CPU_INDEX=(\S+)", SCRIPT)
    assert index is not None
    argv = [
        sys.executable,
        *[a for a in step[1:at] if a != "-q"],  # pip's report of what it would install
        "--extra-index-url",
        index.group(1),
        *step[at + 1 :],
        "--dry-run",
        "--ignore-installed",
        "--no-deps",
    ]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Would install torch-2.13.0+cpu" in proc.stdout, proc.stdout[-2000:]
