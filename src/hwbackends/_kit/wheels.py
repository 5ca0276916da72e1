"""What PyTorch's wheels offer one device: the record both GPU plugins answer with.

A plugin that knows which architectures each PyTorch release's wheels were built for (its
own per-release table, each row cited to PyTorch's build scripts at a release) answers, per
device, with a :class:`WheelAdvice`: the wheel index whose kernels run it, the torch release
line to pin when only an older release has them, or that no PyTorch wheel does. The vendor's
own support list is a different fact and is said beside it (``vendor``), never in its place.
"""

from __future__ import annotations

from hwbackends._base.record import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    WheelStatus = Literal["default", "index", "older", "none"]

__all__ = ["INDEX_URL", "WheelAdvice", "pip_command"]

#: PyTorch's wheel indexes: ``pip install torch --index-url`` takes one of these.
INDEX_URL = "https://download.pytorch.org/whl/{index}"


def pip_command(index: str, release: str | None = None) -> str:
    """``pip install torch --index-url URL``, pinned to a release line (``'torch==2.9.*'``).

    :param index: the wheel index's name on download.pytorch.org (``"rocm6.3"``, ``"cu126"``).
    :param release: the torch release line to stay on, or None for the newest.
    """
    spec = f"'torch=={release}.*'" if release else "torch"
    return f"pip install {spec} --index-url {INDEX_URL.format(index=index)}"


@frozen
class WheelAdvice:
    """PyTorch's wheels and one device (or a set the advice must serve together)."""

    status: WheelStatus
    """``"default"`` (the backend's default index has kernels for it: the usual install line
    holds), ``"index"`` (the newest release has them on ``index``), ``"older"`` (only an older
    release does: pin ``release``) or ``"none"`` (no PyTorch wheel has kernels for it)."""
    index: str | None
    """The wheel index with kernels for it (``"rocm6.3"``, ``"cu126"``); None when none has."""
    release: str | None
    """The torch release line to pin (``"2.9"``); None for the newest."""
    reason: str
    """Why, in a sentence a fix can carry; empty when the default index serves it."""
    source: str
    """The build scripts (file@tag), release notes or issues the answer rests on."""
    vendor: str = ""
    """The vendor's own support fact, where it differs from the wheels' (AMD's ROCm list)."""

    @property
    def command(self) -> str | None:
        """The pip line that installs a torch with kernels for the device, if any wheel has."""
        if self.index is None or self.status == "none":
            return None
        return pip_command(self.index, self.release)

    @property
    def url(self) -> str | None:
        """The wheel index's URL (``https://download.pytorch.org/whl/rocm6.3``), if any."""
        return INDEX_URL.format(index=self.index) if self.index else None

    def to_dict(self) -> dict[str, str | None]:
        """The advice as JSON-ready data, ``command`` included."""
        return {
            "status": self.status,
            "index": self.index,
            "release": self.release,
            "command": self.command,
            "reason": self.reason,
            "vendor": self.vendor,
            "source": self.source,
        }
