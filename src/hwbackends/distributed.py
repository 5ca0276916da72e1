"""``torch.distributed`` for this hardware: the collective, process-group start, launch plans.

Launch model: every rank of a node sees the same devices (one visibility assignment for the
node) and uses device ``LOCAL_RANK`` among them. That is what torchrun, Accelerate and
Transformers' ``device_map="cuda"`` (rewritten to ``cuda:$LOCAL_RANK``) all assume; hiding all
but one device per rank would break that rewrite.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hwbackends._base.errors import HwBackendsError
from hwbackends._base.record import field, frozen
from hwbackends._integrations.launch import (
    _DEFAULT_PORT,
    LaunchError,
    LaunchInfo,
    detect_launch,
    expand_hostlist,
)
from hwbackends._integrations.launch_steps import (
    check_launch,
    check_sizes,
    launch_commands,
    login_node_warning,
    oversubscribed,
    pinned_env,
)
from hwbackends._integrations.rank import process_rank
from hwbackends._selection.target import Target, resolve_target

if TYPE_CHECKING:
    from hwbackends._base.protocol import Backend, Device
    from hwbackends._machine.host import Host

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


# -- Slurm hostlists -----------------------------------------------------------------------


# -- what the launcher says about this process -----------------------------------------------


def backend_name(
    *,
    backend: str | Backend | None = None,
    env: Mapping[str, str] | None = None,
    host: Host | None = None,
) -> str:
    """The process-group backend for this process's device (``gloo`` on CPU).

    :param backend: the hwbackends backend: an installed backend's name (``"cuda"``, which
        must be available here), a backend object, or None for the one ``hwbackends.current``
        selects.
    :param env: the environment to read (visibility variables, ``HWBACKENDS_*`` settings);
        None reads ``os.environ`` (or the environment a host file records).
    :param host: the machine, a ``hwbackends.Host`` (``Host.from_file(path)``); None:
        this one (or the host file ``HWBACKENDS_HOST`` names).
    """
    return resolve_target(backend, env=env, host=host).caps.distributed_backend


def init_process_group(
    *,
    backend: str | Backend | None = None,
    env: Mapping[str, str] | None = None,
    host: Host | None = None,
    **kwargs: Any,
) -> str:
    """``torch.distributed.init_process_group`` with the right collective; returns its name.

    Works under torchrun, ``accelerate launch``, Slurm ``srun``, ``mpirun``, LSF ``jsrun``,
    Kubeflow PyTorchJob pods, TPU pod hosts and SageMaker hosts without the user exporting
    ``RANK`` or ``MASTER_ADDR`` (see ``detect_launch``). The torchrun-style variables it found
    (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, …) are exported to ``os.environ`` where unset,
    as DeepSpeed's and Lightning's helpers do, so that Accelerate and Transformers in the same
    process see the same ranks: under srun or mpirun call it before ``TrainingArguments``
    (Accelerate does not read Slurm's variables). Pass ``env=`` to read another mapping and
    leave ``os.environ`` alone. A single process, a Slurm batch shell included, gets a
    one-rank group. A group that already exists in this process (Accelerate's
    ``debug_launcher`` or ``notebook_launcher``) is kept: nothing is initialised again, and
    its collective is returned.

    Pass any ``init_process_group`` keyword (``timeout``…) through ``kwargs``; ``backend=``
    here selects the hwbackends backend, not the collective.

    :param backend: the hwbackends backend: an installed backend's name (``"cuda"``, which
        must be available here), a backend object, or None for the one ``hwbackends.current``
        selects.
    :param env: the launcher's variables and the environment to read instead of
        ``os.environ``, which is then left unchanged; None reads ``os.environ`` and exports
        the torchrun-style variables found to it where unset.
    :param host: the machine, a ``hwbackends.Host`` (``Host.from_file(path)``); None:
        this one (or the host file ``HWBACKENDS_HOST`` names).
    :param kwargs: passed on to ``torch.distributed.init_process_group``; ``collective=``
        names the collective instead of the device's. Unless ``init_method`` or ``store`` is
        given, ``rank`` and ``world_size`` default to the launcher's and the rendezvous is
        ``tcp://MASTER_ADDR:MASTER_PORT`` (an in-memory store for one process without an
        address).
    :raises LaunchError: when the launcher's variables are malformed (see ``detect_launch``).
    :raises RankError: when this process's local rank is unreadable or names no visible
        device.
    """
    import os

    import torch.distributed as dist

    info = detect_launch(env)
    if dist.is_available() and dist.is_initialized():
        return _joined(info, env, kwargs)
    found = info.torch_env()
    # The device is this rank's, as the launcher numbers it; a rank without a device raises
    # here, before anything is exported or a group is joined.
    t = resolve_target(
        backend, env=None if env is None else {**found, **env}, host=host, rank_of=process_rank
    )
    if env is None:
        for k, v in found.items():
            os.environ.setdefault(k, v)
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


def _joined(info: LaunchInfo, env: Mapping[str, str] | None, kwargs: Mapping[str, Any]) -> str:
    """The group this process already belongs to (Accelerate's ``debug_launcher``, a notebook
    launcher, an earlier call): kept, not joined twice; its collective is returned.

    Under ``os.environ`` its rank and world size are exported where unset, so that
    Accelerate (which reads ``RANK``) numbers the process as the group does."""
    import os

    import torch.distributed as dist

    wanted = kwargs.get("collective")
    have = _group_collective(dist)
    if wanted and wanted not in have.replace(",", ":").split(":"):
        raise HwBackendsError(
            f"a process group already exists in this process with the {have} collective, and "
            f"collective={wanted!r} was asked for",
            "one process group per process: torch.distributed cannot start a second default group",
            "leave collective= out to keep the existing group, or call "
            "torch.distributed.destroy_process_group() first",
        )
    if env is None:
        os.environ.setdefault("RANK", str(info.rank))
        os.environ.setdefault("WORLD_SIZE", str(info.world_size))
        if info.sources.get("local_rank", "unknown").split(":")[0] not in ("unknown", ""):
            os.environ.setdefault("LOCAL_RANK", str(info.local_rank))
    return have


def _group_collective(dist: Any) -> str:
    """The existing group's collective. A group made with ``backend=None`` (Accelerate's
    ``PartialState`` under ``notebook_launcher`` on CPU) reports ``"undefined"`` from
    ``get_backend()``; ``get_backend_config()`` names what torch chose per device type
    (``cpu:gloo``)."""
    have = str(dist.get_backend())
    if have != "undefined":
        return have
    config = str(dist.get_backend_config())
    chosen = {part.rpartition(":")[2] for part in config.split(",") if part}
    return chosen.pop() if len(chosen) == 1 else config


@frozen
class RankPlan:
    """One process of a launch: its ranks, device and environment."""

    local_rank: int
    """The process's index on its node (``LOCAL_RANK``), from 0 to ``nproc_per_node - 1``."""
    rank: int
    """The global rank (``RANK``): ``node_rank * nproc_per_node + local_rank``."""
    torch_device: str
    """The torch device the rank uses (``"cuda:1"``: device ``LOCAL_RANK`` among the node's
    visible ones); ``"cpu"`` on the cpu backend and for a rank beyond the node's devices."""
    physical: tuple[int, ...]
    """The physical index of the rank's device (``Device.physical_index``, the numbering of
    ``hwbackends.visibility``) as a one-element tuple; empty when it has none or the plan
    was made without the hardware."""
    env: Mapping[str, str]
    """The variables this rank runs with: the plan's ``node_env`` plus ``LOCAL_RANK``,
    ``RANK``, ``LOCAL_WORLD_SIZE`` and ``WORLD_SIZE`` (remove ``node_unset`` first)."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON-ready plain data."""
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
    """The hwbackends backend the plan is for (``"cuda"``)."""
    collective: str
    """The ``torch.distributed`` backend its ranks use (``"nccl"``, ``"gloo"``, ...)."""
    nproc_per_node: int
    """Processes on each node: by default one per visible device (1 on the cpu backend)."""
    nnodes: int
    """How many nodes the launch spans."""
    node_rank: int
    """This node's index, from 0 to ``nnodes - 1``."""
    node_env: Mapping[str, str]
    """The node-wide visibility assignment: pins exactly the devices the node's ranks use,
    in logical order; empty when nothing is pinned (the cpu backend, a plan made without the
    hardware, a runtime without a visibility variable, or a failure ``problems`` names)."""
    node_unset: tuple[str, ...]
    """Variables to remove before applying ``node_env`` (the commands use ``env -u``)."""
    ranks: tuple[RankPlan, ...]
    """One :class:`RankPlan` per process of this node, in local-rank order."""
    torchrun: str
    """The shell command that starts this node's ranks with torchrun, ``node_env`` first;
    ``""`` for a multi-node Slurm plan without a rendezvous endpoint (use ``sbatch``)."""
    accelerate: str
    """The same with ``accelerate launch`` (``--multi_gpu`` for more than one process);
    ``""`` where ``torchrun`` is."""
    problems: tuple[str, ...] = field(default_factory=tuple)
    """What will go wrong as planned (more processes than devices, parallel sizes that do
    not fit, devices that cannot be pinned, Accelerate forming no group), each with what to
    change; empty when the plan is sound."""
    sbatch: str = ""
    """A Slurm batch script in which srun starts one task per process of each node (the
    user's script must call ``init_process_group``); it sets no visibility variable, since
    Slurm sets it from the job's allocation (``hwbackends launch-plan --scheduler slurm``)."""
    sbatch_torchrun: str = ""
    """A Slurm batch script in which srun starts torchrun once per node, meeting at the
    first node (``hwbackends launch-plan --scheduler slurm-torchrun``)."""
    warnings: tuple[str, ...] = ()
    """What the plan could not check on this machine (a login node without accelerators, a
    named backend whose hardware is elsewhere), each with the fix."""

    @property
    def world_size(self) -> int:
        """Processes in all: ``nproc_per_node * nnodes``."""
        return self.nproc_per_node * self.nnodes

    def to_dict(self) -> dict[str, Any]:
        """The fields and ``world_size`` as JSON-ready plain data (``hwbackends launch-plan
        --json``)."""
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
            "warnings": list(self.warnings),
        }


