"""A Jetson's integrated GPU (``hwbackends_cuda._tegra``): found by L4T's traces, not PCI, and
given NVIDIA's Jetson torch advice, never a cuXXX index."""

from __future__ import annotations

from pathlib import Path

import pytest
from hwbackends_cuda import CudaBackend
from hwbackends_cuda._tegra import JETSON_DOC

from hwbackends import Host
from hwbackends.cli import main

# L4T R32.7.1's release line for a Jetson Nano (t210ref), as `head -n 1 /etc/nv_tegra_release`
# prints it (NVIDIA Jetson Linux Developer Guide, "Quick Start").
RELEASE = (
    "# R32 (release), REVISION: 7.1, GCID: 29818004, BOARD: t210ref, EABI: aarch64, "
    "DATE: Sat Feb 19 17:05:08 UTC 2022\n"
)
# The Jetson Nano's device-tree root (Linux arch/arm64/boot/dts/nvidia/tegra210-p3450-0000.dts:
# model and compatible; its GPU node gpu@57000000 is the platform device 57000000.gpu).
COMPATIBLE = "nvidia,p3450-0000\0nvidia,tegra210\0"
MODEL = "NVIDIA Jetson Nano Developer Kit\0"
# The Cortex-A57's /proc/cpuinfo block (arm64 cpuinfo.c).
CPUINFO = (
    "processor\t: 0\nmodel name\t: ARMv8 Processor rev 1 (v8l)\nBogoMIPS\t: 38.40\n"
    "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32\nCPU implementer\t: 0x41\n"
    "CPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: 0xd07\nCPU revision\t: 1\n"
)


