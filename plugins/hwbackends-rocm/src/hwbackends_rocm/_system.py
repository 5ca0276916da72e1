"""Reading the real machine's AMD GPUs from the KFD topology (no HIP, no ROCr).

ROCr enumerates GPUs in KFD node order, which is not always PCI order; each node's
``properties`` file gives the gfx target, the PCI location and the unique id
(``/sys/class/kfd/kfd/topology/nodes/<n>/properties``, read by ROCR-Runtime's topology code).

The topology is a source of devices on its own: it exists whenever amdgpu runs with KFD, also
where ``/sys/bus/pci`` is absent or partial (containers, some VMs). A GPU node is one with
SIMDs; older kernels write no ``gfx_target_version`` line, and then the node's ``device_id``
still names the chip. A partitioned GPU (MI300X in CPX mode) has one node per partition: the
kernel ORs the partition (KFD node) index into ``location_id``'s function bits
(``kfd_topology_add_device`` in ``drivers/gpu/drm/amd/amdkfd/kfd_topology.c``: ``location_id
|= node_id`` for GC 9.4.3, later for every GPU of several nodes), and the partitions share the
physical function's ``unique_id``. Each partition keeps the bus id the kernel writes
(``0000:05:00.1`` ... ``.7``, what HIP's ``hipDeviceGetPCIBusId`` gives it too, read from the
same topology); ``extra["physical_pci_bus_id"]`` names the PCI function they share.
"""

from __future__ import annotations

import os

from hwbackends.plugin import list_dir, read_text, replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hwbackends import HostDevice

__all__ = ["EVIDENCE", "NODES", "foreign_drivers", "gfx_name", "order_by_kfd", "read_nodes"]

NODES = "sys/class/kfd/kfd/topology/nodes"
#: The evidence name a device found in the KFD topology carries (``extra["evidence"]``).
EVIDENCE = "kfd"
#: The most topology nodes read: a real machine has a few dozen (64 MI300X partitions and
#: two CPUs); a hostile tree with millions of folders must not stall the reader.
MAX_NODES = 4096
_PROPS_LIMIT = 1 << 14


def gfx_name(version: int) -> str:
    """KFD ``gfx_target_version`` (e.g. 90402) to a gfx name (``gfx942``)."""
    major, minor, step = version // 10000, (version // 100) % 100, version % 100
    return f"gfx{major}{minor:x}{step:x}"


def _props(text: str) -> dict[str, int]:
    props: dict[str, int] = {}
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        v = v.strip()
        if v.lstrip("-").isdigit() and len(v) < 24:
            props[k] = int(v)
    return props


class Node:
    """One GPU node of the KFD topology."""

    __slots__ = ("bus", "function", "node", "physical", "props")

    def __init__(self, node: int, props: dict[str, int]) -> None:
        self.node, self.props = node, props
        loc = props.get("location_id", 0)
        domain = props.get("domain", 0)
        self.function = loc & 0x7
        # as the kernel writes it: a partition's index sits in the function bits
        self.bus = f"{domain & 0xFFFF:04x}:{loc >> 8 & 0xFF:02x}:{loc >> 3 & 0x1F:02x}.{loc & 0x7}"
        self.physical = self.bus  # the PCI function (a partition's is set below)


def read_nodes(root: str) -> list[Node]:
    """The topology's GPU nodes in node order, each partition with its physical function."""
    nodes_dir = os.path.join(root, NODES)
    names = [n for n in list_dir(nodes_dir) if n.isdigit() and len(n) < 8]
    out: list[Node] = []
    for name in sorted(names, key=int)[:MAX_NODES]:
        props = _props(read_text(os.path.join(nodes_dir, name, "properties"), _PROPS_LIMIT) or "")
        # A CPU node has no SIMDs and no device id; a GPU node has SIMDs, a gfx target or a
        # GPU device id (older kernels write no gfx_target_version line).
        gpu = props.get("simd_count", 0) > 0 or props.get("gfx_target_version", 0) > 0
        if not gpu and not (props.get("device_id", 0) > 0 and props.get("cpu_cores_count", 0) <= 0):
            continue
        out.append(Node(int(name), props))
    # Partitions: several nodes of one unique_id on one bus and device, function bits counting
    # up. They are one physical function (the lowest function of the group).
    groups: dict[tuple[str, int], list[Node]] = {}
    for n in out:
        uid = n.props.get("unique_id", 0)
        if uid:
            groups.setdefault((n.bus[:-2], uid), []).append(n)
    for members in groups.values():
        if len(members) < 2:
            continue
        base = min(m.function for m in members)
        for m in members:
            m.physical = f"{m.bus[:-2]}.{base}"
    return out