def check_parallel_sizes(
    world_size: int, visible: int, *, tp_size: int | None = None, fsdp_size: int | None = None
) -> list[str]:
    """Problems with ``DistributedConfig``-style sizes, each saying what to change.

    :param world_size: how many processes the job has in all.
    :param visible: how many devices one node shows; tensor parallelism must fit in it (0
        skips that check).
    :param tp_size: the tensor-parallel size; None is 1.
    :param fsdp_size: the FSDP (sharding) size; None is 1.
    :returns: the problems, empty when the sizes fit: each size at least 1, ``tp_size *
        fsdp_size`` dividing ``world_size``, and ``tp_size`` at most ``visible``.
    """
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
    """``HOST:PORT`` (``[v6addr]:PORT`` for IPv6) as ``(host, port)``; port 1–65535.

    :param endpoint: the rendezvous endpoint (``"node0.example:29500"``,
        ``"[fd00::1]:29500"``); blanks around it are ignored, the brackets are dropped.
    :raises HwBackendsError: when it is not ``HOST:PORT``.
    """
    text = endpoint.strip()
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    ok = bool(sep and host and port.isdigit() and len(port) <= 5 and 1 <= int(port) <= 65535)
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
    from hwbackends.accelerate import accelerate_group_devices

    devices, source = accelerate_group_devices()
    if t.caps.device_type in devices:
        return []
    return [
        f"Accelerate creates no process group on {t.caps.device_type} devices ({source}): "
        f"under accelerate launch or the Trainer each of the {world} ranks trains alone. "
        "Use one process, or call hwbackends.distributed.init_process_group() "
        f"({t.caps.distributed_backend}) and all-reduce yourself"
    ]


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

    :param nproc_per_node: processes on this node; None: one per device the backend shows
        (1 on the cpu backend). Required for a named backend whose hardware is elsewhere.
    :param nnodes: how many nodes the launch spans.
    :param node_rank: this node's index, from 0 to ``nnodes - 1``.
    :param rdzv_endpoint: ``HOST:PORT`` of node 0, reachable from every node (IPv6 in
        brackets); needed when ``nnodes`` is above 1, unless ``scheduler="slurm"``. On one
        node it sets the commands' master address and port.
    :param script: what each rank runs, one word per item (``("train.py", "--lr", "1e-4")``,
        ``("-m", "pkg.train")``); each word is shell-quoted in the commands.
    :param tp_size: the tensor-parallel size to check (see :func:`check_parallel_sizes`).
    :param fsdp_size: the FSDP size to check (see :func:`check_parallel_sizes`).
    :param backend: the hwbackends backend: an installed backend's name (``"cuda"``, which
        must be available here), a backend object, or None for the one ``hwbackends.current``
        selects.
    :param env: the environment to read (visibility variables, ``HWBACKENDS_*`` settings);
        None reads ``os.environ`` (or the environment a host file records).
    :param host: the machine to plan for, a ``hwbackends.Host`` (a compute node's
        ``Host.from_file(path)``); None: this one (or the host file ``HWBACKENDS_HOST``
        names).
    :param scheduler: ``"slurm"`` for a job started with sbatch; with it (or ``nnodes``
        above 1) a named backend whose hardware this machine lacks is planned from its
        declarations and ``nproc_per_node``, with a warning. None: no scheduler. The
        sbatch scripts are in the plan either way.
    :raises HwBackendsError: for sizes that describe no launch, a multi-node launch without
        an endpoint, or a malformed endpoint.
    :raises BackendUnavailableError: when the named backend cannot run here and the plan
        cannot be made without it.
    """
    check_sizes(nproc_per_node, nnodes, node_rank)
    warnings: list[str] = []
    t = _plan_target(backend, env, host, nproc_per_node, scheduler, nnodes, warnings)
    elsewhere = bool(warnings)  # a named backend with no hardware here: trust nproc_per_node
    if nproc_per_node is None:
        nproc_per_node = len(t.devices) if t.name != "cpu" else 1
    if t.name == "cpu" and backend is None and (scheduler or nnodes > 1):
        warnings.append(login_node_warning(t, scheduler, nnodes))
    warnings += oversubscribed(t, nproc_per_node)
    slurm_only = check_launch(nproc_per_node, nnodes, node_rank, rdzv_endpoint, scheduler)
    endpoint = parse_endpoint(rdzv_endpoint) if rdzv_endpoint is not None else None
    problems = [] if elsewhere else _devices_per_node(t, nproc_per_node)
    problems += _accelerate_problems(t, nproc_per_node * nnodes)
    problems += check_parallel_sizes(
        nproc_per_node * nnodes,
        len(t.devices) if t.name != "cpu" else nproc_per_node,
        tp_size=tp_size,
        fsdp_size=fsdp_size,
    )
    used = t.devices[:nproc_per_node] if t.name != "cpu" else ()
    node_env, unset = pinned_env(t, used, problems)
    ranks = _rank_plans(t, used, node_env, nproc_per_node, nnodes, node_rank, elsewhere)
    torchrun, accelerate = launch_commands(
        t, node_env, unset, script, (nproc_per_node, nnodes, node_rank), endpoint
    )
    from hwbackends.visibility import variables_for

    try:
        declared = list(variables_for(t.backend))  # sbatch keeps those Slurm sets
    except HwBackendsError:
        declared = []
    from hwbackends._integrations.sbatch import sbatch_scripts, slurm_gres

    sbatch, sbatch_tr = sbatch_scripts(
        t.name,
        nnodes,
        nproc_per_node,
        script,
        used_devices=nproc_per_node if elsewhere else len(used),
        gres=slurm_gres(t.backend),
        variables=declared,
    )
    return LaunchPlan(
        backend=t.name,
        collective=t.caps.distributed_backend,
        nproc_per_node=nproc_per_node,
        nnodes=nnodes,
        node_rank=node_rank,
        node_env=node_env,
        node_unset=unset,
        ranks=tuple(ranks),
        torchrun="" if slurm_only else torchrun,
        accelerate="" if slurm_only else accelerate,
        problems=tuple(problems),
        sbatch=sbatch,
        sbatch_torchrun=sbatch_tr,
        warnings=tuple(warnings),
    )


def _rank_plans(
    t: Target,
    used: Sequence[Device],
    node_env: Mapping[str, str],
    nproc_per_node: int,
    nnodes: int,
    node_rank: int,
    elsewhere: bool,
) -> list[RankPlan]:
    """Decides each local rank's global rank, torch device, physical device and environment."""
    ranks = []
    for lr in range(nproc_per_node):
        rank = node_rank * nproc_per_node + lr
        dev = used[lr] if lr < len(used) else None
        device = f"{t.caps.device_type}:{lr}" if dev is not None or elsewhere else "cpu"
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
                torch_device=device,
                physical=(dev.physical_index,) if dev is not None else (),
                env=renv,
            )
        )
    return ranks


