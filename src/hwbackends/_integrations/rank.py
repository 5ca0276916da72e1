"""This process's local rank, as the device choice reads it: ``process_rank``.

``LOCAL_RANK`` first (torchrun and ``accelerate launch`` set it; ``-1`` means "not launched",
as Accelerate reads it), then the local rank of the launcher ``detect_launch`` finds (srun's
``SLURM_LOCALID``, mpirun's ``OMPI_COMM_WORLD_LOCAL_RANK`` / ``MPI_LOCALRANKID``, ...). The
device for that rank, and the error when it has none, is ``_selection/target.py``'s.
"""

from __future__ import annotations

from collections.abc import Mapping

from hwbackends._integrations.launch import LaunchError, detect_launch
from hwbackends._selection.target import LocalRank, RankError

__all__ = ["process_rank", "slurm_binds_devices"]


def process_rank(env: Mapping[str, str]) -> LocalRank | None:
    """This process's local rank under its launcher, or None for a single process.

    ``LOCAL_RANK`` is read as Python's ``int()`` reads it (torch and Accelerate read it so);
    text ``int()`` refuses, or a negative number other than -1, is a ``RankError``. Without
    ``LOCAL_RANK``, a launch of more than one process whose launcher names this process's
    local rank (srun, mpirun, jsrun) gives that rank.
    """
    raw = env.get("LOCAL_RANK")
    if raw is not None:
        try:
            value = int(raw)
        except ValueError:
            raise RankError(
                f"LOCAL_RANK={raw!r} is not a number",
                "the local rank torchrun or accelerate launch sets: 0, 1, 2, ... (or -1, which "
                "Accelerate reads as 'not launched')",
                "unset LOCAL_RANK, or start the script with torchrun or accelerate launch",
            ) from None
        if value == -1:
            return None
        if value < 0:
            raise RankError(
                f"LOCAL_RANK={raw!r} is negative",
                "the local rank torchrun or accelerate launch sets: 0, 1, 2, ... (or -1, which "
                "Accelerate reads as 'not launched')",
                "unset LOCAL_RANK, or start the script with torchrun or accelerate launch",
            )
        return LocalRank(value, f"LOCAL_RANK={raw.strip()}", "torchrun")
    try:
        info = detect_launch(env)
    except LaunchError:
        # variables that describe no launch (WORLD_SIZE without RANK...): no rank to place by;
        # init_process_group, which needs one, reports them
        return None
    if info.launcher == "none" or info.world_size <= 1:
        return None
    src = info.sources.get("local_rank", "")
    if src in env:
        source = f"{src}={env[src].strip()}"
    elif info.launcher == "mpi" and info.local_world_size == info.world_size:
        # one node: the MPI rank is the local rank (detect_launch says so in its sources)
        source = f"{info.sources.get('rank', 'the MPI rank')}={info.rank}, all ranks on one node"
    else:
        return None  # one process per host or pod: it uses the host's devices as one process
    bound = slurm_binds_devices(env) if info.launcher == "slurm" else ""
    return LocalRank(info.local_rank, source, info.launcher, bound)


def slurm_binds_devices(env: Mapping[str, str]) -> str:
    """The variable saying srun gave each task its own GPUs, or "".

    ``--gpus-per-task`` "will implicitly set --gpu-bind=per_task:<gpus_per_task>" and
    ``--ntasks-per-gpu`` implies ``--gpu-bind=single`` (srun(1), Slurm 23.02 and later); with a
    binding Slurm sets each task's ``CUDA_VISIBLE_DEVICES`` to its own GPUs, so the task's
    device is its first visible one whatever ``SLURM_LOCALID`` is. ``--gpu-bind=none`` binds
    nothing.
    """
    for name in ("SLURM_GPUS_PER_TASK", "SLURM_NTASKS_PER_GPU"):
        if env.get(name, "").strip():
            return name
    words = {t.strip() for t in env.get("SLURM_GPU_BIND", "").split(",") if t.strip()}
    if words - {"verbose", "quiet"} and "none" not in words:
        return "SLURM_GPU_BIND"
    return ""
