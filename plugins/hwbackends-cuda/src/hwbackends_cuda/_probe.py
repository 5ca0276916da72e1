"""The CUDA probe: NVIDIA GPUs on the PCI bus, the NVIDIA driver, and a CUDA build of torch.

Files and package metadata only (DESIGN.md rule 2). Every "not ready" answer names what is
wrong and the command that fixes it; an AMD GPU or a ROCm torch build on the same machine is
named too, so the report explains a hybrid laptop or a wrong wheel without a second look.
"""

from __future__ import annotations

from hwbackends.facts import (
    TORCH_INDEXES,
    describes_drivers,
    release,
    torch_build_problem,
    torch_install_hint,
    version_in_range,
)
from hwbackends.plugin import Probe, frozen

from ._driver import MIN_DRIVER

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from hwbackends import Host, HostDevice

__all__ = ["DRIVER_MIN", "INSTALL_HINT", "probe"]

#: The command that installs a CUDA build of torch (the backend's ``install_hint``).
INSTALL_HINT = torch_install_hint("cuda")

#: CUDA major -> the oldest Linux driver that runs it (``_driver``, minor version compatibility).
DRIVER_MIN: Mapping[int, str] = MIN_DRIVER

DRIVER_HINT = (
    "install the NVIDIA driver for this GPU (for example `sudo ubuntu-drivers install`, or "
    "the cuda-drivers package from NVIDIA's repository), then check `nvidia-smi`"
)


def _evidence(d: object) -> set[str]:
    """The evidence sources that found a host device (``extra["evidence"]``)."""
    ev = getattr(d, "extra", {}).get("evidence")
    return {e for e in ev if isinstance(e, str)} if isinstance(ev, (list, tuple)) else set()


def _names(host: Host, vendor: str, labels: list[str] | None = None) -> str:
    counts: dict[str, int] = {}
    devs = host.devices_of(vendor)
    for i, d in enumerate(devs):
        key = labels[i] if labels is not None and i < len(labels) else None
        key = key or d.name or d.arch or d.pci_device_id or "unknown model"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n}× {k}" if n > 1 else k for k, n in counts.items())


def _installed_problem(
    host: Host, known: list[tuple[int, str]], driver: tuple[int, ...] | None
) -> tuple[str | None, str | None] | None:
    """The installed CUDA wheel's release line and why it cannot serve here; ``(None, None)``
    without one; None when it serves every GPU on the loaded driver."""
    from ._wheels import caps_text, driver_problem, runs_on, wheel_of

    t = host.torch
    installed = wheel_of(t.version, t.cuda) if t is not None and t.flavour == "cuda" else None
    if installed is None or t is None:
        return None, None
    bad = list(dict.fromkeys(lbl for c, lbl in known if not runs_on(installed, c)))
    old_driver = driver_problem(installed, driver)
    if bad:
        return installed.torch, (
            f"the installed torch {t.version} has no kernels for {', '.join(bad)}: PyTorch "
            f"builds its {installed.index} wheels of torch {installed.torch} for compute "
            f"capability {caps_text(installed)} only"
        )
    if old_driver is not None:  # the probe names the driver; the advice stays on this line
        return installed.torch, None
    return None


def _wheel_advice(
    host: Host, archs: list[str | None], labels: list[str]
) -> tuple[str | None, str | None, str | None]:
    """(problem, hint, evidence) from PyTorch's per-release wheel matrix (``_wheels``).

    ``problem``: the installed CUDA wheel has no kernels for some GPU. ``hint``: the pip line
    for an index that has kernels for every GPU, with the reason when it is not the default
    index. ``evidence``: the matrix row the advice rests on, with its source."""
    machine = (host.machine or "").lower()
    if machine not in ("x86_64", "amd64", ""):
        return None, None, None  # the matrix rows are PyTorch's Linux x86_64/Windows wheels
    from ._arch import SM
    from ._wheels import advise, loaded_driver

    rows = [(SM.get(a or ""), lbl) for a, lbl in zip(archs, labels, strict=False)]
    known = [(r.capability, f"{lbl} ({r.arch}, {r.family})") for r, lbl in rows if r is not None]
    driver = loaded_driver(host)
    if not known and driver is None:
        return None, None, None
    installed = _installed_problem(host, known, driver)
    if installed is None:
        return None, None, None  # the installed CUDA wheel runs every GPU on this driver
    line, problem = installed
    default = TORCH_INDEXES["cuda"].rstrip("/").rpartition("/")[2]
    # GPUs of no known architecture: the driver alone can still rule the wheels out
    advice = advise(known, line=line, default_index=default, driver=driver)
    if not known and not advice.reason and problem is None:
        return None, None, None
    if advice.command is None:
        hint = advice.reason
    else:
        hint = advice.command + (f" ({advice.reason})" if advice.reason else "")
    evidence = f"wheel matrix: {advice.source}" if advice.reason else None
    if not machine and hint:  # a --root tree that does not show its CPU: say so, never assume
        hint = f"if this machine is x86_64 (its CPU architecture is not known): {hint}"
    return problem, hint, evidence


