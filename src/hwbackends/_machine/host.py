"""A read-only view of one machine: the real one, or one described by a host file.

The same ``Host`` object feeds every backend, so a simulated host exercises exactly the code a
real machine does. This module is the model and the host-file format; reading the real
machine is ``hwbackends._machine.reader``, which ``Host.from_system`` calls.
"""

from __future__ import annotations

import os
from _collections_abc import Mapping  # collections.abc's classes, without importing collections

from hwbackends._base.errors import HostFileError
from hwbackends._base.files import normalize_dist_name
from hwbackends._base.record import field, frozen
from hwbackends._machine.values import CpuInfo, HostDevice, TorchBuild

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


__all__ = ["CpuInfo", "Host", "HostDevice", "TorchBuild", "normalize_dist_name"]


_DEVICE_KEYS = frozenset(
    {"vendor", "pci_bus_id", "uuid", "name", "arch", "memory_bytes", "pci_device_id"}
)


@frozen
class Host:
    """Everything hwbackends knows about one machine. Build with a ``from_*`` constructor."""

    system: str = "Linux"
    """The operating system as ``platform.system()`` names it (``Linux``, ``Darwin``, ...)."""
    machine: str = "x86_64"
    """The CPU architecture as ``platform.machine()`` names it (``x86_64``, ``aarch64``, ...);
    "" when not known (a ``--root`` tree that does not show it)."""
    torch: TorchBuild | None = None
    """What the installed torch was built for; None when torch is not installed."""
    packages: Mapping[str, str] = field(default_factory=dict)
    """Installed distributions, normalised name (``torch-npu``) to version; see ``package``."""
    devices: tuple[HostDevice, ...] = ()
    """The accelerators, each vendor's in its runtime's physical order."""
    cuda_fastest_first: tuple[int, ...] | None = None
    """CUDA's ``FASTEST_FIRST`` order of the NVIDIA devices when known (a permutation of their
    positions, fastest first); None: unknown, as on a real machine."""
    env: Mapping[str, str] | None = None
    """A host file's environment of the simulated process, name to value; None: none given
    (always for a real machine), so callers use the real environment."""
    cpu: CpuInfo = field(default_factory=CpuInfo)
    """The CPU: ``model``, ``count`` (logical cores; 0 when not known) and ``flags``
    (``/proc/cpuinfo`` names)."""
    device_nodes: tuple[str, ...] = ()
    """The ``/dev`` entries that backends declare, relative to ``/dev`` and sorted
    (``nvidia0``, ``kfd``, ``accel/accel0``)."""
    drivers: Mapping[str, str] = field(default_factory=dict)
    """Loaded drivers, name to version (``{"nvidia": "570.133.20"}``)."""
    source: str = "dict"
    """Where the description comes from: ``"system"`` for this machine, the path for
    ``from_file``, else ``from_dict``'s ``source``."""
    python: str | None = None
    """The Python version (``"3.12.4"``): this interpreter's on a real machine; None when a
    host file gives none."""
    memory_bytes: int | None = None
    """System RAM in bytes; None when unknown."""
    reader_errors: Mapping[str, str] = field(default_factory=dict)
    """Backend name to why its ``read_devices`` / ``read_drivers`` hook failed while this
    machine was read (selection then reports that backend broken); empty for a host file."""

    # -- queries ---------------------------------------------------------------------------

    def devices_of(self, vendor: str) -> tuple[HostDevice, ...]:
        """Devices of one vendor, in that vendor's physical order (empty when it has none).

        :param vendor: a backend's vendor key (``nvidia``), as ``HostDevice.vendor`` holds it.
        """
        index: dict[str, tuple[HostDevice, ...]] | None = self.__dict__.get("_by_vendor")
        if index is None:  # built once per host: device resolution asks several times
            grouped: dict[str, list[HostDevice]] = {}
            for d in self.devices:
                grouped.setdefault(d.vendor, []).append(d)
            index = {v: tuple(ds) for v, ds in grouped.items()}
            object.__setattr__(self, "_by_vendor", index)  # a cache, not a field
        return index.get(vendor, ())

    def package(self, name: str) -> str | None:
        """Installed version of a distribution, or None.

        :param name: the distribution's name in any spelling pip accepts (``torch_npu`` is
            ``torch-npu``).
        """
        return self.packages.get(normalize_dist_name(name))

    def has_node(self, prefix: str) -> bool:
        """Whether a ``/dev`` entry of ``device_nodes`` starts with ``prefix``.

        :param prefix: the start of a name relative to ``/dev`` (``nvidia``, ``accel/``).
        """
        return any(n.startswith(prefix) for n in self.device_nodes)

    @property
    def simulated(self) -> bool:
        """Whether this describes a host file or dict rather than the machine it runs on."""
        return self.source != "system"

    def to_dict(self) -> dict[str, Any]:
        """The host in the host-file format, as JSON-able data that ``from_dict`` reads back
        (``source`` and ``reader_errors`` left out)."""
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
            "python": self.python,
            "memory_bytes": self.memory_bytes,
        }

    # -- constructors ----------------------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Host:
        """Read a simulated host file (JSON; its fields are listed on the "Concepts" page of the
        documentation, section "Simulated hosts").

        The file must be a regular file of at most ``MAX_HOST_FILE_BYTES``; a FIFO, a device
        such as ``/dev/zero`` or a folder is refused before anything is read, so a bad path
        cannot hang or exhaust the process.

        :param path: the host file (``docs/hosts/two-l40s.json``); it becomes ``source``.
        :raises HostFileError: when the file is missing, unreadable, not a regular file, too
            large, not JSON, or describes a field wrongly (the message names it).
        """
        import json

        p = os.fspath(path)
        text = _read_host_file(p)
        try:
            data = json.loads(
                text,
                object_pairs_hook=lambda pairs: _unique_keys(pairs, p),
                parse_constant=_no_constant,
            )
        except json.JSONDecodeError as exc:
            raise HostFileError(
                f"host file {p!r} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                f"{exc.msg})",
                "a JSON object as described in the hwbackends docs",
                "fix the JSON syntax at that position",
            ) from None
        except (ValueError, RecursionError) as exc:  # a 5,000-digit number; 100k nested arrays
            why = (
                "it is nested too deeply"
                if isinstance(exc, RecursionError)
                else str(exc)
                if isinstance(exc, _NotJson)
                else f"it holds a number Python refuses to read ({exc})"
            )
            raise HostFileError(
                f"host file {p!r} cannot be read: {why}",
                "a JSON object as described in the hwbackends docs, a few levels deep",
                "regenerate the file with `hwbackends env --json` or fix it by hand",
            ) from None
        return cls.from_dict(data, source=p)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "dict") -> Host:
        """Validate a host description; every mistake names its field.

        :param data: the host file's fields as a mapping (parsed JSON); every one is optional.
        :param source: what the description is called in error messages and ``source``.
        :raises HostFileError: when a field is unknown or holds a value of the wrong kind.
        """
        _check_fields(data, source)
        system = _get_str(data, "system", "Linux", source)
        machine = _get_str(data, "machine", "x86_64", source)
        torch = _torch_from(data, source)
        packages = _packages_from(data, torch, source)
        devices = _devices_from(data, source)
        fastest = _fastest_first_from(data, source)
        env = _env_from(data, source)
        cpu = _cpu_from(data, source)
        nodes = _device_nodes_from(data, source)
        drivers = _drivers_from(data, source)
        return cls(
            system=system,
            machine=machine,
            torch=torch,
            packages=packages,
            devices=devices,
            cuda_fastest_first=fastest,
            env=env,
            cpu=cpu,
            device_nodes=nodes,
            drivers=drivers,
            source=source,
            python=_opt_str(data, "python", f"'python' in {source}"),
            memory_bytes=_opt_uint(data, "memory_bytes", f"'memory_bytes' in {source}"),
        )

    @classmethod
    def from_system(
        cls,
        root: str = "/",
        *,
        path: Sequence[str] | None = None,
        system: str | None = None,
        backends: Sequence[Any] | None = None,
    ) -> Host:
        """Read this machine. ``root`` lets tests point the same code at a fake tree.

        What counts as hardware comes from ``backends`` (default: the installed backends):
        the PCI functions and ``/dev`` names each declares, ordered and named by its
        ``read_devices`` hook. Accelerator-class functions nobody claims are kept too, so that
        the report can say which plugin to install.

        :param root: the folder whose ``sys``, ``proc`` and ``dev`` are read (``/``). Another
            folder than ``/`` is another machine's tree: ``source`` is then ``"root <root>"``
            and the host counts as ``simulated``, as ``hwbackends env --root`` reads it.
        :param path: the folders searched for installed distributions and torch's
            ``version.py``; None: ``sys.path``.
        :param system: the operating system name to assume; None: ``os.uname()``'s.
        :param backends: the backends whose declarations are used; None: the installed ones
            that load, less those ``HWBACKENDS_PLUGINS`` / ``HWBACKENDS_DISABLE`` turn off.
        """
        import os

        from hwbackends._base.versions import ROOT_SOURCE
        from hwbackends._machine.reader import read_system

        fields = read_system(root, path=path, system=system, backends=backends)
        if os.path.realpath(root) != os.path.realpath("/"):
            # another tree, not this machine: the same host `hwbackends env --root` reads, so
            # the API and the CLI give one diagnosis (a tree shows drivers only where it holds
            # them; --confirm cannot check it)
            fields["source"] = ROOT_SOURCE + root
        return cls(**fields)


