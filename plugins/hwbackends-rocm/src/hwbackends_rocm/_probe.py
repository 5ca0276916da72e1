"""The ROCm probe: AMD GPUs, the amdgpu driver with ``/dev/kfd``, and a HIP build of torch.

Files and package metadata only (DESIGN.md rule 2).

Integrated GPUs. Every AMD desktop and laptop CPU since Ryzen 7000 carries an iGPU that the
host lists as vendor ``amd``. An iGPU counts as ROCm hardware only when its gfx target is a
ROCm target (supported or community, e.g. Strix Halo gfx1151) or unknown; the known
non-targets (Raphael gfx1036, Phoenix gfx1103, ...) are ignored for "is the hardware here"
and named in the evidence. When such an iGPU sits beside a usable GPU, ROCm still
enumerates it (KFD gives it a node; many user reports of ``device_count() == 2`` with one
discrete card, inferred), so the ready reason says which variable hides it.
"""

from __future__ import annotations

from hwbackends.facts import (
    describes_drivers,
    torch_build_problem,
    torch_install_hint,
    version_in_range,
)
from hwbackends.plugin import Probe, frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from hwbackends import Host, HostDevice
    from hwbackends.facts import WheelAdvice

    from ._arch import GfxArch, PciRow

__all__ = ["INSTALL_HINT", "Gpu", "classify", "probe"]

DRIVER_HINT = (
    "install the amdgpu driver and ROCm (amdgpu-install --usecase=rocm, see "
    "https://rocm.docs.amd.com/projects/install-on-linux/) and reboot"
)
KFD_HINT = (
    "in a container add --device=/dev/kfd --device=/dev/dri (and the video/render groups); on "
    "the host check that amdgpu loaded with KFD (dmesg | grep kfd)"
)


SUPPORT_LIST = (
    "AMD's ROCm support list: https://rocm.docs.amd.com/projects/install-on-linux/en/latest/"
    "reference/system-requirements.html"
)

#: The command that installs a ROCm build of torch (the backend's ``install_hint``).
INSTALL_HINT = torch_install_hint("rocm")


@frozen
class Gpu:
    """One AMD device of the host and how ROCm treats it."""

    position: int  # among the host's AMD devices (the visibility layer's physical index)
    device: HostDevice
    row: GfxArch | None
    integrated: bool
    arch: str | None = None  # the host's gfx target, else the PCI device-id table's
    pci: PciRow | None = None  # the PCI device-id table's row, if the id is listed

    @property
    def pre_gcn(self) -> bool:
        """A GPU older than GCN (TeraScale and before): amdgpu and ROCm never drove it."""
        return self.arch is None and self.pci is not None and self.pci.pre_gcn

    @property
    def usable(self) -> bool:
        """A discrete GCN-or-newer GPU, or an iGPU not known to be outside ROCm's targets.

        An iGPU whose target is unknown (no KFD node yet, or a target newer than the table)
        counts, so that a missing driver is reported rather than hidden.
        """
        if self.pre_gcn:
            return False
        return not (self.integrated and self.row is not None and self.row.support == "unsupported")

    @property
    def label(self) -> str:
        if self.pre_gcn and self.pci is not None:
            did = (self.device.pci_device_id or "").lower().removeprefix("0x")
            return f"AMD {self.pci.product or 'GPU'} (PCI 1002:{did}, {self.pci.family})"
        arch = self.arch or "gfx?"
        named = self.device.name or (self.pci.product if self.pci else "")
        what = self.row.products if self.row else (named or "unknown model")
        return f"{arch} ({what})"


def _evidence(d: HostDevice) -> set[str]:
    """The evidence sources that found a host device (``extra["evidence"]``)."""
    ev = d.extra.get("evidence")
    return {e for e in ev if isinstance(e, str)} if isinstance(ev, (list, tuple)) else set()


def classify(host: Host, arch_of: Callable[[HostDevice], str | None] | None = None) -> list[Gpu]:
    amd = host.devices_of("amd")
    if not amd:
        return []
    from ._arch import GFX, pci_row  # the tables: only where there are GPUs to classify

    out = []
    for i, d in enumerate(amd):
        arch = arch_of(d) if arch_of is not None else d.arch
        row = GFX.get(arch or "")
        flag = d.extra.get("integrated")
        integrated = flag if isinstance(flag, bool) else bool(row and row.integrated)
        out.append(Gpu(i, d, row, integrated, arch, pci_row(d.pci_device_id)))
    return out


