"""Which launcher started this process, and its rank, world and rendezvous: ``detect_launch``.

torchrun / ``accelerate launch`` (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_*``), MPI
launchers (PMI/Hydra, Open MPI, MVAPICH), LSF ``jsrun``, Slurm ``srun`` steps (with Slurm
hostlists expanded as Slurm's ``hostlist.c`` does), Kubeflow PyTorchJob pods, TPU pod hosts and
SageMaker hosts; the process's own launcher wins over its allocation (docs/reference/
launchers.md). Pure: read from the environment mapping given (and, under ``jsrun``, LSF's rank
file).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hwbackends._base.errors import HwBackendsError
from hwbackends._base.record import field, frozen


class LaunchError(HwBackendsError):
    """The launcher's variables do not describe this process's rank, or contradict each other."""


# Slurm's hostlist_create_dims (src/common/hostlist.c, slurm-26-05-3-1) splits on tab, comma,
# space and newline; _next_tok skips leading and repeated separators, so empty tokens vanish.
_HOST_SEPARATORS = "\t, \n"


def _split_top(text: str) -> list[str]:
    """Split on separators outside brackets, dropping empty tokens:
    ``a[1,2], b,,c`` -> ``["a[1,2]", "b", "c"]``."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch in _HOST_SEPARATORS and depth == 0:
            if cur:
                parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        parts.append(cur)
    return parts


