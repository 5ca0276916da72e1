"""The cuda backend on simulated machines, through the real selection (cuda + rocm + cpu)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hwbackends_cuda import CudaBackend
from hwbackends_rocm import RocmBackend

import hwbackends
from hwbackends import SelectionReport
from hwbackends.facts import version_in_range
from hwbackends.testing import make_registry

Select = Callable[..., SelectionReport]
FA_LOG = "You do not have `flash_attn` installed, using `{}` from the `kernels` library instead!"
CU128 = "pip install torch --index-url https://download.pytorch.org/whl/cu128"


def caps_of(r: SelectionReport, i: int = 0) -> hwbackends.Capabilities:
    return CudaBackend().capabilities(r.devices[i], host=r.host)


def on_this_stack(name: str) -> hwbackends.Host:
    """A host file with this environment's Transformers and kernels, so that its tables are
    read from the installed files (any release the core allows, not only the pinned one)."""
    from importlib.metadata import version

    installed = version("transformers")
    assert version_in_range(installed, "5.0", "5.23"), installed  # pyproject's range
    d = hwbackends.Host.from_file(Path(__file__).parent / "hosts" / f"{name}.json").to_dict()
    d["packages"] = {**d["packages"], "transformers": installed, "kernels": version("kernels")}
    return hwbackends.Host.from_dict(d)


def test_h100_box_selects_cuda_with_hopper_facts() -> None:
    # The attention notes quote the installed transformers: expected values come from its own
    # fallback table, not from a copy pinned to one release.
    from transformers import __version__ as transformers_version
    from transformers.modeling_flash_attention_utils import FLASH_ATTN_KERNEL_FALLBACK as FALLBACK

    r = make_registry(CudaBackend, RocmBackend).select({}, on_this_stack("h100-sxm-8"))
    assert (r.chosen, r.device_type, r.rule) == ("cuda", "cuda", "priority")
    cuda = r.status("cuda")
    assert cuda.reason == (
        "CUDA ready: 8 NVIDIA GPU(s) (8× NVIDIA H100 80GB HBM3) [sm_90], driver 570.133.20, "
        "torch 2.8.0+cu128"
    )
    assert [d.torch_device for d in r.devices] == [f"cuda:{i}" for i in range(8)]
    assert {d.arch for d in r.devices} == {"sm_90"}
    assert r.devices[3].pci_bus_id == "0000:5d:00.0"
    assert r.warnings == ()

    caps = caps_of(r)
    assert caps.training_precision == "bf16"
    assert caps.dtypes == ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
    # flash-attn (FA2) is installed, so it comes first; FA3 and FA4 come from the Hub through
    # the fallback table of the installed transformers (this process is not on ROCm, so the
    # table holds its CUDA branch).
    names = [(a.name, a.hub_kernel) for a in caps.attention]
    assert names == [
        ("flash_attention_2", None),
        ("flash_attention_3", FALLBACK["flash_attention_3"]),
        ("flash_attention_4", FALLBACK["flash_attention_4"]),
        ("sdpa", None),
        ("eager", None),
    ]
    fa3 = caps.attention[1]
    assert FA_LOG.format(FALLBACK["flash_attention_3"]) in fa3.note
    assert f"read at run time from the installed transformers {transformers_version}" in fa3.source
    assert caps.attention[0].packages == ("flash-attn",)
    assert caps.distributed_backend == "nccl"
    assert caps.kernel_device == "cuda"
    assert {"RMSNorm", "SwiGLUMLP", "rotary_pos_emb"} <= set(caps.kernel_layers)
    assert "Qwen3_5GatedDeltaNet" not in caps.kernel_layers  # only for sm_121
    assert caps.quant("fp8").status == "supported"
    assert caps.quant("fbgemm_fp8").status == "supported"
    assert caps.quant("nvfp4").status == "unsupported"
    assert caps.quant("gptq").packages == ("optimum", "gptqmodel")
    assert caps.quant("compressed-tensors").status == "supported"
    assert any("prefill" in lim.text for lim in caps.limitations)


def test_visible_devices_pick_physical_gpus(select: Select) -> None:
    r = select("h100-sxm-8", {"CUDA_VISIBLE_DEVICES": "3,1"})
    assert [(d.index, d.physical_index) for d in r.devices] == [(0, 3), (1, 1)]
    assert CudaBackend().visibility_env([3, 1], host=r.host)["CUDA_VISIBLE_DEVICES"] == "3,1"


def test_mixed_generations_follow_fastest_first(select: Select) -> None:
    r = select("mixed-4-fastest-first")
    # The host's FASTEST_FIRST permutation puts the two RTX 4090 (physical 1 and 3) first.
    assert [d.physical_index for d in r.devices] == [1, 3, 0, 2]
    assert [d.arch for d in r.devices] == ["sm_89", "sm_89", "sm_86", "sm_86"]
    assert any("CUDA_DEVICE_ORDER" in w for w in r.warnings)
    ada, ampere = caps_of(r, 0), caps_of(r, 2)
    assert "float8_e4m3fn" in ada.dtypes and "float8_e4m3fn" not in ampere.dtypes
    assert ada.quant("fp8").status == "supported"
    assert ampere.quant("fp8").status == "partial"
    assert "dequantizes" in ampere.quant("fp8").reason
    # No flash-attn package: FA2 comes from the hub on both; FA3/FA4 are not for Ada/Ampere.
    assert [a.name for a in ampere.attention] == ["flash_attention_2", "sdpa", "eager"]
    assert ampere.attention[0].hub_kernel == "kernels-community/flash-attn2"
    assert "flash_attention_3" in ampere.sources["attention"]

    pci = select("mixed-4-fastest-first", {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert [d.physical_index for d in pci.devices] == [0, 1, 2, 3]
    assert not any("CUDA_DEVICE_ORDER" in w for w in pci.warnings)


def test_mixed_generations_without_known_order_warn(select: Select) -> None:
    r = select("mixed-4-unknown-order")
    assert r.chosen == "cuda"
    assert [d.physical_index for d in r.devices] == [0, 1, 2, 3]
    assert any("CUDA_DEVICE_ORDER=PCI_BUS_ID" in w for w in r.warnings)


def test_a100_mig_instances_are_devices(select: Select) -> None:
    r = select("a100-mig")
    assert r.chosen == "cuda"
    migs = [d for d in r.devices if d.sub_index is not None]
    assert [d.uuid for d in migs] == [
        "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f",
        "MIG-7d1a2244-9e1b-5c2d-8a4f-0b6c1d2e3f40",
    ]
    assert migs[0].name == "NVIDIA A100-SXM4-40GB MIG 3g.20gb"
    assert migs[0].memory_bytes == 20937965568
    whole = [d for d in r.devices if d.sub_index is None]
    assert [d.uuid for d in whole] == ["GPU-121d0a4e-2b3c-4d5e-6f70-8192a3b4c5d6"]
    caps = caps_of(r, 0)
    assert caps.arch == "sm_80" and caps.training_precision == "bf16"
    assert any("MIG instance" in lim.text for lim in caps.limitations)
    assert not any("MIG" in lim.text for lim in CudaBackend().capabilities(whole[0]).limitations)

    one = select("a100-mig", {"CUDA_VISIBLE_DEVICES": "MIG-7d1a"})
    assert [d.uuid for d in one.devices] == ["MIG-7d1a2244-9e1b-5c2d-8a4f-0b6c1d2e3f40"]


def test_v100_trains_in_fp16_without_flash_attention(select: Select) -> None:
    r = select("v100-4")
    assert r.chosen == "cuda"
    caps = caps_of(r)
    assert caps.arch == "sm_70"
    assert caps.training_precision == "fp16"
    assert "bfloat16" not in caps.dtypes
    # flash-attn is installed but FlashAttention-2 needs Ampere: only sdpa and eager remain.
    assert [a.name for a in caps.attention] == ["sdpa", "eager"]
    why = "flash-attn not for this arch and kernels-community/flash-attn2 does not support sm_70"
    assert f"flash_attention_2: {why}" in caps.sources["attention"]
    assert caps.quant("mxfp4").status == "partial"
    assert caps.quant("fbgemm_fp8").status == "unsupported"


def test_nvidia_gpu_with_cpu_torch_is_a_diagnosis(select: Select) -> None:
    r = select("nvidia-cpu-torch")
    assert (r.chosen, r.rule) == ("cpu", "cpu-fallback")
    cuda = r.status("cuda")
    assert cuda.state == "unavailable"
    assert cuda.probe is not None and cuda.probe.hardware_present
    assert cuda.reason == (
        "1 NVIDIA GPU(s) (NVIDIA L4) found, but the installed torch 2.8.0+cpu is a cpu build, "
        "not a cuda build"
    )
    assert cuda.probe.hint == f"{CU128} (replaces the cpu build)"
    assert r.warnings == (f"cuda: {cuda.reason}. Fix: {CU128} (replaces the cpu build)",)


def test_gpu_without_driver(select: Select) -> None:
    r = select("nvidia-no-driver")
    cuda = r.status("cuda")
    assert r.chosen == "cpu" and cuda.probe is not None
    assert (cuda.probe.hardware_present, cuda.probe.software_ready) == (True, False)
    assert "the NVIDIA kernel driver is not loaded" in cuda.reason
    assert "nvidia-smi" in (cuda.probe.hint or "")


def test_driver_without_gpu(select: Select) -> None:
    r = select("nvidia-driver-no-gpu")
    cuda = r.status("cuda")
    assert r.chosen == "cpu" and cuda.probe is not None
    assert not cuda.probe.hardware_present
    assert cuda.reason == (
        "the NVIDIA driver is loaded (driver 570.133.20) but no NVIDIA GPU is on the PCI bus"
    )
    assert "--gpus all" in (cuda.probe.hint or "")


def test_old_driver_for_torch_cuda_is_named() -> None:
    host = hwbackends.Host.from_dict(
        {
            "torch": {"version": "2.8.0+cu128", "cuda": "12.8"},
            "devices": [{"vendor": "nvidia", "name": "Tesla T4", "pci_bus_id": "0000:00:04.0"}],
            "drivers": {"nvidia": "470.256.02"},
        }
    )
    p = CudaBackend().probe(host)
    assert not p.available
    assert "driver 470.256.02 is too old for torch's CUDA 12.8 (needs >= 525.60.13)" in p.reason


def test_blackwell_needs_a_cuda_12_8_build() -> None:
    host = hwbackends.Host.from_dict(
        {
            "torch": {"version": "2.6.0+cu124", "cuda": "12.4"},
            "devices": [{"vendor": "nvidia", "name": "NVIDIA GeForce RTX 5090"}],
            "drivers": {"nvidia": "575.51.02"},
        }
    )
    p = CudaBackend().probe(host)
    assert not p.available
    assert "torch's CUDA 12.4 cannot build for sm_120 (Blackwell); it needs CUDA >= 12.8" in (
        p.reason
    )
    assert p.hint == CU128


def test_hybrid_laptop_uses_the_gpu_the_torch_build_serves(select: Select) -> None:
    r = select("hybrid-laptop-cuda-torch")
    assert r.chosen == "cuda"
    assert r.status("cuda").reason.endswith("; the AMD GPU(s) are not used: torch is a CUDA build")
    rocm = r.status("rocm")
    assert rocm.probe is not None and not rocm.probe.hardware_present
    assert rocm.reason.startswith("only an integrated AMD GPU that ROCm does not support (gfx1103")
    assert r.warnings == ()  # nothing to fix: the machine is used as it should be
    assert [d.name for d in r.devices] == ["NVIDIA GeForce RTX 4070 Laptop GPU"]
    assert r.devices[0].arch == "sm_89"


def test_explain_with_installed_entry_points(load_host: Callable[[str], hwbackends.Host]) -> None:
    hwbackends.reset()
    try:
        r = hwbackends.explain(env={}, host=load_host("h100-sxm-8"))
        assert r.chosen == "cuda"
        st = r.status("cuda")
        assert (st.origin, st.target) == ("hwbackends-cuda", "hwbackends_cuda:CudaBackend")
        assert r.status("rocm").state == "unavailable"
        b = hwbackends.get("cuda")  # a guarded view of the plugin's CudaBackend
        assert (
            isinstance(b, hwbackends.Backend)
            and b.name == "cuda"
            and b.priority == CudaBackend.priority
        )
    finally:
        hwbackends.reset()


def test_capabilities_without_a_device_use_the_first_gpu(
    load_host: Callable[[str], hwbackends.Host],
) -> None:
    host = load_host("h100-sxm-8")
    caps = CudaBackend().capabilities(host=host)
    assert caps.arch == "sm_90"
    bare = CudaBackend().capabilities()
    assert bare.arch is None
    assert bare.quant("fp8").status == "unknown"
    assert bare.training_precision == "fp16"
    assert [a.name for a in bare.attention][-2:] == ["sdpa", "eager"]


@pytest.mark.parametrize(
    ("name", "arch"),
    [
        ("NVIDIA A100-SXM4-80GB", "sm_80"),
        ("NVIDIA A10", "sm_86"),
        ("NVIDIA A10G", "sm_86"),
        ("Tesla T4", "sm_75"),
        ("NVIDIA L4", "sm_89"),
        ("NVIDIA L40S", "sm_89"),
        ("NVIDIA GeForce RTX 3090 Ti", "sm_86"),
        ("NVIDIA GeForce RTX 4070 Laptop GPU", "sm_89"),
        ("NVIDIA RTX 5000 Ada Generation", "sm_89"),
        ("Quadro RTX 4000", "sm_75"),
        ("NVIDIA GeForce RTX 5090", "sm_120"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "sm_120"),
        ("NVIDIA H200", "sm_90"),
        ("NVIDIA GH200 480GB", "sm_90"),
        ("NVIDIA B200", "sm_100"),
        ("NVIDIA GB200", "sm_100"),
        ("Tesla V100-SXM2-16GB", "sm_70"),
        # Maxwell and Pascal, as nvidia-smi / NVML print them (developer.nvidia.com/cuda-gpus)
        ("NVIDIA GeForce GTX 1080", "sm_61"),
        ("NVIDIA GeForce GTX 1080 Ti", "sm_61"),
        ("NVIDIA TITAN X (Pascal)", "sm_61"),
        ("NVIDIA TITAN Xp", "sm_61"),
        ("NVIDIA GeForce GTX TITAN X", "sm_52"),
        ("Tesla P100-PCIE-16GB", "sm_60"),
        ("Tesla P100-SXM2-16GB", "sm_60"),
        ("Tesla P40", "sm_61"),
        ("Tesla P4", "sm_61"),
        ("Tesla M40 24GB", "sm_52"),
        ("Tesla M60", "sm_52"),
        ("GRID M60-8Q", "sm_52"),
        ("Tesla M10", "sm_50"),
        ("Quadro P4000", "sm_61"),
        ("Quadro P620", "sm_61"),
        ("Quadro GP100", "sm_60"),
        ("Quadro M6000 24GB", "sm_52"),
        ("Quadro M2000M", "sm_50"),
        ("Quadro K2200", "sm_50"),
        ("NVIDIA GeForce GTX 980 Ti", "sm_52"),
        ("NVIDIA GeForce GTX 960M", "sm_50"),
        ("NVIDIA GeForce GTX 970M", "sm_52"),
        ("NVIDIA GeForce GTX 750 Ti", "sm_50"),
        ("NVIDIA GeForce GT 1030", "sm_61"),
        ("NVIDIA GeForce MX150", "sm_61"),
        # Turing's GTX 16 series is not Pascal's GTX 10 series
        ("NVIDIA GeForce GTX 1660 SUPER", "sm_75"),
        ("NVIDIA GeForce GTX 780", None),  # Kepler: not in the table
    ],
)
def test_model_names_map_to_compute_capability(name: str, arch: str | None) -> None:
    from hwbackends_cuda._arch import arch_for_name

    row = arch_for_name(name)
    assert (row.arch if row else None) == arch


def test_host_arch_spellings_are_normalised() -> None:
    from hwbackends_cuda._arch import normalise

    assert [normalise(v) for v in ("sm_90", "sm90", "9.0", "90", "12.0", "compute_89")] == [
        "sm_90", "sm_90", "sm_90", "sm_90", "sm_120", "sm_89",
    ]  # fmt: skip
    assert normalise("gfx942") is None and normalise("") is None


def test_every_table_row_has_a_source() -> None:
    from hwbackends_cuda._arch import MODELS, SM
    from hwbackends_cuda._attention import FLASH
    from hwbackends_cuda._quant import VERDICTS

    from hwbackends._kit.hf_facts import QUANT_METHODS

    assert all(r.source for r in SM.values()) and all(m.source for m in MODELS)
    assert all(r.source for r in FLASH) and all(v.source for v in VERDICTS)
    assert {m.arch for m in MODELS} <= set(SM)
    assert {v.method for v in VERDICTS} == set(QUANT_METHODS)  # a verdict for every method
