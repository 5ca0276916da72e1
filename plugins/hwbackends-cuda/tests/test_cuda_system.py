"""The real-machine paths: a fake sysfs/proc tree read by Host.from_system, NVML enrichment
with a fake pynvml, and importing the plugin without torch, transformers or pynvml."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hwbackends_cuda import CudaBackend, _nvml
from hwbackends_rocm import RocmBackend

from hwbackends import Host
from hwbackends.testing import BackendContract

H100_INFO = """Model: \t\t NVIDIA H100 80GB HBM3
IRQ:   \t\t 198
GPU UUID: \t GPU-{uuid}
Video BIOS: \t 96.00.99.00.01
Bus Type: \t PCIe
DMA Size: \t 52 bits
DMA Mask: \t 0xfffffffffffff
Bus Location: \t {bus}
Device Minor: \t {minor}
GPU Excluded:\t No
"""
OPEN_MODULE = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  "
    "(dvs-builder@U16-A24-23-2)  Wed Jan 22 23:24:16 UTC 2025\nGCC version:  gcc version 12.3.0\n"
)
PROPRIETARY = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def fake_nvidia_root(tmp: Path, version_text: str) -> Path:
    root = tmp / "root"
    buses = ["0000:3b:00.0", "0000:86:00.0"]
    for i, bus in enumerate(buses):
        dev = root / "sys/bus/pci/devices" / bus
        _write(dev / "vendor", "0x10de\n")
        _write(dev / "class", "0x030200\n")
        _write(dev / "device", "0x2330\n")
        info = H100_INFO.format(uuid=f"{i:08x}-aaaa-bbbb-cccc-dddddddddddd", bus=bus, minor=i)
        _write(root / "proc/driver/nvidia/gpus" / bus / "information", info)
        _write(root / "dev" / f"nvidia{i}", "")
    # NVIDIA's HDMI audio function and an Intel NIC must not count as GPUs.
    _write(root / "sys/bus/pci/devices/0000:3b:00.1/vendor", "0x10de\n")
    _write(root / "sys/bus/pci/devices/0000:3b:00.1/class", "0x040300\n")
    _write(root / "sys/bus/pci/devices/0000:17:00.0/vendor", "0x8086\n")
    _write(root / "sys/bus/pci/devices/0000:17:00.0/class", "0x020000\n")
    _write(root / "dev/nvidiactl", "")
    _write(root / "proc/driver/nvidia/version", version_text)
    (root / "sys/module/nvidia").mkdir(parents=True)
    return root


def fake_site(tmp: Path, version: str, cuda: str | None, hip: str | None = None) -> Path:
    site = tmp / "site"
    text = f"__version__ = '{version}'\ncuda: Optional[str] = {cuda!r}\nhip = {hip!r}\n"
    _write(site / "torch/version.py", text)
    _write(site / f"torch-{version.split('+')[0]}.dist-info/METADATA", f"Version: {version}\n")
    return site


@pytest.mark.parametrize(
    ("text", "driver"), [(OPEN_MODULE, "570.86.15"), (PROPRIETARY, "550.54.15")]
)
def test_host_from_system_reads_an_nvidia_machine(tmp_path: Path, text: str, driver: str) -> None:
    root = fake_nvidia_root(tmp_path, text)
    site = fake_site(tmp_path, "2.8.0+cu128", "12.8")
    host = Host.from_system(str(root), path=[str(site)], system="Linux")
    assert [d.pci_bus_id for d in host.devices_of("nvidia")] == ["0000:3b:00.0", "0000:86:00.0"]
    assert host.devices_of("intel") == ()
    gpu = host.devices_of("nvidia")[0]
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.uuid == "GPU-00000000-aaaa-bbbb-cccc-dddddddddddd"
    assert host.drivers["nvidia"] == driver
    assert {"nvidia0", "nvidia1"} <= set(host.device_nodes)  # nvidiactl is no GPU
    assert host.torch is not None and host.torch.flavour == "cuda"

    b = CudaBackend()
    p = b.probe(host)
    assert p.available, p.reason
    assert p.reason.startswith("CUDA ready: 2 NVIDIA GPU(s) (2× NVIDIA H100 80GB HBM3) [sm_90]")
    devs = b.devices(host, {"CUDA_VISIBLE_DEVICES": "1"})
    assert [(d.physical_index, d.arch, d.pci_bus_id) for d in devs] == [
        (1, "sm_90", "0000:86:00.0")
    ]


def test_host_from_system_without_the_driver(tmp_path: Path) -> None:
    root = tmp_path / "root"
    dev = root / "sys/bus/pci/devices/0000:01:00.0"
    _write(dev / "vendor", "0x10de\n")
    _write(dev / "class", "0x030000\n")
    _write(root / "dev/dri/renderD128", "")
    host = Host.from_system(str(root), path=[str(fake_site(tmp_path, "2.8.0+cu128", "12.8"))])
    p = CudaBackend().probe(host)
    assert (p.hardware_present, p.software_ready) == (True, False)
    assert "the NVIDIA kernel driver is not loaded" in p.reason


def test_the_driver_files_alone_find_the_gpus(tmp_path: Path) -> None:
    """A container that hides /sys/bus/pci (LXD): /proc/driver/nvidia/gpus gives model, UUID
    and bus location; the GPUs come out in bus order whatever the folder names' spelling."""
    root = tmp_path / "root"
    for i, bus in enumerate(["0000:86:00.0", "0000:3B:00.0"]):
        info = H100_INFO.format(uuid=f"{i:08x}-aaaa-bbbb-cccc-dddddddddddd", bus=bus, minor=i)
        _write(root / "proc/driver/nvidia/gpus" / bus / "information", info)
    host = Host.from_system(str(root), path=[])
    gpus = host.devices_of("nvidia")
    assert [(d.pci_bus_id, d.extra["device_minor"]) for d in gpus] == [
        ("0000:3b:00.0", 1),
        ("0000:86:00.0", 0),
    ]
    assert all(d.extra["evidence"] == ["nvidia-proc"] for d in gpus)
    assert gpus[0].name == "NVIDIA H100 80GB HBM3"
    p = CudaBackend().probe(host)
    assert "not loaded" not in p.reason and "(nvidia-proc)" in p.evidence[0]


