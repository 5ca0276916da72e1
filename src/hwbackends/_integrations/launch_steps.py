"""The steps of a launch plan (``hwbackends.distributed.launch_plan``): the sizes checked, the
variables that pin a node's devices, the torchrun and ``accelerate launch`` commands, and the
warnings a plan carries. Kept apart from the public module, which holds the plan's records and
the process-group start."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from hwbackends._base.errors import HwBackendsError

if TYPE_CHECKING:
    from hwbackends._base.protocol import Device
    from hwbackends._selection.target import Target


def bad_variable_names(names: Sequence[str]) -> list[str]:
    """The names that are not shell/POSIX environment variable names
    (``[A-Za-z_][A-Za-z0-9_]*``), shown with ``repr``: a plugin declares them, and they are
    printed unquoted (``NAME=value``, ``export NAME``, ``env -u NAME``)."""
    bad = []
    for n in names:
        ok = (
            isinstance(n, str)
            and n.isascii()
            and n[:1] != ""
            and not n[0].isdigit()
            and n.replace("_", "a").isalnum()
        )
        if not ok:
            bad.append(repr(n)[:80])
    return bad


def check_launch(
    nproc_per_node: int,
    nnodes: int,
    node_rank: int,
    rdzv_endpoint: str | None,
    scheduler: str | None,
) -> bool:
    """Decides whether the sizes and endpoint describe a launch (raising when they do not),
    and whether only Slurm can start it (a multi-node sbatch plan without an endpoint)."""
    if nproc_per_node < 1 or nnodes < 1 or not 0 <= node_rank < nnodes:
        raise HwBackendsError(
            f"nproc_per_node={nproc_per_node}, nnodes={nnodes}, node_rank={node_rank} do not "
            "describe a launch",
            "nproc_per_node ≥ 1, nnodes ≥ 1 and 0 ≤ node_rank < nnodes",
        )
    slurm_only = scheduler == "slurm" and nnodes > 1 and not rdzv_endpoint
    if nnodes > 1 and not rdzv_endpoint and not slurm_only:
        raise HwBackendsError(
            f"a {nnodes}-node launch needs a rendezvous endpoint",
            "HOST:PORT of node 0, reachable from every node",
            "pass --rdzv-endpoint node0.example:29500",
        )
    return slurm_only


def pinned_env(
    t: Target, used: Sequence[Device], problems: list[str]
) -> tuple[dict[str, str], tuple[str, ...]]:
    """Decides the variables that pin exactly the devices this node's ranks use, in logical
    order, so the plan does not depend on what the launching shell happens to have set: those
    to set and those to unset (none, with a problem, where the plugin cannot pin them)."""
    if not used:
        return {}, ()
    from hwbackends._base.errors import VisibilityError
    from hwbackends.visibility import visibility_unset

    try:
        from hwbackends._selection.registry import plugin_call

        picked = [d.physical_index for d in used]
        node_env: dict[str, str] = plugin_call(  # plugin code: under the guard, its result copied
            t.name,
            "visibility_env",
            lambda: t.backend.visibility_env(picked, host=t.host, env=t.env),
            dict,
            passthrough=(VisibilityError,),
        )
        unset = tuple(k for k in visibility_unset(t.backend) if k not in node_env)
        bad = bad_variable_names([*node_env, *unset])
        if bad:
            problems.append(
                f"the {t.name} plugin declares invalid environment variable names "
                f"({', '.join(bad)}); names are letters, digits and _ and do not start "
                "with a digit. This is the plugin's fault: update or report it. The plan "
                "pins no devices"
            )
            return {}, ()
    except VisibilityError as exc:  # e.g. tiles the runtime's variable cannot name alone
        problems.append(
            f"the devices cannot be pinned with {t.name}'s visibility variables ({exc}); "
            "the ranks use LOCAL_RANK over the devices visible now"
        )
        return {}, ()
    return node_env, unset


def launch_commands(
    t: Target,
    node_env: Mapping[str, str],
    unset: Sequence[str],
    script: Sequence[str],
    sizes: tuple[int, int, int],
    endpoint: tuple[str, int] | None,
) -> tuple[str, str]:
    """Decides this node's torchrun and accelerate launch commands, for ``sizes``
    (nproc_per_node, nnodes, node_rank)."""
    nproc_per_node, nnodes, node_rank = sizes
    world = nproc_per_node * nnodes
    # Every word is quoted: an endpoint such as `$(cmd):29500`, `*:29500` or `[fd00::1]:29500`
    # must reach torchrun as written, never run a command or glob against the working folder.
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in node_env.items())
    if unset:
        prefix = f"env {' '.join('-u ' + k for k in unset)} {prefix}".rstrip()
    cmd = " ".join(shlex.quote(a) for a in script)
    tr = [f"torchrun --nproc-per-node {nproc_per_node}"]
    # accelerate launch starts several processes only through its torchrun path
    # (--multi_gpu); --cpu always takes the one-process launcher (accelerate 1.15
    # commands/launch.py launch_command -> simple_launcher), so a multi-process CPU run
    # sets ACCELERATE_USE_CPU instead, which is what --cpu would have told each rank.
    acc = [f"accelerate launch --num_processes {world}"]
    if world > 1:
        acc.append("--multi_gpu")
        if t.name == "cpu":
            acc.insert(0, "ACCELERATE_USE_CPU=true")
    elif t.name == "cpu":
        acc.append("--cpu")
    if endpoint is not None:
        host_, port = endpoint
        shown = f"[{host_}]" if ":" in host_ else host_
        if nnodes > 1:
            tr.append(
                f"--nnodes {nnodes} --node-rank {node_rank} --rdzv-backend c10d "
                f"--rdzv-endpoint {shlex.quote(f'{shown}:{port}')}"
            )
            acc.append(f"--num_machines {nnodes} --machine_rank {node_rank}")
        else:
            tr.append(f"--master-addr {shlex.quote(shown)} --master-port {port}")
        acc.append(f"--main_process_ip {shlex.quote(host_)} --main_process_port {port}")
    torchrun = " ".join(filter(None, [prefix, *tr, cmd]))
    accelerate = " ".join(filter(None, [prefix, *acc, cmd]))
    return torchrun, accelerate


def check_sizes(nproc_per_node: object, nnodes: object, node_rank: object) -> None:
    """The sizes are ints in range before anything is planned (a plan lists every rank)."""
    from hwbackends._base.args import MAX_NODES, MAX_PROCESSES_PER_NODE, check_count

    if nproc_per_node is not None:
        check_count(nproc_per_node, "nproc_per_node", "launch_plan", 1, MAX_PROCESSES_PER_NODE)
    check_count(nnodes, "nnodes", "launch_plan", 1, MAX_NODES)
    check_count(node_rank, "node_rank", "launch_plan", 0, MAX_NODES - 1)


def oversubscribed(t: Target, nproc_per_node: int) -> list[str]:
    """A warning when the node's processes outnumber its CPU cores (each rank runs at least
    one busy thread: the ranks then take turns, and collectives time out)."""
    cores = t.host.cpu.count if t.host is not None else 0
    if not cores or nproc_per_node <= cores:
        return []
    return [
        f"{nproc_per_node} processes on this node's {cores} CPU core(s) oversubscribe them: "
        "the ranks take turns on the cores and may time out in collectives. Fix: use at "
        f"most {cores} processes per node (--nproc-per-node {cores}), or more nodes"
    ]


def login_node_warning(t: Target, scheduler: str | None, nnodes: int) -> str:
    what = "an sbatch script" if scheduler else f"a {nnodes}-node plan"
    return (
        f"{what} for the cpu backend: this machine shows no accelerator to this process (a "
        "login node?), so the plan is one CPU process per node and requests no devices. "
        "Fix: plan on a compute node, pass --host FILE with a compute node's host file, or "
        "name the backend and its devices per node: --backend NAME --nproc-per-node N"
    )
