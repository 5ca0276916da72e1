"""``torch.distributed`` for this hardware: the collective, process-group start, launch plans.

Launch model: every rank of a node sees the same devices (one visibility assignment for the
node) and uses device ``LOCAL_RANK`` among them. That is what torchrun, Accelerate and
Transformers' ``device_map="cuda"`` (rewritten to ``cuda:$LOCAL_RANK``) all assume; hiding all
but one device per rank would break that rewrite.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._errors import HwBackendsError
from ._record import field, frozen
from ._target import Target, resolve_target

if TYPE_CHECKING:
    from ._host import Host
    from ._protocol import Backend

__all__ = [
    "LaunchError",
    "LaunchInfo",
    "LaunchPlan",
    "RankPlan",
    "backend_name",
    "check_parallel_sizes",
    "detect_launch",
    "expand_hostlist",
    "init_process_group",
    "launch_env",
    "launch_plan",
    "parse_endpoint",
]


class LaunchError(HwBackendsError):
    """The launcher's variables do not describe this process's rank, or contradict each other."""


# -- Slurm hostlists -----------------------------------------------------------------------


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets: ``a[1,2],b`` -> ``["a[1,2]", "b"]``."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def _bad_hostlist(text: str, why: str) -> LaunchError:
    return LaunchError(
        f"hostlist {text!r} is malformed: {why}",
        "Slurm hostlist syntax: names separated by commas, each with optional bracketed "
        "ranges such as node[01-03,7]",
        "check SLURM_JOB_NODELIST, or set MASTER_ADDR to rank 0's host",
    )


def _expand_ranges(spec: str, text: str) -> list[str]:
    out: list[str] = []
    for item in spec.split(","):
        lo, sep, hi = item.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise _bad_hostlist(text, f"{item!r} is not a number or a range of numbers")
        if not sep:
            out.append(lo)
            continue
        if int(hi) < int(lo):
            raise _bad_hostlist(text, f"the range {item!r} runs backwards")
        # Slurm keeps the zero padding of the range's first bound: 01-10 -> 01 … 10.
        width = len(lo) if lo.startswith("0") else 0
        out += [str(n).zfill(width) for n in range(int(lo), int(hi) + 1)]
    return out


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed hostlist as host names, in order: ``node[01-03,7],gpu5`` ->
    ``node01 node02 node03 node7 gpu5``.

    Several bracket groups in one name multiply (``r[1-2]n[1-2]`` -> r1n1 r1n2 r2n1 r2n2), as
    ``scontrol show hostnames`` expands them.
    """
    hosts: list[str] = []
    if text.count("[") != text.count("]"):
        raise _bad_hostlist(text, "its brackets do not pair up")
    for part in _split_top(text.strip()):
        if not part:
            raise _bad_hostlist(text, "it has an empty name")
        names = [""]
        rest = part
        while rest:
            head, sep, tail = rest.partition("[")
            if not sep:
                names = [n + head for n in names]
                break
            spec, close, rest = tail.partition("]")
            if not close or "[" in spec:
                raise _bad_hostlist(text, f"{part!r} has an unclosed or nested bracket")
            names = [n + head + x for n in names for x in _expand_ranges(spec, text)]
        hosts += names
    return hosts


# -- what the launcher says about this process -----------------------------------------------


@frozen
class LaunchInfo:
    """This process's place in a launch, read from the launcher's environment variables.

    ``launcher`` is ``torchrun`` (also ``accelerate launch``, which runs torchrun), ``slurm``
    (``srun``), ``mpi`` (``mpirun``/``mpiexec``: Open MPI, MPICH/Intel MPI via PMI, MVAPICH)
    or ``none`` (a single process). ``sources`` names the variable each value came from.
    """

    launcher: str
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int | None
    master_addr: str | None
    master_port: int | None
    sources: Mapping[str, str] = field(default_factory=dict)

    def torch_env(self) -> dict[str, str]:
        """The torchrun-style variables (RANK, WORLD_SIZE, LOCAL_RANK, …) for this process."""
        out = {
            "RANK": str(self.rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_RANK": str(self.local_rank),
        }
        if self.local_world_size is not None:
            out["LOCAL_WORLD_SIZE"] = str(self.local_world_size)
        if self.master_addr is not None:
            out["MASTER_ADDR"] = self.master_addr
        if self.master_port is not None:
            out["MASTER_PORT"] = str(self.master_port)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "launcher": self.launcher,
            "rank": self.rank,
            "world_size": self.world_size,
            "local_rank": self.local_rank,
            "local_world_size": self.local_world_size,
            "master_addr": self.master_addr,
            "master_port": self.master_port,
            "sources": dict(self.sources),
        }


