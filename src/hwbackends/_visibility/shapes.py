"""The shapes the visibility engine reads (``HostLike``, ``DeviceLike``), kept apart because a
``typing.Protocol`` imports ``typing``, which the selection path does without."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

__all__ = ["DeviceLike", "HostLike"]


class DeviceLike(Protocol):
    """What the engine reads from one device (``hwbackends.HostDevice`` fits)."""

    @property
    def vendor(self) -> str: ...
    @property
    def uuid(self) -> str | None: ...
    @property
    def pci_bus_id(self) -> str | None: ...
    @property
    def name(self) -> str | None: ...
    @property
    def arch(self) -> str | None: ...
    @property
    def extra(self) -> Mapping[str, Any]: ...


class HostLike(Protocol):
    """What the engine reads from a host (``hwbackends.Host`` fits).

    An optional ``drivers`` mapping (kernel module -> version) is used when present, through
    ``getattr``, by rules whose semantics depend on the driver generation.
    """

    @property
    def devices(self) -> Sequence[DeviceLike]: ...
    @property
    def cuda_fastest_first(self) -> Sequence[int] | None: ...
