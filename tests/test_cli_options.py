"""The command line's options say what they did: a variable given with --env counts, a
repeated option is refused, --backend takes the list HWBACKENDS_BACKEND takes, a misspelt
option gets the one meant, and host files say what they mean (vendor case, torch versions);
``--backend ''``, ``--host`` against ``HWBACKENDS_HOST``, ``--root`` trees and misspelt backend
names are each refused or answered with what was wrong and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from coretest import run_main

import hwbackends
from hwbackends import Host, explain
from hwbackends._base.errors import (
    BackendNotFoundError,
)
from hwbackends.cli import main

ROOT = Path(__file__).resolve().parents[1]
H100 = str(ROOT / "docs" / "hosts" / "eight-h100.json")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_hwbackends_host_given_with_env_is_used(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "env", "--env", f"HWBACKENDS_HOST={H100}", "--json")
    assert code == 0 and json.loads(out)["chosen"] == "cuda"


@pytest.mark.parametrize("option", ["--host", "--root", "--backend"])
def test_an_option_given_twice_is_refused(option: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "env", option, "a", option, "b")
    assert code == 2 and f"{option} was given twice ('a', then 'b')" in err


def test_backend_takes_a_list_as_the_variable_does(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "env", "--host", H100, "--backend", "rocm,cuda", "--json")
    assert code == 0, err
    assert json.loads(out)["chosen"] == "cuda"
    code, _, err = run(capsys, "env", "--backend", "cpu,cudx")
    assert code == 2 and "'cudx' is no installed backend (did you mean 'cuda'" in err


@pytest.mark.parametrize(("typed", "meant"), [("--jsn", "--json"), ("--vrebose", "--verbose")])
def test_a_misspelt_option_gets_the_one_meant(
    typed: str, meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "env", typed)
    assert code == 2 and f"did you mean {meant!r}?" in err


def test_a_huge_process_count_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "launch-plan", "--nproc-per-node", "100000000")
    assert code == 2 and "--nproc-per-node 100000000 is out of range" in err


def _host(tmp_path: Path, change: dict[str, object], device: dict[str, object]) -> str:
    data = json.loads(Path(H100).read_text())
    data.update(change)
    for d in data["devices"]:
        d.update(device)
    path = tmp_path / "host.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_a_vendor_in_capitals_is_the_vendor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "env", "--host", _host(tmp_path, {}, {"vendor": "NVIDIA"}))
    assert code == 0 and "Chosen  cuda" in out and "install the vendor" not in out


def test_a_torch_version_that_is_no_version_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = _host(tmp_path, {"torch": {"version": "not-a-version", "cuda": "12.8"}}, {})
    code, _, err = run(capsys, "env", "--host", host)
    assert code == 2 and "torch.version 'not-a-version'" in err and "Fix:" in err


H100_SXM = str(ROOT / "plugins/hwbackends-cuda/tests/hosts/h100-sxm-8.json")


def test_an_empty_backend_option_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["env"], ["devices"], ["launch-plan"], ["smoke"]):
        code, _, err = run_main(capsys, *command, "--backend", "")
        assert code == 2 and "--backend '' is empty" in err, command


def test_host_option_and_variable_say_which_wins(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HWBACKENDS_HOST", str(ROOT / "tests" / "hosts" / "dummy-box.json"))
    code, out, err = run_main(capsys, "devices", "--json", "--host", H100_SXM)
    assert code == 0 and json.loads(out)["backend"] == "cuda"
    assert "--host" in err and "HWBACKENDS_HOST=" in err and "is ignored" in err


def test_a_system_without_the_runtime_does_not_select_it(tmp_path: Path) -> None:
    data = json.loads(Path(H100_SXM).read_text())
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
    code, _, err = run_main(capsys, "env", "--host", H100_SXM)
    assert code == 2 and "Fix: use 'cuda'" in err and "hwbackends-cdua" not in err
    with pytest.raises(BackendNotFoundError) as exc:
        hwbackends.get("cdua")
    assert "use 'cuda'" in str(exc.value) and "hwbackends-cdua" not in str(exc.value)


def test_smoke_under_hwbackends_host_says_to_unset_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HWBACKENDS_HOST", H100_SXM)
    code, _, err = run_main(capsys, "smoke")
    assert code == 2 and "Fix: unset HWBACKENDS_HOST" in err and "drop --host" not in err
