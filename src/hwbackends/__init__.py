"""hwbackends: which accelerator this process should use, which devices it sees, and why.

``import hwbackends`` is nearly free: nothing is discovered, probed or imported from torch or
any plugin until a function below is called.
"""

from __future__ import annotations

from ._errors import (
    BackendNotFoundError,
    BackendUnavailableError,
    HostFileError,
    HwBackendsError,
    PluginError,
    QuantizationError,
    UnsupportedSettingError,
    VisibilityError,
)
from ._host import Host, HostDevice, TorchBuild
from ._protocol import (
    API_VERSION,
    AttentionOption,
    Backend,
    Capabilities,
    Device,
    Limitation,
    Probe,
    QuantSupport,
)
from ._registry import BackendStatus, SelectionReport, backends, current, explain, get, reset

__version__ = "0.1.0"

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