def _write(path: Path, text: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def jetson_nano(tmp: Path, *, driver: bool = True) -> Path:
    root = tmp / "root"
    _write(root / "etc/nv_tegra_release", RELEASE)
    _write(root / "sys/firmware/devicetree/base/compatible", COMPATIBLE)
    _write(root / "sys/firmware/devicetree/base/model", MODEL)
    _write(root / "proc/cpuinfo", CPUINFO)
    _write(root / "sys/devices/system/cpu/online", "0-3\n")
    if driver:
        (root / "sys/devices/57000000.gpu").mkdir(parents=True)
        _write(root / "dev/nvhost-gpu")
        _write(root / "dev/nvmap")
    return root


def _site(tmp: Path, version: str | None, cuda: str | None = None) -> list[str]:
    site = tmp / "site"
    site.mkdir(exist_ok=True)
    if version is not None:
        text = f"__version__ = '{version}'\ncuda = {cuda!r}\nhip = None\n"
        _write(site / "torch/version.py", text)
    return [str(site)]


def test_a_jetson_nano_is_an_nvidia_integrated_gpu(tmp_path: Path) -> None:
    """L4T's release file, the Tegra device tree and nvgpu's nodes: one NVIDIA GPU (Tegra X1,
    sm_53) on an aarch64 machine with 4 cores, whatever machine reads the tree."""
    host = Host.from_system(str(jetson_nano(tmp_path)), path=_site(tmp_path, None))
    assert (host.machine, host.cpu.count) == ("aarch64", 4)
    (gpu,) = host.devices_of("nvidia")
    assert (gpu.name, gpu.arch, gpu.pci_bus_id) == (
        "NVIDIA Jetson Nano Developer Kit",
        "sm_53",
        None,
    )
    assert gpu.extra["evidence"] == ["tegra"] and gpu.extra["integrated"] is True
    assert (gpu.extra["soc"], gpu.extra["l4t"], gpu.extra["driver"]) == (
        "tegra210",
        "R32.7.1",
        "nvgpu",
    )
    assert CudaBackend().arch_of(gpu) == "sm_53"


@pytest.mark.parametrize("torch", [None, ("2.13.0+cpu", None), ("2.8.0+cu128", "12.8")])
def test_the_jetson_fix_is_nvidias_jetson_wheel(
    tmp_path: Path, torch: tuple[str, str | None] | None
) -> None:
    """No torch, a CPU build, or one of PyTorch's cuXXX builds (made for discrete GPUs and
    SBSA servers): the fix is NVIDIA's wheel for the JetPack release, never a cuXXX index;
    the driver is not "missing" (nvgpu runs)."""
    site = _site(tmp_path, *(torch or (None,)))
    p = CudaBackend().probe(Host.from_system(str(jetson_nano(tmp_path)), path=site))
    assert p.hardware_present and not p.software_ready, p.reason
    assert JETSON_DOC in (p.hint or "") and "R32.7.1" in (p.hint or "")
    assert "whl/cu" not in (p.hint or "") and "not loaded" not in p.reason
    if torch is not None and "+cu" in torch[0]:
        assert "does not run on a Jetson's integrated GPU" in p.reason


def test_nvidias_jetson_build_is_ready(tmp_path: Path) -> None:
    site = _site(tmp_path, "1.11.0a0+17540c5", "10.2")  # an NVIDIA JetPack 4.6 wheel
    p = CudaBackend().probe(Host.from_system(str(jetson_nano(tmp_path)), path=site))
    assert p.available, p.reason
    assert p.reason.startswith("CUDA ready: 1 NVIDIA GPU(s) (NVIDIA Jetson Nano Developer Kit)")


def test_a_container_without_the_jetson_nodes(tmp_path: Path) -> None:
    """The release file and device tree without nvgpu's nodes (a container started without
    NVIDIA's runtime): the GPU is there, its nodes are not, and the fix says how to pass them."""
    host = Host.from_system(str(jetson_nano(tmp_path, driver=False)), path=_site(tmp_path, None))
    p = CudaBackend().probe(host)
    assert "nvgpu) shows no device node" in p.reason and "--runtime nvidia" in (p.hint or "")
    assert "ubuntu-drivers" not in (p.hint or "")


def test_a_tegra_device_tree_alone_is_enough(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _write(root / "proc/device-tree/compatible", "nvidia,p3737-0000\0nvidia,tegra234\0")
    (gpu,) = Host.from_system(str(root), path=[]).devices_of("nvidia")
    assert (gpu.name, gpu.arch) == ("NVIDIA Jetson AGX Orin / Orin NX / Orin Nano", "sm_87")


def test_another_boards_device_tree_is_no_jetson(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _write(root / "proc/device-tree/compatible", "raspberrypi,4-model-b\0brcm,bcm2711\0")
    _write(root / "etc/nv_tegra_release", "not an L4T line\n")
    assert Host.from_system(str(root), path=[]).devices_of("nvidia") == ()


def test_env_root_names_the_jetson(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = jetson_nano(tmp_path)
    assert main(["env", "--root", str(root)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "found by tegra" in text and "NVIDIA Jetson Nano Developer Kit" in text
    assert JETSON_DOC in text


def test_jetson_thor_takes_pytorchs_cuda_13_aarch64_wheels(tmp_path: Path) -> None:
    """Thor (tegra264, JetPack 7) runs the SBSA CUDA 13 stack: PyTorch's cu130 index serves it."""
    root = tmp_path / "root"
    _write(root / "proc/device-tree/compatible", "nvidia,p3971-0000\0nvidia,tegra264\0")
    _write(root / "dev/nvmap")
    p = CudaBackend().probe(Host.from_system(str(root), path=_site(tmp_path, None)))
    assert (p.hint or "").startswith(
        "pip install torch --index-url https://download.pytorch.org/whl/cu130"
    )


def test_the_platform_gpu_alone_names_its_generation(tmp_path: Path) -> None:
    """An NVIDIA platform GPU (17000000.gv11b, a Xavier's) is a Jetson GPU on its own; a
    generic ``*.gpu`` device (a Mali's ff9a0000.gpu) is not, without a Tegra device tree."""
    root = tmp_path / "root"
    (root / "sys/devices/platform/ff9a0000.gpu").mkdir(parents=True)
    assert Host.from_system(str(root), path=[]).devices_of("nvidia") == ()
    (root / "sys/devices/platform/17000000.gv11b").mkdir(parents=True)
    (root / "sys/devices/platform/ff9a0000.gpu").rmdir()
    (gpu,) = Host.from_system(str(root), path=[]).devices_of("nvidia")
    assert (gpu.arch, gpu.extra["platform_gpu"], gpu.extra.get("driver")) == (
        "sm_72",
        "gv11b",
        None,
    )
