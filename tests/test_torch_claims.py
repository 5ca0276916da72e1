"""A backend that claims a torch build: a CUDA-compatible vendor's plugin (Iluvatar
CoreX-like, tests/fixtures/vendor_torch) installed beside the stock cuda plugin, on machine
trees read by the real reader with the vendor's torch (``2.4.1+corex.4.3.0``) installed.

At the default priority the vendor's card is ``cuda:0`` (its torch drives it as torch.cuda),
cuda steps aside with a warning naming both, and neither is told to install PyTorch's CUDA
wheels over the vendor's torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
from coretest import Site, needs_plugins

from hwbackends import Host, plugin
from hwbackends._base.protocol import TORCH_PREINSTALLED, claimed_torch, torch_source
from hwbackends._selection.target import torch_fix
from hwbackends.plugin import BaseBackend
from hwbackends.testing import machine_tree

FIXTURE = Path(__file__).parent / "fixtures" / "vendor_torch" / "corex_backend.py"
V100 = ["0000:3b:00.0", "0000:5e:00.0"]
COREX = "0000:af:00.0"
COREX_TORCH = "__version__ = '2.4.1+corex.4.3.0'\ncuda = '10.2'\nhip = None\n"
STOCK_TORCH = "__version__ = '2.8.0+cu128'\ncuda = '12.8'\nhip = None\n"


def _site(tmp: Path, torch_version_py: str | None, *, plugin: bool = True) -> Path:
    """A site folder: the vendor's plugin (a dist-info with its entry point) and a torch whose
    ``version.py`` is ``torch_version_py``."""
    site = tmp / "site"
    site.mkdir()
    if plugin:
        Site(site).add_plugin(
            "corex",
            FIXTURE.read_text(encoding="utf-8"),
            module="hwbackends_corex",
            attr="CorexBackend",
        )
    if torch_version_py is not None:
        (site / "torch").mkdir()
        (site / "torch/version.py").write_text(torch_version_py, encoding="utf-8")
        version = torch_version_py.split("'")[1]
        info = site / f"torch-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Name: torch\nVersion: {version}\n", encoding="utf-8")
    return site


def _tree(root: Path, *, nvidia: bool = True, corex: bool = True) -> Path:
    """Two NVIDIA Tesla V100s (10de:1db4, their driver's /proc files and /dev nodes) and one
    Iluvatar card (PCI vendor 1e3e, a 3D controller)."""
    pci: list[tuple[str, int, int, int]] = []
    files: dict[str, str] = {}
    dev: list[str] = []
    if nvidia:
        for i, bus in enumerate(V100):
            pci.append((bus, 0x10DE, 0x1DB4, 0x030200))
            files[f"proc/driver/nvidia/gpus/{bus}/information"] = (
                f"Model: \t\t Tesla V100-PCIE-32GB\nGPU UUID: \t GPU-0000000{i}-aaaa-bbbb-cccc-"
                f"dddddddddddd\nBus Location: \t {bus}\n"
            )
            dev.append(f"nvidia{i}")
        files["proc/driver/nvidia/version"] = (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03  Release Build\n"
        )
        dev.append("nvidiactl")
    if corex:
        pci.append((COREX, 0x1E3E, 0x0001, 0x030200))
    return machine_tree(root, pci=pci, files=files, dev=dev)


def _run(site: Path | None, root: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWBACKENDS_")}
    for k in [k for k in env if k.endswith(("_VISIBLE_DEVICES", "DEVICE_ORDER"))]:
        del env[k]
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    env["HWBACKENDS_NO_CACHE"] = "1"
    env["COLUMNS"] = "200"
    proc = subprocess.run(
        [sys.executable, "-m", "hwbackends", "env", "--root", str(root), *args],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _env(site: Path | None, root: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(_run(site, root, "--json"))
    return report


def _status(report: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in report["candidates"] if c["name"] == name)
    return found


def _no_cuda_wheels(report: dict[str, Any]) -> None:
    text = json.dumps(report)
    assert "download.pytorch.org/whl/cu" not in text, text


def test_a_claim_matches_the_local_tag_or_the_distribution() -> None:
    assert claimed_torch(("corex",), (), "2.4.1+corex.4.3.0", {}) == "torch 2.4.1+corex.4.3.0"
    assert claimed_torch(("das",), (), "2.1.0+das1.1.git", {}) == "torch 2.1.0+das1.1.git"
    assert claimed_torch(("corex",), (), "2.8.0+cu128", {}) is None
    assert claimed_torch(("cu",), (), "2.8.0+custom", {}) is None  # a longer word
    assert claimed_torch(("corex",), (), None, {}) is None
    assert claimed_torch((), ("torch_acme",), "2.1.0", {"torch-acme": "2.1.0"}) == (
        "torch 2.1.0 (torch-acme 2.1.0 is installed)"
    )
    assert claimed_torch((), ("torch-acme",), "2.1.0", {}) is None


def test_a_torch_source_is_an_index_instructions_or_nothing() -> None:
    assert torch_source("https://vendor.example/whl", "cuda") == (
        "index",
        "https://vendor.example/whl",
    )
    assert torch_source(TORCH_PREINSTALLED, "cuda") == ("preinstalled", "")
    assert torch_source("see the vendor's guide", None) == ("vendor", "see the vendor's guide")
    assert torch_source(None, "rocm") == ("stock", "rocm")
    assert plugin.TORCH_PREINSTALLED == TORCH_PREINSTALLED  # a plugin's spelling of it


@needs_plugins
def test_on_a_mixed_machine_the_vendor_gets_cuda_and_cuda_steps_aside(tmp_path: Path) -> None:
    site = _site(tmp_path, COREX_TORCH)
    report = _env(site, _tree(tmp_path / "root"))
    assert report["chosen"] == "corex"
    assert [(d["torch_device"], d["pci_bus_id"]) for d in report["devices"]] == [("cuda:0", COREX)]
    cuda = _status(report, "cuda")
    assert (cuda["state"], cuda["replaced_by"]) == ("unavailable", "hwbackends-corex")
    assert cuda["probe"]["hint"] is None
    assert cuda["reason"] == (
        "cuda steps aside: torch 2.4.1+corex.4.3.0 is claimed by corex (hwbackends-corex), so "
        "torch's 'cuda' device is corex's in this process; its hardware (2 NVIDIA GPU(s) "
        "(nvidia-proc, pci): 2× Tesla V100-PCIE-32GB) is not used here"
    )
    (warning,) = [w for w in report["warnings"] if "steps aside" in w]
    assert warning.startswith("cuda steps aside: torch 2.4.1+corex.4.3.0 is claimed by corex")
    assert "HWBACKENDS_DISABLE=corex" in warning
    _no_cuda_wheels(report)
    assert report["install"]["torch_index"] is None
    # the vendor's card has no name in sysfs, yet it is the device corex uses
    text = _run(site, tmp_path / "root")
    assert "1 × PCI device 0x0001 (iluvatar; found by pci)" in text, text
    assert "not used by" not in text


@needs_plugins
def test_on_a_stock_torch_the_claim_ends_and_cuda_gets_the_v100s(tmp_path: Path) -> None:
    report = _env(_site(tmp_path, STOCK_TORCH), _tree(tmp_path / "root"))
    assert report["chosen"] == "cuda"
    assert [d["pci_bus_id"] for d in report["devices"]] == V100
    corex = _status(report, "corex")
    assert corex["state"] == "unavailable"
    assert corex["reason"] == (
        "Iluvatar CoreX GPU hardware found, but the installed torch 2.8.0+cu128 is not a build "
        "the corex backend claims (+corex)"
    )
    assert not [w for w in report["warnings"] if "steps aside" in w]


@needs_plugins
def test_the_vendor_alone_is_chosen_and_told_nothing_about_cuda_wheels(tmp_path: Path) -> None:
    report = _env(_site(tmp_path, COREX_TORCH), _tree(tmp_path / "root", nvidia=False))
    assert report["chosen"] == "corex"
    assert [d["pci_bus_id"] for d in report["devices"]] == [COREX]
    assert report["warnings"] == []
    _no_cuda_wheels(report)
    assert report["install"]["torch_index"] is None and report["install"]["then"] is None


@needs_plugins
def test_nvidia_alone_on_the_vendor_torch_is_not_claimed_by_cuda(tmp_path: Path) -> None:
    # the vendor's torch drives no NVIDIA GPU: cuda steps aside, and its fix is no CUDA wheel
    report = _env(_site(tmp_path, COREX_TORCH), _tree(tmp_path / "root", corex=False))
    assert report["chosen"] == "cpu"
    assert _status(report, "cuda")["replaced_by"] == "hwbackends-corex"
    _no_cuda_wheels(report)


@needs_plugins
def test_the_vendor_without_its_torch_is_told_the_vendors_way(tmp_path: Path) -> None:
    # a stock torch: the vendor's instructions, never PyTorch's CUDA index over its torch
    report = _env(_site(tmp_path, STOCK_TORCH), _tree(tmp_path / "root", nvidia=False))
    corex = _status(report, "corex")
    assert corex["probe"]["hint"] == (
        "install the CoreX software stack with its torch build, as Iluvatar's documentation says"
    )
    assert report["install"]["torch_index"] is None
    assert report["install"]["then"] == corex["probe"]["hint"]


class _Vendor(BaseBackend):
    name: ClassVar[str] = "acmegpu"
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "cuda"
    torch_flavour: ClassVar[str | None] = "cuda"
    install_hint: ClassVar[str] = "run the vendor's installer"


@pytest.mark.parametrize(
    ("source", "fix"),
    [
        ("https://vendor.example/whl", "pip install torch --index-url https://vendor.example/whl"),
        ("follow the vendor's guide", "follow the vendor's guide"),
        (TORCH_PREINSTALLED, "run the vendor's installer"),
        (None, "pip install torch --index-url https://download.pytorch.org/whl/cu128"),
    ],
)
def test_the_torch_fix_comes_from_the_declared_source(source: str | None, fix: str) -> None:
    backend = type("V", (_Vendor,), {"torch_source": source})()
    got = torch_fix(backend, Host())
    assert got.startswith("install torch: ")
    assert got.removeprefix("install torch: ").endswith(fix)
    assert ("download.pytorch.org" in got) == (source is None)


def test_software_is_ready_only_on_a_claimed_build() -> None:
    class Claims(_Vendor):
        torch_builds: ClassVar[tuple[str, ...]] = ("corex",)

    def host(version: str | None) -> Host:
        return Host.from_dict({"torch": {"version": version, "cuda": "10.2"}} if version else {})

    assert Claims().software_problem(host("2.4.1+corex.4.3.0")) is None
    assert Claims().software_problem(host("2.8.0+cu128")) == (
        "the installed torch 2.8.0+cu128 is not a build the acmegpu backend claims (+corex)"
    )
    assert Claims().software_problem(host(None)) == "torch is not installed"


INDEXED = """
from typing import ClassVar

from hwbackends import plugin
from hwbackends.plugin import BaseBackend


class Backend(BaseBackend):
    name: ClassVar[str] = "acmegpu"
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "acmegpu"
    vendor: ClassVar[str | None] = "acmegpu"
    torch_flavour: ClassVar[str | None] = "cuda"
    torch_source: ClassVar[str | None] = "https://vendor.example/whl/acme"
"""


def test_the_install_line_takes_the_declared_wheel_index(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    Site(site).add_plugin("acmegpu", INDEXED, module="hwbackends_acmegpu")
    host = tmp_path / "host.json"
    host.write_text(
        json.dumps({"torch": None, "devices": [{"vendor": "acmegpu", "name": "Acme GPU"}]}),
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWBACKENDS_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    env["HWBACKENDS_NO_CACHE"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "hwbackends", "env", "--host", str(host), "--json"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    install = json.loads(proc.stdout)["install"]
    assert install["backend"] == "acmegpu"
    assert install["torch_index"] == "https://vendor.example/whl/acme"
    assert install["argv"][-2:] == ["--extra-index-url", "https://vendor.example/whl/acme"]


def test_with_the_core_alone_the_catalog_names_the_vendors_card(tmp_path: Path) -> None:
    # the vendor's torch and no plugin for it: the card is named, not "no accelerator"
    root = _tree(tmp_path / "root", nvidia=False)
    host = Host.from_system(str(root), path=[], backends=[])
    (card,) = host.devices
    assert (card.pci_bus_id, card.name, card.extra["known_function"]) == (
        COREX,
        "Iluvatar CoreX GPU (CUDA-compatible, driven by Iluvatar's own torch build)",
        "no-plugin",
    )
    report = _env(_site(tmp_path, COREX_TORCH, plugin=False), root)
    assert (
        "1 Iluvatar CoreX GPU (CUDA-compatible, driven by Iluvatar's own torch build) (PCI "
        f"1e3e:0001 at {COREX}): no hwbackends plugin exists for this hardware, so no backend "
        "can use it"
    ) in report["warnings"]
    # a function of the vendor that is no card (an audio function) stays out
    machine_tree(root, pci=[("0000:af:00.1", 0x1E3E, 0x0002, 0x040300)])
    assert [d.pci_bus_id for d in Host.from_system(str(root), path=[], backends=[]).devices] == [
        COREX
    ]