def _plan_target(
    backend: str | Backend | None,
    env: Mapping[str, str] | None,
    host: Host | None,
    nproc_per_node: int | None,
    scheduler: str | None,
    nnodes: int,
    warnings: list[str],
) -> Target:
    """The target a plan is made for. A batch or multi-node plan for a named backend whose
    hardware this machine lacks (planning on a login node) is made from the backend's
    declarations and ``nproc_per_node``, with a warning saying what could not be checked."""
    from hwbackends._base.errors import BackendUnavailableError

    try:
        return resolve_target(backend, env=env, host=host)
    except BackendUnavailableError as exc:
        if not isinstance(backend, str) or not (scheduler or nnodes > 1):
            raise
        why = exc.what.partition(": ")[2] or exc.what
        if nproc_per_node is None:
            raise BackendUnavailableError(
                exc.what,
                "the number of processes per node, since this machine cannot count the "
                f"{backend} devices of the compute nodes",
                f"pass --nproc-per-node N (nproc_per_node=N) with N the {backend} devices of a "
                "compute node, or plan on a compute node (or with --host FILE of one)",
            ) from None
    from hwbackends._base.protocol import Capabilities
    from hwbackends._selection.registry import get, plugin_call, resolve_inputs

    e, h, _ = resolve_inputs(env, host)
    name = backend.strip().lower()
    b = get(name)
    caps = plugin_call(name, "capabilities", lambda: b.capabilities(None, host=h), Capabilities)
    warnings.append(
        f"this machine has no usable {name} hardware ({why}):"
        f" the plan trusts --nproc-per-node {nproc_per_node} and the {name} backend's "
        "declarations, unchecked against a compute node. Fix: run launch-plan on a compute "
        "node, or pass --host FILE with a compute node's host file (docs/concepts.md, "
        "'Host files')"
    )
    return Target(backend=b, host=h, env=e, devices=(), device=None, caps=caps, backend_name=name)


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
    """The environment one local rank runs with under the plan (visibility + rank variables).

    Remove the plan's ``node_unset`` names (``launch_plan(...).node_unset``) before
    applying it.

    :param local_rank: the rank's index on this node, from 0 to ``nproc_per_node - 1``.
    :param nproc_per_node: processes on this node; None: one per device the backend shows.
    :param nnodes: how many nodes the launch spans.
    :param node_rank: this node's index, from 0 to ``nnodes - 1``.
    :param backend: the hwbackends backend: an installed backend's name (``"cuda"``, which
        must be available here), a backend object, or None for the one ``hwbackends.current``
        selects.
    :param env: the environment to read (visibility variables, ``HWBACKENDS_*`` settings);
        None reads ``os.environ`` (or the environment a host file records).
    :param host: the machine, a ``hwbackends.Host`` (``Host.from_file(path)``); None:
        this one (or the host file ``HWBACKENDS_HOST`` names).
    :raises HwBackendsError: when ``local_rank`` is outside this node's processes, and as
        :func:`launch_plan`.
    """
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
