"""Device visibility: how each runtime reads its visibility variables, and how to write them.

Pure functions, no I/O: every answer is computed from an environment mapping and a host
description (``hwbackends.Host`` or anything shaped like :class:`HostLike`).

A backend declares its runtime's rules as a :class:`VisibilityRule`, usually one of the kinds
here: :class:`IndexList` (a CUDA-style list of indices in one variable, each divergence a
declared policy), :class:`IndexOrUuidList` (indices or a vendor's UUIDs), :class:`CudaDevices`,
:class:`RocmDevices`, :class:`LevelZeroDevices`, :class:`NeuronCores`, :class:`TpuChips`,
:class:`GaudiModules`, :class:`AscendDevices`, :class:`SingleDevice`, :class:`AllVisible` and
:class:`NoDevices`. Each kind documents its physical index, its rules with their public
sources, and every choice made where the sources are silent or disagree.

Every function takes ``backend`` as an installed backend's name (resolved through the
installed plugins), a backend object, or a rule. With a name or a backend, the host's devices
are first reduced to that backend's own (``BaseBackend.own_host``); a bare rule reads every
device of the host it is given.

Applying a written environment: remove every name in :func:`visibility_unset` first, then
apply :func:`visibility_env`'s assignments (they win where a name is in both)::

    for name in visibility_unset("rocm"):
        env.pop(name, None)
    env.update(visibility_env("rocm", [2, 3], host))
"""

# The public face of the engine in hwbackends._visibility (which is pure and sits below
# selection); what this module adds is looking a backend up by name among the installed
# plugins, so it belongs to the selection layer.

from __future__ import annotations

from hwbackends._visibility import explain as _engine
from hwbackends._visibility.base import Trace, VisibilityReport, VisibilityRule, VisibleUnit
from hwbackends._visibility.explain import rule_of as rule_of  # for plugins that used it
from hwbackends._visibility.generic import (
    AllVisible,
    IndexList,
    IndexOrUuidList,
    NoDevices,
    SingleDevice,
)

__all__ = [
    "AllVisible",
    "AscendDevices",
    "CudaDevices",
    "DeviceLike",
    "GaudiModules",
    "HostLike",
    "IndexList",
    "IndexOrUuidList",
    "LevelZeroDevices",
    "NeuronCores",
    "NoDevices",
    "RocmDevices",
    "SingleDevice",
    "TpuChips",
    "Trace",
    "VisibilityReport",
    "VisibilityRule",
    "VisibleUnit",
    "explain_visibility",
    "variables_for",
    "visibility_env",
    "visibility_unset",
    "visible_devices",
]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from hwbackends._visibility.explain import BackendRef
    from hwbackends._visibility.kinds import (
        AscendDevices,
        CudaDevices,
        GaudiModules,
        LevelZeroDevices,
        NeuronCores,
        RocmDevices,
        TpuChips,
    )
    from hwbackends._visibility.shapes import DeviceLike, HostLike


def __getattr__(name: str) -> object:
    # The runtime kinds and the typing.Protocol shapes load on first use, as in the engine.
    try:
        value = getattr(_engine, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def _named(backend: BackendRef) -> object:
    """An installed backend for a name; anything else is handed to the engine as it is."""
    if not isinstance(backend, str):
        return backend
    from hwbackends._base.errors import HwBackendsError, VisibilityError
    from hwbackends._selection.registry import get, installed_names

    try:
        if backend != backend.strip().lower():
            raise HwBackendsError(f"backend names are lower case without blanks, got {backend!r}")
        return get(backend)
    except HwBackendsError as exc:
        names = installed_names()
        # the lookup's own words once: its "what" and its fix, not its whole message again
        raise VisibilityError(
            f"no visibility rules for {backend!r}: {exc.what}",
            f"the name of an installed backend ({', '.join(names)})",
            (exc.fix or "install the plugin that provides it")
            + "; or pass the backend object or its VisibilityRule instead of a name",
        ) from None


def explain_visibility(
    backend_name: BackendRef, env: Mapping[str, str], host: HostLike
) -> VisibilityReport:
    """Which units ``backend_name``'s runtime makes visible under ``env``, and why.

    Where the runtime truncates a list, so does this.

    :param backend_name: an installed backend's name (``"cuda"``), a backend object, or a
        :class:`VisibilityRule`; with a name or a backend only that backend's devices of
        ``host`` count, a bare rule reads every device of ``host``.
    :param env: the environment, variable name -> value (``os.environ`` or a dict); a
        missing name is unset, ``""`` is set but empty.
    :param host: the host description: a ``hwbackends.Host`` (``Host.from_system()``,
        ``Host.from_file(path)``) or any object shaped like :class:`HostLike`.
    :raises VisibilityError: only for values the runtime itself refuses (documented per
        backend), for malformed host descriptions and for a name that is no installed
        backend.
    """
    return _engine.explain_visibility(_named(backend_name), env, host)


def visible_devices(backend_name: BackendRef, env: Mapping[str, str], host: HostLike) -> list[int]:
    """Logical index i -> physical index (see the backend's module docs for its meaning).

    The same as ``explain_visibility(...).physical``, with the same parameters.

    :param backend_name: as for :func:`explain_visibility`.
    :param env: as for :func:`explain_visibility`.
    :param host: as for :func:`explain_visibility`.
    :raises VisibilityError: as :func:`explain_visibility`.
    """
    return _engine.visible_devices(_named(backend_name), env, host)


def variables_for(backend_name: BackendRef) -> tuple[str, ...]:
    """Every environment variable this backend's runtime reads for visibility or order.

    :param backend_name: an installed backend's name (``"cuda"``), a backend object, or a
        :class:`VisibilityRule`.
    :raises VisibilityError: when ``backend_name`` names no installed backend.
    """
    return _engine.variables_for(_named(backend_name))


def visibility_unset(backend_name: BackendRef) -> tuple[str, ...]:
    """Variables to remove before applying :func:`visibility_env` (its assignments win).

    :param backend_name: an installed backend's name (``"cuda"``), a backend object, or a
        :class:`VisibilityRule`.
    :raises VisibilityError: when ``backend_name`` names no installed backend.
    """
    return _engine.visibility_unset(_named(backend_name))


def visibility_env(
    backend_name: BackendRef,
    physical_indices: Sequence[int],
    host: HostLike,
    env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Assignments that make exactly ``physical_indices`` visible, in that order.

    Applied to an environment from which :func:`visibility_unset` names were removed, the
    reader gives back ``physical_indices``; this is checked before returning, so a selection
    the runtime cannot express on this host raises :class:`VisibilityError` instead.

    :param backend_name: an installed backend's name (``"cuda"``), a backend object, or a
        :class:`VisibilityRule`; with a name or a backend the indices count only that
        backend's devices of ``host``.
    :param physical_indices: the physical indices to make visible (as
        :func:`visible_devices` returns them), in the logical order wanted: logical index i
        is ``physical_indices[i]``; an empty list asks for no device.
    :param host: the host description: a ``hwbackends.Host`` or any object shaped like
        :class:`HostLike`.
    :param env: the environment the indices were read under, where a runtime numbers devices
        differently by a setting (Intel's ``ZE_FLAT_DEVICE_HIERARCHY``: tiles or cards);
        None reads as an empty environment (the runtime's defaults).
    :raises VisibilityError: when the runtime cannot express the selection on this host (an
        index the host lacks, a repeat, an order the variable cannot write), and for a name
        that is no installed backend.
    """
    return _engine.visibility_env(_named(backend_name), physical_indices, host, env)
