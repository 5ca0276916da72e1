"""What the accelerator plugins share: device-id tables, software stacks, the probe, facts.

The xpu, mps, neuron, tpu, hpu, npu, mlu and musa plugins subclass :class:`AcceleratorBackend`
and declare their facts as data: which PCI device ids are theirs (and what each is), which
``/dev`` nodes reveal the driver, which software stacks can drive the hardware (a package, a
torch build, the device string and collective that stack uses), and the per-architecture
precision rules. Everything that turns those declarations into a probe, a device list and a
``Capabilities`` lives here once.

Nothing here imports torch, transformers or a vendor SDK; it reads the ``Host`` only.
"""

from __future__ import annotations

from hwbackends._base.protocol import AttentionOption, Capabilities, Limitation, Probe, QuantSupport
from hwbackends._base.record import field, frozen, replace
from hwbackends.plugin import BaseBackend, common_attention

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, ClassVar

    from hwbackends._base.protocol import Device, Precision
    from hwbackends._machine.host import Host, HostDevice

__all__ = [
    "AcceleratorBackend",
    "ArchFacts",
    "PciModel",
    "Stack",
    "code_gated_quantization",
    "flash_attention_2",
    "hub_kernel_attention",
    "major_minor",
]

HF = "docs/reference/hf-integration.md"


# -- versions ------------------------------------------------------------------------------


def major_minor(version: str | None) -> tuple[int, int] | None:
    """``(major, minor)`` of a version string, or None when it has no such prefix.

    :param version: a version (``"2.8.0+cu128"`` gives ``(2, 8)``); None gives None.
    """
    from hwbackends._base.versions import release

    nums = release(version)
    return (nums[0], nums[1]) if len(nums) >= 2 else None


# -- declarative pieces --------------------------------------------------------------------


@frozen
class PciModel:
    """What one PCI device id is: a product name, the architecture key, and the source."""

    name: str
    """Product name (``"Intel Gaudi 2"``), given to devices the host lists without one."""
    arch: str
    """Architecture key (``"gaudi2"``), given to devices the host lists without one; the key
    of ``AcceleratorBackend.arch_facts``."""
    source: str
    """Where the id's meaning comes from (a driver's id table, a vendor document)."""


@frozen
class ArchFacts:
    """Data types and the recommended training precision of one architecture."""

    dtypes: tuple[str, ...]
    """Torch dtype names the architecture runs; ``Capabilities.dtypes``."""
    training_precision: Precision
    """``"bf16"``, ``"fp16"`` or ``"fp32"``; ``Capabilities.training_precision``."""
    source: str
    """Where both facts come from (their ``Capabilities.sources`` entry)."""


