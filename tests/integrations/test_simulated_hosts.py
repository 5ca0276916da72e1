"""Every backend on its simulated hosts: the exact settings, asserted case by case."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from coretest import dtype_text
from transformers import LlamaForCausalLM

from hwbackends import Host, QuantizationError
from hwbackends._selection.registry import Registry, Settings
from hwbackends.accelerate import training_kwargs
from hwbackends.distributed import backend_name
from hwbackends.transformers import plan_pretrained

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
AUTO, BF16, FP16, FP32 = "auto", "bfloat16", "float16", "float32"
LLAMA = LlamaForCausalLM  # a class that supports sdpa, flash and flex attention

# host file -> (backend, device_map, dtype, attn_implementation, use_kernels,
#               TrainingArguments kwargs, collective). use_kernels needs a kernels device key
# and a transformers/kernels pair on the host: hosts that list no transformers get none.
CASES: dict[str, tuple[str, str, str, str, bool, dict[str, Any], str]] = {
    "cuda/h100-sxm-8": ("cuda", AUTO, BF16, "flash_attention_2", True, {"bf16": True}, "nccl"),
    "cuda/a100-mig": ("cuda", AUTO, BF16, "flash_attention_2", True, {"bf16": True}, "nccl"),
    "cuda/v100-4": ("cuda", AUTO, FP16, "sdpa", True, {"fp16": True}, "nccl"),
    "cuda/mixed-4-unknown-order": (
        "cuda", AUTO, BF16, "flash_attention_2", True, {"bf16": True}, "nccl",
    ),
    "cuda/hybrid-laptop-cuda-torch": (
        "cuda", "cuda:0", BF16, "flash_attention_2", True, {"bf16": True}, "nccl",
    ),
    "rocm/mi300x-8": ("rocm", AUTO, BF16, "flash_attention_2", True, {"bf16": True}, "nccl"),
    "rocm/mi210-2": ("rocm", AUTO, BF16, "flash_attention_2", True, {"bf16": True}, "nccl"),
    "rocm/strix-halo": ("rocm", "cuda:0", BF16, "sdpa", True, {"bf16": True}, "nccl"),
    "rocm/radeon-with-igpu": ("rocm", "cuda:0", BF16, "sdpa", True, {"bf16": True}, "nccl"),
    "rocm/hybrid-laptop-rocm-torch": ("rocm", "cuda:0", BF16, "sdpa", True, {"bf16": True}, "nccl"),
    "xpu/max1550_x4": ("xpu", AUTO, BF16, "sdpa", False, {"bf16": True}, "xccl"),
    "xpu/desktop_igpu_b580": ("xpu", "xpu:0", BF16, "sdpa", False, {"bf16": True}, "xccl"),
    "xpu/laptop_igpu_xpu_torch": ("xpu", "xpu:0", FP32, "sdpa", False, {}, "xccl"),
    "mps/m2_max_sonoma": ("mps", "mps:0", BF16, "sdpa", False, {"bf16": True}, "gloo"),
    "mps/m1_ventura": ("mps", "mps:0", FP32, "sdpa", False, {}, "gloo"),
    "neuron/trn2_48xlarge": ("neuron", "neuron:0", BF16, "sdpa", False, {"bf16": True}, "neuron"),
    "neuron/trn1_32xlarge": ("neuron", "xla:0", BF16, "sdpa", False, {"bf16": True}, "xla"),
    "tpu/v6e8_torch_tpu": ("tpu", "tpu:0", BF16, "sdpa", False, {"bf16": True}, "tpu_dist"),
    "tpu/v5litepod8_xla": ("tpu", "xla:0", BF16, "sdpa", False, {"bf16": True}, "xla"),
    "hpu/hls_gaudi2_8": ("hpu", AUTO, BF16, "sdpa", False, {"bf16": True}, "hccl"),
    "hpu/gaudi1_dl1": ("hpu", AUTO, BF16, "sdpa", False, {"bf16": True}, "hccl"),
    "npu/atlas800t_a2_910b_x8": (
        "npu", AUTO, BF16, "flash_attention_2", False, {"bf16": True}, "hccl",
    ),
    "npu/atlas800_910_x8": ("npu", AUTO, FP16, "sdpa", False, {"fp16": True}, "hccl"),
    "mlu/mlu370_x4": ("mlu", AUTO, FP32, "sdpa", False, {}, "cncl"),
    "musa/s4000_x4": ("musa", AUTO, FP32, "sdpa", False, {}, "mccl"),
}  # fmt: skip


def host_of(case: str) -> Host:
    plugin, name = case.split("/")
    return Host.from_file(PLUGINS / f"hwbackends-{plugin}" / "tests" / "hosts" / f"{name}.json")


@pytest.mark.parametrize("case", sorted(CASES))
def test_settings_for_simulated_host(case: str) -> None:
    # attention and use_kernels follow the installed Transformers' tables
    __import__("transformers")  # the expected output was made with Transformers installed
    __import__("torch")  # LLAMA's class flags live in its modeling module, which needs torch
    backend, device_map, dtype, attn, kernels, targs, collective = CASES[case]
    h = host_of(case)
    env = dict(h.env or {})
    report = Registry().select(env, h, Settings.from_env(env))
    assert report.chosen == backend, report.status(backend).reason
    # for a Llama (sdpa, flash and flex), with hub kernels opted in where they can work
    plan = plan_pretrained(host=h, env=env, model=LLAMA, kernels=True if kernels else "auto")
    assert plan.backend == backend
    kw = {k: str(v).removeprefix("torch.") for k, v in plan.kwargs.items()}
    expected = {"device_map": device_map, "dtype": dtype, "attn_implementation": attn}
    if kernels:
        expected["use_kernels"] = "True"
    assert kw == expected
    assert plan.kernels.available is kernels
    # by default: no hub code, and no attention some model class would refuse
    default = plan_pretrained(host=h, env=env)
    assert "use_kernels" not in default.kwargs and "attn_implementation" not in default.kwargs
    assert "only on opt-in (pass kernels=True)" in default.reasons["use_kernels"]
    assert training_kwargs(host=h, env=env) == targs
    assert backend_name(host=h, env=env) == collective
    torchrun = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": "29500"}  # fmt: skip
    launched = training_kwargs(host=h, env={**env, **torchrun})
    # TrainingArguments accepts only its argparse choices; others are left to Accelerate,
    # which forms no process group at all on mps (so no ddp_backend there)
    if collective in ("nccl", "gloo", "xccl", "hccl", "cncl", "mccl") and backend != "mps":
        assert launched["ddp_backend"] == collective
    else:
        assert "ddp_backend" not in launched


def test_hub_fallback_matches_the_installed_transformers_table() -> None:
    """flash-attn is not installed on the H100 host: the fallback is Transformers' own."""
    from transformers.modeling_flash_attention_utils import FLASH_ATTN_KERNEL_FALLBACK

    h = host_of("cuda/mixed-4-unknown-order")
    plan = plan_pretrained(host=h, env={}, model=LLAMA, kernels=True)
    repo = FLASH_ATTN_KERNEL_FALLBACK["flash_attention_2"]  # CUDA branch on this CPU torch
    assert f"through hub kernel {repo}" in plan.reasons["attn_implementation"]
    # offline, the hub fallback is not offered: sdpa loads instead, and says why
    offline = plan_pretrained(host=h, env={"HF_HUB_OFFLINE": "1"}, model=LLAMA)
    assert offline.kwargs["attn_implementation"] == "sdpa"
    assert "use_kernels" not in offline.kwargs
    assert offline.kernels.reason == "hub kernels cannot be fetched: HF_HUB_OFFLINE is set"


