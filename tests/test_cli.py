"""The command line: reports, --json schema, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from coretest import HOSTS, Site, good_plugin, refresh

from hwbackends.cli import main

HOST = str(HOSTS / "dummy-box.json")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_env_text_report(isolated: Site, capsys: pytest.CaptureFixture[str]) -> None:
    isolated.add_plugin("alpha", good_plugin("alpha", 70))
    refresh(isolated)
    code, out, err = run(capsys, "env", "--host", HOST)
    assert code == 0, err
    assert "simulated from" in out and "torch 2.13.0+cpu (cpu build)" in out
    assert "Chosen  alpha" in out
    assert "alpha ready: device nodes /dev/alpha0, /dev/alpha1" in out
    assert "\033[" not in out  # not a terminal: no colour


def test_env_json_schema(isolated: Site, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "env", "--host", HOST, "--json")
    assert code == 0
    d = json.loads(out)
    assert d["schema_version"] == 1 and d["command"] == "env"
    assert d["chosen"] == "cpu"
    assert d["capabilities"]["distributed_backend"] == "gloo"
    assert d["capabilities"]["training_precision"] == "fp32"  # avx2 only: no native bf16
    assert {"candidates", "devices", "warnings", "timings_ms", "host", "env_read"} <= set(d)


def test_plugins_check_exit_codes(isolated: Site, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plugins", "--check", "--host", HOST)
    assert code == 0
    isolated.add_plugin("bad", "raise ImportError('no SDK')\n")
    refresh(isolated)
    code, out, err = run(capsys, "plugins", "--check", "--host", HOST, "--json")
    assert code == 1
    plugins = {p["name"]: p for p in json.loads(out)["plugins"]}
    assert plugins["bad"]["state"] == "broken"
    assert err.splitlines() == [
        "hwbackends: broken plugin(s): bad (hwbackends-bad)",
        "  bad: importing 'hwb_test_bad_0:Backend' raised ImportError: no SDK",  # with its fix
    ]


def test_explain_and_forced_backend(isolated: Site, capsys: pytest.CaptureFixture[str]) -> None:
    isolated.add_plugin("alpha", good_plugin("alpha", 70))
    refresh(isolated)
    code, out, _ = run(capsys, "explain", "--host", HOST, "--backend", "cpu")
    assert code == 0
    assert "Chosen  cpu — HWBACKENDS_BACKEND=cpu forces it [rule: forced]" in out
    assert "alpha [not-probed]" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["env", "--host", "/nonexistent.json"], "host file '/nonexistent.json' does not exist"),
        (["env", "--env", "NOEQUALS"], "--env 'NOEQUALS' is not an assignment"),
        (["env", "--backend", "cdua", "--host", HOST], "--backend 'cdua' names no installed"),
        (["pin", "two", "--host", HOST], "pin 'two' is not a list of physical device indices"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    isolated: Site, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith(f"hwbackends: error: {message}")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "Fix:" in err


def test_malformed_host_file(
    tmp_path: Path, isolated: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "h.json"
    p.write_text('{"devices": [{"vendor": "nvidia", "memory_bytes": "80GB"}]}')
    code, _, err = run(capsys, "env", "--host", str(p))
    assert code == 2
    assert "devices[0] in " in err and "memory_bytes must be a non-negative integer" in err


def test_python_dash_m_and_console_script() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "hwbackends", "env", "--host", HOST, "--json"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["command"] == "env"


def test_confirm_runs_the_runtime_where_it_applies(
    isolated: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch", reason="the runtime check imports torch in a child process")
    code, out, _ = run(capsys, "explain", "--confirm")
    assert code == 0
    assert "Runtime check  agrees: torch " in out and "1 device(s)" in out
    code, out, _ = run(capsys, "devices", "--confirm", "--json")
    assert (code, json.loads(out)["confirmation"]["ok"]) == (0, True)


@pytest.mark.parametrize("command", ["pin", "launch-plan", "plugins", "smoke"])
def test_confirm_is_refused_where_it_does_not_apply(
    isolated: Site, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    argv = [command, "0"] if command == "pin" else [command]
    code, _, err = run(capsys, *argv, "--confirm")
    assert code == 2
    assert err.startswith(f"hwbackends: error: --confirm does not apply to `hwbackends {command}`")