@frozen
class Stack:
    """One software stack that can drive the hardware, and what it calls things.

    The stack is usable when every distribution in ``packages`` is installed, the torch build
    has ``torch_flavour`` (when set), torch is at least ``min_torch`` (when set), torch's
    ``major.minor`` equals that of ``torch_matches`` (a companion package released per torch
    version), and the hardware's architectures are all in ``archs`` (when set).
    """

    label: str
    """The stack's name in reports (``"torch-xla (PyTorch/XLA)"``)."""
    device_type: str
    """Torch's device string under this stack (``"xla"``): the devices' and capabilities'
    ``device_type`` while it runs."""
    distributed_backend: str
    """The ``torch.distributed`` collective under this stack (``"xccl"``, ``"xla"``)."""
    source: str
    """Where ``device_type`` and ``distributed_backend`` come from (their sources entry)."""
    packages: tuple[str, ...] = ()
    """Distributions that must all be installed."""
    torch_flavour: str | None = None
    """The torch build the stack needs (``"xpu"``); None: any build."""
    min_torch: str | None = None
    """The oldest torch version the stack works with (``"2.7"``); None: any."""
    torch_matches: str | None = None
    """A companion distribution released per torch version (``"torch-xla"``), whose
    ``major.minor`` must equal torch's; None: no such check."""
    archs: frozenset[str] | None = None
    """The architecture keys the stack supports; None: all."""
    kernel_device: str | None = None
    """The ``kernels`` device key under this stack; None: no hub kernels."""
    device_map_auto: bool = True
    """Whether Accelerate's ``device_map="auto"`` sees the devices under this stack."""
    limitations: tuple[Limitation, ...] = ()
    """Limitations under this stack, reported after the backend's own."""

    def problem(self, host: Host, archs: frozenset[str]) -> str | None:
        """Why this stack cannot run here, or None when it can.

        :param host: the machine whose installed packages and torch are checked.
        :param archs: the architecture keys of the backend's devices there (empty: none).
        """
        from hwbackends._base.versions import torch_build_problem, version_in_range

        for pkg in self.packages:
            if host.package(pkg) is None:
                return f"the {pkg} package is not installed"
        tv = host.torch.version if host.torch is not None else host.package("torch")
        if (self.torch_flavour or self.min_torch or self.torch_matches) and tv is None:
            return "torch is not installed"
        if self.torch_flavour is not None:
            build = torch_build_problem(host, self.torch_flavour)
            if build is not None:
                return build[0]
        if self.min_torch is not None and version_in_range(tv, self.min_torch) is False:
            return f"{self.label} needs torch >= {self.min_torch}, but torch {tv} is installed"
        if self.torch_matches is not None:
            pv = host.package(self.torch_matches)
            want, have = major_minor(pv), major_minor(tv)
            if want is not None and have is not None and want != have:
                return (
                    f"{self.torch_matches} {pv} is built for torch {want[0]}.{want[1]}, but "
                    f"torch {tv} is installed"
                )
        if self.archs is not None:
            other = sorted(a for a in archs if a not in self.archs)
            if other:
                return (
                    f"{self.label} does not support {', '.join(other)} "
                    f"(it supports {', '.join(sorted(self.archs))})"
                )
        return None


# -- shared fact builders ------------------------------------------------------------------


def flash_attention_2(
    *, packages: tuple[str, ...] = (), hub_kernel: str | None = None, note: str, source: str
) -> AttentionOption:
    """``flash_attention_2`` as Transformers resolves it on a device of this family.

    :param packages: distributions that must be installed for it to load.
    :param hub_kernel: the Hub repository loaded through ``kernels`` instead, or None.
    :param note: a short remark shown with the choice.
    :param source: where the fact comes from.
    """
    return AttentionOption(
        "flash_attention_2", source=source, packages=packages, hub_kernel=hub_kernel, note=note
    )


def hub_kernel_attention(repo: str, *, note: str, source: str) -> AttentionOption:
    """An attention implementation loaded from the Hub through ``kernels`` by its repo id.

    :param repo: the Hub repository id, also the ``attn_implementation`` value.
    :param note: a short remark shown with the choice.
    :param source: where the fact comes from.
    """
    return AttentionOption(repo, source=source, packages=("kernels",), hub_kernel=repo, note=note)


# The devices each device-gated quantizer accepts (docs/reference/hf-integration.md §4.2); the
# gate text, packages and source of every method come from the core catalogue
# ``_facts.QUANT_METHODS``.
_DEVICE_GATES: Mapping[str, frozenset[str]] = {
    "eetq": frozenset({"cuda"}),
    "higgs": frozenset({"cuda"}),
    "spqr": frozenset({"cuda"}),
    "vptq": frozenset({"cuda"}),
    "nvfp4": frozenset({"cuda"}),
    "fbgemm_fp8": frozenset({"cuda", "xpu"}),
    "fp_quant": frozenset({"cuda", "xpu"}),
    "fp8": frozenset({"cuda", "xpu"}),
    "mxfp8": frozenset({"cuda", "xpu"}),
    "mxfp4": frozenset({"cuda", "xpu", "cpu"}),
    "metal": frozenset({"mps"}),
    # transformers/utils/__init__.py get_available_devices(): what bitsandbytes may serve
    "bitsandbytes": frozenset({"cpu", "cuda", "mps", "xpu", "npu", "hpu", "mlu", "musa"}),
}


