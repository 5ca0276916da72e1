"""The core names no vendor; what it needs comes from the installed backends' declarations.

The one exception is the catalog of known plugin distributions (``hwbackends._discovery.catalog``),
used only to say which plugin to install; it must agree with the plugins it names.
"""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import pytest
from coretest import Site, pci_function

from hwbackends import Host
from hwbackends._discovery.catalog import KNOWN_PLUGINS, core_checkout, install_command
from hwbackends._selection.registry import Registry
from hwbackends.testing import make_registry

SRC = Path(__file__).resolve().parents[1] / "src" / "hwbackends"
DOCS_HOSTS = Path(__file__).resolve().parents[1] / "docs" / "hosts"
VENDOR_KEYS = {k.vendor for k in KNOWN_PLUGINS}
PCI_IDS = {i for k in KNOWN_PLUGINS for i in k.pci_vendor_ids}
NVIDIA_HOST = Host.from_file(DOCS_HOSTS / "two-l40s.json")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            out.add(id(first.value))
    return out


def vendor_constants(src: Path) -> list[str]:
    """Every vendor key (as a string) and vendor PCI id (as a number) in the modules under
    ``src``, outside docstrings and the catalog."""
    found = []
    for path in sorted(src.rglob("*.py")):
        if path.relative_to(src).as_posix() == "_discovery/catalog.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant) or id(node) in docs:
                continue
            v = node.value
            if (isinstance(v, str) and v.lower() in VENDOR_KEYS) or (
                isinstance(v, int) and not isinstance(v, bool) and v in PCI_IDS
            ):
                found.append(f"{path.relative_to(src)}:{node.lineno}: {v!r}")
    return found


def test_nothing_in_the_core_lists_vendors() -> None:
    """No vendor key as a string and no vendor PCI id as a number, outside the catalog."""
    assert vendor_constants(SRC) == []


def test_the_check_above_can_fail(tmp_path: Path) -> None:
    """The scanner itself, on a planted tree: a vendor name and a PCI id in code are found,
    the same words in a docstring and in the catalog are not."""
    (tmp_path / "_discovery").mkdir()
    (tmp_path / "_discovery" / "catalog.py").write_text('KEY = "nvidia"\n')
    (tmp_path / "ok.py").write_text('"""Mentions nvidia in a docstring only."""\nX = 1\n')
    (tmp_path / "bad.py").write_text('"""A module."""\n\nVENDOR = "NVIDIA"\nID = 0x10DE\n')
    assert vendor_constants(tmp_path) == ["bad.py:3: 'NVIDIA'", "bad.py:4: 4318"]


@pytest.mark.parametrize("known", KNOWN_PLUGINS, ids=lambda k: k.backend)
def test_catalog_agrees_with_each_in_repo_plugin(known: object) -> None:
    from hwbackends._discovery.catalog import KnownPlugin

    assert isinstance(known, KnownPlugin)
    mod = importlib.import_module(f"hwbackends_{known.backend}")
    cls = next(
        v
        for v in vars(mod).values()
        if isinstance(v, type) and getattr(v, "name", "") == known.backend
    )
    assert (cls.vendor, cls.pci_vendor_ids) == (known.vendor, known.pci_vendor_ids)
    assert tuple(cls.pci_classes) == known.pci_classes
    assert tuple(cls.pci_device_ids) == known.pci_device_ids
    assert tuple(cls.device_nodes) == known.device_nodes


def test_core_alone_on_a_gpu_box_says_which_plugin_to_install() -> None:
    report = Registry([]).select({}, NVIDIA_HOST)
    assert (report.chosen, report.rule) == ("cpu", "cpu-fallback")
    (warning,) = [w for w in report.warnings if "hwbackends-cuda" in w]
    if core_checkout() is None:  # the core was installed from its wheel (.ci/wheels.sh)
        fix = "pip install hwbackends-cuda (published package)"
    else:  # an editable install: the command installs the plugin folder of this checkout
        local = Path(__file__).resolve().parents[1] / "plugins" / "hwbackends-cuda"
        fix = f"pip install {local} (from this checkout)"
    assert warning == (
        "2 NVIDIA GPU(s) found (0000:41:00.0, 0000:c1:00.0), but hwbackends-cuda is not "
        f"installed. Fix: {fix}"
    )


def test_install_command_from_a_checkout_and_published(tmp_path: Path) -> None:
    (tmp_path / "plugins" / "hwbackends-cuda").mkdir(parents=True)
    (tmp_path / "plugins" / "hwbackends-cuda" / "pyproject.toml").write_text("")
    local = tmp_path / "plugins" / "hwbackends-cuda"
    assert install_command("hwbackends-cuda", str(tmp_path)) == (
        f"pip install {local}",
        "from this checkout",
    )
    assert install_command("hwbackends-cuda", None) == (
        "pip install hwbackends-cuda",
        "published package",
    )
    # a checkout without that plugin folder: the published name
    assert install_command("hwbackends-acme", str(tmp_path))[1] == "published package"


