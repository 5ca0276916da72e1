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

    Neither sets a visibility variable: Slurm assigns the job's devices from its GRES
    allocation and sets the runtime's variable (``CUDA_VISIBLE_DEVICES`` ...) per job and
    step itself (Slurm's Generic Resource Scheduling guide, https://slurm.schedmd.com/gres.html,
    "GPU Management"); an exported list would select devices outside the allocation on a
    shared node. The devices are requested instead: ``--gpus-per-node`` for a backend whose
    devices Slurm schedules as the ``gpu`` GRES, ``--gres=NAME:N`` for another declared GRES.
    """
    head = ["#!/bin/bash", "#SBATCH --job-name=hwbackends", f"#SBATCH --nodes={nnodes}"]
    pin = []
    if used_devices and gres == "gpu":
        head.append(f"#SBATCH --gpus-per-node={used_devices}")
    elif used_devices and gres:
        head.append(f"#SBATCH --gres={gres}:{used_devices}")
    if used_devices:
        shown = " / ".join(variables) or "the runtime's visibility variable"
        import textwrap

        note = (
            f"Slurm gives the job its {name} devices from its GRES allocation"
            + ("" if gres else f" (request {used_devices} per node as this cluster names them)")
            + f" and sets {shown} per step itself; this script must not set them."
        )
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
