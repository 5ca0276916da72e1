"""What a backend is: the ``Backend`` protocol and the plain data it returns.

Everything here is a frozen dataclass with ``to_dict()`` so that reports, the CLI's ``--json``
and the docs all show the same facts.
"""

from __future__ import annotations

from _collections_abc import Mapping  # collections.abc's classes, without importing collections

from hwbackends._base.guard import ResultError, plain
from hwbackends._base.record import field, frozen
from hwbackends._version import API_VERSION

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Literal

    from hwbackends._base.backend import Backend

    _T = Any
    Precision = Literal["bf16", "fp16", "fp32"]
    """A training precision: ``"bf16"`` or ``"fp16"`` mixed precision, or ``"fp32"`` (none)."""
    SupportLevel = Literal["supported", "partial", "unsupported", "unknown"]
    """How well a quantization method works on a device (``QuantSupport.status``):
    ``"supported"`` (loads and runs), ``"partial"`` (loads with the caveat its reason states),
    ``"unsupported"`` (refused before loading) or ``"unknown"`` (no data: a warning at load)."""


__all__ = [
    "API_VERSION",
    "TORCH_PREINSTALLED",
    "AttentionOption",
    "Backend",
    "Capabilities",
    "Device",
    "DeviceSupport",
    "Limitation",
    "Probe",
    "QuantSupport",
    "claimed_torch",
    "torch_source",
]

TORCH_PREINSTALLED = "preinstalled"
"""A ``torch_source`` that says there is nothing to install: the vendor's torch comes with
its software stack and is the installed one (no wheel index, no ``pip install torch``)."""


@frozen
class Device:
    """One device as this process will see it."""

    backend: str
    """Name of the backend that enumerated the device (``"cuda"``, ``"xpu"``)."""
    device_type: str
    """Torch's device string for it (``"cuda"``, ``"xla"``)."""
    index: int
    """Logical index: what torch calls ``f"{device_type}:{index}"`` in this process."""
    physical_index: int
    """Index in the runtime's physical enumeration, before visibility variables apply (see
    ``hwbackends.visibility``)."""
    uuid: str | None = None
    """The device's UUID as the driver reports it, or None when unknown."""
    pci_bus_id: str | None = None
    """PCI address (``"0000:3b:00.0"``), or None when unknown or not on PCI."""
    name: str | None = None
    """Product name (``"Intel Gaudi 2"``), or None when unknown."""
    arch: str | None = None
    """Architecture key the capability tables use (``"sm_90"``, ``"gfx942"``), or None."""
    memory_bytes: int | None = None
    """Device memory in bytes, or None when unknown."""
    sub_index: int | None = None
    """The MIG instance, tile or NeuronCore within its device; None for a whole device."""
    label: str | None = None
    """How the user or the runtime names this unit (a UUID, an index, a ``/dev`` path), or
    None."""

    @property
    def torch_device(self) -> str:
        """The string torch takes: ``"cuda:0"``, or ``"cpu"`` for the CPU (torch has one)."""
        return "cpu" if self.device_type == "cpu" else f"{self.device_type}:{self.index}"

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON values, with ``torch_device`` and without ``backend`` and
        ``device_type``."""
        return {
            "index": self.index,
            "physical_index": self.physical_index,
            "torch_device": self.torch_device,
            "uuid": self.uuid,
            "pci_bus_id": self.pci_bus_id,
            "name": self.name,
            "arch": self.arch,
            "memory_bytes": self.memory_bytes,
            "sub_index": self.sub_index,
            "label": self.label,
        }


@frozen
class Probe:
    """The answer to two questions: is the hardware here, and is the software ready for it?"""

    backend: str
    """Name of the backend that probed."""
    hardware_present: bool
    """Whether this backend's hardware is on the machine."""
    software_ready: bool
    """Whether the software it needs (packages, torch build) is installed."""
    reason: str
    """One sentence that explains both answers, shown in reports."""
    hint: str | None = None
    """The fix for what ``reason`` describes (an install command), or None when there is none."""
    evidence: tuple[str, ...] = ()
    """What was found, one line each (devices, ``/dev`` nodes, the software stack)."""

    @property
    def available(self) -> bool:
        """Whether the backend can be used: hardware present and software ready."""
        return self.hardware_present and self.software_ready

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON values, with ``available``."""
        return {
            "backend": self.backend,
            "available": self.available,
            "hardware_present": self.hardware_present,
            "software_ready": self.software_ready,
            "reason": self.reason,
            "hint": self.hint,
            "evidence": list(self.evidence),
        }


@frozen
class DeviceSupport:
    """What a backend says of one of its host devices: whether any torch build it knows runs
    it, from which wheel index, and the fix. Returned by a backend's optional
    ``device_support(host)`` hook, one per device of ``host_devices(host)``; a backend
    without the hook gets the same facts derived from its probe."""

    pci_bus_id: str | None
    """The device's PCI address as the host lists it, or None when it has none."""
    label: str
    """The device as the backend names it (``"NVIDIA Tesla P100 PCIe 16GB (sm_60, Pascal)"``)."""
    supported: bool | None
    """True: a torch build of this backend runs it; False: none does (too old, not a target of
    the vendor's stack); None: unknown (an architecture the backend's tables do not list)."""
    reason: str
    """Why, in one sentence, with its source: the wheels that have kernels for it, or that
    none has."""
    torch_index: str | None = None
    """The PyTorch wheel index that has kernels for it (and for the backend's other
    supported devices here), or None: the backend's default index, or a vendor's own
    install step."""
    torch_pin: str | None = None
    """The torch release line to install from that index (``"2.11"``) when the newest does
    not serve it, else None."""
    last_release: str | None = None
    """For an unsupported device: the last torch release that had kernels for it, if known."""
    fix: str | None = None
    """The one fix for this device where installing this backend's torch is not it (build
    torch from source, another driver), else None."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON values."""
        return {
            "pci_bus_id": self.pci_bus_id,
            "label": self.label,
            "supported": self.supported,
            "reason": self.reason,
            "torch_index": self.torch_index,
            "torch_pin": self.torch_pin,
            "last_release": self.last_release,
            "fix": self.fix,
        }


