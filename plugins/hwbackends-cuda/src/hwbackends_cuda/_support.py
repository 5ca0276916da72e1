"""Each GPU's support, for the core's one verdict per device: which CUDA wheel index has
kernels for it, or that none has, from PyTorch's wheel matrix (``_wheels``).

The probe says one thing for all the GPUs ("3 NVIDIA GPU(s) found"); this says it per GPU, so
the Install line and every fix name an index that has kernels for the GPUs it is for, and no
index for a GPU that no wheel runs on.
"""

from __future__ import annotations

import re

from hwbackends.facts import TORCH_INDEXES
from hwbackends.plugin import DeviceSupport

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from hwbackends import Host, HostDevice

__all__ = ["device_support"]


def _capability(arch: str | None) -> int | None:
    """The compute capability of ``sm_XY`` (major*10+minor): the table's, else the name's (an
    ``sm_20`` older than every row still has a capability)."""
    from ._arch import SM

    row = SM.get(arch or "")
    if row is not None:
        return row.capability
    m = re.fullmatch(r"sm_(\d+)", arch or "")
    return int(m.group(1)) if m else None


def _installed_line(host: Host, caps: Sequence[int]) -> str | None:
    """The installed CUDA wheel's release line when it lacks kernels for one of ``caps``: the
    advice then stays on that line, as the probe's does."""
    from ._wheels import driver_runs, loaded_driver, runs_on, wheel_of

    t = host.torch
    wheel = wheel_of(t.version, t.cuda) if t is not None and t.flavour == "cuda" else None
    if wheel is None or (all(runs_on(wheel, c) for c in caps)
                         and driver_runs(wheel, loaded_driver(host))):  # fmt: skip
        return None
    return wheel.torch


def device_support(
    host: Host, own: Sequence[HostDevice], archs: Sequence[str | None], labels: Sequence[str]
) -> tuple[DeviceSupport, ...]:
    """One ``DeviceSupport`` per GPU of ``own`` (the backend's host devices, in order).

    Empty off Linux x86_64 / Windows: the matrix rows are those wheels' (the core then derives
    the verdicts from the probe). A tree whose CPU is not known is taken as x86_64, as the
    probe's fix says it does."""
    if (host.machine or "x86_64").lower() not in ("x86_64", "amd64"):
        return ()
    from ._wheels import NEWEST, RELEASES, WHEELS, advise, loaded_driver, runs_on

    caps = [_capability(a) for a in archs]
    shown = [f"{lbl} ({a})" if a else lbl for lbl, a in zip(labels, archs, strict=True)]
    # a GPU no wheel of any release runs on cannot be served: left out of the index advice
    runnable = [
        (c, s) for c, s in zip(caps, shown, strict=True)
        if c is not None and any(runs_on(w, c) for w in WHEELS)
    ]  # fmt: skip
    line = _installed_line(host, [c for c, _ in runnable])
    default = TORCH_INDEXES["cuda"].rstrip("/").rpartition("/")[2]
    driver = loaded_driver(host)
    advice = advise(runnable, line=line, default_index=default, driver=driver) if runnable else None
    out = []
    for d, cap, what in zip(own, caps, shown, strict=True):
        if cap is None:
            out.append(DeviceSupport(
                d.pci_bus_id, what, None,
                f"the architecture of {what} is not in hwbackends' table, so whether a PyTorch "
                "CUDA wheel has kernels for it is unknown",
            ))  # fmt: skip
        elif not any(runs_on(w, cap) for w in WHEELS):
            out.append(DeviceSupport(
                d.pci_bus_id, what, False,
                f"no PyTorch CUDA wheel from {RELEASES[0]} to {NEWEST} has kernels for {what} "
                "(pytorch/pytorch RELEASE.md, 'PyTorch CUDA Support Matrix')",
            ))  # fmt: skip
        elif advice is not None and advice.wheel is not None:
            w = advice.wheel
            why = advice.reason or f"torch {w.torch}'s {w.index} wheels have kernels for {what}"
            out.append(DeviceSupport(d.pci_bus_id, what, True, why, w.url, advice.torch_pin))
        else:  # no one index serves them all: the advice says what to build
            out.append(DeviceSupport(d.pci_bus_id, what, True, advice.reason if advice else "",
                                     fix=advice.reason if advice else None))  # fmt: skip
    return tuple(out)
