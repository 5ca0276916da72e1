"""The shapes the visibility engine reads (``HostLike``, ``DeviceLike``), kept apart because a
``typing.Protocol`` imports ``typing``, which the selection path does without."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

__all__ = ["DeviceLike", "HostLike"]


class DeviceLike(Protocol):
    """What the engine reads from one device (``hwbackends.HostDevice`` fits)."""

    @property
    def vendor(self) -> str:
        """The vendor key (``"nvidia"``, ``"amd"``, ...): a backend's rule reads the devices
        whose vendor is the backend's ``BaseBackend.vendor``."""
        ...

    @property
    def uuid(self) -> str | None:
        """The device's UUID as its tools print it (``GPU-...`` for NVIDIA), which UUID
        entries of a visibility list are matched against; None when unknown."""
        ...

    @property
    def pci_bus_id(self) -> str | None:
        """The PCI address (``0000:3b:00.0``), for runtimes that can order devices by bus
        (``CUDA_DEVICE_ORDER=PCI_BUS_ID``); None when unknown."""
        ...

    @property
    def name(self) -> str | None:
        """The model name (``"NVIDIA H100 80GB HBM3"``); with ``arch``, it tells whether the
        devices are all one model. None when unknown."""
        ...

    @property
    def arch(self) -> str | None:
        """The architecture (``"gfx90a"``, ``"trn2"``); None when unknown."""
        ...

    @property
    def extra(self) -> Mapping[str, Any]:
        """Facts only some devices have, named by the backend that reads them: MIG
        instances (``"mig"``), NeuronCores (``"cores"``), tiles (``"tiles"``), module ids
        (``"module_id"``), ..."""
        ...


class HostLike(Protocol):
    """What the engine reads from a host (``hwbackends.Host`` fits).

    An optional ``drivers`` mapping (kernel module -> version) is used when present, through
    ``getattr``, by rules whose semantics depend on the driver generation.
    """

    @property
    def devices(self) -> Sequence[DeviceLike]:
        """The accelerators, each vendor's in its runtime's physical order (the order a
        host file lists them in)."""
        ...

    @property
    def cuda_fastest_first(self) -> Sequence[int] | None:
        """CUDA's ``FASTEST_FIRST`` order of the NVIDIA GPUs, as their positions among
        them, fastest first; None when unknown (the PCI order is then assumed)."""
        ...