#: CPU architectures with no CUDA build of torch from PyTorch: download.pytorch.org's CUDA
#: indexes serve Linux x86_64 and aarch64 wheels and Windows x86_64 ones only (PyTorch's
#: RELEASE.md, "Release Compatibility Matrix"; https://download.pytorch.org/whl/cu128/torch/).
NO_CUDA_WHEEL_HINT = (
    "PyTorch publishes no CUDA wheels for {machine} (its CUDA indexes serve x86_64 and aarch64 "
    "Linux only): build torch from source with CUDA (https://github.com/pytorch/pytorch"
    "#from-source)"
)


def _machine_hint(host: Host, hint: str) -> str:
    """The torch fix for the host's CPU: PyTorch's index where it has CUDA wheels, the
    source build where it has none, and a word on what was assumed where the CPU is not
    known."""
    machine = host.machine or ""
    if machine.lower() in ("x86_64", "amd64", "aarch64", "arm64"):
        return hint
    if not machine:
        return f"if this machine is x86_64 or aarch64 (its CPU architecture is not known): {hint}"
    return NO_CUDA_WHEEL_HINT.format(machine=machine)


def _arch_problems(archs: list[str | None], cuda: str | None) -> tuple[list[str], list[str]]:
    """Problems (every GPU affected) and notes (some) from torch's CUDA version vs the archs."""
    if not cuda or not archs:
        return [], []
    from ._arch import SM  # the architecture table: only where there are GPUs to judge

    cv = release(cuda)
    bad: dict[str, str] = {}
    for arch in archs:
        row = SM.get(arch or "")
        if row is None:
            continue
        if version_in_range(cuda, row.cuda_min) is False:
            bad[arch or ""] = (
                f"torch's CUDA {cuda} cannot build for {row.arch} ({row.family}); it needs CUDA "
                f">= {row.cuda_min}"
            )
        elif row.cuda_max_major is not None and cv and cv[0] > row.cuda_max_major:
            bad[arch or ""] = (
                f"CUDA {cuda} no longer supports {row.arch} ({row.family}); use a CUDA "
                f"{row.cuda_max_major}.x build"
            )
    if not bad:
        return [], []
    msgs = sorted(set(bad.values()))
    return (msgs, []) if len(bad) == len({a for a in archs if a in SM}) else ([], msgs)


@frozen
class _Seen:
    """What the host shows of NVIDIA GPUs, their driver and the torch build."""

    gpus: tuple[HostDevice, ...]
    amd: tuple[HostDevice, ...]
    nodes: tuple[str, ...]  # /dev names of the driver's nodes
    driver: str | None  # the loaded driver's version ("" when not readable)
    bound: tuple[HostDevice, ...]  # the GPUs the driver is seen to drive
    torch_issue: tuple[str, str] | None  # torch_build_problem's (problem, fix)

    @property
    def loaded(self) -> bool:
        """The driver runs: its version file, a /dev node, or a GPU bound to it."""
        return self.driver is not None or bool(self.nodes) or bool(self.bound)


