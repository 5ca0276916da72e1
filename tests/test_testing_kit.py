"""The conformance kit, proven from outside: a new plugin from the template, and broken ones."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
from coretest import pip_install

import hwbackends
from hwbackends import Host, Probe
from hwbackends.plugin import BaseBackend
from hwbackends.testing import (
    BackendContract,
    check_capabilities,
    check_declarations,
    check_import_is_clean,
    check_machine_tree,
    check_probe,
    check_protocol,
    check_visibility_round_trip,
    machine_tree,
)

ROOT = Path(__file__).resolve().parent.parent


def load_new_plugin_script() -> Any:
    spec = importlib.util.spec_from_file_location("new_plugin", ROOT / "scripts" / "new_plugin.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def zeta_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A brand-new backend for an imaginary accelerator, made from the template and installed."""
    work = tmp_path_factory.mktemp("newplugin")
    made = load_new_plugin_script().create(
        "zeta", vendor="zetacorp", device="zeta", package="torch-zeta", display="Zeta TPX",
        dest=work, pci_vendor=0x1F2A, variable="ZETA_VISIBLE_DEVICES",
    )  # fmt: skip
    site = work / "site"
    pip_install(made, site)
    return made, site


def test_template_plugin_is_selected_by_env_host(zeta_site: tuple[Path, Path]) -> None:
    made, site = zeta_site
    host = made / "tests" / "hosts" / "zeta-2.json"
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HWBACKENDS_PLUGINS": "zeta"}
    out = subprocess.run(
        [sys.executable, "-m", "hwbackends", "env", "--host", str(host), "--json"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["chosen"] == "zeta"
    assert [d["name"] for d in report["devices"]] == ["Zeta TPX card", "Zeta TPX card"]
    zeta = next(c for c in report["candidates"] if c["name"] == "zeta")
    assert (zeta["origin"], zeta["version"]) == ("hwbackends-zeta", "0.1.0")
    assert report["settings"]["from_pretrained"]["kwargs"]["device_map"] == "zeta:0"


def run_kit(made: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(made / "tests")],
        capture_output=True, text=True, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        cwd=made,
    )  # fmt: skip


def test_template_plugin_passes_the_kit_once_its_variable_is_declared(
    zeta_site: tuple[Path, Path],
) -> None:
    made, site = zeta_site
    out = run_kit(made, site)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "11 passed" in out.stdout
    # the generator filled in what the kit needs from --package and --pci-vendor
    test_text = (made / "tests" / "test_zeta.py").read_text(encoding="utf-8")
    assert 'sdk_modules = ("torch_zeta",)' in test_text
    init = (made / "src" / "hwbackends_zeta" / "__init__.py").read_text(encoding="utf-8")
    assert "pci_vendor_ids: ClassVar[tuple[int, ...]] = (0x1F2A,)" in init
    # what the generator writes is clean Python by its own settings (its pyproject.toml), in
    # its own folder outside this repository (the template itself is excluded from lint here)
    assert not any(p.name == "hwbackends" and (p / "plugins").is_dir() for p in made.parents)
    # and by ruff's defaults alone (--isolated: no configuration file at all)
    for args in (["check"], ["check", "--isolated"], ["format", "--check"],
                 ["format", "--check", "--isolated"]):  # fmt: skip
        lint = subprocess.run(
            [sys.executable, "-m", "ruff", *args, "--no-cache", "."],
            capture_output=True, text=True, cwd=made,
        )  # fmt: skip
        assert lint.returncode == 0, (args, lint.stdout + lint.stderr)
    assert "driver_modules: ClassVar[tuple[str, ...]] = ()" in init
    readme = (made / "README.md").read_text(encoding="utf-8")
    assert "](../" not in readme and "](/" not in readme  # no link outside the plugin


def test_unedited_template_fails_the_kit_until_a_selection_can_be_expressed(
    tmp_path: Path,
) -> None:
    made = load_new_plugin_script().create(
        "eta", vendor="etacorp", device="eta", package="torch-eta", display="Eta", dest=tmp_path
    )
    pip_install(made, tmp_path / "site")
    out = run_kit(made, tmp_path / "site")
    assert out.returncode == 1, out.stdout[-3000:]
    assert "1 failed, 10 passed" in out.stdout
    assert "FAILED tests/test_eta.py::TestEtaContract::test_visibility_round_trip" in out.stdout
    assert "eta: device 0 cannot be selected alone on host " in out.stdout


def test_an_sdk_imported_at_module_level_fails_the_kit_with_a_message(tmp_path: Path) -> None:
    made = load_new_plugin_script().create(
        "theta", vendor="thetacorp", device="theta", package="torch-theta", display="Theta",
        dest=tmp_path, variable="THETA_VISIBLE_DEVICES",
    )  # fmt: skip
    init = made / "src" / "hwbackends_theta" / "__init__.py"
    text = init.read_text(encoding="utf-8")
    future = "from __future__ import annotations\n"
    init.write_text(text.replace(future, future + "\nimport torch_theta  # noqa: F401\n"))
    site = tmp_path / "site"
    pip_install(made, site)
    (site / "torch_theta.py").write_text("DEVICE = 'theta'\n")  # the vendor's extension
    out = run_kit(made, site)
    assert out.returncode == 1
    assert "importing hwbackends_theta imported torch_theta" in out.stdout
    assert "1 failed, 10 passed" in out.stdout  # a kit failure, not a collection error


def test_vendor_ci_catches_devices_that_raise_without_the_hardware() -> None:
    from hwbackends.testing import check_devices_agree

    class Fragile(Good):
        def devices(self, host: Host, env: Any) -> list[Any]:
            raise RuntimeError("libomega.so: cannot open shared object file")

    assert check_devices_agree(Fragile(), Host.from_dict({}), {}) == [
        "omega.devices() raised RuntimeError: libomega.so: cannot open shared object file on "
        "host dict; it must return a list (empty where there is no hardware)"
    ]


# -- a second imaginary plugin, broken in each way the kit knows ---------------------------


class Good(BaseBackend):
    name: ClassVar[str] = "omega"
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "omega"
    vendor: ClassVar[str | None] = "omegacorp"


HOST = Host.from_dict(
    {"devices": [{"vendor": "omegacorp", "name": "O1"}, {"vendor": "omegacorp", "name": "O2"}]}
)


class OtherApi(Good):
    api_version: ClassVar[int] = 7  # type: ignore[misc]


class NoApi(BaseBackend):  # declares everything but the plugin API it was written for
    name: ClassVar[str] = "omega"
    device_type: ClassVar[str] = "omega"


class Raises(Good):
    def __init__(self) -> None:
        raise OSError("opened /dev/omega0")


class Untyped(Good):
    priority = "high"  # type: ignore[assignment]


class ProbeRaises(Good):
    def probe(self, host: Host) -> Probe:
        raise KeyError("driver")


class SilentProbe(Good):
    def probe(self, host: Host) -> Probe:
        return Probe("omega", True, False, "  ")


class WrongProbe(Good):
    def probe(self, host: Host) -> Probe:
        return Probe("alpha", True, True, "fine")


class NoHint(Good):
    def probe(self, host: Host) -> Probe:
        return Probe("omega", True, False, "package missing")


def test_check_protocol_messages() -> None:
    assert check_protocol(Good, "omega") == []
    speaks = f"hwbackends {hwbackends.__version__} speaks plugin API version 1"
    assert check_protocol(OtherApi) == [
        f"OtherApi was written for plugin API version 7, but {speaks}; install a release of "
        "the plugin written for API 1, or a hwbackends release that speaks API 7 (the docs "
        "list them: Writing a backend, 'Plugin API versions')"
    ]
    assert check_protocol(NoApi) == [
        f"NoApi declares no plugin API version (no api_version in its class); {speaks}: "
        "install a release of the plugin that declares it, or add `api_version = 1` to the "
        "class if it is written for that API"
    ]
    assert check_protocol(Raises) == [
        "Raises() raised OSError: opened /dev/omega0; a backend must construct without "
        "arguments and without touching hardware"
    ]
    assert check_protocol(Untyped) == [
        "Untyped does not satisfy the Backend protocol: missing or mistyped priority (see "
        "hwbackends.Backend; subclass hwbackends.plugin.BaseBackend)"
    ]
    assert check_protocol(Good, "omicron") == [
        "Good.name is 'omega' but its entry point is named 'omicron'; they must be equal"
    ]


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (ProbeRaises, "omega.probe() raised KeyError: 'driver' on host dict"),
        (SilentProbe, "omega.probe() gave no reason on host dict"),
        (SilentProbe, "omega.probe() found hardware but not the software, and gave no hint "
                      "naming the fix (host dict)"),
        (WrongProbe, "omega.probe() returned a Probe for 'alpha'"),
        (NoHint, "omega.probe() found hardware but not the software, and gave no hint naming "
                 "the fix (host dict)"),
    ],
)  # fmt: skip
def test_check_probe_messages(cls: type[Good], message: str) -> None:
    assert message in check_probe(cls(), HOST)
    assert check_probe(Good(), HOST) == []


