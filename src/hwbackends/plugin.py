"""What a backend plugin builds on: ``BaseBackend`` and the shared fact helpers.

A plugin declares its facts as class attributes (vendor, device nodes, packages, collective)
and writes only what is really specific to its hardware. Device enumeration and the writer of
visibility variables come from :mod:`hwbackends.visibility`, so no plugin parses a variable.

Nothing here imports torch or a vendor SDK.
"""

from __future__ import annotations

from ._version import API_VERSION

# Plain constant instead of typing.TYPE_CHECKING: importing typing (and the dataclasses behind
# _protocol) costs more than the whole cached selection, and a backend class must be
# importable on that path. Type checkers treat this constant like typing.TYPE_CHECKING.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import ClassVar

    from ._confirm import Confirmation
    from ._host import Host, HostDevice
    from ._protocol import (
        AttentionOption,
        Capabilities,
        Device,
        Limitation,
        Probe,
        QuantSupport,
    )

__all__ = [
    "API_VERSION",
    "AttentionOption",
    "BaseBackend",
    "Capabilities",
    "Device",
    "Limitation",
    "Probe",
    "QuantSupport",
    "common_attention",
]

SDPA_SOURCE = (
    "transformers 5.x modeling_utils: sdpa is the default attn_implementation where "
    "torch.nn.functional.scaled_dot_product_attention runs "
    "(shared/reference/hf-integration.md §1.1)"
)


def __getattr__(name: str) -> object:
    # The protocol's data classes, re-exported for plugin authors, imported on first use.
    if name in ("AttentionOption", "Capabilities", "Device", "Limitation", "Probe", "QuantSupport"):
        from . import _protocol

        value = getattr(_protocol, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'hwbackends.plugin' has no attribute {name!r}")


def common_attention() -> tuple[AttentionOption, ...]:
    """The two implementations that work wherever torch runs: ``sdpa`` then ``eager``."""
    from ._protocol import AttentionOption

    return (
        AttentionOption("sdpa", source=SDPA_SOURCE, note="PyTorch scaled_dot_product_attention"),
        AttentionOption(
            "eager",
            source="transformers: the reference implementation in every model file",
            note="plain matmul + softmax; always loads",
        ),
    )


def _modelled(name: str) -> bool:
    """Whether hwbackends.visibility has a model of this backend's variables."""
    from ._errors import VisibilityError
    from .visibility import variables_for

    try:
        variables_for(name)
    except VisibilityError:
        return False
    return True


class BaseBackend:
    """Shared shape of a backend; subclass it and fill in the class attributes.

    The default ``probe`` answers the two questions from declared signals:

    * hardware: any host device of ``vendor``, or any ``/dev`` node starting with one of
      ``device_nodes``;
    * software: every name in ``packages`` installed (distribution names), and, when
      ``torch_flavour`` is set, a torch build of that flavour (``cuda``, ``rocm``, ``xpu``).

    Override ``probe`` for richer diagnoses, and ``capabilities`` for the fact tables.
    """

    name: ClassVar[str]
    device_type: ClassVar[str]
    api_version: ClassVar[int] = API_VERSION
    priority: ClassVar[int] = 50
    vendor: ClassVar[str | None] = None
    device_nodes: ClassVar[tuple[str, ...]] = ()
    packages: ClassVar[tuple[str, ...]] = ()
    torch_flavour: ClassVar[str | None] = None
    install_hint: ClassVar[str] = ""
    distributed_backend: ClassVar[str] = "gloo"

    # -- probe -----------------------------------------------------------------------------

    def hardware_evidence(self, host: Host) -> list[str]:
        """Lines of evidence that the hardware is present (empty: not present)."""
        ev: list[str] = []
        devs = host.devices_of(self.vendor) if self.vendor else ()
        if devs:
            names = sorted({d.name or d.pci_device_id or "unknown model" for d in devs})
            ev.append(f"{len(devs)} {self.vendor} device(s): {', '.join(names)}")
        nodes = [n for n in host.device_nodes if n.startswith(self.device_nodes)]
        if self.device_nodes and nodes:
            shown = ", ".join("/dev/" + n for n in nodes[:4]) + (" …" if len(nodes) > 4 else "")
            ev.append(f"device nodes {shown}")
        return ev

    def software_problem(self, host: Host) -> str | None:
        """Why the software is not ready, or None when it is."""
        for pkg in self.packages:
            if host.package(pkg) is None:
                return f"the {pkg} package is not installed"
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
        from ._protocol import Probe

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
        return self.name

    # -- devices and visibility ------------------------------------------------------------

    def host_devices(self, host: Host) -> tuple[HostDevice, ...]:
        """This backend's devices among the host's; override to drop a vendor's other
        functions (a BMC's VGA, crypto engines) or to add facts."""
        return host.devices_of(self.vendor) if self.vendor else ()

    def host_view(self, host: Host) -> Host:
        """The host as this backend's runtime enumerates it: the vendor's devices reduced to
        ``host_devices()``, so that visibility positions count only real accelerators."""
        if not self.vendor:
            return host
        own = self.host_devices(host)
        if own == host.devices_of(self.vendor):
            return host
        from dataclasses import replace

        others = tuple(d for d in host.devices if d.vendor != self.vendor)
        return replace(host, devices=others + own)

    def devices(self, host: Host, env: Mapping[str, str]) -> list[Device]:
        """Visible devices in logical order, resolved by the visibility layer.

        A backend the visibility layer has no model for (a new vendor's plugin) sees every
        device of its ``vendor`` in host order, or one device per matching ``/dev`` node.
        """
        from .visibility import explain_visibility

        host = self.host_view(host)
        own = self.host_devices(host)
        if not _modelled(self.name):
            if own:
                return [self.make_device(i, i, hd, None, None) for i, hd in enumerate(own)]
            nodes = [
                n
                for n in host.device_nodes
                if self.device_nodes and n.startswith(self.device_nodes)
            ]
            return [self.make_device(i, i, None, None, "/dev/" + n) for i, n in enumerate(nodes)]
        report = explain_visibility(self.name, env, host)
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
        """Turn one visible unit into a ``Device``; override to add vendor facts."""
        from ._protocol import Device

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
        return hd.arch

    def confirm(self, host: Host, env: Mapping[str, str], *, timeout: float = 60.0) -> Confirmation:
        """Opt-in: run the real runtime in a subprocess and compare it with ``devices()``.

        The only method that starts a device runtime, and only in a child process; see
        :func:`hwbackends._confirm.confirm`.
        """
        from ._confirm import confirm

        return confirm(self, host, env, timeout=timeout)

    def visibility_env(
        self,
        physical_indices: Sequence[int],
        *,
        host: Host | None = None,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        from ._host import Host
        from .visibility import visibility_env

        view = self.host_view(host) if host is not None else Host()
        return visibility_env(self.name, physical_indices, view, env)

    # -- capabilities ----------------------------------------------------------------------

    def capabilities(
        self, device: Device | None = None, *, host: Host | None = None
    ) -> Capabilities:
        """The facts for one device (or the backend's defaults); plugins override this."""
        from ._protocol import Capabilities

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
