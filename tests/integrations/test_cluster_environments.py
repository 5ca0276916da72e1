"""Cluster environments: detect_launch() under each one's documented variables, a real gloo
group from them, and the same sets read by Lightning's own detectors.

Each set cites where its variables come from (docs/reference/launchers.md §2).
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch  # noqa: F401 - installed by scripts/test.sh: a missing one fails, not skips

from hwbackends.distributed import LaunchError, detect_launch

# -- detect_launch on each environment's variables ------------------------------------------

# training-operator v1.9.0 envvar.go/master.go: a 1 Master + 1 Worker job, nprocPerNode unset;
# this is the Worker (index 0, so RANK 1).
KUBEFLOW_POD = {
    "MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456", "PET_MASTER_ADDR": "job-master-0",
    "PET_MASTER_PORT": "23456", "WORLD_SIZE": "2", "RANK": "1", "PET_NODE_RANK": "1",
    "PET_NNODES": "2", "PYTHONUNBUFFERED": "1",
}  # fmt: skip


def test_kubeflow_pod_is_one_process_per_pod() -> None:
    info = detect_launch(KUBEFLOW_POD)
    assert (info.launcher, info.rank, info.world_size, info.local_rank) == ("kubeflow", 1, 2, 0)
    assert (info.master_addr, info.master_port) == ("job-master-0", 23456)
    # Trainer-style pods that pass only PET_* (torchrun's own argument variables)
    pet = {k: v for k, v in KUBEFLOW_POD.items() if k.startswith("PET_")}
    assert detect_launch(pet).to_dict() == {**info.to_dict(), "sources": detect_launch(pet).sources}
    # operator v1.5.0: WORLD_SIZE counts pods, no PET_*: torchrun-style, the same ranks
    old = {k: v for k, v in KUBEFLOW_POD.items() if not k.startswith("PET_")}
    assert (detect_launch(old).rank, detect_launch(old).world_size) == (1, 2)


def test_kubeflow_pod_with_several_processes_per_pod_needs_torchrun() -> None:
    # nprocPerNode=4: WORLD_SIZE = 2 pods × 4, RANK still the pod's index
    pod = {**KUBEFLOW_POD, "WORLD_SIZE": "8", "PET_NPROC_PER_NODE": "4"}
    with pytest.raises(
        LaunchError,
        match=r"^this Kubeflow PyTorchJob pod runs the script once, but WORLD_SIZE=8 counts 4 "
        r"processes per pod \(PET_NPROC_PER_NODE\) while RANK=1 is the pod's index\. .*Fix: "
        r"make the container's command `torchrun train\.py`",
    ):
        detect_launch(pod)
    with pytest.raises(LaunchError, match=r"has WORLD_SIZE=3 but PET_NNODES=2 pods"):
        detect_launch({**KUBEFLOW_POD, "WORLD_SIZE": "3"})
    # torchrun in that pod sets its workers' own RANK/LOCAL_RANK: torchrun wins
    worker = {**pod, "RANK": "5", "LOCAL_RANK": "1", "GROUP_RANK": "1",
              "TORCHELASTIC_RUN_ID": "job"}  # fmt: skip
    info = detect_launch(worker)
    assert (info.launcher, info.rank, info.world_size, info.local_rank) == ("torchrun", 5, 8, 1)


def test_lsf_jsrun_task(tmp_path: Path) -> None:
    rankfile = tmp_path / "rankfile"
    rankfile.write_text("batch1\nh41n04\nh41n04\nh41n05\nh41n05\n")  # launch node, then tasks
    env = {"LSB_JOBID": "123456", "LSB_DJOB_RANKFILE": str(rankfile),
           "JSM_NAMESPACE_RANK": "3", "JSM_NAMESPACE_SIZE": "4",
           "JSM_NAMESPACE_LOCAL_RANK": "1"}  # fmt: skip
    info = detect_launch(env)
    assert (info.launcher, info.rank, info.world_size, info.local_rank) == ("lsf", 3, 4, 1)
    assert (info.master_addr, info.master_port) == ("h41n04", 10456)
    # the LSF batch shell (no jsrun task) is one process; mpirun inside it is MPI
    shell = {"LSB_JOBID": "123456", "LSB_DJOB_RANKFILE": str(rankfile),
             "LSB_MCPU_HOSTS": "batch1 1 h41n04 42 h41n05 42"}  # fmt: skip
    assert detect_launch(shell).launcher == "none"
    mpi = {**shell, "OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4",
           "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
           "MASTER_ADDR": "h41n04"}  # fmt: skip
    assert (detect_launch(mpi).launcher, detect_launch(mpi).rank) == ("mpi", 2)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # a FIFO planted as the rank file must not hang the rank
    for bad in (tmp_path / "missing", fifo, tmp_path):
        with pytest.raises(LaunchError, match="neither MASTER_ADDR nor a readable LSB_DJOB_RANK"):
            detect_launch({**env, "LSB_DJOB_RANKFILE": str(bad)})


def test_tpu_pod_host() -> None:
    env = {"TPU_WORKER_ID": "2", "TPU_WORKER_HOSTNAMES": "t1v-0,t1v-1,t1v-2,t1v-3",
           "TPU_SKIP_MDS_QUERY": "true", "TPU_ACCELERATOR_TYPE": "v5litepod-16"}  # fmt: skip
    info = detect_launch(env)
    assert (info.launcher, info.rank, info.world_size, info.local_rank) == ("tpu", 2, 4, 0)
    assert (info.master_addr, info.master_port) == ("t1v-0", 29500)
    with pytest.raises(LaunchError, match=r"rank 4 is not below the world size 4"):
        detect_launch({**env, "TPU_WORKER_ID": "4"})


def test_sagemaker_host() -> None:
    env = {"SM_HOSTS": '["algo-1","algo-2"]', "SM_CURRENT_HOST": "algo-2", "SM_NUM_GPUS": "8"}
    info = detect_launch(env)
    assert (info.launcher, info.rank, info.world_size, info.local_rank) == ("sagemaker", 1, 2, 0)
    assert (info.master_addr, info.master_port) == ("algo-1", 7777)
    for bad in ({**env, "SM_HOSTS": "algo-1"}, {**env, "SM_CURRENT_HOST": "algo-9"}):
        with pytest.raises(LaunchError, match=r"does not place this host\. Expected SM_HOSTS"):
            detect_launch(bad)


# -- a real gloo group from each environment's variables ------------------------------------

WORKER = """
import json, os, sys
import torch, torch.distributed as dist
from hwbackends.distributed import detect_launch, init_process_group
info = detect_launch()
init_process_group()
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(json.dumps({"launcher": info.launcher, "rank": dist.get_rank(), "sum": t.item(),
                  "world": dist.get_world_size()}))
