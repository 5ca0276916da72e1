"""The Slurm batch scripts of a launch plan (``LaunchPlan.sbatch``, ``sbatch_torchrun``).

Part of ``hwbackends.distributed.launch_plan``, kept apart: text only, no I/O.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hwbackends._base.protocol import Backend


SLURM_PORT = "$((15000 + SLURM_JOB_ID % 10000))"  # detect_launch derives the same port

# The variables Slurm's GPU GRES plugin sets per job step, and only for the "gpu" GRES: by
# default all of them, narrowed by gres.conf's environment flags (nvidia_gpu_env,
# amd_gpu_env, intel_gpu_env, opencl_env) or AutoDetect (Slurm's gres.conf(5), "Flags";
# https://slurm.schedmd.com/gres.html, "GPU Management"). A GRES of another name (a
# Tenstorrent card, say) gets none of them: Slurm sets no visibility variable for it.
SLURM_GPU_VARIABLES = (
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "ZE_AFFINITY_MASK",
    "GPU_DEVICE_ORDINAL",
)


def sbatch_scripts(
    name: str,
    nnodes: int,
    nproc: int,
    script: Sequence[str],
    *,
    used_devices: int,
    gres: str | None,
    variables: Sequence[str],
) -> tuple[str, str]:
    """Two sbatch scripts: srun starting one task per device (each task finds its rank
    through ``init_process_group``), and srun starting torchrun once per node.

    Neither sets a visibility variable. The devices are requested: ``--gpus-per-node`` for
    a backend whose devices Slurm schedules as the ``gpu`` GRES, ``--gres=NAME:N`` for another
    declared GRES. Only for ``gpu`` does Slurm assign the job's devices and set the runtime's
    variable per job and step itself (``SLURM_GPU_VARIABLES``: those of them the backend's
    runtime reads, ``variables``); an exported list would select devices outside the
    allocation on a shared node. For another GRES, or none declared, the note says that
    Slurm sets no variable, so the job sees what the node's cgroup device constraint leaves
    it.
    """
    import textwrap

    head = ["#!/bin/bash", "#SBATCH --job-name=hwbackends", f"#SBATCH --nodes={nnodes}"]
    pin = []
    if used_devices and gres == "gpu":
        head.append(f"#SBATCH --gpus-per-node={used_devices}")
    elif used_devices and gres:
        head.append(f"#SBATCH --gres={gres}:{used_devices}")
    slurm_sets = [v for v in variables if v in SLURM_GPU_VARIABLES] if gres == "gpu" else []
    if used_devices and slurm_sets:
        note = (
            f"Slurm gives the job its {name} devices from its GRES allocation and sets "
            f"{' / '.join(slurm_sets)} per step itself; this script must not set them."
        )
    elif used_devices:
        if gres is None:
            got = (
                f"Request {used_devices} {name} devices per node as this cluster names them "
                f"(the {name} backend declares no Slurm GRES); Slurm"
            )
        else:
            got = f"Slurm gives the job its {name} devices from its '{gres}' GRES allocation but"
        why = (
            f"it sets only {' / '.join(SLURM_GPU_VARIABLES)}"
            if gres == "gpu"
            else "it sets them for the gpu GRES only"
        )
        note = (
            f"{got} sets no variable {name}'s runtime reads ({why}): the job sees the devices "
            "the node's cgroup device constraint leaves it."
        )
    if used_devices:
        pin += textwrap.wrap(note, 78, initial_indent="# ", subsequent_indent="# ")
    pin.append("set -euo pipefail")
    cmd = " ".join(shlex.quote(a) for a in script)
    python = "" if script[:1] and not script[0].endswith(".py") and script[0] != "-m" else "python "
    per_task = [
        *head,
        f"#SBATCH --ntasks-per-node={nproc}",
        *pin,
        "# srun sets SLURM_PROCID/SLURM_STEP_NUM_TASKS/SLURM_LOCALID for each task; the",
        "# script must call hwbackends.distributed.init_process_group(), which reads them",
        f"srun --kill-on-bad-exit=1 {python}{cmd}",
    ]
    per_node = [
        *head,
        "#SBATCH --ntasks-per-node=1",
        *pin,
        # No pipe into head: under pipefail, head exiting first kills scontrol with SIGPIPE
        # (exit 141) on long node lists and the script stops before srun.
        'hosts=$(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        "head_node=${hosts%%$'\\n'*}",
        f"port={SLURM_PORT}",
        f"srun --kill-on-bad-exit=1 torchrun --nnodes {nnodes} --nproc-per-node {nproc} "
        '--rdzv-backend c10d --rdzv-endpoint "$head_node:$port" --rdzv-id "$SLURM_JOB_ID" '
        f"{cmd}",
    ]
    return "\n".join(per_task) + "\n", "\n".join(per_node) + "\n"


def slurm_gres(backend: Backend) -> str | None:
    """The Slurm GRES the backend's devices are scheduled as (``slurm_gres``), if declared."""
    try:  # a plugin's declaration, read defensively
        value = getattr(backend, "slurm_gres", None)
    except Exception:
        return None
    return value if isinstance(value, str) and value.strip() else None
