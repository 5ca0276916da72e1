"""Maxwell, Pascal and Volta hosts: the arch from the PCI device id, and the wheel index that
really has kernels for them (PyTorch's per-release CUDA support matrix).

Truths: device ids and products from the PCI ID Repository (pci.ids 2026.08.22), compute
capabilities from developer.nvidia.com/cuda-gpus, wheel contents from pytorch/pytorch
RELEASE.md and the release issues cited in ``hwbackends_cuda._wheels``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hwbackends_cuda import CudaBackend
from hwbackends_cuda._arch import SM, arch_for_device_id
from hwbackends_cuda._pciids import CHIPS, DEVICES
from hwbackends_cuda._wheels import (
    MIN_DRIVER,
    NEWEST,
    RELEASES,
    WHEELS,
    Wheel,
    advise,
    driver_runs,
    runs_on,
    wheel_for,
    wheel_of,
)
from hypothesis import given
from hypothesis import strategies as st

from hwbackends import Host, SelectionReport

Select = Callable[..., SelectionReport]
IDX = "https://download.pytorch.org/whl/"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _x86_64(root: Path) -> None:
    """The tree's CPU: an x86_64 one (a tree's wheel advice is for its own CPU)."""
    _write(root / "proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu lm\n")


def _function(root: Path, bus: str, vendor: str, device: str, klass: str) -> None:
    d = root / "sys/bus/pci/devices" / bus
    _write(d / "vendor", vendor + "\n")
    _write(d / "device", device + "\n")
    _write(d / "class", klass + "\n")


# -- the device-id table ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("did", "arch", "product"),
    [
        ("0x15f8", "sm_60", "Tesla P100 PCIe 16GB"),
        ("0x15f9", "sm_60", "Tesla P100 SXM2 16GB"),
        ("0x1b06", "sm_61", "GeForce GTX 1080 Ti"),
        ("0x1b00", "sm_61", "TITAN X Pascal"),
        ("0x1b38", "sm_61", "Tesla P40"),
        ("0x1bb3", "sm_61", "Tesla P4"),
        ("0x17fd", "sm_52", "Tesla M40"),
        ("0x13f2", "sm_52", "Tesla M60"),
        ("0x17c2", "sm_52", "GeForce GTX TITAN X"),
        ("0x1380", "sm_50", "GeForce GTX 750 Ti"),
        ("0x1db1", "sm_70", "Tesla V100 SXM2 16GB"),
        ("0x2330", "sm_90", "H100 SXM5 80GB"),
        ("0x2b85", "sm_120", "GeForce RTX 5090"),
        ("0x2e12", "sm_121", "GB10"),
        ("0x1B06", "sm_61", "GeForce GTX 1080 Ti"),  # sysfs writes lower case; hosts may not
    ],
)
def test_device_ids_name_the_product_and_arch(did: str, arch: str, product: str) -> None:
    assert arch_for_device_id(did) == (arch, product)


@pytest.mark.parametrize(
    ("did", "arch", "product"),
    [
        ("0x06d2", "sm_20", "Tesla M2070"),  # GF100GL
        ("0x06d1", "sm_20", "Tesla C2050 / C2070"),
        ("0x1091", "sm_20", "Tesla M2090"),  # GF110GL
        ("0x118f", "sm_30", "Tesla K10"),  # GK104GL
        ("0x1023", "sm_35", "Tesla K40m"),  # GK110BGL
        ("0x102d", "sm_37", "Tesla K80"),  # GK210GL, inside GK110's block
        ("0x1287", "sm_35", None),  # GK208 (GeForce GT 730): the block, unnamed
    ],
)
def test_pre_maxwell_ids_have_their_arch(did: str, arch: str, product: str | None) -> None:
    assert arch_for_device_id(did) == (arch, product)
    assert SM[arch].family in ("Fermi", "Kepler")


@pytest.mark.parametrize("did", ["0x10ef", "0x0fb0", "0x1ad6", "0x1af1", "0x22a3", "zz", ""])
def test_audio_usb_and_nvswitch_functions_are_not_gpus(did: str) -> None:
    # GP102 HDMI audio, GM200 HDMI audio, TU102 USB, A100 / H100 NVSwitch, garbage
    assert arch_for_device_id(did) is None


def test_every_chip_maps_to_a_known_arch() -> None:
    assert {arch for arch, _ in CHIPS.values()} <= set(SM)
    assert {chip for chip, _ in DEVICES.values()} <= set(CHIPS)
    assert sum(1 for c, _ in DEVICES.values() if CHIPS[c][1] in ("Maxwell", "Pascal")) > 150


# -- the wheel matrix -------------------------------------------------------------------------


def test_binary_compatibility_rules() -> None:
    cu126 = wheel_of("2.8.0+cu126", "12.6")
    assert cu126 is not None and cu126.index == "cu126"
    # sm_60 SASS runs on 6.1 and 6.2, not on 7.x; sm_90 SASS never on Blackwell
    assert runs_on(cu126, 61) and runs_on(cu126, 52) and not runs_on(cu126, 120)
    cu130 = wheel_of("2.12.0+cu130", None)
    assert cu130 is not None and runs_on(cu130, 121)  # 12.0+PTX
    assert not runs_on(cu130, 70) and not runs_on(cu130, 61)


def test_every_release_keeps_a_maxwell_to_hopper_index_and_rows_are_sourced() -> None:
    for line in RELEASES:
        rows = [w for w in WHEELS if w.torch == line]
        assert any(runs_on(w, 50) and runs_on(w, 90) for w in rows), line
        assert all(w.source and set(w.sass) <= {*(s.capability for s in SM.values()), 37}
                   for w in rows)  # fmt: skip
    assert NEWEST == "2.14"


@pytest.mark.parametrize(
    ("torch", "cuda", "index"),
    [
        ("2.8.0+cu128", "12.8", "cu128"),
        ("2.11.0", "12.8", "cu128"),
        ("2.9.1+cu130", "13.0", "cu130"),
    ],
)
def test_installed_wheels_are_recognised(torch: str, cuda: str, index: str) -> None:
    w = wheel_of(torch, cuda)
    assert w is not None and w.index == index
    assert wheel_of("2.8.0+cu128", None) is not None
    assert wheel_of("2.3.0+cu121", "12.1") is None  # older than the table: no judgement
    assert wheel_of("2.8.0a0+gitabc", "12.9") is not None  # source build: its CUDA decides


def test_advice_for_hopper_keeps_the_default_index() -> None:
    a = advise([(90, "NVIDIA H100")])
    assert (a.command, a.reason) == (f"pip install torch --index-url {IDX}cu128", "")


def test_advice_for_a_gpu_no_wheel_serves_is_honest() -> None:
    a = advise([(37, "Tesla K80")])
    assert a.command == f"pip install 'torch==2.7.*' --index-url {IDX}cu118"
    assert "torch 2.7 is the newest release whose cu118 wheels do" in a.reason
    none = advise([(30, "GeForce GTX 680")])
    assert none.command is None
    assert none.reason.startswith("no PyTorch CUDA wheel from 2.7 to 2.14 has kernels for")


@pytest.mark.parametrize(
    ("arch", "status", "index", "pin"),
    [
        ("sm_90", "default", "cu128", None),
        ("sm_60", "index", "cu126", None),  # Pascal: the cu126 index, not cu128
        ("6.1", "index", "cu126", None),
        ("sm_37", "older", "cu118", "2.7"),  # Tesla K80: torch 2.7's cu118 wheels
        ("sm_35", "none", None, None),
        ("sm_30", "none", None, None),
        ("sm_20", "none", None, None),
    ],
)
def test_one_device_answer(arch: str, status: str, index: str | None, pin: str | None) -> None:
    a = wheel_for(arch)
    assert (a.status, a.index, a.release) == (status, index, pin)
    assert (a.command is None) == (status == "none")
    if status == "none":  # below Maxwell: no toolkit current torch builds with can build it
        assert a.reason.startswith("no PyTorch CUDA wheel from 2.7 to 2.14 has kernels for")
        assert "build torch from source" not in a.reason and "cu128" not in a.reason


def test_fermi_was_never_in_a_pytorch_wheel() -> None:
    a = wheel_for("sm_20")
    assert "no PyTorch wheel ever had kernels for it" in a.reason
    assert "torch 0.2.0" in a.source  # PyTorch's oldest binary build script
    assert "no PyTorch wheel ever" not in wheel_for("sm_30").reason  # 0.x builds had sm_30
    assert wheel_for("gfx90a").status == "none"  # not a compute capability


# -- hosts ------------------------------------------------------------------------------------

P100_HINT = (
    f"pip install torch --index-url {IDX}cu126 (PyTorch's cu128 wheels have no kernels for "
    "NVIDIA Tesla P100 PCIe 16GB (sm_60, Pascal) (torch 2.11, the newest on that index, is "
    "built for compute capability 7.5, 8.0, 8.6, 9.0, 10.0, 12.0); torch 2.14's cu126 wheels "
    "have them)"
)


def test_p100_host_gets_the_cu126_hint_with_its_reason(select: Select) -> None:
    r = select("p100-pci-only-no-torch")
    cuda = r.status("cuda")
    assert cuda.reason == (
        "2 NVIDIA GPU(s) (2× NVIDIA Tesla P100 PCIe 16GB) found, but torch is not installed"
    )
    assert cuda.probe is not None and cuda.probe.hint == P100_HINT
    assert any("For Release 2.12, 2.13 and 2.14" in e for e in cuda.probe.evidence)
    devs = CudaBackend().devices(r.host, {})
    assert [(d.name, d.arch) for d in devs] == [("NVIDIA Tesla P100 PCIe 16GB", "sm_60")] * 2
    # quantization and attention answers now know the arch (they said "unknown" before)
    caps = CudaBackend().capabilities(devs[0], host=r.host)
    assert caps.arch == "sm_60"
    assert caps.training_precision == "fp16"
    assert "bfloat16" not in caps.dtypes
    assert caps.quant("fp8").status == "partial"  # dequantized below 8.9, no longer "unknown"
    assert caps.quant("fbgemm_fp8").status == "unsupported"
    assert caps.quant("mxfp4").status == "partial"
    assert "flash_attention_2" not in [a.name for a in caps.attention]
    assert "Pascal" in caps.sources["dtypes"]


def test_three_m2070_get_no_cu128_fix(select: Select) -> None:
    r = select("m2070-3-fermi-no-torch")
    cuda = r.status("cuda")
    assert cuda.reason == (
        "3 NVIDIA GPU(s) (3× NVIDIA Tesla M2070) found, but torch is not installed"
    )
    hint = cuda.probe.hint if cuda.probe is not None else None
    assert hint is not None and "cu128" not in hint and "pip install" not in hint
    assert hint.startswith(
        "no PyTorch CUDA wheel from 2.7 to 2.14 has kernels for NVIDIA Tesla M2070 (sm_20, Fermi)"
    )
    assert "no PyTorch wheel ever had kernels for it" in hint
    devs = CudaBackend().devices(r.host, {})
    assert [(d.name, d.arch) for d in devs] == [("NVIDIA Tesla M2070", "sm_20")] * 3


def test_gtx_1080_ti_with_the_cu128_wheel_is_told_why_and_what(select: Select) -> None:
    r = select("gtx1080ti-torch28-cu128")
    cuda = r.status("cuda")
    assert cuda.state == "unavailable"
    assert cuda.reason == (
        "1 NVIDIA GPU(s) (NVIDIA GeForce GTX 1080 Ti) found, but the installed torch "
        "2.8.0+cu128 has no kernels for NVIDIA GeForce GTX 1080 Ti (sm_61, Pascal): PyTorch "
        "builds its cu128 wheels of torch 2.8 for compute capability 7.0, 7.5, 8.0, 8.6, 9.0, "
        "10.0, 12.0 only"
    )
    assert cuda.probe is not None and cuda.probe.hint == (
        f"pip install 'torch==2.8.*' --index-url {IDX}cu126 (torch 2.8's cu126 wheels have "
        "kernels for NVIDIA GeForce GTX 1080 Ti (sm_61, Pascal))"
    )
    assert r.chosen == "cpu"


def test_maxwell_from_its_device_id_with_cpu_torch(select: Select) -> None:
    r = select("m60-pci-only-cpu-torch")
    cuda = r.status("cuda")
    assert cuda.reason == (
        "1 NVIDIA GPU(s) (NVIDIA Tesla M60) found, but the installed torch 2.8.0+cpu is a cpu "
        "build, not a cuda build"
    )
    assert cuda.probe is not None and cuda.probe.hint is not None
    assert cuda.probe.hint.startswith(f"pip install torch --index-url {IDX}cu126 (PyTorch's ")
    assert "NVIDIA Tesla M60 (sm_52, Maxwell)" in cuda.probe.hint
    assert cuda.probe.hint.endswith("(replaces the cpu build)")


def test_volta_under_torch_2_11_cu128(select: Select) -> None:
    r = select("v100-torch211-cu128")
    cuda = r.status("cuda")
    assert cuda.reason == (
        "1 NVIDIA GPU(s) (Tesla V100-SXM2-16GB) found, but the installed torch 2.11.0+cu128 has "
        "no kernels for Tesla V100-SXM2-16GB (sm_70, Volta): PyTorch builds its cu128 wheels of "
        "torch 2.11 for compute capability 7.5, 8.0, 8.6, 9.0, 10.0, 12.0 only"
    )
    assert cuda.probe is not None and cuda.probe.hint == (
        f"pip install 'torch==2.11.*' --index-url {IDX}cu126 (torch 2.11's cu126 wheels have "
        "kernels for Tesla V100-SXM2-16GB (sm_70, Volta))"
    )


def test_volta_under_torch_2_10_cu128_is_ready(load_host: Callable[[str], Host]) -> None:
    host = load_host("v100-torch211-cu128")
    d = host.to_dict()
    d["torch"] = {"version": "2.10.0+cu128", "cuda": "12.8", "hip": None}
    d["packages"] = {"torch": "2.10.0+cu128"}
    p = CudaBackend().probe(Host.from_dict(d))
    assert p.available, p.reason


# -- fake sysfs roots -------------------------------------------------------------------------


def _site(tmp: Path, version: str | None) -> list[str]:
    site = tmp / "site"
    site.mkdir(parents=True, exist_ok=True)
    if version is not None:
        _write(site / "torch/version.py", f"__version__ = '{version}'\ncuda = '12.8'\nhip = None\n")
        _write(site / f"torch-{version.split('+')[0]}.dist-info/METADATA", f"Version: {version}\n")
    return [str(site)]


def test_sysfs_p100_without_driver_files_has_arch_and_cu126_hint(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _x86_64(root)
    _function(root, "0000:04:00.0", "0x10de", "0x15f8", "0x030200")
    _write(root / "dev/nvidia0", "")
    host = Host.from_system(str(root), path=_site(tmp_path, None), system="Linux")
    [gpu] = host.devices_of("nvidia")
    assert gpu.pci_device_id == "0x15f8" and gpu.name is None
    b = CudaBackend()
    assert [(d.name, d.arch) for d in b.devices(host, {})] == [
        ("NVIDIA Tesla P100 PCIe 16GB", "sm_60")
    ]
    p = b.probe(host)
    assert p.hint is not None and p.hint.startswith(f"pip install torch --index-url {IDX}cu126")


def test_the_wheel_advice_is_for_the_trees_own_cpu(tmp_path: Path) -> None:
    """A tree's CPU decides the advice: a POWER9 gets no cuXXX index (PyTorch has no CUDA
    wheel for ppc64le), a tree that shows no CPU gets the advice with what it assumed."""
    root = tmp_path / "root"
    _function(root, "0000:04:00.0", "0x10de", "0x15f8", "0x030200")
    _write(root / "dev/nvidia0", "")
    b = CudaBackend()
    hint = b.probe(Host.from_system(str(root), path=_site(tmp_path, None))).hint or ""
    assert hint.startswith("if this machine is x86_64 (its CPU architecture is not known): ")
    assert f"--index-url {IDX}cu126" in hint
    _write(root / "proc/cpuinfo", "processor\t: 0\ncpu\t\t: POWER9, altivec supported\n")
    host = Host.from_system(str(root), path=_site(tmp_path, None))
    hint = b.probe(host).hint or ""
    assert host.machine == "ppc64le" and "PyTorch publishes no CUDA wheels for ppc64le" in hint
    assert "--index-url" not in hint


def test_sysfs_gtx_1080_ti_and_its_hdmi_audio_function(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _x86_64(root)
    _function(root, "0000:01:00.0", "0x10de", "0x1b06", "0x030000")
    _function(root, "0000:01:00.1", "0x10de", "0x10ef", "0x040300")  # GP102 HDMI audio
    _write(root / "dev/nvidia0", "")
    _write(root / "proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel "
           "Module  570.172.08  Tue Jul  8 18:44:13 UTC 2025\n")  # fmt: skip
    host = Host.from_system(str(root), path=_site(tmp_path, "2.8.0+cu128"), system="Linux")
    assert [d.pci_bus_id for d in host.devices] == ["0000:01:00.0"]  # the audio is no GPU
    p = CudaBackend().probe(host)
    assert not p.software_ready
    assert "has no kernels for NVIDIA GeForce GTX 1080 Ti (sm_61, Pascal)" in p.reason
    assert p.hint is not None and p.hint.startswith(
        f"pip install 'torch==2.8.*' --index-url {IDX}cu126"
    )


def test_sysfs_maxwell_card(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _function(root, "0000:02:00.0", "0x10de", "0x1401", "0x030000")  # GM206 GeForce GTX 960
    host = Host.from_system(str(root), path=_site(tmp_path, "2.8.0+cu128"), system="Linux")
    [dev] = CudaBackend().devices(host, {})
    assert (dev.name, dev.arch) == ("NVIDIA GeForce GTX 960", "sm_52")


def test_sysfs_v100_under_torch_2_11_cu128(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _x86_64(root)
    _function(root, "0000:00:1e.0", "0x10de", "0x1db1", "0x030200")  # Tesla V100 SXM2 16GB
    _write(root / "dev/nvidia0", "")
    info = "Model: \t\t Tesla V100-SXM2-16GB\nBus Location: \t 0000:00:1e.0\n"
    _write(root / "proc/driver/nvidia/gpus/0000:00:1e.0/information", info)
    host = Host.from_system(str(root), path=_site(tmp_path, "2.11.0+cu128"), system="Linux")
    p = CudaBackend().probe(host)
    assert not p.software_ready
    assert "has no kernels for Tesla V100-SXM2-16GB (sm_70, Volta)" in p.reason
    assert p.hint == (
        f"pip install 'torch==2.11.*' --index-url {IDX}cu126 (torch 2.11's cu126 wheels have "
        "kernels for Tesla V100-SXM2-16GB (sm_70, Volta))"
    )


# -- laws -------------------------------------------------------------------------------------

_CAPS = sorted({row.capability for row in SM.values()})


@given(st.lists(st.sampled_from(_CAPS), min_size=1, max_size=4), st.sampled_from([None, *RELEASES]))
def test_advice_always_runs_on_every_gpu(caps: list[int], line: str | None) -> None:
    """Whatever the GPUs and the installed release, an advised wheel has kernels for all."""
    a = advise([(c, f"gpu{c}") for c in caps], line=line)
    if a.wheel is not None:
        assert all(runs_on(a.wheel, c) for c in caps)
        assert (a.torch_pin is None) == ("torch==" not in (a.command or ""))
    else:
        assert a.reason.startswith("no PyTorch CUDA wheel")


@given(st.sampled_from(WHEELS), st.sampled_from(_CAPS), st.integers(0, 9))
def test_binary_compatibility_is_monotone_within_a_major(w: object, cap: int, up: int) -> None:
    """A cubin for X.y runs on X.z for z >= y (CUDA Programming Guide, Binary Compatibility)."""
    newer = cap // 10 * 10 + min(9, cap % 10 + up)
    if runs_on(w, cap):  # type: ignore[arg-type]
        assert runs_on(w, newer)  # type: ignore[arg-type]


@given(st.one_of(st.text(max_size=40), st.integers(-5, 1 << 20), st.none()))
def test_device_id_lookup_never_raises(did: object) -> None:
    out = arch_for_device_id(did)  # type: ignore[arg-type]
    assert out is None or out[0] in SM


def test_the_matrix_is_not_applied_to_aarch64_hosts(load_host: Callable[[str], Host]) -> None:
    # PyTorch's aarch64 CUDA wheels have their own, shorter arch lists (RELEASE.md): not judged
    d = load_host("gtx1080ti-torch28-cu128").to_dict()
    d["machine"] = "aarch64"
    p = CudaBackend().probe(Host.from_dict(d))
    assert p.available, p.reason


# -- the loaded driver: a wheel's CUDA needs a driver new enough (minor version compatibility)


@given(st.sampled_from(WHEELS), st.tuples(st.integers(300, 700), st.integers(0, 200)))
def test_a_wheel_runs_on_a_driver_exactly_from_its_cuda_majors_minimum(
    wheel: Wheel, driver: tuple[int, int]
) -> None:
    need = MIN_DRIVER[int(wheel.cuda.partition(".")[0])]
    assert driver_runs(wheel, driver) is (driver >= need)
    assert driver_runs(wheel, None)  # unknown: never ruled out


def test_a_driver_too_old_for_cuda_12_is_sent_to_the_last_cuda_11_wheels() -> None:
    a = advise([(75, "Tesla T4")], default_index="cu126", driver=(515, 105, 1))
    assert (a.wheel and a.wheel.index, a.torch_pin) == ("cu118", "2.7")
    assert "515.105.01 is too old for the CUDA 12.6" in a.reason
    assert "update the NVIDIA driver to 525.60.13 or newer" in a.reason
    # a driver new enough changes nothing: the default index, no reason
    ok = advise([(75, "Tesla T4")], default_index="cu126", driver=(525, 60, 13))
    assert (ok.wheel and ok.wheel.index, ok.reason) == ("cu126", "")


def test_a_driver_too_old_for_every_wheel_says_update_it_first() -> None:
    a = advise([(61, "Quadro P400")], default_index="cu126", driver=(418, 43))
    assert a.reason.endswith("update the NVIDIA driver to 525.60.13 or newer first")
    assert "no CUDA wheel from 2.7 to" in a.reason


def test_an_installed_cuda_12_torch_on_a_cuda_11_driver_is_not_ready(
    load_host: Callable[[str], Host],
) -> None:
    d = load_host("v100-torch211-cu128").to_dict()
    d["torch"] = {"version": "2.10.0+cu128", "cuda": "12.8", "hip": None}
    d["packages"] = {"torch": "2.10.0+cu128"}
    d["drivers"] = {"nvidia": "515.105.01"}
    p = CudaBackend().probe(Host.from_dict(d))
    assert not p.available
    assert "driver 515.105.01 is too old for torch's CUDA 12.8 (needs >= 525.60.13)" in p.reason
    assert p.hint and "cu118" in p.hint, p.hint
    d["drivers"] = {"nvidia": "535.54.03"}
    assert CudaBackend().probe(Host.from_dict(d)).available
