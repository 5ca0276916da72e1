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
    """The backend's name: its entry-point name in ``hwbackends.backends`` (``"cuda"``)."""
    device_type: ClassVar[str]
    """Torch's device string for its devices (``"cuda"``, ``"xpu"``, ``"xla"``)."""
    api_version: ClassVar[int]
    """The plugin API the class was written for; the core refuses another
    (``hwbackends.API_VERSION``)."""
    priority: ClassVar[int]
    """The order among backends that are all available: the highest is chosen."""

    def probe(self, host: Host) -> Probe:
        """Is the hardware here, and is the software ready? Reads ``host`` only, never raises.

        :param host: the machine to look at (``Host.from_system()`` or a simulated host).
        """
        ...

    def devices(self, host: Host, env: Mapping[str, str]) -> list[Device]:
        """The devices a process sees under ``env``, in logical (torch index) order.

        :param host: the machine whose devices are numbered.
        :param env: the environment whose visibility variables decide what is seen.
        """
        ...

    def capabilities(
        self, device: Device | None = None, *, host: Host | None = None
    ) -> Capabilities:
        """What a device can do, each fact with its source.

        :param device: the device (its ``arch`` selects the facts); None: the backend's
            defaults.
        :param host: the machine, for facts that depend on what is installed there; None:
            the answer without a machine.
        """
        ...

    def visibility_env(
        self,
        physical_indices: Sequence[int],
        *,
        host: Host | None = None,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """Environment assignments that make exactly ``physical_indices`` visible, in that order.

        :param physical_indices: the devices to show, by ``Device.physical_index``.
        :param host: the machine whose devices the indices number; None: an empty ``Host()``.
        :param env: the environment the indices were read under, for runtimes that number
            devices differently by a setting; None: no such setting.
        :raises VisibilityError: when the runtime cannot express the selection.
        """
        ...