def _summary(gpus: Sequence[Gpu]) -> str:
    counts: dict[str, int] = {}
    for g in gpus:
        counts[g.label] = counts.get(g.label, 0) + 1
    return ", ".join(f"{n}× {k}" if n > 1 else k for k, n in counts.items())


@frozen
class _Seen:
    """What the host shows of AMD GPUs, the amdgpu driver and the torch build."""

    gpus: tuple[Gpu, ...]
    usable: tuple[Gpu, ...]
    old: tuple[Gpu, ...]  # older than GCN: present, but ROCm and amdgpu never drove them
    ignored: tuple[Gpu, ...]  # integrated GPUs that are no ROCm target
    nvidia: tuple[HostDevice, ...]
    kfd: bool
    amdgpu: bool
    torch_issue: tuple[str, str] | None  # torch_build_problem's (problem, fix)


@frozen
class _Wheels:
    """What PyTorch's ROCm wheel table says of the usable GPUs (``_wheels``)."""

    problem: str | None  # the installed ROCm torch has no kernels for some GPU
    hint: str | None  # the pip line (with its reason), or why no wheel serves them
    evidence: str | None  # the rows the advice rests on, with their sources
    advice: WheelAdvice | None = None

    @property
    def none(self) -> bool:
        """No PyTorch ROCm wheel has kernels for some GPU."""
        return self.advice is not None and self.advice.status == "none"


def _wheel_advice(host: Host, usable: Sequence[Gpu]) -> _Wheels:
    """Decides which wheel index has kernels for the usable GPUs: the installed torch's row,
    else the default index, else the newest (or last) release whose wheels carry them."""
    gpus = list(dict.fromkeys((g.arch, g.label) for g in usable if g.arch))
    if not gpus or (host.machine or "").lower() not in ("x86_64", "amd64"):
        return _Wheels(None, None, None)  # the rows are PyTorch's Linux x86_64 wheels
    from hwbackends.facts import TORCH_INDEXES

    from ._wheels import advise, install_line, lacking, wheel_of

    t = host.torch
    default = TORCH_INDEXES["rocm"].rstrip("/").rpartition("/")[2]
    problem = line = None
    if t is not None and t.flavour == "rocm":
        installed = wheel_of(t.version, t.hip)
        bad = [] if installed is None else [(a, lbl) for a, lbl in gpus if not installed.carries(a)]
        if installed is None or not bad:
            return _Wheels(None, None, None)
        line = installed.torch
        problem = f"the installed torch {t.version} has no kernels for " + lacking(installed, bad)
    advice = advise(gpus, line=line, default_index=default)
    evidence = f"PyTorch ROCm wheels: {advice.source}" if advice.reason else None
    return _Wheels(problem, install_line(advice), evidence, advice)


def _seen(host: Host, arch_of: Callable[[HostDevice], str | None] | None) -> _Seen:
    """Decides which AMD GPUs count, whether amdgpu and KFD run, and whether torch is a ROCm
    build."""
    gpus = tuple(classify(host, arch_of))
    # amdgpu runs: loaded as a module, bound to a GPU (its driver link or uevent), or its KFD
    # topology lists the GPU (the topology exists only while amdgpu runs with KFD).
    amdgpu = "amdgpu" in host.drivers or any(
        g.device.extra.get("driver") == "amdgpu" or "kfd" in _evidence(g.device) for g in gpus
    )
    return _Seen(
        gpus=gpus,
        usable=tuple(g for g in gpus if g.usable),
        old=tuple(g for g in gpus if g.pre_gcn),
        ignored=tuple(g for g in gpus if not g.usable and not g.pre_gcn),
        nvidia=host.devices_of("nvidia"),
        kfd=host.has_node("kfd"),
        amdgpu=amdgpu,
        torch_issue=torch_build_problem(host, "rocm"),
    )


def _found(host: Host, seen: _Seen) -> list[str]:
    """Decides the evidence lines: the GPUs counted and ignored, the driver, torch, NVIDIA."""
    ev: list[str] = []
    if seen.usable:
        ev.append(f"{len(seen.usable)} AMD GPU(s): {_summary(seen.usable)}")
    for g in seen.ignored:
        ev.append(f"ignored integrated GPU {g.label}: not a ROCm target")
    for g in seen.old:
        ev.append(f"ignored {g.label}: older than GCN, driven by the radeon driver")
    if seen.amdgpu or seen.kfd:
        running = (("amdgpu", seen.amdgpu), ("/dev/kfd", seen.kfd))
        ev.append("driver: " + ", ".join(x for x, on in running if on))
    if host.torch is not None:
        ev.append(f"torch {host.torch.version} ({host.torch.flavour} build)")
    if seen.nvidia:
        ev.append(f"also {len(seen.nvidia)} NVIDIA GPU(s): the cuda backend's")
    return ev