def test_checkout_is_read_from_pep610_direct_url(tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = site / "hwbackends-0.1.0.dist-info"
    info.mkdir(parents=True)
    repo = tmp_path / "repo"
    (repo / "plugins").mkdir(parents=True)
    (info / "direct_url.json").write_text(json.dumps({"url": repo.as_uri(), "dir_info": {}}))
    assert core_checkout([str(site)]) == str(repo)
    (info / "direct_url.json").write_text(json.dumps({"url": "https://example.org/x.whl"}))
    assert core_checkout([str(site)]) is None
    (info / "direct_url.json").write_text("{not json")
    assert core_checkout([str(site)]) is None


def test_broken_plugin_on_a_box_with_its_hardware_is_a_stated_fallback(site: Site) -> None:
    site.add_plugin("cuda", "raise ImportError('libfoo.so: cannot open shared object')\n")
    report = Registry(path=[str(site.path)]).select({}, NVIDIA_HOST)
    assert (report.chosen, report.rule) == ("cpu", "cpu-fallback")
    (warning,) = [w for w in report.warnings if "cuda backend is broken" in w]
    assert warning.startswith("2 NVIDIA GPU(s) found, but the cuda backend is broken: importing")
    assert "libfoo.so" in warning and "Fix: reinstall or update hwbackends-cuda" in warning


def test_disabled_plugin_on_a_box_with_its_hardware_says_so(site: Site) -> None:
    site.add_plugin("cuda", "raise ImportError('never imported: it is disabled')\n")
    report = Registry(path=[str(site.path)]).select({"HWBACKENDS_DISABLE": "cuda"}, NVIDIA_HOST)
    assert report.rule == "cpu-fallback"
    assert any("cuda backend is listed in HWBACKENDS_DISABLE" in w for w in report.warnings)


def test_unknown_accelerator_is_reported_as_unclaimed(tmp_path: Path) -> None:
    pci_function(tmp_path, "0000:07:00.0", "0x1f2a", "0x0042", "0x120000")
    host = Host.from_system(str(tmp_path), path=[], backends=[])
    (dev,) = host.devices
    assert dev.vendor == "pci_1f2a" and dev.extra["unclaimed"] is True
    report = make_registry().select({}, host)
    assert report.rule == "cpu-fallback"
    assert any(
        w.startswith("1 accelerator(s) that no installed backend claims (PCI 0x1f2a:0x0042 at "
                     "0000:07:00.0)")
        for w in report.warnings
    )  # fmt: skip


def test_known_hardware_without_its_plugin_is_read_from_the_catalog(tmp_path: Path) -> None:
    for bus, vendor, klass in (
        ("0000:01:00.0", "0x10de", "0x030200"),  # an NVIDIA GPU
        ("0000:01:00.1", "0x10de", "0x040300"),  # its audio function: not a GPU
        ("0000:02:00.0", "0x1d0f", "0x020000"),  # an AWS ENA NIC: not a Neuron device
    ):
        pci_function(tmp_path, bus, vendor, "0xec20", klass)
    host = Host.from_system(str(tmp_path), path=[], backends=[])
    assert [(d.vendor, d.pci_bus_id) for d in host.devices] == [("nvidia", "0000:01:00.0")]


def test_a_plugin_read_hook_that_raises_is_the_plugins_fault(tmp_path: Path) -> None:
    pci_function(tmp_path, "0000:05:00.0", "0x1f2a", "0x0001", "0x120000")
    mod = importlib.import_module("hwbackends.plugin")

    class Acme(mod.BaseBackend):  # type: ignore[name-defined, misc]
        name = "acme"
        api_version = 1
        device_type = "acme"
        vendor = "acme"
        pci_vendor_ids = (0x1F2A,)

        def read_devices(self, root: str, found: object, *, system: str, machine: str) -> object:
            raise OSError("driver file vanished")

    host = Host.from_system(str(tmp_path), path=[], backends=[Acme()])
    assert [d.vendor for d in host.devices] == ["acme"]  # the PCI functions are kept
    assert host.reader_errors == {
        "acme": "acme.read_devices() raised OSError: driver file vanished"
    }


def test_in_repo_plugins_import_only_public_core_modules() -> None:
    """The built-ins have exactly what an outside vendor has: no ``hwbackends._*`` import."""
    plugins = Path(__file__).resolve().parents[1] / "plugins"
    found = []
    for path in sorted(plugins.glob("hwbackends-*/src/**/*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            found += [
                f"{path.relative_to(plugins)}:{node.lineno}: {n}"
                for n in names
                if n.startswith("hwbackends.") and n.split(".")[1].startswith("_")
            ]
    assert found == []
    assert len(list(plugins.glob("hwbackends-*/src/*/__init__.py"))) == 10
