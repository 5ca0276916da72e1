"""hwbackends: which accelerator this process should use, which devices it sees, and why.

``import hwbackends`` is nearly free: names are imported on first use (PEP 562), nothing is
discovered or probed, and neither torch nor any plugin is imported until a function is called.
"""

from __future__ import annotations

from ._version import API_VERSION, __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._errors import (
        BackendNotFoundError,
        BackendUnavailableError,
        HostFileError,
        HwBackendsError,
        PluginError,
        QuantizationError,
        SettingsError,
        UnsupportedSettingError,
        VisibilityError,
    )
    from ._host import Host, HostDevice, TorchBuild
    from ._protocol import (
        AttentionOption,
        Backend,
        Capabilities,
        Device,
        Limitation,
        Probe,
        QuantSupport,
    )
    from ._registry import BackendStatus, SelectionReport, backends, explain, get, reset

__all__ = [
    "API_VERSION",
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
    "Limitation",
    "PluginError",
    "Probe",
    "QuantSupport",
    "QuantizationError",
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
    "_errors": (
        "BackendNotFoundError", "BackendUnavailableError", "HostFileError", "HwBackendsError",
        "PluginError", "QuantizationError", "SettingsError", "UnsupportedSettingError",
        "VisibilityError",
    ),
    "_host": ("Host", "HostDevice", "TorchBuild"),
    "_protocol": (
        "AttentionOption", "Backend", "Capabilities", "Device", "Limitation", "Probe",
        "QuantSupport",
    ),
    "_registry": ("BackendStatus", "SelectionReport", "backends", "explain", "get", "reset"),
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

    The first call of a process with the defaults first tries the selection cache
    (``hwbackends._fast``), which imports only the chosen backend's module.
    """
    if env is None and host is None:
        from ._fast import cached_backend

        found = cached_backend()
        if found is not None:
            return found
    from ._registry import current as _current

    return _current(env=env, host=host)
