"""Which launcher started this process, and its rank, world and rendezvous: ``detect_launch``.

torchrun / ``accelerate launch`` (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_*``), Slurm
``srun`` (``SLURM_*``, with Slurm hostlists expanded as Slurm's ``hostlist.c`` does) and MPI
launchers (Open MPI, PMI/Hydra, MVAPICH). Pure: read from the environment mapping given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hwbackends._base.errors import HwBackendsError
from hwbackends._base.record import field, frozen


class LaunchError(HwBackendsError):
    """The launcher's variables do not describe this process's rank, or contradict each other."""


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
