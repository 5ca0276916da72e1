"""Vendor-neutral facts that GPU and accelerator plugins share, as mechanisms over their data.

Builders that turn a plugin's per-architecture rows into ``AttentionOption`` and
``QuantSupport`` values (so that a plugin's ``_attention.py`` / ``_quant.py`` stay data), the
flash-attention packages, and the catalogue of Transformers' quantization methods. Torch wheel
hints are in ``hwbackends._base.versions``; the installed Transformers' tables in
``hf_tables``. Nothing here imports torch, transformers or kernels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from hwbackends._base.protocol import AttentionOption, QuantSupport, SupportLevel
from hwbackends._base.record import field, frozen, mutable
from hwbackends._kit.hf_tables import HF_REF, TransformersTables, kernels_state

if TYPE_CHECKING:
    from hwbackends._machine.host import Host

__all__ = [
    "FLASH_PACKAGES",
    "QUANT_METHODS",
    "FlashRow",
    "QuantMethod",
    "QuantVerdict",
    "flash_attention_options",
    "quant_support",
]


# -- the installed Transformers, read as text ------------------------------------------------


# -- kernels -------------------------------------------------------------------------------


# -- attention -----------------------------------------------------------------------------

FLASH_PACKAGES: Mapping[int, str] = {2: "flash-attn", 3: "flash-attn-3", 4: "flash-attn-4"}
"""Flash-attention version to the distribution whose installation Transformers checks for it
(its dist-name test): ``{2: "flash-attn", 3: "flash-attn-3", 4: "flash-attn-4"}``."""
_FLASH_SOURCE = (
    "transformers modeling_flash_attention_utils.py FLASH_ATTENTION_COMPATIBILITY_MATRIX and "
    f"modeling_utils.py _check_and_adjust_attn_implementation ({HF_REF} §1.1-1.3)"
)


@frozen
class FlashRow:
    """Where one flash-attention version runs, for one vendor.

    ``package_archs`` are the architectures the version's own package supports, and
    ``hub_archs`` those the hub kernel that Transformers falls back to supports; None means
    every architecture, an empty set none. ``note`` and ``source`` describe the row.
    """

    version: int
    """The flash-attention version, 2, 3 or 4: the row is about ``flash_attention_<version>``."""
    package_archs: frozenset[str] | None
    """The architectures the version's own package supports; None: every one, empty: none."""
    hub_archs: frozenset[str] | None
    """The architectures the fallback hub kernel supports; None: every one, empty: none."""
    source: str
    """Where the row's facts come from; the options it gives cite it."""
    note: str = ""
    """Added to the notes of the options the row gives (``"Hopper only"``); ``""``: nothing."""
    package_note: str = ""
    """The whole note of the package option, instead of ``the <package> package (<note>)``;
    ``""``: that default."""

    def package_ok(self, arch: str | None) -> bool:
        """Whether the version's own package supports ``arch``.

        :param arch: the device's architecture (``sm_90``); None: unknown, which only a row
            for every architecture accepts.
        """
        return self.package_archs is None or (arch is not None and arch in self.package_archs)

    def hub_ok(self, arch: str | None) -> bool:
        """Whether the hub kernel Transformers falls back to supports ``arch``.

        :param arch: the device's architecture (``sm_90``); None: unknown, which only a row
            for every architecture accepts.
        """
        return self.hub_archs is None or (arch is not None and arch in self.hub_archs)


@mutable
class _AttentionBuild:
    options: list[AttentionOption] = field(default_factory=list)  # installed packages
    hub: list[AttentionOption] = field(default_factory=list)  # fetched from the Hub
    skipped: list[str] = field(default_factory=list)


