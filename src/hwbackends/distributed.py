"""``torch.distributed`` for this hardware: the collective, process-group start, launch plans.

Launch model: every rank of a node sees the same devices (one visibility assignment for the
node) and uses device ``LOCAL_RANK`` among them. That is what torchrun, Accelerate and
Transformers' ``device_map="cuda"`` (rewritten to ``cuda:$LOCAL_RANK``) all assume; hiding all
but one device per rank would break that rewrite.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._errors import HwBackendsError
from ._target import Target, resolve_target

if TYPE_CHECKING:
    from ._host import Host
    from ._protocol import Backend

__all__ = [
    "LaunchPlan",
    "RankPlan",
    "backend_name",
    "check_parallel_sizes",
    "init_process_group",
    "launch_env",
    "launch_plan",
]


def backend_name(
    *,
    backend: str | Backend | None = None,
    env: Mapping[str, str] | None = None,
    host: Host | None = None,
) -> str:
    """The process-group backend for this process's device (``gloo`` on CPU)."""
    return resolve_target(backend, env=env, host=host).caps.distributed_backend


def init_process_group(
    *,
    backend: str | Backend | None = None,
    env: Mapping[str, str] | None = None,
    host: Host | None = None,
    **kwargs: Any,
) -> str:
    """``torch.distributed.init_process_group`` with the right collective; returns its name.

    Pass any ``init_process_group`` keyword (``timeout``, ``world_size``…) through ``kwargs``;
    ``backend=`` here selects the hwbackends backend, not the collective.
    """
    import torch.distributed as dist

    t = resolve_target(backend, env=env, host=host)
    collective = kwargs.pop("collective", None) or t.caps.distributed_backend
    if t.name != "cpu" and t.device is not None:
        import torch

        # Bind this rank to its device first, as NCCL-like collectives expect.
        accel = getattr(torch, "accelerator", None)
        if accel is not None and hasattr(accel, "set_device_index"):
            accel.set_device_index(t.device.index)
    dist.init_process_group(backend=collective, **kwargs)
    return collective


@dataclass(frozen=True)
class RankPlan:
    """One process of a launch: its ranks, device and environment."""

    local_rank: int
    rank: int
    torch_device: str
    physical: tuple[int, ...]
    env: Mapping[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "local_rank": self.local_rank,
            "rank": self.rank,
            "torch_device": self.torch_device,
            "physical": list(self.physical),
            "env": dict(self.env),
        }


@dataclass(frozen=True)
class LaunchPlan:
    """A node's launch: the node-wide visibility, each rank, the commands and any problems."""

    backend: str
    collective: str
    nproc_per_node: int
    nnodes: int
    node_rank: int
    node_env: Mapping[str, str]  # the node-wide visibility assignment
    node_unset: tuple[str, ...]
    ranks: tuple[RankPlan, ...]
    torchrun: str
    accelerate: str
    problems: tuple[str, ...] = field(default_factory=tuple)

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "collective": self.collective,
            "nproc_per_node": self.nproc_per_node,
            "nnodes": self.nnodes,
            "node_rank": self.node_rank,
            "world_size": self.world_size,
            "node_env": dict(self.node_env),
            "node_unset": list(self.node_unset),
            "ranks": [r.to_dict() for r in self.ranks],
            "torchrun": self.torchrun,
            "accelerate": self.accelerate,
            "problems": list(self.problems),
        }


def check_parallel_sizes(
    world_size: int, visible: int, *, tp_size: int | None = None, fsdp_size: int | None = None
) -> list[str]:
    """Problems with ``DistributedConfig``-style sizes, each saying what to change."""
    problems: list[str] = []
    for name, v in (("tp_size", tp_size), ("fsdp_size", fsdp_size)):
        if v is not None and v < 1:
            problems.append(f"{name}={v} must be at least 1")
    if problems:
        return problems
    tp, fsdp = tp_size or 1, fsdp_size or 1
    if world_size % (tp * fsdp):
        fits = [d for d in range(1, world_size + 1) if world_size % d == 0]
        problems.append(
            f"tp_size × fsdp_size = {tp * fsdp} does not divide the world size {world_size}; "
            f"use sizes whose product is one of {fits}"
        )
    if tp_size and tp_size > 1 and visible and tp_size > visible:
        problems.append(
            f"tp_size={tp_size} spans more devices than one node shows ({visible}); keep "
            f"tensor parallelism inside a node: tp_size ≤ {visible}"
        )
    return problems


def _devices_per_node(t: Target, nproc_per_node: int) -> list[str]:
    problems = []
    if t.name != "cpu" and nproc_per_node > len(t.devices):
        problems.append(
            f"{nproc_per_node} processes per node but only {len(t.devices)} {t.name} device(s) "
            f"are visible; use --nproc-per-node {len(t.devices)} or fewer"
        )
    return problems