# -- host-file helpers ---------------------------------------------------------------------


def _get_str(data: Mapping[str, Any], key: str, default: str, source: str) -> str:
    v = data.get(key, default)
    if not isinstance(v, str):
        raise HostFileError(
            f"{key!r} in {source} must be a string, got {v!r}",
            fix=f"quote the value of {key!r}",
        )
    return v


def _opt_str(data: Mapping[str, Any], key: str, where: str) -> str | None:
    v = data.get(key)
    if v is not None and not isinstance(v, str):
        raise HostFileError(
            f"{where} must be a string or null, got {v!r}", fix="quote the value, or use null"
        )
    return v


def _unique_keys(pairs: list[tuple[str, Any]], source: str) -> dict[str, Any]:
    """A JSON object whose keys repeat is refused: json keeps the last silently."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise HostFileError(
                f"host file {source!r} gives the key {key!r} twice in one object",
                "each key once per JSON object",
                f"keep one {key!r} (the reader would otherwise use the last silently)",
            )
        out[key] = value
    return out


def _pci_bus_id_ok(text: str) -> bool:
    """``domain:bus:device.function`` as sysfs and nvidia-smi write it: hexadecimal, a domain
    of 4 or 8 digits, device 00-1f, function 0-7 (no ``re``: host reading stays import-light)."""
    hexdigits = set("0123456789abcdefABCDEF")
    parts = text.split(":")
    if len(parts) != 3:
        return False
    domain, bus, rest = parts
    dev, dot, fn = rest.partition(".")
    return (
        len(domain) in (4, 8)
        and len(bus) == 2
        and len(dev) == 2
        and dot == "."
        and len(fn) == 1
        and set(domain + bus + dev) <= hexdigits
        and int(dev, 16) < 0x20
        and fn in "01234567"
    )


#: The largest byte count a host file may give (16 EiB): beyond it nothing can be computed
#: with it (a 4,000-digit size overflows every float conversion that shows it in GiB).
MAX_BYTES = 1 << 64


class _NotJson(ValueError):
    pass


def _no_constant(name: str) -> Any:
    # Python's json reads NaN and Infinity, which are not JSON: they would come back out of
    # `explain --json` as non-standard JSON
    raise _NotJson(f"it holds {name}, which is not a JSON number")


def _opt_uint(data: Mapping[str, Any], key: str, where: str) -> int | None:
    v = data.get(key)
    if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_BYTES):
        shown = repr(v) if len(repr(v)) < 40 else f"a number of {len(str(v))} digits"
        raise HostFileError(
            f"{where} must be a non-negative integer (bytes) up to 2**64 or null, got {shown}",
            fix=f"write {key} as a whole number of bytes, e.g. 2199023255552 for 2 TiB",
        )
    return v


def _check_torch_version(version: str, source: str) -> None:
    from hwbackends._base.versions import is_version

    if not is_version(version):  # else every version range treats it as no torch at all
        raise HostFileError(
            f"torch.version {version!r} in {source} is not a version",
            "a PEP 440 version such as 2.8.0+cu128 (torch.__version__)",
            "copy torch/version.py's __version__ into torch.version, or set torch to null",
        )


def _device_from_dict(d: Any, i: int, source: str) -> HostDevice:
    where = f"devices[{i}] in {source}"
    if not isinstance(d, Mapping):
        raise HostFileError(
            f"{where} must be an object, got {type(d).__name__}",
            'an object such as {"vendor": "nvidia", "pci_bus_id": "0000:41:00.0"}',
            "write each device as a JSON object",
        )
    vendor = d.get("vendor")
    if not isinstance(vendor, str) or not vendor or not vendor.replace("_", "").isalnum():
        raise HostFileError(
            f"{where} has vendor {vendor!r}",
            "the vendor key a backend declares (letters, digits and underscores; "
            "`hwbackends plugins` lists them)",
            "set the device's 'vendor' field",
        )
    for key in ("pci_bus_id", "uuid", "name", "arch", "pci_device_id"):
        _opt_str(d, key, f"{where}.{key}")
    mem = d.get("memory_bytes")
    if mem is not None and (
        not isinstance(mem, int) or isinstance(mem, bool) or not 0 <= mem <= MAX_BYTES
    ):
        raise HostFileError(
            f"{where}.memory_bytes must be a non-negative integer up to 2**64 or null",
            fix="write the size in bytes as a whole number, e.g. 85899345920 for 80 GiB",
        )
    bus = d.get("pci_bus_id")
    if isinstance(bus, str) and not _pci_bus_id_ok(bus):
        raise HostFileError(
            f"{where}.pci_bus_id is {bus!r}",
            "a PCI address domain:bus:device.function such as 0000:41:00.0 (hexadecimal)",
            "copy it from `nvidia-smi --query-gpu=pci.bus_id --format=csv` or "
            "/sys/bus/pci/devices, or use null",
        )
    return HostDevice(
        vendor=vendor.lower(),  # backends declare lower-case keys; "NVIDIA" means nvidia
        pci_bus_id=bus.lower() if isinstance(bus, str) else None,
        uuid=d.get("uuid"),
        name=d.get("name"),
        arch=d.get("arch"),
        memory_bytes=mem,
        pci_device_id=d.get("pci_device_id"),
        extra={k: v for k, v in d.items() if k not in _DEVICE_KEYS},
    )


# -- real-machine readers (files only) -----------------------------------------------------


def _check_fields(data: Mapping[str, Any], source: str) -> None:
    """Decides whether ``data`` is an object whose every field is a host field."""
    if not isinstance(data, Mapping):
        raise HostFileError(
            f"a host description must be a JSON object, got {type(data).__name__} (in {source})",
            'an object such as {"system": "Linux", "devices": []}',
            "wrap the fields in one JSON object; docs/hosts/ has examples",
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
        "python",
        "memory_bytes",
    }
    unknown = sorted(set(data) - known)
    if unknown:
        raise HostFileError(
            f"unknown host field(s) {', '.join(map(repr, unknown))} in {source}",
            f"only {', '.join(sorted(known))}",
            "remove or rename the field",
        )


def _torch_from(data: Mapping[str, Any], source: str) -> TorchBuild | None:
    """Decides the torch build the host describes (None: no torch)."""
    tdata = data.get("torch")
    if tdata is None:
        return None
    if not isinstance(tdata, Mapping) or not isinstance(tdata.get("version"), str):
        raise HostFileError(
            f"'torch' in {source} must be an object with a string 'version'",
            'for example {"version": "2.8.0+cu128", "cuda": "12.8", "hip": null}',
            "copy torch/version.py's __version__ into torch.version, or use null",
        )
    _check_torch_version(tdata["version"], source)
    return TorchBuild(
        version=tdata["version"],
        cuda=_opt_str(tdata, "cuda", f"torch.cuda in {source}"),
        hip=_opt_str(tdata, "hip", f"torch.hip in {source}"),
        xpu=_opt_str(tdata, "xpu", f"torch.xpu in {source}"),
    )


def _is_str_map(value: Any) -> bool:
    """Decides whether ``value`` maps strings to strings."""
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def _packages_from(
    data: Mapping[str, Any], torch: TorchBuild | None, source: str
) -> dict[str, str]:
    """Decides the installed distributions by normalised name (torch's build counts as one)."""
    pdata = data.get("packages", {})
    if not _is_str_map(pdata):
        raise HostFileError(
            f"'packages' in {source} must map distribution names to version strings",
            '{"torch": "2.8.0"}',
            "quote each version (pip list shows them)",
        )
    packages = {normalize_dist_name(k): v for k, v in pdata.items()}
    if torch is not None and "torch" not in packages:
        packages["torch"] = torch.version
    return packages


def _devices_from(data: Mapping[str, Any], source: str) -> tuple[HostDevice, ...]:
    """Decides the host's devices in physical order (at most MAX_HOST_DEVICES)."""
    ddata = data.get("devices", [])
    if not isinstance(ddata, list):
        raise HostFileError(
            f"'devices' in {source} must be a list",
            "a JSON array of device objects",
            "write devices as [{...}, {...}], or [] for none",
        )
    if len(ddata) > MAX_HOST_DEVICES:
        raise HostFileError(
            f"'devices' in {source} lists {len(ddata)} accelerators",
            f"at most {MAX_HOST_DEVICES} on one host",
            "describe one machine per host file",
        )
    return tuple(_device_from_dict(d, i, source) for i, d in enumerate(ddata))


def _fastest_first_from(data: Mapping[str, Any], source: str) -> tuple[int, ...] | None:
    """Decides the driver's FASTEST_FIRST permutation, when the host knows it."""
    ff = data.get("cuda_fastest_first")
    if ff is None:
        return None
    if (
        not isinstance(ff, list)
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in ff)
        or sorted(ff) != list(range(len(ff)))
    ):
        raise HostFileError(
            f"'cuda_fastest_first' in {source} must be a permutation of the CUDA "
            f"GPU positions, got {ff!r}",
            "a list holding each of 0..n-1 once, fastest GPU first",
            "list the nvidia-smi index of each GPU in FASTEST_FIRST order, or use null",
        )
    return tuple(ff)