def _seen(host: Host) -> _Seen:
    """Decides which NVIDIA GPUs and driver the host shows, and whether torch is a CUDA build."""
    gpus = host.devices_of("nvidia")
    # Bound: a GPU's PCI function names the nvidia driver (its driver link or uevent), or
    # the driver's own files list it (/proc/driver/nvidia exists only while the module runs),
    # or WSL's driver, which runs on the Windows side, exposes it.
    bound = tuple(d for d in gpus if d.extra.get("driver") in ("nvidia", "nvgpu")
                  or _evidence(d) & {"nvidia-proc", "wsl"})  # fmt: skip
    return _Seen(
        gpus=gpus,
        amd=host.devices_of("amd"),
        nodes=tuple(n for n in host.device_nodes if n.startswith("nvidia")),
        driver=host.drivers.get("nvidia"),
        bound=bound,
        torch_issue=torch_build_problem(host, "cuda"),
    )


def _found(host: Host, seen: _Seen, labels: list[str]) -> list[str]:
    """Decides the evidence lines: the GPUs and who found them, the driver, its nodes, torch."""
    ev: list[str] = []
    if seen.gpus:
        found_by = sorted({e for d in seen.gpus for e in _evidence(d)})
        ev.append(f"{len(seen.gpus)} NVIDIA GPU(s) ({', '.join(found_by) or 'host file'}): "
                  f"{_names(host, 'nvidia', labels)}")  # fmt: skip
    if seen.driver is not None:
        ev.append(f"NVIDIA driver {seen.driver or '(version not readable)'}")
    elif seen.bound:
        via = {"driver link" for d in seen.bound if d.extra.get("driver") == "nvidia"}
        via |= {"Jetson nvgpu" for d in seen.bound if d.extra.get("driver") == "nvgpu"}
        via |= {e for d in seen.bound for e in _evidence(d) & {"nvidia-proc", "wsl"}}
        ev.append(f"NVIDIA driver in use ({', '.join(sorted(via))}; version not read)")
    if seen.nodes:
        ev.append("device nodes " + ", ".join("/dev/" + n for n in seen.nodes[:4])
                  + (" …" if len(seen.nodes) > 4 else ""))  # fmt: skip
    if host.torch is not None:
        ev.append(f"torch {host.torch.version} ({host.torch.flavour} build)")
    if seen.amd:
        ev.append(f"also {len(seen.amd)} AMD GPU(s) ({_names(host, 'amd')}): the rocm backend's")
    return ev


def _no_gpu(name: str, seen: _Seen, ev: list[str]) -> Probe:
    """Decides the answer without an NVIDIA GPU: a driver with nothing to drive, or nothing."""
    hint = None
    if seen.loaded:
        reason = (
            "the NVIDIA driver is loaded ("
            + (f"driver {seen.driver}" if seen.driver else "/dev/" + (seen.nodes or ("nvidia",))[0])
            + ") but no NVIDIA GPU is on the PCI bus"
        )
        hint = (
            "in a VM or container, pass the GPU through (docker run --gpus all, the "
            "Kubernetes NVIDIA device plugin); on bare metal check `lspci | grep -i nvidia`"
        )
    else:
        reason = "no NVIDIA GPU found"
    if seen.amd and seen.torch_issue is None:
        reason += (
            "; the GPU(s) here are AMD but the installed torch is a CUDA build "
            "(the rocm backend says how to fix it)"
        )
    return Probe(name, False, seen.torch_issue is None, reason, hint, tuple(ev))


def _torch_problems(
    host: Host,
    seen: _Seen,
    cuda: str | None,
    wheel_hint: str | None,
    problems: list[str],
    hints: list[str],
) -> None:
    """Decides what keeps torch from the GPUs: not a CUDA build, or a driver too old for its
    CUDA."""
    from ._tegra import jetson_hint, pytorch_index_build

    driver = seen.driver
    jetson = jetson_hint(seen.gpus)
    if jetson is not None and seen.torch_issue is None and pytorch_index_build(host, seen.gpus):
        problems.append(
            f"the installed torch {host.torch.version if host.torch else ''} is a "
            "download.pytorch.org CUDA build, which does not run on a Jetson's integrated GPU"
        )
        hints.append(jetson)
    elif seen.torch_issue is not None:
        problems.append(seen.torch_issue[0])
        if jetson is not None:
            hints.append(jetson)
        elif wheel_hint is None:
            hints.append(_machine_hint(host, seen.torch_issue[1]))
        else:
            replaces = f" (replaces the {host.torch.flavour} build)" if host.torch else ""
            hints.append(wheel_hint + replaces)
    elif driver and cuda:
        need = DRIVER_MIN.get(release(cuda)[0] if release(cuda) else -1)
        if need is not None and version_in_range(driver, need) is False:
            problems.append(f"driver {driver} is too old for torch's CUDA {cuda} (needs >= {need})")
            hints.append(
                wheel_hint
                or f"upgrade the NVIDIA driver to {need} or newer, or install a "
                "torch build for an older CUDA"
            )


