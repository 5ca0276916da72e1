"""Every shell command a report prints pastes and runs as the argument vector it names: the
Install line and the launch commands, in text (wrapped at any width) and JSON, in bash and
dash, with paths and words the shell would otherwise expand or split; hostile endpoints and
plugin values reach the launcher as written, and a variable name a shell cannot set is
reported, never printed."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from coretest import Site, clean_env, run_python

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


H100 = ROOT / "docs/hosts/eight-h100.json"


def cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_python("-m", "hwbackends", *args, env=env, timeout=timeout)


HOSTILE_ENDPOINTS = [
    "x;touch${IFS}PWNED;y:29500",
    "$(touch${IFS}PWNED):29500",
    "`touch${IFS}PWNED`:29500",
    "$(touch PWNED):29500",  # a blank: refused as no HOST:PORT, never printed
    "a'b:29500",
    'a"b:29500',
    "*:29500",
    "[fd00::1]:29500",
    "node-0.example:29500",
]
# prints its argv as JSON: stands in for torchrun / accelerate / the training program
FAKE = (
    "#!{python}\nimport json, os, sys\n"
    "print(json.dumps([os.path.basename(sys.argv[0])] + sys.argv[1:]))\n"
)


def _shells() -> list[str]:
    found = [s for s in ("bash", "dash") if shutil.which(s)]
    assert "bash" in found
    return found


def _fake_bin(tmp_path: Path) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    for name in ("torchrun", "accelerate", "train-prog"):
        p = d / name
        p.write_text(FAKE.format(python=sys.executable))
        p.chmod(0o755)
    return d


def _run_line(line: str, shell: str, cwd: Path, bindir: Path) -> list[str]:
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "HOME": str(cwd)}
    out = subprocess.run([shell, "-c", line], cwd=cwd, env=env, capture_output=True, text=True)
    assert out.returncode == 0, (shell, line, out.stderr)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


SHELL_RUNS: list[int] = [0]
PLUGIN_ENV = """
from typing import ClassVar
from hwbackends import Device, Probe
from hwbackends.plugin import BaseBackend

class Backend(BaseBackend):
    name: ClassVar[str] = "acme"
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "acme"
    priority: ClassVar[int] = 95
    device_nodes: ClassVar[tuple[str, ...]] = ("acme{{n}}",)

    def devices(self, host, env):
        return [Device("acme", "acme", 0, 0), Device("acme", "acme", 1, 1)]

    def visibility_env(self, physical_indices, *, host=None, env=None):
        return {{{name!r}: {value!r}}}
"""


def _acme(tmp_path: Path, name: str, value: str) -> dict[str, str]:
    s = Site(tmp_path / "site")
    s.path.mkdir()
    s.add_plugin("acme", PLUGIN_ENV.format(name=name, value=value))
    host = tmp_path / "host.json"
    host.write_text(json.dumps({"device_nodes": ["/dev/acme0", "/dev/acme1"]}))
    return clean_env(PYTHONPATH=str(s.path), HWBACKENDS_HOST=str(host))


@pytest.mark.parametrize("endpoint", HOSTILE_ENDPOINTS)
def test_launch_plans_pass_hostile_endpoints_to_the_launcher_as_written(
    tmp_path: Path, endpoint: str
) -> None:
    bindir = _fake_bin(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / "decoy:29500").write_text("")  # what `*:29500` or `[fd00::1]:29500` would glob
    (work / "f").write_text("")
    for nnodes in ("1", "2"):
        out = cli(
            "launch-plan",
            "--host",
            str(H100),
            "--nproc-per-node",
            "2",
            "--nnodes",
            nnodes,
            "--rdzv-endpoint",
            endpoint,
            "--json",
            "train-prog",
            "--x=$(touch PWNED)",
            env=clean_env(),
        )
        if " " in endpoint:
            assert out.returncode == 2 and "is not HOST:PORT" in out.stderr
            continue
        assert out.returncode in (0, 1), out.stderr
        plan = json.loads(out.stdout)
        host = endpoint.rpartition(":")[0]
        for key in ("torchrun", "accelerate"):
            for shell in _shells():
                argv = _run_line(plan[key], shell, work, bindir)
                SHELL_RUNS[0] += 1
                assert not (work / "PWNED").exists(), (shell, plan[key])
                assert argv[-2:] == ["train-prog", "--x=$(touch PWNED)"]
                if key == "torchrun" and nnodes == "2":
                    assert argv[argv.index("--rdzv-endpoint") + 1] == endpoint
                elif key == "torchrun":
                    assert argv[argv.index("--master-addr") + 1] == host
                else:
                    bare = host[1:-1] if host.startswith("[") else host
                    assert argv[argv.index("--main_process_ip") + 1] == bare


@pytest.mark.parametrize(
    "value", ["$(touch PWNED)", "`touch PWNED`", "a'b\"c", "0;touch PWNED", "*"]
)
def test_hostile_values_from_a_plugin_are_quoted_in_pin_and_launch_plans(
    tmp_path: Path, value: str
) -> None:
    env = _acme(tmp_path, "ACME_VISIBLE", value)
    bindir = _fake_bin(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / "decoy").write_text("")
    pin = cli("pin", "0", env=env)
    assert pin.returncode == 0, pin.stderr
    plan = json.loads(
        cli("launch-plan", "--nproc-per-node", "2", "--json", "train-prog", env=env).stdout
    )
    for shell in _shells():
        for line in (pin.stdout.strip() + " train-prog", plan["torchrun"]):
            _run_line(line, shell, work, bindir)
            SHELL_RUNS[0] += 1
            assert not (work / "PWNED").exists()
        # the value reaches the program exactly
        got = _run_line(
            pin.stdout.strip() + ' sh -c \'printf "%s" "$ACME_VISIBLE"\' | '
            f'{sys.executable} -c "import json,sys; print(json.dumps([sys.stdin.read()]))"',
            shell,
            work,
            bindir,
        )
        SHELL_RUNS[0] += 1
        assert got == [value]


@pytest.mark.parametrize("name", ["A=1;touch${IFS}PWNED;B", "1ACME", "ACME VISIBLE", "$(x)"])
def test_a_plugins_invalid_variable_name_is_reported_never_printed(
    tmp_path: Path, name: str
) -> None:
    env = _acme(tmp_path, name, "0")
    pin = cli("pin", "0", env=env)
    assert pin.returncode == 2 and pin.stdout == ""
    assert "the acme backend declares invalid environment variable names" in pin.stderr
    plan = cli("launch-plan", "--nproc-per-node", "2", "--json", "train.py", env=env)
    got = json.loads(plan.stdout)
    assert name not in got["torchrun"] + got["sbatch"] + got["accelerate"]
    assert any(
        "the acme plugin declares invalid environment variable names" in p for p in got["problems"]
    )


def test_shell_runs_were_counted() -> None:
    # a record for the closing note (pytest -s shows it); zero only when run alone
    print(f"shell runs in this session: {SHELL_RUNS[0]}")
