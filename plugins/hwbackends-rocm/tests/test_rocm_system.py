"""Real-machine paths for rocm: a fake sysfs/KFD tree read by Host.from_system, the CLI on a
host file, importing the plugin without torch, and the conformance kit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hwbackends_cuda import CudaBackend
from hwbackends_rocm import RocmBackend
from hwbackends_rocm._system import gfx_name

from hwbackends import Host
from hwbackends.cli import main
from hwbackends.testing import BackendContract

HOSTS = Path(__file__).parent / "hosts"


def _put(path: Path, text: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _kfd_node(root: Path, node: int, props: dict[str, int]) -> None:
    text = "".join(f"{k} {v}\n" for k, v in props.items())
    _put(root / f"sys/class/kfd/kfd/topology/nodes/{node}/properties", text)


def amd_machine(tmp: Path) -> tuple[Path, Path]:
    """Two MI300X whose KFD order (node 1 = bus 0xc1, node 2 = bus 0x05) differs from PCI
    order, the CPU as KFD node 0, and an AMD audio function that is not a GPU."""
    root = tmp / "root"
    for bus, vram in (("0000:05:00.0", 206141652992), ("0000:c1:00.0", 206141652992)):
        dev = root / "sys/bus/pci/devices" / bus
        _put(dev / "vendor", "0x1002\n")
        _put(dev / "class", "0x120000\n")  # processing accelerator, as Instinct GPUs report
        _put(dev / "device", "0x74a1\n")
        _put(dev / "mem_info_vram_total", f"{vram}\n")
    _put(root / "sys/bus/pci/devices/0000:05:00.1/vendor", "0x1002\n")
    _put(root / "sys/bus/pci/devices/0000:05:00.1/class", "0x040300\n")
    _kfd_node(root, 0, {"cpu_cores_count": 96, "simd_count": 0, "gfx_target_version": 0})
    _kfd_node(root, 1, {"simd_count": 1216, "gfx_target_version": 90402, "domain": 0,
                        "location_id": 0xC1 << 8, "unique_id": 0x1A2B3C4D5E6F7081})  # fmt: skip
    _kfd_node(root, 2, {"simd_count": 1216, "gfx_target_version": 90402, "domain": 0,
                        "location_id": 0x05 << 8, "unique_id": 0x1A2B3C4D5E6F7080})  # fmt: skip
    _put(root / "dev/kfd")
    _put(root / "dev/dri/renderD128")
    _put(root / "dev/dri/renderD129")
    (root / "sys/module/amdgpu").mkdir(parents=True)
    site = tmp / "site"
    _put(site / "torch/version.py",
         "__version__ = '2.8.0+rocm6.4'\ncuda = None\nhip = '6.4.43482'\n")  # fmt: skip
    return root, site


def test_host_from_system_reads_an_amd_machine(tmp_path: Path) -> None:
    root, site = amd_machine(tmp_path)
    host = Host.from_system(str(root), path=[str(site)], system="Linux")
    amd = host.devices_of("amd")
    # KFD node order, not PCI order; arch from gfx_target_version; uuid from unique_id.
    assert [d.pci_bus_id for d in amd] == ["0000:c1:00.0", "0000:05:00.0"]
    assert [d.arch for d in amd] == ["gfx942", "gfx942"]
    assert [d.uuid for d in amd] == ["GPU-1a2b3c4d5e6f7081", "GPU-1a2b3c4d5e6f7080"]
    assert amd[0].memory_bytes == 206141652992
    assert "kfd" in host.device_nodes and "amdgpu" in host.drivers

    b = RocmBackend()
    p = b.probe(host)
    assert p.available, p.reason
    devs = b.devices(host, {"HIP_VISIBLE_DEVICES": "1"})
    assert [(d.physical_index, d.pci_bus_id, d.name) for d in devs] == [
        (1, "0000:05:00.0", "AMD Instinct MI300X")  # the device id 0x74a1 names it
    ]
    assert not CudaBackend().probe(host).hardware_present


def test_the_kfd_topology_alone_finds_the_gpus(tmp_path: Path) -> None:
    """No /sys/bus/pci (a container mounting only /sys/class/kfd): KFD nodes are the devices,
    in node order, with bus ids, arch and unique ids; a node without gfx_target_version (older
    kernels) counts by its SIMDs and keeps its device id."""
    root = tmp_path / "root"
    _kfd_node(root, 0, {"cpu_cores_count": 96, "simd_count": 0})
    _kfd_node(root, 1, {"simd_count": 256, "device_id": 0x6860, "location_id": 0x1900,
                        "local_mem_size": 17163091968, "unique_id": 7})  # fmt: skip
    _kfd_node(root, 2, {"simd_count": 1216, "gfx_target_version": 90402, "domain": 1,
                        "location_id": 0x0B00, "device_id": 0x74A1})  # fmt: skip
    _kfd_node(root, 3, {"cpu_cores_count": 0, "simd_count": 0, "device_id": 0x687F,
                        "location_id": 0x0900})  # fmt: skip
    _put(root / "sys/class/kfd/kfd/topology/nodes/junk/properties", "simd_count 9\n")
    amd = Host.from_system(str(root), path=[]).devices_of("amd")
    assert [(d.pci_bus_id, d.pci_device_id, d.arch) for d in amd] == [
        ("0000:19:00.0", "0x6860", None),
        ("0001:0b:00.0", "0x74a1", "gfx942"),
        ("0000:09:00.0", "0x687f", None),
    ]
    assert amd[0].memory_bytes == 17163091968 and amd[0].uuid == "GPU-0000000000000007"
    assert [d.extra["evidence"] for d in amd] == [["kfd"]] * 3
    assert [d.extra["kfd_node"] for d in amd] == [1, 2, 3]


def test_partitions_map_to_their_physical_function(tmp_path: Path) -> None:
    """An MI300X in a partition mode: four KFD nodes share one unique_id, the kernel ORs the
    partition index into location_id's function bits; the PCI folder shows the one function.
    Each partition keeps the bus id the kernel writes, and names the function it shares."""
    root = tmp_path / "root"
    dev = root / "sys/bus/pci/devices/0000:05:00.0"
    _put(dev / "vendor", "0x1002\n")
    _put(dev / "class", "0x120000\n")
    _put(dev / "device", "0x74a1\n")
    _kfd_node(root, 0, {"simd_count": 0})
    for i in range(4):
        _kfd_node(root, 1 + i, {"simd_count": 304, "gfx_target_version": 90402,
                                "location_id": 0x0500 + i, "unique_id": 0xABC})  # fmt: skip
    amd = Host.from_system(str(root), path=[]).devices_of("amd")
    assert [(d.pci_bus_id, d.extra["partition"], d.extra["physical_pci_bus_id"]) for d in amd] == [
        (f"0000:05:00.{i}", i, "0000:05:00.0") for i in range(4)
    ]
    assert all(d.extra["pci_class"] == "0x120000" for d in amd)  # the PCI facts are kept
    assert all(d.uuid == "GPU-0000000000000abc" for d in amd)


def test_kfd_nodes_count_as_a_running_driver(tmp_path: Path) -> None:
    """The topology exists only while amdgpu runs: its GPUs are no 'driver not loaded' case."""
    root = tmp_path / "root"
    _kfd_node(root, 1, {"simd_count": 80, "gfx_target_version": 90402, "location_id": 0x0A00})
    _put(root / "dev/dri/renderD128")
    p = RocmBackend().probe(Host.from_system(str(root), path=[]))
    assert "not loaded" not in p.reason and "/dev/kfd" in p.reason


def test_cli_env_on_the_mi300x_host(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env", "--host", str(HOSTS / "mi300x-8.json")]) == 0
    out = capsys.readouterr().out
    assert "Chosen  rocm (device type 'cuda')" in out
    assert "cuda:7  →  7" in out and "gfx942" in out
    assert "precision   bf16 for training" in out
    assert "attention   flash_attention_2, flash_attention_3, sdpa, eager" in out
    assert "hub kernels rocm" in out

    assert main(["env", "--json", "--host", str(HOSTS / "mi300x-8.json")]) == 0
    data = json.loads(capsys.readouterr().out)
    q = {x["method"]: x["status"] for x in data["capabilities"]["quantization"]}
    assert (q["awq"], q["bitsandbytes"], q["eetq"]) == ("supported", "partial", "unsupported")
    assert data["capabilities"]["limitations"][0]["report_to_exclude"] == ["codecarbon"]


def test_import_loads_no_torch_or_transformers() -> None:
    code = (
        "import sys, json\n"
        "import hwbackends_rocm\n"
        "from hwbackends import Host\n"
        "h = Host.from_file(sys.argv[1])\n"
        "b = hwbackends_rocm.RocmBackend()\n"
        "b.probe(h); d = b.devices(h, {}); b.capabilities(d[0], host=h)\n"
        "print(json.dumps(sorted(m for m in ('torch', 'transformers', 'kernels', 'accelerate',"
        " 'amdsmi') if m in sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(HOSTS / "mi300x-8.json")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


class TestRocmContract(BackendContract):
    backend_cls = RocmBackend
    competitors = (CudaBackend,)
    hosts = (
        "hosts/mi300x-8.json",
        "hosts/mi210-2.json",
        "hosts/strix-halo.json",
        "hosts/radeon-with-igpu.json",
        "hosts/hybrid-laptop-rocm-torch.json",
    )
    other_hosts = (
        "hosts/amd-cuda-torch.json",
        "hosts/amd-no-kfd.json",
        "hosts/amd-no-driver.json",
    )
    sdk_modules = ("amdsmi",)


@pytest.mark.parametrize(
    ("version", "name"),
    [
        (90402, "gfx942"),
        (90010, "gfx90a"),
        (90500, "gfx950"),
        (110501, "gfx1151"),
        (100300, "gfx1030"),
        (120001, "gfx1201"),
    ],
)
def test_gfx_names(version: int, name: str) -> None:
    assert gfx_name(version) == name


@pytest.mark.parametrize(
    ("driver", "says", "fix"),
    [("vfio-pci", "which keeps it for a virtual machine's guest", "vfio-pci.ids="),
     ("pci-stub", "which keeps every driver off it", "pci-stub.ids="),
     ("radeon", "which has no KFD, so ROCm cannot see it", "amdgpu.cik_support=1"),
     ("nouveau", "which ROCm does not use", "unbind it from nouveau")],
)  # fmt: skip
def test_the_driver_bound_instead_is_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], driver: str, says: str, fix: str
) -> None:
    """An AMD GPU whose PCI function is bound to another driver (its driver link): API and
    command line name that driver as the reason, never "install the amdgpu driver"."""
    root = tmp_path / "root"
    dev = root / "sys/bus/pci/devices/0000:0c:00.0"
    _put(dev / "vendor", "0x1002\n")
    _put(dev / "device", "0x740f\n")  # Instinct MI210
    _put(dev / "class", "0x038000\n")
    _put(root / f"sys/bus/pci/drivers/{driver}/.keep")
    dev.joinpath("driver").symlink_to(f"../../../bus/pci/drivers/{driver}")
    p = RocmBackend().probe(Host.from_system(str(root), path=[]))
    assert f"0000:0c:00.0 is bound to {driver}, {says}" in p.reason
    assert "not loaded" not in p.reason and fix in (p.hint or "")
    assert "amdgpu-install" not in (p.hint or "")
    assert main(["env", "--root", str(root)]) == 0
    assert f"0000:0c:00.0 is bound to {driver}, {says}" in " ".join(capsys.readouterr().out.split())
