"""The parts of a machine description: the torch build, the CPU and one device (plain data)."""

from __future__ import annotations

from _collections_abc import Mapping  # collections.abc's classes, without importing collections

from hwbackends._base.record import field, frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@frozen
class TorchBuild:
    """What the installed torch was built for, read from ``torch/version.py`` as text."""

    version: str
    cuda: str | None = None
    hip: str | None = None
    xpu: str | None = None

    @property
    def flavour(self) -> str:
        """``cuda``, ``rocm``, ``xpu`` or ``cpu``: which accelerator runtime the wheel links."""
        if self.hip:
            return "rocm"
        if self.cuda:
            return "cuda"
        if self.xpu or "+xpu" in self.version:
            return "xpu"
        return "cpu"

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "cuda": self.cuda, "hip": self.hip, "xpu": self.xpu}


@frozen
class CpuInfo:
    model: str = ""
    count: int = 1
    flags: frozenset[str] = frozenset()

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "count": self.count, "flags": sorted(self.flags)}


@frozen
class HostDevice:
    """One accelerator as the machine lists it, in its runtime's physical order.

    ``vendor`` is the key a backend declares (``BaseBackend.vendor``). ``extra`` holds facts
    that only some devices have, named by the backend that reads them (MIG instances, cores,
    tiles, module ids, ``integrated`` for an iGPU, ``pci_class``, ``unclaimed`` for an
    accelerator no installed backend claims).
    """

    vendor: str
    pci_bus_id: str | None = None
    uuid: str | None = None
    name: str | None = None
    arch: str | None = None
    memory_bytes: int | None = None
    pci_device_id: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "vendor": self.vendor,
            "pci_bus_id": self.pci_bus_id,
            "uuid": self.uuid,
            "name": self.name,
            "arch": self.arch,
            "memory_bytes": self.memory_bytes,
        }
        if self.pci_device_id is not None:
            d["pci_device_id"] = self.pci_device_id
        d.update(self.extra)
        return d
