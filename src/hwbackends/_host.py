"""A read-only view of one machine: the real one, or one described by a host file.

The same ``Host`` object feeds every backend, so a simulated host exercises exactly the code a
real machine does. Reading the real machine touches only files: sysfs, ``/dev``, ``/proc`` and
the ``*.dist-info`` folders on ``sys.path``. It never imports torch or a vendor SDK, and never
opens a device, so a process can fork safely after probing (DESIGN.md, rule 2).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._errors import HostFileError

__all__ = ["CpuInfo", "Host", "HostDevice", "TorchBuild", "normalize_dist_name"]

# PCI vendor id -> vendor key used throughout hwbackends (host files use the key).
PCI_VENDORS: Mapping[str, str] = {
    "0x10de": "nvidia",
    "0x1002": "amd",
    "0x8086": "intel",
    "0x1d0f": "aws",
    "0x1ae0": "google",
    "0x1da3": "habana",
    "0x19e5": "huawei",
    "0xcabc": "cambricon",
    "0x1ed5": "mthreads",
}
KNOWN_VENDORS = frozenset(PCI_VENDORS.values()) | {"apple"}

# PCI base classes that can be an accelerator. Intel, AMD and NVIDIA also make chipsets,
# NICs and audio functions, so for them only display (0x03) and processing accelerators
# (0x12) count; the accelerator-only vendors also use 0x0b (co-processor), 0x08 (system
# peripheral), 0x00 (unclassified) and 0xff.
_GPU_CLASSES = frozenset({"03", "12"})
_ACCEL_CLASSES = frozenset({"03", "12", "0b", "08", "00", "ff"})
_GPU_VENDORS = frozenset({"nvidia", "amd", "intel"})

# /dev entries that reveal an accelerator driver, by prefix.
_DEV_PREFIXES = (
    "nvidia",
    "kfd",
    "neuron",
    "accel",
    "davinci",
    "cambricon",
    "mtgpu",
    "hl",
    "vfio",
    "dri/renderD",
    "accel/accel",
    "davinci_manager",
    "devmm_svm",
)

# Kernel modules whose presence (and version) tells that a driver is loaded.
_DRIVER_MODULES = (
    "nvidia",
    "amdgpu",
    "i915",
    "xe",
    "habanalabs",
    "neuron",
    "drv_pcie_host",
    "cambricon_drv",
    "mtgpu",
)


def normalize_dist_name(name: str) -> str:
    """PEP 503 normalisation without ``re`` (it is not imported at start-up)."""
    out = name.lower().replace("_", "-").replace(".", "-")
    while "--" in out:  # runs of separators are rare: loop only then
        out = out.replace("--", "-")
    return out


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class CpuInfo:
    model: str = ""
    count: int = 1
    flags: frozenset[str] = frozenset()

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "count": self.count, "flags": sorted(self.flags)}


@dataclass(frozen=True)
class HostDevice:
    """One accelerator as the machine lists it, in the vendor's physical order.

    ``extra`` holds vendor facts that only some devices have: ``mig`` (list of MIG instances
    with ``uuid``), ``cores`` (NeuronCores per Neuron device), ``tiles`` (Intel GPU tiles),
    ``module_id`` (Gaudi), ``kfd_node`` (AMD), ``integrated`` (an iGPU).
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


_DEVICE_KEYS = frozenset(
    {"vendor", "pci_bus_id", "uuid", "name", "arch", "memory_bytes", "pci_device_id"}
)


