"""An outside vendor's plugin, built from documented public API only, works like a built-in.

The plugin (tests/fixtures/outside) is laid out as a vendor would, outside ``plugins/``,
installed by pip as a real distribution, and run on a fake machine tree (sysfs, /dev) through
the real reader and the CLI: detected, selected, its variable honoured, and pin, launch-plan,
env --env and devices all working. Its generated docs page names its variable.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from coretest import dtype_text, pci_function, pip_install

FIXTURE = Path(__file__).parent / "fixtures" / "outside"
REPO = Path(__file__).resolve().parents[1]


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pip-install the vendor's project (made in a temporary folder) into a site folder."""
    tmp = tmp_path_factory.mktemp("outside")
    project = tmp / "hwbackends-acme"
    pkg = project / "src" / "hwbackends_acme"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        (FIXTURE / "acme_backend.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (pkg / "_facts.py").write_text(
        (FIXTURE / "acme_facts.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    _write(
        project,
        "pyproject.toml",
        textwrap.dedent(
            """\
            [build-system]
            requires = ["hatchling"]
            build-backend = "hatchling.build"

            [project]
            name = "hwbackends-acme"
            version = "1.0.0"
            dependencies = ["hwbackends"]

            [project.entry-points."hwbackends.backends"]
            acme = "hwbackends_acme:AcmeBackend"

            [tool.hatch.build.targets.wheel]
            packages = ["src/hwbackends_acme"]
            """
        ),
    )
    target = tmp / "site"
    pip_install(project, target)
    # the vendor's torch extension, as an installed distribution
    _write(target, "torch_acme-1.0.dist-info/METADATA", "Name: torch-acme\nVersion: 1.0\n")
    return target


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three Acme accelerators (class 0x12), an Acme NIC, /dev/acme0-2 and /dev/acmectl."""
    r = tmp_path_factory.mktemp("root")
    for i, klass in enumerate(("0x120000", "0x120000", "0x120000", "0x020000")):
        pci_function(r, f"0000:0{i + 1}:00.0", "0x1f2a", "0x0001", klass)
    for node in ("acme0", "acme1", "acme2", "acmectl"):
        _write(r, f"dev/{node}", "")
    _write(r, "sys/module/acme_drv/version", "3.1.4\n")
    return r


def cli(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWBACKENDS_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    env["HWBACKENDS_NO_CACHE"] = "1"
    # other accelerator variables of this machine must not leak into the checks
    for k in list(env):
        if k.endswith("_VISIBLE_DEVICES"):
            del env[k]
    return subprocess.run(
        [sys.executable, "-m", "hwbackends", *args], capture_output=True, text=True, env=env
    )


def test_the_plugin_is_small_and_uses_public_api_only() -> None:
    text = (FIXTURE / "acme_backend.py").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 40
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            assert node.module in ("__future__", "typing", "hwbackends.plugin",
                                   "hwbackends.visibility"), node.module  # fmt: skip


def test_detected_and_selected_on_a_real_machine_tree(site: Path, root: Path) -> None:
    out = cli(site, "env", "--root", str(root), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert (report["chosen"], report["rule"]) == ("acme", "priority")
    assert [d["pci_bus_id"] for d in report["devices"]] == [
        "0000:01:00.0",
        "0000:02:00.0",
        "0000:03:00.0",
    ]  # fmt: skip  (the NIC is not an accelerator)
    acme = next(c for c in report["candidates"] if c["name"] == "acme")
    assert "device nodes /dev/acme0, /dev/acme1, /dev/acme2" in acme["probe"]["evidence"]
    assert "acmectl" not in out.stdout


@pytest.mark.parametrize(
    ("value", "physical"),
    [("2,0", [2, 0]), ("1,x,0", [1]), ("0,7,1", [0]), ("", []), ("1,1", [])],
)
def test_its_variable_is_honoured(site: Path, root: Path, value: str, physical: list[int]) -> None:
    out = cli(site, "devices", "--root", str(root), "--backend", "acme",
              "--env", f"ACME_VISIBLE_DEVICES={value}", "--json")  # fmt: skip
    if not physical:
        # every device hidden: forcing acme is a clear error naming the variable
        assert out.returncode != 0
        assert "ACME_VISIBLE_DEVICES" in out.stderr
        return
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [d["physical_index"] for d in data["devices"]] == physical


def test_pin_and_launch_plan(site: Path, root: Path) -> None:
    out = cli(site, "pin", "2,0", "--root", str(root))
    assert out.returncode == 0, out.stderr
    assert "ACME_VISIBLE_DEVICES=2,0" in out.stdout
    plan = cli(site, "launch-plan", "--nproc-per-node", "3", "--root", str(root), "--json",
               "train.py")  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    assert "ACME_VISIBLE_DEVICES" in plan.stdout
    text = cli(site, "env", "--root", str(root), "--env", "ACME_VISIBLE_DEVICES=1")
    assert text.returncode == 0, text.stderr
    assert "acme" in text.stdout and "ACME_VISIBLE_DEVICES" in text.stdout


def test_generated_docs_page_lists_its_variable(site: Path) -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import gen_docs; "
        "print(gen_docs.backend_page('acme', None))"
    )
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(REPO / "scripts")], capture_output=True, text=True,
        env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Visibility variables read: `ACME_VISIBLE_DEVICES`" in out.stdout


def test_explain_and_the_integrations(site: Path, root: Path) -> None:
    out = cli(site, "explain", "--root", str(root), "--env", "ACME_VISIBLE_DEVICES=2")
    assert out.returncode == 0, out.stderr
    assert "acme" in out.stdout and "ACME_VISIBLE_DEVICES" in out.stdout
    code = textwrap.dedent(
        f"""
        import json, hwbackends
        from hwbackends import accelerate as hwa, transformers as hwt
        host = hwbackends.Host.from_system({str(root)!r})
        env = {{"ACME_VISIBLE_DEVICES": "2"}}
        pre = hwt.pretrained_kwargs(env=env, host=host)
        train = hwa.training_kwargs(env=env, host=host)
        print(json.dumps({{"device_map": pre["device_map"], "dtype": str(pre["dtype"]),
                          "attn": pre["attn_implementation"], "bf16": train.get("bf16")}}))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWBACKENDS_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout) == {
        "device_map": "acme:0", "dtype": dtype_text("bfloat16"), "attn": "sdpa", "bf16": True,
    }  # fmt: skip


def test_smoke_names_the_backend_like_a_built_in(site: Path) -> None:
    # this machine has no Acme hardware: the same clear refusal a built-in gets
    out = cli(site, "smoke", "--backend", "acme")
    assert out.returncode != 0
    assert "the acme backend is not available here: no Acme ATU hardware found" in out.stderr
    assert "Traceback" not in out.stderr