class BadDeclarations:
    name = "omega"
    vendor = "ac-me"
    pci_vendor_ids = (0x10000,)
    pci_device_ids: ClassVar[list[int]] = [0x1]
    pci_classes = (True,)
    device_nodes = ("/dev/omega{n}", "a/../b", "x{n}{n}", "omega{n}", "ok")
    driver_modules = ("",)
    packages = "torch-omega"
    watch_paths = ()
    visibility = "OMEGA_VISIBLE_DEVICES"


class NoVendor:
    pci_vendor_ids = (0x1F2A,)
    device_nodes: ClassVar[list[str]] = ["omega0"]


def test_check_declarations_messages() -> None:
    assert check_declarations(Good) == []
    assert check_declarations(BadDeclarations) == [
        "omega: vendor = 'ac-me'; expected letters, digits and underscores",
        "omega: pci_vendor_ids = (65536,); expected a tuple of 16-bit integers",
        "omega: pci_device_ids = [1]; expected a tuple of 16-bit integers",
        "omega: pci_classes = (True,); expected base classes (0x12) or base class and "
        "subclass (0x0b40)",
        *(
            f"omega: device node pattern {p!r}; expected a name under /dev such as 'acme{{n}}' "
            "(one {n} at most, no leading /dev/)"
            for p in ("/dev/omega{n}", "a/../b", "x{n}{n}")
        ),
        "omega: driver_modules = ('',); expected a tuple of strings",
        "omega: packages = 'torch-omega'; expected a tuple of strings",
        "omega: visibility = 'OMEGA_VISIBLE_DEVICES'; expected a hwbackends.visibility rule "
        "such as IndexList('ACME_VISIBLE_DEVICES')",
    ]
    assert check_declarations(NoVendor) == [
        "NoVendor: declares pci_vendor_ids but no vendor key for those devices",
        "NoVendor: device_nodes = ['omega0']; expected a tuple of /dev patterns",
    ]


