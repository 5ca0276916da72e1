"""Host: the real-machine readers on a fake tree, and host-file validation."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from coretest import clean_env, run_python

from hwbackends import Host, HostFileError
from hwbackends._machine.host import normalize_dist_name


def write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def pci(root: Path, bus: str, vendor: str, device: str, klass: str) -> None:
    base = f"sys/bus/pci/devices/{bus}"
    write(root, f"{base}/vendor", vendor + "\n")
    write(root, f"{base}/device", device + "\n")
    write(root, f"{base}/class", klass + "\n")


@pytest.fixture
def fake_root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    # two NVIDIA GPUs, out of order in creation, plus the NVIDIA audio function and a BMC VGA
    pci(r, "0000:c1:00.0", "0x10de", "0x2330", "0x030200")
    pci(r, "0000:41:00.0", "0x10de", "0x2330", "0x030200")
    pci(r, "0000:41:00.1", "0x10de", "0x22a3", "0x040300")
    pci(r, "0000:02:00.0", "0x1a03", "0x2000", "0x030000")
    # an AMD MI300X whose KFD node comes first although its bus id is higher
    pci(r, "0000:e1:00.0", "0x1002", "0x74a1", "0x120000")
    pci(r, "0000:11:00.0", "0x1002", "0x74a1", "0x120000")
    write(r, "sys/bus/pci/devices/0000:11:00.0/mem_info_vram_total", "206141652992\n")
    # Intel chipset functions must not count as GPUs
    pci(r, "0000:00:14.0", "0x8086", "0x7ae0", "0x0c0330")
    for bus, uuid in (("0000:41:00.0", "GPU-aaaa1111"), ("0000:c1:00.0", "GPU-bbbb2222")):
        write(
            r,
            f"proc/driver/nvidia/gpus/{bus}/information",
            f"Model: \t\t NVIDIA H100 80GB HBM3\nIRQ: 1\nGPU UUID: \t {uuid}\n"
            f"Bus Location: \t {bus}\n",
        )
    write(
        r,
        "proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n",
    )
    nodes = "sys/class/kfd/kfd/topology/nodes"
    write(r, f"{nodes}/0/properties", "cpu_cores_count 64\nsimd_count 0\ngfx_target_version 0\n")
    loc_e1 = (0xE1 << 8) | 0
    loc_11 = (0x11 << 8) | 0
    write(
        r,
        f"{nodes}/1/properties",
        f"simd_count 1216\ngfx_target_version 90402\ndomain 0\nlocation_id {loc_e1}\n"
        "unique_id 1311768467463790320\n",
    )
    write(
        r,
        f"{nodes}/2/properties",
        f"simd_count 1216\ngfx_target_version 90402\ndomain 0\nlocation_id {loc_11}\n"
        "unique_id 42\n",
    )
    write(
        r,
        "proc/cpuinfo",
        "processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: fpu avx2 amx_bf16\n\n"
        "processor\t: 1\nflags\t\t: ignored\n",
    )
    for node in ("nvidia0", "nvidia1", "nvidiactl", "kfd", "null", "dri/renderD128"):
        write(r, f"dev/{node}", "")
    write(r, "sys/module/amdgpu/version", "6.8.5\n")
    return r


def test_from_system_reads_fake_tree(fake_root: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    write(
        site,
        "torch/version.py",
        "from typing import Optional\n__version__ = '2.8.0+rocm6.4'\ndebug = False\n"
        "cuda: Optional[str] = None\ngit_version = 'abc'\nhip: Optional[str] = '6.4.43482'\n",
    )
    write(site, "torch-2.8.0+rocm6.4.dist-info/METADATA", "Name: torch\nVersion: 2.8.0+rocm6.4\n")
    write(site, "Foo_Bar.egg-info/PKG-INFO", "Name: Foo.Bar\nVersion: 3.1\n\n")
    # the cuda and rocm plugins (installed with the tests) order and name the GPUs
    h = Host.from_system(str(fake_root), path=[str(site)])
    # another tree than / is not this machine: the source `env --root` shows, for API and CLI
    assert h.source == f"root {fake_root}" and h.simulated
    nv = h.devices_of("nvidia")
    assert [d.pci_bus_id for d in nv] == ["0000:41:00.0", "0000:c1:00.0"]  # PCI bus order
    assert [d.uuid for d in nv] == ["GPU-aaaa1111", "GPU-bbbb2222"]
    assert nv[0].name == "NVIDIA H100 80GB HBM3"
    amd = h.devices_of("amd")
    assert [d.pci_bus_id for d in amd] == ["0000:e1:00.0", "0000:11:00.0"]  # KFD node order
    assert [d.arch for d in amd] == ["gfx942", "gfx942"]
    assert amd[0].uuid == "GPU-123456789abcdef0"
    assert amd[1].memory_bytes == 206141652992
    assert {d.vendor for d in h.devices} == {"nvidia", "amd"}  # BMC VGA, audio, USB left out
    assert h.drivers == {"amdgpu": "6.8.5", "nvidia": "550.54.15"}
    # exact patterns: nvidiactl and the render node are not devices of any backend
    assert h.device_nodes == ("kfd", "nvidia0", "nvidia1")
    assert h.cpu.model == "Test CPU" and "amx_bf16" in h.cpu.flags and "ignored" not in h.cpu.flags
    assert h.torch is not None and (h.torch.hip, h.torch.cuda) == ("6.4.43482", None)
    assert h.torch.flavour == "rocm"
    assert h.package("TORCH") == "2.8.0+rocm6.4"
    assert h.package("foo.bar") == "3.1"


def test_from_system_on_empty_root(tmp_path: Path) -> None:
    h = Host.from_system(str(tmp_path), path=[], backends=[])
    assert (h.devices, h.torch, h.drivers, h.device_nodes) == ((), None, {}, ())


def test_normalize() -> None:
    assert normalize_dist_name("Torch_NPU..x") == "torch-npu-x"


def test_round_trip_and_defaults() -> None:
    d = {
        "system": "Linux",
        "machine": "x86_64",
        "torch": {"version": "2.8.0+rocm6.4", "cuda": None, "hip": "6.4.43482"},
        "packages": {"torch": "2.8.0+rocm6.4"},
        "devices": [
            {
                "vendor": "amd",
                "pci_bus_id": "0000:0C:00.0",
                "uuid": "GPU-1a2b3c4d5e6f7081",
                "name": "AMD Instinct MI300X",
                "arch": "gfx942",
                "memory_bytes": 206158430208,
            }
        ],
        "cuda_fastest_first": None,
        "env": {},
    }
    h = Host.from_dict(d)
    assert h.devices[0].pci_bus_id == "0000:0c:00.0"
    again = Host.from_dict(json.loads(json.dumps(h.to_dict())))
    assert again.to_dict() == h.to_dict()


BAD = [
    ([], "a host description must be a JSON object, got list"),
    ({"gpus": []}, "unknown host field(s) 'gpus' in dict"),
    ({"torch": {"cuda": "12.8"}}, "'torch' in dict must be an object with a string 'version'"),
    ({"packages": {"torch": 2}}, "'packages' in dict must map distribution names to version"),
    ({"devices": {}}, "'devices' in dict must be a list"),
    ({"devices": [{"vendor": ""}]}, "devices[0] in dict has vendor ''"),
    ({"devices": [{"vendor": "amd", "memory_bytes": -1}]}, "devices[0] in dict.memory_bytes must"),
    (
        {"devices": [{"vendor": "nvidia"}], "cuda_fastest_first": [1]},
        "'cuda_fastest_first' in dict must be a permutation of the CUDA GPU positions",
    ),
    ({"env": {"X": 1}}, "'env' in dict must map variable names to string values"),
    ({"cpu": {"count": -1}}, "'cpu.count' in dict must be a whole number, 0 or more"),
]


@pytest.mark.parametrize(("data", "message"), BAD)
def test_host_dict_errors_are_precise(data: object, message: str) -> None:
    with pytest.raises(HostFileError) as exc:
        Host.from_dict(data)  # type: ignore[arg-type]
    assert str(exc.value).startswith(message)


def test_host_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"system": "Linux",,}')
    with pytest.raises(HostFileError, match=r"is not valid JSON \(line 1, column 20"):
        Host.from_file(bad)
    with pytest.raises(HostFileError, match=r"does not exist\. Expected a path to a JSON host"):
        Host.from_file(tmp_path / "missing.json")


def cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_python("-m", "hwbackends", *args, env=env, timeout=timeout)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_cpuinfo_under_root_that_is_a_fifo_or_dev_zero_neither_hangs_nor_grows(
    tmp_path: Path, kind: str
) -> None:
    proc = tmp_path / "root/proc"
    proc.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(proc / "cpuinfo")
    else:
        (proc / "cpuinfo").symlink_to("/dev/zero")
    (proc / "meminfo").symlink_to("/dev/zero")
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))\n"
        "from hwbackends import Host\n"
        f"h = Host.from_system(root={str(tmp_path / 'root')!r}, backends=[])\n"
        "print(repr(h.cpu.model), h.memory_bytes)\n"
    )
    out = run_python("-c", code, env=clean_env(), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["''", "None"]


@pytest.mark.parametrize(
    "data, message",
    [
        ('{"memory_bytes": ' + "9" * 4000 + "}", "up to 2**64 or null, got a number of 4000"),
        (
            '{"devices": [{"vendor": "nvidia", "memory_bytes": 1' + "0" * 30 + "}]}",
            "memory_bytes must be a non-negative integer up to 2**64",
        ),
        ('{"devices": [{"vendor": "nvidia", "extra": {"x": NaN}}]}', "it holds NaN"),
        ('{"memory_bytes": Infinity}', "it holds Infinity"),
    ],
)
def test_huge_sizes_and_nan_in_host_files_exit_2_with_a_message(
    tmp_path: Path, data: str, message: str
) -> None:
    f = tmp_path / "host.json"
    f.write_text(data)
    for command in (("env",), ("explain", "--json")):
        out = cli(*command, "--host", str(f), env=clean_env())
        assert out.returncode == 2, out.stdout + out.stderr
        assert message in out.stderr and "internal error" not in out.stderr
