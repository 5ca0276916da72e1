"""The one error family of hwbackends.

Every message says three things: what was wrong, what was expected, and how to fix it.
"""

from __future__ import annotations

__all__ = [
    "ArgumentError",
    "BackendNotFoundError",
    "BackendUnavailableError",
    "HostFileError",
    "HwBackendsError",
    "HwBackendsWarning",
    "ModelError",
    "PluginError",
    "QuantizationError",
    "SettingsError",
    "UnsupportedSettingError",
    "VisibilityError",
]


class HwBackendsWarning(UserWarning):
    """A setting or selection caveat the library warns about once per process (the CLI shows
    them in its report instead)."""


class HwBackendsError(Exception):
    """Base class of every error raised on purpose by hwbackends."""

    def __init__(self, what: str, expected: str | None = None, fix: str | None = None) -> None:
        self.what = what
        self.expected = expected
        self.fix = fix
        parts = [what.rstrip(".") + "."]
        if expected:
            parts.append(f"Expected {expected.rstrip('.')}.")
        if fix:
            parts.append(f"Fix: {fix.rstrip('.')}.")
        super().__init__(" ".join(parts))


class ArgumentError(HwBackendsError, TypeError):
    """A public function was given an argument of the wrong type or out of range (also a
    ``TypeError``, as Python's own)."""


class HostFileError(HwBackendsError):
    """A simulated host file (or dict) is missing or malformed."""


class BackendNotFoundError(HwBackendsError):
    """A backend was asked for by a name that no installed plugin provides."""


class BackendUnavailableError(HwBackendsError):
    """A backend exists but cannot run here (hardware or software missing)."""


class PluginError(HwBackendsError):
    """A plugin is broken. Selection records it and goes on (strict mode raises); asking for
    that backend by name with ``hwbackends.get`` raises it."""


class VisibilityError(HwBackendsError):
    """A visibility request the runtime cannot express, or a malformed request."""


class SettingsError(HwBackendsError):
    """A ``HWBACKENDS_*`` variable holds a value the library does not accept (a typo)."""


class UnsupportedSettingError(HwBackendsError):
    """A setting asked for explicitly (attention, dtype, kernels) cannot work on this device."""


class RankError(HwBackendsError):
    """This process's local rank is unreadable, or names no device the process can see."""


class QuantizationError(UnsupportedSettingError):
    """A quantization method that will fail on this device, found before any weight is read."""


class ModelError(UnsupportedSettingError):
    """The ``model`` given to plan settings for names no model the installed Transformers can
    resolve without a download: not a model folder, an unknown model type, a hub id that is not
    in the local cache."""