dist.destroy_process_group()
"""


def _free_port() -> int:
    for _ in range(200):
        port = random.randint(20000, 60000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port")


def _sets(tmp: Path) -> dict[str, list[dict[str, str]]]:
    port = str(_free_port())
    rankfile = tmp / "rankfile"
    rankfile.write_text("launch\n127.0.0.1\n127.0.0.1\n")
    return {
        "kubeflow": [{**{k: v for k, v in KUBEFLOW_POD.items() if k != "MASTER_ADDR"},
                      "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "RANK": str(r),
                      "PET_NODE_RANK": str(r)} for r in (0, 1)],
        "lsf": [{"LSB_JOBID": "77", "LSB_DJOB_RANKFILE": str(rankfile), "MASTER_PORT": port,
                 "JSM_NAMESPACE_RANK": str(r), "JSM_NAMESPACE_SIZE": "2",
                 "JSM_NAMESPACE_LOCAL_RANK": str(r)} for r in (0, 1)],
        "tpu": [{"TPU_WORKER_ID": str(r), "TPU_WORKER_HOSTNAMES": "127.0.0.1,localhost",
                 "MASTER_PORT": port} for r in (0, 1)],
        "sagemaker": [{"SM_HOSTS": '["127.0.0.1","localhost"]',
                       "SM_CURRENT_HOST": h, "MASTER_PORT": port}
                      for h in ("127.0.0.1", "localhost")],
    }  # fmt: skip


@pytest.mark.parametrize("launcher", ["kubeflow", "lsf", "tpu", "sagemaker"])
def test_init_process_group_forms_a_gloo_group(tmp_path: Path, launcher: str) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            ("SLURM_", "OMPI_", "PMI_", "MV2_", "LSB_", "JSM_", "PET_", "TPU_", "SM_")
        )
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(HWBACKENDS_PLUGINS="", OMP_NUM_THREADS="1")  # fmt: skip
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER], env={**env, **extra},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for extra in _sets(tmp_path)[launcher]
    ]  # fmt: skip
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=240))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
        seen = json.loads(out.strip().splitlines()[-1])
        assert (seen["launcher"], seen["world"], seen["sum"]) == (launcher, 2, 3.0)


# -- Lightning's detectors on generated sets --------------------------------------------------

# Lightning 2.6.5 src/lightning/fabric/plugins/environments/ (read in code), for the
# detectors that cannot run here: MPIEnvironment needs mpi4py and a live MPI world (rank and
# size from MPI.COMM_WORLD, address broadcast from rank 0's host name, a free port), and
# XLAEnvironment needs torch_xla (torch_xla.runtime.global_ordinal/world_size). Lightning
# tries TorchElastic, then Slurm, then LSF, then MPI (connector.py
# _choose_and_init_cluster_environment); Kubeflow is never auto-detected.
LIGHTNING_FACTS = {
    "MPIEnvironment": "mpi4py COMM_WORLD rank/size; address = rank 0's hostname; free port",
    "XLAEnvironment": "torch_xla.runtime global_ordinal/world_size/local_ordinal",
    "order": "TorchElastic, SLURM, LSF, MPI; Kubeflow only when passed explicitly",
}


def _generated(tmp: Path, n: int) -> list[tuple[str, dict[str, str]]]:
    rng = random.Random(22)
    rankfile = tmp / "rankfile"
    me = socket.gethostname()  # Lightning's LSF node rank looks this host up in the file
    rankfile.write_text(f"launch\n{me}\n{me}\nh02\nh02\n")
    out: list[tuple[str, dict[str, str]]] = []
    for i in range(n):
        world = rng.randint(1, 64)
        rank = rng.randrange(world)
        per = rng.choice([1, 2, 4, 8])
        port = str(rng.randint(1025, 65535))
        kind = ("torchelastic", "slurm", "lsf", "kubeflow")[i % 4]
        if kind == "torchelastic":
            env = {
                "RANK": str(rank),
                "WORLD_SIZE": str(world),
                "LOCAL_RANK": str(rank % per),
                "GROUP_RANK": str(rank // per),
                "TORCHELASTIC_RUN_ID": "r",
                "MASTER_ADDR": f"n{rng.randint(0, 99)}",
                "MASTER_PORT": port,
            }
        elif kind == "slurm":
            job = str(rng.randint(1, 10**8))
            env = {
                "SLURM_PROCID": str(rank),
                "SLURM_NTASKS": str(world),
                "SLURM_STEP_NUM_TASKS": str(world),
                "SLURM_LOCALID": str(rank % per),
                "SLURM_NTASKS_PER_NODE": str(per),  # Lightning refuses --ntasks alone
                "SLURM_NODEID": str(rank // per),
                "SLURM_JOB_ID": job,
                "SLURM_JOB_NAME": "train",
                "SLURM_NODELIST": f"gpu[{rng.randint(1, 9)}-20]",
                "SLURM_JOB_NODELIST": "",
                "SLURM_STEP_NODELIST": "",
            }
            env["SLURM_JOB_NODELIST"] = env["SLURM_STEP_NODELIST"] = env["SLURM_NODELIST"]
        elif kind == "lsf":
            env = {
                "LSB_JOBID": str(rng.randint(1, 10**7)),
                "LSB_DJOB_RANKFILE": str(rankfile),
                "JSM_NAMESPACE_RANK": str(rank),
                "JSM_NAMESPACE_SIZE": str(world),
                "JSM_NAMESPACE_LOCAL_RANK": str(rank % per),
            }
        else:
            env = {
                "RANK": str(rank),
                "WORLD_SIZE": str(world),
                "PET_NODE_RANK": str(rank),
                "PET_NNODES": str(world),
                "MASTER_ADDR": "job-master-0",
                "MASTER_PORT": port,
            }
        out.append((kind, env))  # fmt: skip
    return out


LIGHTNING = """
import json, os, sys
from lightning_fabric.plugins.environments import (KubeflowEnvironment, LSFEnvironment,
    SLURMEnvironment, TorchElasticEnvironment)