def test_pci_and_driver_files_merge_by_bus_id(tmp_path: Path) -> None:
    """nvidia-smi spells the domain with 8 digits, sysfs with 4: one GPU, found twice."""
    root = tmp_path / "root"
    dev = root / "sys/bus/pci/devices/0000:01:00.0"
    _write(dev / "vendor", "0x10de\n")
    _write(dev / "class", "0x030000\n")
    _write(dev / "device", "0x2684\n")
    info = H100_INFO.format(uuid="0-1-2-3-4", bus="00000000:01:00.0", minor=0)
    _write(root / "proc/driver/nvidia/gpus/0000:01:00.0/information", info)
    (gpu,) = Host.from_system(str(root), path=[]).devices_of("nvidia")
    facts = (gpu.pci_bus_id, gpu.pci_device_id, gpu.uuid)
    assert facts == ("0000:01:00.0", "0x2684", "GPU-0-1-2-3-4")
    assert gpu.extra["evidence"][-1] == "nvidia-proc"


@pytest.mark.parametrize(
    ("text", "bus"),
    [("0000:01:00.0", "0000:01:00.0"), ("00000000:0A:1F.7", "0000:0a:1f.7"),
     ("0001:c1:00.0", "0001:c1:00.0"), ("01:00.0", None), ("0000:01:20.0", None),
     ("0000:01:00.8", None), ("0000:zz:00.0", None), ("", None)],
)  # fmt: skip
def test_bus_ids_are_normalised(text: str, bus: str | None) -> None:
    from hwbackends_cuda._system import normalise_bus

    assert normalise_bus(text) == bus


