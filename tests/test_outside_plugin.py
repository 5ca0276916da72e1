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
UUIDS = ["ACME-5f0c2a9e-0001", "ACME-5f0c2a9e-0002", "ACME-77d1b3c4-0003"]
ACME_2 = {
    "packages": {"torch-acme": "1.0"},
    "devices": [
        {"vendor": "acme", "pci_bus_id": "0000:17:00.0", "name": "Acme ATU", "uuid": UUIDS[0]},
        {"vendor": "acme", "pci_bus_id": "0000:65:00.0", "name": "Acme ATU", "uuid": UUIDS[1]},
    ],
    "device_nodes": ["/dev/acme0", "/dev/acme1"],
}


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
    # its own tests: the conformance kit on its own host files, as the docs write them
    _write(project, "tests/test_acme.py", (FIXTURE / "acme_ci.py").read_text(encoding="utf-8"))
    _write(project, "tests/hosts/acme-2.json", json.dumps(ACME_2, indent=2))
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
    # the distribution's PCI ID database (the format of https://pci-ids.ucw.cz/v2.2/pci.ids)
    _write(
        r,
        "usr/share/hwdata/pci.ids",
        "# pci.ids excerpt\n1f29  Other Corp\n\t0001  Other thing\n1f2a  Acme Corporation\n"
        "\t0001  ATU 2 [Roadrunner]\n\t\t1f2a 0001  ATU 2 board\n\t0002  ATU NIC\n"
        "1f2b  Later Corp\nC 12  Processing accelerators\n",
    )
    # the driver's class folder: each card's bus id and UUID
    for i, uuid in enumerate(UUIDS):
        _write(r, f"sys/class/acme/acme{i}/bus_id", f"0000:0{i + 1}:00.0\n")
        _write(r, f"sys/class/acme/acme{i}/uuid", uuid + "\n")
    return r


def cli(site: Path | None, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWBACKENDS_")}
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    env.update(settings)
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
    assert len(text.splitlines()) <= 70
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            allowed = ("__future__", "typing", "dataclasses", "hwbackends", "hwbackends.plugin",
                       "hwbackends.visibility")  # fmt: skip
            assert node.module in allowed, node.module
        # the UUID grammar is a declared kind: no rule class of its own
        if isinstance(node, ast.ClassDef):
            assert [ast.unparse(b) for b in node.bases] == ["BaseBackend"], node.name


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
    [
        ("2,0", [2, 0]),
        ("1,x,0", [1]),
        ("0,7,1", [0]),
        ("", []),
        ("1,1", []),
        # UUIDs, whole or by a unique prefix, mixed with indices
        (f"{UUIDS[2]},0", [2, 0]),
        ("ACME-77,ACME-5f0c2a9e-0001", [2, 0]),
        ("ACME-5f0c,2", []),  # an ambiguous prefix names no device: the list ends at once
    ],
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
    out = cli(site, "plugins", "--doc", "acme")
    assert out.returncode == 0, out.stderr
    assert "Variables read: `ACME_VISIBLE_DEVICES`" in out.stdout


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
                          "attn": pre.get("attn_implementation"), "bf16": train.get("bf16")}}))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWBACKENDS_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout) == {
        "device_map": "acme:0", "dtype": dtype_text("bfloat16"), "attn": None, "bf16": True,
    }  # fmt: skip  # no model given: the attention is left to Transformers


def test_smoke_names_the_backend_like_a_built_in(site: Path) -> None:
    # this machine has no Acme hardware: the same clear refusal a built-in gets
    out = cli(site, "smoke", "--backend", "acme")
    assert out.returncode != 0
    assert "the acme backend is not available here: no Acme ATU hardware found" in out.stderr
    assert "Traceback" not in out.stderr