def flash_attention_options(
    rows: Iterable[FlashRow],
    *,
    arch: str | None,
    capability: int | None,
    device_key: str,
    rocm: bool,
    host: Host | None,
    tables: TransformersTables,
) -> tuple[tuple[AttentionOption, ...], tuple[str, ...]]:
    """The flash-attention options that load on one device, best first, and why others don't.

    For each row (in the plugin's order of preference): the version's own package when the
    architecture supports it and it is installed; otherwise the hub kernel Transformers falls
    back to, when its repository ships builds for ``device_key``, the architecture supports
    it and the ``kernels`` integration is on. Installed packages come before hub kernels
    (which need the Hub or a cache at load time). Without a host nothing is known to be
    installed, so both forms are offered and the caller's loader decides.

    :param rows: the vendor's rows, in its order of preference.
    :param arch: the device's architecture (``sm_90``, ``gfx942``); None: unknown.
    :param capability: the compute capability as major*10+minor (90 for 9.0), held against
        Transformers' minimum major for each version; None: not checked.
    :param device_key: the device's ``kernels`` key (``cuda``, ``rocm``, ``xpu``): a hub
        kernel is offered only when its repository ships a build for it (or is not listed).
    :param rocm: whether torch is a ROCm build, whose fallback hub kernels differ.
    :param host: the machine whose installed packages decide; None: see above.
    :param tables: the Transformers tables that apply (``transformers_tables(host)``).
    :returns: ``(options, skipped)``: the ``AttentionOption`` values, and one line for each
        version left out saying why.
    """
    b = _AttentionBuild()
    kstate = kernels_state(host, tables)
    fallback = tables.fallback(rocm=rocm)
    for row in rows:
        name = f"flash_attention_{row.version}"
        pkg = FLASH_PACKAGES[row.version]
        min_major = tables.fa_min_major.get(row.version)
        if min_major is not None and capability is not None and capability // 10 < min_major:
            b.skipped.append(f"{name}: transformers requires capability >= {min_major}.0")
            continue
        src = f"{row.source}; {_FLASH_SOURCE}"
        installed = host is not None and host.package(pkg) is not None
        if row.package_ok(arch) and (installed or host is None):
            note = row.package_note or f"the {pkg} package" + (f" ({row.note})" if row.note else "")
            b.options.append(AttentionOption(name, source=src, packages=(pkg,), note=note))
            if host is not None:
                continue
        repo = fallback.get(name)
        devices = tables.kernel_devices.get(repo, (device_key,)) if repo else ()
        if repo is None or device_key not in devices:
            why = "not installed" if row.package_ok(arch) else f"not for {arch or 'this arch'}"
            b.skipped.append(
                f"{name}: {pkg} {why}, and Transformers' fallback {repo or '(none)'} has no "
                f"{device_key} build"
            )
            continue
        if not row.hub_ok(arch):
            pkg_why = "not installed" if row.package_ok(arch) else "not for this arch"
            b.skipped.append(
                f"{name}: {pkg} {pkg_why} and {repo} does not support {arch or 'an unknown arch'}"
            )
            continue
        if kstate.usable is False:
            b.skipped.append(
                f"{name}: hub fallback {repo} needs the kernels integration ({kstate.reason})"
            )
            continue
        log = (
            f"You do not have `flash_attn` installed, using `{repo}` from the `kernels` "
            "library instead!"
        )
        note = (
            f"{pkg} is not installed: Transformers falls back to the hub kernel {repo} and logs "
            f"{log!r}; config._attn_implementation then reads {repo!r}; needs Hub access or a "
            "cached copy"
        )
        if kstate.usable is None:
            note += f"; kernels compatibility unverified ({kstate.reason})"
        if row.note:
            note = f"{row.note}; {note}"
        b.hub.append(
            AttentionOption(
                name,
                source=f"{src}; {tables.origin}",
                packages=("kernels",),
                hub_kernel=repo,
                note=note,
            )
        )
    return (*b.options, *b.hub), tuple(b.skipped)


# -- quantization --------------------------------------------------------------------------