def test_check_capabilities_messages() -> None:
    from dataclasses import replace

    from hwbackends import AttentionOption

    b = Good()
    caps = b.capabilities(None)
    assert check_capabilities(caps, b) == []
    bad = replace(
        caps,
        attention=(AttentionOption("flash_attention_2", source="", packages=("flash-attn",)),),
        sources={},
        distributed_backend="",
    )
    assert check_capabilities(bad, b) == [
        "omega capabilities (default): the last attention option must need nothing (e.g. eager)",
        "omega capabilities (default): attention 'flash_attention_2' has no source",
        "omega capabilities (default) name no distributed backend",
        "omega capabilities (default): training_precision has no source",
    ]


def test_check_visibility_round_trip_catches_a_writer_that_lies() -> None:
    class Liar(Good):
        def visibility_env(
            self, indices: Any, *, host: Host | None = None, env: Any = None
        ) -> dict[str, str]:
            return {}

    from hwbackends.testing import check_devices_agree

    assert check_devices_agree(Good(), HOST, {}) == []
    # a backend without a visibility model shows every device: a reversed pick cannot hold
    assert check_visibility_round_trip(Liar(), HOST) == [
        "omega: visibility_env([0]) = {} shows physical [0, 1], not [0]",
        "omega: visibility_env([1]) = {} shows physical [0, 1], not [1]",
        "omega: visibility_env([1, 0]) = {} shows physical [0, 1], not [1, 0]",
    ]
    # a backend that declares no rule cannot select one device: that fails, it is not skipped
    problems = check_visibility_round_trip(Good(), HOST)
    assert problems[0] == (
        "omega: device 0 cannot be selected alone on host dict (no visibility variable is "
        "declared, so [0] cannot be selected), but `hwbackends pin` and launch plans need it. "
        "Fix: declare the runtime's visibility rule on the backend class (for example "
        "visibility = IndexList('ACME_VISIBLE_DEVICES'); see hwbackends.visibility)"
    )


