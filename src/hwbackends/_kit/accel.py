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
    from collections.abc import Mapping
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
    """``(major, minor)`` of a version string, or None when it has no such prefix."""
    from hwbackends._base.versions import release

    nums = release(version)
    return (nums[0], nums[1]) if len(nums) >= 2 else None


# -- declarative pieces --------------------------------------------------------------------


@frozen
class PciModel:
    """What one PCI device id is: a product name, the architecture key, and the source."""

    name: str
    arch: str
    source: str


@frozen
class ArchFacts:
    """Data types and the recommended training precision of one architecture."""

    dtypes: tuple[str, ...]
    training_precision: Precision
    source: str


@frozen
class Stack:
    """One software stack that can drive the hardware, and what it calls things.

    The stack is usable when every distribution in ``packages`` is installed, the torch build
    has ``torch_flavour`` (when set), torch is at least ``min_torch`` (when set), torch's
    ``major.minor`` equals that of ``torch_matches`` (a companion package released per torch
    version), and the hardware's architectures are all in ``archs`` (when set).
    """

    label: str
    device_type: str
    distributed_backend: str
    source: str
    packages: tuple[str, ...] = ()
    torch_flavour: str | None = None
    min_torch: str | None = None
    torch_matches: str | None = None
    archs: frozenset[str] | None = None
    kernel_device: str | None = None
    device_map_auto: bool = True
    limitations: tuple[Limitation, ...] = ()

    def problem(self, host: Host, archs: frozenset[str]) -> str | None:
        """Why this stack cannot run here, or None when it can."""
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
    """``flash_attention_2`` as Transformers resolves it on a device of this family."""
    return AttentionOption(
        "flash_attention_2", source=source, packages=packages, hub_kernel=hub_kernel, note=note
    )


def hub_kernel_attention(repo: str, *, note: str, source: str) -> AttentionOption:
    """An attention implementation loaded from the Hub through ``kernels`` by its repo id."""
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

    # PCI device id ("0x0bd5") -> model; ``only_known_ids`` drops the vendor's other devices
    # (the vendor id also covers NICs, VGA or crypto functions) and makes the table the
    # ``pci_device_ids`` declaration, so the machine reader keeps only these.
    pci_models: ClassVar[Mapping[str, PciModel]] = {}
    only_known_ids: ClassVar[bool] = False
    stacks: ClassVar[tuple[Stack, ...]] = ()
    # Distributions of which at least one must be installed for any stack to run, where the
    # stacks are alternatives (torch-tpu or torch-xla); empty: ``packages`` are all required.
    software_packages: ClassVar[tuple[str, ...]] = ()
    hardware_hint: ClassVar[str] = ""
    arch_facts: ClassVar[Mapping[str, ArchFacts]] = {}
    default_facts: ClassVar[ArchFacts] = ArchFacts(
        ("float32",), "fp32", "hwbackends: nothing is known about this architecture"
    )
    attention: ClassVar[tuple[AttentionOption, ...]] = common_attention()
    quantization: ClassVar[tuple[QuantSupport, ...]] = ()
    limitations: ClassVar[tuple[Limitation, ...]] = ()
    facts_sources: ClassVar[Mapping[str, str]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.only_known_ids and "pci_device_ids" not in cls.__dict__:
            # computed when the machine reader first meets the vendor's id: a declared fact
            # table (``lazy``) stays unimported on machines without that vendor's hardware
            cls.pci_device_ids = _KnownIds()  # type: ignore[assignment]

    # -- hardware ----------------------------------------------------------------------------

    def model_of(self, hd: HostDevice) -> PciModel | None:
        did = (hd.pci_device_id or "").strip().lower()
        if did and not did.startswith("0x"):
            did = "0x" + did
        return self.pci_models.get(did)

    def accepts(self, hd: HostDevice) -> bool:
        """Whether a host device of ``vendor`` is one of this backend's accelerators.

        A device without a PCI id (a host file describing the accelerator directly) is kept.
        """
        if not self.only_known_ids or hd.pci_device_id is None:
            return True
        return self.model_of(hd) is not None

    def enrich(self, hd: HostDevice) -> HostDevice:
        """Fill in the name and architecture from the PCI id table where the host lacks them."""
        m = self.model_of(hd)
        if m is None or (hd.name and hd.arch):
            return hd
        return replace(hd, name=hd.name or m.name, arch=hd.arch or m.arch)

    def host_devices(self, host: Host) -> tuple[HostDevice, ...]:
        if not self.vendor:
            return ()
        return tuple(self.enrich(d) for d in host.devices_of(self.vendor) if self.accepts(d))

    def archs(self, devices: tuple[HostDevice, ...]) -> frozenset[str]:
        return frozenset(a for a in (self.arch_of(d) for d in devices) if a)

    # -- software ----------------------------------------------------------------------------

    def software_without_hardware(self, host: Host) -> Any:
        """Why the software is not ready, judged from declarations while no hardware is here:
        none of ``software_packages`` (alternatives) when declared, else a missing one of
        ``packages`` or the wrong ``torch_flavour``; each of these fails every stack. When
        the declarations pass, the stacks decide (their fact modules load only then):
        ``_CONSULT`` is returned."""
        anyof = self.software_packages
        if anyof:
            if not any(host.package(p) is not None for p in anyof):
                return f"the {anyof[0]} package is not installed"
            return _CONSULT
        problem = BaseBackend.software_problem(self, host)
        return _CONSULT if problem is None else problem

    def extra_problem(self, host: Host) -> str | None:
        """A hardware-specific reason the software cannot run (override where needed)."""
        return None

    def find(self, host: Host) -> _Found:
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
        """The stack that runs on ``host`` (None when none does or no host is given)."""
        if host is None:
            return None
        f = self.find(host)
        return f.stack if f.problem is None else None

    def probe(self, host: Host) -> Probe:
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
        if not ready:
            return Probe(
                self.name,
                True,
                False,
                f"{self.display_name} hardware found ({f.evidence[0]}), but {f.problem}",
                self.install_hint or None,
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
        """The visible units, resolved by the visibility layer over this backend's devices."""
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
        """Precision facts for one architecture (override for host-dependent rules)."""
        return self.arch_facts.get(arch or "", self.default_facts)

    def attention_for(self, arch: str | None, stack: Stack) -> tuple[AttentionOption, ...]:
        return self.attention

    def capabilities(
        self, device: Device | None = None, *, host: Host | None = None
    ) -> Capabilities:
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
