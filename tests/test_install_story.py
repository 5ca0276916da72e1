"""The install story as written: the README's set-up and "Use it with
Transformers" blocks and the Quickstart's install block, run verbatim in a fresh venv built
in a copy of this checkout, give a working Transformers + Accelerate + torch for this machine,
and ``hwbackends env`` then prints the same install line the docs give.

Minutes and the package registry (torch from PyTorch's CPU index, or pip's find-links): run
once by CI with ``HWBACKENDS_INSTALL_TEST=1`` (``pytest -m install``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.install,
    pytest.mark.skipif(
        os.environ.get("HWBACKENDS_INSTALL_TEST") != "1",
        reason="builds a venv from the registry (minutes): set HWBACKENDS_INSTALL_TEST=1",
    ),
]


def blocks(path: Path, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", path.read_text(encoding="utf-8"), re.S)


def copy_checkout(dest: Path) -> Path:
    """The working tree without its venv, git data and caches: what a fresh clone holds."""
    skip = shutil.ignore_patterns(
        ".venv", ".git", "__pycache__", "*.egg-info", "site", "build", "dist", ".mypy_cache",
        ".ruff_cache", ".hypothesis", ".pytest_cache",
    )  # fmt: skip
    shutil.copytree(ROOT, dest, ignore=skip, symlinks=True)  # the corpus holds sysfs links
    return dest


def sh(cmd: str, cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(
        ["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, f"`{cmd}` exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_readme_and_quickstart_install_blocks_run_as_written(tmp_path: Path) -> None:
    repo = copy_checkout(tmp_path / "hwbackends")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HWBACKENDS_", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p
    )
    # Where PyPI is reachable but PyTorch's index is not (a registry mirror), pip would retry
    # the index five times for every requirement; once is enough to fall back to the registry.
    env.setdefault("PIP_RETRIES", "0")
    # the checkout's set-up and the "Use it with Transformers" install (the index install
    # above them needs the distributions published)
    readme_bash = blocks(repo / "README.md", "bash")
    (setup,) = [b for b in readme_bash if "python3 -m venv .venv" in b]
    (use,) = [b for b in readme_bash if "[transformers]" in b]
    out = sh(setup, repo, env)  # python3 -m venv .venv && pip install . ./plugins/... && env
    assert "Install" in out and "[transformers]" in out
    sh(use, repo, env)  # .venv/bin/pip install './[transformers]' --extra-index-url ...
    # the install line the report prints is the command the docs give
    report = sh(".venv/bin/hwbackends env --json", repo, env)
    import json

    line = json.loads(report)["install"]
    assert line["torch_index"] in use
    # the Python blocks (the load, then the training plan), verbatim and in order, after a
    # tiny model is saved where their `path` points
    code = "\n".join(blocks(repo / "README.md", "python"))
    assert "training_plan" in code
    prelude = (
        "import transformers\n"
        "from hwbackends._integrations.smoke import tiny_llama_config\n"
        f"path = {str(tmp_path / 'model')!r}\n"
        "transformers.LlamaForCausalLM(tiny_llama_config()).save_pretrained(path)\n"
    )
    (tmp_path / "use.py").write_text(prelude + code + "\nprint('loaded', model.device)\n")
    assert "loaded cpu" in sh(f".venv/bin/python {tmp_path / 'use.py'}", repo, env)
    # the Quickstart's install block, in the same venv made the active one
    quick = [b for b in blocks(repo / "docs" / "quickstart.md", "bash") if "[transformers]" in b]
    assert len(quick) == 1
    active = {**env, "PATH": f"{repo / '.venv' / 'bin'}{os.pathsep}{env['PATH']}"}
    sh(quick[0], repo, active)
    versions = json.loads(sh("hwbackends env --json", repo, active))["versions"]
    assert versions["torch"] and versions["packages"]["transformers"]
    assert versions["packages"]["accelerate"] and versions["packages"]["kernels"]
    assert sys.version_info >= (3, 10)
