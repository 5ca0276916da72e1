"""PCI functions that are not hwbackends hardware: crypto/compression engines stay quiet, compute
devices no plugin exists for are named without install advice, and a plugin without
``pci_classes`` counts only display, accelerator and co-processor functions of its vendor.

Device ids and names: the PCI ID Repository (pci.ids 2026.08.22); QAT driver names: Linux
drivers/crypto/intel/qat adf_accel_devices.h; the QAT server layout (two C62x QAT functions
bound to c6xx next to an ASPEED BMC VGA and Intel NICs) follows a real C620-chipset server's
lspci (the h20a corpus case server-qat-c62x-aspeed-no-accelerator).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from hwbackends import Host
from hwbackends.testing import make_registry

UNCLAIMED = "accelerator(s) that no installed backend claims"


def pci_function(
    root: Path, bus: str, vendor: str, device: str, klass: str, driver: str | None = None
) -> None:
    d = root / "sys/bus/pci/devices" / bus
    d.mkdir(parents=True, exist_ok=True)
    (d / "vendor").write_text(vendor + "\n")
    (d / "device").write_text(device + "\n")
    (d / "class").write_text(klass + "\n")
    if driver is not None:
        target = root / "sys/bus/pci/drivers" / driver
        target.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(target, d), d / "driver")


def qat_server(root: Path, qat_driver: str = "c6xx", qat_id: str = "0x37c8") -> None:
    pci_function(root, "0000:02:00.0", "0x1a03", "0x2000", "0x030000", "ast")  # BMC VGA
    pci_function(root, "0000:3d:00.0", "0x8086", "0x37d2", "0x020000", "i40e")  # X722 NIC
    pci_function(root, "0000:b5:00.0", "0x8086", qat_id, "0x0b4000", qat_driver)
    pci_function(root, "0000:b6:00.0", "0x8086", qat_id, "0x0b4000", qat_driver)


def test_qat_server_has_no_unclaimed_accelerator_warning(tmp_path: Path) -> None:
    qat_server(tmp_path)
    host = Host.from_system(str(tmp_path), path=[], backends=[])
    report = make_registry().select({}, host)
    assert not any(UNCLAIMED in w for w in report.warnings), report.warnings
    assert not any("install" in w.lower() for w in report.warnings), report.warnings
    named = [d for d in host.devices if d.extra.get("known_function") == "not-compute"]
    assert [d.pci_bus_id for d in named] == ["0000:b5:00.0", "0000:b6:00.0"]
    assert {d.name for d in named} == {
        "Intel QuickAssist Technology (crypto and compression offload)"
    }


@pytest.mark.parametrize(("driver", "did"), [("4xxx", "0x4999"), ("qat_6xxx", "0x4999")])
def test_an_unlisted_qat_id_is_known_by_its_bound_driver(
    tmp_path: Path, driver: str, did: str
) -> None:
    qat_server(tmp_path, driver, did)
    host = Host.from_system(str(tmp_path), path=[], backends=[])
    assert not any(UNCLAIMED in w for w in make_registry().select({}, host).warnings)


def test_an_unknown_coprocessor_still_gets_the_unclaimed_line(tmp_path: Path) -> None:
    pci_function(tmp_path, "0000:b5:00.0", "0x8086", "0x4999", "0x0b4000")  # no driver bound
    host = Host.from_system(str(tmp_path), path=[], backends=[])
    warnings = make_registry().select({}, host).warnings
    assert any(w.startswith(f"1 {UNCLAIMED} (PCI 0x8086:0x4999 at 0000:b5:00.0)") for w in warnings)


def test_nec_vector_engine_is_named_and_no_plugin_is_promised(tmp_path: Path) -> None:
    pci_function(tmp_path, "0000:3b:00.0", "0x1bcf", "0x001c", "0x120000", "ve_drv")
    host = Host.from_system(str(tmp_path), path=[], backends=[])
    (dev,) = host.devices
    assert dev.extra["known_function"] == "no-plugin"
    warnings = make_registry().select({}, host).warnings
    assert warnings == (
        "1 NEC SX-Aurora TSUBASA Vector Engine (PCI 1bcf:001c at 0000:3b:00.0): no hwbackends "
        "plugin exists for this hardware, so no backend can use it",
    )


def test_xeon_phi_is_named_and_no_plugin_is_promised(tmp_path: Path) -> None:
    pci_function(tmp_path, "0000:84:00.0", "0x8086", "0x225c", "0x0b4000")
    host = Host.from_system(str(tmp_path), path=[], backends=[])
    (w,) = make_registry().select({}, host).warnings
    assert w.startswith("1 Intel Xeon Phi co-processor (Knights Ferry/Corner/Landing card) (PCI ")
    assert "no hwbackends plugin exists" in w and "Fix: install" not in w


def test_a_plugin_without_pci_classes_counts_only_compute_classes(tmp_path: Path) -> None:
    for bus, klass in (
        ("0000:05:00.0", "0x120000"),  # processing accelerator: counted
        ("0000:05:00.1", "0x040300"),  # its HDMI audio: not counted
        ("0000:06:00.0", "0x020000"),  # the vendor's NIC: not counted
        ("0000:07:00.0", "0x060400"),  # the vendor's PCIe switch: not counted
        ("0000:08:00.0", "0x030200"),  # a 3D controller: counted
        ("0000:09:00.0", "0x0b4000"),  # a co-processor: counted
    ):
        pci_function(tmp_path, bus, "0x1f2a", "0x0001", klass)
    mod = importlib.import_module("hwbackends.plugin")

    class Acme(mod.BaseBackend):  # type: ignore[name-defined, misc]
        name = "acme"
        device_type = "acme"
        vendor = "acme"
        pci_vendor_ids = (0x1F2A,)

    host = Host.from_system(str(tmp_path), path=[], backends=[Acme()])
    assert [d.pci_bus_id for d in host.devices] == ["0000:05:00.0", "0000:08:00.0", "0000:09:00.0"]


def test_nvidia_audio_function_is_no_gpu_without_the_plugin(tmp_path: Path) -> None:
    pci_function(tmp_path, "0000:01:00.0", "0x10de", "0x1b06", "0x030000", "nvidia")
    pci_function(tmp_path, "0000:01:00.1", "0x10de", "0x10ef", "0x040300", "snd_hda_intel")
    host = Host.from_system(str(tmp_path), path=[], backends=[])
    assert [(d.vendor, d.pci_bus_id) for d in host.devices] == [("nvidia", "0000:01:00.0")]
    (w,) = make_registry().select({}, host).warnings
    assert w.startswith(
        "1 NVIDIA GPU(s) found (0000:01:00.0), but hwbackends-cuda is not installed"
    )


# -- host files saved from those machines (Host.to_dict of the reader's result) ---------------

HOSTS = Path(__file__).parent / "hosts"


@pytest.mark.parametrize(
    ("name", "build"),
    [
        ("qat-server", qat_server),
        (
            "nec-ve-server",
            lambda r: pci_function(r, "0000:3b:00.0", "0x1bcf", "0x001c", "0x120000", "ve_drv"),
        ),
    ],
)
def test_host_files_keep_what_the_reader_found(tmp_path: Path, name: str, build: object) -> None:
    build(tmp_path)  # type: ignore[operator]
    read = Host.from_system(str(tmp_path), path=[], backends=[])
    saved = Host.from_file(HOSTS / f"{name}.json")

    def key(h: Host) -> list[tuple[object, ...]]:
        return [(d.vendor, d.pci_bus_id, d.name, d.pci_device_id, d.extra.get("known_function"))
                for d in h.devices]  # fmt: skip

    assert key(saved) == key(read)


def test_qat_host_file_is_quiet_and_named() -> None:
    report = make_registry().select({}, Host.from_file(HOSTS / "qat-server.json"))
    assert report.warnings == ()
    assert {d.name for d in report.host.devices} == {
        "Intel QuickAssist Technology (crypto and compression offload)"
    }


def test_nec_host_file_says_no_plugin_exists() -> None:
    report = make_registry().select({}, Host.from_file(HOSTS / "nec-ve-server.json"))
    assert report.warnings == (
        "1 NEC SX-Aurora TSUBASA Vector Engine (PCI 1bcf:001c at 0000:3b:00.0): no hwbackends "
        "plugin exists for this hardware, so no backend can use it",
    )


def _intel_like(device_ids: tuple[int, ...] = ()) -> object:
    mod = importlib.import_module("hwbackends.plugin")

    class Gpus(mod.BaseBackend):  # type: ignore[name-defined, misc]
        name = "gpus"
        device_type = "gpus"
        vendor = "gpus"
        pci_vendor_ids = (0x8086,)
        pci_classes = (0x03, 0x12)  # as an Intel GPU plugin declares them
        pci_device_ids = device_ids

    return Gpus()


def test_a_vendor_wide_class_claim_does_not_take_a_known_npu(tmp_path: Path) -> None:
    # a Core Ultra laptop: the iGPU at 00:02.0 and the NPU (class 0x1200, intel_vpu) at 00:0b.0
    pci_function(tmp_path, "0000:00:02.0", "0x8086", "0x7d55", "0x030000", "i915")
    pci_function(tmp_path, "0000:00:0b.0", "0x8086", "0x7d1d", "0x120000", "intel_vpu")
    host = Host.from_system(str(tmp_path), path=[], backends=[_intel_like()])
    assert [(d.vendor, d.pci_bus_id, d.name) for d in host.devices] == [
        ("gpus", "0000:00:02.0", None),
        (
            "pci_8086",
            "0000:00:0b.0",
            "Intel NPU (AI Boost, driven through OpenVINO; not a torch device)",
        ),
    ]
    # a plugin that lists the id itself is more specific than the core's table
    host = Host.from_system(str(tmp_path), path=[], backends=[_intel_like((0x7D55, 0x7D1D))])
    assert [d.vendor for d in host.devices] == ["gpus", "gpus"]


def test_the_npu_of_a_laptop_is_named_and_quiet(tmp_path: Path) -> None:
    pci_function(tmp_path, "0000:00:0b.0", "0x8086", "0x7d1d", "0x120000", "intel_vpu")
    host = Host.from_system(str(tmp_path), path=[], backends=[])
    assert make_registry().select({}, host).warnings == ()


@pytest.mark.parametrize("did", ["0x515e", "0x5969"])
@pytest.mark.parametrize("with_rocm", [False, True])
def test_a_servers_es1000_display_is_no_amd_gpu(tmp_path: Path, did: str, with_rocm: bool) -> None:
    """The ES1000 (RN50) on a server board is its management controller's 2D display: named,
    never an AMD GPU of the rocm backend nor hardware to install it for (the hwloc captures of
    a 4-socket Opteron and an SL390s in the corpus show one)."""
    pci_function(tmp_path, "0000:01:00.0", "0x1002", did, "0x030000", "radeon")
    pci_function(tmp_path, "0000:43:00.0", "0x1002", "0x74a1", "0x120000", "amdgpu")  # MI300X
    backends = []
    if with_rocm:
        pytest.importorskip("hwbackends_rocm")
        from hwbackends_rocm import RocmBackend

        backends = [RocmBackend()]
    host = Host.from_system(str(tmp_path), path=[], backends=backends)
    es1000 = next(d for d in host.devices if d.pci_bus_id == "0000:01:00.0")
    assert es1000.extra.get("known_function") == "not-compute"
    assert es1000.name == "ATI ES1000 (RN50) server-management display"
    gpus = [d.pci_bus_id for d in host.devices if not d.extra.get("known_function")]
    assert gpus == ["0000:43:00.0"]