@dataclass(frozen=True)
class Host:
    """Everything hwbackends knows about one machine. Build with a ``from_*`` constructor."""

    system: str = "Linux"
    machine: str = "x86_64"
    torch: TorchBuild | None = None
    packages: Mapping[str, str] = field(default_factory=dict)
    devices: tuple[HostDevice, ...] = ()
    cuda_fastest_first: tuple[int, ...] | None = None
    env: Mapping[str, str] | None = None
    cpu: CpuInfo = field(default_factory=CpuInfo)
    device_nodes: tuple[str, ...] = ()
    drivers: Mapping[str, str] = field(default_factory=dict)
    source: str = "dict"

    # -- queries ---------------------------------------------------------------------------

    def devices_of(self, vendor: str) -> tuple[HostDevice, ...]:
        """Devices of one vendor, in that vendor's physical order."""
        index: dict[str, tuple[HostDevice, ...]] | None = self.__dict__.get("_by_vendor")
        if index is None:  # built once per host: device resolution asks several times
            grouped: dict[str, list[HostDevice]] = {}
            for d in self.devices:
                grouped.setdefault(d.vendor, []).append(d)
            index = {v: tuple(ds) for v, ds in grouped.items()}
            object.__setattr__(self, "_by_vendor", index)  # a cache, not a field
        return index.get(vendor, ())

    def package(self, name: str) -> str | None:
        """Installed version of a distribution, or None."""
        return self.packages.get(normalize_dist_name(name))

    def has_node(self, prefix: str) -> bool:
        return any(n.startswith(prefix) for n in self.device_nodes)

    @property
    def simulated(self) -> bool:
        return self.source != "system"

    def to_dict(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "machine": self.machine,
            "torch": self.torch.to_dict() if self.torch else None,
            "packages": dict(sorted(self.packages.items())),
            "devices": [d.to_dict() for d in self.devices],
            "cuda_fastest_first": list(self.cuda_fastest_first)
            if self.cuda_fastest_first is not None
            else None,
            "env": dict(self.env) if self.env is not None else None,
            "cpu": self.cpu.to_dict(),
            "device_nodes": list(self.device_nodes),
            "drivers": dict(self.drivers),
        }

    # -- constructors ----------------------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Host:
        """Read a simulated host (JSON, format in DESIGN.md)."""
        import json

        p = os.fspath(path)
        try:
            with open(p, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            raise HostFileError(
                f"host file {p!r} does not exist",
                "a path to a JSON host file",
                "check the path given to --host or HWBACKENDS_HOST",
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise HostFileError(
                f"host file {p!r} could not be read ({exc})", fix="check its permissions"
            ) from None
        except json.JSONDecodeError as exc:
            raise HostFileError(
                f"host file {p!r} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                f"{exc.msg})",
                "a JSON object as described in the hwbackends docs",
                "fix the JSON syntax at that position",
            ) from None
        return cls.from_dict(data, source=p)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "dict") -> Host:
        """Validate a host description; every mistake names its field."""
        if not isinstance(data, Mapping):
            raise HostFileError(
                f"a host description must be a JSON object, got {type(data).__name__}",
                'an object such as {"system": "Linux", "devices": []}',
            )
        known = {
            "system",
            "machine",
            "torch",
            "packages",
            "devices",
            "cuda_fastest_first",
            "env",
            "cpu",
            "device_nodes",
            "drivers",
            "comment",
            "name",
        }
        unknown = sorted(set(data) - known)
        if unknown:
            raise HostFileError(
                f"unknown host field(s) {', '.join(map(repr, unknown))} in {source}",
                f"only {', '.join(sorted(known))}",
                "remove or rename the field",
            )
        system = _get_str(data, "system", "Linux", source)
        machine = _get_str(data, "machine", "x86_64", source)

        torch = None
        tdata = data.get("torch")
        if tdata is not None:
            if not isinstance(tdata, Mapping) or not isinstance(tdata.get("version"), str):
                raise HostFileError(
                    f"'torch' in {source} must be an object with a string 'version'",
                    'for example {"version": "2.8.0+cu128", "cuda": "12.8", "hip": null}',
                )
            torch = TorchBuild(
                version=tdata["version"],
                cuda=_opt_str(tdata, "cuda", f"torch.cuda in {source}"),
                hip=_opt_str(tdata, "hip", f"torch.hip in {source}"),
                xpu=_opt_str(tdata, "xpu", f"torch.xpu in {source}"),
            )

        pdata = data.get("packages", {})
        if not isinstance(pdata, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in pdata.items()
        ):
            raise HostFileError(
                f"'packages' in {source} must map distribution names to version strings",
                '{"torch": "2.8.0"}',
            )
        packages = {normalize_dist_name(k): v for k, v in pdata.items()}
        if torch is not None and "torch" not in packages:
            packages["torch"] = torch.version

        ddata = data.get("devices", [])
        if not isinstance(ddata, list):
            raise HostFileError(f"'devices' in {source} must be a list", "a JSON array")
        devices = tuple(_device_from_dict(d, i, source) for i, d in enumerate(ddata))

        ff = data.get("cuda_fastest_first")
        fastest: tuple[int, ...] | None = None
        if ff is not None:
            n_nv = sum(1 for d in devices if d.vendor == "nvidia")
            if (
                not isinstance(ff, list)
                or not all(isinstance(i, int) and not isinstance(i, bool) for i in ff)
                or sorted(ff) != list(range(n_nv))
            ):
                raise HostFileError(
                    f"'cuda_fastest_first' in {source} must be a permutation of the "
                    f"{n_nv} NVIDIA device positions, got {ff!r}",
                    f"a list holding each of 0..{max(n_nv - 1, 0)} once, fastest GPU first",
                    "list the nvidia-smi index of each GPU in FASTEST_FIRST order, or use null",
                )
            fastest = tuple(ff)

        env = data.get("env")
        if env is not None and (
            not isinstance(env, Mapping)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        ):
            raise HostFileError(
                f"'env' in {source} must map variable names to string values",
                '{"CUDA_VISIBLE_DEVICES": "0,1"}; leave a variable out to mean unset',
            )

        cdata = data.get("cpu", {})
        if not isinstance(cdata, Mapping):
            raise HostFileError(f"'cpu' in {source} must be an object", '{"flags": ["avx2"]}')
        flags = cdata.get("flags", [])
        if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
            raise HostFileError(f"'cpu.flags' in {source} must be a list of strings")
        count = cdata.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise HostFileError(f"'cpu.count' in {source} must be a positive integer")
        cpu = CpuInfo(model=str(cdata.get("model", "")), count=count, flags=frozenset(flags))

        nodes = data.get("device_nodes", [])
        if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
            raise HostFileError(f"'device_nodes' in {source} must be a list of /dev names")
        drivers = data.get("drivers", {})
        if not isinstance(drivers, Mapping) or not all(
            isinstance(v, str) for v in drivers.values()
        ):
            raise HostFileError(
                f"'drivers' in {source} must map driver names to version strings",
                '{"nvidia": "550.54.15"}',
            )
        return cls(
            system=system,
            machine=machine,
            torch=torch,
            packages=packages,
            devices=devices,
            cuda_fastest_first=fastest,
            env=dict(env) if env is not None else None,
            cpu=cpu,
            device_nodes=tuple(sorted(n.removeprefix("/dev/") for n in nodes)),
            drivers=dict(drivers),
            source=source,
        )

    @classmethod
    def from_system(
        cls, root: str = "/", *, path: Sequence[str] | None = None, system: str | None = None
    ) -> Host:
        """Read this machine. ``root`` lets tests point the same code at a fake tree."""
        if hasattr(os, "uname"):  # what platform.system()/machine() return, without importing it
            uts = os.uname()
            sysname, machine = system or uts.sysname, uts.machine
        else:  # pragma: no cover - Windows
            import platform

            sysname, machine = system or platform.system(), platform.machine()
        search = list(sys.path if path is None else path)
        packages = dict(_scan_packages(search))
        devices = list(_read_pci(root))
        _enrich_nvidia(root, devices)
        devices = _order_amd_by_kfd(root, devices)
        if sysname == "Darwin" and machine == "arm64":
            devices.append(_apple_device())
        return cls(
            system=sysname,
            machine=machine,
            torch=_read_torch_build(search),
            packages=packages,
            devices=tuple(devices),
            env=None,
            cpu=_read_cpu(root),
            device_nodes=_read_dev_nodes(root),
            drivers=_read_drivers(root),
            source="system",
        )