def test_check_import_is_clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "leaky_plugin.py").write_text("import os, json\nos.environ['LEAK'] = '1'\n")
    (tmp_path / "clean_plugin.py").write_text("X = 1\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert check_import_is_clean("clean_plugin", ["json"]) == []
    assert check_import_is_clean("leaky_plugin", ["json"]) == [
        "importing leaky_plugin imported json",
        "importing leaky_plugin changed os.environ: LEAK",
    ]


# -- machine trees: what the real reader gives a backend ---------------------------------------


class TtLike(BaseBackend):
    """A vendor's plugin for hardware the core's catalog lists as having no plugin (1e52)."""

    name: ClassVar[str] = "ttlike"
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "ttlike"
    vendor: ClassVar[str | None] = "ttlike"
    pci_vendor_ids: ClassVar[tuple[int, ...]] = (0x1E52,)
    pci_classes: ClassVar[tuple[int, ...]] = (0x12,)
    device_node_units: ClassVar[tuple[str, ...]] = ("tenstorrent/{n}",)
    packages: ClassVar[tuple[str, ...]] = ("torch-ttlike",)


class TtLikeDisplayOnly(TtLike):
    pci_classes: ClassVar[tuple[int, ...]] = (0x03,)  # a wrong class: its cards are 0x12


def four_cards(root: Path) -> Path:
    return machine_tree(
        root,
        pci=[(f"0000:0{i}:00.0", 0x1E52, 0x401E, 0x120000, "tenstorrent") for i in range(1, 5)],
        dev=[f"tenstorrent/{i}" for i in range(4)],
        files={"sys/module/tenstorrent/version": "2.0.0\n"},
    )


def test_machine_tree_writes_what_the_reader_reads(tmp_path: Path) -> None:
    root = four_cards(tmp_path / "root")
    assert (root / "sys/bus/pci/devices/0000:01:00.0/class").read_text() == "0x120000\n"
    assert os.readlink(root / "sys/bus/pci/devices/0000:04:00.0/driver").endswith(
        "drivers/tenstorrent"
    )
    host = Host.from_system(str(root), backends=[])
    assert [d.extra.get("driver") for d in host.devices] == ["tenstorrent"] * 4


def test_check_machine_tree_passes_a_plugin_that_gets_its_cards(tmp_path: Path) -> None:
    root = four_cards(tmp_path / "root")
    assert check_machine_tree(TtLike, root, 4, packages={"torch-ttlike": "1.0"}) == []


def test_check_machine_tree_names_what_went_wrong(tmp_path: Path) -> None:
    root = four_cards(tmp_path / "root")
    problems = check_machine_tree(TtLikeDisplayOnly, root, 4, packages={"torch-ttlike": "1.0"})
    buses = [f"0000:0{i}:00.0" for i in range(1, 5)]
    assert problems[0] == (
        "ttlike: functions of its PCI vendor ids went to the core's catalog or stayed "
        f"unclaimed: {buses}"
    )
    assert problems[1].startswith("ttlike: warning: 4 Tenstorrent AI accelerator")
    # without its software it is not selected, and the check says why
    (problem,) = check_machine_tree(TtLike, root, 4)
    assert problem.startswith("ttlike: cpu was selected: ")
    assert "torch-ttlike" in problem


def test_the_contract_runs_its_machine_trees(tmp_path: Path) -> None:
    root = four_cards(tmp_path / "root")

    class Contract(BackendContract):
        backend_cls = TtLike
        machine_trees = ((str(root), 4),)
        tree_packages: ClassVar[dict[str, str]] = {"torch-ttlike": "1.0"}

    Contract().test_machine_trees_give_it_its_hardware()

    class Wrong(Contract):
        machine_trees = ((str(root), 3),)

    with pytest.raises(pytest.fail.Exception, match="gave it 4 device"):
        Wrong().test_machine_trees_give_it_its_hardware()