def code_gated_quantization(device_type: str) -> tuple[QuantSupport, ...]:
    """What Transformers' quantizers themselves decide for a device type.

    A quantizer whose gate rejects the device is "unsupported"; one that accepts it still
    depends on its packages and on facts the gate does not know, so it stays "unknown"
    unless the plugin says more. GGUF never rejects but dequantizes: "partial".

    :param device_type: torch's device string (``"xpu"``) the quantizers' gates are asked about.
    :returns: the "unsupported" methods and GGUF's "partial"; methods the gates accept are
        left out.
    """
    from hwbackends._kit.hf_facts import QUANT_METHODS

    out: list[QuantSupport] = []
    for method, devices in _DEVICE_GATES.items():
        q = QUANT_METHODS[method]
        if device_type not in devices:
            why = f"its gate rejects {device_type}: {q.gate}"
            out.append(QuantSupport(method, "unsupported", why, q.source, packages=q.packages))
    gguf = QUANT_METHODS["gguf"]
    out.append(QuantSupport("gguf", "partial", gguf.gate, gguf.source, packages=gguf.packages))
    return tuple(out)


# -- the shared backend --------------------------------------------------------------------


_CONSULT: Any = object()  # "the declarations pass: ask the stacks"

#: Drivers that hold a PCI function back from its vendor's driver, whatever the vendor: what
#: each means and the fix (Linux Documentation/driver-api/vfio.rst; drivers/pci/pci-stub.c).
HELD_BY: Mapping[str, tuple[str, str]] = {
    "vfio-pci": (
        "which keeps it for a virtual machine's guest (Linux Documentation/driver-api/vfio.rst)",
        "use it in the guest it is passed to; for this machine, take its id out of the "
        "vfio-pci.ids= kernel option (or its driverctl override) and reboot, so that its "
        "vendor's driver takes it",
    ),
    "pci-stub": (
        "which keeps every driver off it (pci-stub.ids=, drivers/pci/pci-stub.c)",
        "take its id out of the pci-stub.ids= kernel option and reboot, so that its vendor's "
        "driver takes it",
    ),
}


def held_back(devices: Sequence[HostDevice]) -> tuple[str, str] | None:
    """``(problem, fix)`` when every one of ``devices`` is bound to a driver that holds it back
    from its vendor's (``HELD_BY``: ``vfio-pci``, ``pci-stub``); None when one is usable."""
    by: dict[str, list[str]] = {}
    for d in devices:
        drv = d.extra.get("driver")
        if isinstance(drv, str) and drv in HELD_BY:
            by.setdefault(drv, []).append(d.pci_bus_id or d.name or "a device")
    if not by or sum(map(len, by.values())) < len(devices):
        return None
    said = [f"{', '.join(where)} {'is' if len(where) == 1 else 'are'} bound to {drv}, "
            f"{HELD_BY[drv][0]}" for drv, where in by.items()]  # fmt: skip
    return "; ".join(said), "; ".join(dict.fromkeys(HELD_BY[drv][1] for drv in by))


class _KnownIds:
    """``pci_device_ids`` of a backend with ``only_known_ids``: its PCI table's keys."""

    def __get__(self, obj: object, owner: type) -> tuple[int, ...]:
        ids = tuple(sorted(int(k, 16) for k in owner.pci_models))  # type: ignore[attr-defined]
        type.__setattr__(owner, "pci_device_ids", ids)
        return ids


@frozen
class _Found:
    """The hardware and software found on one host, computed once per call."""

    devices: tuple[HostDevice, ...]
    evidence: tuple[str, ...]
    stack: Stack | None
    problem: str | None
    archs: frozenset[str] = field(default_factory=frozenset)


