"""Cambricon MLU, Moore Threads MUSA, Apple MPS and the CPU.

MLU (``MLU_VISIBLE_DEVICES``) and MUSA (``MUSA_VISIBLE_DEVICES``): no vendor specification was
found (spec §8). Vendor examples use them like ``CUDA_VISIBLE_DEVICES`` (comma lists of driver
indices, re-indexed from 0), and both PyTorch extensions follow ``torch.cuda``, so CUDA's
integer rules are applied, all inferred: unset -> all; ``""`` -> none; entries read like
``strtoul``; the first invalid or out-of-range entry ends the list; a repeated device empties
the list. A set variable always makes the report uncertain. Physical index: position among the
vendor's host devices. The writer refuses an empty selection (no documented "none").

MPS: no visibility variable exists; there is one Apple GPU (spec §9).
``PYTORCH_ENABLE_MPS_FALLBACK`` only enables CPU fallback for missing ops and hides nothing.

CPU: no visibility variable and no accelerator unit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .._errors import VisibilityError
from ._common import (
    HostLike,
    Trace,
    VisibleUnit,
    c_strtoul,
    devices_of,
    require_indices,
    show,
    units_from,
)


class ListRules:
    """A CUDA-like list of integer indices, for runtimes without a published grammar."""

    def __init__(self, backend: str, vendor: str, variable: str) -> None:
        self.backend = backend
        self.VENDOR = vendor
        self.variable = variable
        self.VARIABLES: tuple[str, ...] = (variable,)
        self.UNSET: tuple[str, ...] = ()

    def read(self, env: Mapping[str, str], host: HostLike, t: Trace) -> list[VisibleUnit]:
        n = len(devices_of(host, self.VENDOR))
        t.step(f"Host: {n} {self.VENDOR} device(s).")
        value = t.read(self.variable)
        picked: list[int] = []
        if value is None:
            t.step("Unset: every device is visible.")
            picked = list(range(n))
        else:
            t.warn(
                f"{self.variable} has no published specification; it is read like "
                "CUDA_VISIBLE_DEVICES (inferred from vendor examples, spec §8).",
                uncertain=True,
            )
            if value == "":
                t.step("Set but empty: no device (CUDA's rule, inferred).")
            else:
                for i, token in enumerate(value.split(",")):
                    k, _ = c_strtoul(token)
                    if k is None or k < 0 or k >= n:
                        t.step(f"Entry {i} {show(token)} names no device: the list ends.")
                        break
                    if k in picked:
                        t.step("A repeated device empties the list (CUDA's rule, inferred).")
                        picked = []
                        break
                    picked.append(k)
                    t.entry(f"Entry {i} {show(token)} is device {k}.")
        return units_from([(k, k, None, str(k)) for k in picked])

    def write(
        self, physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        n = len(devices_of(host, self.VENDOR))
        sel = require_indices(self.backend, physical, n, f"{self.VENDOR} devices")
        if not sel:
            raise VisibilityError(
                f"{self.variable} has no documented value that selects no device",
                "at least one device",
                "do not start the process, or run it on the cpu backend",
            )
        return {self.variable: ",".join(str(k) for k in sel)}


class MpsRules:
    VENDOR = "apple"
    VARIABLES: tuple[str, ...] = ()
    UNSET: tuple[str, ...] = ()

    def read(self, env: Mapping[str, str], host: HostLike, t: Trace) -> list[VisibleUnit]:
        t.step("MPS has no visibility or ordering variable (spec §9).")
        t.note_if_set("PYTORCH_ENABLE_MPS_FALLBACK", "it only enables CPU fallback for missing ops")
        n = len(devices_of(host, self.VENDOR))
        if n:
            t.step("The Apple GPU is visible as mps:0.")
            return units_from([(0, 0, None, "mps")])
        t.step("The host has no Apple GPU.")
        return []

    def write(
        self, physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        n = min(1, len(devices_of(host, self.VENDOR)))
        sel = require_indices("mps", physical, n, "Apple GPU (index 0)")
        if not sel and n:
            raise VisibilityError(
                "MPS cannot be hidden by an environment variable",
                "[0] (the one Apple GPU)",
                "use the cpu backend to run without the GPU",
            )
        return {}


class CpuRules:
    VENDOR = ""
    VARIABLES: tuple[str, ...] = ()
    UNSET: tuple[str, ...] = ()

    def read(self, env: Mapping[str, str], host: HostLike, t: Trace) -> list[VisibleUnit]:
        t.step("The CPU backend has no visibility variable and no accelerator unit.")
        return []

    def write(
        self, physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        require_indices("cpu", physical, 0, "accelerator units")
        return {}