_DEFAULT_PORT = 29500  # torch.distributed's and torchrun's default MASTER_PORT
# (rank, world size) pairs of the MPI launchers: Open MPI, MPICH/Intel MPI (PMI), MVAPICH2.
_MPI_WORLD = (
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
    ("MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"),
)
_MPI_LOCAL = (
    ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"),
)


def _int_var(env: Mapping[str, str], name: str, *, low: int = 0) -> int:
    raw = env[name].strip()
    if not raw.isdigit() or int(raw) < low:
        raise LaunchError(
            f"{name}={env[name]!r} is not a whole number ≥ {low}",
            f"{name} as the launcher sets it, a number ≥ {low}",
            f"unset {name} or start the process with its launcher",
        )
    return int(raw)


def _port_var(env: Mapping[str, str], name: str) -> int:
    port = _int_var(env, name, low=1)
    if port > 65535:
        raise LaunchError(f"{name}={port} is not a TCP port", "a port from 1 to 65535")
    return port


def _first_of(env: Mapping[str, str], names: Sequence[str]) -> str | None:
    return next((n for n in names if env.get(n, "").strip()), None)


def _slurm(env: Mapping[str, str]) -> LaunchInfo:
    src = {"rank": "SLURM_PROCID", "world_size": "SLURM_NTASKS"}
    rank, world = _int_var(env, "SLURM_PROCID"), _int_var(env, "SLURM_NTASKS", low=1)
    local = 0
    if "SLURM_LOCALID" in env:
        local, src["local_rank"] = _int_var(env, "SLURM_LOCALID"), "SLURM_LOCALID"
    elif world > 1:
        raise LaunchError(
            "SLURM_PROCID and SLURM_NTASKS are set but SLURM_LOCALID is not",
            "the variables srun sets for every task",
            "start the tasks with srun (not by running the script in the batch shell)",
        )
    local_size = None
    per_node = env.get("SLURM_NTASKS_PER_NODE", "").strip()
    if per_node.isdigit():  # "4"; heterogeneous layouts ("2(x3),1") give no single size
        local_size, src["local_world_size"] = int(per_node), "SLURM_NTASKS_PER_NODE"
    addr = env.get("MASTER_ADDR", "").strip() or None
    if addr:
        src["master_addr"] = "MASTER_ADDR"
    else:
        name = _first_of(env, ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"))
        if name is not None:
            addr, src["master_addr"] = expand_hostlist(env[name])[0], f"first host of {name}"
        elif world > 1:
            raise LaunchError(
                "srun started this task but no node list is set",
                "SLURM_JOB_NODELIST (srun sets it) or MASTER_ADDR",
                "export MASTER_ADDR=<the first node's host name> before srun",
            )
    if "MASTER_PORT" in env:
        port, src["master_port"] = _port_var(env, "MASTER_PORT"), "MASTER_PORT"
    elif env.get("SLURM_JOB_ID", "").strip():
        # Every task derives the same port from the job id, as Lightning's SLURMEnvironment
        # does (last four digits + 15000), so concurrent jobs on a node do not collide.
        port = 15000 + _int_var(env, "SLURM_JOB_ID") % 10000
        src["master_port"] = "15000 + last four digits of SLURM_JOB_ID"
    else:
        port = _DEFAULT_PORT
    return _checked(LaunchInfo("slurm", rank, world, local, local_size, addr, port, src))


def _mpi(env: Mapping[str, str], rank_var: str, size_var: str) -> LaunchInfo:
    src = {"rank": rank_var, "world_size": size_var}
    rank, world = _int_var(env, rank_var), _int_var(env, size_var, low=1)
    local, local_size = None, None
    for lr, ls in _MPI_LOCAL:
        if lr in env and local is None:
            local, src["local_rank"] = _int_var(env, lr), lr
        if ls in env and local_size is None:
            local_size, src["local_world_size"] = _int_var(env, ls, low=1), ls
    addr = env.get("MASTER_ADDR", "").strip() or None
    if addr:
        src["master_addr"] = "MASTER_ADDR"
    elif local_size == world:
        addr, src["master_addr"] = "localhost", f"{src['local_world_size']} = {size_var}: one node"
    elif world > 1:
        what = (
            f"the {world} MPI ranks span several nodes ({src['local_world_size']}={local_size})"
            if local_size is not None
            else f"{rank_var}/{size_var} are set but nothing says how many ranks share a node"
        )
        raise LaunchError(
            f"{what}, and MASTER_ADDR is not set, so rank 0's address is unknown",
            "MASTER_ADDR (and optionally MASTER_PORT) exported to every rank",
            "pass it through mpirun, e.g. mpirun -x MASTER_ADDR=$(hostname) -x "
            "MASTER_PORT=29500 … (Open MPI) or mpiexec -genv MASTER_ADDR $(hostname) … (MPICH)",
        )
    if local is None:
        local = rank if local_size == world else 0
        src["local_rank"] = "the rank (one node)" if local_size == world else "unknown: 0"
    port = _port_var(env, "MASTER_PORT") if "MASTER_PORT" in env else _DEFAULT_PORT
    if "MASTER_PORT" in env:
        src["master_port"] = "MASTER_PORT"
    return _checked(LaunchInfo("mpi", rank, world, local, local_size, addr, port, src))


def _checked(info: LaunchInfo) -> LaunchInfo:
    if info.rank >= info.world_size:
        raise LaunchError(
            f"rank {info.rank} is not below the world size {info.world_size} "
            f"({info.sources.get('rank')}, {info.sources.get('world_size')})",
            "0 ≤ rank < world size",
            "start the processes with their launcher; do not mix variables of two launchers",
        )
    return info


def detect_launch(env: Mapping[str, str] | None = None) -> LaunchInfo:
    """Rank, world size, local rank and rendezvous address of this process under its launcher.

    Checked in this order: torchrun-style variables (``RANK`` and ``WORLD_SIZE``; set by
    torchrun and ``accelerate launch``, or by the user), Slurm ``srun`` (``SLURM_PROCID``,
    ``SLURM_NTASKS``), then MPI (``OMPI_COMM_WORLD_*``, ``PMI_*``, ``MV2_COMM_WORLD_*``). Under
    Slurm the address is the first host of the step's node list and the port is derived from
    the job id; under a one-node mpirun it is localhost. ``MASTER_ADDR``/``MASTER_PORT``
    override both.
    """
    import os

    e = os.environ if env is None else env
    if "RANK" in e and "WORLD_SIZE" in e:
        src = {"rank": "RANK", "world_size": "WORLD_SIZE"}
        rank, world = _int_var(e, "RANK"), _int_var(e, "WORLD_SIZE", low=1)
        local = _int_var(e, "LOCAL_RANK") if "LOCAL_RANK" in e else 0
        local_size = _int_var(e, "LOCAL_WORLD_SIZE", low=1) if "LOCAL_WORLD_SIZE" in e else None
        addr = e.get("MASTER_ADDR", "").strip() or None
        port = _port_var(e, "MASTER_PORT") if "MASTER_PORT" in e else None
        if world > 1 and (addr is None or port is None):
            raise LaunchError(
                f"RANK and WORLD_SIZE={world} are set but MASTER_ADDR or MASTER_PORT is not",
                "all four, as torchrun sets them",
                "start the script with torchrun or accelerate launch, or export MASTER_ADDR "
                "and MASTER_PORT",
            )
        return _checked(LaunchInfo("torchrun", rank, world, local, local_size, addr, port, src))
    if "SLURM_PROCID" in e and "SLURM_NTASKS" in e:
        return _slurm(e)
    for rank_var, size_var in _MPI_WORLD:
        if rank_var in e and size_var in e:
            return _mpi(e, rank_var, size_var)
    return LaunchInfo("none", 0, 1, 0, 1, None, None, {"rank": "no launcher: one process"})


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

    Works under torchrun, ``accelerate launch``, Slurm ``srun`` and ``mpirun`` without the
    user exporting ``RANK`` or ``MASTER_ADDR`` (see ``detect_launch``). Under srun and mpirun
    the torchrun-style variables it found (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, …) are
    exported to ``os.environ`` where unset, as DeepSpeed's and Lightning's helpers do, so that
    Accelerate and Transformers in the same process see the same ranks; pass ``env=`` to read
    another mapping and leave ``os.environ`` alone. A single process gets a one-rank group.

    Pass any ``init_process_group`` keyword (``timeout``…) through ``kwargs``; ``backend=``
    here selects the hwbackends backend, not the collective.
    """
    import os

    import torch.distributed as dist

    info = detect_launch(env)
    found = info.torch_env()
    if env is None:
        for k, v in found.items():
            os.environ.setdefault(k, v)
    # The device is this rank's: resolve with LOCAL_RANK as the launcher defined it.
    t = resolve_target(backend, env=None if env is None else {**found, **env}, host=host)
    collective = kwargs.pop("collective", None) or t.caps.distributed_backend
    if "init_method" not in kwargs and "store" not in kwargs:
        kwargs.setdefault("rank", info.rank)
        kwargs.setdefault("world_size", info.world_size)
        if info.master_addr is None:  # one process, no address: an in-memory store
            from torch.distributed import HashStore  # type: ignore[attr-defined]

            kwargs["store"] = HashStore()
        else:
            addr = f"[{info.master_addr}]" if ":" in info.master_addr else info.master_addr
            kwargs["init_method"] = f"tcp://{addr}:{info.master_port or _DEFAULT_PORT}"
    if t.name != "cpu" and t.device is not None:
        import torch

        # Bind this rank to its device first, as NCCL-like collectives expect.
        accel = getattr(torch, "accelerator", None)
        if accel is not None and hasattr(accel, "set_device_index"):
            accel.set_device_index(t.device.index)
    dist.init_process_group(backend=collective, **kwargs)
    return collective


@frozen
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


@frozen
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
    sbatch: str = ""  # Slurm batch script: srun starts one task per device
    sbatch_torchrun: str = ""  # Slurm batch script: srun starts torchrun once per node

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
            "sbatch": self.sbatch,
            "sbatch_torchrun": self.sbatch_torchrun,
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


def parse_endpoint(endpoint: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6addr]:PORT`` for IPv6) as ``(host, port)``; port 1–65535."""
    text = endpoint.strip()
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    ok = bool(sep and host and port.isdigit() and 1 <= int(port) <= 65535)
    if not ok or any(c.isspace() for c in host) or (":" in host and "[" not in text):
        raise HwBackendsError(
            f"rendezvous endpoint {endpoint!r} is not HOST:PORT",
            "a host name or address, a colon, and a port from 1 to 65535 "
            "(IPv6 addresses in brackets: [fd00::1]:29500)",
            "pass --rdzv-endpoint node0.example:29500",
        )
    return host, int(port)


def _accelerate_problems(t: Target, world: int) -> list[str]:
    """Where Accelerate will not form the process group the plan promises."""
    if world < 2 or t.name == "cpu":
        return []
    from .accelerate import accelerate_group_devices

    devices, source = accelerate_group_devices()
    if t.caps.device_type in devices:
        return []
    return [
        f"Accelerate creates no process group on {t.caps.device_type} devices ({source}): "
        f"under accelerate launch or the Trainer each of the {world} ranks trains alone. "
        "Use one process, or call hwbackends.distributed.init_process_group() "
        f"({t.caps.distributed_backend}) and all-reduce yourself"
    ]


_SLURM_PORT = "$((15000 + SLURM_JOB_ID % 10000))"  # detect_launch derives the same port


def _sbatch_scripts(
    name: str,
    nnodes: int,
    nproc: int,
    node_env: Mapping[str, str],
    unset: Sequence[str],
    script: Sequence[str],
    *,
    used_devices: int,
) -> tuple[str, str]:
    """Two sbatch scripts: srun starting one task per device (each task finds its rank
    through ``init_process_group``), and srun starting torchrun once per node."""
    head = ["#!/bin/bash", "#SBATCH --job-name=hwbackends", f"#SBATCH --nodes={nnodes}"]
    pin = []
    if used_devices:
        pin.append(
            f"# Request {used_devices} {name} device(s) per node the way this cluster names "
            "them (e.g. --gpus-per-node or --gres); the site's GRES names are not known here."
        )
    pin.append("set -euo pipefail")
    if unset:
        pin.append("unset " + " ".join(unset))
    # Every node pins the same devices; each rank then uses device LOCAL_RANK among them.
    pin += [f"export {k}={shlex.quote(v)}" for k, v in node_env.items()]
    cmd = " ".join(shlex.quote(a) for a in script)
    python = "" if script[:1] and not script[0].endswith(".py") and script[0] != "-m" else "python "
    per_task = [
        *head,
        f"#SBATCH --ntasks-per-node={nproc}",
        *pin,
        "# srun sets SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID; the script must call",
        "# hwbackends.distributed.init_process_group(), which reads them",
        f"srun --kill-on-bad-exit=1 {python}{cmd}",
    ]
    per_node = [
        *head,
        "#SBATCH --ntasks-per-node=1",
        *pin,
        'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        f"port={_SLURM_PORT}",
        f"srun --kill-on-bad-exit=1 torchrun --nnodes {nnodes} --nproc-per-node {nproc} "
        '--rdzv-backend c10d --rdzv-endpoint "$head_node:$port" --rdzv-id "$SLURM_JOB_ID" '
        f"{cmd}",
    ]
    return "\n".join(per_task) + "\n", "\n".join(per_node) + "\n"


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
    scheduler: str | None = None,
) -> LaunchPlan:
    """The launch of ``script`` on this node: env, per-rank devices, commands, problems.

    With ``scheduler="slurm"`` a multi-node plan needs no ``rdzv_endpoint``: Slurm names the
    nodes, the sbatch scripts derive the address, and ``torchrun``/``accelerate`` stay empty.
    """
    t = resolve_target(backend, env=env, host=host)
    if nproc_per_node is None:
        nproc_per_node = len(t.devices) if t.name != "cpu" else 1
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
    endpoint = parse_endpoint(rdzv_endpoint) if rdzv_endpoint is not None else None
    problems = _devices_per_node(t, nproc_per_node)
    problems += _accelerate_problems(t, nproc_per_node * nnodes)
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

    world = nproc_per_node * nnodes
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
                f"--rdzv-endpoint {shown}:{port}"
            )
            acc.append(f"--num_machines {nnodes} --machine_rank {node_rank}")
        else:
            tr.append(f"--master-addr {shown} --master-port {port}")
        acc.append(f"--main_process_ip {host_} --main_process_port {port}")
    torchrun = "" if slurm_only else " ".join(filter(None, [prefix, *tr, cmd]))
    accelerate = "" if slurm_only else " ".join(filter(None, [prefix, *acc, cmd]))
    sbatch, sbatch_tr = _sbatch_scripts(
        t.name, nnodes, nproc_per_node, node_env, unset, script, used_devices=len(used)
    )
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
        sbatch=sbatch,
        sbatch_torchrun=sbatch_tr,
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
