"""What a backend plugin builds on: ``BaseBackend`` and the shared fact helpers.

A plugin declares its hardware as class attributes (PCI ids, ``/dev`` patterns, kernel
modules, packages, the visibility rule, the collective) and writes only what is really
specific to its hardware. The core reads the machine from these declarations, device
enumeration and the writer of visibility variables come from :mod:`hwbackends.visibility`,
so no plugin parses a variable or walks sysfs for the common case. The built-in plugins use
exactly these declarations; nothing in the core knows a vendor.

Nothing here imports torch or a vendor SDK.
"""

from __future__ import annotations

from hwbackends._base.files import match_node
from hwbackends._version import API_VERSION

TORCH_PREINSTALLED = "preinstalled"
"""``torch_source = TORCH_PREINSTALLED``: nothing to install, the vendor's torch comes with its
software stack and is the installed one (the same value as ``hwbackends._base.protocol``'s)."""

# Plain constant instead of typing.TYPE_CHECKING: importing typing (and the dataclasses behind
# _protocol) costs more than the whole cached selection, and a backend class must be
# importable on that path. Type checkers treat this constant like typing.TYPE_CHECKING.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, ClassVar

    from hwbackends._base.protocol import (
        AttentionOption,
        Capabilities,
        Device,
        DeviceSupport,
        Limitation,
        Probe,
        QuantSupport,
    )
    from hwbackends._base.record import field, frozen, replace
    from hwbackends._machine.host import Host, HostDevice
    from hwbackends._selection.confirm import Confirmation
    from hwbackends.visibility import VisibilityReport, VisibilityRule

__all__ = [
    "API_VERSION",
    "TORCH_PREINSTALLED",
    "AttentionOption",
    "BaseBackend",
    "Capabilities",
    "Device",
    "DeviceSupport",
    "Limitation",
    "Probe",
    "QuantSupport",
    "common_attention",
    "field",
    "frozen",
    "lazy",
    "list_dir",
    "match_node",
    "normalise_bus_id",
    "pci_id",
    "read_text",
    "replace",
]

SDPA_SOURCE = (
    "transformers 5.x modeling_utils: sdpa is the default attn_implementation where "
    "torch.nn.functional.scaled_dot_product_attention runs"
)


#: The protocol's data classes among ``__all__`` (its capitalised names but the base class).
_PROTOCOL = frozenset(
    n for n in __all__ if n[0].isupper() and n not in ("API_VERSION", "BaseBackend")
)


