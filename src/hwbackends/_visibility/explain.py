"""The visibility engine's entry points: read and write a rule for a backend object or a rule.

The public module :mod:`hwbackends.visibility` re-exports these and adds name lookup (a
backend's name resolved among the installed plugins), which needs selection; this module does
not, so it sits below selection. With a backend, the host's devices are first reduced to that
backend's own (``BaseBackend.own_host``); a bare rule reads every device of the host it is
given.
"""

from __future__ import annotations

from _collections_abc import Mapping  # collections.abc's classes, without importing collections

from hwbackends._base.errors import VisibilityError
from hwbackends._visibility.base import Trace, VisibilityReport, VisibilityRule
from hwbackends._visibility.generic import AllVisible

__all__ = [
    "explain_visibility",
    "rule_of",
    "variables_for",
    "visibility_env",
    "visibility_unset",
    "visible_devices",
]

# The rule kinds with a runtime-specific grammar: light declarations in kinds.py, whose readers
# (one module per runtime) load when a rule first reads or writes; hwbackends.visibility
# re-exports them through this module's __getattr__.
_KIND_MODULES = {
    "CudaDevices": "kinds",
    "RocmDevices": "kinds",
    "LevelZeroDevices": "kinds",
    "NeuronCores": "kinds",
    "TpuChips": "kinds",
    "GaudiModules": "kinds",
    "AscendDevices": "kinds",
}

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from hwbackends._visibility.shapes import HostLike

    #: What the functions below accept as ``backend``: an installed backend's name, a backend
    #: object (anything with a ``visibility`` rule, e.g. a ``BaseBackend``), or a rule itself.
    BackendRef = Any


def __getattr__(name: str) -> object:
    if name in ("DeviceLike", "HostLike"):  # typing.Protocol classes: loaded on first use
        from hwbackends._visibility import shapes

        return getattr(shapes, name)
    mod = _KIND_MODULES.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import sys

    full = f"hwbackends._visibility.{mod}"
    __import__(full)  # importlib itself costs more than this one import
    value = getattr(sys.modules[full], name)
    globals()[name] = value
    return value


def _resolve(backend: BackendRef, host: HostLike | None) -> tuple[str, VisibilityRule, Any]:
    """``(name, rule, host view)``: a name is looked up among the installed backends."""
    if isinstance(backend, VisibilityRule):
        return type(backend).__name__, backend, host
    if isinstance(backend, str):
        backend = _installed(backend)
    name = getattr(backend, "name", None)
    if not isinstance(name, str):
        raise VisibilityError(
            f"{backend!r} is neither a backend name, a backend nor a visibility rule",
            "an installed backend's name (str), a backend object, or a VisibilityRule",
            "pass e.g. 'cuda', hwbackends.get('cuda') or IndexList('ACME_VISIBLE_DEVICES')",
        )
    rule = rule_of(backend)
    view = host
    own = getattr(backend, "own_host", None)
    if host is not None and callable(own):
        view = own(_as_host(host))
    return name, rule, view


def _as_host(host: Any) -> Any:
    """A ``Host`` for anything shaped like :class:`HostLike` (a backend filters a Host)."""
    from hwbackends._machine.host import Host, HostDevice

    if isinstance(host, Host):
        return host
    try:
        devices = tuple(
            HostDevice(
                vendor=d.vendor,
                pci_bus_id=d.pci_bus_id,
                uuid=d.uuid,
                name=d.name,
                arch=d.arch,
                memory_bytes=getattr(d, "memory_bytes", None),
                pci_device_id=getattr(d, "pci_device_id", None),
                extra=dict(d.extra or {}),
            )
            for d in host.devices
        )
        ff = host.cuda_fastest_first
        drivers = getattr(host, "drivers", None)
        return Host(
            devices=devices,
            cuda_fastest_first=tuple(ff) if ff is not None else None,
            drivers=dict(drivers) if isinstance(drivers, Mapping) else {},
        )
    except (AttributeError, TypeError, ValueError) as exc:
        raise VisibilityError(
            f"the host object has no usable device list ({exc})",
            "a hwbackends Host (or an object with 'devices' and 'cuda_fastest_first')",
            "build it with Host.from_dict(...) or Host.from_system()",
        ) from None


def rule_of(backend: object) -> VisibilityRule:
    """A backend's declared rule; ``AllVisible()`` for one with devices but no declaration."""
    rule = getattr(backend, "visibility", None)
    if rule is None:
        return AllVisible()
    if not isinstance(rule, VisibilityRule):
        raise VisibilityError(
            f"the {getattr(backend, 'name', '?')} backend declares visibility = {rule!r}",
            "a hwbackends.visibility.VisibilityRule (e.g. IndexList('ACME_VISIBLE_DEVICES'))",
            "fix the plugin's visibility declaration",
        )
    return rule


def _installed(name: str) -> object:
    # Names are looked up among the installed plugins by hwbackends.visibility, above
    # selection; the engine is handed the backend object.
    raise VisibilityError(
        f"the visibility engine was given the name {name!r}, not a backend",
        "a backend object or a VisibilityRule",
        "call hwbackends.visibility's functions, which look names up among the installed plugins",
    )


def explain_visibility(
    backend_name: BackendRef, env: Mapping[str, str], host: HostLike
) -> VisibilityReport:
    """Which units ``backend_name``'s runtime makes visible under ``env``, and why.

    ``env`` maps variable names to values; a missing name is unset, ``""`` is set-but-empty.
    Raises :class:`VisibilityError` only for values the runtime itself refuses (documented per
    backend) and for malformed host descriptions; where the runtime truncates, so does this.
    """
    name, rules, view = _resolve(backend_name, host)
    if not isinstance(env, Mapping):
        raise VisibilityError(
            f"env must be a mapping, got {type(env).__name__}",
            "os.environ or a dict of variable names to strings",
        )
    trace = Trace(name, env)
    units = rules.read(env, view, trace)
    return trace.report(units)


def visible_devices(backend_name: BackendRef, env: Mapping[str, str], host: HostLike) -> list[int]:
    """Logical index i -> physical index (see the backend's module docs for its meaning)."""
    return explain_visibility(backend_name, env, host).physical


def variables_for(backend_name: BackendRef) -> tuple[str, ...]:
    """Every environment variable this backend's runtime reads for visibility or order."""
    return tuple(_resolve(backend_name, None)[1].variables)


def visibility_unset(backend_name: BackendRef) -> tuple[str, ...]:
    """Variables to remove before applying :func:`visibility_env` (its assignments win)."""
    return tuple(_resolve(backend_name, None)[1].unset)


def visibility_env(
    backend_name: BackendRef,
    physical_indices: Sequence[int],
    host: HostLike,
    env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``hwbackends.visibility.visibility_env`` for a backend object or a rule (its docs)."""
    name, rules, view = _resolve(backend_name, host)
    out = rules.write(physical_indices, view, env)
    trace = Trace(name, out)
    back = [u.physical_index for u in rules.read(out, view, trace)]
    if back != list(physical_indices):
        raise VisibilityError(
            f"{name} cannot express the selection {list(physical_indices)} on this "
            f"host: {out} would make {back} visible",
            "a selection the runtime can express (see the backend's documentation)",
            "check the host description for repeated or missing UUIDs and ids",
        )
    return out
