"""``training_plan()``: the load and the training settings of a model to train, planned together.

fp16 weights under fp16 mixed precision fail in torch's ``GradScaler.unscale_`` ("Attempting to
unscale FP16 gradients"), and bf16 weights under bf16 AMP train with no fp32 master copy; the
plan keeps fp32 master weights under mixed precision, bf16 weights only when asked for.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from hwbackends import Host, HwBackendsError, UnsupportedSettingError
from hwbackends.accelerate import plan_training, training_kwargs, training_plan
from hwbackends.distributed import LaunchError, detect_launch
from hwbackends.transformers import plan_pretrained, pretrained_kwargs

ROOT = Path(__file__).resolve().parents[2]
HOST_FILES = sorted(
    [*ROOT.glob("plugins/*/tests/hosts/*.json"), *ROOT.glob("tests/hosts/*.json")]
    + [p for p in ROOT.glob("docs/hosts/*.json") if "typo" not in p.name]
)
CUDA_HOSTS = ROOT / "plugins" / "hwbackends-cuda" / "tests" / "hosts"
V100, H100 = CUDA_HOSTS / "v100-4.json", CUDA_HOSTS / "h100-sxm-8.json"
LAUNCHERS: list[dict[str, str]] = [
    {},
    {"ACCELERATE_MIXED_PRECISION": "fp16"},
    {"ACCELERATE_MIXED_PRECISION": "bf16"},
    {"ACCELERATE_MIXED_PRECISION": "no"},
]


def dtype_name(value: object) -> str:
    return str(value).removeprefix("torch.")


def fp16_pair(
    pretrained: Mapping[str, Any], training: Mapping[str, Any], env: Mapping[str, str]
) -> bool:
    """fp16 weights trained under fp16 mixed precision (fp16=True, or the launcher's
    ACCELERATE_MIXED_PRECISION=fp16 where neither bf16 nor fp16 is passed)."""
    amp = "fp16" if training.get("fp16") else "bf16" if training.get("bf16") else None
    if amp is None:
        amp = env.get("ACCELERATE_MIXED_PRECISION", "no").strip().lower()
    return dtype_name(pretrained.get("dtype")) == "float16" and amp == "fp16"


def quiet(make: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a host's quantization or ordering notes
        return make(**kwargs)


def test_the_detector_finds_the_pair_that_separate_plans_make() -> None:
    """On a V100 the inference load is fp16 and training_kwargs() sets fp16=True: the two
    together are the pair that fails (Facico/Chinese-Vicuna#168, LAION-AI/Open-Assistant#3213)."""
    host = Host.from_file(V100)
    assert fp16_pair(pretrained_kwargs(host=host, env={}), training_kwargs(host=host, env={}), {})
    assert fp16_pair({"dtype": "float16"}, {}, {"ACCELERATE_MIXED_PRECISION": "fp16"})
    assert not fp16_pair({"dtype": "float32"}, {"fp16": True}, {})


@pytest.mark.parametrize(
    "path", HOST_FILES, ids=lambda p: f"{p.parent.parent.parent.name}/{p.stem}"
)
def test_no_plan_on_any_simulated_host_trains_fp16_weights_under_fp16(path: Path) -> None:
    host = Host.from_file(path)
    planned = 0
    for launcher in LAUNCHERS:
        env = {**(host.env or {}), **launcher}
        for pure in (False, True):
            try:
                setup = quiet(training_plan, host=host, env=env, pure_bf16=pure)
            except UnsupportedSettingError:
                assert pure  # only pure bf16 may be refused, where it cannot run
                continue
            except HwBackendsError as exc:  # no backend can run on this host at all
                assert "pure" not in str(exc)
                continue
            planned += 1
            pre, train = setup.pretrained_kwargs, setup.training_kwargs
            assert not fp16_pair(pre, train, env), (path.name, launcher, pure, setup.to_dict())
            mixed = (
                train.get("bf16")
                or train.get("fp16")
                or launcher.get("ACCELERATE_MIXED_PRECISION", "no") != "no"
            )
            if pure:
                assert dtype_name(pre["dtype"]) == "bfloat16" and setup.precision == "bf16-pure"
                assert not train.get("fp16")
            else:
                # fp32 master weights whenever the training runs mixed precision (or fp32)
                assert dtype_name(pre["dtype"]) == "float32", setup.to_dict()
                assert (
                    setup.precision.endswith("-mixed") or setup.precision.startswith("launcher:")
                    if mixed
                    else setup.precision == "fp32"
                )
    assert planned  # every host file plans (the cpu backend at least)


def test_the_plan_loads_fp32_under_fp16_and_bf16_mixed_precision() -> None:
    v100 = training_plan(host=Host.from_file(V100), env={}, kernels=False)
    assert (v100.precision, v100.training_kwargs) == ("fp16-mixed", {"fp16": True})
    assert dtype_name(v100.pretrained_kwargs["dtype"]) == "float32"
    assert "Attempting to unscale FP16 gradients" in v100.pretrained.reasons["dtype"]
    h100 = training_plan(host=Host.from_file(H100), env={}, kernels=False)
    assert (h100.precision, h100.training_kwargs) == ("bf16-mixed", {"bf16": True})
    assert dtype_name(h100.pretrained_kwargs["dtype"]) == "float32"
    # everything but the dtype is the inference plan's, for the same device
    load = plan_pretrained(host=Host.from_file(H100), env={}, kernels=False)
    assert {k: v for k, v in h100.pretrained_kwargs.items() if k != "dtype"} == {
        k: v for k, v in load.kwargs.items() if k != "dtype"
    }
    assert h100.training == plan_training(host=Host.from_file(H100), env={})
    json.dumps(h100.to_dict())  # JSON-able


def test_pure_bf16_only_when_asked_and_only_where_bf16_is_native() -> None:
    h100 = training_plan(host=Host.from_file(H100), env={}, kernels=False, pure_bf16=True)
    assert dtype_name(h100.pretrained_kwargs["dtype"]) == "bfloat16"
    assert h100.precision == "bf16-pure" and "fp16" not in h100.training_kwargs
    with pytest.raises(UnsupportedSettingError, match="no native bf16") as info:
        training_plan(host=Host.from_file(V100), env={}, pure_bf16=True)
    assert info.value.fix and "pure_bf16=False" in info.value.fix
    launched = {"ACCELERATE_MIXED_PRECISION": "fp16"}
    with pytest.raises(UnsupportedSettingError, match="ACCELERATE_MIXED_PRECISION=fp16"):
        training_plan(host=Host.from_file(H100), env=launched, pure_bf16=True)
    fp16_launch = training_plan(host=Host.from_file(H100), env=launched, kernels=False)
    assert fp16_launch.precision == "launcher:fp16"
    assert dtype_name(fp16_launch.pretrained_kwargs["dtype"]) == "float32"


# -- one answer for every launcher shape, on a simulated device host ------------------------

TORCHRUN = {"RANK": "2", "LOCAL_RANK": "2", "WORLD_SIZE": "8", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500"}  # fmt: skip


def test_a_lone_local_rank_is_one_answer_on_every_surface() -> None:
    """LOCAL_RANK=2 alone on eight H100s: local rank 2 for detect_launch, cuda:2 for the load,
    and training_kwargs() refuses (Accelerate would start an nccl group that torch's env://
    rendezvous cannot form without RANK/MASTER_ADDR) naming the fixes; with torchrun's full
    set every surface agrees on rank 2, cuda:2 and nccl."""
    host = Host.from_file(H100)
    lone = {"LOCAL_RANK": "2"}
    assert detect_launch(lone).local_rank == 2
    assert pretrained_kwargs(host=host, env=lone)["device_map"] == "cuda:2"
    with pytest.raises(LaunchError, match="LOCAL_RANK=2 is set without a launcher") as info:
        training_kwargs(host=host, env=lone)
    assert "RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT are not set" in info.value.what
    assert info.value.fix and "unset LOCAL_RANK" in info.value.fix
    assert "init_process_group()" in info.value.fix
    assert (detect_launch(TORCHRUN).local_rank, detect_launch(TORCHRUN).rank) == (2, 2)
    assert pretrained_kwargs(host=host, env=TORCHRUN)["device_map"] == "cuda:2"
    assert training_kwargs(host=host, env=TORCHRUN) == {"bf16": True, "ddp_backend": "nccl"}


OMPI = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}  # fmt: skip
SRUN = {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "4", "SLURM_LOCALID": "1",
        "SLURM_STEP_NODELIST": "gpu01", "SLURM_JOB_ID": "4242"}  # fmt: skip


@pytest.mark.parametrize("launch", [OMPI, SRUN], ids=["mpirun", "srun"])
def test_mpirun_and_srun_on_gpus_refuse_what_would_train_each_rank_alone(
    launch: dict[str, str],
) -> None:
    """On a GPU Accelerate forms a group only under LOCAL_RANK, which neither mpirun nor srun
    sets: TrainingArguments would put every rank on cuda:0, training alone. The plan refuses
    and names init_process_group(), which exports the launcher's ranks; with them exported
    (as init_process_group leaves os.environ) the plan is nccl on the rank's own device."""
    host = Host.from_file(H100)
    with pytest.raises(LaunchError, match="each process would train alone on cuda:0") as info:
        training_kwargs(host=host, env=launch)
    assert info.value.fix and "init_process_group()" in info.value.fix
    exported = {**launch, **detect_launch(launch).torch_env()}
    assert training_kwargs(host=host, env=exported) == {"bf16": True, "ddp_backend": "nccl"}
    assert pretrained_kwargs(host=host, env=exported)["device_map"] == "cuda:1"


def test_mixed_gpus_train_in_the_precision_every_one_runs_natively() -> None:
    """A V100 beside an H100 with no launcher: the Trainer's DataParallel runs on both, so the
    plan is fp16 (the V100 has no native bf16), over fp32 weights."""
    data = json.loads(H100.read_text())
    v100 = json.loads(V100.read_text())["devices"][0]
    data["devices"] = [data["devices"][0], {**v100, "pci_bus_id": "0000:99:00.0"}]
    host = Host.from_dict(data)
    assert plan_training(host=host, env={}).kwargs == {"fp16": True}
    assert "sm_70" in plan_training(host=host, env={}).reasons["fp16"]
    setup = quiet(training_plan, host=host, env={}, kernels=False)
    assert setup.precision == "fp16-mixed"
    assert dtype_name(setup.pretrained_kwargs["dtype"]) == "float32"
    # one device named: that device's own precision
    assert plan_training(host=host, env={}, device=0).kwargs == {"bf16": True}
