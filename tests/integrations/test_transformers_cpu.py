"""The integrations with the real torch, Transformers and Accelerate, on this CPU."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import hwbackends  # noqa: E402
import hwbackends.transformers as hwt  # noqa: E402
from hwbackends import Host  # noqa: E402
from hwbackends._integrations.smoke import tiny_llama_config  # noqa: E402
from hwbackends.accelerate import plan_training, training_kwargs  # noqa: E402
from hwbackends.distributed import backend_name, launch_env, launch_plan  # noqa: E402

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
    kw = hwt.pretrained_kwargs(env=CPU_ONLY)
    host = Host.from_system()
    expected_dtype = torch.bfloat16 if "amx_bf16" in host.cpu.flags else torch.float32
    assert kw == {
        "device_map": "cpu",
        "dtype": expected_dtype,
        "attn_implementation": "sdpa",
        "use_kernels": True,  # cpu is a kernels device key; nothing of a Llama is mapped
    }
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


def test_training_arguments_on_cpu() -> None:
    kw = training_kwargs(env=CPU_ONLY)
    host = Host.from_system()
    native_bf16 = bool(host.cpu.flags & {"avx512_bf16", "amx_bf16", "bf16"})
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
    launched = {**CPU_ONLY, "LOCAL_RANK": "0", "WORLD_SIZE": "2"}
    assert training_kwargs(env=launched)["ddp_backend"] == "gloo"
    assert backend_name(env=CPU_ONLY) == "gloo"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_torchrun_two_cpu_processes(tmp_path: Path) -> None:
    script = tmp_path / "rank.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, os, sys
            import torch
            import torch.distributed as dist
            from hwbackends.distributed import init_process_group
            collective = init_process_group()
            t = torch.tensor([float(dist.get_rank() + 1)])
            dist.all_reduce(t)
            keys = ("LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")
            seen = {k: os.environ[k] for k in keys}
            out = {"collective": collective, "sum": t.item(), "env": seen}
            with open(os.path.join(sys.argv[1], f"rank{dist.get_rank()}.json"), "w") as f:
                json.dump(out, f)
            dist.destroy_process_group()
            """
        )
    )
    env = {**os.environ, "HWBACKENDS_PLUGINS": "", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
           str(script), str(tmp_path)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    plan = launch_plan(2, env=CPU_ONLY)
    assert plan.collective == "gloo"
    assert plan.torchrun == "torchrun --nproc-per-node 2 train.py"
    for rank in (0, 1):
        seen = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert seen["collective"] == "gloo"
        assert seen["sum"] == 3.0
        assert seen["env"] == launch_env(rank, 2, env=CPU_ONLY)


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
    assert d["settings"]["attn_implementation"] == "sdpa"


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