def _kernel_problems(
    cuda: str | None,
    archs: list[str | None],
    wheel: tuple[str | None, str | None],
    problems: list[str],
    hints: list[str],
    ev: list[str],
) -> None:
    """Decides whether the CUDA build has kernels for the GPUs: the wheel matrix's answer,
    else torch's CUDA version against each architecture."""
    wheel_problem, wheel_hint = wheel
    if wheel_problem is not None:
        problems.append(wheel_problem)
        hints.append(wheel_hint or f"pip install torch --index-url {TORCH_INDEXES['cuda']}")
        return
    arch_problems, notes = _arch_problems(archs, cuda)
    problems += arch_problems
    if arch_problems:
        hints.append(wheel_hint or f"pip install torch --index-url {TORCH_INDEXES['cuda']}")
    ev += notes


def _ready(
    name: str, host: Host, seen: _Seen, what: str, archs: list[str | None], ev: list[str]
) -> Probe:
    """Decides the ready answer: the GPUs, their architectures, the driver and torch."""
    known = sorted({a for a in archs if a})
    reason = (
        f"CUDA ready: {what}"
        + (f" [{', '.join(known)}]" if known else "")
        + (f", driver {seen.driver}" if seen.driver else "")
        + (f", torch {host.torch.version}" if host.torch else "")
    )
    if seen.amd:
        reason += "; the AMD GPU(s) are not used: torch is a CUDA build"
    return Probe(name, True, True, reason, None, tuple(ev))


def probe(name: str, host: Host, archs: list[str | None], labels: list[str]) -> Probe:
    seen = _seen(host)
    ev = _found(host, seen, labels)
    if not seen.gpus:
        return _no_gpu(name, seen, ev)
    problems: list[str] = []
    hints: list[str] = []
    from ._system import bound_elsewhere
    from ._tegra import JETSON_NODES_HINT, jetson_gpus

    elsewhere = bound_elsewhere(seen.gpus)
    if elsewhere is not None and not seen.loaded:  # the driver bound names the reason
        problems.append(elsewhere[0])
        hints.append(elsewhere[1])
    elif elsewhere is not None:
        ev.append(f"not usable here: {elsewhere[0]}")
    elif jetson_gpus(seen.gpus) and not seen.loaded:
        problems.append(
            "the Jetson's GPU driver (nvgpu) shows no device node (/dev/nvhost-gpu, /dev/nvmap)"
        )
        hints.append(JETSON_NODES_HINT)
    elif describes_drivers(host) and not seen.loaded:
        problems.append(
            "the NVIDIA kernel driver is not loaded (no GPU is bound to it, no "
            "/proc/driver/nvidia/version, no /dev/nvidia* nodes)"
        )
        hints.append(DRIVER_HINT)
    cuda = host.torch.cuda if host.torch is not None else None
    wheel_problem, wheel_hint, wheel_source = _wheel_advice(host, archs, labels)
    if wheel_source is not None:
        ev.append(wheel_source)
    _torch_problems(host, seen, cuda, wheel_hint, problems, hints)
    if seen.torch_issue is None:
        _kernel_problems(cuda, archs, (wheel_problem, wheel_hint), problems, hints, ev)
    what = f"{len(seen.gpus)} NVIDIA GPU(s) ({_names(host, 'nvidia', labels)})"
    if problems:
        return Probe(name, True, False, f"{what} found, but " + "; and ".join(problems),
                     "; then ".join(hints), tuple(ev))  # fmt: skip
    return _ready(name, host, seen, what, archs, ev)
