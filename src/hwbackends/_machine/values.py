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
    """torch's ``__version__``, local build tag included (``2.8.0+cu128``)."""
    cuda: str | None = None
    """The CUDA version the wheel was built with (``"12.8"``); None when it is not a CUDA
    build."""
    hip: str | None = None
    """The HIP version of a ROCm build (``"6.4.43482"``); None when it is not a ROCm build."""
    xpu: str | None = None
    """``torch/version.py``'s ``xpu`` value on an Intel XPU build (``"20250101"``); None
    otherwise."""

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
        """The build as JSON-able data, as a host file's ``torch`` object writes it."""
        return {"version": self.version, "cuda": self.cuda, "hip": self.hip, "xpu": self.xpu}


@frozen
class CpuInfo:
    """A machine's CPU: its model, logical cores (0: not known, a tree that shows none) and
    ``/proc/cpuinfo`` flags."""

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
    """The vendor key of the backend that serves it, or would if installed (``nvidia``,
    ``amd``, ``intel``, ...); ``pci_<vendor id>`` (``pci_1234``) where no known backend does."""
    pci_bus_id: str | None = None
    """Its PCI address ``domain:bus:device.function``, lower-case (``0000:41:00.0``); None
    when unknown."""
    uuid: str | None = None
    """The runtime's unique id (``GPU-...`` for NVIDIA and AMD); None when unknown."""
    name: str | None = None
    """The marketing name (``NVIDIA L40S``); None when unknown."""
    arch: str | None = None
    """The architecture (``sm_90``, ``gfx942``, ``trn2``, ...); None when unknown."""
    memory_bytes: int | None = None
    """Device memory in bytes; None when unknown."""
    pci_device_id: str | None = None
    """The PCI device id (``0x7364``), which plugins use to tell generations apart; None when
    unknown."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """The facts only some devices have, by name (see above); empty when there are none."""

    def to_dict(self) -> dict[str, Any]:
        """The device as JSON-able data in the host-file format: the fields above
        (``pci_device_id`` only when known) and each entry of ``extra`` as a field of its own."""
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