@frozen
class AttentionOption:
    """One ``attn_implementation`` value and what it needs to load on this device.

    ``name`` is the string given to Transformers. ``packages`` must all be installed;
    ``hub_kernel`` names a hub repository loaded through ``kernels`` instead of a package.
    """

    name: str
    """The ``attn_implementation`` value (``"sdpa"``, ``"flash_attention_2"``, a Hub repo id)."""
    source: str
    """Where the fact comes from (a document, or the code that decides it)."""
    packages: tuple[str, ...] = ()
    """Distributions that must all be installed for this option to load."""
    hub_kernel: str | None = None
    """Hub repository loaded through ``kernels`` (which must be usable here), or None."""
    note: str = ""
    """A short remark shown with the choice (``"PyTorch scaled_dot_product_attention"``)."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON values."""
        return {
            "name": self.name,
            "packages": list(self.packages),
            "hub_kernel": self.hub_kernel,
            "note": self.note,
            "source": self.source,
        }


@frozen
class QuantSupport:
    """Whether a quantization method works on a device: ``status`` with the reason, the
    minimum architecture and the packages it needs."""

    method: str
    """Transformers' name of the method, lower case with ``_`` for ``-`` (``"fbgemm_fp8"``)."""
    status: SupportLevel
    """``"supported"``, ``"partial"``, ``"unsupported"`` (refused before loading) or
    ``"unknown"`` (a warning at load); see ``hwbackends.facts.SupportLevel``."""
    reason: str
    """Why, in a sentence shown to the user with the status."""
    source: str
    """Where the fact comes from."""
    min_arch: str | None = None
    """The oldest architecture the method needs (``"sm_89"``), or None when none is stated."""
    packages: tuple[str, ...] = ()
    """Distributions the method needs; loading is refused while one is missing."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON values."""
        return {
            "method": self.method,
            "status": self.status,
            "reason": self.reason,
            "min_arch": self.min_arch,
            "packages": list(self.packages),
            "source": self.source,
        }