def test_uuids_in_its_variable_pin_and_launch_plan(site: Path, root: Path) -> None:
    out = cli(site, "devices", "--root", str(root), "--env",
              f"ACME_VISIBLE_DEVICES={UUIDS[2]},ACME-5f0c2a9e-0001", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [d["physical_index"] for d in data["devices"]] == [2, 0]
    assert [d["uuid"] for d in data["devices"]] == [UUIDS[2], UUIDS[0]]
    # a repeated device: the declared policy (PyTorch's model of CUDA) and a warning saying so
    out = cli(site, "env", "--root", str(root), "--env", f"ACME_VISIBLE_DEVICES=1,{UUIDS[1]}")
    assert "repeats device 1" in " ".join(out.stdout.split()), out.stdout
    plan = cli(site, "launch-plan", "--nproc-per-node", "3", "--root", str(root), "--json",
               "--env", f"ACME_VISIBLE_DEVICES={UUIDS[2]},{UUIDS[0]}", "train.py")  # fmt: skip
    assert plan.returncode == 0, plan.stderr


def test_its_own_ci_passes_the_kit(site: Path) -> None:
    project = site.parent / "hwbackends-acme"
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        capture_output=True, text=True, cwd=project,
        env={"PYTHONPATH": str(site), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and "failed" not in out.stdout


@pytest.mark.parametrize(
    ("order", "reason"),
    [
        ("acme,cuda", "the first usable backend in HWBACKENDS_BACKEND=acme,cuda"),
        (
            "cuda,acme",
            "the first usable backend in HWBACKENDS_BACKEND=cuda,acme (cuda: unavailable)",
        ),
    ],
)
def test_the_users_order_with_a_built_in(site: Path, root: Path, order: str, reason: str) -> None:
    out = cli(site, "env", "--root", str(root), "--json", HWBACKENDS_BACKEND=order)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert (report["chosen"], report["rule"], report["reason"]) == ("acme", "preferred", reason)


def test_its_docs_page_builds_with_mkdocs_strict(site: Path, tmp_path: Path) -> None:
    hosts = site.parent / "hwbackends-acme" / "tests" / "hosts"
    out = cli(site, "plugins", "--doc", "acme", "--hosts", str(hosts))
    assert out.returncode == 0, out.stderr
    page = out.stdout
    assert "# acme: capability tables" in page
    assert "Rule `IndexOrUuidList('ACME_VISIBLE_DEVICES', 'ACME-')`" in page
    assert "| uuid_prefix | `ACME-` |" in page
    assert "| `flex_attention` | the Acme graph compiler cannot lower" in page
    assert "in `hosts/`" in page and str(tmp_path) not in page and str(site) not in page
    docs = tmp_path / "docs"
    _write(docs, "index.md", "# Acme\n\nThe [capability tables](acme.md).\n")
    _write(docs, "acme.md", page)
    _write(
        tmp_path, "mkdocs.yml", "site_name: acme\nstrict: true\nnav:\n  - index.md\n  - acme.md\n"
    )
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "acme" / "index.html").is_file()


def test_gen_docs_check_ignores_an_extra_installed_plugin(site: Path) -> None:
    __import__("transformers")  # the expected output was made with Transformers installed
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    )
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_docs.py"), "--check"],
        capture_output=True, text=True, env=env, cwd=REPO,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr


