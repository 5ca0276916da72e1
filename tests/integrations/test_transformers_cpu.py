"""The integrations with the real torch, Transformers and Accelerate, on this CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# installed by scripts/test.sh: a missing one is a failure, not a skip
import torch
import transformers

import hwbackends
import hwbackends.transformers as hwt
from hwbackends import Host
from hwbackends._integrations.smoke import tiny_llama_config
from hwbackends.accelerate import plan_training, training_kwargs
from hwbackends.distributed import backend_name, launch_env, launch_plan

CPU_ONLY = {"HWBACKENDS_PLUGINS": ""}  # hermetic: only the built-in cpu backend


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny-llama")
    torch.manual_seed(0)
    model: Any = transformers.LlamaForCausalLM(tiny_llama_config())
    model.save_pretrained(path)
    return path


def greedy(model: Any) -> list[int]:
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    out = model.generate(ids, max_new_tokens=6, min_new_tokens=6, do_sample=False, pad_token_id=0)
    return [int(t) for t in out[0, 5:]]


def test_pretrained_kwargs_load_matches_plain_load(tiny_model: Path) -> None:
    host = Host.from_system()
    expected_dtype = torch.bfloat16 if "amx_bf16" in host.cpu.flags else torch.float32
    # without the model: no attention some class would refuse, and no hub code
    assert hwt.pretrained_kwargs(env=CPU_ONLY) == {"device_map": "cpu", "dtype": expected_dtype}
    kw = hwt.pretrained_kwargs(env=CPU_ONLY, model=tiny_model)
    assert kw == {"device_map": "cpu", "dtype": expected_dtype, "attn_implementation": "sdpa"}
    ours = transformers.AutoModelForCausalLM.from_pretrained(tiny_model, **kw)
    # Transformers' own resolution accepted the implementation we chose
    assert ours.config._attn_implementation == "sdpa"
    assert ours.device.type == "cpu"
    plain = transformers.AutoModelForCausalLM.from_pretrained(tiny_model, dtype=expected_dtype)
    assert greedy(ours) == greedy(plain)


def test_explicit_eager_loads_and_unknown_is_refused(tiny_model: Path) -> None:
    kw = hwt.pretrained_kwargs(env=CPU_ONLY, attention="eager")
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model, **kw)
    assert model.config._attn_implementation == "eager"
    with pytest.raises(
        hwbackends.UnsupportedSettingError,
        match=r"attn_implementation='flash_attention_3' cannot load on x86_64 \(cpu\): this "
        r"device does not support it\. Expected one of sdpa, eager\.",
    ):
        hwt.pretrained_kwargs(env=CPU_ONLY, attention="flash_attention_3")


def test_explicit_dtype_and_bad_dtype() -> None:
    assert hwt.pretrained_kwargs(env=CPU_ONLY, dtype="bf16")["dtype"] is torch.bfloat16
    with pytest.raises(hwbackends.UnsupportedSettingError, match="dtype='int3' is not a floating"):
        hwt.pretrained_kwargs(env=CPU_ONLY, dtype="int3")


def test_kernels_state_is_reported_honestly() -> None:
    offline = {**CPU_ONLY, "HF_HUB_OFFLINE": "1"}
    plan = hwt.plan_pretrained(env=offline)
    assert not plan.kernels.available
    assert plan.kernels.reason == "hub kernels cannot be fetched: HF_HUB_OFFLINE is set"
    assert plan.kernels.device_key == "cpu"
    assert "use_kernels" not in plan.kwargs
    with pytest.raises(hwbackends.UnsupportedSettingError, match="use_kernels was requested"):
        hwt.pretrained_kwargs(env=offline, kernels=True)


def test_quantization_preflight_on_cpu_unknown_warns() -> None:
    with pytest.warns(UserWarning, match=r"quantization 'awq' on x86_64 \(cpu\): the cpu backend"):
        plan = hwt.plan_pretrained(env=CPU_ONLY, quantization="awq")
    assert plan.quantization is not None and plan.quantization.status == "unknown"
    assert "quantization_config" not in plan.kwargs


def cpu_has_native_bf16() -> bool:
    """Whether this CPU runs bf16 matmuls natively, asked of torch's own CPU feature detection
    (cpuinfo, CPUID on x86), not of hwbackends' reader of /proc/cpuinfo. On x86 that is
    AVX512-BF16 or AMX (whose tiles come with AMX-BF16); on Arm, FEAT_BF16, which the kernel
    lists as "bf16" in /proc/cpuinfo's Features (Documentation/arch/arm64/elf_hwcaps.rst)."""
    import platform

    if platform.machine().lower() in ("x86_64", "amd64", "i686"):
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        return any(
            line.startswith("Features") and "bf16" in line.split(":", 1)[1].split() for line in f
        )


def test_training_arguments_on_cpu() -> None:
    kw = training_kwargs(env=CPU_ONLY)
    native_bf16 = cpu_has_native_bf16()
    assert kw == ({"use_cpu": True, "bf16": True} if native_bf16 else {"use_cpu": True})
    args = transformers.TrainingArguments(output_dir="/tmp/hwb-ta", report_to="none", **kw)
    assert args.device == torch.device("cpu")
    assert args.bf16 == native_bf16
    assert hwt.pretrained_kwargs(env=CPU_ONLY)["device_map"] == args.device.type


