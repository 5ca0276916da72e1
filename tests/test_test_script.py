"""scripts/test.sh takes torch from PyTorch's CPU wheel index where no GPU is present (on PyPI,
torch for Linux is the CUDA build), and says that it installs into the README's .venv."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

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


def _wheel(index: Path, version: str) -> None:
    """A minimal torch wheel of ``version`` in a PEP 503 index folder (no network needed)."""
    import zipfile

    folder = index / "torch"
    folder.mkdir(parents=True, exist_ok=True)
    info = f"torch-{version}.dist-info"
    files = {
        "torch/__init__.py": "",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{n},,\n" for n in [*files, f"{info}/RECORD"])
    wheel = f"torch-{version}-py3-none-any.whl"
    with zipfile.ZipFile(folder / wheel, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    # a file:// index serves each project's page as its index.html (PEP 503)
    (folder / "index.html").write_text(f'<html><body><a href="{wheel}">{wheel}</a></body></html>\n')


def test_the_torch_step_takes_the_cpu_wheel_from_the_extra_index(tmp_path: Path) -> None:
    """pip run with exactly the script's torch step and the CPU index as --extra-index-url
    takes 2.13.0+cpu over PyPI's 2.13.0 (a local version sorts after its public one, PEP 440).
    Both indexes are local folders with the versions each serves, so no network is used."""
    pypi, cpu = tmp_path / "pypi", tmp_path / "cpu"
    _wheel(pypi, "2.13.0")  # PyPI's Linux torch (the CUDA build)
    _wheel(cpu, "2.13.0+cpu")  # https://download.pytorch.org/whl/cpu
    step = _torch_step()
    at = step.index("INDEX")
    assert re.search(r"TORCH_CPU_INDEX=(\S+)", SCRIPT) is not None
    argv = [
        sys.executable,
        *[a for a in step[1:at] if a != "-q"],  # pip's report of what it would install
        "--isolated",  # no pip.conf or PIP_* variable of this machine
        "--index-url",
        pypi.as_uri(),
        "--extra-index-url",
        cpu.as_uri(),
        *step[at + 1 :],
        "--dry-run",
        "--ignore-installed",
        "--no-deps",
    ]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Would install torch-2.13.0+cpu" in proc.stdout, proc.stdout[-2000:]