def test_wsl_gives_one_gpu_of_unknown_model(tmp_path: Path) -> None:
    """/dev/dxg with NVIDIA's libcuda stub: an NVIDIA GPU the files cannot name; /dev/dxg alone
    (an AMD or Intel GPU under WSL) is no NVIDIA GPU."""
    root = tmp_path / "root"
    _write(root / "dev/dxg", "")
    assert Host.from_system(str(root), path=[]).devices_of("nvidia") == ()
    _write(root / "usr/lib/wsl/lib/libcuda.so.1", "")
    (gpu,) = Host.from_system(str(root), path=[]).devices_of("nvidia")
    assert (gpu.pci_bus_id, gpu.name, gpu.extra["evidence"]) == (None, None, ["wsl"])
    assert "not loaded" not in CudaBackend().probe(Host.from_system(str(root), path=[])).reason


def test_hostile_driver_files_are_skipped(tmp_path: Path) -> None:
    """A FIFO where an information file should be is never opened (no hang): the folder still
    names its GPU; a folder whose name is no bus id is no GPU."""
    import os

    root = tmp_path / "root"
    (root / "proc/driver/nvidia/gpus/0000:01:00.0").mkdir(parents=True)
    os.mkfifo(root / "proc/driver/nvidia/gpus/0000:01:00.0/information")
    _write(root / "proc/driver/nvidia/gpus/junk/information", "Model: x\nBus Location: nowhere\n")
    (gpu,) = Host.from_system(str(root), path=[]).devices_of("nvidia")
    assert (gpu.pci_bus_id, gpu.name, gpu.uuid) == ("0000:01:00.0", None, None)


# A POWER9 node (IBM AC922) with V100s on NVLink: the driver makes a numa_status file in each
# GPU's folder (nv_procfs_add_gpu in kernel-open/nvidia/nv-procfs.c, NVIDIA/open-gpu-kernel-
# modules, when the GPU's memory is a NUMA node), and the bus ids are the ones nvidia-smi shows
# there (domains 0004 and 0035).
POWER9_V100_BUSES = ("0035:03:00.0", "0004:04:00.0", "0004:05:00.0", "0035:04:00.0")


def test_the_driver_folder_alone_is_a_gpu(tmp_path: Path) -> None:
    """A copy with only each GPU's /proc/driver/nvidia/gpus/<bus>/numa_status and the PCI
    functions' class files (no vendor file): one NVIDIA GPU per folder, in bus order, with the
    class the PCI files give; the driver runs (its folders exist only while it does)."""
    root = tmp_path / "root"
    for bus in POWER9_V100_BUSES:
        _write(root / "proc/driver/nvidia/gpus" / bus / "numa_status", "Node: 8\nStatus: online\n")
        _write(root / "sys/bus/pci/devices" / bus / "class", "0x030200\n")
    _write(root / "sys/bus/pci/devices/0004:05:00.0/device", "0x1db1\n")
    host = Host.from_system(str(root), path=[])
    gpus = host.devices_of("nvidia")
    assert [d.pci_bus_id for d in gpus] == sorted(POWER9_V100_BUSES)
    assert {d.extra["pci_class"] for d in gpus} == {"0x030200"}
    assert [d.pci_device_id for d in gpus] == [None, "0x1db1", None, None]
    assert all(d.extra["evidence"] == ["nvidia-proc"] for d in gpus)
    p = CudaBackend().probe(host)
    assert p.hardware_present and "4 NVIDIA GPU(s)" in p.reason and "not loaded" not in p.reason
    assert CudaBackend().arch_of(gpus[1]) == "sm_70"  # 0x1db1: GV100 [Tesla V100 SXM2 16GB]


def test_a_gpu_bound_to_nvidia_is_not_reported_as_driverless() -> None:
    """A VM snapshot shows the GPU's driver link but no /proc/driver/nvidia: the driver runs."""
    host = Host.from_dict({"devices": [{"vendor": "nvidia", "pci_bus_id": "0000:06:00.0",
                                        "driver": "nvidia", "evidence": ["pci"]}],
                           "device_nodes": [], "drivers": {}})  # fmt: skip
    assert "not loaded" not in CudaBackend().probe(host).reason
    unbound = Host.from_dict({"devices": [{"vendor": "nvidia", "pci_bus_id": "0000:06:00.0"}],
                              "device_nodes": ["dri/card0"]})  # fmt: skip
    assert "the NVIDIA kernel driver is not loaded" in CudaBackend().probe(unbound).reason


