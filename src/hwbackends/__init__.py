"""hwbackends: which accelerator this process should use, which devices it sees, and why.

``import hwbackends`` is nearly free: names are imported on first use (PEP 562), nothing is
discovered or probed, and neither torch nor any plugin is imported until a function is called.
"""

from __future__ import annotations

from hwbackends._version import API_VERSION, __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from hwbackends._base.errors import (
        ArgumentError,
        BackendNotFoundError,
        BackendUnavailableError,
        HostFileError,
        HwBackendsError,
        HwBackendsWarning,
        PluginError,
        QuantizationError,
        RankError,
        SettingsError,
        UnsupportedSettingError,
        VisibilityError,
    )
    from hwbackends._base.protocol import (
        AttentionOption,
        Backend,
        Capabilities,
        Device,
        Limitation,
        Probe,
        QuantSupport,
    )
    from hwbackends._machine.host import Host, HostDevice, TorchBuild
    from hwbackends._selection.cache import reset
    from hwbackends._selection.registry import backends, explain
    from hwbackends._selection.report import BackendStatus, SelectionReport

__all__ = [
    "API_VERSION",
    "ArgumentError",
    "AttentionOption",
    "Backend",
    "BackendNotFoundError",
    "BackendStatus",
    "BackendUnavailableError",
    "Capabilities",
    "Device",
    "Host",
    "HostDevice",
    "HostFileError",
    "HwBackendsError",
    "HwBackendsWarning",
    "Limitation",
    "PluginError",
    "Probe",
    "QuantSupport",
    "QuantizationError",
    "RankError",
    "SelectionReport",
    "SettingsError",
    "TorchBuild",
    "UnsupportedSettingError",
    "VisibilityError",
    "__version__",
    "backends",
    "current",
    "explain",
    "get",
    "reset",
]

_WHERE = {
    "_base.errors": (
        "ArgumentError", "BackendNotFoundError", "BackendUnavailableError", "HostFileError",
        "HwBackendsError", "HwBackendsWarning", "PluginError", "QuantizationError", "RankError",
        "SettingsError", "UnsupportedSettingError", "VisibilityError",
    ),
    "_machine.host": ("Host", "HostDevice", "TorchBuild"),
    "_base.protocol": (
        "AttentionOption", "Backend", "Capabilities", "Device", "Limitation", "Probe",
        "QuantSupport",
    ),
    "_selection.registry": ("backends", "explain"),
    "_selection.report": ("BackendStatus", "SelectionReport"),
    "_selection.cache": ("reset",),
}  # fmt: skip
_MODULE_OF = {name: mod for mod, names in _WHERE.items() for name in names}


def __getattr__(name: str) -> object:
    mod = _MODULE_OF.get(name)
    if mod is None:
        raise AttributeError(f"module 'hwbackends' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


def current(*, env: Mapping[str, str] | None = None, host: Host | None = None) -> Backend:
    """The backend this process should use; cached per process for the defaults.

    The first call of a process with the defaults first tries the selection cache (a file in
    the user's cache folder), which imports only the chosen backend's module when nothing
    selection reads has changed; ``hwbackends.explain`` gives the reasons for the choice.

    :param env: the environment to read ``HWBACKENDS_*`` settings and visibility variables
        from; None: ``os.environ`` (or the ``env`` a simulated host file declares).
    :param host: the machine to select for (``Host.from_file`` for a simulated one); None:
        this machine, or the host file ``HWBACKENDS_HOST`` names.
    :raises BackendUnavailableError: when no backend is available, or none of those
        ``HWBACKENDS_BACKEND`` forces.

    The backend is a guarded view of the plugin: its methods run the plugin's code under the
    same guard as the library's own calls (a failure is a ``PluginError`` naming it).
    """
    if env is None and host is None:
        from hwbackends._selection.cache import cached_view

        found = cached_view()
        if found is not None:
            return found  # type: ignore[return-value]
    from hwbackends._selection.registry import current as _current
    from hwbackends._selection.view import view_of

    return view_of(_current(env=env, host=host))  # type: ignore[return-value]


def get(name: str) -> Backend:
    """A backend by name, whether or not it is available here: a guarded view, as ``current``.

    :param name: the backend's name, any case (``"cuda"``); ``hwbackends.backends()`` lists them.
    :raises BackendNotFoundError: when no installed backend has that name.
    :raises PluginError: when that backend is broken, or several plugins claim the name.
    """
    from hwbackends._selection.registry import get as _get
    from hwbackends._selection.view import view_of

    return view_of(_get(name))  # type: ignore[return-value]