def _why_none_usable(seen: _Seen) -> tuple[str, str | None]:
    """Decides why no AMD GPU is usable (reason, hint): too old, integrated only, a driver
    with no GPU, or none at all."""
    old, ignored = seen.old, seen.ignored
    hint = None
    if old:
        reason = (
            f"no ROCm support for this GPU: {_summary(old)} "
            + ("is a GPU" if len(old) == 1 else "are GPUs")
            + " older than GCN, not supported by ROCm or the amdgpu driver (both start "
            "at GCN; Linux drives it with the radeon driver: amdgpu_unsupported_pciidlist "
            "in drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c)"
        )
        if ignored:
            reason += f"; and an integrated GPU ROCm does not support ({_summary(ignored)})"
    elif ignored:
        reason = f"only an integrated AMD GPU that ROCm does not support ({_summary(ignored)})"
    elif seen.kfd or seen.amdgpu:
        reason = "the amdgpu driver (/dev/kfd) is present but no AMD GPU is on the PCI bus"
        hint = "in a VM or container, pass the GPU through (--device=/dev/dri/renderD*)"
    else:
        reason = "no AMD GPU found"
    if seen.nvidia:
        reason += "; the NVIDIA GPU(s) here belong to the cuda backend" + (
            " but the installed torch is a ROCm build" if seen.torch_issue is None else ""
        )
    return reason, hint


def _driver_problems(host: Host, seen: _Seen, problems: list[str], hints: list[str]) -> None:
    """Decides what keeps ROCm from the GPUs in the kernel: amdgpu not loaded, no /dev/kfd,
    or KFD without a node for a GPU (only where the host describes its drivers)."""
    from ._system import foreign_drivers

    foreign = foreign_drivers(tuple(g.device for g in seen.usable))
    if foreign is not None and not seen.amdgpu:  # the driver bound names the reason
        problems.append(foreign[0])
        hints.append(foreign[1])
        return
    if not describes_drivers(host):
        return
    if not seen.amdgpu and not seen.kfd:
        problems.append("the amdgpu kernel driver is not loaded (no /dev/kfd)")
        hints.append(DRIVER_HINT)
    elif not seen.kfd:
        problems.append("/dev/kfd (ROCm's compute interface) is missing")
        hints.append(KFD_HINT)
    elif any(g.device.arch is None and "kfd_node" not in g.device.extra for g in seen.usable):
        problems.append("KFD lists no GPU node for some AMD GPU(s), so ROCm cannot see them")
        hints.append(KFD_HINT)


def _torch_problems(
    host: Host, seen: _Seen, wheels: _Wheels, problems: list[str], hints: list[str]
) -> None:
    """Decides what keeps torch from the GPUs: not a ROCm build, a ROCm wheel without kernels
    for them, or a HIP older than every GPU's first ROCm release."""
    if seen.torch_issue is not None:
        problems.append(seen.torch_issue[0])
        fix = seen.torch_issue[1]
        if wheels.hint is not None:
            fix = wheels.hint + (f" (replaces the {host.torch.flavour} build)" if host.torch
                                 else "")  # fmt: skip
        why = fix + (" (to use the AMD GPU instead of the NVIDIA one)" if seen.nvidia else "")
        hints.append(why)
    elif _hip_too_old(host, seen, problems, hints):
        return
    elif wheels.problem is not None:
        problems.append(wheels.problem)
        if wheels.hint is not None:
            hints.append(wheels.hint)


def _hip_too_old(host: Host, seen: _Seen, problems: list[str], hints: list[str]) -> bool:
    """Decides whether torch's HIP predates every GPU's first ROCm release (said first: no
    wheel of that ROCm can have their kernels)."""
    if host.torch is None or not host.torch.hip:
        return False
    usable = seen.usable
    too_new = [g for g in usable if g.row and g.row.min_rocm
               and version_in_range(host.torch.hip, g.row.min_rocm) is False]  # fmt: skip
    if not too_new or len(too_new) != len(usable):
        return False
    need = max((g.row.min_rocm or "" for g in too_new if g.row), key=str)
    problems.append(
        f"torch's HIP {host.torch.hip} predates ROCm {need}, the first release for "
        f"{_summary(too_new)}"
    )
    hints.append(f"install a torch build for ROCm {need} or newer")
    return True