# -- host-file helpers ---------------------------------------------------------------------


def _get_str(data: Mapping[str, Any], key: str, default: str, source: str) -> str:
    v = data.get(key, default)
    if not isinstance(v, str):
        raise HostFileError(f"{key!r} in {source} must be a string, got {v!r}")
    return v


def _opt_str(data: Mapping[str, Any], key: str, where: str) -> str | None:
    v = data.get(key)
    if v is not None and not isinstance(v, str):
        raise HostFileError(f"{where} must be a string or null, got {v!r}")
    return v


def _device_from_dict(d: Any, i: int, source: str) -> HostDevice:
    where = f"devices[{i}] in {source}"
    if not isinstance(d, Mapping):
        raise HostFileError(f"{where} must be an object, got {type(d).__name__}")
    vendor = d.get("vendor")
    if not isinstance(vendor, str) or not vendor or not vendor.replace("_", "").isalnum():
        raise HostFileError(
            f"{where} has vendor {vendor!r}",
            f"a vendor key such as {', '.join(sorted(KNOWN_VENDORS))} (or a plugin's own key: "
            "letters, digits and underscores)",
            "set the device's 'vendor' field",
        )
    for key in ("pci_bus_id", "uuid", "name", "arch", "pci_device_id"):
        _opt_str(d, key, f"{where}.{key}")
    mem = d.get("memory_bytes")
    if mem is not None and (not isinstance(mem, int) or isinstance(mem, bool) or mem < 0):
        raise HostFileError(f"{where}.memory_bytes must be a non-negative integer or null")
    bus = d.get("pci_bus_id")
    return HostDevice(
        vendor=vendor,
        pci_bus_id=bus.lower() if isinstance(bus, str) else None,
        uuid=d.get("uuid"),
        name=d.get("name"),
        arch=d.get("arch"),
        memory_bytes=mem,
        pci_device_id=d.get("pci_device_id"),
        extra={k: v for k, v in d.items() if k not in _DEVICE_KEYS},
    )


