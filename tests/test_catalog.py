"""The catalog of known plugins (``KNOWN_PLUGINS``) and the PCI ID database reader.

A vendor is listed by a pull request that adds one line to the catalog (docs/writing-a-
backend.md, "Install, try, publish"); these tests hold every line to naming a real
distribution, its entry point and PCI ids that are really that vendor's.
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from the `test` dependency group
    import tomli as tomllib

from hwbackends._discovery.catalog import KNOWN_PLUGINS, KnownPlugin
from hwbackends._machine.pciids import MAX_NAME, PCI_IDS_PATHS, lookup

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("known", KNOWN_PLUGINS, ids=lambda k: k.backend)
def test_every_entry_names_a_real_distribution_and_its_entry_point(known: KnownPlugin) -> None:
    project = REPO / "plugins" / known.distribution / "pyproject.toml"
    assert project.is_file(), f"{known.distribution}: no plugins/{known.distribution}/"
    meta = tomllib.loads(project.read_text(encoding="utf-8"))["project"]
    assert meta["name"] == known.distribution
    assert known.backend in meta["entry-points"]["hwbackends.backends"]


def test_pci_vendor_ids_are_16_bit_and_each_belongs_to_one_entry() -> None:
    seen: dict[int, str] = {}
    for k in KNOWN_PLUGINS:
        for vid in k.pci_vendor_ids:
            assert 0 < vid < 0xFFFF, (k.backend, hex(vid))
            assert vid not in seen or k.pci_classes, (k.backend, seen.get(vid))
            seen.setdefault(vid, k.backend)
        for did in k.pci_device_ids:
            assert 0 <= did <= 0xFFFF, (k.backend, hex(did))


def _declared(known: KnownPlugin, attr: str) -> object:
    """A class attribute of the plugin's backend, read from its source (not imported)."""
    project = tomllib.loads(
        (REPO / "plugins" / known.distribution / "pyproject.toml").read_text(encoding="utf-8")
    )["project"]
    module, _, cls = project["entry-points"]["hwbackends.backends"][known.backend].partition(":")
    path = REPO / "plugins" / known.distribution / "src" / module.replace(".", "/")
    source = (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text(
        encoding="utf-8"
    )
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for stmt in node.body:
                target = (
                    getattr(stmt, "target", None) or (getattr(stmt, "targets", None) or [None])[0]
                )
                if isinstance(target, ast.Name) and target.id == attr and stmt.value is not None:
                    return ast.literal_eval(stmt.value)
    return ()


@pytest.mark.parametrize("known", KNOWN_PLUGINS, ids=lambda k: k.backend)
def test_every_entrys_pci_vendor_ids_are_its_plugins_declarations(known: KnownPlugin) -> None:
    assert _declared(known, "pci_vendor_ids") == known.pci_vendor_ids


def _db(tmp_path: Path, text: str, rel: str = PCI_IDS_PATHS[1]) -> str:
    p = tmp_path / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return str(tmp_path)


def test_lookup_reads_the_wanted_vendor_and_devices_only(tmp_path: Path) -> None:
    root = _db(
        tmp_path,
        "# comment\n1f29  Before\n\t0001  Not this\n1f2a  Acme Corp\n\t0001  ATU 2\n"
        "\t\t1f2a 0001  ATU 2 board\n\t0002  ATU NIC\n1f2b  After\n\t0001  Not this either\n"
        "C 12  Processing accelerators\n\t00  Processing accelerators\n",
    )
    assert lookup(root, {0x1F2A: {0x0001, 0x0009}}) == {
        (0x1F2A, None): "Acme Corp",
        (0x1F2A, 0x0001): "ATU 2",
    }
    assert lookup(root, {0x9999: set()}) == {}
    assert lookup(str(tmp_path / "nothing"), {0x1F2A: set()}) == {}
    assert lookup(root, {}) == {}


def test_hwdata_comes_before_misc(tmp_path: Path) -> None:
    _db(tmp_path, "1f2a  From misc\n")
    root = _db(tmp_path, "1f2a  From hwdata\n", PCI_IDS_PATHS[0])
    assert lookup(root, {0x1F2A: set()}) == {(0x1F2A, None): "From hwdata"}


def test_a_hostile_database_is_bounded(tmp_path: Path) -> None:
    # control characters are dropped and names are cut; a FIFO is never opened for reading
    root = _db(tmp_path, "1f2a  Acme\x1b[31m " + "x" * 500 + "\n\t0001\tbad separator\n")
    got = lookup(root, {0x1F2A: {0x0001}})
    assert got[(0x1F2A, None)].startswith("Acme[31m")
    assert len(got[(0x1F2A, None)]) == MAX_NAME
    assert (0x1F2A, 0x0001) not in got
    fifo_root = tmp_path / "fifo"
    (fifo_root / "usr/share/hwdata").mkdir(parents=True)
    os.mkfifo(fifo_root / PCI_IDS_PATHS[0])
    assert lookup(str(fifo_root), {0x1F2A: set()}) == {}


def test_the_database_is_read_only_for_unclaimed_hardware(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from coretest import pci_function

    from hwbackends import Host
    from hwbackends._machine import pciids

    calls: list[object] = []
    real = pciids.lookup
    monkeypatch.setattr(pciids, "lookup", lambda root, wanted: calls.append(wanted) or {})
    _db(tmp_path, "1f2a  Acme Corp\n\t0001  ATU 2\n")
    pci_function(tmp_path, "0000:01:00.0", "0x1f2a", "0x0001", "0x020000")  # a NIC: not ours
    Host.from_system(str(tmp_path), path=[], backends=[])
    assert calls == []
    pci_function(tmp_path, "0000:02:00.0", "0x1f2a", "0x0001", "0x120000")  # an accelerator
    monkeypatch.setattr(pciids, "lookup", real)
    host = Host.from_system(str(tmp_path), path=[], backends=[])
    (dev,) = [d for d in host.devices if d.extra.get("unclaimed")]
    assert (dev.extra["pci_vendor_name"], dev.extra["pci_device_name"]) == ("Acme Corp", "ATU 2")
    assert dev.name == "ATU 2"