class AcceleratorBackend(BaseBackend):
    """``BaseBackend`` driven by declarations; see the module docstring.

    Subclasses set ``name``, ``device_type``, ``vendor``, ``display``, ``stacks`` (preference
    order), ``install_hint``, ``hardware_hint`` and the fact tables; they override a method
    only for something really specific to their hardware.
    """

    pci_models: ClassVar[Mapping[str, PciModel]] = {}
    """PCI device id (``"0x0bd5"``) -> :class:`PciModel`: the name and architecture of each."""
    only_known_ids: ClassVar[bool] = False
    """Drop the vendor's devices whose id is not in ``pci_models`` (the vendor id also covers
    NICs, VGA or crypto functions), and make the table's ids the ``pci_device_ids``
    declaration, so the machine reader keeps only these."""
    stacks: ClassVar[tuple[Stack, ...]] = ()
    """The software stacks that can drive the hardware, in preference order: the first that
    runs is used."""
    software_packages: ClassVar[tuple[str, ...]] = ()
    """Distributions of which at least one must be installed for any stack to run, where the
    stacks are alternatives (``torch-tpu`` or ``torch-xla``); empty: ``packages`` are all
    required."""
    hardware_hint: ClassVar[str] = ""
    """The probe's hint when no hardware is found (``"MPS needs macOS on an Apple Silicon
    (arm64) Mac"``); empty: none."""
    arch_facts: ClassVar[Mapping[str, ArchFacts]] = {}
    """Architecture key -> its dtypes and training precision; see :meth:`facts_for`."""
    default_facts: ClassVar[ArchFacts] = ArchFacts(
        ("float32",), "fp32", "hwbackends: nothing is known about this architecture"
    )
    """The facts of an architecture missing from ``arch_facts``, or unknown."""
    attention: ClassVar[tuple[AttentionOption, ...]] = common_attention()
    """The attention options, best first; see :meth:`attention_for`."""
    quantization: ClassVar[tuple[QuantSupport, ...]] = ()
    """The backend's quantization facts; each replaces :func:`code_gated_quantization`'s
    entry for its method."""
    limitations: ClassVar[tuple[Limitation, ...]] = ()
    """Limitations under every stack, reported before the running stack's own."""
    facts_sources: ClassVar[Mapping[str, str]] = {}
    """``Capabilities.sources`` entries that replace or add to the computed ones."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.only_known_ids and "pci_device_ids" not in cls.__dict__:
            # computed when the machine reader first meets the vendor's id: a declared fact
            # table (``lazy``) stays unimported on machines without that vendor's hardware
            cls.pci_device_ids = _KnownIds()  # type: ignore[assignment]

    # -- hardware ----------------------------------------------------------------------------

    def model_of(self, hd: HostDevice) -> PciModel | None:
        """The ``pci_models`` entry of a host device's PCI device id, or None.

        :param hd: a host device; its id is read in any case, with or without ``0x``.
        """
        did = (hd.pci_device_id or "").strip().lower()
        if did and not did.startswith("0x"):
            did = "0x" + did
        return self.pci_models.get(did)

    def accepts(self, hd: HostDevice) -> bool:
        """Whether a host device of ``vendor`` is one of this backend's accelerators.

        A device without a PCI id (a host file describing the accelerator directly) is kept.

        :param hd: a host device of ``vendor``.
        """
        if not self.only_known_ids or hd.pci_device_id is None:
            return True
        return self.model_of(hd) is not None

    def enrich(self, hd: HostDevice) -> HostDevice:
        """Fill in the name and architecture from the PCI id table where the host lacks them.

        :param hd: a host device of ``vendor``.
        """
        m = self.model_of(hd)
        if m is None or (hd.name and hd.arch):
            return hd
        return replace(hd, name=hd.name or m.name, arch=hd.arch or m.arch)

    def arch_of(self, hd: HostDevice) -> str | None:
        """The architecture key of one host device, completed by :meth:`enrich` (the PCI id
        table) as :meth:`host_devices` completes it: a bare PCI function gets the same key
        that ``devices()`` and the CLI show.

        :param hd: a host device of ``vendor``, completed or not.
        """
        return self.enrich(hd).arch

    def install_hint_for(self, archs: frozenset[str]) -> str:
        """The probe's hint when the hardware is here and the software is not: ``install_hint``
        (override where older hardware needs an older release than the current installer).

        :param archs: the architecture keys of the backend's devices here.
        """
        return self.install_hint

    def host_devices(self, host: Host) -> tuple[HostDevice, ...]:
        """The host's devices of ``vendor`` that :meth:`accepts`, completed by :meth:`enrich`.

        :param host: the machine.
        """
        if not self.vendor:
            return ()
        return tuple(self.enrich(d) for d in host.devices_of(self.vendor) if self.accepts(d))

    def archs(self, devices: tuple[HostDevice, ...]) -> frozenset[str]:
        """The architecture keys of ``devices`` (:meth:`arch_of`), the unknown left out.

        :param devices: host devices of this backend.
        """
        return frozenset(a for a in (self.arch_of(d) for d in devices) if a)

    # -- software ----------------------------------------------------------------------------

    def software_without_hardware(self, host: Host) -> Any:
        """Why the software is not ready, judged from declarations while no hardware is here:
        none of ``software_packages`` (alternatives) when declared, else a missing one of
        ``packages`` or the wrong ``torch_flavour``; each of these fails every stack. When
        the declarations pass, the stacks decide (their fact modules load only then):
        ``_CONSULT`` is returned.

        :param host: the machine whose installed packages and torch build are checked.
        """
        anyof = self.software_packages
        if anyof:
            if not any(host.package(p) is not None for p in anyof):
                return f"the {anyof[0]} package is not installed"
            return _CONSULT
        problem = BaseBackend.software_problem(self, host)
        return _CONSULT if problem is None else problem

    def extra_problem(self, host: Host) -> str | None:
        """A hardware-specific reason the software cannot run (override where needed).

        :param host: the machine.
        """
        return None

    def find(self, host: Host) -> _Found:
        """The hardware and software on ``host``, computed once: the devices, the evidence,
        the first of ``stacks`` that runs (or None), why the software cannot run (None when
        it can) and the devices' architectures.

        :param host: the machine.
        """
        devs = self.host_devices(host)
        archs = self.archs(devs)
        problems: list[str] = []
        chosen: Stack | None = None
        for st in self.stacks:
            why = st.problem(host, archs)
            if why is None:
                chosen = st
                break
            problems.append(why)
        problem = self.extra_problem(host)
        if chosen is None:
            problem = _best_problem(self.stacks, problems, host)
        return _Found(devs, tuple(self.hardware_evidence(host)), chosen, problem, archs)

    def stack_for(self, host: Host | None) -> Stack | None:
        """The stack that runs on ``host`` (None when none does or no host is given).

        :param host: the machine, or None.
        """
        if host is None:
            return None
        f = self.find(host)
        return f.stack if f.problem is None else None

    def probe(self, host: Host) -> Probe:
        """Is the hardware here, and does one of ``stacks`` run? Reads the ``Host`` only.

        Without hardware, the declared packages are judged first and the stacks only when
        they pass; the hint is then ``hardware_hint``.

        :param host: the machine.
        """
        if not self.hardware_evidence(host):
            # Nothing of this hardware here: the stacks (and the fact modules that declare
            # them) are not consulted; the declared packages say whether software is ready.
            quick = self.software_without_hardware(host)
            if quick is _CONSULT:
                # The declarations pass: the stacks decide. Not find(): its extra_problem hook
                # reads hardware facts (and their module), which mean nothing without hardware.
                found = [st.problem(host, frozenset()) for st in self.stacks]
                ready = any(why is None for why in found)
                whys = [why for why in found if why is not None]
                quick = None if ready else _best_problem(self.stacks, whys, host)
            problem = quick if isinstance(quick, str) else None
            why = f"no {self.display_name} hardware found"
            if problem:
                why += f" (and {problem})"
            return Probe(self.name, False, problem is None, why, self.hardware_hint or None, ())
        f = self.find(host)
        ready = f.stack is not None and f.problem is None
        sw = f"{f.stack.label}" if f.stack is not None else ""
        evidence = f.evidence + ((f"software: {sw}",) if sw else ())
        if not f.evidence:
            why = f"no {self.display_name} hardware found"
            if not ready and f.problem:
                why += f" (and {f.problem})"
            return Probe(self.name, False, ready, why, self.hardware_hint or None, evidence)
        held = held_back(self.host_devices(host))
        if held is not None:  # no software makes a device usable while it is held back
            why = f"{self.display_name} hardware found ({f.evidence[0]}), but {held[0]}"
            return Probe(self.name, True, False, why, held[1], evidence)
        if not ready:
            return Probe(
                self.name,
                True,
                False,
                f"{self.display_name} hardware found ({f.evidence[0]}), but {f.problem}",
                self.install_hint_for(f.archs) or None,
                evidence,
            )
        return Probe(
            self.name,
            True,
            True,
            f"{self.display_name} ready: {f.evidence[0]}; {sw}",
            None,
            evidence,
        )

    # -- devices -----------------------------------------------------------------------------

    def devices(self, host: Host, env: Mapping[str, str]) -> list[Device]:
        """The visible units, resolved by the visibility layer over this backend's devices,
        with the running stack's ``device_type``.

        :param host: the machine.
        :param env: the environment whose visibility variables decide what is seen.
        """
        devs = super().devices(host, env)
        stack = self.stack_for(host)
        if stack is None or stack.device_type == self.device_type:
            return devs
        return [replace(d, device_type=stack.device_type) for d in devs]

    # -- capabilities ------------------------------------------------------------------------

    @property
    def default_stack(self) -> Stack:
        """The stack described when none runs (or no host is given): the native one."""
        for st in self.stacks:
            if st.device_type == self.device_type:
                return st
        return self.stacks[0]

    def facts_for(self, arch: str | None, host: Host | None) -> ArchFacts:
        """Precision facts for one architecture (override for host-dependent rules).

        :param arch: the architecture key; None or one missing from ``arch_facts`` gives
            ``default_facts``.
        :param host: the machine, or None; the default ignores it.
        """
        return self.arch_facts.get(arch or "", self.default_facts)

    def attention_for(self, arch: str | None, stack: Stack) -> tuple[AttentionOption, ...]:
        """The attention options for one architecture under one stack: ``attention`` by
        default (override for rules that depend on either).

        :param arch: the architecture key, or None when unknown.
        :param stack: the stack the capabilities describe.
        """
        return self.attention

    def capabilities(
        self, device: Device | None = None, *, host: Host | None = None
    ) -> Capabilities:
        """The facts for one device from the declarations: those of the stack that runs on
        ``host`` (else ``default_stack``), :meth:`facts_for` and :meth:`attention_for` its
        architecture, the code-gated quantization with ``quantization`` over it, and the
        backend's and the stack's limitations.

        :param device: the device whose ``arch`` picks the facts; None: the first host
            device's, when ``host`` is given.
        :param host: the machine, which picks the stack; None: ``default_stack``.
        """
        stack = self.stack_for(host) or self.default_stack
        arch = device.arch if device is not None else None
        if arch is None and host is not None:
            own = self.host_devices(host)
            arch = self.arch_of(own[0]) if own else None
        facts = self.facts_for(arch, host)
        quant = {q.method: q for q in code_gated_quantization(stack.device_type)}
        quant.update({q.method: q for q in self.quantization})
        sources = {
            "dtypes": facts.source,
            "training_precision": facts.source,
            "device_type": stack.source,
            "distributed_backend": stack.source,
            "kernel_device": (
                f"kernels device keys cpu, cuda, rocm, mps, xpu, npu, neuron, tpu ({HF} §2.3); "
                f"{stack.label}"
            ),
            "device_map_auto": (
                f"accelerate utils/modeling.py get_max_memory ({HF} §3.2)"
                if stack.device_map_auto
                else f"accelerate get_max_memory has no {stack.device_type} branch ({HF} §3.1)"
            ),
        }
        sources.update(self.facts_sources)
        return Capabilities(
            backend=self.name,
            device_type=stack.device_type,
            arch=arch,
            dtypes=facts.dtypes,
            training_precision=facts.training_precision,
            attention=self.attention_for(arch, stack),
            distributed_backend=stack.distributed_backend,
            kernel_device=stack.kernel_device,
            quantization=tuple(quant[k] for k in sorted(quant)),
            device_map_auto=stack.device_map_auto,
            limitations=self.limitations + stack.limitations,
            sources=sources,
        )


def _best_problem(stacks: tuple[Stack, ...], problems: list[str], host: Host) -> str:
    """The most useful reason no stack runs: that of the first stack whose packages are there."""
    for st, why in zip(stacks, problems, strict=False):
        if all(host.package(p) is not None for p in st.packages):
            return why
    return problems[0] if problems else "no software stack is declared"