# -- real-machine readers (files only) -----------------------------------------------------


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


_DIST_CACHE: dict[tuple[tuple[str, int], ...], list[tuple[str, str, str]]] = {}


def iter_dist_infos(path: Iterable[str]) -> Iterator[tuple[str, str, str]]:
    """Yield ``(normalised name, version, dist-info dir)`` in ``sys.path`` order.

    Shared by the package reader and entry-point discovery; like importlib.metadata, a
    distribution name seen earlier on the path shadows later ones. One listing serves both
    within a process until a directory on the path changes (its mtime is in the key).
    """
    entries = list(path)
    key = tuple((e, _mtime_ns(e or ".")) for e in entries)
    found = _DIST_CACHE.get(key)
    if found is None:
        found = _DIST_CACHE[key] = list(_scan_dist_infos(entries))
    return iter(found)


def _mtime_ns(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def _scan_dist_infos(path: Iterable[str]) -> Iterator[tuple[str, str, str]]:
    seen: set[str] = set()
    for entry in path:
        base = entry or "."
        for fn in _listdir(base):
            if fn.endswith(".dist-info"):
                stem = fn[: -len(".dist-info")]
            elif fn.endswith(".egg-info"):
                stem = fn[: -len(".egg-info")]
            else:
                continue
            name, _, version = stem.partition("-")
            version = version.partition("-")[0]  # egg-info may add -pyX.Y
            norm = normalize_dist_name(name)
            if norm in seen:
                continue
            seen.add(norm)
            full = os.path.join(base, fn)
            yield norm, version or _metadata_version(full), full


def _metadata_version(info_dir: str) -> str:
    """Version from METADATA / PKG-INFO, for folders whose name carries none."""
    for meta in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(info_dir, meta), encoding="utf-8", errors="replace") as f:
                for line in f:
                    if line.startswith("Version:"):
                        return line[len("Version:") :].strip()
                    if not line.strip():
                        break
        except OSError:
            continue
    return ""