def launch_plan(
    nproc_per_node: int | None = None,
    *,
    nnodes: int = 1,
    node_rank: int = 0,
    rdzv_endpoint: str | None = None,
    script: Sequence[str] = ("train.py",),
    tp_size: int | None = None,
    fsdp_size: int | None = None,
    backend: str | Backend | None = None,
    env: Mapping[str, str] | None = None,
    host: Host | None = None,
) -> LaunchPlan:
    """The launch of ``script`` on this node: env, per-rank devices, commands, problems."""
    t = resolve_target(backend, env=env, host=host)
    if nproc_per_node is None:
        nproc_per_node = len(t.devices) if t.name != "cpu" else 1
    if nproc_per_node < 1 or nnodes < 1 or not 0 <= node_rank < nnodes:
        raise HwBackendsError(
            f"nproc_per_node={nproc_per_node}, nnodes={nnodes}, node_rank={node_rank} do not "
            "describe a launch",
            "nproc_per_node ≥ 1, nnodes ≥ 1 and 0 ≤ node_rank < nnodes",
        )
    if nnodes > 1 and not rdzv_endpoint:
        raise HwBackendsError(
            f"a {nnodes}-node launch needs a rendezvous endpoint",
            "HOST:PORT of node 0, reachable from every node",
            "pass --rdzv-endpoint node0.example:29500",
        )
    problems = _devices_per_node(t, nproc_per_node)
    problems += check_parallel_sizes(
        nproc_per_node * nnodes,
        len(t.devices) if t.name != "cpu" else nproc_per_node,
        tp_size=tp_size,
        fsdp_size=fsdp_size,
    )

    node_env: dict[str, str] = {}
    unset: tuple[str, ...] = ()
    used = t.devices[:nproc_per_node] if t.name != "cpu" else ()
    if used:
        # Pin exactly the devices this node's ranks use, in logical order, so the plan does
        # not depend on what the launching shell happens to have set.
        from ._errors import VisibilityError
        from .visibility import visibility_unset

        try:
            node_env = t.backend.visibility_env(
                [d.physical_index for d in used], host=t.host, env=t.env
            )
            unset = tuple(k for k in visibility_unset(t.backend) if k not in node_env)
        except VisibilityError as exc:  # e.g. tiles the runtime's variable cannot name alone
            problems.append(
                f"the devices cannot be pinned with {t.name}'s visibility variables ({exc}); "
                "the ranks use LOCAL_RANK over the devices visible now"
            )

    collective = t.caps.distributed_backend
    ranks = []
    for lr in range(nproc_per_node):
        rank = node_rank * nproc_per_node + lr
        dev = used[lr] if lr < len(used) else None
        renv = dict(node_env)
        renv.update(
            {
                "LOCAL_RANK": str(lr),
                "RANK": str(rank),
                "LOCAL_WORLD_SIZE": str(nproc_per_node),
                "WORLD_SIZE": str(nproc_per_node * nnodes),
            }
        )
        ranks.append(
            RankPlan(
                local_rank=lr,
                rank=rank,
                torch_device=f"{t.caps.device_type}:{lr}" if dev is not None else "cpu",
                physical=(dev.physical_index,) if dev is not None else (),
                env=renv,
            )
        )

    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in node_env.items())
    if unset:
        prefix = f"env {' '.join('-u ' + k for k in unset)} {prefix}".rstrip()
    cmd = " ".join(shlex.quote(a) for a in script)
    tr = [f"torchrun --nproc-per-node {nproc_per_node}"]
    acc = [f"accelerate launch --num_processes {nproc_per_node * nnodes}"]
    if nnodes > 1:
        host_, _, port = (rdzv_endpoint or "").rpartition(":")
        tr.append(
            f"--nnodes {nnodes} --node-rank {node_rank} --rdzv-backend c10d "
            f"--rdzv-endpoint {rdzv_endpoint}"
        )
        acc.append(
            f"--num_machines {nnodes} --machine_rank {node_rank} "
            f"--main_process_ip {host_ or rdzv_endpoint} --main_process_port {port or 29500}"
        )
    if t.name == "cpu":
        acc.append("--cpu")
    torchrun = " ".join(filter(None, [prefix, *tr, cmd]))
    accelerate = " ".join(filter(None, [prefix, *acc, cmd]))
    return LaunchPlan(
        backend=t.name,
        collective=collective,
        nproc_per_node=nproc_per_node,
        nnodes=nnodes,
        node_rank=node_rank,
        node_env=node_env,
        node_unset=unset,
        ranks=tuple(ranks),
        torchrun=torchrun,
        accelerate=accelerate,
        problems=tuple(problems),
    )


def launch_env(
    local_rank: int,
    nproc_per_node: int | None = None,
    *,
    nnodes: int = 1,
    node_rank: int = 0,
    backend: str | Backend | None = None,
    env: Mapping[str, str] | None = None,
    host: Host | None = None,
) -> dict[str, str]:
    """The environment one local rank runs with under the plan (visibility + rank variables)."""
    plan = launch_plan(
        nproc_per_node,
        nnodes=nnodes,
        node_rank=node_rank,
        backend=backend,
        env=env,
        host=host,
        rdzv_endpoint="localhost:29500" if nnodes > 1 else None,
    )
    if not 0 <= local_rank < plan.nproc_per_node:
        raise HwBackendsError(
            f"local_rank={local_rank} is outside this node's {plan.nproc_per_node} processes",
            f"0 ≤ local_rank < {plan.nproc_per_node}",
        )
    return dict(plan.ranks[local_rank].env)
