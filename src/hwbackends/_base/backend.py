"""The ``Backend`` protocol (``hwbackends.Backend``), in a module of its own: defining a
``typing.Protocol`` imports ``typing``, which the selection path does without."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    from hwbackends._base.protocol import Capabilities, Device, Probe
    from hwbackends._machine.host import Host

__all__ = ["Backend"]


@runtime_checkable
class Backend(Protocol):
    """A hardware family. Plugins usually subclass ``hwbackends.plugin.BaseBackend``.

    Rules: ``probe`` never raises and never initialises a device runtime (files only);
    importing the module that defines a backend imports no vendor SDK and changes nothing.
    """

    name: ClassVar[str]
    device_type: ClassVar[str]
    api_version: ClassVar[int]
    priority: ClassVar[int]

    def probe(self, host: Host) -> Probe: ...

    def devices(self, host: Host, env: Mapping[str, str]) -> list[Device]: ...

    def capabilities(
        self, device: Device | None = None, *, host: Host | None = None
    ) -> Capabilities: ...

    def visibility_env(
        self,
        physical_indices: Sequence[int],
        *,
        host: Host | None = None,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, str]: ...
