"""The command line: reports, --json schema, exit codes, one-line errors; options before the
command, a closed stdout, ``pin 0`` on a CPU-only host, every report within the terminal's
width, the warning count at the top of ``env``, citations that name their page, and fixes
only where they can help."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from coretest import HOSTS, Site, good_plugin, refresh, run_main

from hwbackends.cli import main

HOST = str(HOSTS / "dummy-box.json")
ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ROOT / "plugins"
H100 = str(PLUGINS / "hwbackends-cuda" / "tests" / "hosts" / "h100-sxm-8.json")
MIXED = str(PLUGINS / "hwbackends-cuda" / "tests" / "hosts" / "mixed-4-unknown-order.json")
NO_TORCH_BUILD = str(PLUGINS / "hwbackends-cuda" / "tests" / "hosts" / "nvidia-cpu-torch.json")
CPU_ONLY = str(ROOT / "tests" / "hosts" / "dummy-box.json")
WIDE_HOSTS = [
    H100,
    MIXED,
    str(PLUGINS / "hwbackends-cuda" / "tests" / "hosts" / "a100-mig.json"),
    str(PLUGINS / "hwbackends-rocm" / "tests" / "hosts" / "mi300x-8.json"),
    str(PLUGINS / "hwbackends-neuron" / "tests" / "hosts" / "trn2_48xlarge.json"),
    str(PLUGINS / "hwbackends-tpu" / "tests" / "hosts" / "v5litepod8_xla.json"),
]


def test_env_text_report(isolated: Site, capsys: pytest.CaptureFixture[str]) -> None:
    isolated.add_plugin("alpha", good_plugin("alpha", 70))
    refresh(isolated)
    code, out, err = run_main(capsys, "env", "--host", HOST)
    assert code == 0, err
    assert "simulated from" in out and "torch 2.13.0+cpu (cpu build)" in out
    assert "Chosen  alpha" in out
    assert "alpha ready: device nodes /dev/alpha0, /dev/alpha1" in out
    assert "\033[" not in out  # not a terminal: no colour


def test_env_json_schema(isolated: Site, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "env", "--host", HOST, "--json")
    assert code == 0
    d = json.loads(out)
    assert d["schema_version"] == 1 and d["command"] == "env"
    assert d["chosen"] == "cpu"
    assert d["capabilities"]["distributed_backend"] == "gloo"
    assert d["capabilities"]["training_precision"] == "fp32"  # avx2 only: no native bf16
    assert {"candidates", "devices", "warnings", "timings_ms", "host", "env_read"} <= set(d)


def test_plugins_check_exit_codes(isolated: Site, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "plugins", "--check", "--host", HOST)
    assert code == 0
    isolated.add_plugin("bad", "raise ImportError('no SDK')\n")
    refresh(isolated)
    code, out, err = run_main(capsys, "plugins", "--check", "--host", HOST, "--json")
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
    code, out, _ = run_main(capsys, "explain", "--host", HOST, "--backend", "cpu")
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
    code, _, err = run_main(capsys, *argv)
    assert code == 2
    assert err.startswith(f"hwbackends: error: {message}")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "Fix:" in err


def test_malformed_host_file(
    tmp_path: Path, isolated: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "h.json"
    p.write_text('{"devices": [{"vendor": "nvidia", "memory_bytes": "80GB"}]}')
    code, _, err = run_main(capsys, "env", "--host", str(p))
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
    import torch  # noqa: F401 - installed by scripts/test.sh: missing is a failure

    code, out, _ = run_main(capsys, "explain", "--confirm")
    assert code == 0
    assert "Runtime check  agrees: torch " in out and "1 device(s)" in out
    code, out, _ = run_main(capsys, "devices", "--confirm", "--json")
    assert (code, json.loads(out)["confirmation"]["ok"]) == (0, True)


@pytest.mark.parametrize("command", ["pin", "launch-plan", "plugins", "smoke"])
def test_confirm_is_refused_where_it_does_not_apply(
    isolated: Site, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    argv = [command, "0"] if command == "pin" else [command]
    code, _, err = run_main(capsys, *argv, "--confirm")
    assert code == 2
    assert err.startswith(f"hwbackends: error: --confirm does not apply to `hwbackends {command}`")


def test_json_output_refuses_nan() -> None:
    from hwbackends.cli._output import _json

    with pytest.raises(ValueError, match="not JSON compliant"):
        _json({"x": float("nan")})


def _too_wide(out: str, width: int) -> list[str]:
    """Lines over the width that could have been broken (more than one word; a shell
    command's `` \\`` continuation belongs to the word before it)."""
    return [
        x for x in out.splitlines() if len(x) > width and len(x.removesuffix(" \\").split()) > 1
    ]


def test_options_before_the_command_follow_the_synopsis(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "--host", H100, "--json")
    assert code == 0 and json.loads(out)["command"] == "env"
    code, out, _ = run_main(capsys, "--env", "CUDA_VISIBLE_DEVICES=1", "--host", H100)
    assert code == 0 and "Recommended settings" in out
    code, out, _ = run_main(capsys, "--host", H100, "--env", "CUDA_VISIBLE_DEVICES=3", "devices")
    assert code == 0 and re.search(r"cuda:0\s+→\s+3\b", out)
    code, out, _ = run_main(capsys, "--json", "devices", "--host", H100)
    assert json.loads(out)["command"] == "devices"
    with pytest.raises(SystemExit) as exc:
        main(["--host", H100, "evn"])
    assert exc.value.code == 2
    assert "did you mean 'env'?" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    ["env", "env --json", "devices", "devices --json", "explain", "pin 0", "launch-plan",
     "launch-plan --json", "plugins"],
)  # fmt: skip
def test_a_closed_stdout_is_a_clean_exit(command: str) -> None:
    exe = Path(sys.executable).parent / "hwbackends"
    proc = subprocess.run(
        ["bash", "-c", f"'{exe}' {command} --host '{H100}' >&-"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (proc.returncode, proc.stderr) == (0, "")


def test_pin_on_a_cpu_only_host_agrees_with_devices(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "devices", "--host", CPU_ONLY)
    assert re.search(r"cpu\s+→\s+0\b", out)
    code, out, _ = run_main(capsys, "pin", "0", "--host", CPU_ONLY)
    assert code == 0 and "device 0 is always visible" in out
    code, out, _ = run_main(capsys, "pin", "0", "--json", "--host", CPU_ONLY)
    assert json.loads(out)["set"] == {} and json.loads(out)["backend"] == "cpu"
    code, _, err = run_main(capsys, "pin", "1", "--host", CPU_ONLY)
    assert code == 2 and "cpu → 0" in err


@pytest.mark.parametrize("width", [80, 60])
@pytest.mark.parametrize(
    "command", [["env"], ["env", "--verbose"], ["devices"], ["explain"], ["launch-plan"],
                ["plugins"]],
)  # fmt: skip
def test_every_command_fits_the_terminal_width(
    command: list[str],
    width: int,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    for host in WIDE_HOSTS:
        code, out, _ = run_main(capsys, *command, "--host", host)
        assert code in (0, 1)
        assert _too_wide(out, width) == [], (command, host)


def test_eighty_columns_without_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    _, out, _ = run_main(capsys, "explain", "--host", H100)
    assert max(len(x) for x in out.splitlines()) <= 80


def test_env_counts_its_warnings_at_the_top(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_main(capsys, "env", "--host", MIXED)
    first = out.splitlines()[0]
    assert first == "! 1 warning: see Warnings at the end"
    assert "\nWarnings\n" in out
    _, out, _ = run_main(capsys, "env", "--host", H100)
    assert out.startswith("Host")  # no warnings, no count


def test_citations_name_their_page(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_main(capsys, "devices", "--host", H100, "--env", "CUDA_VISIBLE_DEVICES=1,1")
    flat = " ".join(out.split())
    assert "docs/reference/visibility.md §1.1" in flat
    assert not re.search(r"(?<!\.md )§\d", flat)
    assert "spec §" not in flat


def test_explain_gives_fixes_only_where_hardware_is(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_main(capsys, "explain", "--host", H100)
    assert "fix:" not in out  # cuda is ready; nine absent vendors need nothing installed
    _, out, _ = run_main(capsys, "explain", "--host", NO_TORCH_BUILD)
    fixes = [x for x in out.splitlines() if x.strip().startswith("fix:")]
    assert len(fixes) == 1 and "download.pytorch.org" in " ".join(out.split())
