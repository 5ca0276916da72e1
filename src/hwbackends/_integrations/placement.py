"""Where ``from_pretrained`` puts the model: the ``device_map`` for a resolved target, and the
devices (and so the capability tables) a spread model spans."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hwbackends._base.protocol import Capabilities
    from hwbackends._selection.target import Target


def _spread_caps(t: Target) -> list[Capabilities]:
    """Capabilities of each distinct architecture among the devices device_map="auto" uses."""
    seen: dict[str | None, Capabilities] = {t.caps.arch: t.caps}
    igpus = _integrated(t)
    for d in t.devices:
        if d.arch not in seen and d.pci_bus_id not in igpus:
            seen[d.arch] = t.capabilities_of(d)
    return list(seen.values())


def _integrated(t: Target) -> set[str]:
    """PCI bus ids of the visible devices that are integrated GPUs (host file or plugin)."""
    buses = {d.pci_bus_id for d in t.devices if d.pci_bus_id}
    return {
        hd.pci_bus_id
        for hd in t.host.devices
        if hd.pci_bus_id in buses and hd.extra.get("integrated")
    }


def _device_map(t: Target) -> tuple[str, str]:
    dev = t.device
    if t.name == "cpu" or dev is None:
        return "cpu", "no accelerator: weights stay on the CPU"
    if t.chosen:
        return dev.torch_device, (
            f"the device asked for (device={dev.index}): the model loads onto it alone"
        )
    igpus = _integrated(t)
    discrete = [d for d in t.devices if d.pci_bus_id not in igpus]
    if igpus and discrete and t.rank is None:
        shown = ", ".join(d.torch_device for d in t.devices if d.pci_bus_id in igpus)
        keep = ",".join(str(d.physical_index) for d in discrete)
        target = discrete[0].torch_device if len(discrete) == 1 else "auto"
        return target, (
            f"{shown} is an integrated GPU sharing system memory: the model stays on the "
            f"discrete GPU(s); hide the iGPU with `hwbackends pin {keep}`"
        )
    if t.rank is not None:
        if t.rank.bound:
            return dev.torch_device, (
                f"the launcher gave this task its own devices ({t.rank.bound} is set): the "
                "first visible one is this task's"
            )
        return dev.torch_device, (
            f"one process per device under a launcher ({t.rank.source}): each rank loads onto "
            "its own device"
        )
    if len(t.devices) > 1 and t.caps.device_map_auto:
        return "auto", f"Accelerate spreads the model over the {len(t.devices)} visible devices"
    if not t.caps.device_map_auto:
        return dev.torch_device, (
            f"Accelerate's device_map='auto' cannot see {t.name} devices; an explicit device "
            "is required"
        )
    return dev.torch_device, "one visible device"
