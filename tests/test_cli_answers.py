"""The command line answers as documented (issue 23, item 4): options before the command, a
closed stdout, ``pin 0`` on a CPU-only host, every report within the terminal's width, the
warning count at the top of ``env``, citations that name their page, and fixes only where
they can help."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hwbackends.cli import main

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

pytestmark = pytest.mark.skipif(
    not (PLUGINS / "hwbackends-cuda").exists(), reason="the in-repo GPU plugins are needed"
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_options_before_the_command_follow_the_synopsis(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--host", H100, "--json")
    assert code == 0 and json.loads(out)["command"] == "env"
    code, out, _ = run(capsys, "--env", "CUDA_VISIBLE_DEVICES=1", "--host", H100)
    assert code == 0 and "Recommended settings" in out
    code, out, _ = run(capsys, "--host", H100, "--env", "CUDA_VISIBLE_DEVICES=3", "devices")
    assert code == 0 and re.search(r"cuda:0\s+→\s+3\b", out)
    code, out, _ = run(capsys, "--json", "devices", "--host", H100)
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
    code, out, _ = run(capsys, "devices", "--host", CPU_ONLY)
    assert re.search(r"cpu\s+→\s+0\b", out)
    code, out, _ = run(capsys, "pin", "0", "--host", CPU_ONLY)
    assert code == 0 and "device 0 is always visible" in out
    code, out, _ = run(capsys, "pin", "0", "--json", "--host", CPU_ONLY)
    assert json.loads(out)["set"] == {} and json.loads(out)["backend"] == "cpu"
    code, _, err = run(capsys, "pin", "1", "--host", CPU_ONLY)
    assert code == 2 and "cpu → 0" in err


def _too_wide(out: str, width: int) -> list[str]:
    """Lines over the width that could have been broken (more than one word; a shell
    command's `` \\`` continuation belongs to the word before it)."""
    return [
        x for x in out.splitlines() if len(x) > width and len(x.removesuffix(" \\").split()) > 1
    ]


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
        code, out, _ = run(capsys, *command, "--host", host)
        assert code in (0, 1)
        assert _too_wide(out, width) == [], (command, host)


def test_eighty_columns_without_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    _, out, _ = run(capsys, "explain", "--host", H100)
    assert max(len(x) for x in out.splitlines()) <= 80


def test_env_counts_its_warnings_at_the_top(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "env", "--host", MIXED)
    first = out.splitlines()[0]
    assert first == "! 1 warning: see Warnings at the end"
    assert "\nWarnings\n" in out
    _, out, _ = run(capsys, "env", "--host", H100)
    assert out.startswith("Host")  # no warnings, no count


def test_citations_name_their_page(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "devices", "--host", H100, "--env", "CUDA_VISIBLE_DEVICES=1,1")
    flat = " ".join(out.split())
    assert "docs/reference/visibility.md §1.1" in flat
    assert not re.search(r"(?<!\.md )§\d", flat)
    assert "spec §" not in flat


def test_explain_gives_fixes_only_where_hardware_is(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "explain", "--host", H100)
    assert "fix:" not in out  # cuda is ready; nine absent vendors need nothing installed
    _, out, _ = run(capsys, "explain", "--host", NO_TORCH_BUILD)
    fixes = [x for x in out.splitlines() if x.strip().startswith("fix:")]
    assert len(fixes) == 1 and "download.pytorch.org" in " ".join(out.split())
