"""Device visibility: how each runtime reads its visibility variables, and how to write them.

Pure functions, no I/O: every answer is computed from an environment mapping and a host
description (``hwbackends.Host`` or anything shaped like :class:`HostLike`). The rules follow
``shared/reference/visibility-spec.md``; each backend module documents its physical index,
its rules, and every choice made where the sources are silent or disagree.

Applying a written environment: remove every name in :func:`visibility_unset` first, then
apply :func:`visibility_env`'s assignments (they win where a name is in both)::

    for name in visibility_unset("rocm"):
        env.pop(name, None)
    env.update(visibility_env("rocm", [2, 3], host))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from .._errors import VisibilityError
from ._common import DeviceLike, HostLike, Trace, VisibilityReport, VisibleUnit

__all__ = [
    "DeviceLike",
    "HostLike",
    "VisibilityReport",
    "VisibleUnit",
    "explain_visibility",
    "variables_for",
    "visibility_env",
    "visibility_unset",
    "visible_devices",
]

# backend name -> vendor key of its devices in the host description (None: no devices).
BACKEND_VENDORS: Mapping[str, str | None] = {
    "cuda": "nvidia",
    "rocm": "amd",
    "xpu": "intel",
    "neuron": "aws",
    "tpu": "google",
    "hpu": "habana",
    "npu": "huawei",
    "mlu": "cambricon",
    "musa": "mthreads",
    "mps": "apple",
    "cpu": None,
}


class _Rules(Protocol):
    """What each backend module provides."""

    @property
    def VARIABLES(self) -> tuple[str, ...]: ...
    @property
    def UNSET(self) -> tuple[str, ...]: ...

    def read(self, env: Mapping[str, str], host: HostLike, t: Trace) -> list[VisibleUnit]: ...

    def write(
        self, physical: Sequence[int], host: HostLike, env: Mapping[str, str] | None = None
    ) -> dict[str, str]: ...


def _rules(backend_name: str) -> _Rules:
    """The rules of one backend; modules are imported on first use."""
    if not isinstance(backend_name, str) or backend_name not in BACKEND_VENDORS:
        raise VisibilityError(
            f"unknown backend name {backend_name!r}",
            f"one of {', '.join(sorted(BACKEND_VENDORS))}",
            "use one of these names (lower case)",
        )
    if backend_name == "cuda":
        from . import _cuda

        return _cuda
    if backend_name == "rocm":
        from . import _rocm

        return _rocm
    if backend_name == "xpu":
        from . import _xpu

        return _xpu
    if backend_name == "neuron":
        from . import _neuron

        return _neuron
    if backend_name == "tpu":
        from . import _tpu

        return _tpu
    if backend_name == "hpu":
        from . import _hpu

        return _hpu
    if backend_name == "npu":
        from . import _npu

        return _npu
    from . import _simple

    if backend_name == "mlu":
        return _simple.ListRules("mlu", "cambricon", "MLU_VISIBLE_DEVICES")
    if backend_name == "musa":
        return _simple.ListRules("musa", "mthreads", "MUSA_VISIBLE_DEVICES")
    if backend_name == "mps":
        return _simple.MpsRules()
    return _simple.CpuRules()


def explain_visibility(
    backend_name: str, env: Mapping[str, str], host: HostLike
) -> VisibilityReport:
    """Which units ``backend_name``'s runtime makes visible under ``env``, and why.

    ``env`` maps variable names to values; a missing name is unset, ``""`` is set-but-empty.
    Raises :class:`VisibilityError` only for values the runtime itself refuses (documented per
    backend) and for malformed host descriptions; where the runtime truncates, so does this.
    """
    rules = _rules(backend_name)
    if not isinstance(env, Mapping):
        raise VisibilityError(
            f"env must be a mapping, got {type(env).__name__}",
            "os.environ or a dict of variable names to strings",
        )
    trace = Trace(backend_name, env)
    units = rules.read(env, host, trace)
    return trace.report(units)


def visible_devices(backend_name: str, env: Mapping[str, str], host: HostLike) -> list[int]:
    """Logical index i -> physical index (see the backend's module docs for its meaning)."""
    return explain_visibility(backend_name, env, host).physical


def variables_for(backend_name: str) -> tuple[str, ...]:
    """Every environment variable this backend's runtime reads for visibility or order."""
    return tuple(_rules(backend_name).VARIABLES)


def visibility_unset(backend_name: str) -> tuple[str, ...]:
    """Variables to remove before applying :func:`visibility_env` (its assignments win)."""
    return tuple(_rules(backend_name).UNSET)


def visibility_env(
    backend_name: str,
    physical_indices: Sequence[int],
    host: HostLike,
    env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Assignments that make exactly ``physical_indices`` visible, in that order.

    Applied to an environment from which :func:`visibility_unset` names were removed, the
    reader gives back ``physical_indices``; this is checked before returning, so a selection
    the runtime cannot express on this host raises :class:`VisibilityError` instead.
    ``env`` is the environment the indices were read under, where a runtime numbers devices
    differently by a setting (Intel's ``ZE_FLAT_DEVICE_HIERARCHY``: tiles or cards).
    """
    rules = _rules(backend_name)
    out = rules.write(physical_indices, host, env)
    back = explain_visibility(backend_name, out, host).physical
    if back != list(physical_indices):
        raise VisibilityError(
            f"{backend_name} cannot express the selection {list(physical_indices)} on this "
            f"host: {out} would make {back} visible",
            "a selection the runtime can express (see the backend's documentation)",
            "check the host description for repeated or missing UUIDs and ids",
        )
    return out