def _support_notes(seen: _Seen, ev: list[str]) -> None:
    """Decides the evidence on each usable GPU's support: unknown to the table, or not on
    AMD's list."""
    notes: list[str] = []
    for g in seen.usable:
        if g.row is None and g.arch:
            notes.append(f"{g.arch} is not in hwbackends' table: support unknown")
        elif g.row is not None and g.row.support != "supported":
            notes.append(f"{g.label} is {g.row.support} in ROCm, not on {SUPPORT_LIST}")
    ev += dict.fromkeys(notes)  # once per target, not once per GPU


def _unsupported(
    name: str, off_list: list[Gpu], what: str, problems: list[str], ev: list[str]
) -> Probe:
    """Decides the answer where every usable GPU is off ROCm's list, no PyTorch wheel has
    kernels for them, and something else is wrong too: installing amdgpu/ROCm or a ROCm torch
    would not make these work, so say so."""
    return Probe(
        name,
        True,
        False,
        f"{what} found, but ROCm does not support "
        + ("it" if len(off_list) == 1 else "them")
        + f": {', '.join(dict.fromkeys(g.arch or '?' for g in off_list))} "
        + ("is" if len({g.arch for g in off_list}) == 1 else "are")
        + f" not on {SUPPORT_LIST}; and "
        + "; and ".join(problems),
        None,
        tuple(ev),
    )


def _no_wheel(wheels: _Wheels) -> list[str]:
    return [wheels.hint] if wheels.none and wheels.hint else []


def _both_facts(off_list: Sequence[Gpu], advice: WheelAdvice | None) -> str:
    """AMD's list and PyTorch's wheels, said together where they disagree."""
    archs = list(dict.fromkeys(g.arch or "?" for g in off_list))
    wheel = "PyTorch's wheels"
    if advice is not None and advice.index:
        wheel = f"PyTorch's {advice.index} wheels" + (
            f" of torch {advice.release}" if advice.release else ""
        )
    return (
        f"{' and '.join(archs)} {'is' if len(archs) == 1 else 'are'} not on {SUPPORT_LIST}, "
        f"but {wheel} carry kernels for " + ("it" if len(archs) == 1 else "them")
    )


def _ready(
    name: str,
    host: Host,
    seen: _Seen,
    what: str,
    pin: Callable[[list[int]], str | None],
    ev: list[str],
) -> Probe:
    """Decides the ready answer, with the variables that hide an integrated GPU ROCm also
    enumerates."""
    reason = f"ROCm ready: {what}" + (f", torch {host.torch.version}" if host.torch else "")
    if seen.ignored:
        shown = pin([g.position for g in seen.usable])
        reason += (
            f"; ROCm also enumerates the integrated GPU {_summary(seen.ignored)} (physical "
            f"{', '.join(str(g.position) for g in seen.ignored)})"
            + (f": hide it with {shown}" if shown else "")
        )
    if seen.nvidia:
        reason += "; the NVIDIA GPU(s) are not used: torch is a ROCm build"
    return Probe(name, True, True, reason, None, tuple(ev))


def probe(
    name: str,
    host: Host,
    pin: Callable[[list[int]], str | None],
    arch_of: Callable[[HostDevice], str | None] | None = None,
) -> Probe:
    """``pin(positions)`` renders the variables that show only those AMD devices."""
    seen = _seen(host, arch_of)
    ev = _found(host, seen)
    if not seen.usable:
        reason, hint = _why_none_usable(seen)
        # a pre-GCN GPU is present hardware that ROCm cannot use: shown, not "no hardware"
        return Probe(name, bool(seen.old), seen.torch_issue is None, reason, hint, tuple(ev))
    problems: list[str] = []
    hints: list[str] = []
    wheels = _wheel_advice(host, seen.usable)
    _driver_problems(host, seen, problems, hints)
    _torch_problems(host, seen, wheels, problems, hints)
    _support_notes(seen, ev)
    if wheels.evidence is not None:
        ev.append(wheels.evidence)
    what = f"{len(seen.usable)} AMD GPU(s) ({_summary(seen.usable)})"
    off_list = [g for g in seen.usable if g.row is not None and g.row.support == "unsupported"]
    if problems and len(off_list) == len(seen.usable):
        if wheels.none or (wheels.hint is None and seen.torch_issue is None):
            return _unsupported(name, off_list, what, [*problems, *_no_wheel(wheels)], ev)
        problems.append(_both_facts(off_list, wheels.advice))
    if problems:
        return Probe(name, True, False, f"{what} found, but " + "; and ".join(problems),
                     "; then ".join(hints), tuple(ev))  # fmt: skip
    return _ready(name, host, seen, what, pin, ev)
