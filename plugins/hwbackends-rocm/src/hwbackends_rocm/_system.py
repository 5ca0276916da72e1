"""Reading the real machine's AMD GPUs from the KFD topology (no HIP, no ROCr).

ROCr enumerates GPUs in KFD node order, which is not always PCI order; each node's
``properties`` file gives the gfx target, the PCI location and the unique id
(``/sys/class/kfd/kfd/topology/nodes/<n>/properties``, read by ROCR-Runtime's topology code).
"""

from __future__ import annotations

import os

from hwbackends.plugin import list_dir, read_text, replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hwbackends import HostDevice

__all__ = ["NODES", "gfx_name", "order_by_kfd"]

NODES = "sys/class/kfd/kfd/topology/nodes"


def gfx_name(version: int) -> str:
    """KFD ``gfx_target_version`` (e.g. 90402) to a gfx name (``gfx942``)."""
    major, minor, step = version // 10000, (version // 100) % 100, version % 100
    return f"gfx{major}{minor:x}{step:x}"


def order_by_kfd(root: str, found: tuple[HostDevice, ...]) -> tuple[HostDevice, ...]:
    """The GPUs in KFD node order, with arch and unique id; functions without a KFD node
    (no driver bound) follow in PCI order."""
    from hwbackends import HostDevice

    nodes_dir = os.path.join(root, NODES)
    kfd: list[tuple[int, str, dict[str, int]]] = []
    for node in list_dir(nodes_dir):
        if not node.isdigit():
            continue
        text = read_text(os.path.join(nodes_dir, node, "properties")) or ""
        props: dict[str, int] = {}
        for line in text.splitlines():
            k, _, v = line.partition(" ")
            if v.strip().lstrip("-").isdigit() and len(v.strip()) < 24:
                props[k] = int(v)
        if props.get("gfx_target_version", 0) == 0 or props.get("simd_count", 0) == 0:
            continue  # a CPU node
        loc = props.get("location_id", 0)
        bus_id = (
            f"{props.get('domain', 0):04x}:{loc >> 8 & 0xFF:02x}:{loc >> 3 & 0x1F:02x}.{loc & 0x7}"
        )
        kfd.append((int(node), bus_id, props))
    if not kfd:
        return found
    by_bus = {d.pci_bus_id: d for d in found}
    ordered: list[HostDevice] = []
    for node_id, bus_id, props in sorted(kfd):
        dev = by_bus.pop(bus_id, None) or HostDevice(vendor="amd", pci_bus_id=bus_id)
        uid = props.get("unique_id")
        ordered.append(
            replace(
                dev,
                uuid=f"GPU-{uid:016x}" if uid else None,
                arch=gfx_name(props["gfx_target_version"]),
                extra={**dev.extra, "kfd_node": node_id},
            )
        )
    return tuple(ordered) + tuple(by_bus.values())