@frozen
class Limitation:
    """A known incompatibility, with what to do about it.

    ``report_to_exclude`` lists ``TrainingArguments.report_to`` integrations to drop.
    """

    text: str
    """The incompatibility and what to do about it, in a sentence."""
    source: str
    """Where the fact comes from."""
    report_to_exclude: tuple[str, ...] = ()
    """``report_to`` integrations (``"codecarbon"``) that ``hwbackends.accelerate`` drops from
    the training arguments on this device."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON values."""
        return {
            "text": self.text,
            "report_to_exclude": list(self.report_to_exclude),
            "source": self.source,
        }


@frozen
class Capabilities:
    """What a device can do, each fact with its source (``sources`` maps field → source)."""

    backend: str
    """Name of the backend that states these facts."""
    device_type: str
    """Torch's device string (``"cuda"``; ``"xla"`` where a stack names the device so)."""
    arch: str | None
    """Architecture key of the device (``"sm_90"``, ``"gfx942"``), or None when unknown."""
    dtypes: tuple[str, ...]
    """Torch dtype names the device runs (``"float32"``, ``"bfloat16"``, ``"float16"``)."""
    training_precision: Precision
    """Mixed precision for training: ``"bf16"``, ``"fp16"`` or ``"fp32"`` (none)."""
    attention: tuple[AttentionOption, ...]
    """``attn_implementation`` options, best first; the last entries always work."""
    distributed_backend: str
    """The ``torch.distributed`` collective (``"nccl"``, ``"gloo"``, ``"xccl"``)."""
    kernel_device: str | None = None
    """The ``kernels`` device key (hub kernels), or None when the device has none."""
    kernel_layers: tuple[str, ...] = ()
    """Layers that ``use_kernels=True`` maps to hub kernels for ``kernel_device``, sorted."""
    quantization: tuple[QuantSupport, ...] = ()
    """What the backend knows of each quantization method; see :meth:`quant`."""
    device_map_auto: bool = True
    """Whether Accelerate's ``device_map="auto"`` can see this device."""
    limitations: tuple[Limitation, ...] = ()
    """Known incompatibilities, each with what to do about it."""
    sources: Mapping[str, str] = field(default_factory=dict)
    """Where each scalar fact comes from: field name (``"training_precision"``) -> source."""
    inference_dtype: str | None = None
    """Dtype to load weights in for inference (``"bfloat16"``); None: follow
    ``training_precision`` (see :attr:`load_dtype`)."""
    refused_attention: Mapping[str, str] = field(default_factory=dict)
    """``attn_implementation`` names that cannot work on this device -> the plugin's reason and
    source; any name Transformers registers (``"flex_attention"``, ...) may be refused."""

    @property
    def load_dtype(self) -> str:
        """The torch dtype name to load weights in (``bfloat16``, ``float16``, ``float32``)."""
        if self.inference_dtype is not None:
            return self.inference_dtype
        return {"bf16": "bfloat16", "fp16": "float16"}.get(self.training_precision, "float32")

    def quant(self, method: str) -> QuantSupport:
        """What the backend knows of one quantization method; ``"unknown"`` when it lists none.

        :param method: Transformers' method name (``"bitsandbytes"``, ``"fbgemm-fp8"``), in
            any case and with ``-`` or ``_``.
        """
        key = method.lower().replace("-", "_")
        for q in self.quantization:
            if q.method == key:
                return q
        return QuantSupport(
            method=key,
            status="unknown",
            reason=f"the {self.backend} backend has no data on {method!r}",
            source="hwbackends: no fact recorded",
        )

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON values, with ``load_dtype``."""
        return {
            "backend": self.backend,
            "device_type": self.device_type,
            "arch": self.arch,
            "dtypes": list(self.dtypes),
            "training_precision": self.training_precision,
            "attention": [a.to_dict() for a in self.attention],
            "distributed_backend": self.distributed_backend,
            "kernel_device": self.kernel_device,
            "kernel_layers": list(self.kernel_layers),
            "quantization": [q.to_dict() for q in self.quantization],
            "device_map_auto": self.device_map_auto,
            "limitations": [lim.to_dict() for lim in self.limitations],
            "load_dtype": self.load_dtype,
            "sources": dict(self.sources),
            "refused_attention": dict(self.refused_attention),
        }


# -- a backend's torch: the builds it claims and where its torch comes from -----------------


def claimed_torch(
    builds: tuple[str, ...],
    distributions: tuple[str, ...],
    version: str | None,
    packages: Mapping[str, str],
) -> str | None:
    """How the installed torch is one of a backend's builds (``"torch 2.4.1+corex.4.3.0"``,
    ``"torch 2.1.0 (torch-acme 2.1.0 is installed)"``), or None when it is none of them.

    :param builds: local version tags the backend claims (``"corex"`` claims
        ``2.4.1+corex.4.3.0``; ``"das"`` claims ``2.1.0+das1.1``): the tag, then the end,
        or a character that is not a letter.
    :param distributions: distributions that provide the vendor's torch: one installed
        means the installed torch is theirs.
    :param version: the installed torch's ``__version__``; None: torch is not installed.
    :param packages: the installed distributions (normalised name -> version).
    """
    if version is None:
        return None
    local = version.partition("+")[2].lower()
    for tag in builds:
        t = tag.strip().lstrip("+").lower()
        if t and local.startswith(t) and not local[len(t) : len(t) + 1].isalpha():
            return f"torch {version}"
    from hwbackends._base.files import normalize_dist_name

    for dist in distributions:
        key = normalize_dist_name(dist.strip())
        if key and packages.get(key):
            return f"torch {version} ({key} {packages[key]} is installed)"
    return None


def torch_source(value: object, flavour: object) -> tuple[str, str]:
    """A backend's ``torch_source`` declaration read as ``(kind, text)``: ``("index", url)``
    (a wheel index), ``("preinstalled", "")`` (nothing to install: the vendor's torch is the
    installed one), ``("vendor", instructions)`` (the vendor's own words), or ``("stock",
    flavour)`` when none is declared (PyTorch's index of ``torch_flavour``; ``""``: none).

    :param value: the declaration (``BaseBackend.torch_source``).
    :param flavour: the backend's ``torch_flavour``.
    """
    if isinstance(value, str) and value.strip():
        text = value.strip()
        if text == TORCH_PREINSTALLED:
            return "preinstalled", ""
        if text.startswith(("https://", "http://")) and " " not in text:
            return "index", text
        return "vendor", text
    return "stock", flavour if isinstance(flavour, str) else ""


# -- checking what a plugin returns ----------------------------------------------------------
# A plugin's value is copied field by field into a fresh instance after each field's type is
# checked: the copy cannot change later (a property that raises or changes type on a second
# access), and a string "False" cannot make a backend available.


def _str(v: object) -> bool:
    return isinstance(v, str)


def _opt_str(v: object) -> bool:
    return v is None or isinstance(v, str)


def _int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _opt_int(v: object) -> bool:
    return v is None or _int(v)


def _bool(v: object) -> bool:
    return v is True or v is False


def _strs(v: object) -> bool:
    return isinstance(v, tuple) and all(isinstance(x, str) for x in v)


def _one_of(*allowed: str) -> Any:
    return lambda v: v in allowed and isinstance(v, str)


def _tuple_of(cls: type) -> Any:
    return lambda v: isinstance(v, tuple) and all(isinstance(x, cls) for x in v)


def _opt_bool(v: object) -> bool:
    return v is None or _bool(v)


def _str_map(v: object) -> bool:
    return isinstance(v, Mapping) and all(
        isinstance(k, str) and isinstance(x, str) for k, x in v.items()
    )


_SCHEMAS: dict[type, dict[str, tuple[Any, str]]] = {
    Probe: {
        "backend": (_str, "str"),
        "hardware_present": (_bool, "bool"),
        "software_ready": (_bool, "bool"),
        "reason": (_str, "str"),
        "hint": (_opt_str, "str or None"),
        "evidence": (_strs, "tuple of str"),
    },
    Device: {
        "backend": (_str, "str"),
        "device_type": (_str, "str"),
        "index": (_int, "int"),
        "physical_index": (_int, "int"),
        "uuid": (_opt_str, "str or None"),
        "pci_bus_id": (_opt_str, "str or None"),
        "name": (_opt_str, "str or None"),
        "arch": (_opt_str, "str or None"),
        "memory_bytes": (_opt_int, "int or None"),
        "sub_index": (_opt_int, "int or None"),
        "label": (_opt_str, "str or None"),
    },
    DeviceSupport: {
        "pci_bus_id": (_opt_str, "str or None"),
        "label": (_str, "str"),
        "supported": (_opt_bool, "bool or None"),
        "reason": (_str, "str"),
        "torch_index": (_opt_str, "str or None"),
        "torch_pin": (_opt_str, "str or None"),
        "last_release": (_opt_str, "str or None"),
        "fix": (_opt_str, "str or None"),
    },
    AttentionOption: {
        "name": (_str, "str"),
        "source": (_str, "str"),
        "packages": (_strs, "tuple of str"),
        "hub_kernel": (_opt_str, "str or None"),
        "note": (_str, "str"),
    },
    QuantSupport: {
        "method": (_str, "str"),
        "status": (_one_of("supported", "partial", "unsupported", "unknown"), "a SupportLevel"),
        "reason": (_str, "str"),
        "source": (_str, "str"),
        "min_arch": (_opt_str, "str or None"),
        "packages": (_strs, "tuple of str"),
    },
    Limitation: {
        "text": (_str, "str"),
        "source": (_str, "str"),
        "report_to_exclude": (_strs, "tuple of str"),
    },
    Capabilities: {
        "backend": (_str, "str"),
        "device_type": (_str, "str"),
        "arch": (_opt_str, "str or None"),
        "dtypes": (_strs, "tuple of str"),
        "training_precision": (_one_of("bf16", "fp16", "fp32"), "'bf16', 'fp16' or 'fp32'"),
        "attention": (_tuple_of(AttentionOption), "tuple of AttentionOption"),
        "distributed_backend": (_str, "str"),
        "kernel_device": (_opt_str, "str or None"),
        "kernel_layers": (_strs, "tuple of str"),
        "quantization": (_tuple_of(QuantSupport), "tuple of QuantSupport"),
        "device_map_auto": (_bool, "bool"),
        "limitations": (_tuple_of(Limitation), "tuple of Limitation"),
        "sources": (_str_map, "mapping of str to str"),
        "inference_dtype": (_opt_str, "str or None"),
        "refused_attention": (_str_map, "mapping of str to str"),
    },
}

_ELEMENTS = {"attention": AttentionOption, "quantization": QuantSupport, "limitations": Limitation}


def checked(value: object, cls: type[_T], what: str) -> _T:
    """A fresh ``cls`` with ``value``'s fields, each of the declared type; else ``ResultError``
    naming ``what`` (``"acme.probe()"``), the fields and the types expected."""
    if not isinstance(value, cls):
        raise ResultError(
            f"{what} returned {type(value).__name__}, expected hwbackends.{cls.__name__}"
        )
    fields: dict[str, Any] = {}
    bad: list[str] = []
    for name, (ok, expected) in _SCHEMAS[cls].items():
        v = getattr(value, name)
        if not ok(v):
            shown = repr(v)
            bad.append(f"{name}={shown[:40]} (expected {expected})")
            continue
        element = _ELEMENTS.get(name) if cls is Capabilities else None
        if element is not None:
            v = tuple(checked(x, element, what) for x in v)
        else:
            # an exact builtin copy: a str subclass's __format__/__str__ is plugin code and
            # must not leave the guard with the value
            v = plain(dict(v) if isinstance(v, Mapping) else v)
        fields[name] = v
    if bad:
        raise ResultError(
            f"{what} returned a {cls.__name__} with mistyped field(s): {'; '.join(bad)}"
        )
    return cls(**fields)


def __getattr__(name: str) -> object:
    # typing-heavy names load on first use: the selection path never needs them
    if name == "Backend":
        from hwbackends._base.backend import Backend

        return Backend
    if name in ("Precision", "SupportLevel"):
        from typing import Literal

        if name == "Precision":
            return Literal["bf16", "fp16", "fp32"]
        return Literal["supported", "partial", "unsupported", "unknown"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