@frozen
class QuantMethod:
    """One Transformers quantization method: what it installs and what its gate checks."""

    method: str
    """The key ``Capabilities.quant()`` looks up, ``-`` written as ``_`` (``bitsandbytes``)."""
    packages: tuple[str, ...]
    """The distributions Transformers requires for it (``("gptqmodel", "accelerate")``)."""
    gate: str
    """What its ``validate_environment`` checks about the device, in words."""
    source: str
    """The Transformers file and release the facts were read from."""


def _qm(method: str, packages: tuple[str, ...], gate: str, path: str) -> QuantMethod:
    return QuantMethod(
        method, packages, gate,
        f"transformers 5.22 quantizers/{path} validate_environment ({HF_REF} §4.2)",
    )  # fmt: skip


QUANT_METHODS: Mapping[str, QuantMethod] = {
    q.method: q
    for q in (
        _qm("aqlm", ("aqlm", "accelerate"), "packages only", "quantizer_aqlm.py"),
        _qm("auto_round", ("auto-round",), "packages only", "quantizer_auto_round.py"),
        _qm("awq", ("gptqmodel", "accelerate"), "packages only", "quantizer_awq.py"),
        _qm("bitnet", ("accelerate",), "warns without a GPU", "quantizer_bitnet.py"),
        _qm("bitsandbytes", ("bitsandbytes", "accelerate"),
            "the device must be in both transformers' get_available_devices() and "
            "bitsandbytes' supported devices", "quantizer_bnb_4bit.py"),
        _qm("compressed_tensors", ("compressed-tensors",),
            "never rejects; FP8 matmul kernels only with capability >= 8.9, XPU or MPS",
            "quantizer_compressed_tensors.py"),
        _qm("eetq", ("kernels", "accelerate"), "compatible kernels and CUDA (RuntimeError)",
            "quantizer_eetq.py"),
        _qm("fbgemm_fp8", ("fbgemm-gpu", "accelerate"),
            "CUDA with capability >= 9.0, or XPU; ImportError otherwise",
            "quantizer_fbgemm_fp8.py"),
        _qm("fouroversix", ("fouroversix",), "packages only", "quantizer_fouroversix.py"),
        _qm("fp8", ("accelerate",),
            "CUDA or XPU; capability < 8.9 or no GPU: pre-quantized weights are dequantized",
            "quantizer_finegrained_fp8.py"),
        _qm("fp_quant", ("fp-quant",),
            "CUDA or XPU; real quantization needs qutlass (Blackwell)", "quantizer_fp_quant.py"),
        _qm("gemma", (),
            "never rejects (no validate_environment); plain PyTorch layers, pre-quantized Gemma "
            "checkpoints only", "quantizer_gemma.py"),
        _qm("gguf", ("gguf",),
            "never rejects; dequantizes unless kernels has a GGUF matmul kernel for the device",
            "quantizer_gguf.py"),
        _qm("gptq", ("optimum", "gptqmodel"), "without gptqmodel a GPU is required",
            "quantizer_gptq.py"),
        _qm("higgs", ("flute-kernel", "fast-hadamard-transform", "accelerate"),
            "CUDA only (NotImplementedError); device_map required", "quantizer_higgs.py"),
        _qm("hqq", ("hqq",), "no cpu/disk in device_map", "quantizer_hqq.py"),
        _qm("metal", ("kernels",), "MPS only", "quantizer_metal.py"),
        _qm("mxfp4", ("triton", "kernels", "accelerate"),
            "current accelerator cuda (capability >= 7.5, triton >= 3.4), xpu or cpu; "
            "pre-quantized weights are dequantized when anything is missing", "quantizer_mxfp4.py"),
        _qm("mxfp8", ("accelerate",), "the FP8 quantizer's gate (see fp8)",
            "quantizer_finegrained_fp8.py"),
        _qm("nvfp4", ("kernels",),
            "on-the-fly only; one CUDA device with capability >= 10.0, no offload",
            "quantizer_nvfp4.py"),
        _qm("quanto", ("optimum-quanto", "accelerate"), "packages only", "quantizer_quanto.py"),
        _qm("quark", ("amd-quark",), "packages only", "quantizer_quark.py"),
        _qm("sinq", ("sinq",), "one device; warns without CUDA", "quantizer_sinq.py"),
        _qm("spqr", ("spqr-quant", "accelerate"), "CUDA required (RuntimeError)",
            "quantizer_spqr.py"),
        _qm("torchao", ("torchao",), "packages only", "quantizer_torchao.py"),
        _qm("vptq", ("vptq", "accelerate"), "CUDA required (RuntimeError)", "quantizer_vptq.py"),
    )
}  # fmt: skip
"""Every method of Transformers' ``AUTO_QUANTIZER_MAPPING`` (``quantizers/auto.py``, 5.22.2)
by key, with the distributions it needs and what its ``validate_environment`` checks about
the device."""