def _env_from(data: Mapping[str, Any], source: str) -> dict[str, str] | None:
    """Decides the host's environment variables (None: not described)."""
    env = data.get("env")
    if env is None:
        return None
    if not _is_str_map(env):
        raise HostFileError(
            f"'env' in {source} must map variable names to string values",
            '{"CUDA_VISIBLE_DEVICES": "0,1"}; leave a variable out to mean unset',
            "quote each value",
        )
    return dict(env)


def _cpu_from(data: Mapping[str, Any], source: str) -> CpuInfo:
    """Decides the host's CPU: its model, logical core count and flags."""
    cdata = data.get("cpu", {})
    if not isinstance(cdata, Mapping):
        raise HostFileError(
            f"'cpu' in {source} must be an object",
            '{"flags": ["avx2"]}',
            "write cpu as an object, or leave it out",
        )
    flags = cdata.get("flags", [])
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise HostFileError(
            f"'cpu.flags' in {source} must be a list of strings",
            'flags as /proc/cpuinfo names them, e.g. ["avx2", "avx512_bf16"]',
            "write cpu.flags as a list of strings",
        )
    count = cdata.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise HostFileError(
            f"'cpu.count' in {source} must be a whole number, 0 or more",
            "the number of logical cores, e.g. 64 (0: not known)",
            "write cpu.count as a whole number, or 0 when it is not known",
        )
    return CpuInfo(model=str(cdata.get("model", "")), count=count, flags=frozenset(flags))


