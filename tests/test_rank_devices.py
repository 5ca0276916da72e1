"""A rank's device: the local rank of every launcher style picks its own
visible device, and a rank with none (at or past the visible count, negative, not a number) is
refused by ``pretrained_kwargs``, ``training_kwargs``, ``init_process_group`` and ``env``:
never a silent ``cuda:0`` shared by every rank past the end.

The host is an 8 x H100 SXM node (a host file of the cuda plugin) with
``CUDA_VISIBLE_DEVICES=4,5,6,7``: four visible devices, cuda:0-3 on physical 4-7.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from coretest import run_main

from hwbackends import Host
from hwbackends._integrations.rank import process_rank
from hwbackends._selection.target import RankError, resolve_target
from hwbackends.accelerate import training_kwargs
from hwbackends.distributed import init_process_group
from hwbackends.transformers import plan_pretrained, pretrained_kwargs

PLUGINS = Path(__file__).resolve().parent.parent / "plugins"
H100 = str(PLUGINS / "hwbackends-cuda" / "tests" / "hosts" / "h100-sxm-8.json")

pytestmark = pytest.mark.skipif(
    not (PLUGINS / "hwbackends-cuda").exists(), reason="the in-repo cuda plugin is needed"
)

VISIBLE = {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}


def launcher_env(style: str, local: int, *, nodes: int = 1) -> dict[str, str]:
    """The variables each launcher sets for the process of local rank ``local`` on a node of
    eight tasks (the names come from each launcher's documentation; see
    docs/reference/launchers.md)."""
    world = str(8 * nodes)
    rank = str(local)
    if style == "torchrun":  # torchrun and accelerate launch (which runs torchrun)
        return {
            "RANK": rank,
            "WORLD_SIZE": world,
            "LOCAL_RANK": str(local),
            "LOCAL_WORLD_SIZE": "8",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500",
        }
    if style == "srun":
        return {
            "SLURM_PROCID": rank,
            "SLURM_NTASKS": world,
            "SLURM_STEP_NUM_TASKS": world,
            "SLURM_LOCALID": str(local),
            "SLURM_NTASKS_PER_NODE": "8",
            "SLURM_STEP_TASKS_PER_NODE": "8",
            "SLURM_JOB_NODELIST": "gpu[01-02]" if nodes > 1 else "gpu01",
            "SLURM_STEP_NODELIST": "gpu[01-02]" if nodes > 1 else "gpu01",
            "SLURM_JOB_ID": "4242",
        }
    if style == "openmpi":
        return {
            "OMPI_COMM_WORLD_RANK": rank,
            "OMPI_COMM_WORLD_SIZE": world,
            "OMPI_COMM_WORLD_LOCAL_RANK": str(local),
            "OMPI_COMM_WORLD_LOCAL_SIZE": "8",
            "MASTER_ADDR": "gpu01",
        }
    if style == "mpich":  # MPICH / Intel MPI (Hydra, PMI)
        return {
            "PMI_RANK": rank,
            "PMI_SIZE": world,
            "MPI_LOCALRANKID": str(local),
            "MPI_LOCALNRANKS": "8",
            "MASTER_ADDR": "gpu01",
        }
    assert style == "mvapich"
    return {
        "MV2_COMM_WORLD_RANK": rank,
        "MV2_COMM_WORLD_SIZE": world,
        "MV2_COMM_WORLD_LOCAL_RANK": str(local),
        "MV2_COMM_WORLD_LOCAL_SIZE": "8",
        "MASTER_ADDR": "gpu01",
    }


STYLES = ("torchrun", "srun", "openmpi", "mpich", "mvapich")


@pytest.fixture(scope="module")
def host() -> Host:
    return Host.from_file(H100)


@pytest.mark.parametrize("style", STYLES)
def test_each_launchers_local_rank_takes_its_own_visible_device(style: str, host: Host) -> None:
    for local in range(4):
        env = {**VISIBLE, **launcher_env(style, local)}
        plan = plan_pretrained(env=env, host=host)
        assert plan.kwargs["device_map"] == f"cuda:{local}"
        assert plan.device is not None and plan.device.physical_index == 4 + local
        assert "one process per device under a launcher" in plan.reasons["device_map"]


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("local", [4, 5, 7])
def test_a_local_rank_past_the_visible_devices_is_refused(
    style: str, local: int, host: Host
) -> None:
    env = {**VISIBLE, **launcher_env(style, local)}
    for call in (pretrained_kwargs, training_kwargs):
        with pytest.raises(RankError) as exc:
            call(env=env, host=host)
        msg = str(exc.value)
        assert f"local rank {local} (" in msg
        assert "this process sees 4 (cuda:0, cuda:1, cuda:2, cuda:3)" in msg
        assert "CUDA_VISIBLE_DEVICES='4,5,6,7'" in msg
        assert "Expected a local rank from 0 to 3" in msg
        assert "start at most 4 process(es) per node" in msg
        assert "list more devices in CUDA_VISIBLE_DEVICES" in msg


def test_the_fix_names_each_launchers_own_option(host: Host) -> None:
    fixes = {}
    for style in STYLES:
        with pytest.raises(RankError) as exc:
            pretrained_kwargs(env={**VISIBLE, **launcher_env(style, 6)}, host=host)
        fixes[style] = exc.value.fix or ""
    assert "torchrun --nproc-per-node 4" in fixes["torchrun"]
    assert "srun --ntasks-per-node=4" in fixes["srun"]
    for style in ("openmpi", "mpich", "mvapich"):
        assert "mpirun -npernode 4" in fixes[style]


@pytest.mark.parametrize(
    ("value", "why"), [("-2", "is negative"), ("x", "is not a number"), ("", "is not a number")]
)
def test_an_unreadable_local_rank_is_refused(value: str, why: str, host: Host) -> None:
    env = {**VISIBLE, "LOCAL_RANK": value}
    for call in (pretrained_kwargs, training_kwargs):
        with pytest.raises(RankError, match=f"LOCAL_RANK={value!r} {why}"):
            call(env=env, host=host)


def test_local_rank_minus_one_is_a_single_process(host: Host) -> None:
    """Accelerate reads LOCAL_RANK=-1 as "not launched" (accelerate/state.py
    ``_prepare_backend``): the device choice is the single process's, over every visible
    device."""
    plan = plan_pretrained(env={**VISIBLE, "LOCAL_RANK": "-1"}, host=host)
    assert plan.kwargs["device_map"] == "auto"
    assert "LOCAL_RANK" not in plan.reasons["device_map"]
    # and no ddp_backend: Accelerate forms no process group for it
    assert "ddp_backend" not in training_kwargs(env={**VISIBLE, "LOCAL_RANK": "-1"}, host=host)


def test_local_rank_is_read_as_int_reads_it(host: Host) -> None:
    """torch and Accelerate read ``int(os.environ["LOCAL_RANK"])``: " 3" and "+3" are 3."""
    for raw in (" 3", "+3", "03"):
        assert (
            pretrained_kwargs(env={**VISIBLE, "LOCAL_RANK": raw}, host=host)["device_map"]
            == "cuda:3"
        )


def test_slurm_per_task_binding_gives_each_task_its_first_visible_device(host: Host) -> None:
    """``srun --gpus-per-task=1`` binds each task to its own GPU (srun(1): the option
    "will implicitly set --gpu-bind=per_task"): Slurm's per-task CUDA_VISIBLE_DEVICES lists
    one device, and SLURM_LOCALID=5 is not an index into it."""
    env = {**launcher_env("srun", 5), "SLURM_GPUS_PER_TASK": "1", "CUDA_VISIBLE_DEVICES": "5"}
    plan = plan_pretrained(env=env, host=host)
    assert plan.kwargs["device_map"] == "cuda:0"
    assert plan.device is not None and plan.device.physical_index == 5
    assert "SLURM_GPUS_PER_TASK is set" in plan.reasons["device_map"]
    # --gpu-bind=none binds nothing: the local rank indexes the visible devices again
    env = {**VISIBLE, **launcher_env("srun", 5), "SLURM_GPU_BIND": "none"}
    with pytest.raises(RankError):
        pretrained_kwargs(env=env, host=host)


def test_a_one_process_slurm_job_is_not_a_rank(host: Host) -> None:
    """A batch job of one task keeps the single-process choice (device_map over every visible
    device), even though SLURM_LOCALID=0 is set."""
    env = {**VISIBLE, **launcher_env("srun", 0), "SLURM_NTASKS": "1", "SLURM_STEP_NUM_TASKS": "1"}
    env["SLURM_PROCID"] = "0"
    assert pretrained_kwargs(env=env, host=host)["device_map"] == "auto"


def test_init_process_group_refuses_before_joining(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch.distributed as dist

    joined: list[object] = []
    monkeypatch.setattr(dist, "init_process_group", lambda *a, **k: joined.append(k))
    for style in STYLES:
        with pytest.raises(RankError, match="local rank 5"):
            init_process_group(env={**VISIBLE, **launcher_env(style, 5)}, host=host)
    assert joined == []


def env_args(env: dict[str, str]) -> list[str]:
    return [a for k, v in env.items() for a in ("--env", f"{k}={v}")]


@pytest.mark.parametrize("style", STYLES)
def test_env_names_the_rank_the_count_and_the_fix(
    style: str, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {**VISIBLE, **launcher_env(style, 5)}
    code, out, _ = run_main(capsys, "env", "--host", H100, *env_args(env))
    assert code == 0
    flat = " ".join(out.split())
    assert "device_map='cuda:0'" not in flat
    assert "Recommended settings none for this process: local rank 5" in flat
    assert "! local rank 5" in flat and "this process sees 4" in flat
    assert "start at most 4 process(es) per node" in flat
    code, out, _ = run_main(capsys, "env", "--json", "--host", H100, *env_args(env))
    d = json.loads(out)
    assert d["settings"]["from_pretrained"] is None
    assert d["settings"]["error"]["what"].startswith("local rank 5")
    assert any(w.startswith("local rank 5") for w in d["warnings"])


def test_env_cli_with_local_rank_3_and_each_bad_value(capsys: pytest.CaptureFixture[str]) -> None:
    args = [*env_args(VISIBLE), "--env", "LOCAL_RANK=3"]
    code, out, _ = run_main(capsys, "env", "--json", "--host", H100, *args)
    assert code == 0
    settings = json.loads(out)["settings"]
    assert settings["from_pretrained"]["kwargs"]["device_map"] == "cuda:3"
    # a lone LOCAL_RANK: the load stands, TrainingArguments would fail (no RANK, no address)
    assert settings["training_arguments"] is None
    assert "unset LOCAL_RANK" in settings["error"]["fix"]
    code, text, _ = run_main(capsys, "env", "--host", H100, *args)
    assert "TrainingArguments: none for this process: LOCAL_RANK=3 is set without a launcher" in (
        " ".join(text.split())
    )
    for bad in ("5", "7", "x", "-3"):
        args = [*env_args(VISIBLE), "--env", f"LOCAL_RANK={bad}"]
        _, out, _ = run_main(capsys, "env", "--json", "--host", H100, *args)
        d = json.loads(out)
        assert d["settings"]["from_pretrained"] is None, bad
        assert "LOCAL_RANK" in d["settings"]["error"]["what"]
    _, out, _ = run_main(
        capsys, "env", "--json", "--host", H100, *env_args(VISIBLE), "--env", "LOCAL_RANK=-1"
    )
    assert json.loads(out)["settings"]["from_pretrained"]["kwargs"]["device_map"] == "auto"


ROOT = Path(__file__).resolve().parents[1]
H100_8 = ROOT / "plugins/hwbackends-cuda/tests/hosts/h100-sxm-8.json"


def torchrun_env(local: int, **extra: str) -> dict[str, str]:
    """What torchrun sets for local rank ``local`` on the second of two 8-process nodes
    (https://docs.pytorch.org/docs/stable/elastic/run.html, "Environment Variables")."""
    return {
        "RANK": str(8 + local),
        "WORLD_SIZE": "16",
        "LOCAL_RANK": str(local),
        "LOCAL_WORLD_SIZE": "8",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
        **extra,
    }


@pytest.mark.parametrize("local", [0, 3, 7])
def test_local_rank_selects_its_own_device_on_an_eight_gpu_host(local: int) -> None:
    """Bug: LOCAL_RANK ignored (every rank on cuda:0) or off by one (rank 3 on cuda:4)."""
    host = Host.from_file(H100_8)
    env = torchrun_env(local)
    assert pretrained_kwargs(host=host, env=env)["device_map"] == f"cuda:{local}"
    plan = plan_pretrained(host=host, env=env)
    assert plan.device is not None and plan.device.torch_device == f"cuda:{local}"
    t = resolve_target(host=host, env=env, rank_of=process_rank)
    assert t.device is not None and (t.device.index, t.device.torch_device) == (
        local,
        f"cuda:{local}",
    )


def test_local_rank_counts_among_the_visible_devices() -> None:
    """LOCAL_RANK is a logical index: with physical GPUs 4-7 visible, rank 3 is cuda:3, the
    physical GPU 7 (torchrun's model: every rank of a node sees the same devices)."""
    host = Host.from_file(H100_8)
    env = torchrun_env(3, CUDA_VISIBLE_DEVICES="4,5,6,7")
    t = resolve_target(host=host, env=env, rank_of=process_rank)
    assert t.device is not None
    assert (t.device.torch_device, t.device.physical_index) == ("cuda:3", 7)
    assert pretrained_kwargs(host=host, env=env)["device_map"] == "cuda:3"


def test_init_process_group_binds_the_rank_to_its_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """init_process_group under torchrun on the 8-GPU host: the rank is bound to device
    LOCAL_RANK before the group forms, and the group gets the launcher's rank and world."""
    import torch
    import torch.distributed as dist

    bound: list[int] = []
    groups: list[dict[str, object]] = []
    monkeypatch.setattr(torch.accelerator, "set_device_index", bound.append)
    monkeypatch.setattr(dist, "init_process_group", lambda **kw: groups.append(kw))
    host = Host.from_file(H100_8)
    assert init_process_group(host=host, env=torchrun_env(3)) == "nccl"
    assert bound == [3]
    (kw,) = groups
    assert (kw["backend"], kw["rank"], kw["world_size"]) == ("nccl", 11, 16)
    assert kw["init_method"] == "tcp://10.0.0.1:29500"