def test_explicit_attention_that_cannot_load_names_what_would() -> None:
    from hwbackends import UnsupportedSettingError

    with pytest.raises(
        UnsupportedSettingError,
        match=r"attn_implementation='flash_attention_3' cannot load on gfx1151 \(rocm\)",
    ):
        plan_pretrained(host=host_of("rocm/strix-halo"), env={}, attention="flash_attention_3")


def test_mixed_generations_choose_what_every_device_runs() -> None:
    __import__("torch")  # LLAMA's class flags live in its modeling module, which needs torch
    h = Host.from_dict(
        {
            "torch": {"version": "2.8.0+cu128", "cuda": "12.8"},
            "packages": {"flash-attn": "2.8.3", "transformers": "5.22.2", "kernels": "0.17.2"},
            "drivers": {"nvidia": "570.124.04"},
            "device_nodes": ["/dev/nvidia0", "/dev/nvidia1"],
            "devices": [
                {"vendor": "nvidia", "pci_bus_id": "0000:17:00.0", "name": "NVIDIA A100-SXM4-80GB"},
                {"vendor": "nvidia", "pci_bus_id": "0000:65:00.0", "name": "Tesla V100-SXM2-32GB"},
            ],
        }
    )
    plan = plan_pretrained(host=h, env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, model=LLAMA)
    assert plan.kwargs["device_map"] == "auto"
    assert str(plan.kwargs["dtype"]) == dtype_text("float16")  # the V100 has no bf16
    assert plan.kwargs["attn_implementation"] == "sdpa"  # flash-attn 2 needs sm_80 on both
    assert "every visible device" in plan.reasons["attn_implementation"]


def verdicts(case: str) -> list[tuple[str, str]]:
    h = host_of(case)
    plan = plan_pretrained(host=h, env={})
    assert plan.device is not None
    caps = __import__("hwbackends").get(plan.backend).capabilities(plan.device, host=h)
    return [(q.method, q.status) for q in caps.quantization]


@pytest.mark.parametrize("case", ["cuda/h100-sxm-8", "cuda/v100-4", "rocm/mi300x-8",
                                  "xpu/max1550_x4", "mps/m2_max_sonoma", "hpu/hls_gaudi2_8",
                                  "npu/atlas800t_a2_910b_x8"])  # fmt: skip