def _device_nodes_from(data: Mapping[str, Any], source: str) -> tuple[str, ...]:
    """Decides the host's /dev names, sorted, without the /dev/ prefix."""
    nodes = data.get("device_nodes", [])
    if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
        raise HostFileError(
            f"'device_nodes' in {source} must be a list of /dev names",
            'names such as ["/dev/nvidia0", "/dev/kfd"]',
            "write device_nodes as a list of strings, or leave it out",
        )
    return tuple(sorted(n.removeprefix("/dev/") for n in nodes))


def _drivers_from(data: Mapping[str, Any], source: str) -> dict[str, str]:
    """Decides the host's loaded drivers and their versions."""
    drivers = data.get("drivers", {})
    if not isinstance(drivers, Mapping) or not all(isinstance(v, str) for v in drivers.values()):
        raise HostFileError(
            f"'drivers' in {source} must map driver names to version strings",
            '{"nvidia": "550.54.15"}',
            "quote each version, as the driver's /sys/module/*/version file shows it",
        )
    return dict(drivers)


#: The largest simulated host file read; a real one is a few kilobytes.
MAX_HOST_FILE_BYTES = 4 << 20
#: The most accelerators a host description may list.
MAX_HOST_DEVICES = 1024


def _read_host_file(p: str) -> str:
    import stat

    if not p:
        raise HostFileError(
            "the host file path is empty",
            "a path to a JSON host file",
            "pass a path to --host / HWBACKENDS_HOST, or leave it out to read this machine",
        )
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise HostFileError(
            f"host file {p!r} does not exist",
            "a path to a JSON host file",
            "check the path given to --host or HWBACKENDS_HOST",
        ) from None
    except OSError as exc:
        raise HostFileError(
            f"host file {p!r} could not be opened ({exc.strerror or exc})",
            "a readable JSON host file",
            "check the path and its permissions",
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise HostFileError(
                f"host file {p!r} is {kind}",
                "a regular JSON file",
                "pass the path of a host file (see docs/hosts/ for examples)",
            )
        data = os.read(fd, MAX_HOST_FILE_BYTES + 1)
        while len(data) <= MAX_HOST_FILE_BYTES:
            more = os.read(fd, MAX_HOST_FILE_BYTES + 1 - len(data))
            if not more:
                break
            data += more
    except OSError as exc:
        raise HostFileError(
            f"host file {p!r} could not be read ({exc.strerror or exc})",
            "a readable JSON host file",
            "check the path and its permissions",
        ) from None
    finally:
        os.close(fd)
    if len(data) > MAX_HOST_FILE_BYTES:
        raise HostFileError(
            f"host file {p!r} is larger than {MAX_HOST_FILE_BYTES >> 20} MiB",
            "a host description of a few kilobytes",
            "pass the right file; `hwbackends env --json` shows the format",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HostFileError(
            f"host file {p!r} is not UTF-8 text (byte {exc.start})",
            "a JSON text file in UTF-8",
            "pass a JSON host file, not a binary one",
        ) from None