def _bad_hostlist(text: str, why: str) -> LaunchError:
    return LaunchError(
        f"hostlist {text!r} is malformed: {why}",
        "Slurm hostlist syntax: names separated by commas or whitespace, each with optional "
        "bracketed ranges such as node[01-03,7]",
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
    ``scontrol show hostnames`` expands them. Names may be separated by commas, spaces, tabs
    or newlines, and empty names are skipped (``a,,b`` and ``" a b "`` are ``a b``), as
    Slurm's ``hostlist.c`` reads them; a list with no names is empty.

    :param text: a Slurm hostlist, such as the value of ``SLURM_JOB_NODELIST``.
    :raises LaunchError: when the brackets do not pair up or nest, or a range is not
        numbers or runs backwards.
    """
    hosts: list[str] = []
    if text.count("[") != text.count("]"):
        raise _bad_hostlist(text, "its brackets do not pair up")
    for part in _split_top(text):
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

    ``launcher`` is ``torchrun`` (also ``accelerate launch``, which runs torchrun, and any
    process given ``RANK``/``WORLD_SIZE``), ``mpi`` (``mpirun``/``mpiexec``: Open MPI,
    MPICH/Intel MPI via PMI, MVAPICH), ``lsf`` (``jsrun``), ``slurm`` (an ``srun`` step),
    ``kubeflow`` (a PyTorchJob pod), ``tpu`` (a TPU pod host), ``sagemaker`` (a SageMaker
    training host), ``process_group`` (a ``torch.distributed`` group that already exists in
    this process) or ``none`` (a single process, also a Slurm or LSF batch shell).
    ``sources`` names the variable each value came from; docs/reference/launchers.md lists
    the order in which they are tried and why.
    """

    launcher: str
    """Which launcher started this process: ``"torchrun"``, ``"mpi"``, ``"lsf"``,
    ``"slurm"``, ``"kubeflow"``, ``"tpu"``, ``"sagemaker"``, ``"process_group"`` or
    ``"none"`` (see above)."""
    rank: int
    """This process's global rank, from 0 to ``world_size - 1``."""
    world_size: int
    """How many processes the job has in all (1 for a single process)."""
    local_rank: int
    """This process's index among the processes of its node; 0 where the launcher does not
    say (under MPI with every rank on one node: the rank)."""
    local_world_size: int | None
    """How many processes run on this node; None where the launcher does not say (for
    example torchrun without ``LOCAL_WORLD_SIZE``, an uneven srun layout, ``jsrun``)."""
    master_addr: str | None
    """Rank 0's host, where the process group meets (``MASTER_ADDR``, else derived from the
    launcher: the first host of a node list, ``localhost`` for MPI on one node); None when
    nothing names it, which only a one-process launch allows."""
    master_port: int | None
    """The rendezvous TCP port: ``MASTER_PORT``, else the launcher's (15000 + the last four
    digits of ``SLURM_JOB_ID`` in a Slurm job, 10000 + ``LSB_JOBID`` % 1000 under ``jsrun``,
    7777 on SageMaker, else 29500); None when nothing names it (``init_process_group`` then
    uses 29500)."""
    sources: Mapping[str, str] = field(default_factory=dict)
    """Field name -> where its value came from: a variable (``"SLURM_PROCID"``) or how it
    was derived (``"first host of SLURM_JOB_NODELIST"``); a field left out took a default."""

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
        """The fields as JSON-ready plain data."""
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
# (rank, world size) pairs of the MPI launchers, in the order Accelerate's
# get_cpu_distributed_information reads them (accelerate 1.15.0 utils/environment.py):
# MPICH/Intel MPI (PMI, also srun --mpi=pmi2), Open MPI, MVAPICH2.
_MPI_WORLD = (
    ("PMI_RANK", "PMI_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"),
)
_MPI_LOCAL = (
    ("MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"),
)
# Variables torchrun sets for its workers and a Kubeflow pod's own environment does not
# (torch 2.13.0 torch/distributed/elastic/agent/server/local_elastic_agent.py, _start_workers).
_TORCHRUN_OWN = ("TORCHELASTIC_RUN_ID", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK")
_SAGEMAKER_PORT = 7777  # sagemaker-training-toolkit v5.1.0 torch_distributed.py MASTER_PORT


def _parse_int(raw: str) -> int | None:
    """``int(raw)`` as Python (and so Accelerate) reads it: `` 2``, ``+2``, ``02`` are 2."""
    try:
        return int(raw)
    except ValueError:
        return None


def _int_var(env: Mapping[str, str], name: str, *, low: int = 0) -> int:
    value = _parse_int(env[name])
    if value is None or value < low:
        raise LaunchError(
            f"{name}={env[name]!r} is not a whole number ≥ {low}",
            f"{name} as the launcher sets it, a number ≥ {low}",
            f"unset {name} or start the process with its launcher",
        )
    return value


def _port_var(env: Mapping[str, str], name: str) -> int:
    port = _int_var(env, name, low=1)
    if port > 65535:
        raise LaunchError(f"{name}={port} is not a TCP port", "a port from 1 to 65535")
    return port


def _first_of(env: Mapping[str, str], names: Sequence[str]) -> str | None:
    return next((n for n in names if env.get(n, "").strip()), None)


def _address(env: Mapping[str, str], src: dict[str, str]) -> str | None:
    addr = env.get("MASTER_ADDR", "").strip() or None
    if addr:
        src["master_addr"] = "MASTER_ADDR"
    return addr


def _job_port(env: Mapping[str, str], src: dict[str, str], default: int | None) -> int | None:
    """MASTER_PORT, else a port every task of a Slurm job derives from its id (as Lightning's
    SLURMEnvironment: 15000 + the last four digits), so concurrent jobs on a node differ."""
    if "MASTER_PORT" in env:
        src["master_port"] = "MASTER_PORT"
        return _port_var(env, "MASTER_PORT")
    if env.get("SLURM_JOB_ID", "").strip():
        src["master_port"] = "15000 + last four digits of SLURM_JOB_ID"
        return 15000 + _int_var(env, "SLURM_JOB_ID") % 10000
    return default


def _torchrun(e: Mapping[str, str]) -> LaunchInfo:
    src = {"rank": "RANK", "world_size": "WORLD_SIZE"}
    rank, world = _int_var(e, "RANK"), _int_var(e, "WORLD_SIZE", low=1)
    local = _int_var(e, "LOCAL_RANK", low=-1) if "LOCAL_RANK" in e else 0
    if local >= 0 and "LOCAL_RANK" in e:
        src["local_rank"] = "LOCAL_RANK"
    local = max(local, 0)  # -1 means "not launched" to Accelerate, which then reads 0
    local_size = _int_var(e, "LOCAL_WORLD_SIZE", low=1) if "LOCAL_WORLD_SIZE" in e else None
    addr = _address(e, src)
    port = _port_var(e, "MASTER_PORT") if "MASTER_PORT" in e else None
    if world > 1 and (addr is None or port is None):
        raise LaunchError(
            f"RANK and WORLD_SIZE={world} are set but MASTER_ADDR or MASTER_PORT is not",
            "all four, as torchrun sets them",
            "start the script with torchrun or accelerate launch, or export MASTER_ADDR "
            "and MASTER_PORT",
        )
    return _checked(LaunchInfo("torchrun", rank, world, local, local_size, addr, port, src))


def _kubeflow(e: Mapping[str, str]) -> LaunchInfo:
    """A PyTorchJob pod running the script itself (no torchrun): one process per pod.

    The training operator (kubeflow/training-operator v1.9.0 pkg/controller.v1/pytorch/
    envvar.go, master.go) sets RANK to the pod's index, WORLD_SIZE to pods × nprocPerNode,
    PET_NODE_RANK, PET_NNODES, PET_NPROC_PER_NODE and MASTER_ADDR/PORT (also as PET_*).
    Operators before v1.7 set WORLD_SIZE to the number of pods and no PET_* variables.
    """
    src: dict[str, str] = {}
    rank_var = "RANK" if "RANK" in e else "PET_NODE_RANK"
    size_var = "WORLD_SIZE" if "WORLD_SIZE" in e else "PET_NNODES"
    rank, world = _int_var(e, rank_var), _int_var(e, size_var, low=1)
    src.update(rank=rank_var, world_size=size_var, local_rank="one process per pod: 0")
    nproc = _parse_int(e.get("PET_NPROC_PER_NODE", "1"))
    pods = _parse_int(e.get("PET_NNODES", "")) if "PET_NNODES" in e else None
    if nproc is not None and nproc > 1:
        raise LaunchError(
            f"this Kubeflow PyTorchJob pod runs the script once, but {size_var}={world} counts "
            f"{nproc} processes per pod (PET_NPROC_PER_NODE) while {rank_var}={rank} is the "
            "pod's index",
            "torchrun in the container: it reads the PET_* variables the operator sets and "
            "starts PET_NPROC_PER_NODE processes with their own RANK",
            "make the container's command `torchrun train.py` (no arguments needed), or set "
            "nprocPerNode to 1",
        )
    if pods is not None and pods != world:
        raise LaunchError(
            f"this Kubeflow PyTorchJob pod has {size_var}={world} but PET_NNODES={pods} pods, "
            "and runs the script once",
            f"{size_var} equal to the number of pods when each pod runs one process",
            "start torchrun in the container (it reads PET_*), or fix the job's replicas",
        )
    addr = _address(e, src)
    if addr is None and e.get("PET_MASTER_ADDR", "").strip():
        addr, src["master_addr"] = e["PET_MASTER_ADDR"].strip(), "PET_MASTER_ADDR"
    port_var = _first_of(e, ("MASTER_PORT", "PET_MASTER_PORT"))
    port = _port_var(e, port_var) if port_var else None
    if port_var:
        src["master_port"] = port_var
    if world > 1 and (addr is None or port is None):
        raise LaunchError(
            "a Kubeflow PyTorchJob pod without MASTER_ADDR/MASTER_PORT",
            "the operator's MASTER_ADDR and MASTER_PORT (a Master replica sets them)",
            "give the PyTorchJob a Master replica, or export MASTER_ADDR and MASTER_PORT",
        )
    return _checked(LaunchInfo("kubeflow", rank, world, 0, 1, addr, port, src))


def _slurm(env: Mapping[str, str]) -> LaunchInfo:
    """An srun step's task. srun (src/common/env.c env_array_for_step, called from
    src/api/step_launch.c) sets SLURM_STEP_NUM_TASKS: the step's task count, also of a
    heterogeneous step, which SLURM_PROCID counts through."""
    src = {"rank": "SLURM_PROCID", "world_size": "SLURM_STEP_NUM_TASKS"}
    rank, world = _int_var(env, "SLURM_PROCID"), _int_var(env, "SLURM_STEP_NUM_TASKS", low=1)
    local = 0
    if "SLURM_LOCALID" in env:
        local, src["local_rank"] = _int_var(env, "SLURM_LOCALID"), "SLURM_LOCALID"
    local_size = None
    per_node = _first_of(env, ("SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE"))
    if per_node is not None and env[per_node].strip().isdigit():
        # "4"; uneven layouts ("2(x3),1") give no single size
        local_size, src["local_world_size"] = int(env[per_node]), per_node
    addr = _address(env, src)
    if addr is None:
        for name in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
            hosts = expand_hostlist(env[name]) if env.get(name, "").strip() else []
            if hosts:
                addr, src["master_addr"] = hosts[0], f"first host of {name}"
                break
    if addr is None and world > 1:
        raise LaunchError(
            "srun started this task but no node list is set",
            "SLURM_STEP_NODELIST or SLURM_JOB_NODELIST (srun sets them) or MASTER_ADDR",
            "export MASTER_ADDR=<the first node's host name> before srun",
        )
    port = _job_port(env, src, _DEFAULT_PORT)
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
    addr = _address(env, src)
    if addr is None and local_size == world:
        addr, src["master_addr"] = "localhost", f"{src['local_world_size']} = {size_var}: one node"
    elif addr is None and world > 1:
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
    port = _job_port(env, src, _DEFAULT_PORT)
    return _checked(LaunchInfo("mpi", rank, world, local, local_size, addr, port, src))


def _lsf_hosts(env: Mapping[str, str]) -> list[str]:
    """Compute hosts of an LSF job from LSB_DJOB_RANKFILE: one host per line, the first line
    being the launch node (as Lightning's LSFEnvironment._read_hosts skips it)."""
    path = env.get("LSB_DJOB_RANKFILE", "").strip()
    if not path:
        return []
    from hwbackends._base.files import _read_text

    # A regular file only, opened non-blocking (a FIFO there cannot hang the rank), and
    # bounded: a host per line, 1 MiB is some 50,000 hosts.
    text = _read_text(path, 1 << 20)
    if text is None:
        return []
    hosts = [ln.strip() for ln in text.splitlines()[1:] if ln.strip()]
    return [h for h in hosts if not any(c.isspace() or c in "[]" for c in h)]


def _lsf(env: Mapping[str, str]) -> LaunchInfo:
    """A ``jsrun`` task: JSM_NAMESPACE_RANK/SIZE/LOCAL_RANK (IBM Job Step Manager), the
    rendezvous host from LSB_DJOB_RANKFILE and the port from LSB_JOBID, as Lightning's
    LSFEnvironment derives them (10000 + LSB_JOBID % 1000)."""
    src = {"rank": "JSM_NAMESPACE_RANK", "world_size": "JSM_NAMESPACE_SIZE"}
    rank, world = _int_var(env, "JSM_NAMESPACE_RANK"), _int_var(env, "JSM_NAMESPACE_SIZE", low=1)
    local = 0
    if "JSM_NAMESPACE_LOCAL_RANK" in env:
        local = _int_var(env, "JSM_NAMESPACE_LOCAL_RANK")
        src["local_rank"] = "JSM_NAMESPACE_LOCAL_RANK"
    addr = _address(env, src)
    if addr is None:
        hosts = _lsf_hosts(env)
        if hosts:
            addr, src["master_addr"] = hosts[0], "first compute host of LSB_DJOB_RANKFILE"
    if addr is None and world > 1:
        raise LaunchError(
            "jsrun started this task but neither MASTER_ADDR nor a readable LSB_DJOB_RANKFILE "
            "names rank 0's host",
            "LSB_DJOB_RANKFILE (LSF sets it for the job) or MASTER_ADDR",
            "export MASTER_ADDR=<the first compute host> before jsrun",
        )
    if "MASTER_PORT" in env:
        port, src["master_port"] = _port_var(env, "MASTER_PORT"), "MASTER_PORT"
    elif env.get("LSB_JOBID", "").strip():
        port = 10000 + _int_var(env, "LSB_JOBID") % 1000
        src["master_port"] = "10000 + LSB_JOBID % 1000"
    else:
        port = _DEFAULT_PORT
    return _checked(LaunchInfo("lsf", rank, world, local, None, addr, port, src))


def _per_host(
    launcher: str, env: Mapping[str, str], hosts: list[str], rank: int, how: dict[str, str],
    default_port: int,
) -> LaunchInfo:  # fmt: skip
    """One process per host: the rank is the host's index, rank 0's host is the first."""
    src = {**how, "local_rank": "one process per host: 0"}
    addr = _address(env, src)
    if addr is None:
        addr, src["master_addr"] = hosts[0], f"first host of {how['world_size']}"
    if "MASTER_PORT" in env:
        port, src["master_port"] = _port_var(env, "MASTER_PORT"), "MASTER_PORT"
    else:
        port = default_port
    return _checked(LaunchInfo(launcher, rank, len(hosts), 0, 1, addr, port, src))


def _tpu(env: Mapping[str, str]) -> LaunchInfo:
    """A TPU pod host (GKE): TPU_WORKER_ID and TPU_WORKER_HOSTNAMES, which torch_xla reads
    (pytorch/xla v2.9.0 torch_xla/_internal/tpu.py build_tpu_env_from_vars, get_worker_ips)."""
    hosts = [h.strip() for h in env["TPU_WORKER_HOSTNAMES"].split(",") if h.strip()]
    if not hosts:
        raise LaunchError(
            f"TPU_WORKER_HOSTNAMES={env['TPU_WORKER_HOSTNAMES']!r} names no host",
            "the pod's worker host names, comma-separated",
            "unset TPU_WORKER_ID/TPU_WORKER_HOSTNAMES outside a TPU pod",
        )
    rank = _int_var(env, "TPU_WORKER_ID")
    how = {"rank": "TPU_WORKER_ID", "world_size": "TPU_WORKER_HOSTNAMES"}
    return _per_host("tpu", env, hosts, rank, how, _DEFAULT_PORT)


def _sagemaker(env: Mapping[str, str]) -> LaunchInfo:
    """A SageMaker training host: SM_HOSTS (a JSON list) and SM_CURRENT_HOST
    (aws/sagemaker-training-toolkit v5.1.0 ENVIRONMENT_VARIABLES.md); the toolkit's own
    torchrun uses the first host and port 7777 (torch_distributed.py)."""
    import json

    bad = LaunchError(
        f"SM_HOSTS={env['SM_HOSTS']!r} with SM_CURRENT_HOST={env['SM_CURRENT_HOST']!r} does not "
        "place this host",
        'SM_HOSTS a JSON list of host names (["algo-1","algo-2"]) that holds SM_CURRENT_HOST',
        "unset SM_HOSTS/SM_CURRENT_HOST outside SageMaker",
    )
    try:
        hosts = json.loads(env["SM_HOSTS"])
    except ValueError:
        raise bad from None
    current = env["SM_CURRENT_HOST"].strip()
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise bad
    if current not in hosts:
        raise bad
    how = {"rank": "SM_CURRENT_HOST's index in SM_HOSTS", "world_size": "SM_HOSTS"}
    return _per_host("sagemaker", env, hosts, hosts.index(current), how, _SAGEMAKER_PORT)


def _checked(info: LaunchInfo) -> LaunchInfo:
    if info.rank >= info.world_size:
        raise LaunchError(
            f"rank {info.rank} is not below the world size {info.world_size} "
            f"({info.sources.get('rank')}, {info.sources.get('world_size')})",
            "0 ≤ rank < world size",
            "start the processes with their launcher; do not mix variables of two launchers",
        )
    return info


def _one_process(why: str, e: Mapping[str, str]) -> LaunchInfo:
    """One process; a ``LOCAL_RANK`` of its own (not -1) is its local rank, as
    ``process_rank`` (and so the device choice) reads it."""
    src = {"rank": why}
    local = 0
    local_size_or_none: int | None = 1
    if "LOCAL_RANK" in e:
        local = max(_int_var(e, "LOCAL_RANK", low=-1), 0)  # -1: "not launched"
        if local:
            src["local_rank"] = "LOCAL_RANK"
            local_size_or_none = None  # a local rank above 0: other processes share the node
    return LaunchInfo("none", 0, 1, local, local_size_or_none, None, None, src)


def _existing_group(e: Mapping[str, str]) -> LaunchInfo | None:
    """The process group this process already belongs to, read from torch.distributed.

    Accelerate's ``debug_launcher`` and ``notebook_launcher``, or the script itself, may have
    created it: its rank and world size are the truth, whatever the variables say
    (``debug_launcher`` sets ``WORLD_SIZE`` and no ``RANK``). Only an imported
    ``torch.distributed`` is asked: a process without torch has no group.
    """
    import sys

    dist: Any = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    rank, world = int(dist.get_rank()), int(dist.get_world_size())
    src = {
        "rank": "torch.distributed.get_rank() of the existing process group",
        "world_size": "torch.distributed.get_world_size() of the existing process group",
    }
    try:
        named = _from_launcher(e)
    except LaunchError:
        named = None
    if named is not None and (named.rank, named.world_size) == (rank, world):
        # the launcher's variables describe the same group: keep its local rank and address
        return LaunchInfo(
            "process_group", rank, world, named.local_rank, named.local_world_size,
            named.master_addr, named.master_port, {**named.sources, **src},
        )  # fmt: skip
    local = _parse_int(e.get("LOCAL_RANK", ""))
    if local is not None and local >= 0:
        src["local_rank"] = "LOCAL_RANK"
    else:
        local, src["local_rank"] = 0, "unknown: 0"
    addr = _address(e, src)
    port = _port_var(e, "MASTER_PORT") if e.get("MASTER_PORT", "").strip() else None
    return LaunchInfo("process_group", rank, world, local, None, addr, port, src)


def _torch_style(e: Mapping[str, str]) -> LaunchInfo | None:
    """torchrun's RANK and WORLD_SIZE (or a Kubeflow pod's); a WORLD_SIZE alone is refused."""
    if "RANK" in e and "WORLD_SIZE" in e:
        if "PET_NNODES" in e and not any(k in e for k in _TORCHRUN_OWN):
            return _kubeflow(e)
        return _torchrun(e)
    if "WORLD_SIZE" in e and _int_var(e, "WORLD_SIZE", low=1) > 1:
        raise LaunchError(
            f"WORLD_SIZE={e['WORLD_SIZE'].strip()} is set but RANK is not, so every process "
            "would take rank 0 (Accelerate reads a missing RANK as 0)",
            "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT together, as torchrun sets them",
            "start the script with torchrun or accelerate launch, or unset WORLD_SIZE",
        )
    return None


def _srun_pmi(e: Mapping[str, str]) -> bool:
    """PMI_* that srun --mpi=pmi2 set for its own tasks: they agree with the step."""
    return _parse_int(e["PMI_RANK"]) == _parse_int(e["SLURM_PROCID"]) and _parse_int(
        e["PMI_SIZE"]
    ) == _parse_int(e["SLURM_STEP_NUM_TASKS"])


def _job_step(e: Mapping[str, str]) -> LaunchInfo | None:
    """An MPI launcher, ``jsrun``, or an srun step, in that order."""
    step = "SLURM_PROCID" in e and "SLURM_STEP_NUM_TASKS" in e
    for rank_var, size_var in _MPI_WORLD:
        if rank_var in e and size_var in e:
            if step and rank_var == "PMI_RANK" and _srun_pmi(e):
                return _slurm(e)  # the step says more
            return _mpi(e, rank_var, size_var)
    if "JSM_NAMESPACE_RANK" in e and "JSM_NAMESPACE_SIZE" in e:
        return _lsf(e)
    return _slurm(e) if step else None


def _per_host_launch(e: Mapping[str, str]) -> LaunchInfo | None:
    """One process per host: a Kubeflow pod given only PET_*, a TPU pod or SageMaker host."""
    if "PET_NNODES" in e and "PET_NODE_RANK" in e:
        return _kubeflow(e)
    if "TPU_WORKER_ID" in e and "TPU_WORKER_HOSTNAMES" in e:
        return _tpu(e)
    if "SM_HOSTS" in e and "SM_CURRENT_HOST" in e:
        return _sagemaker(e)
    return None


def _from_launcher(e: Mapping[str, str]) -> LaunchInfo:
    """``detect_launch`` from the variables alone."""
    found = _torch_style(e) or _job_step(e) or _per_host_launch(e)
    if found is not None:
        return found
    if "SLURM_JOB_ID" in e or "SLURM_PROCID" in e:
        return _one_process(
            "a Slurm batch or salloc shell (no srun step: SLURM_STEP_NUM_TASKS is unset): "
            "one process",
            e,
        )
    if "LSB_JOBID" in e:
        return _one_process("an LSF batch shell (no jsrun task: JSM_NAMESPACE_RANK is unset)", e)
    return _one_process("no launcher: one process", e)


def detect_launch(env: Mapping[str, str] | None = None) -> LaunchInfo:
    """Rank, world size, local rank and rendezvous address of this process under its launcher.

    A process group this process already belongs to (``torch.distributed.is_initialized()``:
    Accelerate's ``debug_launcher`` or ``notebook_launcher``, or the script's own) is the
    truth when ``env`` is None: its rank and world size, launcher ``process_group``. Else the
    process's own launcher wins over the allocation it runs in (docs/reference/
    launchers.md has the table and the sources):

    1. torchrun-style ``RANK`` and ``WORLD_SIZE`` (torchrun, ``accelerate launch``, also
       when srun, mpirun or a pod started torchrun); a Kubeflow PyTorchJob pod that runs
       the script itself (``PET_NNODES`` without torchrun's ``LOCAL_RANK``) is one process
       per pod;
    2. MPI ranks (``PMI_*``, ``OMPI_COMM_WORLD_*``, ``MV2_COMM_WORLD_*``), then ``jsrun``
       (``JSM_NAMESPACE_*``); ``PMI_*`` that agree with the srun step are srun's own
       (``srun --mpi=pmi2``), and the step is read;
    3. an ``srun`` step (``SLURM_PROCID`` with ``SLURM_STEP_NUM_TASKS``, which srun sets for
       its tasks and a batch shell does not have);
    4. one process per host: a Kubeflow pod given only ``PET_*``, a TPU pod host
       (``TPU_WORKER_ID``, ``TPU_WORKER_HOSTNAMES``), a SageMaker host (``SM_HOSTS``,
       ``SM_CURRENT_HOST``);
    5. anything else, a Slurm or LSF batch shell included, is one process; a ``LOCAL_RANK``
       of its own (without ``RANK``/``WORLD_SIZE``) is its local rank, as the device choice
       reads it.

    ``MASTER_ADDR``/``MASTER_PORT`` override the derived address and port. Values are read
    as ``int()`` reads them, as Accelerate does (`` 2`` is 2).

    :param env: the environment to read, variable name -> value; None reads ``os.environ``
        (and an existing process group). Under ``jsrun`` without ``MASTER_ADDR``, the file
        ``LSB_DJOB_RANKFILE`` names is read too.
    :raises LaunchError: when the launcher's variables are malformed or contradict each
        other (a value that is not a whole number, a rank not below the world size,
        ``WORLD_SIZE`` above 1 without ``RANK``, several processes and no rendezvous
        address); the message names the variable and the fix.
    """
    import os

    if env is None:
        group = _existing_group(os.environ)
        if group is not None:
            return group
    return _from_launcher(os.environ if env is None else env)