@pytest.mark.parametrize(
    ("driver", "says", "fix"),
    [("vfio-pci", "reserved for a virtual machine", "vfio-pci.ids="),
     ("pci-stub", "held back from every driver", "pci-stub.ids="),
     ("nouveau", "the open-source nouveau driver, which runs no CUDA", "Disabling Nouveau"),
     ("snd_hda_intel", "not NVIDIA's driver", "unbind it from snd_hda_intel")],
)  # fmt: skip
def test_the_driver_bound_instead_is_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], driver: str, says: str, fix: str
) -> None:
    """A GPU whose PCI function is bound to another driver (its driver link, as the kernel
    writes it): the reason names that driver and what it means, never "install the driver";
    the command line's report shows the same reason."""
    import json

    from hwbackends.cli import main

    root = tmp_path / "root"
    dev = root / "sys/bus/pci/devices/0000:06:00.0"
    _write(dev / "vendor", "0x10de\n")
    _write(dev / "class", "0x030000\n")
    _write(root / f"sys/bus/pci/drivers/{driver}/.keep", "")
    dev.joinpath("driver").symlink_to(f"../../../bus/pci/drivers/{driver}")
    p = CudaBackend().probe(Host.from_system(str(root), path=[]))
    assert f"0000:06:00.0 is bound to {driver}, {says}" in p.reason
    assert "not loaded" not in p.reason and fix in (p.hint or "")
    assert "install the NVIDIA driver for this GPU" not in (p.hint or "")
    assert main(["env", "--root", str(root)]) == 0
    text = " ".join(capsys.readouterr().out.split())  # a long line wraps
    assert f"0000:06:00.0 is bound to {driver}, {says}" in text
    assert main(["env", "--root", str(root), "--json"]) == 0
    warnings = json.dumps(json.loads(capsys.readouterr().out)["warnings"])
    assert f"bound to {driver}" in warnings


class FakeNVML(types.ModuleType):
    """The handful of pynvml calls the plugin makes, over a made-up A100 with two MIG slices."""

    NVML_DEVICE_MIG_ENABLE = 1

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        super().__init__("pynvml")
        self.calls: list[str] = []
        self.mig = {"gpu0/mig0": ("MIG-aaaa1111", 1, 0), "gpu0/mig1": ("MIG-bbbb2222", 2, 0)}

    def nvmlInit(self) -> None:
        self.calls.append("init")

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return f"gpu{i}"

    def nvmlDeviceGetPciInfo(self, h: str) -> Any:
        return types.SimpleNamespace(busId=b"00000000:07:00.0")

    def nvmlDeviceGetName(self, h: str) -> str:
        return "NVIDIA A100-SXM4-40GB" + (" MIG 3g.20gb" if "mig" in h else "")

    def nvmlDeviceGetUUID(self, h: str) -> str:
        return self.mig[h][0] if "mig" in h else "GPU-5a88edbe-0000-0000-0000-000000000000"

    def nvmlDeviceGetCudaComputeCapability(self, h: str) -> tuple[int, int]:
        return (8, 0)

    def nvmlDeviceGetMemoryInfo(self, h: str) -> Any:
        return types.SimpleNamespace(total=20937965568 if "mig" in h else 42949672960)

    def nvmlDeviceGetMigMode(self, h: str) -> tuple[int, int]:
        return (1, 1)

    def nvmlDeviceGetMaxMigDeviceCount(self, h: str) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: str, j: int) -> str:
        key = f"{h}/mig{j}"
        if key not in self.mig:
            raise self.NVMLError("not found")
        return key

    def nvmlDeviceGetGpuInstanceId(self, h: str) -> int:
        return self.mig[h][1]

    def nvmlDeviceGetComputeInstanceId(self, h: str) -> int:
        return self.mig[h][2]


