"""``--root DIR`` reads that tree and nothing else: absolute symbolic links resolve against the
tree (as in a container image or a copied /sys), ``..`` stops at its top; a missing or empty
root is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hwbackends._base import files
from hwbackends._machine.host import Host
from hwbackends.cli import main

BUS = "0000:3b:00.0"


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    (tree / "proc").mkdir(parents=True)
    (tree / "data").mkdir()
    (tree / "data" / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Tree CPU Model\n")
    (tree / "data" / "meminfo").write_text("MemTotal:        1048576 kB\n")
    # a copy whose links are absolute, as `cp -a` of an image leaves them
    os.symlink("/data/cpuinfo", tree / "proc" / "cpuinfo")
    os.symlink("/../../data/./meminfo", tree / "proc" / "meminfo")
    fn = tree / "sys" / "devices" / "pci0000:3a" / BUS
    fn.mkdir(parents=True)
    for name, value in (("vendor", "0x10de"), ("device", "0x2330"), ("class", "0x030200")):
        (fn / name).write_text(value + "\n")
    (tree / "sys" / "bus" / "pci" / "devices").mkdir(parents=True)
    os.symlink(f"/sys/devices/pci0000:3a/{BUS}", tree / "sys" / "bus" / "pci" / "devices" / BUS)
    return tree


def test_absolute_links_resolve_inside_the_tree(tmp_path: Path) -> None:
    host = Host.from_system(str(_tree(tmp_path)))
    assert host.cpu.model == "Tree CPU Model"
    assert host.memory_bytes == 1 << 30
    assert [d.pci_bus_id for d in host.devices] == [BUS]
    assert not files._ROOTS  # the confinement ends with the read


def test_a_link_to_this_machines_file_is_not_followed_out(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "proc").mkdir(parents=True)
    os.symlink("/proc/cpuinfo", tree / "proc" / "cpuinfo")  # names itself inside the tree
    os.symlink("../../../../../../../proc/meminfo", tree / "proc" / "meminfo")
    host = Host.from_system(str(tree))
    assert not host.cpu.model and host.memory_bytes is None


def test_this_machine_is_read_as_it_is() -> None:
    assert files.in_root("/proc/cpuinfo") == "/proc/cpuinfo"
    assert files.confine("/") is None


@pytest.mark.parametrize("kind", ["missing", "empty", "file"])
def test_a_root_that_is_no_tree_is_refused(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    if kind == "empty":
        root.mkdir()
    elif kind == "file":
        root.write_text("")
    assert main(["env", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hwbackends: error: --root {str(root)!r} ") and "Fix:" in err


def test_smoke_refuses_a_root_it_would_ignore(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["smoke", "--root", "/nonexistent"]) == 2
    assert "cannot read another tree" in capsys.readouterr().err
