"""Each AMD device's support, for the core's one verdict per device: a GPU older than GCN and
an integrated GPU outside ROCm's targets cannot be served by any ROCm build of torch, whatever
is installed; the probe says so for them all at once, this says it per device."""

from __future__ import annotations

from hwbackends.plugin import DeviceSupport

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from hwbackends import Host, HostDevice

__all__ = ["device_support"]


def device_support(
    host: Host, arch_of: Callable[[HostDevice], str | None]
) -> tuple[DeviceSupport, ...]:
    """One ``DeviceSupport`` per AMD device of ``host``, in the probe's order."""
    from ._probe import SUPPORT_LIST, classify

    out = []
    for g in classify(host, arch_of):
        bus = g.device.pci_bus_id
        if g.pre_gcn:
            out.append(DeviceSupport(
                bus, g.label, False,
                f"{g.label} is older than GCN: neither ROCm nor the amdgpu driver supports it "
                "(both start at GCN: amdgpu_unsupported_pciidlist in "
                "drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c), so no ROCm build of torch runs on it",
            ))  # fmt: skip
        elif not g.usable:
            out.append(DeviceSupport(
                bus, g.label, False,
                f"{g.label} is an integrated GPU that is not a ROCm target ({SUPPORT_LIST})",
            ))  # fmt: skip
        elif g.row is None:
            out.append(DeviceSupport(
                bus, g.label, None,
                f"{g.label} is not in hwbackends' table: whether ROCm supports it is unknown",
            ))  # fmt: skip
        else:
            out.append(DeviceSupport(bus, g.label, True, f"{g.label} is {g.row.support} in ROCm"))
    return tuple(out)