def order_by_kfd(root: str, found: tuple[HostDevice, ...]) -> tuple[HostDevice, ...]:
    """The GPUs in KFD node order, with arch, unique id and device id; functions without a KFD
    node (no driver bound) follow in PCI order. With no PCI function found, the topology's
    nodes are the devices."""
    from hwbackends import HostDevice

    nodes = read_nodes(root)
    if not nodes:
        return found
    by_bus = {(d.pci_bus_id or "").lower(): d for d in found}
    per_bus: dict[str, int] = {}
    for n in nodes:
        per_bus[n.physical] = per_bus.get(n.physical, 0) + 1
    used: set[str] = set()
    ordered: list[HostDevice] = []
    seen: dict[str, int] = {}
    for n in nodes:
        p = n.props
        dev = by_bus.get(n.physical) or HostDevice(vendor="amd", pci_bus_id=n.physical)
        used.add(n.physical)
        uid = p.get("unique_id")
        gfx = p.get("gfx_target_version", 0)
        did = p.get("device_id", 0)
        mem = p.get("local_mem_size", 0)
        evidence = list(dev.extra.get("evidence", ()))
        extra = {**dev.extra, "kfd_node": n.node, "evidence": [*evidence, EVIDENCE]}
        if per_bus[n.physical] > 1:  # one of several partitions of this physical function
            extra["partition"] = seen.get(n.physical, 0)
            extra["physical_pci_bus_id"] = n.physical
            seen[n.physical] = extra["partition"] + 1
        ordered.append(
            replace(
                dev,
                pci_bus_id=n.bus if per_bus[n.physical] > 1 else dev.pci_bus_id,
                uuid=f"GPU-{uid:016x}" if uid else dev.uuid,
                arch=gfx_name(gfx) if gfx > 0 else dev.arch,
                pci_device_id=f"0x{did:04x}" if 0 < did <= 0xFFFF else dev.pci_device_id,
                memory_bytes=dev.memory_bytes if dev.memory_bytes is not None or mem <= 0 else mem,
                extra=extra,
            )
        )
    rest = tuple(d for d in found if (d.pci_bus_id or "").lower() not in used)
    return tuple(ordered) + rest


#: Drivers other than amdgpu an AMD GPU's PCI function is seen bound to (its ``driver`` link,
#: Documentation/ABI/stable/sysfs-bus-pci): what each means for ROCm, and how amdgpu gets it.
FOREIGN: dict[str, tuple[str, str]] = {
    "vfio-pci": (
        "which keeps it for a virtual machine's guest (Linux Documentation/driver-api/vfio.rst)",
        "run ROCm in the guest it is given to; for this machine, drop its id from the "
        "vfio-pci.ids= boot option (or its driverctl override) and reboot, so that amdgpu "
        "takes it",
    ),
    "pci-stub": (
        "which keeps every driver off it (pci-stub.ids=, drivers/pci/pci-stub.c)",
        "drop its id from the pci-stub.ids= boot option and reboot, so that amdgpu takes it",
    ),
    "radeon": (
        "which has no KFD, so ROCm cannot see it",
        "a GCN 1/2 GPU goes to amdgpu with radeon.si_support=0 amdgpu.si_support=1 (Southern "
        "Islands) or radeon.cik_support=0 amdgpu.cik_support=1 (Sea Islands) on the kernel "
        "command line (si_support/cik_support in amdgpu_drv.c)",
    ),
}


def foreign_drivers(devices: tuple[HostDevice, ...]) -> tuple[str, str] | None:
    """``(problem, fix)`` naming each driver that is not amdgpu bound to one of ``devices``
    (``vfio-pci``, ``pci-stub``, ``radeon``, ...) with its bus ids; None when there is none."""
    found: dict[str, list[str]] = {}
    for dev in devices:
        name = dev.extra.get("driver")
        if isinstance(name, str) and name not in ("", "amdgpu"):
            found.setdefault(name, []).append(dev.pci_bus_id or "an AMD GPU")
    if not found:
        return None
    said = []
    fixes: dict[str, None] = {}
    for name, where in found.items():
        meaning, fix = FOREIGN.get(name, (
            "which ROCm does not use", f"unbind it from {name} and load amdgpu"))  # fmt: skip
        verb = "is" if len(where) == 1 else "are"
        said.append(f"{' and '.join(where)} {verb} bound to {name}, {meaning}")
        fixes[fix] = None
    return "; ".join(said), "; ".join(fixes)