CLASSES = {"torchelastic": TorchElasticEnvironment, "slurm": SLURMEnvironment,
           "lsf": LSFEnvironment, "kubeflow": KubeflowEnvironment}
out = []
for kind, env in json.load(sys.stdin):
    os.environ.clear()
    os.environ.update(env)
    os.environ["PATH"] = ""  # no srun on PATH: Lightning's srun-used check stays quiet
    cls = CLASSES[kind]
    detected = None if kind == "kubeflow" else cls.detect()
    e = cls()
    out.append({"detected": detected, "rank": e.global_rank(), "world": e.world_size(),
                "local": e.local_rank(), "addr": e.main_address, "port": e.main_port})
json.dump(out, sys.stdout)
"""


def test_detect_launch_agrees_with_lightning_on_generated_sets(tmp_path: Path) -> None:
    import lightning_fabric  # noqa: F401 - the dev extra installs it

    sets = _generated(tmp_path, 400)
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", LIGHTNING],
        input=json.dumps(sets),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    theirs = json.loads(proc.stdout)
    assert len(theirs) == len(sets) == 400
    for (kind, env), lit in zip(sets, theirs, strict=True):
        ours = detect_launch(env)
        assert lit["detected"] in (True, None), (kind, env)
        assert (ours.rank, ours.world_size, ours.local_rank) == (
            lit["rank"], lit["world"], lit["local"],
        ), (kind, env, lit)  # fmt: skip
        assert (ours.master_addr, ours.master_port) == (lit["addr"], lit["port"]), (kind, lit)
    assert set(LIGHTNING_FACTS) == {"MPIEnvironment", "XLAEnvironment", "order"}
