"""Every shell command a report prints pastes and runs as the argument vector it names: the
Install line and the launch commands, in text (wrapped at any width) and JSON, in bash and
dash, with paths and words the shell would otherwise expand or split."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hwbackends.cli import main

ROOT = Path(__file__).resolve().parents[1]
SHELLS = [s for s in ("bash", "dash") if shutil.which(s)]
WIDTHS = [40, 60, 80, 200]
#: Words a shell would expand, split, glob or end a command at.
NASTY = ["a b", "$(touch pwned)", "`touch pwned2`", "it's", '"q"', "*", "x;y", "new\nline", "~"]
NASTY += ["--title=a run whose name has spaces and is wider than sixty columns, really", "x\n" * 3]


def _stub(path: Path) -> Path:
    """An executable that prints its arguments as one JSON line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f"exec {shlex.quote(sys.executable)} -c "
        "'import json, sys; print(json.dumps(sys.argv[1:]))' \"$@\"\n"
    )
    path.chmod(0o755)
    return path


def _run(shell: str, command: str, cwd: Path, path: Path | None = None) -> list[str]:
    env = {"PATH": f"{path}:/usr/bin:/bin" if path else "/usr/bin:/bin", "HOME": str(cwd)}
    proc = subprocess.run(
        [shell, "-c", command], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, (shell, command, proc.stderr)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, (shell, command, proc.stdout)  # one command, not several
    return list(json.loads(lines[0]))


def _block(out: str, head: str) -> str:
    """The command printed after the line ``head`` (or on the line starting with it), up to
    the first line that does not continue."""
    lines = out.split("\n")
    start = next(i for i, x in enumerate(lines) if x == head or x.startswith(head + " "))
    first = lines[start].removeprefix(head)
    body = [first] if first.strip() else []
    i = start + 1
    while not body or body[-1].endswith("\\") or _open_quote("\n".join(body)):
        body.append(lines[i])
        i += 1
    return "\n".join(body)


def _open_quote(text: str) -> bool:
    try:
        shlex.split(text.replace("\\\n", " "))
    except ValueError:
        return True
    return False


@pytest.fixture
def weird(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout and an interpreter whose paths hold spaces, quotes and ``$(...)``; the
    host is an NVIDIA machine that lacks kernels, so the Install line has work to do."""
    top = tmp_path / "we ird $(touch pwned) 'q'"
    checkout = top / "check out"
    (checkout / "plugins" / "hwbackends-cuda").mkdir(parents=True)
    (checkout / "plugins" / "hwbackends-cuda" / "pyproject.toml").write_text("")
    monkeypatch.setattr(sys, "executable", str(_stub(top / "bin" / "py thon")))
    import hwbackends._discovery.catalog as catalog

    monkeypatch.setattr(catalog, "core_checkout", lambda path=None: str(checkout))
    host = json.loads((ROOT / "docs" / "hosts" / "eight-h100.json").read_text())
    del host["packages"]["kernels"]
    (tmp_path / "host.json").write_text(json.dumps(host))
    return checkout


@pytest.mark.parametrize("width", WIDTHS)
def test_the_install_line_runs_as_printed_at_every_width(
    width: int,
    weird: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    host = str(tmp_path / "host.json")
    assert main(["env", "--host", host]) == 0
    text = _block(capsys.readouterr().out, "Install")
    assert main(["env", "--host", host, "--json"]) == 0
    install = json.loads(capsys.readouterr().out)["install"]
    want = [
        "-m",
        "pip",
        "install",
        f"{weird}/[transformers]",
        f"{weird}/plugins/hwbackends-cuda",
        "--extra-index-url",
        "https://download.pytorch.org/whl/cu128",
    ]
    assert install["argv"] == [sys.executable, *want] and install["needed"] is True
    for shell in SHELLS:
        for command in (text, install["command"]):
            assert _run(shell, command, tmp_path) == want, (shell, width, command)
    assert not list(tmp_path.rglob("pwned*")), "a printed path ran a command"


@pytest.mark.parametrize("width", WIDTHS)
def test_the_launch_commands_run_as_printed_at_every_width(
    width: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stubs = tmp_path / "stubs"
    for tool in ("torchrun", "accelerate"):
        _stub(stubs / tool)
    monkeypatch.setenv("COLUMNS", str(width))
    argv = ["launch-plan", "--host", str(ROOT / "docs" / "hosts" / "eight-h100.json")]
    argv += ["--nproc-per-node", "2", "--", "train.py", *NASTY]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert main([*argv[: -len(NASTY) - 2], "--json", *argv[-len(NASTY) - 2 :]]) == 0
    plan = json.loads(capsys.readouterr().out)
    for head, key in (("torchrun", "torchrun"), ("accelerate launch", "accelerate")):
        text = _block(out, head)
        got = [_run(s, c, tmp_path, stubs) for s in SHELLS for c in (text, plan[key])]
        assert all(g == got[0] for g in got), (head, width, text)
        assert got[0][-len(NASTY) - 1 :] == ["train.py", *NASTY]
    assert not list(tmp_path.rglob("pwned*"))


def test_the_install_line_says_when_nothing_is_left_to_install(
    capsys: pytest.CaptureFixture[str],
) -> None:
    host = str(ROOT / "docs" / "hosts" / "eight-h100.json")
    assert main(["env", "--host", host]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("Install"))
    assert line.startswith("Install   nothing to install (torch 2.8.0+cu128")
    assert main(["env", "--host", host, "--json"]) == 0
    install = json.loads(capsys.readouterr().out)["install"]
    assert install["needed"] is False
    assert install["argv"][:4] == [sys.executable, "-m", "pip", "install"]
