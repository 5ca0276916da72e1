"""The rocm backend on simulated machines, through the real selection (rocm + cuda + cpu)."""

from __future__ import annotations

from collections.abc import Callable

from hwbackends_rocm import RocmBackend

import hwbackends
from hwbackends import Host, SelectionReport

Choose = Callable[..., SelectionReport]
AITER = "kernels-community/aiter-flash-attn"
ROCM64 = "pip install torch --index-url https://download.pytorch.org/whl/rocm6.4"
CU128 = "pip install torch --index-url https://download.pytorch.org/whl/cu128"


def caps(r: SelectionReport, i: int = 0) -> hwbackends.Capabilities:
    return RocmBackend().capabilities(r.devices[i], host=r.host)


def test_mi300x_box(choose: Choose) -> None:
    r = choose("mi300x-8")
    assert (r.chosen, r.device_type) == ("rocm", "cuda")
    assert r.status("rocm").reason == (
        "ROCm ready: 8 AMD GPU(s) (8× gfx942 (Instinct MI300X/MI300A/MI325X)), torch 2.8.0+rocm6.4"
    )
    assert r.status("cuda").reason == "no NVIDIA GPU found"
    assert [d.torch_device for d in r.devices] == [f"cuda:{i}" for i in range(8)]
    assert r.devices[0].name == "AMD Instinct MI300X/MI300A/MI325X"
    assert r.devices[0].arch == "gfx942"
    assert r.devices[5].uuid == "GPU-1a2b3c4d5e6f7085"

    c = caps(r)
    assert c.device_type == "cuda" and c.kernel_device == "rocm"
    assert c.training_precision == "bf16" and c.load_dtype == "bfloat16"
    assert c.dtypes[-2:] == ("float8_e4m3fnuz", "float8_e5m2fnuz")
    assert [(a.name, a.hub_kernel) for a in c.attention] == [
        ("flash_attention_2", AITER),
        ("flash_attention_3", AITER),
        ("sdpa", None),
        ("eager", None),
    ]
    log = f"You do not have `flash_attn` installed, using `{AITER}` from the `kernels` library"
    assert log in c.attention[0].note
    assert "flash_attention_4" in c.sources["attention"]  # its hub kernel is CUDA-only
    assert c.distributed_backend == "nccl"
    assert set(c.kernel_layers) == {"MegaBlocksMoeMLP", "RMSNorm", "rotary_pos_emb"}
    codecarbon = [lim for lim in c.limitations if lim.report_to_exclude]
    assert [lim.report_to_exclude for lim in codecarbon] == [("codecarbon",)]
    status = {q.method: q.status for q in c.quantization}
    assert {m: status[m] for m in ("awq", "gptq", "compressed_tensors", "quark")} == dict.fromkeys(
        ("awq", "gptq", "compressed_tensors", "quark"), "supported"
    )
    assert status["bitsandbytes"] == "partial"
    assert {status[m] for m in ("eetq", "higgs", "spqr", "nvfp4", "fp_quant")} == {"unsupported"}
    assert status["fp8"] == "partial" and "FNUZ" in c.quant("fp8").reason
    assert c.quant("mxfp4").packages == ("pytorch-triton-rocm", "kernels", "accelerate")


def test_rocr_then_hip_visibility(choose: Choose) -> None:
    r = choose("mi300x-8", ROCR_VISIBLE_DEVICES="2,3", HIP_VISIBLE_DEVICES="1")
    assert [(d.index, d.physical_index) for d in r.devices] == [(0, 3)]
    none = choose("mi300x-8", ROCR_VISIBLE_DEVICES="")
    assert none.chosen == "cpu"
    assert none.status("rocm").state == "unavailable"
    assert any("hide every device" in w for w in none.warnings)


def test_mi210_with_the_rocm_flash_attn_package(choose: Choose) -> None:
    r = choose("mi210-2")
    assert r.chosen == "rocm"
    c = caps(r)
    assert c.arch == "gfx90a" and c.training_precision == "bf16"
    assert not any(d.startswith("float8") for d in c.dtypes)
    # The ROCm build of flash-attn serves FA2; aiter (FA2/FA3 fallback) is for MI300+ only.
    assert [(a.name, a.packages) for a in c.attention] == [
        ("flash_attention_2", ("flash-attn",)),
        ("sdpa", ()),
        ("eager", ()),
    ]
    assert "composable_kernel" in c.attention[0].note
    assert c.quant("fp8").status == "unsupported"
    assert "dequantize=True" in c.quant("fp8").reason
    assert c.quant("compressed_tensors").status == "partial"


def test_strix_halo_laptop(choose: Choose) -> None:
    r = choose("strix-halo")
    assert r.chosen == "rocm"
    assert r.status("rocm").reason.startswith(
        "ROCm ready: 1 AMD GPU(s) (gfx1151 (Ryzen AI Max 300 (Strix Halo)"
    )
    (dev,) = r.devices
    assert (dev.torch_device, dev.arch) == ("cuda:0", "gfx1151")
    c = caps(r)
    assert c.training_precision == "bf16"
    assert [a.name for a in c.attention] == ["sdpa", "eager"]
    # The installed transformers maps this layer for rocm capability 115 (gfx1151) only.
    assert "Qwen3_5GatedDeltaNet" in c.kernel_layers


