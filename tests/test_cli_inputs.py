"""The command line's inputs: ``--backend``, ``--host`` against ``HWBACKENDS_HOST``, ``--root``
trees, misspelt backend names; each refused or answered with what was wrong and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from coretest import needs_plugins, run_main

import hwbackends
from hwbackends import Host, explain
from hwbackends._base.errors import (
    BackendNotFoundError,
)

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ROOT / "plugins"
H100 = str(PLUGINS / "hwbackends-cuda" / "tests" / "hosts" / "h100-sxm-8.json")

pytestmark = needs_plugins


def test_an_empty_backend_option_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["env"], ["devices"], ["launch-plan"], ["smoke"]):
        code, _, err = run_main(capsys, *command, "--backend", "")
        assert code == 2 and "--backend '' is empty" in err, command


def test_host_option_and_variable_say_which_wins(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HWBACKENDS_HOST", str(ROOT / "tests" / "hosts" / "dummy-box.json"))
    code, out, err = run_main(capsys, "devices", "--json", "--host", H100)
    assert code == 0 and json.loads(out)["backend"] == "cuda"
    assert "--host" in err and "HWBACKENDS_HOST=" in err and "is ignored" in err


def test_a_system_without_the_runtime_does_not_select_it(tmp_path: Path) -> None:
    data = json.loads(Path(H100).read_text())
    data["system"] = "Plan9"
    report = explain(env={}, host=Host.from_dict(data))
    assert report.chosen == "cpu"
    assert "no build for Plan9 (it runs on Linux, Windows)" in report.status("cuda").reason


def test_a_root_tree_is_not_this_machine(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for sub in ("sys", "proc", "dev"):
        (tmp_path / sub).mkdir()
    _, out, _ = run_main(capsys, "env", "--root", str(tmp_path))
    flat = " ".join(out.split())
    assert f"read from the tree at {tmp_path} (--root)" in flat
    assert "this machine" not in flat


def test_a_misspelt_backend_name_suggests_the_installed_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HWBACKENDS_BACKEND", "cdua")
    code, _, err = run_main(capsys, "env", "--host", H100)
    assert code == 2 and "Fix: use 'cuda'" in err and "hwbackends-cdua" not in err
    with pytest.raises(BackendNotFoundError) as exc:
        hwbackends.get("cdua")
    assert "use 'cuda'" in str(exc.value) and "hwbackends-cdua" not in str(exc.value)


def test_smoke_under_hwbackends_host_says_to_unset_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HWBACKENDS_HOST", H100)
    code, _, err = run_main(capsys, "smoke")
    assert code == 2 and "Fix: unset HWBACKENDS_HOST" in err and "drop --host" not in err