def test_quantization_preflight_follows_the_tables(case: str) -> None:
    h = host_of(case)
    for method, status in verdicts(case):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                plan = plan_pretrained(host=h, env={}, quantization=method)
            except QuantizationError as exc:
                assert status == "unsupported" or "which is not installed" in str(exc), method
                continue
        assert status != "unsupported", f"{case}: {method} should have been refused"
        assert plan.quantization is not None and plan.quantization.status == status
        assert bool(caught) == (status in ("partial", "unknown")), (case, method, status)


def test_quantization_pinned_verdicts() -> None:
    rocm = dict(verdicts("rocm/mi300x-8"))
    assert (rocm["awq"], rocm["compressed_tensors"], rocm["quark"]) == ("supported",) * 3
    assert rocm["bitsandbytes"] == "partial"
    assert rocm["eetq"] == "unsupported"
    refused = r"quantization 'eetq' will fail on gfx942 \(rocm\)"
    with pytest.raises(QuantizationError, match=refused):
        plan_pretrained(host=host_of("rocm/mi300x-8"), env={}, quantization="eetq")
    cuda_v100 = dict(verdicts("cuda/v100-4"))
    assert cuda_v100["fbgemm_fp8"] == "unsupported"  # needs sm_90


def test_kernels_integration_off_for_an_incoherent_pair() -> None:
    """transformers 5.23 wants kernels >=0.18.2,<0.19: with 0.17.2 the integration is off."""
    __import__("torch")  # LLAMA's class flags live in its modeling module, which needs torch
    h = Host.from_dict(
        {
            "torch": {"version": "2.8.0+cu128", "cuda": "12.8"},
            "packages": {"transformers": "5.23.0", "kernels": "0.17.2"},
            "drivers": {"nvidia": "570.124.04"},
            "devices": [{"vendor": "nvidia", "pci_bus_id": "0000:01:00.0",
                         "name": "NVIDIA H100 80GB HBM3"}],
        }
    )  # fmt: skip
    plan = plan_pretrained(host=h, env={}, model=LLAMA)
    assert "use_kernels" not in plan.kwargs
    assert plan.kernels.reason == (
        "kernels integration unavailable: kernels 0.17.2, transformers 5.23.0 accepts "
        ">=0.18.2,<0.19: integration switched off"
    )
    # the hub fallback for flash-attention needs the same integration: sdpa instead
    assert plan.kwargs["attn_implementation"] == "sdpa"


def mixed_instinct_host() -> Host:
    """An MI250 beside an MI100, written from what the rocm plugin declares: each card's
    gfx target from its arch table, its name from its PCI id table."""
    from hwbackends_rocm._arch import GFX
    from hwbackends_rocm._pciids import DEVICES

    def card(product: str, bus: str) -> dict[str, Any]:
        arch = next(a.arch for a in GFX.values() if product in a.products)
        name = next(n for a, _, n in DEVICES.values() if a == arch and product in n)
        return {"vendor": "amd", "pci_bus_id": bus, "uuid": f"GPU-{bus[5:7]}00000000000001",
                "name": f"AMD {name}", "arch": arch, "memory_bytes": 64 << 30}  # fmt: skip

    data = json.loads((PLUGINS / "hwbackends-rocm/tests/hosts/mi210-2.json").read_text())
    data["devices"] = [card("MI250", "0000:03:00.0"), card("MI100", "0000:83:00.0")]
    return Host.from_dict(data)


def test_a_model_spread_over_mixed_instinct_cards_loads_in_the_dtype_both_run() -> None:
    """device_map='auto' over an MI250 (native bf16) and an MI100 (bf16 at half rate, loads
    fp16): the weights load in float16, not the first card's bfloat16; training over both
    runs fp16 mixed precision on fp32 weights."""
    from hwbackends.accelerate import training_plan

    host = mixed_instinct_host()
    archs = sorted(d.arch or "" for d in host.devices)
    assert archs == ["gfx908", "gfx90a"]
    plan = plan_pretrained(host=host, env={}, kernels=False)
    assert plan.kwargs["device_map"] == "auto"
    assert str(plan.kwargs["dtype"]).removeprefix("torch.") == "float16"
    assert plan.reasons["dtype"] == (
        "float16: the one dtype every visible device runs well (gfx908, gfx90a)"
    )
    assert training_kwargs(host=host, env={}) == {"fp16": True}
    setup = training_plan(host=host, env={}, kernels=False)
    assert (setup.precision, str(setup.pretrained_kwargs["dtype"]).removeprefix("torch.")) == (
        "fp16-mixed",
        "float32",
    )
    # each card alone: its own load dtype
    one = [plan_pretrained(host=host, env={}, device=i, kernels=False) for i in (0, 1)]
    assert [str(p.kwargs["dtype"]).removeprefix("torch.") for p in one] == ["bfloat16", "float16"]
