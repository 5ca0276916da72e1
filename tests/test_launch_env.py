"""Launcher variables -> ranks and rendezvous address; Slurm hostlists; endpoints."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwbackends import HwBackendsError
from hwbackends.distributed import (
    LaunchError,
    detect_launch,
    expand_hostlist,
    launch_plan,
    parse_endpoint,
)


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("node[01-03,7],gpu5", ["node01", "node02", "node03", "node7", "gpu5"]),
        ("a,b", ["a", "b"]),
        ("n[8-11]", ["n8", "n9", "n10", "n11"]),
        ("n[098-101]", ["n098", "n099", "n100", "n101"]),
        ("r[1-2]-n[1-2]", ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]),
        ("gpu-[1,3]x", ["gpu-1x", "gpu-3x"]),
        ("localhost", ["localhost"]),
        # Slurm's hostlist_create_dims splits on "\t, \n" and _next_tok skips empty tokens
        # (SchedMD/slurm src/common/hostlist.c, slurm-26-05-3-1)
        ("a,,b", ["a", "b"]),
        (",a,", ["a"]),
        ("a b", ["a", "b"]),
        (" n[1-2]\tm\n", ["n1", "n2", "m"]),
        ("a, b ,\t,c", ["a", "b", "c"]),
        ("", []),
        (" , ", []),
    ],
)
def test_expand_hostlist(text: str, hosts: list[str]) -> None:
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("bad", ["n[1-", "n]1[", "n[3-1]", "n[a-b]", "n[1[2]]", "n[1, 2]"])
def test_malformed_hostlist_is_refused(bad: str) -> None:
    with pytest.raises(LaunchError, match=r"hostlist .* is malformed: .* Expected Slurm hostlist"):
        expand_hostlist(bad)


prefixes = st.text(alphabet="abcxyz-", min_size=1, max_size=5)
numbers = st.lists(
    st.tuples(st.integers(0, 120), st.integers(0, 4), st.integers(1, 3)),  # start, count, width
    min_size=1,
    max_size=3,
)


@given(st.lists(st.tuples(prefixes, numbers), min_size=1, max_size=4))
def test_hostlist_round_trip(groups: list[tuple[str, list[tuple[int, int, int]]]]) -> None:
    """Compress known hosts the way Slurm writes them; expanding gives them back, in order."""
    parts, expected = [], []
    for prefix, ranges in groups:
        specs = []
        for start, count, width in ranges:
            end = start + count
            lo, hi = str(start).zfill(width), str(end).zfill(width)
            if len(lo) != len(hi) and lo.startswith("0"):
                hi = hi.zfill(len(lo))  # padded ranges keep one width, as Slurm prints them
            specs.append(lo if count == 0 else f"{lo}-{hi}")
            pad = len(lo) if lo.startswith("0") else 0
            expected += [prefix + str(n).zfill(pad) for n in range(start, end + 1)]
        parts.append(f"{prefix}[{','.join(specs)}]")
    assert expand_hostlist(",".join(parts)) == expected


SLURM = {  # what srun sets for one task of an 8-task step (srun(1), OUTPUT ENVIRONMENT VARIABLES)
    "SLURM_PROCID": "5",
    "SLURM_NTASKS": "8",
    "SLURM_STEP_NUM_TASKS": "8",
    "SLURM_LOCALID": "1",
    "SLURM_NTASKS_PER_NODE": "4",
    "SLURM_JOB_NODELIST": "gpu[07-08]",
    "SLURM_JOB_ID": "4242123",
}


def test_slurm_address_is_first_host_and_port_from_job_id() -> None:
    info = detect_launch(SLURM)
    assert info.launcher == "slurm"
    assert info.torch_env() == {
        "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
        "MASTER_ADDR": "gpu07", "MASTER_PORT": str(15000 + 2123),
    }  # fmt: skip
    stepped = detect_launch({**SLURM, "SLURM_STEP_NODELIST": "gpu[03,07]", "MASTER_PORT": "9"})
    assert (stepped.master_addr, stepped.master_port) == ("gpu03", 9)


def test_torchrun_variables_win_over_the_allocation() -> None:
    env = {**SLURM, "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0",
           "MASTER_ADDR": "h", "MASTER_PORT": "29500"}  # fmt: skip
    assert detect_launch(env).launcher == "torchrun"


def test_single_node_mpirun_is_localhost() -> None:
    env = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
           "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}  # fmt: skip
    info = detect_launch(env)
    assert (info.launcher, info.rank, info.local_rank, info.master_addr, info.master_port) == (
        "mpi", 1, 1, "localhost", 29500,
    )  # fmt: skip


def test_multi_node_mpirun_without_address_says_what_to_set() -> None:
    env = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
           "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}  # fmt: skip
    with pytest.raises(
        LaunchError,
        match=r"^the 4 MPI ranks span several nodes \(OMPI_COMM_WORLD_LOCAL_SIZE=2\), and "
        r"MASTER_ADDR is not set, so rank 0's address is unknown\. Expected MASTER_ADDR .* "
        r"Fix: pass it through mpirun, e\.g\. mpirun -x MASTER_ADDR=\$\(hostname\)",
    ):
        detect_launch(env)
    assert detect_launch({**env, "MASTER_ADDR": "n0"}).master_addr == "n0"
    with pytest.raises(LaunchError, match="nothing says how many ranks share a node"):
        detect_launch({"PMI_RANK": "0", "PMI_SIZE": "2"})


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RANK": "x", "WORLD_SIZE": "2"}, r"RANK='x' is not a whole number ≥ 0"),
        (
            {"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
            r"rank 2 is not below the world size 2 \(RANK, WORLD_SIZE\)",
        ),
        ({"RANK": "0", "WORLD_SIZE": "2"}, r"MASTER_ADDR or MASTER_PORT is not"),
        ({**SLURM, "MASTER_PORT": "70000"}, r"MASTER_PORT=70000 is not a TCP port"),
        (
            {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2"},
            r"^srun started this task but no node list is set",
        ),
    ],
)
def test_bad_launcher_variables(env: dict[str, str], message: str) -> None:
    with pytest.raises(LaunchError, match=message):
        detect_launch(env)


def test_no_launcher_is_one_process() -> None:
    info = detect_launch({})
    assert (info.launcher, info.rank, info.world_size, info.master_addr) == ("none", 0, 1, None)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("n0:29500", ("n0", 29500)),
        ("[fd00::1]:1", ("fd00::1", 1)),
        ("1.2.3.4:65535", ("1.2.3.4", 65535)),
    ],
)
def test_parse_endpoint(text: str, parsed: tuple[str, int]) -> None:
    assert parse_endpoint(text) == parsed


@pytest.mark.parametrize("bad", ["n0", "n0:0", "n0:65536", ":29500", "n0:x", "fd00::1:5", "a b:1"])
def test_bad_endpoint_exits_2(bad: str) -> None:
    with pytest.raises(HwBackendsError, match=r"is not HOST:PORT\. Expected a host name"):
        launch_plan(2, nnodes=2, rdzv_endpoint=bad, env={"HWBACKENDS_PLUGINS": ""})
    proc = subprocess.run(
        [sys.executable, "-m", "hwbackends", "launch-plan", "--nnodes", "2",
         "--rdzv-endpoint", bad, "t.py"],
        capture_output=True, text=True, env={"HWBACKENDS_PLUGINS": "", "PATH": ""}, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"hwbackends: error: rendezvous endpoint {bad!r} is not")


def test_slurm_plan_needs_no_endpoint_across_nodes() -> None:
    env = {"HWBACKENDS_PLUGINS": ""}
    plan = launch_plan(2, nnodes=3, env=env, scheduler="slurm", script=["t.py"])
    assert (plan.torchrun, plan.accelerate) == ("", "")
    assert "#SBATCH --nodes=3\n#SBATCH --ntasks-per-node=2\n" in plan.sbatch
    assert plan.sbatch.endswith("srun --kill-on-bad-exit=1 python t.py\n")
    with pytest.raises(HwBackendsError, match="needs a rendezvous endpoint"):
        launch_plan(2, nnodes=3, env=env, script=["t.py"])


# -- precedence: the process's own launcher wins over the allocation ------------

# sbatch(1) OUTPUT ENVIRONMENT VARIABLES (slurm-26-05-3-1): a batch shell of --ntasks=3 has
# task 0's SLURM_PROCID/SLURM_LOCALID but none of the SLURM_STEP_* that srun sets per task.
BATCH = {"SLURM_JOB_ID": "4242123", "SLURM_JOB_NODELIST": "gpu[07-08]", "SLURM_NTASKS": "3",
         "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_NNODES": "2",
         "SLURM_TASKS_PER_NODE": "2,1", "SLURM_GTIDS": "0"}  # fmt: skip
HYDRA_RANK_2 = {"PMI_RANK": "2", "PMI_SIZE": "3", "MPI_LOCALRANKID": "0",
                "MPI_LOCALNRANKS": "1", "MASTER_ADDR": "gpu07"}  # fmt: skip


def test_a_batch_shell_is_one_process() -> None:
    info = detect_launch(BATCH)
    assert (info.launcher, info.rank, info.world_size, info.master_addr) == ("none", 0, 1, None)
    assert "SLURM_STEP_NUM_TASKS is unset" in info.sources["rank"]
    salloc = {k: v for k, v in BATCH.items() if k not in ("SLURM_PROCID", "SLURM_LOCALID")}
    assert detect_launch(salloc).launcher == "none"
    # `srun --pty bash` (an interactive step): one task
    step = {**BATCH, "SLURM_STEP_NUM_TASKS": "1", "SLURM_NTASKS": "1", "SLURM_STEP_ID": "0"}
    assert (detect_launch(step).launcher, detect_launch(step).world_size) == ("slurm", 1)


def test_mpi_ranks_win_over_the_allocation() -> None:
    # mpirun in the batch shell; Hydra/Open MPI start their daemons with srun, so the ranks
    # also see a one-task-per-node step
    for extra in ({}, {"SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "1", "SLURM_STEP_ID": "0"}):
        info = detect_launch({**BATCH, **extra, **HYDRA_RANK_2})
        assert (info.launcher, info.rank, info.world_size) == ("mpi", 2, 3)
        assert info.master_port == 15000 + 2123  # the job's port, as under srun
    ompi = {**BATCH, "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "3",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
            "MASTER_ADDR": "gpu07"}  # fmt: skip
    assert (detect_launch(ompi).launcher, detect_launch(ompi).rank) == ("mpi", 1)


def test_srun_pmi2_variables_are_the_steps_own() -> None:
    # srun --mpi=pmi2 sets PMI_RANK/PMI_SIZE for its tasks (src/plugins/mpi/pmi2/mpi_pmi2.c)
    task = {**SLURM, "PMI_RANK": "5", "PMI_SIZE": "8"}
    info = detect_launch(task)
    assert (info.launcher, info.rank, info.local_rank, info.master_addr) == (
        "slurm", 5, 1, "gpu07",
    )  # fmt: skip


def test_torchrun_inside_an_srun_step_wins() -> None:
    worker = {
        **SLURM,
        "RANK": "13",
        "WORLD_SIZE": "32",
        "LOCAL_RANK": "5",
        "GROUP_RANK": "1",
        "TORCHELASTIC_RUN_ID": "4242123",
        "MASTER_ADDR": "gpu07",
        "MASTER_PORT": "17123",
    }
    info = detect_launch(worker)  # fmt: skip
    assert (info.launcher, info.rank, info.world_size, info.local_rank) == ("torchrun", 13, 32, 5)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"RANK": " 1", "WORLD_SIZE": " 2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, (1, 2, 0)),
        ({"RANK": "+1", "WORLD_SIZE": "02", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, (1, 2, 0)),
        ({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "-1"}, (0, 1, 0)),
        ({"WORLD_SIZE": "1"}, (0, 1, 0)),
    ],
)
def test_numbers_read_as_int_reads_them(env: dict[str, str], expected: tuple[int, ...]) -> None:
    info = detect_launch(env)
    assert (info.rank, info.world_size, info.local_rank) == expected


def test_world_size_without_rank_is_refused() -> None:
    with pytest.raises(
        LaunchError,
        match=r"^WORLD_SIZE=2 is set but RANK is not, so every process would take rank 0 "
        r"\(Accelerate reads a missing RANK as 0\)\. Expected RANK, WORLD_SIZE, MASTER_ADDR",
    ):
        detect_launch({"WORLD_SIZE": " 2"})


hosts_st = st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,6}", fullmatch=True), min_size=1, max_size=6)
seps = st.lists(st.sampled_from([",", " ", "\t", "\n", ", ", ",,", " ,\t"]), min_size=7, max_size=7)


@given(hosts_st, seps, st.sampled_from(["", " ", ",", "\n"]))
def test_hostlist_separators_and_empty_tokens(
    hosts: list[str], between: list[str], edge: str
) -> None:
    """Any run of Slurm's separators (tab, comma, space, newline) between names, and around
    them, gives the names back (hostlist.c _next_tok skips empty tokens)."""
    text = edge + "".join(h + between[i] for i, h in enumerate(hosts)) + edge
    assert expand_hostlist(text) == hosts
