"""The generic rule kinds: CUDA-style index lists, one device, every device, no device.

``IndexList(variable)`` reads a comma list of integer indices the way the CUDA runtime reads
``CUDA_VISIBLE_DEVICES`` (NVIDIA CUDA C Programming Guide, "CUDA Environment Variables"):
unset -> every device; ``""`` -> none; each entry is read like C ``strtoul`` (leading blanks
skipped, trailing characters ignored); the first entry that names no device ends the list; a
repeated device empties the list (PyTorch's reading of CUDA's list). Physical index: position
among the backend's devices. Runtimes that document nothing of their own (Cambricon's
``MLU_VISIBLE_DEVICES``, Moore Threads' ``MUSA_VISIBLE_DEVICES``) declare it with
``inferred=True``, which marks every report where the variable is set as uncertain. The writer
writes ``""`` for an empty selection only when ``empty_means_none`` is declared.

``SingleDevice()``: one device and no variable that hides it (Apple's MPS); ``notes`` names
related variables that hide nothing. ``AllVisible()``: no variable; every device is visible
in host order, so only the whole list can be selected. ``NoDevices()``: no accelerator unit
(the CPU).
"""

from __future__ import annotations

from hwbackends._base.errors import VisibilityError
from hwbackends._visibility.base import (
    Trace,
    VisibilityRule,
    VisibleUnit,
    c_strtoul,
    devices_of,
    require_indices,
    show,
    units_from,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from hwbackends._visibility.shapes import HostLike


class IndexList(VisibilityRule):
    """A CUDA-style comma list of device indices in one variable (see the module docs)."""

    def __init__(
        self,
        variable: str,
        *,
        inferred: bool = False,
        empty_means_none: bool = True,
        source: str = "",
    ) -> None:
        if not isinstance(variable, str) or not variable or "=" in variable:
            raise VisibilityError(
                f"IndexList needs an environment variable name, got {variable!r}",
                "a name such as 'ACME_VISIBLE_DEVICES'",
                "pass the variable your runtime reads",
            )
        self.variable = variable
        self.inferred = inferred
        self.empty_means_none = empty_means_none
        self.source = source
        self.variables: tuple[str, ...] = (variable,)
        self.unset: tuple[str, ...] = ()

    def read(self, env: Mapping[str, str], host: HostLike, trace: Trace) -> list[VisibleUnit]:
        t = trace
        n = len(devices_of(host))
        t.step(f"Host: {n} device(s).")
        value = t.read(self.variable)
        picked: list[int] = []
        if value is None:
            t.step("Unset: every device is visible.")
            picked = list(range(n))
        else:
            if self.inferred:
                why = f" ({self.source})" if self.source else ""
                t.warn(
                    f"{self.variable} has no published specification; it is read like "
                    f"CUDA_VISIBLE_DEVICES{why}.",
                    uncertain=True,
                )
            if value == "":
                t.step("Set but empty: no device.")
            else:
                for i, token in enumerate(value.split(",")):
                    k, _ = c_strtoul(token)
                    if k is None or k < 0 or k >= n:
                        t.step(f"Entry {i} {show(token)} names no device: the list ends.")
                        break
                    if k in picked:
                        t.step("A repeated device empties the list.")
                        picked = []
                        break
                    picked.append(k)
                    t.entry(f"Entry {i} {show(token)} is device {k}.")
        return units_from([(k, k, None, str(k)) for k in picked])

    def write(
        self, physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        n = len(devices_of(host))
        sel = require_indices(self.variable, physical, n, "devices")
        if not sel and not self.empty_means_none:
            raise VisibilityError(
                f"{self.variable} has no documented value that selects no device",
                "at least one device",
                "do not start the process, or run it on the cpu backend",
            )
        return {self.variable: ",".join(str(k) for k in sel)}

    def __repr__(self) -> str:
        return f"IndexList({self.variable!r})"


class SingleDevice(VisibilityRule):
    """One device, visible as index 0, and no variable that hides it."""

    def __init__(
        self, *, notes: Mapping[str, str] | None = None, why: str = "", label: str = "0"
    ) -> None:
        # variable -> why it hides nothing; reported when set
        self.notes = dict(notes or {})
        self.why = why
        self.label = label

    def read(self, env: Mapping[str, str], host: HostLike, trace: Trace) -> list[VisibleUnit]:
        t = trace
        t.step(f"There is no visibility or ordering variable{self.why}.")
        for name, why in self.notes.items():
            t.note_if_set(name, why)
        n = len(devices_of(host))
        if n:
            t.step(f"The device is visible as index 0 ({self.label}).")
            return units_from([(0, 0, None, self.label)])
        t.step("The host has no such device.")
        return []

    def write(
        self, physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        n = min(1, len(devices_of(host)))
        sel = require_indices("this backend", physical, n, "the one device (index 0)")
        if not sel and n:
            raise VisibilityError(
                "this device cannot be hidden by an environment variable",
                "[0] (the one device)",
                "use the cpu backend to run without it",
            )
        return {}

    def __repr__(self) -> str:
        return "SingleDevice()"


class AllVisible(VisibilityRule):
    """No visibility variable: every device is visible, in host order."""

    def read(self, env: Mapping[str, str], host: HostLike, trace: Trace) -> list[VisibleUnit]:
        n = len(devices_of(host))
        trace.step(f"No visibility variable is declared: all {n} device(s) are visible.")
        return units_from([(k, k, None, str(k)) for k in range(n)])

    def write(
        self, physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        n = len(devices_of(host))
        sel = require_indices("this backend", physical, n, "devices")
        if sel != list(range(n)):
            raise VisibilityError(
                f"no visibility variable is declared, so {sel} cannot be selected",
                f"every device in host order ({list(range(n))})",
                "declare the runtime's variable in the backend (for example "
                "visibility = IndexList('ACME_VISIBLE_DEVICES'))",
            )
        return {}

    def __repr__(self) -> str:
        return "AllVisible()"


class NoDevices(VisibilityRule):
    """No accelerator unit and no variable (the CPU)."""

    def read(self, env: Mapping[str, str], host: HostLike, trace: Trace) -> list[VisibleUnit]:
        trace.step("This backend has no visibility variable and no accelerator unit.")
        return []

    def write(
        self, physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        require_indices("this backend", physical, 0, "accelerator units")
        return {}

    def __repr__(self) -> str:
        return "NoDevices()"