def _system_a100() -> Host:
    h = Host.from_dict(
        {
            "torch": {"version": "2.8.0+cu128", "cuda": "12.8"},
            "devices": [{"vendor": "nvidia", "pci_bus_id": "0000:07:00.0"}],
            "drivers": {"nvidia": "570.86.15"},
        }
    )
    return replace(h, source="system")  # pretend this is the real machine


def test_nvml_enriches_only_the_real_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNVML()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    host = _system_a100()
    devs = CudaBackend().devices(_nvml.enrich(host), {})
    assert fake.calls == ["init", "shutdown"]  # nothing kept open
    assert [(d.uuid, d.sub_index, d.memory_bytes) for d in devs] == [
        ("MIG-aaaa1111", 0, 20937965568),
        ("MIG-bbbb2222", 1, 20937965568),
    ]
    assert {d.arch for d in devs} == {"sm_80"}
    assert devs[0].name == "NVIDIA A100-SXM4-40GB MIG 3g.20gb"

    simulated = Host.from_dict({"devices": [{"vendor": "nvidia", "pci_bus_id": "0000:07:00.0"}]})
    assert _nvml.enrich(simulated) is simulated
    assert fake.calls == ["init", "shutdown"]


def test_nvml_failure_keeps_the_file_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNVML()

    def broken() -> None:
        raise fake.NVMLError("NVML Shared Library Not Found")

    fake.nvmlInit = broken  # type: ignore[method-assign]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    host = _system_a100()
    assert _nvml.enrich(host) is host
    assert [d.arch for d in CudaBackend().devices(host, {})] == [None]


def test_selection_and_devices_never_call_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Selection reads files only: with pynvml importable, neither devices() nor explain()
    initialises NVML, and nothing is kept per call (no growth over many calls)."""
    import gc

    import hwbackends
    from hwbackends._selection import confirm as _confirm

    fake = FakeNVML()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    host = _system_a100()
    CudaBackend().devices(host, {})
    gc.collect()
    before = len(gc.get_objects())
    for _ in range(200):
        hwbackends.explain(env={}, host=host)
    gc.collect()
    assert fake.calls == []
    assert len(gc.get_objects()) - before < 2000  # was two Host objects kept per call
    # the opt-in runtime check is where NVML is asked
    seen: list[Host] = []
    monkeypatch.setattr(_confirm, "confirm", lambda b, h, e, timeout: seen.append(h))
    CudaBackend().confirm(host, {})
    assert fake.calls == ["init", "shutdown"] and seen[0].devices[0].extra["enriched_by"] == "nvml"


def test_import_loads_no_torch_transformers_or_pynvml() -> None:
    code = (
        "import sys, json\n"
        "import hwbackends_cuda, hwbackends\n"
        "from hwbackends import Host\n"
        "h = Host.from_file(sys.argv[1])\n"
        "b = hwbackends_cuda.CudaBackend()\n"
        "b.probe(h); d = b.devices(h, {}); b.capabilities(d[0], host=h)\n"
        "print(json.dumps(sorted(m for m in ('torch', 'transformers', 'pynvml', 'kernels',"
        " 'accelerate') if m in sys.modules)))\n"
    )
    host = Path(__file__).parent / "hosts" / "h100-sxm-8.json"
    out = subprocess.run(
        [sys.executable, "-c", code, str(host)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


class TestCudaContract(BackendContract):
    backend_cls = CudaBackend
    competitors = (RocmBackend,)
    hosts = (
        "hosts/h100-sxm-8.json",
        "hosts/mixed-4-fastest-first.json",
        "hosts/a100-mig.json",
        "hosts/v100-4.json",
        "hosts/hybrid-laptop-cuda-torch.json",
    )
    other_hosts = ("hosts/nvidia-cpu-torch.json", "hosts/nvidia-no-driver.json")
    sdk_modules = ("pynvml",)
