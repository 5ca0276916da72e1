"""``hwbackends launch-plan``: the commands (torchrun, accelerate, srun, sbatch) for a job."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from hwbackends.cli._inputs import _inputs
from hwbackends.cli._output import JSON_SCHEMA_VERSION, _json, emit
from hwbackends.cli._render import _Style, _table

if TYPE_CHECKING:
    import argparse


def cmd_launch_plan(args: argparse.Namespace) -> int:
    from hwbackends.distributed import launch_plan

    script = list(args.script)
    if script[:1] == ["--"]:  # an explicit separator is allowed, not needed
        script = script[1:]
    env, host = _inputs(args)
    plan = launch_plan(
        args.nproc_per_node,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        rdzv_endpoint=args.rdzv_endpoint,
        script=script or ["train.py"],
        tp_size=args.tp_size,
        fsdp_size=args.fsdp_size,
        backend=args.backend,
        env=env,
        host=host,
        scheduler="slurm" if args.scheduler else None,
    )
    if args.json:
        print(
            _json(
                {"schema_version": JSON_SCHEMA_VERSION, "command": "launch-plan", **plan.to_dict()}
            )
        )
        return 0
    if args.scheduler is not None:  # the script alone on stdout, so it can be redirected
        print(plan.sbatch if args.scheduler == "slurm" else plan.sbatch_torchrun, end="")
        for p in plan.problems:
            print(f"hwbackends: problem: {p}", file=sys.stderr)
        return 1 if plan.problems else 0
    st = _Style(sys.stdout)
    lines = [
        st.bold("Launch plan") + f"  {plan.backend} · collective {plan.collective} · "
        f"{plan.nnodes} node(s) × {plan.nproc_per_node} process(es) = world size "
        f"{plan.world_size} · this is node {plan.node_rank}",
        "",
        st.bold("Per local rank"),
    ]
    rows = [
        [
            f"LOCAL_RANK={r.local_rank}",
            f"RANK={r.rank}",
            r.torch_device,
            "→ physical " + (",".join(map(str, r.physical)) or "-"),
        ]
        for r in plan.ranks
    ]
    lines += _table(rows)
    if plan.node_env or plan.node_unset:
        import shlex

        shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in plan.node_env.items())
        lines.append(
            f"  node environment: {shown}"
            + (f" (unset {', '.join(plan.node_unset)})" if plan.node_unset else "")
        )
    lines += [
        "",
        st.bold("torchrun"),
        f"  {plan.torchrun}",
        "",
        st.bold("accelerate launch"),
        f"  {plan.accelerate}",
    ]
    if plan.problems:
        lines += ["", st.yellow(st.bold("Problems"))]
        lines += [st.yellow(f"  ! {p}") for p in plan.problems]
    emit("\n".join(lines))
    return 1 if plan.problems else 0
