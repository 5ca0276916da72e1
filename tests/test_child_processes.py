"""The child processes the library starts run isolated: nothing in the working directory (a
shared ``/tmp``) is imported or read as an installed distribution."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hwbackends._selection import confirm as confirm_mod
from hwbackends.testing import check_import_is_clean

PLANTED = """
import pathlib
pathlib.Path({marker!r}).write_text("ran")
raise ImportError("planted torch.py ran")
"""


@pytest.fixture
def shared_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding another user's ``torch.py``, a module named like a plugin
    and a ``torch`` dist-info, entered as ``python -c`` ('') and ``python -m`` (the folder)
    would put it on the import path."""
    shared = tmp_path / "shared"
    shared.mkdir()
    marker = tmp_path / "ran"
    for name in ("torch", "hwbackends_planted"):
        (shared / f"{name}.py").write_text(PLANTED.format(marker=str(marker)))
    info = shared / "torch-99.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 99.0\n")
    monkeypatch.chdir(shared)
    monkeypatch.setattr(sys, "path", ["", str(shared), *sys.path])
    return marker


@pytest.fixture
def real_torch() -> None:
    """The installed torch, imported before the planted one's folder is the working directory:
    the child imports torch, and a run without torch skips here (conftest)."""
    import torch  # noqa: F401


def test_the_confirm_child_never_imports_the_working_directory(
    real_torch: None, shared_cwd: Path
) -> None:
    from hwbackends._machine.host import Host
    from hwbackends._selection.registry import get

    host = Host.from_system()
    conf = confirm_mod.confirm(get("cpu"), host, {}, timeout=120)
    assert not shared_cwd.exists(), "the planted torch.py ran in the child"
    assert "planted" not in conf.message and "99.0" not in conf.message
    # the child reached the installed torch, not the planted one
    assert conf.checked, conf.message


def test_the_confirm_child_is_isolated_with_a_clean_path(
    shared_cwd: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = confirm_mod.python_argv("pass")
    assert argv[:3] == [sys.executable, "-I", "-c"]
    extra = tmp_path / "extra"
    extra.mkdir()
    monkeypatch.setenv("PYTHONPATH", f"{Path.cwd()}:.:{extra}")
    monkeypatch.setattr(sys, "path", [*sys.path, str(extra)])
    front, _ = confirm_mod.child_path()
    assert front == [str(extra)]  # PYTHONPATH kept, less the working directory and '.'
    code = "import sys; print(sys.path[0])"
    out = subprocess.run(confirm_mod.python_argv(code), capture_output=True, text=True)
    assert out.stdout.strip() == str(extra)


def test_the_conformance_kits_import_check_ignores_the_working_directory(
    shared_cwd: Path,
) -> None:
    problems = check_import_is_clean("hwbackends_planted")
    assert not shared_cwd.exists(), "the planted module ran in the kit's child"
    assert problems and "failed" in problems[0]