@frozen
class QuantVerdict:
    """A vendor's verdict on one method: ``status`` on ``archs`` (None: every arch).

    A method may have several verdicts for different architectures: the first that matches
    the device's arch applies. When none matches, ``otherwise`` (status, reason) of the last
    one applies. ``packages`` replaces the catalogue's list where the vendor ships a
    dependency under another distribution name.
    """

    method: str
    """The method's key, as ``QUANT_METHODS`` spells it (``fp8``)."""
    status: SupportLevel
    """``"supported"``, ``"partial"``, ``"unsupported"`` or ``"unknown"`` on ``archs``."""
    reason: str
    """Why, in words: what users read next to the status."""
    source: str
    """Where the verdict comes from; the catalogue's source is added after it."""
    archs: frozenset[str] | None = None
    """The architectures the verdict applies to; None: every one."""
    otherwise: tuple[SupportLevel, str] | None = None
    """``(status, reason)`` on an architecture no verdict of the method lists (the method's
    last verdict's is used); None: ``"unsupported"`` there. An unknown arch gets ``"unknown"``."""
    min_arch: str | None = None
    """The minimum architecture the method needs (``sm_89``), in the answer and in the reason
    when the device's architecture is unknown; None: not given."""
    packages: tuple[str, ...] | None = None
    """The distributions it needs on this vendor's devices, instead of the catalogue's;
    None: the catalogue's."""


def _resolve(group: list[QuantVerdict], arch: str | None) -> QuantSupport:
    first = group[0]
    cat = QUANT_METHODS.get(first.method)
    for v in group:
        if v.archs is None or (arch is not None and arch in v.archs):
            status, reason, chosen = v.status, v.reason, v
            break
    else:
        chosen = group[-1]
        if arch is None:
            status = "unknown"
            reason = f"{chosen.reason} (needs {chosen.min_arch or 'a known arch'}; arch unknown)"
        elif chosen.otherwise is not None:
            status, reason = chosen.otherwise
        else:
            status, reason = "unsupported", f"not on {arch}: {chosen.reason}"
    packages = chosen.packages if chosen.packages is not None else (cat.packages if cat else ())
    source = f"{chosen.source}; {cat.source}" if cat else chosen.source
    return QuantSupport(first.method, status, reason, source, chosen.min_arch, packages)


def quant_support(verdicts: Sequence[QuantVerdict], arch: str | None) -> tuple[QuantSupport, ...]:
    """Resolve a vendor's verdicts for one architecture (None: unknown), sorted by method.

    :param verdicts: the vendor's verdicts, several per method allowed (the first whose
        ``archs`` match applies).
    :param arch: the device's architecture; None: unknown, which makes a verdict limited to
        some architectures ``"unknown"``.
    :returns: one ``QuantSupport`` per method, sorted by method.
    """
    groups: dict[str, list[QuantVerdict]] = {}
    for v in verdicts:
        groups.setdefault(v.method, []).append(v)
    return tuple(_resolve(groups[m], arch) for m in sorted(groups))
