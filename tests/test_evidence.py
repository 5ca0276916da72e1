"""The core's sources of evidence on fake machine trees: each finds devices on its own, the
bound driver is read where the kernel writes it, and every read is bounded.

The real captures these mimic are in ``tests/real_machines/``; here each source is isolated,
and hostile trees (FIFOs, link loops, huge listings) are tried."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwbackends import Host
from hwbackends._machine.evidence import bound_driver, functions, normalise_bus_id, uevent
from hwbackends.plugin import BaseBackend


class Acme(BaseBackend):
    name = "acme"
    device_type = "acme"
    vendor = "acme"
    pci_vendor_ids = (0x1F2A,)
    pci_classes = (0x12,)
    device_nodes = ("acme{n}", "acmectl")
    device_node_units = ("acme{n}",)
    driver_modules = ("acme_drv",)


def _put(path: Path, text: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _function(folder: Path, vendor: str = "0x1f2a", klass: str = "0x120000") -> None:
    _put(folder / "vendor", vendor + "\n")
    _put(folder / "device", "0x0001\n")
    _put(folder / "class", klass + "\n")


def _read(root: Path) -> Host:
    return Host.from_system(str(root), path=[], backends=[Acme()])


# -- bus ids ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "bus"),
    [("0000:3b:00.0", "0000:3b:00.0"), ("00000000:3B:00.0", "0000:3b:00.0"),
     (" 0001:C1:1f.7\n", "0001:c1:1f.7"), ("10000:00:00.0", "10000:00:00.0"),
     ("3b:00.0", None), ("0000:3b:20.0", None), ("0000:3b:00.8", None), ("0000:3g:00.0", None),
     ("0000:3b:00", None), ("0000::00.0", None), ("", None), ("000000000:00:00.0", None)],
)  # fmt: skip
def test_bus_ids_take_sysfs_spelling(text: str, bus: str | None) -> None:
    assert normalise_bus_id(text) == bus


@given(
    st.integers(0, 0xFFFF), st.integers(0, 0xFF), st.integers(0, 0x1F), st.integers(0, 7),
    st.integers(4, 8), st.booleans(),
)  # fmt: skip
def test_every_spelling_of_an_address_normalises_to_one(
    d: int, b: int, v: int, f: int, width: int, upper: bool
) -> None:
    text = f"{d:0{width}x}:{b:02x}:{v:02x}.{f}"
    text = text.upper() if upper else text
    norm = normalise_bus_id(text)
    assert norm == f"{d:04x}:{b:02x}:{v:02x}.{f}"
    assert normalise_bus_id(norm) == norm  # idempotent


# -- PCI folders, the PCI tree, the DRM and accel classes -------------------------------------


def test_pci_folders_name_their_evidence_and_driver(tmp_path: Path) -> None:
    root = tmp_path / "root"
    real = root / "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
    _function(real)
    (real / "driver").symlink_to("../../../../bus/pci/drivers/acme_drv")  # dangling is fine
    link = root / "sys/bus/pci/devices/0000:01:00.0"
    link.parent.mkdir(parents=True)
    link.symlink_to("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0")
    (dev,) = _read(root).devices_of("acme")
    assert (dev.pci_bus_id, dev.extra["evidence"], dev.extra["driver"]) == (
        "0000:01:00.0",
        ["pci"],
        "acme_drv",
    )


def test_the_pci_tree_stands_in_for_a_missing_bus_folder(tmp_path: Path) -> None:
    """A copy of /sys without /sys/bus: the functions under /sys/devices/pci* are read."""
    root = tmp_path / "root"
    _function(root / "sys/devices/pci0000:00/0000:00:03.0/0000:05:00.0")
    _function(root / "sys/devices/pci0000:00/0000:00:03.0", vendor="0x8086", klass="0x060400")
    _function(root / "sys/devices/pci0001:00/0001:00:00.0/0001:02:00.0")
    assert [d.pci_bus_id for d in _read(root).devices_of("acme")] == [
        "0000:05:00.0",
        "0001:02:00.0",
    ]


def test_drm_and_accel_classes_find_functions_no_pci_folder_shows(tmp_path: Path) -> None:
    """Only /sys/class: the uevent names the slot, the ids and the bound driver; a card that
    the PCI folder already showed is not counted twice; a platform card (no PCI) is no
    function."""
    root = tmp_path / "root"
    _function(root / "sys/bus/pci/devices/0000:01:00.0")
    event = "DRIVER=acme_drv\nPCI_CLASS=120000\nPCI_ID=1F2A:0002\nPCI_SLOT_NAME=0000:09:00.0\n"
    _put(root / "sys/class/drm/card0/device/uevent", event)
    _put(root / "sys/class/drm/card1/device/uevent", "PCI_SLOT_NAME=0000:01:00.0\n")
    _put(root / "sys/class/drm/card2/device/uevent", "OF_NAME=gpu\n")  # a platform GPU
    _put(root / "sys/class/drm/card0-DP-1/device/uevent", "PCI_SLOT_NAME=0000:0a:00.0\n")
    _put(root / "sys/class/drm/renderD129/device/uevent",
         "PCI_ID=1F2A:0003\nPCI_CLASS=120000\nPCI_SLOT_NAME=0000:0b:00.0\n")  # fmt: skip
    _put(root / "sys/class/drm/renderD128/device/uevent", "PCI_SLOT_NAME=0000:09:00.0\n")
    accel = root / "sys/class/accel/accel0"
    _function(root / "sys/devices/pci0000:00/0000:0c:00.0")
    accel.mkdir(parents=True)
    (accel / "device").symlink_to("../../../devices/pci0000:00/0000:0c:00.0")
    devs = _read(root).devices_of("acme")
    assert [(d.pci_bus_id, d.pci_device_id, d.extra["evidence"]) for d in devs] == [
        ("0000:01:00.0", "0x0001", ["pci"]),
        ("0000:09:00.0", "0x0002", ["drm"]),
        ("0000:0b:00.0", "0x0003", ["drm"]),
        ("0000:0c:00.0", "0x0001", ["accel"]),
    ]
    assert devs[1].extra["driver"] == "acme_drv"


def test_the_driver_link_wins_then_uevent_then_the_drivers_folder(tmp_path: Path) -> None:
    f = tmp_path / "f"
    _put(f / "uevent", "DRIVER=from_uevent\n")
    assert bound_driver(str(f)) == "from_uevent"
    (f / "driver").symlink_to("../drivers/from_link")
    assert bound_driver(str(f)) == "from_link"
    root = tmp_path / "root"
    _function(root / "sys/bus/pci/devices/0000:01:00.0")
    (root / "sys/bus/pci/drivers/acme_drv").mkdir(parents=True)
    (root / "sys/bus/pci/drivers/acme_drv/0000:01:00.0").symlink_to("../../devices/0000:01:00.0")
    (dev,) = _read(root).devices_of("acme")
    assert dev.extra["driver"] == "acme_drv"


def test_a_module_in_proc_modules_is_a_loaded_driver(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _put(root / "proc/modules", "acme_drv 56463360 34 - Live 0x0000000000000000 (POE)\n")
    assert _read(root).drivers == {"acme_drv": ""}


# -- /dev nodes -------------------------------------------------------------------------------


def test_unit_nodes_are_devices_when_nothing_else_shows_them(tmp_path: Path) -> None:
    """A container given only the nodes: one device per unit node in number order, control
    nodes not counted; with a PCI function found, the nodes add no device."""
    root = tmp_path / "root"
    for n in ("acme10", "acme2", "acmectl", "acme", "acmeX"):
        _put(root / "dev" / n)
    devs = _read(root).devices_of("acme")
    assert [(d.extra["dev_node"], d.extra["evidence"]) for d in devs] == [
        ("/dev/acme2", ["dev"]),
        ("/dev/acme10", ["dev"]),
    ]
    _function(root / "sys/bus/pci/devices/0000:01:00.0")
    assert [d.pci_bus_id for d in _read(root).devices_of("acme")] == ["0000:01:00.0"]


# -- hostile trees ----------------------------------------------------------------------------


def test_fifos_and_link_loops_never_hang_or_count(tmp_path: Path) -> None:
    root = tmp_path / "root"
    fn = root / "sys/bus/pci/devices/0000:01:00.0"
    fn.mkdir(parents=True)
    for name in ("vendor", "class", "uevent"):
        os.mkfifo(fn / name)
    card = root / "sys/class/drm/card0/device"
    card.mkdir(parents=True)
    os.mkfifo(card / "uevent")
    loop = root / "sys/devices/pci0000:00"
    loop.mkdir(parents=True)
    (loop / "0000:00:01.0").symlink_to(".")  # a loop the tree walk must not follow
    assert uevent(str(card)) == {}
    assert _read(root).devices == ()
    assert bound_driver(str(fn)) is None


def test_listings_are_capped(tmp_path: Path) -> None:
    """A tree with more class entries than any machine has is read only up to the cap."""
    from hwbackends._machine import evidence

    root = tmp_path / "root"
    for i in range(12):
        _put(root / f"sys/class/drm/card{i}/device/uevent", f"PCI_SLOT_NAME=0000:{i:02x}:00.0\n")
    old = evidence.MAX_ENTRIES
    evidence.MAX_ENTRIES = 5
    try:
        assert len(functions(str(root))) == 5
    finally:
        evidence.MAX_ENTRIES = old


def test_the_cache_watches_the_class_folders() -> None:
    from hwbackends._selection.registry import watch_lists

    assert {"sys/class/drm", "sys/class/accel"} <= set(watch_lists()[1])