def test_report_to_filtering_uses_limitations() -> None:
    plan = plan_training(env=CPU_ONLY, report_to=["tensorboard", "codecarbon"])
    assert plan.kwargs["report_to"] == ["tensorboard", "codecarbon"]  # nothing known on CPU
    assert plan_training(env=CPU_ONLY, report_to="none").kwargs["report_to"] == "none"


def test_ddp_backend_only_under_a_launcher() -> None:
    assert "ddp_backend" not in training_kwargs(env=CPU_ONLY)
    launched = {**CPU_ONLY, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2",
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}  # fmt: skip
    assert training_kwargs(env=launched)["ddp_backend"] == "gloo"
    assert backend_name(env=CPU_ONLY) == "gloo"


def test_launch_plan_for_two_cpu_ranks() -> None:
    """The plan for two CPU ranks. Starting them for real (torchrun, accelerate launch, srun-
    and mpirun-style variables) is tests/integrations/test_launchers.py's job: once is enough."""
    plan = launch_plan(2, env=CPU_ONLY)
    assert plan.collective == "gloo"
    assert plan.torchrun == "torchrun --nproc-per-node 2 train.py"
    for rank in (0, 1):
        env = launch_env(rank, 2, env=CPU_ONLY)
        assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"]) == (str(rank), str(rank), "2")


def test_launch_plan_checks_parallel_sizes() -> None:
    plan = launch_plan(4, env=CPU_ONLY, tp_size=3)
    assert plan.problems == (
        "tp_size × fsdp_size = 3 does not divide the world size 4; use sizes whose product is "
        "one of [1, 2, 4]",
    )
    multi = launch_plan(2, nnodes=2, node_rank=1, rdzv_endpoint="n0:29400", env=CPU_ONLY)
    assert [r.rank for r in multi.ranks] == [2, 3]
    assert "--nnodes 2 --node-rank 1 --rdzv-backend c10d --rdzv-endpoint n0:29400" in multi.torchrun
    assert "--num_machines 2 --machine_rank 1 --main_process_ip n0" in multi.accelerate
    with pytest.raises(hwbackends.HwBackendsError, match="needs a rendezvous endpoint"):
        launch_plan(2, nnodes=2, env=CPU_ONLY)


def test_smoke_command_on_this_cpu() -> None:
    env = {**os.environ, "HWBACKENDS_PLUGINS": ""}
    out = subprocess.run(
        [sys.executable, "-m", "hwbackends", "smoke", "--json"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    d = json.loads(out.stdout)
    assert (d["command"], d["ok"], d["backend"], d["device"]) == ("smoke", True, "cpu", "cpu")
    assert set(d["timings_s"]) == {"plan", "import", "build", "load", "generate", "train"}
    assert len(d["tokens"]) == 5 and d["loss"] > 0
    assert d["settings"]["attn_implementation"] == "sdpa"  # planned for its tiny Llama
    # smoke runs what env recommends, kernels included, and says so; env without --model
    # leaves the attention to Transformers
    rec = subprocess.run(
        [sys.executable, "-m", "hwbackends", "env", "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    settings = json.loads(rec.stdout)["settings"]
    kwargs = settings["from_pretrained"]["kwargs"]
    assert "attn_implementation" not in kwargs and "use_kernels" not in kwargs
    assert d["settings"] == {
        **{k: str(v) for k, v in kwargs.items()},
        "attn_implementation": "sdpa",
    }
    # the train step ran the training plan: fp32 master weights under mixed precision, and
    # the TrainingArguments env recommends
    tr = d["training"]
    assert tr["precision"] in ("bf16-mixed", "fp16-mixed", "fp32")
    assert tr["from_pretrained"]["dtype"] == tr["trained_dtype"] == "float32"
    assert tr["training_arguments"] == settings["training_arguments"]["kwargs"]
    ex = d["exercised"]
    assert ex["attn_implementation"] == d["settings"]["attn_implementation"]
    assert ex["dtype"] == kwargs["dtype"]
    if kwargs.get("use_kernels"):
        k = ex["use_kernels"]
        # kernelize ran over the model's replaceable layers with the installed kernels
        # package, offline: each layer either got a cached hub kernel or kept its forward
        assert k["requested"] and k["kernelized"]
        assert len(k["hub_kernels"]) + len(k["own_forward"]) > 0
        assert all("(" in x for x in k["hub_kernels"] + k["own_forward"])
        if k["own_forward"]:
            assert "Hub was not asked (offline)" in k["why"]
    else:
        assert ex["use_kernels"] == {"requested": False, "why": ex["use_kernels"]["why"]}


def test_smoke_leaves_the_hub_setting_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """The load runs with HF_HUB_OFFLINE=1 (no download) and puts the variable back."""
    from hwbackends._integrations.smoke import _hub_offline

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    with _hub_offline():
        assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["HF_HUB_OFFLINE"] == "0"
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with _hub_offline():
        assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert "HF_HUB_OFFLINE" not in os.environ


def test_smoke_failure_is_one_line_exit_2() -> None:
    env = {**os.environ, "HWBACKENDS_PLUGINS": ""}
    out = subprocess.run(
        [sys.executable, "-m", "hwbackends", "smoke", "--backend", "cuda"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.startswith(
        "hwbackends: error: --backend cuda: the cuda backend is not available here: "
    )
    assert "Fix: drop --backend" in out.stderr and "backend=None" not in out.stderr
    assert out.stderr.count("\n") == 1
