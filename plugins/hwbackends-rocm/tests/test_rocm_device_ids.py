"""AMD GPUs known only by their PCI device id: the gfx target from the id, pre-GCN Radeons
(no ROCm support, never "install amdgpu/ROCm"), and GCN GPUs off AMD's ROCm support list.

Truths: the amdgpu driver's pciidlist and amdgpu_unsupported_pciidlist (Linux
drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c), pci.ids 2026.08.22, LLVM's AMDGPU processor table,
AMD's ROCm system requirements (supported GPUs).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hwbackends_rocm import RocmBackend
from hwbackends_rocm._arch import GFX, pci_row
from hwbackends_rocm._pciids import DEVICES
from hypothesis import given
from hypothesis import strategies as st

from hwbackends import Host, HostDevice, SelectionReport

Choose = Callable[..., SelectionReport]
PRE_GCN = (
    "no ROCm support for this GPU: AMD Radeon HD 6670/7670 (PCI 1002:6758, TeraScale) is a GPU "
    "older than GCN, not supported by ROCm or the amdgpu driver (both start at GCN; Linux "
    "drives it with the radeon driver: amdgpu_unsupported_pciidlist in "
    "drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c)"
)


@pytest.mark.parametrize(
    ("did", "arch", "family"),
    [
        ("0x740c", "gfx90a", "CDNA2"),  # MI250X/MI250
        ("0x740f", "gfx90a", "CDNA2"),  # MI210
        ("0x738c", "gfx908", "CDNA"),  # MI100
        ("0x66a1", "gfx906", "GCN5"),  # MI50 / Radeon Pro VII
        ("0x6860", "gfx900", "GCN5"),  # MI25
        ("0x74a1", "gfx942", "CDNA3"),  # MI300X
        ("0x75a3", "gfx950", "CDNA4"),  # MI355X (pci.ids calls it Aqua Vanjaram too)
        ("0x744c", "gfx1100", "RDNA3"),  # RX 7900 XTX
        ("0x7550", "gfx1201", "RDNA4"),  # RX 9070
        ("0x73bf", "gfx1030", "RDNA2"),  # RX 6900 XT
        ("0x67df", "gfx803", "GCN4"),  # RX 580
        ("0x6798", "gfx600", "GCN1"),  # HD 7970
        ("0x1586", "gfx1151", "RDNA3.5"),  # Strix Halo
        ("0x6758", "", "TeraScale"),  # HD 6670
        ("0x9442", "", "TeraScale"),  # HD 4850
        ("0x68b8", "", "TeraScale"),  # HD 5770
        ("0x7146", "", "pre-TeraScale"),  # X1300 (R500)
    ],
)
def test_device_ids(did: str, arch: str, family: str) -> None:
    row = pci_row(did)
    assert row is not None and (row.arch, row.family) == (arch, family)
    assert row.pre_gcn == (arch == "")


def test_audio_functions_and_garbage_are_not_gpus() -> None:
    for did in ("0xab30", "0xab40", "0xaaf0", "0x1457", "nope", ""):
        assert pci_row(did) is None


def test_every_gfx_target_of_the_table_is_described() -> None:
    targets = {gfx for gfx, _, _ in DEVICES.values() if gfx}
    assert targets <= set(GFX), targets - set(GFX)


def test_arch_of_falls_back_to_the_device_id() -> None:
    b = RocmBackend()
    assert b.arch_of(HostDevice(vendor="amd", pci_device_id="0x740c")) == "gfx90a"
    assert b.arch_of(HostDevice(vendor="amd", pci_device_id="0x740c", arch="gfx942")) == "gfx942"
    assert b.arch_of(HostDevice(vendor="amd", pci_device_id="0x6758")) is None  # pre-GCN


def test_terascale_radeon_is_not_told_to_install_rocm(choose: Choose) -> None:
    r = choose("radeon-hd6670-terascale")
    rocm = r.status("rocm")
    assert rocm.probe is not None
    assert rocm.reason == PRE_GCN
    assert "not supported by ROCm" in rocm.reason
    assert rocm.probe.hint is None
    assert rocm.probe.hardware_present and not rocm.probe.available  # shown, not "no hardware"
    assert r.chosen == "cpu"
    assert not any("amdgpu-install" in w or "install the amdgpu" in w for w in r.warnings)


def test_mi250x_known_only_by_device_id_is_ready(choose: Choose) -> None:
    r = choose("mi250x-device-id-only")
    assert r.chosen == "rocm", r.status("rocm").reason
    assert r.status("rocm").reason == (
        "ROCm ready: 2 AMD GPU(s) (2× gfx90a (Instinct MI210/MI250/MI250X)), torch 2.8.0+rocm6.4"
    )
    assert [(d.arch, d.name) for d in r.devices] == [("gfx90a", "AMD Instinct MI250X/MI250")] * 2
    caps = RocmBackend().capabilities(r.devices[0], host=r.host)
    # quantization and attention answers know the arch from the id ("unknown" before)
    assert caps.arch == "gfx90a" and caps.training_precision == "bf16"
    assert caps.quant("fp8").status != "unknown"
    assert "CDNA2" in caps.sources["dtypes"]
    assert RocmBackend().capabilities(host=r.host).arch == "gfx90a"


def test_polaris_without_kfd_is_told_rocm_does_not_support_it(choose: Choose) -> None:
    r = choose("rx580-polaris-no-rocm")
    rocm = r.status("rocm")
    assert rocm.probe is not None and rocm.probe.hint is None
    assert rocm.reason == (
        "1 AMD GPU(s) (gfx803 (Radeon R9 Fury (Fiji), RX 470/480/570/580/590 (Polaris))) found, "
        "but ROCm does not support it: gfx803 is not on AMD's ROCm support list: "
        "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/reference/"
        "system-requirements.html; and /dev/kfd (ROCm's compute interface) is missing; and "
        "torch is not installed; and no PyTorch ROCm wheel from 2.7 to 2.14 has kernels for "
        "gfx803 (Radeon R9 Fury (Fiji), RX 470/480/570/580/590 (Polaris))"
    )


# -- fake sysfs roots -------------------------------------------------------------------------


def _put(path: Path, text: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _function(root: Path, bus: str, device: str, klass: str) -> None:
    d = root / "sys/bus/pci/devices" / bus
    _put(d / "vendor", "0x1002\n")
    _put(d / "device", device + "\n")
    _put(d / "class", klass + "\n")


def test_sysfs_terascale_radeon(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _function(root, "0000:01:00.0", "0x6758", "0x030000")
    _function(root, "0000:01:00.1", "0xaa90", "0x040300")  # its HDMI audio function
    _put(root / "dev/dri/renderD128")
    (root / "sys/module/radeon").mkdir(parents=True)
    host = Host.from_system(str(root), path=[str(tmp_path / "site")], system="Linux")
    assert [d.pci_bus_id for d in host.devices_of("amd")] == ["0000:01:00.0"]
    p = RocmBackend().probe(host)
    assert p.reason == PRE_GCN and p.hint is None


def test_sysfs_mi250x_without_kfd_topology_has_its_arch(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _function(root, "0000:29:00.0", "0x740c", "0x038000")
    host = Host.from_system(str(root), path=[str(tmp_path / "site")], system="Linux")
    [dev] = RocmBackend().devices(host, {})
    assert (dev.arch, dev.name) == ("gfx90a", "AMD Instinct MI250X/MI250")
    p = RocmBackend().probe(host)
    assert p.hardware_present and "gfx90a (Instinct MI210/MI250/MI250X)" in p.reason


@given(st.one_of(st.text(max_size=40), st.integers(-5, 1 << 20), st.none()))
def test_device_id_lookup_never_raises(did: object) -> None:
    row = pci_row(did)  # type: ignore[arg-type]
    assert row is None or row.arch == "" or row.arch in GFX
