"""Launcher detection at its edges: bounds, defaults and sources of each value.

Each case is a set of variables a launcher sets (torchrun: https://docs.pytorch.org/docs/stable/
elastic/run.html; Slurm srun: https://slurm.schedmd.com/srun.html "OUTPUT ENVIRONMENT
VARIABLES"; Open MPI: https://docs.open-mpi.org/en/main/tuning-apps/environment-var.html),
and what ``detect_launch`` must make of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hwbackends.distributed import LaunchError, detect_launch


def test_the_highest_tcp_port_is_a_port() -> None:
    env = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "n0", "MASTER_PORT": "65535"}
    assert detect_launch(env).master_port == 65535
    with pytest.raises(LaunchError, match="MASTER_PORT=65536 is not a TCP port"):
        detect_launch({**env, "MASTER_PORT": "65536"})
    with pytest.raises(LaunchError, match=r"MASTER_PORT='0' is not a whole number ≥ 1"):
        detect_launch({**env, "MASTER_PORT": "0"})


def test_torchrun_style_without_local_rank_is_local_rank_0() -> None:
    info = detect_launch({"RANK": "0", "WORLD_SIZE": "1"})
    assert (info.launcher, info.rank, info.world_size, info.local_rank) == ("torchrun", 0, 1, 0)
    assert (info.master_addr, info.master_port, info.local_world_size) == (None, None, None)


def test_nothing_set_is_one_process() -> None:
    info = detect_launch({})
    assert (info.launcher, info.rank, info.world_size, info.local_rank) == ("none", 0, 1, 0)
    # only one of a pair is not a launch either
    assert detect_launch({"SLURM_PROCID": "0"}).launcher == "none"
    assert detect_launch({"SLURM_NTASKS": "2"}).launcher == "none"
    assert detect_launch({"OMPI_COMM_WORLD_RANK": "0"}).launcher == "none"


def test_the_process_environment_is_read_when_none_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for k in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK",
              "PMI_RANK", "MV2_COMM_WORLD_RANK"):  # fmt: skip
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "n0")
    monkeypatch.setenv("MASTER_PORT", "29500")
    assert (detect_launch().launcher, detect_launch().rank) == ("torchrun", 1)


# what srun sets for a step's task (SLURM_STEP_NUM_TASKS marks a task of a step)
SRUN = {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_STEP_NUM_TASKS": "2", "SLURM_LOCALID": "1"}


def test_srun_address_and_port() -> None:
    info = detect_launch({**SRUN, "SLURM_JOB_NODELIST": "gpu[07-08]", "SLURM_JOB_ID": "123456"})
    assert (info.master_addr, info.master_port) == ("gpu07", 15000 + 3456)
    assert info.sources["master_port"] == "15000 + last four digits of SLURM_JOB_ID"
    given = detect_launch({**SRUN, "MASTER_ADDR": "head", "SLURM_JOB_ID": "123456"})
    assert (given.master_addr, given.sources["master_addr"]) == ("head", "MASTER_ADDR")
    no_job = detect_launch({**SRUN, "SLURM_JOB_NODELIST": "gpu07"})
    assert no_job.master_port == 29500  # torch.distributed's default
    with pytest.raises(LaunchError, match="srun started this task but no node list is set"):
        detect_launch(SRUN)
    one = detect_launch({"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_STEP_NUM_TASKS": "1"})
    assert (one.launcher, one.master_addr, one.local_rank) == ("slurm", None, 0)


OMPI = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"}


def test_mpi_sizes_are_at_least_one() -> None:
    with pytest.raises(LaunchError, match=r"OMPI_COMM_WORLD_SIZE='0' is not a whole number ≥ 1"):
        detect_launch({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "0"})
    local0 = {**OMPI, "OMPI_COMM_WORLD_LOCAL_SIZE": "0", "MASTER_ADDR": "n0"}
    with pytest.raises(LaunchError, match="OMPI_COMM_WORLD_LOCAL_SIZE='0' is not a whole number"):
        detect_launch(local0)


def test_mpi_local_rank_sources() -> None:
    one_node = detect_launch({**OMPI, "OMPI_COMM_WORLD_LOCAL_SIZE": "4"})
    assert (one_node.local_rank, one_node.sources["local_rank"]) == (3, "the rank (one node)")
    assert one_node.master_addr == "localhost" and one_node.master_port == 29500
    nodes = detect_launch({**OMPI, "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_ADDR": "n0"})
    assert (nodes.local_rank, nodes.sources["local_rank"]) == (0, "unknown: 0")
    given = detect_launch({**OMPI, "OMPI_COMM_WORLD_LOCAL_RANK": "1", "MASTER_ADDR": "n0",
                           "MASTER_PORT": "1234"})  # fmt: skip
    assert (given.local_rank, given.sources["local_rank"]) == (1, "OMPI_COMM_WORLD_LOCAL_RANK")
    assert (given.master_port, given.sources["master_port"]) == (1234, "MASTER_PORT")
    assert "master_port" not in nodes.sources
    with pytest.raises(LaunchError, match="nothing says how many ranks share a node"):
        detect_launch(OMPI)


def test_one_mpi_rank_without_a_local_size_is_one_process() -> None:
    """A world of one needs no address: only a world above one asks which node is first."""
    info = detect_launch({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1"})
    assert (info.launcher, info.world_size, info.local_rank) == ("mpi", 1, 0)


def test_lsf_takes_master_addr_over_the_rankfile(tmp_path: Path) -> None:
    """The rankfile's first compute host is the address only when none is given."""
    rankfile = tmp_path / "rankfile"
    rankfile.write_text("launchnode\nnodeA\nnodeB\n", encoding="utf-8")
    env = {"JSM_NAMESPACE_RANK": "0", "JSM_NAMESPACE_SIZE": "2",
           "LSB_DJOB_RANKFILE": str(rankfile)}  # fmt: skip
    assert detect_launch(env).master_addr == "nodeA"
    assert detect_launch({**env, "MASTER_ADDR": "10.0.0.5"}).master_addr == "10.0.0.5"


def test_no_launcher_is_local_rank_zero_and_pet_nnodes_alone_is_no_launcher() -> None:
    """Kubeflow's per-host launch needs both PET_NNODES and PET_NODE_RANK."""
    alone = detect_launch({})
    assert (alone.launcher, alone.rank, alone.local_rank, alone.world_size) == ("none", 0, 0, 1)
    assert detect_launch({"PET_NNODES": "2"}).launcher == "none"


@pytest.mark.parametrize("value", ["-1", "0"])
def test_a_lone_local_rank_of_minus_one_or_zero_is_local_rank_zero(value: str) -> None:
    """-1 means "not launched" and 0 is the first rank: both are local rank 0."""
    info = detect_launch({"LOCAL_RANK": value})
    assert (info.launcher, info.local_rank, info.local_world_size) == ("none", 0, 1)