def test_a_refused_attention_name_is_an_error_with_the_plugins_reason(
    site: Path, root: Path
) -> None:
    code = textwrap.dedent(
        f"""
        import hwbackends
        from hwbackends import transformers as hwt
        host = hwbackends.Host.from_system({str(root)!r})
        try:
            hwt.pretrained_kwargs(env={{}}, host=host, attention="flex_attention")
        except hwbackends.UnsupportedSettingError as exc:
            print(exc)
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWBACKENDS_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert got.returncode == 0, got.stderr
    assert got.stdout.startswith(
        "attn_implementation='flex_attention' cannot load on acme (acme): the Acme graph "
        "compiler cannot lower"
    ), got.stdout


def test_without_the_plugin_the_hint_names_the_vendor_from_pci_ids(root: Path) -> None:
    out = cli(None, "env", "--root", str(root), "--json")
    assert out.returncode == 0, out.stderr
    warnings = json.loads(out.stdout)["warnings"]
    assert (
        "3 Acme Corporation accelerator(s) (ATU 2 [Roadrunner]) that no installed backend "
        "claims (PCI 0x1f2a:0x0001 at 0000:01:00.0, 0000:02:00.0, 0000:03:00.0). Fix: install "
        "Acme Corporation's hwbackends plugin; `hwbackends plugins` lists the installed ones"
    ) in warnings, warnings


def test_a_second_plugin_for_the_same_cards_is_named_with_the_setting(
    site: Path, root: Path, tmp_path: Path
) -> None:
    # another vendor's plugin claims the same PCI functions under its own key
    other = tmp_path / "other"
    _write(
        other,
        "acme_alt.py",
        textwrap.dedent(
            """
            from hwbackends.plugin import BaseBackend

            class AltBackend(BaseBackend):
                name = "acmealt"
                api_version = 1
                device_type = "acmealt"
                vendor = "acmealt"
                pci_vendor_ids = (0x1F2A,)
                pci_classes = (0x12,)
            """
        ),
    )
    _write(other, "acme_alt-1.0.dist-info/METADATA", "Name: acme-alt\nVersion: 1.0\n")
    _write(
        other,
        "acme_alt-1.0.dist-info/entry_points.txt",
        "[hwbackends.backends]\nacmealt = acme_alt:AltBackend\n",
    )
    both = os.pathsep.join([str(site), str(other)])
    out = cli(other, "env", "--root", str(root), "--json", PYTHONPATH=both)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["chosen"] == "acme"
    assert (
        "acme and acmealt both claim the same devices (0000:01:00.0, 0000:02:00.0, "
        "0000:03:00.0); acme is used (priority 60 vs 50). HWBACKENDS_BACKEND decides: set "
        "HWBACKENDS_BACKEND=acmealt,acme to prefer acmealt, or HWBACKENDS_DISABLE=acmealt to "
        "keep acme alone"
    ) in report["warnings"]
    out = cli(other, "env", "--root", str(root), "--json", PYTHONPATH=both,
              HWBACKENDS_BACKEND="acmealt,acme")  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert (report["chosen"], report["rule"]) == ("acmealt", "preferred")
    assert not [w for w in report["warnings"] if "both claim" in w]


# -- a vendor the core's catalog knows: its own plugin takes its hardware ----------------------

TT_PLUGIN = """
from typing import ClassVar

from hwbackends.plugin import BaseBackend


class TtBackend(BaseBackend):
    name: ClassVar[str] = "tt"
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "tt"
    display: ClassVar[str] = "Tenstorrent"
    vendor: ClassVar[str | None] = "tenstorrent"
    pci_vendor_ids: ClassVar[tuple[int, ...]] = (0x1E52,)
    pci_classes: ClassVar[tuple[int, ...]] = (0x12,)
    device_nodes: ClassVar[tuple[str, ...]] = ("tenstorrent/{n}",)
    device_node_units: ClassVar[tuple[str, ...]] = ("tenstorrent/{n}",)
    driver_modules: ClassVar[tuple[str, ...]] = ("tenstorrent",)
    packages: ClassVar[tuple[str, ...]] = ("torch-tt",)
"""
TT_BUSES = [f"0000:0{i}:00.0" for i in range(1, 5)]


@pytest.fixture(scope="module")
def tt_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An installed Tenstorrent plugin (a dist-info with its entry point) and its extension."""
    site = tmp_path_factory.mktemp("tt-site")
    _write(site, "hwbackends_tt/__init__.py", TT_PLUGIN)
    _write(site, "hwbackends_tt-1.0.dist-info/METADATA", "Name: hwbackends-tt\nVersion: 1.0\n")
    _write(
        site,
        "hwbackends_tt-1.0.dist-info/entry_points.txt",
        "[hwbackends.backends]\ntt = hwbackends_tt:TtBackend\n",
    )
    _write(site, "torch_tt-1.0.dist-info/METADATA", "Name: torch-tt\nVersion: 1.0\n")
    # torch imports it at start-up (device-backend autoload), which registers the 'tt' device
    _write(
        site,
        "torch_tt-1.0.dist-info/entry_points.txt",
        "[torch.backends]\ntorch_tt = torch_tt:_autoload\n",
    )
    return site


@pytest.fixture(scope="module")
def tt_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four Wormhole cards (1e52:401e, class 0x12, bound to tenstorrent) and their /dev nodes,
    as tt-kmd makes them: the vendor id and driver the core's catalog lists as hardware no
    plugin exists for."""
    r = tmp_path_factory.mktemp("tt-root")
    drv = r / "sys/bus/pci/drivers/tenstorrent"
    drv.mkdir(parents=True)
    for i, bus in enumerate(TT_BUSES):
        pci_function(r, bus, "0x1e52", "0x401e", "0x120000")
        fn = r / "sys/bus/pci/devices" / bus
        os.symlink(os.path.relpath(drv, fn), fn / "driver")
        _write(r, f"dev/tenstorrent/{i}", "")
    return r


def test_a_catalogued_vendors_plugin_gets_its_hardware(tt_site: Path, tt_root: Path) -> None:
    out = cli(tt_site, "env", "--root", str(tt_root), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["chosen"] == "tt"
    assert [d["pci_bus_id"] for d in report["devices"]] == TT_BUSES
    # each card once, under the plugin's vendor key; no "no plugin exists" for its own cards
    assert [(d["vendor"], d["pci_bus_id"]) for d in report["host"]["accelerators"]] == [
        ("tenstorrent", b) for b in TT_BUSES
    ]
    assert report["warnings"] == [], report["warnings"]
    text = cli(tt_site, "env", "--root", str(tt_root))
    assert text.returncode == 0, text.stderr
    assert "no hwbackends plugin exists" not in text.stdout


def test_without_its_plugin_the_catalog_names_the_hardware(tt_root: Path) -> None:
    out = cli(None, "env", "--root", str(tt_root), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["warnings"] == [
        "4 Tenstorrent AI accelerator (Grayskull, Wormhole, Blackhole) (PCI 1e52:401e at "
        f"{', '.join(TT_BUSES)}): no hwbackends plugin exists for this hardware, so no backend "
        "can use it"
    ]


UNREGISTERED = (
    "tt: torch has no 'tt' device of its own: device_map='tt:0' and torch.device('tt') work "
    "only once tt's torch extension has registered it, and "
)


def test_an_extension_without_autoload_is_named_in_the_advice(
    tt_site: Path, tt_root: Path, tmp_path: Path
) -> None:
    # the same plugin beside a torch-tt that declares no torch.backends entry point
    site = tmp_path / "site"
    for f in tt_site.rglob("*"):
        if (
            f.is_file()
            and "__pycache__" not in f.parts  # an earlier import's bytecode: not text
            and f.relative_to(tt_site).as_posix() != "torch_tt-1.0.dist-info/entry_points.txt"
        ):
            _write(site, str(f.relative_to(tt_site)), f.read_text(encoding="utf-8"))
    out = cli(site, "env", "--root", str(tt_root), "--json")
    assert out.returncode == 0, out.stderr
    (warning,) = json.loads(out.stdout)["warnings"]
    assert warning == UNREGISTERED + (
        "no installed distribution declares a torch.backends entry point, so `import torch` "
        "does not register it (torch's device-backend autoload). Fix: import the extension's "
        "module before from_pretrained (or install a release of it that declares the "
        "torch.backends entry point)"
    )