def test_amd_gpu_with_cuda_torch(choose: Choose) -> None:
    r = choose("amd-cuda-torch")
    assert (r.chosen, r.rule) == ("cpu", "cpu-fallback")
    rocm = r.status("rocm")
    assert rocm.reason == (
        "1 AMD GPU(s) (gfx1100 (Radeon RX 7900 XTX/XT, PRO W7900/W7800)) found, but the "
        "installed torch 2.8.0+cu128 is a cuda build, not a rocm build"
    )
    assert rocm.probe is not None and rocm.probe.hint == f"{ROCM64} (replaces the cuda build)"
    assert r.status("cuda").reason == (
        "no NVIDIA GPU found; the GPU(s) here are AMD but the installed torch is a CUDA build "
        "(the rocm backend says how to fix it)"
    )
    assert r.warnings == (f"rocm: {rocm.reason}. Fix: {ROCM64} (replaces the cuda build)",)


def test_nvidia_gpu_with_rocm_torch() -> None:
    host = Host.from_dict(
        {
            "torch": {"version": "2.8.0+rocm6.4", "hip": "6.4.43482"},
            "devices": [{"vendor": "nvidia", "name": "NVIDIA L4", "pci_bus_id": "0000:00:03.0"}],
            "drivers": {"nvidia": "550.90.07"},
            "device_nodes": ["/dev/nvidia0"],
        }
    )
    r = hwbackends.explain(env={}, host=host)
    assert r.chosen == "cpu"
    cuda = r.status("cuda")
    assert cuda.reason.endswith(
        "the installed torch 2.8.0+rocm6.4 is a rocm build, not a cuda build"
    )
    assert cuda.probe is not None and cuda.probe.hint == f"{CU128} (replaces the rocm build)"
    assert r.status("rocm").reason == (
        "no AMD GPU found; the NVIDIA GPU(s) here belong to the cuda backend but the installed "
        "torch is a ROCm build"
    )


def test_radeon_beside_an_unsupported_igpu(choose: Choose) -> None:
    r = choose("radeon-with-igpu")
    assert r.chosen == "rocm"
    reason = r.status("rocm").reason
    assert "ROCm also enumerates the integrated GPU gfx1036" in reason
    assert reason.endswith("hide it with ROCR_VISIBLE_DEVICES=0 HIP_VISIBLE_DEVICES=0")
    # Physically ROCm still numbers the iGPU: cuda:1 is the iGPU until it is hidden.
    assert [d.arch for d in r.devices] == ["gfx1100", "gfx1036"]
    assert caps(r, 1).training_precision == "fp16"
    hidden = choose("radeon-with-igpu", ROCR_VISIBLE_DEVICES="0")
    assert [d.arch for d in hidden.devices] == ["gfx1100"]


def test_hybrid_laptop_with_rocm_torch(choose: Choose) -> None:
    r = choose("hybrid-laptop-rocm-torch")
    assert r.chosen == "rocm"
    assert r.status("rocm").reason.endswith(
        "; the NVIDIA GPU(s) are not used: torch is a ROCm build"
    )
    cuda = r.status("cuda")
    assert cuda.probe is not None and cuda.probe.hardware_present
    assert "is a rocm build, not a cuda build" in cuda.reason
    assert [d.arch for d in r.devices] == ["gfx1150"]
    assert r.devices[0].physical_index == 0  # the first AMD device, whatever NVIDIA holds


def test_gpu_without_kfd_and_without_driver(choose: Choose) -> None:
    r = choose("amd-no-kfd")
    rocm = r.status("rocm")
    assert r.chosen == "cpu"
    assert rocm.reason.endswith("but /dev/kfd (ROCm's compute interface) is missing")
    assert "--device=/dev/kfd" in (rocm.probe.hint if rocm.probe else "")

    r = choose("amd-no-driver")
    rocm = r.status("rocm")
    assert rocm.probe is not None and rocm.probe.hardware_present
    assert "the amdgpu kernel driver is not loaded" in rocm.reason
    assert "amdgpu-install" in (rocm.probe.hint or "")


def test_driver_without_gpu() -> None:
    host = Host.from_dict(
        {"torch": {"version": "2.8.0+rocm6.4", "hip": "6.4"}, "device_nodes": ["/dev/kfd"]}
    )
    p = RocmBackend().probe(host)
    assert not p.hardware_present
    assert p.reason == "the amdgpu driver (/dev/kfd) is present but no AMD GPU is on the PCI bus"


def test_mi350_needs_rocm_7() -> None:
    host = Host.from_dict(
        {
            "torch": {"version": "2.8.0+rocm6.4", "hip": "6.4.43482"},
            "devices": [{"vendor": "amd", "arch": "gfx950", "pci_bus_id": "0000:05:00.0"}],
        }
    )
    p = RocmBackend().probe(host)
    assert not p.available
    assert "torch's HIP 6.4.43482 predates ROCm 7.0" in p.reason


def test_explain_and_capabilities_without_device(rocm_host: Callable[[str], Host]) -> None:
    hwbackends.reset()
    try:
        r = hwbackends.explain(env={}, host=rocm_host("mi300x-8"))
        assert r.chosen == "rocm" and r.status("rocm").origin == "hwbackends-rocm"
    finally:
        hwbackends.reset()
    assert RocmBackend().capabilities(host=rocm_host("radeon-with-igpu")).arch == "gfx1100"
    bare = RocmBackend().capabilities()
    assert bare.arch is None and bare.training_precision == "fp16"
    assert bare.quant("awq").status == "supported"
    assert bare.quant("fp8").status == "unknown"