def _scan_packages(path: Iterable[str]) -> Iterator[tuple[str, str]]:
    for norm, version, _ in iter_dist_infos(path):
        yield norm, version


def _read_torch_build(path: Iterable[str]) -> TorchBuild | None:
    for entry in path:
        text = _read_text(os.path.join(entry or ".", "torch", "version.py"))
        if text is None:
            continue
        values: dict[str, str | None] = {}
        for line in text.splitlines():
            name, sep, rhs = line.partition("=")
            if not sep:
                continue
            name = name.partition(":")[0].strip()
            rhs = rhs.strip()
            if rhs == "None":
                values[name] = None
            elif len(rhs) >= 2 and rhs[0] == rhs[-1] and rhs[0] in "'\"":
                values[name] = rhs[1:-1]
        version = values.get("__version__")
        if not version:
            return None
        return TorchBuild(
            version=version, cuda=values.get("cuda"), hip=values.get("hip"), xpu=values.get("xpu")
        )
    return None


def _read_pci(root: str) -> Iterator[HostDevice]:
    base = os.path.join(root, "sys/bus/pci/devices")
    for bus in _listdir(base):  # sorted: PCI bus order, which is NVML's order
        d = os.path.join(base, bus)
        vid = (_read_text(os.path.join(d, "vendor")) or "").strip().lower()
        vendor = PCI_VENDORS.get(vid)
        if vendor is None:
            continue
        klass = (_read_text(os.path.join(d, "class")) or "").strip().lower()
        base_class = klass[2:4] if klass.startswith("0x") else ""
        allowed = _GPU_CLASSES if vendor in _GPU_VENDORS else _ACCEL_CLASSES
        if base_class not in allowed:
            continue
        did = (_read_text(os.path.join(d, "device")) or "").strip().lower() or None
        mem = _read_text(os.path.join(d, "mem_info_vram_total"))  # amdgpu exposes this
        yield HostDevice(
            vendor=vendor,
            pci_bus_id=bus.lower(),
            pci_device_id=did,
            memory_bytes=int(mem) if mem and mem.strip().isdigit() else None,
            extra={"pci_class": klass},
        )


def _enrich_nvidia(root: str, devices: list[HostDevice]) -> None:
    """Model name and UUID from the NVIDIA driver's per-GPU ``information`` file."""
    gpus = os.path.join(root, "proc/driver/nvidia/gpus")
    info: dict[str, dict[str, str]] = {}
    for bus in _listdir(gpus):
        text = _read_text(os.path.join(gpus, bus, "information")) or ""
        fields = {}
        for line in text.splitlines():
            k, sep, v = line.partition(":")
            if sep:
                fields[k.strip()] = v.strip()
        info[bus.lower()] = fields
    for i, dev in enumerate(devices):
        if dev.vendor != "nvidia" or dev.pci_bus_id not in info:
            continue
        f = info[dev.pci_bus_id]
        uuid = f.get("GPU UUID")
        devices[i] = HostDevice(
            vendor=dev.vendor,
            pci_bus_id=dev.pci_bus_id,
            uuid=uuid if uuid and uuid.startswith("GPU-") else None,
            name=f.get("Model") or None,
            memory_bytes=dev.memory_bytes,
            pci_device_id=dev.pci_device_id,
            extra=dev.extra,
        )


def _gfx_name(version: int) -> str:
    """KFD ``gfx_target_version`` (e.g. 90402) to a gfx name (``gfx942``)."""
    major, minor, step = version // 10000, (version // 100) % 100, version % 100
    return f"gfx{major}{minor:x}{step:x}"