def __getattr__(name: str) -> object:
    # The protocol's data classes, re-exported for plugin authors, imported on first use.
    if name in _PROTOCOL:
        from hwbackends._base import protocol as _protocol

        value = getattr(_protocol, name)
        globals()[name] = value
        return value
    if name in ("field", "frozen", "replace"):
        # frozen typed records for a plugin's own fact tables, with no dataclasses import
        from hwbackends._base import record as _record

        value = getattr(_record, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'hwbackends.plugin' has no attribute {name!r}")


_UNSET: Any = object()


class _Lazy:
    """A class attribute read from ``module.name`` on first access (see :func:`lazy`)."""

    __slots__ = ("_module", "_name", "_value")

    def __init__(self, module: str, name: str) -> None:
        self._module, self._name, self._value = module, name, _UNSET

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        value = self._value
        if value is _UNSET:
            import sys

            __import__(self._module)
            value = self._value = getattr(sys.modules[self._module], self._name)
        return value

    def __repr__(self) -> str:
        return f"lazy({self._module!r}, {self._name!r})"


def lazy(module: str, name: str) -> Any:
    """Declare a class attribute whose value lives in a fact module, imported on first use.

    ``pci_models = lazy("hwbackends_acme._facts", "PCI_MODELS")`` keeps the fact tables out
    of ``hwbackends.current()`` on machines that have none of the vendor's hardware: the
    probe reads only what it needs, and a table is imported the first time it is read.

    :param module: the module that holds the value, imported on first access.
    :param name: the value's name in that module.
    """
    return _Lazy(module, name)


def common_attention() -> tuple[AttentionOption, ...]:
    """The two implementations that work wherever torch runs: ``sdpa`` then ``eager``."""
    from hwbackends._base.protocol import AttentionOption

    return (
        AttentionOption("sdpa", source=SDPA_SOURCE, note="PyTorch scaled_dot_product_attention"),
        AttentionOption(
            "eager",
            source="transformers: the reference implementation in every model file",
            note="plain matmul + softmax; always loads",
        ),
    )


def read_text(path: str, limit: int = 1 << 16) -> str | None:
    """A small text file (sysfs, procfs), at most ``limit`` characters; None when unreadable.

    For ``read_devices`` hooks: never raises, never blocks on a FIFO, never reads more than
    ``limit``.

    :param path: the file, under the ``root`` the hook was given.
    :param limit: the most bytes read (64 KiB by default).
    """
    from hwbackends._base.files import _read_text

    return _read_text(path, limit)


def list_dir(path: str) -> list[str]:
    """Sorted names in a folder, or ``[]`` when it cannot be listed.

    :param path: the folder, under the ``root`` a ``read_devices`` hook was given.
    """
    from hwbackends._base.files import _listdir

    return _listdir(path)


def pci_id(value: str | int | None) -> int | None:
    """A PCI vendor or device id as a number (``"0x1b06"``, ``" 0x1B06 "`` or ``6918``), or None
    for anything else: a host file or a sysfs file may hold anything there.

    :param value: a hexadecimal string (``0x`` optional, blanks ignored) or a number, in
        ``0..0xFFFF``.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if 0 <= value <= 0xFFFF else None
    if not isinstance(value, str) or len(value) > 10:  # "0x" + 4 hex digits, and blanks
        return None
    try:
        number = int(value.strip(), 16)
    except ValueError:
        return None
    return number if 0 <= number <= 0xFFFF else None


def normalise_bus_id(text: str) -> str | None:
    """A PCI address in sysfs's spelling (``0000:3b:00.0``) from any the kernel or tools write
    (``00000000:3B:00.0``), or None: give the devices your ``read_devices`` adds their bus id
    this way, and merge with ``found`` by it.

    :param text: a ``domain:bus:device.function`` address in either case, with up to 8
        domain digits.
    """
    from hwbackends._machine.evidence import normalise_bus_id as norm

    return norm(text)


class BaseBackend:
    """Shared shape of a backend; subclass it and fill in the class attributes.

    Declarations (class attributes) tell the core everything it needs to find the hardware,
    read its visibility variables and name the software:

    * ``name`` (the entry-point name), ``device_type`` (torch's device string), ``display``;
    * ``api_version``: the plugin API the class was written for (:data:`API_VERSION` of the
      hwbackends it was written against). Required, in the plugin's own class: BaseBackend
      carries none, so that a plugin is never loaded by a core speaking another version just
      because it inherited the core's value;
    * ``vendor``: the key of this hardware's devices in a ``Host`` (host files use it);
    * ``pci_vendor_ids``, optionally narrowed by ``pci_device_ids`` and ``pci_classes``: the
      PCI functions that are this hardware (``Host.from_system`` reads exactly these);
    * ``device_nodes``: ``/dev`` name patterns (``"acme{n}"``; see :func:`match_node`);
    * ``device_node_units``: the patterns among them of which each node is one device (a
      container given only ``/dev/acme0``, ``/dev/acme1`` has two devices);
    * ``evidence_sources``: names of the driver files ``read_devices`` finds devices in on
      its own (``"kfd"``); each device it adds says so in ``extra["evidence"]``;
    * ``driver_modules``: kernel modules whose ``/sys/module/<m>/version`` is the driver;
    * ``packages`` and ``torch_flavour``: the software that must be installed;
    * ``torch_builds`` / ``torch_distributions``: the vendor's own torch builds this backend
      claims (a stock backend of the same ``device_type`` steps aside on them), and
      ``torch_source``: where this backend's torch comes from (a wheel index, the vendor's
      instructions, or :data:`TORCH_PREINSTALLED`);
    * ``visibility``: the runtime's rule (:mod:`hwbackends.visibility`), e.g.
      ``IndexList("ACME_VISIBLE_DEVICES")``;
    * ``distributed_backend``, ``install_hint``, ``priority``;
    * ``replaces``: the name of a backend this one is meant to replace (``"cuda"``): when
      both are installed, the replaced one is disabled instead of the two clashing.

    The default ``probe`` answers the two questions from these: hardware when some host
    device is this backend's (:meth:`host_devices`) or a ``/dev`` name matches; software when
    every package is installed and, with ``torch_flavour`` set, torch is a build of that
    flavour (``cuda``, ``rocm``, ``xpu``). Override ``probe`` for richer diagnoses,
    :meth:`read_devices` when the driver's files give the runtime's order or names, and
    ``capabilities`` for the fact tables.
    """

    name: ClassVar[str]
    """The backend's name, the same as its entry-point name (``"acme"``): what
    ``HWBACKENDS_BACKEND`` takes and every report shows."""
    device_type: ClassVar[str]
    """Torch's device string (``"acme"`` for ``torch.device("acme:0")``)."""
    api_version: ClassVar[int]
    """The plugin API the class was written for (:data:`API_VERSION`); declared by each plugin
    class itself, never inherited from here: a class without it is refused at load."""
    priority: ClassVar[int] = 50
    """Order among available backends, highest first (``cpu`` is 0); a user's
    ``HWBACKENDS_BACKEND`` preference always overrides it."""
    display: ClassVar[str] = ""
    """The hardware's name in messages (``"Acme ATU"``); empty: ``name``."""
    vendor: ClassVar[str | None] = None
    """The key of this backend's devices in a ``Host`` and in host files'
    ``devices[].vendor``; None: the backend has no host devices."""
    pci_vendor_ids: ClassVar[tuple[int, ...]] = ()
    """PCI vendor ids of the hardware (``0x1F2A``): ``Host.from_system`` reads the PCI
    functions with these ids (narrowed by ``pci_device_ids`` and ``pci_classes``)."""
    pci_device_ids: ClassVar[tuple[int, ...]] = ()
    """Only these PCI device ids of the vendor count; empty: every device id of the vendor."""
    pci_classes: ClassVar[tuple[int, ...]] = ()
    """PCI classes that count: ``0x12`` matches the base class, ``0x0b40`` base class and
    subclass. Empty: the vendor's display controllers (``0x03``), processing accelerators
    (``0x12``) and co-processors (``0x0b40``), never its NICs, audio functions or bridges;
    declare classes to count others (``0x08`` system peripherals, ``0xff`` unassigned ...) or
    fewer."""
    device_nodes: ClassVar[tuple[str, ...]] = ()
    """``/dev`` names that show the driver: exact names, or patterns with one ``{n}`` standing
    for digits (``"acme{n}"``; see :func:`match_node`)."""
    device_node_units: ClassVar[tuple[str, ...]] = ()
    """The patterns among ``device_nodes`` of which each node is one device: with no other
    evidence of this backend's devices (a container given only the nodes), the core makes one
    device per node."""
    evidence_sources: ClassVar[tuple[str, ...]] = ()
    """Names of the sources ``read_devices`` reads devices from on its own (driver files,
    ``"kfd"``), for the report; the core's own are ``"pci"``, ``"drm"``, ``"accel"`` and
    ``"dev"``."""
    driver_modules: ClassVar[tuple[str, ...]] = ()
    """Kernel modules whose ``/sys/module/<m>/version`` is the driver version
    (``Host.drivers``); see :meth:`read_drivers`."""
    packages: ClassVar[tuple[str, ...]] = ()
    """Distributions that must all be installed for the software to be ready
    (``"torch-acme"``)."""
    torch_flavour: ClassVar[str | None] = None
    """The torch build the device needs (``"cuda"``, ``"rocm"``, ``"xpu"``); None: any build,
    as for an extension that runs on torch's stock CPU build."""
    torch_builds: ClassVar[tuple[str, ...]] = ()
    """Local version tags of the vendor's torch builds this backend claims (``"corex"``
    claims ``2.4.1+corex.4.3.0``): on such a torch, torch's ``device_type`` device is this
    backend's, so a stock backend of the same ``device_type`` (``cuda`` on a CUDA-compatible
    vendor's torch) steps aside, and both are named. Declared, the software is ready only on a
    claimed build (or ``torch_distributions``)."""
    torch_distributions: ClassVar[tuple[str, ...]] = ()
    """Distributions that provide the vendor's torch (installed, the installed torch is
    theirs): a claim like ``torch_builds``, for a build whose version carries no tag."""
    torch_source: ClassVar[str | None] = None
    """Where this backend's torch comes from, for the Install line and every fix: a wheel
    index URL (``"https://vendor.example/whl"``), the vendor's instructions as text (shown as
    they are), or :data:`TORCH_PREINSTALLED` (the vendor's torch is the installed one: nothing
    to install). None: PyTorch's own index for ``torch_flavour``. A backend that claims a
    build is never told to install another torch over it."""
    install_hint: ClassVar[str] = ""
    """The fix shown when the hardware is there and the software is not (``"pip install
    torch-acme"``); empty: none."""
    distributed_backend: ClassVar[str] = "gloo"
    """The ``torch.distributed`` collective (``"nccl"``, ``"gloo"``) the default
    :meth:`capabilities` reports."""
    slurm_gres: ClassVar[str | None] = None
    """The Slurm generic resource (GRES) the devices are scheduled as on a cluster: ``"gpu"``
    makes an sbatch plan request them with ``--gpus-per-node``, another name with
    ``--gres=NAME:N``; None leaves the request to the user (the plan says so). Slurm sets
    visibility variables for the ``gpu`` GRES only (``CUDA_VISIBLE_DEVICES``,
    ``ROCR_VISIBLE_DEVICES``, ``ZE_AFFINITY_MASK``, ``GPU_DEVICE_ORDINAL``: gres.conf(5),
    "Flags"); the plan claims no other."""
    systems: ClassVar[tuple[str, ...]] = ()
    """The operating systems (``platform.system()`` names) the runtime ships for; a host on
    another one cannot use the backend whatever hardware it has. Empty: no restriction."""
    visibility: ClassVar[VisibilityRule | None] = None
    """The runtime's visibility rule (``IndexList("ACME_VISIBLE_DEVICES")``; see
    ``hwbackends.visibility``); None: every device is visible and no selection can be pinned."""
    watch_paths: ClassVar[tuple[str, ...]] = ()
    """Files or folders (relative to the root) whose change means the machine must be read
    again: driver files that ``read_devices`` uses. The selection cache watches them."""
    replaces: ClassVar[str | None] = None
    """The backend this one replaces when both are installed (``"cuda"`` for a vendor's build
    of it): the replaced one is reported "disabled (replaced)" instead of a name clash."""

    # -- reading the real machine ------------------------------------------------------------

    def read_devices(
        self, root: str, found: tuple[HostDevice, ...], *, system: str, machine: str
    ) -> tuple[HostDevice, ...]:
        """The devices of this backend on the real machine, in the runtime's physical order.

        ``found`` holds the PCI functions this backend's declarations claim, in PCI bus order,
        with ``vendor``, ``pci_bus_id``, ``pci_device_id`` and ``extra["pci_class"]``. Override
        to add what only the driver's files say (model names, UUIDs, another order), or
        devices that are not on PCI. Read files under ``root`` only, with :func:`read_text`
        and :func:`list_dir`; never import an SDK or open a device. Called by
        ``Host.from_system``; an exception is reported as this plugin's fault and ``found``
        is used instead.

        :param root: the folder the machine is read under (``"/"``, or a copy of a machine's
            files).
        :param found: the PCI functions this backend claims, in PCI bus order.
        :param system: the operating system, as ``platform.system()`` names it (``"Linux"``).
        :param machine: the CPU architecture, as ``platform.machine()`` names it
            (``"x86_64"``).
        """
        return found

    read_devices.hwbackends_default = True  # type: ignore[attr-defined]

    def read_drivers(self, root: str) -> dict[str, str]:
        """Loaded driver versions: ``/sys/module/<m>/version`` of each ``driver_modules``; a
        module ``/proc/modules`` lists but ``/sys/module`` does not show is loaded, its
        version unknown (``""``).

        :param root: the folder the machine is read under (``"/"``, or a copy of a machine's
            files).
        """
        import os

        out: dict[str, str] = {}
        listed: set[str] | None = None
        for mod in self.driver_modules:
            d = os.path.join(root, "sys/module", mod)
            if os.path.isdir(d):
                out[mod] = (read_text(os.path.join(d, "version"), 256) or "").strip()
                continue
            if listed is None:  # "nvidia 56463360 34 nvidia_uvm,nvidia_modeset, Live 0x0"
                text = read_text(os.path.join(root, "proc/modules"), 1 << 20) or ""
                listed = {line.partition(" ")[0] for line in text.splitlines()}
            if mod in listed:
                out[mod] = ""
        return out

    read_drivers.hwbackends_default = True  # type: ignore[attr-defined]

    # -- probe -----------------------------------------------------------------------------

    def matching_nodes(self, host: Host) -> list[str]:
        """The host's ``/dev`` names that match ``device_nodes``.

        :param host: the machine.
        """
        pats = self.device_nodes
        return [n for n in host.device_nodes if any(match_node(p, n) for p in pats)]

    def hardware_evidence(self, host: Host) -> list[str]:
        """Lines of evidence that the hardware is present (empty: not present).

        :param host: the machine.
        """
        ev: list[str] = []
        devs = self.host_devices(host)
        if devs:
            names = sorted({d.name or d.pci_device_id or "unknown model" for d in devs})
            ev.append(f"{len(devs)} {self.display_name} device(s): {', '.join(names)}")
        nodes = self.matching_nodes(host)
        if nodes:
            shown = ", ".join("/dev/" + n for n in nodes[:4]) + (" …" if len(nodes) > 4 else "")
            ev.append(f"device nodes {shown}")
        return ev

    def software_problem(self, host: Host) -> str | None:
        """Why the software is not ready, or None when it is.

        :param host: the machine whose installed packages and torch build are checked.
        """
        for pkg in self.packages:
            if host.package(pkg) is None:
                return f"the {pkg} package is not installed"
        if self.torch_builds or self.torch_distributions:
            from hwbackends._base.protocol import claimed_torch

            version = host.torch.version if host.torch is not None else None
            if version is None:
                return "torch is not installed"
            if (
                claimed_torch(self.torch_builds, self.torch_distributions, version, host.packages)
                is None
            ):
                claimed = [f"+{t}" for t in self.torch_builds] + list(self.torch_distributions)
                return (
                    f"the installed torch {version} is not a build the {self.name} backend "
                    f"claims ({', '.join(claimed)})"
                )
            return None  # the vendor's build: its flavour is the vendor's business
        if self.torch_flavour is not None:
            if host.torch is None:
                return "torch is not installed"
            if host.torch.flavour != self.torch_flavour:
                return (
                    f"the installed torch {host.torch.version} is a {host.torch.flavour} build, "
                    f"not a {self.torch_flavour} build"
                )
        return None

    def probe(self, host: Host) -> Probe:
        """Is the hardware here, and is the software ready? Reads the ``Host`` only.

        :param host: the machine.
        """
        from hwbackends._base.protocol import Probe

        hw = self.hardware_evidence(host)
        problem = self.software_problem(host)
        evidence = tuple(hw)
        if not hw and problem is None:
            return Probe(
                self.name, False, True, f"no {self.display_name} hardware found", None, evidence
            )
        if not hw:
            return Probe(
                self.name,
                False,
                False,
                f"no {self.display_name} hardware found (and {problem})",
                None,
                evidence,
            )
        if problem is not None:
            return Probe(
                self.name,
                True,
                False,
                f"{self.display_name} hardware found, but {problem}",
                self.install_hint or None,
                evidence,
            )
        return Probe(self.name, True, True, f"{self.display_name} ready: {hw[0]}", None, evidence)

    @property
    def display_name(self) -> str:
        """The name shown in messages: ``display``, or ``name`` when none is declared."""
        return self.display or self.name

    # -- devices and visibility ------------------------------------------------------------

    def host_devices(self, host: Host) -> tuple[HostDevice, ...]:
        """This backend's devices among the host's, in physical order; override to drop a
        vendor's other functions (a BMC's VGA, crypto engines) or to add facts.

        :param host: the machine.
        """
        return host.devices_of(self.vendor) if self.vendor else ()

    def own_host(self, host: Host) -> Host:
        """The host as this backend's runtime enumerates it: only ``host_devices()``, and
        only this backend's drivers. The visibility rule reads this view.

        :param host: the whole machine.
        """
        from hwbackends._base.record import replace

        own = self.host_devices(host)
        drivers = {k: v for k, v in host.drivers.items() if k in self.driver_modules}
        if own == host.devices and drivers == dict(host.drivers):
            return host
        return replace(host, devices=own, drivers=drivers)

    def explain_visibility(self, env: Mapping[str, str], host: Host) -> VisibilityReport:
        """How this backend's runtime resolves ``env`` on ``host``, step by step.

        :param env: the environment whose visibility variables are read.
        :param host: the machine whose devices they number.
        """
        from hwbackends.visibility import explain_visibility

        return explain_visibility(self, env, host)

    def devices(self, host: Host, env: Mapping[str, str]) -> list[Device]:
        """Visible devices in logical order, resolved by the visibility layer.

        With ``visibility`` undeclared every device is visible in host order (and no
        selection can be pinned); with no host device, one device per matching ``/dev``
        name.

        :param host: the machine.
        :param env: the environment whose visibility variables decide what is seen.
        """
        own = self.host_devices(host)
        if not own and self.visibility is None:
            nodes = self.matching_nodes(host)
            return [self.make_device(i, i, None, None, "/dev/" + n) for i, n in enumerate(nodes)]
        report = self.explain_visibility(env, host)
        out: list[Device] = []
        for unit in report.units:
            hd = own[unit.device_position] if 0 <= unit.device_position < len(own) else None
            out.append(
                self.make_device(
                    unit.logical_index, unit.physical_index, hd, unit.sub_index, unit.label
                )
            )
        return out

    def make_device(
        self,
        index: int,
        physical_index: int,
        hd: HostDevice | None,
        sub_index: int | None,
        label: str | None,
    ) -> Device:
        """Turn one visible unit into a ``Device``; override to add vendor facts.

        :param index: the logical index (torch's ``f"{device_type}:{index}"``).
        :param physical_index: the index in the runtime's physical enumeration.
        :param hd: the host device the unit belongs to; None when there is none (a unit made
            from a ``/dev`` name).
        :param sub_index: the MIG instance, tile or core within the device; None for a whole
            device.
        :param label: how the user or the runtime names the unit.
        """
        from hwbackends._base.protocol import Device

        return Device(
            backend=self.name,
            device_type=self.device_type,
            index=index,
            physical_index=physical_index,
            uuid=hd.uuid if hd else None,
            pci_bus_id=hd.pci_bus_id if hd else None,
            name=hd.name if hd else None,
            arch=self.arch_of(hd) if hd else None,
            memory_bytes=hd.memory_bytes if hd else None,
            sub_index=sub_index,
            label=label,
        )

    def arch_of(self, hd: HostDevice) -> str | None:
        """The architecture key of one host device (``sm_90``, ``gfx942``), or None.

        :param hd: one of :meth:`host_devices`.
        """
        return hd.arch

    def known_archs(self) -> tuple[str, ...] | None:
        """Every architecture key this backend's fact tables describe, or None (the default)
        when it keeps no such list. ``hwbackends env`` warns about a device whose arch is not
        among them: a typo in a host file, or hardware newer than the plugin, for which the
        capability answers are uncertain."""
        return None

    def confirm(self, host: Host, env: Mapping[str, str], *, timeout: float = 60.0) -> Confirmation:
        """Opt-in: run the real runtime in a subprocess and compare it with ``devices()``.

        The only method that starts a device runtime, and only in a child process. A runtime
        that cannot be asked (no torch, a crash, a timeout) gives ``ok=False`` with
        ``checked=False`` rather than an exception.

        :param host: the machine the prediction is made for.
        :param env: the environment to predict under; the child runs with it laid over this
            process's, with the backend's visibility variables exactly as in ``env``.
        :param timeout: seconds to wait for the child before it counts as timed out.
        """
        from hwbackends._selection.confirm import confirm

        return confirm(self, host, env, timeout=timeout)

    def visibility_env(
        self,
        physical_indices: Sequence[int],
        *,
        host: Host | None = None,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """Assignments that make exactly ``physical_indices`` visible, in that order.

        :param physical_indices: the devices to show, by ``Device.physical_index``.
        :param host: the machine whose devices the indices number; None: an empty ``Host()``.
        :param env: the environment the indices were read under, for runtimes that number
            devices differently by a setting; None: no such setting.
        :raises VisibilityError: when the runtime cannot express the selection.
        """
        from hwbackends._machine.host import Host
        from hwbackends.visibility import visibility_env

        return visibility_env(self, physical_indices, host if host is not None else Host(), env)

    def visibility_unset(self) -> tuple[str, ...]:
        """Variables to remove before applying :meth:`visibility_env`'s assignments."""
        from hwbackends.visibility import visibility_unset

        return visibility_unset(self)

    def visibility_variables(self) -> tuple[str, ...]:
        """Every variable this backend's runtime reads for visibility or order."""
        from hwbackends.visibility import variables_for

        return variables_for(self)

    # -- capabilities ----------------------------------------------------------------------

    def capabilities(
        self, device: Device | None = None, *, host: Host | None = None
    ) -> Capabilities:
        """The facts for one device (or the backend's defaults); plugins override this.

        The default states only ``float32``, fp32 training, :func:`common_attention` and
        ``distributed_backend``.

        :param device: the device (its ``arch`` is reported); None: the backend's defaults.
        :param host: the machine; the default ignores it.
        """
        from hwbackends._base.protocol import Capabilities

        return Capabilities(
            backend=self.name,
            device_type=self.device_type,
            arch=device.arch if device else None,
            dtypes=("float32",),
            training_precision="fp32",
            attention=common_attention(),
            distributed_backend=self.distributed_backend,
            sources={
                "dtypes": "hwbackends default: nothing is known about this backend",
                "training_precision": "hwbackends default: fp32 until the plugin states more",
            },
        )
