"""Text from data (device names, CPU models, host files, sysfs) reaches the terminal escaped:
no line breaks that forge report lines, no ESC sequences, no bidi controls or Unicode line
separators; ``--json`` keeps the exact text."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from coretest import clean_env, run_python

from hwbackends.cli import main
from hwbackends.cli._output import escape_controls

ROOT = Path(__file__).resolve().parents[1]
EVIL = "H100\nChosen  forged\r\x1b[8mhidden\x1b]0;title\x07\u202eevil\u2028sep\u2029\u2066x\u200f"
RAW = {chr(c) for c in range(32) if chr(c) != "\n"} | set("\x7f\x85\u202a\u202e\u2066\u2069")
RAW |= {"\u2028", "\u2029", "\u200f"}


@pytest.fixture
def evil_host(tmp_path: Path) -> str:
    host = json.loads((ROOT / "docs" / "hosts" / "eight-h100.json").read_text())
    for dev in host["devices"]:
        dev["name"] = EVIL
    host["cpu"]["model"] = "Xeon\nBackends  forged"
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(host))
    return str(path)


@pytest.mark.parametrize(
    "argv",
    [["env"], ["env", "--verbose"], ["env", "--issue"], ["devices"], ["explain"], ["plugins"]],
)
def test_data_cannot_drive_the_terminal_or_forge_lines(
    argv: list[str], evil_host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main([*argv, "--host", evil_host])
    out = capsys.readouterr().out
    assert not RAW & set(out), sorted(RAW & set(out))
    for line in out.splitlines():
        assert not line.lstrip().startswith(("Chosen  forged", "Backends  forged")), line
    if argv[0] != "plugins":
        assert "forged" in out and "\\u202e" in out and "\\x1b" in out


def test_json_keeps_the_exact_text(evil_host: str, capsys: pytest.CaptureFixture[str]) -> None:
    main(["devices", "--host", evil_host, "--json"])
    names = {d["name"] for d in json.loads(capsys.readouterr().out)["devices"]}
    assert names == {EVIL}


def test_the_escape_names_every_invisible_character() -> None:
    assert escape_controls("a\u202eb\u2066c\u2028d\x1b") == "a\\u202eb\\u2066c\\u2028d\\x1b"
    assert escape_controls("plain · text →\n") == "plain · text →\n"


def run_cli(
    *args: str, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return run_python("-m", "hwbackends", *args, env=env, timeout=timeout)


def test_control_characters_from_the_machine_are_escaped_in_terminal_output(
    tmp_path: Path,
) -> None:
    f = tmp_path / "host.json"
    f.write_text(
        json.dumps(
            {
                "devices": [
                    {
                        "vendor": "nvidia",
                        "pci_device_id": "0x2330",
                        "name": "\x1b[31mRED\x1b[0m GPU\x07",
                    }
                ],
                "cpu": {"model": "\x1b[2Jclear\x9b"},
            }
        )
    )
    for command in ("env", "devices", "explain"):
        out = run_cli(command, "--host", str(f), env=clean_env())
        assert out.returncode in (0, 1), out.stderr
        assert "\x1b" not in out.stdout and "\x07" not in out.stdout and "\x9b" not in out.stdout
    assert "\\x1b[31mRED" in run_cli("env", "--host", str(f), env=clean_env()).stdout