def _order_amd_by_kfd(root: str, devices: list[HostDevice]) -> list[HostDevice]:
    """Put AMD GPUs in KFD node order (what ROCr enumerates) and add arch and unique id."""
    nodes_dir = os.path.join(root, "sys/class/kfd/kfd/topology/nodes")
    kfd: list[tuple[int, str, dict[str, int]]] = []
    for node in _listdir(nodes_dir):
        if not node.isdigit():
            continue
        text = _read_text(os.path.join(nodes_dir, node, "properties")) or ""
        props: dict[str, int] = {}
        for line in text.splitlines():
            k, _, v = line.partition(" ")
            if v.strip().lstrip("-").isdigit():
                props[k] = int(v)
        if props.get("gfx_target_version", 0) == 0 or props.get("simd_count", 0) == 0:
            continue  # a CPU node
        loc = props.get("location_id", 0)
        bus_id = (
            f"{props.get('domain', 0):04x}:{loc >> 8 & 0xFF:02x}:{loc >> 3 & 0x1F:02x}.{loc & 0x7}"
        )
        kfd.append((int(node), bus_id, props))
    if not kfd:
        return devices
    amd = {d.pci_bus_id: d for d in devices if d.vendor == "amd"}
    ordered: list[HostDevice] = []
    for node_id, bus_id, props in sorted(kfd):
        dev = amd.pop(bus_id, None) or HostDevice(vendor="amd", pci_bus_id=bus_id)
        uid = props.get("unique_id")
        ordered.append(
            HostDevice(
                vendor="amd",
                pci_bus_id=bus_id,
                uuid=f"GPU-{uid:016x}" if uid else None,
                name=dev.name,
                arch=_gfx_name(props["gfx_target_version"]),
                memory_bytes=dev.memory_bytes,
                pci_device_id=dev.pci_device_id,
                extra={**dev.extra, "kfd_node": node_id},
            )
        )
    # AMD functions without a KFD node (no driver bound) keep PCI order, after the KFD ones.
    others = [d for d in devices if d.vendor != "amd"]
    return others + ordered + list(amd.values())


def _apple_device() -> HostDevice:
    import platform

    # mac_ver() reads SystemVersion.plist; MPS needs macOS 12.3, bf16 on MPS macOS 14.
    macos = platform.mac_ver()[0]
    extra = {"macos": macos} if macos else {}
    return HostDevice(vendor="apple", name="Apple Silicon GPU", arch="apple-silicon", extra=extra)


def _read_cpu(root: str) -> CpuInfo:
    model = ""
    flags: frozenset[str] = frozenset()
    try:
        with open(os.path.join(root, "proc/cpuinfo"), encoding="utf-8", errors="replace") as f:
            for line in f:  # the first processor block is enough
                if not line.strip():
                    break
                k, _, v = line.partition(":")
                k = k.strip()
                if k == "model name":
                    model = v.strip()
                elif k in ("flags", "Features"):
                    flags = frozenset(v.split())
    except OSError:
        pass
    return CpuInfo(model=model, count=os.cpu_count() or 1, flags=flags)


def _read_dev_nodes(root: str) -> tuple[str, ...]:
    dev = os.path.join(root, "dev")
    found = []
    for sub in ("", "dri/", "accel/"):
        for name in _listdir(os.path.join(dev, sub) if sub else dev):
            rel = sub + name
            if rel.startswith(_DEV_PREFIXES):
                found.append(rel)
    return tuple(sorted(set(found)))


def _read_drivers(root: str) -> dict[str, str]:
    drivers: dict[str, str] = {}
    for mod in _DRIVER_MODULES:
        d = os.path.join(root, "sys/module", mod)
        if os.path.isdir(d):
            drivers[mod] = (_read_text(os.path.join(d, "version")) or "").strip()
    text = _read_text(os.path.join(root, "proc/driver/nvidia/version"))
    if text:
        # "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ..." and, for
        # the open modules, "... NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release
        # Build ...": the version is the first dotted number after "Module".
        words = text.split()
        after = words[words.index("Module") + 1 :] if "Module" in words else []
        version = next((w for w in after if w[:1].isdigit() and "." in w), None)
        if version is not None:
            drivers["nvidia"] = version
        else:
            drivers.setdefault("nvidia", "")
    return drivers
