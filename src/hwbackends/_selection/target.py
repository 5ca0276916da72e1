"""What the integrations work from: one backend, its visible devices, one device's facts."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from hwbackends._base.errors import BackendUnavailableError, HwBackendsError, RankError
from hwbackends._base.protocol import Backend, Capabilities, Device, Probe
from hwbackends._base.record import frozen
from hwbackends._machine.host import Host

__all__ = [
    "DEFAULT_BACKEND_FIX",
    "LocalRank",
    "RankError",
    "Target",
    "resolve_target",
    "torch_fix",
]


@frozen
class LocalRank:
    """This process's rank on its node under a launcher, and where it was read.

    ``source`` is what the user can look up (``LOCAL_RANK=5``, ``SLURM_LOCALID=3``);
    ``launcher`` is ``detect_launch``'s name for the launcher (``torchrun``, ``slurm``, ``mpi``,
    ...); ``bound`` says the launcher gave each task its own devices (``srun --gpus-per-task``),
    so the first visible device is this task's whatever its local rank.
    """

    index: int
    source: str
    launcher: str = "torchrun"
    bound: str = ""  # the variable that says the launcher bound the devices per task


#: The fix for a named backend that cannot run here and whose probe offers none, worded for
#: Python callers; the CLI (`--backend`) recognises it and gives its own instead.
DEFAULT_BACKEND_FIX = "leave backend=None to use the selected backend"


@frozen
class Target:
    backend: Backend
    host: Host
    env: Mapping[str, str]
    devices: tuple[Device, ...]
    device: Device | None
    caps: Capabilities
    backend_name: str = ""  # read once: a plugin's name property is not asked again
    rank: LocalRank | None = None  # the launcher's local rank the device was chosen by
    chosen: bool = False  # the caller named the device (device=): the model goes there alone

    @property
    def name(self) -> str:
        return self.backend_name or self.backend.name

    def capabilities_of(self, device: Device | None) -> Capabilities:
        """The backend's capabilities for ``device`` on this target's host, called under the
        plugin guard (the integrations' one door to the backend's ``capabilities``)."""
        from hwbackends._selection.calls import plugin_call

        b, host = self.backend, self.host
        return plugin_call(
            self.name, "capabilities", lambda: b.capabilities(device, host=host), Capabilities
        )


def resolve_target(
    backend: str | Backend | None = None,
    device: Device | int | None = None,
    *,
    env: Mapping[str, str] | None = None,
    host: Host | None = None,
    rank_of: Callable[[Mapping[str, str]], LocalRank | None] | None = None,
) -> Target:
    """Resolve the backend (chosen or named), its visible devices, and the device to use.

    ``device`` may be a ``Device``, a logical index, or None for the process's device: the
    one of this process's local rank when ``rank_of`` (which reads the launcher's variables
    from the environment) finds one, else the first visible device. A local rank at or
    beyond the number of visible devices is a ``RankError``: it never falls back to device 0,
    where every rank without a device would pile up.
    """
    from hwbackends._selection.registry import (
        Inputs,
        _default_registry,
        explain,
        explain_inputs,
        get_from_report,
        plugin_call,
        report_for,
        resolve_inputs,
    )

    # One reading of the inputs per call: for the defaults, the process's own (one snapshot
    # of the environment, the machine read once), and the selection made from them.
    e, h, settings = resolve_inputs(env, host)
    name: str
    report = report_for(e, h)  # the selection already made from these inputs, if any
    if backend is None:
        if report is None:
            report = explain() if env is None and host is None else explain_inputs(
                Inputs(env=e, host=h, settings=settings)
            )  # fmt: skip
        name = report.chosen
        b = get_from_report(report)
    elif (
        isinstance(backend, str) and report is not None and report.chosen == backend.strip().lower()
    ):
        name = report.chosen  # the selection probed it and listed its devices
        b = get_from_report(report)
    elif isinstance(backend, str):
        report = None
        name = backend.strip().lower()
        b = _default_registry().get(name, settings)  # a clash is resolved by env's settings
        probe = plugin_call(name, "probe", lambda: b.probe(h), Probe)
        if not probe.available:
            raise BackendUnavailableError(
                f"the {name} backend is not available here: {probe.reason}",
                "a backend whose hardware and software are both ready",
                probe.hint or DEFAULT_BACKEND_FIX,
            )
    else:
        report = None
        b = backend
        name = str(getattr(backend, "name", type(backend).__name__))
    if report is not None:  # the selection listed them from these inputs
        devices = report.devices
    else:
        devices = tuple(plugin_call(name, "devices", lambda: b.devices(h, e), list))
    dev, rank = _device_of(device, devices, name, b, e, rank_of)
    caps = plugin_call(name, "capabilities", lambda: b.capabilities(dev, host=h), Capabilities)
    return Target(
        backend=b,
        host=h,
        env=e,
        devices=devices,
        device=dev,
        caps=caps,
        backend_name=name,
        rank=rank,
        chosen=device is not None,
    )


def _device_of(
    device: Device | int | None,
    devices: tuple[Device, ...],
    name: str,
    b: Backend,
    e: Mapping[str, str],
    rank_of: Callable[[Mapping[str, str]], LocalRank | None] | None,
) -> tuple[Device | None, LocalRank | None]:
    """The device ``device`` names among ``devices``, or the process's (``resolve_target``),
    and the local rank it was chosen by."""
    if isinstance(device, Device):
        return device, None
    if isinstance(device, int) and not isinstance(device, bool):
        if not 0 <= device < len(devices):
            raise HwBackendsError(
                f"device index {device} is out of range: {name} shows {len(devices)} "
                "visible device(s) to this process",
                f"a logical index from 0 to {len(devices) - 1}" if devices else "no index",
                "check `hwbackends devices` and the visibility variables",
            )
        return devices[device], None
    if device is not None:
        raise HwBackendsError(
            f"device={device!r} is not a device",
            "a hwbackends.Device, a logical index, or None",
        )
    # on cpu every rank shares the one device, as torch does: no rank is read
    found = rank_of(e) if rank_of is not None and devices and name != "cpu" else None
    if found is None:
        return (devices[0] if devices else None), None
    return (devices[0] if found.bound else _rank_device(found, devices, name, b, e)), found


#: How each launcher is told the number of processes per node, for the fix of a RankError.
_NPROC_OPTION = {
    "torchrun": "torchrun --nproc-per-node {n} (accelerate launch --num_processes {n})",
    "slurm": "srun --ntasks-per-node={n}",
    "mpi": "mpirun -npernode {n} (Open MPI) or mpiexec -ppn {n} (MPICH)",
    "lsf": "jsrun --rs_per_host {n}",
}


def _rank_device(
    rank: LocalRank, devices: tuple[Device, ...], name: str, b: Backend, env: Mapping[str, str]
) -> Device:
    """The device of local rank ``rank``, or a ``RankError`` naming the rank, the count and
    the fix: a rank past the visible devices has none, and device 0 would be shared."""
    if rank.index < len(devices):
        return devices[rank.index]
    n = len(devices)
    shown = ", ".join(d.torch_device for d in devices)
    set_vars = _set_visibility(b, env)
    under = f" under {', '.join(f'{k}={v!r}' for k, v in set_vars)}" if set_vars else ""
    option = _NPROC_OPTION.get(rank.launcher, "{n} processes per node").format(n=n)
    more = (
        f", or list more devices in {' / '.join(k for k, _ in set_vars)} "
        "(`hwbackends devices` shows the physical indices)"
        if set_vars
        else ""
    )
    raise RankError(
        f"local rank {rank.index} ({rank.source}) has no {name} device: this process sees "
        f"{n} ({shown}){under}, so ranks {n} and above would all share {devices[0].torch_device}",
        f"a local rank from 0 to {n - 1}: one process per visible device",
        f"start at most {n} process(es) per node: {option}{more}",
    )


def _set_visibility(b: Backend, env: Mapping[str, str]) -> list[tuple[str, str]]:
    """The backend's visibility variables that are set, in its declaration's order."""
    from hwbackends._visibility.explain import rule_of

    try:  # a broken declaration is reported by selection; the error here stays about ranks
        names = [v for v in rule_of(b).variables if isinstance(v, str)]
    except Exception:
        return []
    return [(k, env[k]) for k in names if k in env]


def torch_fix(backend: Backend, host: Host) -> str:
    """The command that makes torch importable for ``backend`` on this machine: where the
    plugin says its torch comes from (``torch_source``: its wheel index, its vendor's
    instructions, or its ``install_hint`` when the vendor's stack installs torch), else the
    one its probe gives for these devices (the wheel index that has kernels for them), else
    the wheel index of the backend's torch build (``torch_flavour``; the CPU wheel for cpu),
    else the backend's own ``install_hint``, run with this interpreter's pip."""
    import shlex
    import sys

    from hwbackends._base.protocol import torch_source
    from hwbackends._base.versions import TORCH_INDEXES, torch_install_hint

    try:  # a plugin's declarations, read defensively: this runs while reporting an error
        name = str(getattr(backend, "name", ""))
        flavour = getattr(backend, "torch_flavour", None)
        hint = getattr(backend, "install_hint", "")
        kind, text = torch_source(getattr(backend, "torch_source", None), flavour)
    except Exception:
        name, flavour, hint, kind, text = "", None, "", "stock", ""
    if name == "cpu":
        flavour = "cpu"
    device_cmd = _probe_torch_command(backend, host) if kind == "stock" else None
    if kind == "index":
        cmd = f"pip install torch --index-url {text}"
    elif kind == "vendor":
        cmd = text
    elif kind == "preinstalled":
        cmd = (hint if isinstance(hint, str) else "").strip() or (
            "reinstall the vendor's software stack, which installs its torch"
        )
    elif device_cmd is not None:
        cmd = device_cmd
    elif isinstance(flavour, str) and flavour in TORCH_INDEXES:
        cmd = torch_install_hint(flavour)
    elif isinstance(hint, str) and hint.strip():
        cmd = hint.strip()
    else:
        cmd = "pip install torch"
    if cmd.startswith("pip install "):  # the pip of the Python that must import torch
        cmd = f"{shlex.quote(sys.executable)} -m {cmd}"
    if host.torch is None:
        return f"install torch: {cmd}"
    # installed (its metadata is there) yet not importable: a broken or partial install
    return f"reinstall torch, whose installed {host.torch.version} does not import: {cmd}" + (
        " --force-reinstall" if "--index-url https://download.pytorch.org/" in cmd else ""
    )


def _probe_torch_command(backend: Backend, host: Host) -> str | None:
    """The ``pip install … torch … --index-url`` command of the backend's probe hint (a plugin
    may pick the index by device, e.g. cu126 for Pascal GPUs), or None."""
    from hwbackends._selection.registry import plugin_call

    try:
        probe = plugin_call(
            str(getattr(backend, "name", "?")), "probe", lambda: backend.probe(host)
        )
    except Exception:  # reporting an error: a failing probe must not replace it
        return None
    hint = getattr(probe, "hint", None)
    if not isinstance(hint, str) or not hint.startswith("pip install "):
        return None
    cmd = hint.partition(" (")[0].strip()
    words = cmd.split()
    if "--index-url" not in words or not any(w.strip("'\"").startswith("torch") for w in words):
        return None
    return cmd
