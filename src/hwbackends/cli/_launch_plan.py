"""``hwbackends launch-plan``: the commands (torchrun, accelerate, srun, sbatch) for a job."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from hwbackends.cli._inputs import _inputs
from hwbackends.cli._output import JSON_SCHEMA_VERSION, UsageError, _json, emit
from hwbackends.cli._render import KEEP, _Style, _table, _View, command_lines, fit

if TYPE_CHECKING:
    import argparse


def cmd_launch_plan(args: argparse.Namespace) -> int:
    from hwbackends.distributed import launch_plan

    script = list(args.script)
    if script[:1] == ["--"]:  # an explicit separator is allowed, not needed
        script = script[1:]
    _check_options(args)
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
        emit(
            _json(
                {"schema_version": JSON_SCHEMA_VERSION, "command": "launch-plan", **plan.to_dict()}
            )
        )
        return 0
    if args.scheduler is not None:  # the script alone on stdout, so it can be redirected
        emit((plan.sbatch if args.scheduler == "slurm" else plan.sbatch_torchrun).rstrip("\n"))
        for w in plan.warnings:
            print(f"hwbackends: warning: {w}", file=sys.stderr)
        for p in plan.problems:
            print(f"hwbackends: problem: {p}", file=sys.stderr)
        return 1 if plan.problems else 0
    st = _Style(sys.stdout)
    view = _View(verbose=True)
    lines = view.wrap(
        f"{plan.backend} · collective {plan.collective} · {plan.nnodes} node(s) × "
        f"{plan.nproc_per_node} process(es) = world size {plan.world_size} · this is node "
        f"{plan.node_rank}",
        st.bold("Launch plan") + "  ",
        "  ",
    )
    lines += ["", st.bold("Per local rank")]
    rows = [
        [
            f"LOCAL_RANK={r.local_rank}",
            f"RANK={r.rank}",
            r.torch_device,
            "→ physical " + (",".join(map(str, r.physical)) or "-"),
        ]
        for r in plan.ranks
    ]
    lines += _table(rows, view=view)
    if plan.node_env or plan.node_unset:
        import shlex

        shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in plan.node_env.items())
        lines += view.wrap(
            f"node environment: {shown}"
            + (f" (unset {', '.join(plan.node_unset)})" if plan.node_unset else ""),
            "  ",
            "    ",
        )
    # commands wrap at spaces with a shell continuation, so they still paste and run
    lines += ["", st.bold("torchrun"), *_command(plan.torchrun, view)]
    lines += ["", st.bold("accelerate launch"), *_command(plan.accelerate, view)]
    if plan.warnings:
        lines += ["", st.yellow(st.bold("Warnings"))]
        lines += [st.yellow(x) for w in plan.warnings for x in view.wrap(w, "  ! ", "    ")]
    if plan.problems:
        lines += ["", st.yellow(st.bold("Problems"))]
        lines += [st.yellow(x) for p in plan.problems for x in view.wrap(p, "  ! ", "    ")]
    emit(fit("\n".join(lines), view.width))
    return 1 if plan.problems else 0


def _check_options(args: argparse.Namespace) -> None:
    """The sizes in range, named as the options they came from (the library's own error
    names its Python arguments)."""
    from hwbackends._base.args import MAX_NODES, MAX_PROCESSES_PER_NODE

    for option, value, low, high in (
        ("--nproc-per-node", args.nproc_per_node, 1, MAX_PROCESSES_PER_NODE),
        ("--nnodes", args.nnodes, 1, MAX_NODES),
    ):
        if value is not None and not low <= value <= high:
            raise UsageError(
                f"{option} {value} is out of range",
                f"a whole number from {low} to {high:,}",
                f"pass {option} {min(max(value, low), high)} or another number in that range",
            )


def _command(cmd: str, view: _View) -> list[str]:
    """A shell command wrapped to the width with `` \\`` continuations (never inside a
    word, so a quoted argument with spaces may stay long; ``fit`` leaves it whole)."""
    import shlex

    try:
        words = shlex.split(cmd)
    except ValueError:
        return [KEEP + f"  {cmd}"]
    return command_lines(words, view.width, "  ", "      ")
