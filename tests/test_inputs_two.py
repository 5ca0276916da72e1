"""Reliability, round two (issue 21): settings that must not kill jobs, printed shell words,
bounded reads and numbers, escaped terminal output, and a time limit that spares the cpu.

Each test failed on the main before this round: a site-wide HWBACKENDS_DISABLE naming an
absent plugin raised at ``current()``; unknown or lower-case HWBACKENDS_* names gave no Python
warning; ``launch-plan`` printed a hostile rendezvous host unquoted (commands ran, globs
expanded) and ``pin`` printed a plugin's variable names unquoted; ``proc/cpuinfo`` was read
with a blocking, unbounded open; a 5,000-digit index or size crashed with ``ValueError`` or
``OverflowError``; NaN reached JSON output and ANSI escapes the terminal; a tiny
``HWBACKENDS_TIMEOUT`` left no backend at all, with a fix naming a variable nobody set.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from coretest import Site, clean_env, good_plugin, run_python

import hwbackends
from hwbackends import Host
from hwbackends._base.errors import HwBackendsWarning
from hwbackends._base.settings import Settings
from hwbackends._selection.registry import Registry

ROOT = Path(__file__).resolve().parent.parent
H100 = ROOT / "docs/hosts/eight-h100.json"
HOST = Host.from_dict({"device_nodes": ["/dev/alpha0"]})


def cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_python("-m", "hwbackends", *args, env=env, timeout=timeout)


def select(site: Site, env: dict[str, str]) -> hwbackends.SelectionReport:
    return Registry(path=[str(site.path)]).select(env, HOST, Settings.from_env(env))


# -- 7. settings: a site-wide setting never kills a job ----------------------------------------


def test_disabling_an_absent_plugin_is_a_no_op_with_a_warning(site: Site) -> None:
    site.add_plugin("alpha", good_plugin("alpha", 70))
    env = {"HWBACKENDS_DISABLE": "nosuch-plugin-h21, alpha"}
    with pytest.warns(HwBackendsWarning, match="HWBACKENDS_DISABLE names 'nosuch-plugin-h21'"):
        r = select(site, env)
    assert r.chosen == "cpu" and r.status("alpha").state == "disabled"
    assert any("nosuch-plugin-h21" in w and w.endswith("ignored") for w in r.warnings)


def test_an_allow_list_warns_about_absent_names_unless_nothing_remains(site: Site) -> None:
    site.add_plugin("alpha", good_plugin("alpha", 70))
    with pytest.warns(HwBackendsWarning, match="HWBACKENDS_PLUGINS names 'alpah-h21'"):
        r = select(site, {"HWBACKENDS_PLUGINS": "alpha,alpah-h21"})
    assert r.chosen == "alpha"
    with pytest.raises(hwbackends.BackendNotFoundError, match="none of which is installed"):
        select(site, {"HWBACKENDS_PLUGINS": "alpah-h21"})


@pytest.mark.parametrize(
    "name", ["hwbackends_backend", "HWBACKEND_BACKEND", "HWBACKENDS_Backend", "HWBACKENDS_BACKNED"]
)
def test_unknown_setting_names_warn_once_per_process_with_a_suggestion(
    site: Site, name: str
) -> None:
    env = {name: "cpu"}
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        for _ in range(3):
            r = select(site, env)
    mine = [w for w in got if issubclass(w.category, HwBackendsWarning)]
    assert len(mine) == 1, [str(w.message) for w in mine]
    assert f"{name} is not a hwbackends variable" in str(mine[0].message)
    assert "'HWBACKENDS_BACKEND'" in str(mine[0].message)
    assert any(name in w for w in r.warnings)


# -- 8. every printed shell word is quoted ------------------------------------------------------

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


# -- 9. bounded reads and numbers ---------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_cpuinfo_under_root_that_is_a_fifo_or_dev_zero_neither_hangs_nor_grows(
    tmp_path: Path, kind: str
) -> None:
    proc = tmp_path / "root/proc"
    proc.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(proc / "cpuinfo")
    else:
        (proc / "cpuinfo").symlink_to("/dev/zero")
    (proc / "meminfo").symlink_to("/dev/zero")
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))\n"
        "from hwbackends import Host\n"
        f"h = Host.from_system(root={str(tmp_path / 'root')!r}, backends=[])\n"
        "print(repr(h.cpu.model), h.memory_bytes)\n"
    )
    out = run_python("-c", code, env=clean_env(), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["''", "None"]


def test_huge_indices_are_the_users_error_never_a_crash() -> None:
    import hwbackends_cuda  # noqa: F401 - the H100 host's devices are cuda's

    from hwbackends.visibility import explain_visibility

    host = Host.from_file(H100)
    # strtoul semantics: leading zeros are read through, an out-of-range value names no device
    rep = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "0" * 5000 + "1"}, host)
    assert rep.physical == [1]
    assert explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "9" * 5000}, host).physical == []
    out = cli("pin", "9" * 5000, "--host", str(H100), env=clean_env())
    assert out.returncode == 2 and "is not a list of physical device indices" in out.stderr
    assert "internal error" not in out.stderr


@pytest.mark.parametrize(
    "data, message",
    [
        ('{"memory_bytes": ' + "9" * 4000 + "}", "up to 2**64 or null, got a number of 4000"),
        (
            '{"devices": [{"vendor": "nvidia", "memory_bytes": 1' + "0" * 30 + "}]}",
            "memory_bytes must be a non-negative integer up to 2**64",
        ),
        ('{"devices": [{"vendor": "nvidia", "extra": {"x": NaN}}]}', "it holds NaN"),
        ('{"memory_bytes": Infinity}', "it holds Infinity"),
    ],
)
def test_huge_sizes_and_nan_in_host_files_exit_2_with_a_message(
    tmp_path: Path, data: str, message: str
) -> None:
    f = tmp_path / "host.json"
    f.write_text(data)
    for command in (("env",), ("explain", "--json")):
        out = cli(*command, "--host", str(f), env=clean_env())
        assert out.returncode == 2, out.stdout + out.stderr
        assert message in out.stderr and "internal error" not in out.stderr


def test_json_output_refuses_nan() -> None:
    from hwbackends.cli._output import _json

    with pytest.raises(ValueError, match="not JSON compliant"):
        _json({"x": float("nan")})


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
        out = cli(command, "--host", str(f), env=clean_env())
        assert out.returncode in (0, 1), out.stderr
        assert "\x1b" not in out.stdout and "\x07" not in out.stdout and "\x9b" not in out.stdout
    assert "\\x1b[31mRED" in cli("env", "--host", str(f), env=clean_env()).stdout


# -- 10. the time limit: never the cpu's, never too small -------------------------------------


def test_a_timeout_too_small_to_run_anything_is_refused_at_parse_time() -> None:
    out = cli("env", env=clean_env(HWBACKENDS_TIMEOUT="1e-5"))
    assert out.returncode == 2
    assert "HWBACKENDS_TIMEOUT='1e-5' is too small for any plugin call" in out.stderr
    assert "at least 0.01 seconds" in out.stderr


def test_the_builtin_cpu_is_never_subject_to_the_plugin_time_limit(tmp_path: Path) -> None:
    s = Site(tmp_path / "site")
    s.path.mkdir()
    s.add_plugin(
        "acme",
        good_plugin("acme", 90)
        + "    def probe(self, host):\n        import time\n        time.sleep(1)\n"
        + "        return super().probe(host)\n",
    )
    # the cpu built-in is slowed past the limit as well: it must still be chosen
    env = clean_env(PYTHONPATH=str(s.path), HWBACKENDS_NO_CACHE="1", HWBACKENDS_TIMEOUT="0.01")
    code = (
        "import json, time, hwbackends\n"
        "from hwbackends._kit.cpu import CpuBackend\n"
        "slow = CpuBackend.probe\n"
        "def probe(self, host):\n"
        "    time.sleep(0.2)\n"
        "    return slow(self, host)\n"
        "CpuBackend.probe = probe\n"
        "r = hwbackends.explain()\n"
        "print(json.dumps({'chosen': r.chosen, 'acme': r.status('acme').state}))\n"
    )
    out = run_python("-c", code, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"chosen": "cpu", "acme": "broken"}


def test_no_backend_at_all_names_only_a_setting_that_was_made(site: Site) -> None:
    with pytest.raises(hwbackends.BackendUnavailableError) as info:
        select(site, {"HWBACKENDS_DISABLE": "cpu"})
    assert "Fix: remove cpu from HWBACKENDS_DISABLE" in str(info.value)
    assert "HWBACKENDS_PLUGINS" not in str(info.value)
