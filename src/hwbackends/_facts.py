"""Vendor-neutral fact helpers that GPU and accelerator plugins share.

What lives here is true for every hardware family, or is a *mechanism* over per-vendor data:

* torch wheel hints (which ``--index-url`` installs which torch build);
* the tables of the installed Transformers (flash-attention → hub-kernel fallbacks, the
  devices each hub kernel ships builds for, the default ``use_kernels`` layer mapping, the
  ``kernels`` versions Transformers accepts), read from its source files as text with
  :mod:`ast`, never imported; a sourced copy when they cannot be read;
* builders that turn a plugin's per-architecture rows into ``AttentionOption`` and
  ``QuantSupport`` values, so that a plugin's ``_attention.py`` / ``_quant.py`` stay data.

Nothing here imports torch, transformers or kernels. Reading the installed Transformers
touches three ``.py`` files once per process (cached), about a millisecond each.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ._protocol import AttentionOption, Limitation, QuantSupport, SupportLevel
from ._record import field, frozen, mutable
from ._versions import (
    TORCH_INDEXES,
    describes_drivers,
    release,
    torch_build_problem,
    torch_install_hint,
    version_in_range,
)

if TYPE_CHECKING:
    import ast

    from ._host import Host

__all__ = [
    "FLASH_PACKAGES",
    "HF_REF",
    "QUANT_METHODS",
    "TORCH_INDEXES",
    "USE_KERNELS_ADVICE",
    "FlashRow",
    "KernelsState",
    "QuantMethod",
    "QuantVerdict",
    "TransformersTables",
    "describes_drivers",
    "flash_attention_options",
    "kernel_layers",
    "kernels_state",
    "quant_support",
    "release",
    "torch_build_problem",
    "torch_install_hint",
    "transformers_tables",
    "version_in_range",
]

HF_REF = "docs/reference/hf-integration.md"


# -- the installed Transformers, read as text ------------------------------------------------

#: (device key, min capability, max capability) of one ``use_kernels`` mapping entry.
KernelTarget = tuple[str, int | None, int | None]


@frozen
class TransformersTables:
    """The device tables of one Transformers release and where they were read.

    ``origin`` says whether they were read from the installed files at run time or come from
    the sourced copy in this module (and why).
    """

    version: str | None
    origin: str
    read_at_runtime: bool
    fallback_cuda: Mapping[str, str]
    fallback_rocm: Mapping[str, str]
    kernel_devices: Mapping[str, tuple[str, ...]]
    fa_min_major: Mapping[int, int]
    kernels_range: tuple[str, str] | None
    kernel_mapping: Mapping[str, tuple[KernelTarget, ...]]
    installed: bool = True  # False when the host has no transformers at all
    # hub_kernels.is_kernel's pattern: what an ``attn_implementation`` hub id must look like
    hub_kernel_pattern: str = r"^[^/:]+/[^/:]+(?:@[^/:]+)?(?::[^/:]+)?$"
    # AttentionInterface._global_mapping's keys (every name registered at import), + "eager"
    attention_names: tuple[str, ...] = (
        "eager", "flash_attention_4", "flash_attention_3", "flash_attention_2",
        "flex_attention", "sdpa", "paged|eager",
    )  # fmt: skip

    def is_hub_kernel(self, name: str) -> bool:
        """Whether Transformers treats ``name`` as a hub kernel id (``org/repo[@rev][:fn]``)."""
        import re

        return re.search(self.hub_kernel_pattern, name) is not None

    def kernel_builds(self, repo_id: str) -> tuple[str, ...] | None:
        """The ``kernels`` device keys a hub attention repo ships builds for; None: unlisted,
        which Transformers treats as every device."""
        repo = repo_id.split(":", 1)[0].split("@", 1)[0]
        return self.kernel_devices.get(repo)

    def fallback(self, *, rocm: bool) -> Mapping[str, str]:
        """``FLASH_ATTN_KERNEL_FALLBACK`` as Transformers computes it on this torch build."""
        return self.fallback_rocm if rocm else self.fallback_cuda


_SOURCED_VERSION = "5.23.0"
_SOURCED_ORIGIN = f"sourced copy of transformers {_SOURCED_VERSION} tables ({HF_REF} §1.3, §2.2)"
_ALL_LAYERS_CUDA_XPU = (
    "FastGELU", "QuickGELU", "NewGELU", "SiLU", "GeLU", "GeluTanh", "RMSNormGated",
    "chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule", "chunk_kda",
    "fused_recurrent_kda", "causal_conv1d_fn", "causal_conv1d_update",
    "mamba_chunk_scan_combined", "mamba_split_conv1d_scan_combined", "mamba_inner_fn",
    "selective_scan_fn", "selective_state_update",
)  # fmt: skip


def _sourced_mapping() -> dict[str, tuple[KernelTarget, ...]]:
    """The default ``use_kernels`` mapping of transformers 5.23.0
    (docs/reference/hf-integration.md §2.2)."""
    m: dict[str, tuple[KernelTarget, ...]] = {
        "RMSNorm": tuple((d, None, None) for d in ("cuda", "rocm", "npu", "xpu", "mps")),
        "MegaBlocksMoeMLP": tuple((d, None, None) for d in ("cuda", "rocm", "xpu", "cpu")),
        "rotary_pos_emb": tuple((d, None, None) for d in ("cuda", "xpu", "rocm")),
        "MultiScaleDeformableAttention": (("cuda", None, None),),
        "EsmFold2TriangleMultiplication": (("cuda", None, None),),
        "Qwen3_5GatedDeltaNet": (("cuda", 121, 121), ("rocm", 115, 115)),
    }
    for name in ("SwiGLUMLP", "GeGLUMLP", "Linear", "ForCausalLMLoss"):
        m[name] = (("cuda", None, None),)
    for name in _ALL_LAYERS_CUDA_XPU:
        m[name] = (("cuda", None, None), ("xpu", None, None))
    return m


def _sourced(version: str | None, why: str, *, installed: bool) -> TransformersTables:
    return TransformersTables(
        version=version,
        origin=f"{_SOURCED_ORIGIN}; {why}",
        read_at_runtime=False,
        fallback_cuda={
            "flash_attention_2": "kernels-community/flash-attn2",
            "flash_attention_3": "kernels-community/vllm-flash-attn3",
            "flash_attention_4": "kernels-community/flash-attn4",
        },
        fallback_rocm={
            "flash_attention_2": "kernels-community/aiter-flash-attn",
            "flash_attention_3": "kernels-community/aiter-flash-attn",
            "flash_attention_4": "kernels-community/flash-attn4",
        },
        kernel_devices={
            "kernels-community/flash-attn2": ("cuda", "xpu"),
            "kernels-community/flash-attn3": ("cuda",),
            "kernels-community/vllm-flash-attn3": ("cuda",),
            "kernels-community/aiter-flash-attn": ("rocm",),
            "kernels-community/flash-attn4": ("cuda",),
            "kernels-community/metal-flash-sdpa": ("mps",),
        },
        fa_min_major={3: 8, 4: 9},
        # The kernels range is a property of one release: only trust it for that release.
        kernels_range=("0.18.2", "0.19") if version == _SOURCED_VERSION else None,
        kernel_mapping=_sourced_mapping(),
        installed=installed,
    )


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return None


def _local_transformers_dir() -> str | None:
    """The folder of the transformers package on ``sys.path``, found without importing it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("transformers")
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return locations[0] if locations else None


def _version_of(init_text: str) -> str | None:
    for line in init_text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip() == "__version__":
            return value.strip().strip("\"'")
    return None


def _const_str(node: ast.expr, rocm: bool) -> str:
    import ast

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.IfExp):
        test = node.test
        fn = test.func if isinstance(test, ast.Call) else None
        name = (
            fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
        )
        if name == "is_rocm_platform":
            return _const_str(node.body if rocm else node.orelse, rocm)
    raise ValueError(f"unexpected expression {ast.dump(node)[:80]}")


def _assignments(tree: ast.Module) -> dict[str, ast.expr]:
    import ast

    out: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                out[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            out[node.target.id] = node.value
    return out


def _parse_flash(text: str) -> tuple[dict[str, str], dict[str, str], dict[str, tuple[str, ...]],
                                     dict[int, int]]:  # fmt: skip
    """FLASH_ATTN_KERNEL_FALLBACK (both branches), _DEVICES and the matrix's min majors."""
    import ast

    assigned = _assignments(ast.parse(text))
    fb = assigned["FLASH_ATTN_KERNEL_FALLBACK"]
    if not isinstance(fb, ast.Dict):
        raise ValueError("FLASH_ATTN_KERNEL_FALLBACK is not a dict literal")
    keys = [_const_str(k, False) for k in fb.keys if k is not None]
    cuda = {k: _const_str(v, False) for k, v in zip(keys, fb.values, strict=True)}
    rocm = {k: _const_str(v, True) for k, v in zip(keys, fb.values, strict=True)}
    devices_raw = ast.literal_eval(assigned["FLASH_ATTN_KERNEL_DEVICES"])
    devices = {str(k): tuple(str(d) for d in v) for k, v in devices_raw.items()}
    matrix = assigned["FLASH_ATTENTION_COMPATIBILITY_MATRIX"]
    mins: dict[int, int] = {}
    if isinstance(matrix, ast.Dict):
        for k, v in zip(matrix.keys, matrix.values, strict=True):
            if not (isinstance(k, ast.Constant) and isinstance(k.value, int)):
                continue
            if isinstance(v, ast.Dict):
                for kk, vv in zip(v.keys, v.values, strict=True):
                    if (
                        isinstance(kk, ast.Constant)
                        and kk.value == "cuda_min_major_version"
                        and isinstance(vv, ast.Constant)
                        and isinstance(vv.value, int)
                    ):
                        mins[k.value] = vv.value
    return cuda, rocm, devices, mins


def _parse_kernels_range(text: str) -> tuple[str, str] | None:
    import ast

    assigned = _assignments(ast.parse(text))
    lo, hi = assigned.get("KERNELS_MIN_VERSION"), assigned.get("KERNELS_MAX_VERSION")
    if isinstance(lo, ast.Constant) and isinstance(hi, ast.Constant):
        return str(lo.value), str(hi.value)
    return None


def _kernel_target(key: ast.expr) -> KernelTarget | None:
    import ast

    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        return key.value, None, None
    if not isinstance(key, ast.Call):
        return None
    kw = {k.arg: k.value for k in key.keywords if k.arg}
    dev = kw.get("type") or (key.args[0] if key.args else None)
    if not (isinstance(dev, ast.Constant) and isinstance(dev.value, str)):
        return None
    lo = hi = None
    props = kw.get("properties")
    if isinstance(props, ast.Call):
        pk = {k.arg: k.value for k in props.keywords if k.arg}
        lo_node, hi_node = pk.get("min_capability"), pk.get("max_capability")
        if isinstance(lo_node, ast.Constant) and isinstance(lo_node.value, int):
            lo = lo_node.value
        if isinstance(hi_node, ast.Constant) and isinstance(hi_node.value, int):
            hi = hi_node.value
    return dev.value, lo, hi


def _parse_kernel_mapping(text: str) -> dict[str, tuple[KernelTarget, ...]]:
    """The layer -> device entries of ``_build_kernel_mapping()`` in hub_kernels.py."""
    import ast

    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == "_build_kernel_mapping":
            for stmt in node.body:
                value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
                if not isinstance(value, ast.Dict):
                    continue
                out: dict[str, tuple[KernelTarget, ...]] = {}
                for k, v in zip(value.keys, value.values, strict=True):
                    if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                        continue
                    if not isinstance(v, ast.Dict):
                        continue
                    targets = [t for t in map(_kernel_target, (x for x in v.keys if x)) if t]
                    out[k.value] = tuple(targets)
                if out:
                    return out
    raise ValueError("_build_kernel_mapping() holds no dict literal")


def _parse_hub_pattern(text: str) -> str:
    """The regular expression ``is_kernel()`` in hub_kernels.py matches hub ids against."""
    import ast

    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == "is_kernel":
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Constant)
                    and isinstance(sub.value, str)
                    and sub.value.startswith("^")
                ):
                    return sub.value
    raise ValueError("is_kernel() holds no pattern literal")


def _parse_attention_names(text: str) -> tuple[str, ...]:
    """``"eager"`` and the keys of ``AttentionInterface._global_mapping`` in modeling_utils.py.

    Only the class's dict literal is parsed (the whole 5,000-line module would cost ~50 ms).
    """
    import ast

    start = text.find("class AttentionInterface(")
    at = text.find("_global_mapping", start) if start >= 0 else -1
    brace = text.find("{", at) if at >= 0 else -1
    if brace < 0:
        raise ValueError("AttentionInterface._global_mapping not found")
    depth, end = 0, brace
    for end in range(brace, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            break
    node = ast.parse(text[brace : end + 1], mode="eval").body
    if not isinstance(node, ast.Dict):
        raise ValueError("AttentionInterface._global_mapping is not a dict literal")
    keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return ("eager", *keys)


_tables_cache: dict[str, TransformersTables] = {}


def _read_installed(base: str, version: str) -> TransformersTables:
    cached = _tables_cache.get(base)
    if cached is not None and cached.version == version:
        return cached
    paths = {
        "flash": os.path.join(base, "modeling_flash_attention_utils.py"),
        "import": os.path.join(base, "utils", "import_utils.py"),
        "hub": os.path.join(base, "integrations", "hub_kernels.py"),
    }
    texts = {k: _read(p) for k, p in paths.items()}
    try:
        if texts["flash"] is None or texts["import"] is None or texts["hub"] is None:
            missing = ", ".join(paths[k] for k, t in texts.items() if t is None)
            raise ValueError(f"cannot read {missing}")
        cuda, rocm, devices, mins = _parse_flash(texts["flash"])
        kernels_range = _parse_kernels_range(texts["import"])
        mapping = _parse_kernel_mapping(texts["hub"])
        pattern = _parse_hub_pattern(texts["hub"])
        names = _parse_attention_names(_read(os.path.join(base, "modeling_utils.py")) or "")
    except (ValueError, KeyError, SyntaxError, TypeError) as exc:
        tables = _sourced(version, f"the installed transformers {version} could not be read "
                          f"({exc})", installed=True)  # fmt: skip
    else:
        tables = TransformersTables(
            version=version,
            origin=(
                f"read at run time from the installed transformers {version} "
                "(modeling_flash_attention_utils.py FLASH_ATTN_KERNEL_FALLBACK / "
                "FLASH_ATTN_KERNEL_DEVICES / FLASH_ATTENTION_COMPATIBILITY_MATRIX, "
                "utils/import_utils.py KERNELS_MIN/MAX_VERSION, "
                "integrations/hub_kernels.py _build_kernel_mapping / is_kernel, "
                "modeling_utils.py AttentionInterface._global_mapping)"
            ),
            read_at_runtime=True,
            fallback_cuda=cuda,
            fallback_rocm=rocm,
            kernel_devices=devices,
            fa_min_major=mins,
            kernels_range=kernels_range,
            kernel_mapping=mapping,
            hub_kernel_pattern=pattern,
            attention_names=names,
        )
    _tables_cache[base] = tables
    return tables


def transformers_tables(host: Host | None) -> TransformersTables:
    """The Transformers tables that apply to ``host``.

    The installed copy (found on ``sys.path`` without importing it) is read when it is the
    Transformers of ``host``: always for the real machine (or no host), and for a simulated
    host that lists the same transformers version. Otherwise, or when the files cannot be
    parsed, the sourced copy is returned and ``origin`` says why.
    """
    base = _local_transformers_dir()
    init = _read(os.path.join(base, "__init__.py")) if base else None
    local = _version_of(init) if init else None
    wanted = local if host is None or not host.simulated else host.package("transformers")
    if wanted is None:
        return _sourced(None, "transformers is not installed on this host", installed=False)
    if base is None or local != wanted:
        why = (
            f"the host's transformers {wanted} is not the copy installed here "
            f"({local or 'none'}), so its files cannot be read"
        )
        return _sourced(wanted, why, installed=True)
    return _read_installed(base, wanted)


# -- kernels -------------------------------------------------------------------------------


@frozen
class KernelsState:
    """Whether Transformers' ``kernels`` integration is switched on for a host.

    ``usable`` is None when it cannot be told (a Transformers release whose accepted
    ``kernels`` range is not known here).
    """

    usable: bool | None
    reason: str


def kernels_state(host: Host | None, tables: TransformersTables) -> KernelsState:
    """``is_kernels_available()`` of the host's Transformers, decided from package versions."""
    if host is None:
        return KernelsState(None, "no host given: installed packages unknown")
    if not tables.installed:
        return KernelsState(False, "transformers is not installed")
    kv = host.package("kernels")
    if kv is None:
        return KernelsState(False, "the kernels package is not installed")
    if tables.kernels_range is None:
        return KernelsState(
            None, f"which kernels releases transformers {tables.version} accepts is not known here"
        )
    lo, hi = tables.kernels_range
    ok = version_in_range(kv, lo, hi)
    where = f"kernels {kv}, transformers {tables.version} accepts >={lo},<{hi}"
    if ok:
        return KernelsState(True, where)
    return KernelsState(False if ok is False else None, f"{where}: integration switched off")


def kernel_layers(
    device_key: str, capability: int | None, tables: TransformersTables
) -> tuple[str, ...]:
    """Layers that ``use_kernels=True`` maps for a ``kernels`` device key, sorted.

    ``capability`` (major*10+minor as torch reports it; gfx1151 is 115 on ROCm) filters the
    entries restricted to a capability range; None keeps only unrestricted entries.
    """
    out = []
    for layer, targets in tables.kernel_mapping.items():
        for dev, lo, hi in targets:
            if dev != device_key:
                continue
            if lo is None and hi is None:
                out.append(layer)
                break
            if (
                capability is not None
                and (lo is None or capability >= lo)
                and (hi is None or capability <= hi)
            ):
                out.append(layer)
                break
    return tuple(sorted(out))


#: Advice that holds for every device with hub kernels (no vendor claims a speed-up for all).
USE_KERNELS_ADVICE = Limitation(
    text=(
        "use_kernels=True swaps layers (RMSNorm, MLPs, rotary, MoE) for hub kernels: it helps "
        "prefill and large batches; for small-batch decoding measure before enabling it, the "
        "launch overhead can cancel the gain"
    ),
    source=(
        f"{HF_REF} §2.1-2.2 (what use_kernels replaces); the batch-size advice is hwbackends' "
        "own guidance, not a vendor benchmark"
    ),
)


# -- attention -----------------------------------------------------------------------------

#: flash-attention version -> the distribution Transformers checks for (its dist-name test).
FLASH_PACKAGES: Mapping[int, str] = {2: "flash-attn", 3: "flash-attn-3", 4: "flash-attn-4"}
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
    package_archs: frozenset[str] | None
    hub_archs: frozenset[str] | None
    source: str
    note: str = ""
    package_note: str = ""

    def package_ok(self, arch: str | None) -> bool:
        return self.package_archs is None or (arch is not None and arch in self.package_archs)

    def hub_ok(self, arch: str | None) -> bool:
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

    method: str  # the key ``Capabilities.quant()`` looks up (``-`` written as ``_``)
    packages: tuple[str, ...]
    gate: str
    source: str


def _qm(method: str, packages: tuple[str, ...], gate: str, path: str) -> QuantMethod:
    return QuantMethod(
        method, packages, gate,
        f"transformers 5.22 quantizers/{path} validate_environment ({HF_REF} §4.2)",
    )  # fmt: skip


#: Every method of ``AUTO_QUANTIZER_MAPPING`` (transformers/quantizers/auto.py, 5.22.2), with
#: the distributions it needs and what its ``validate_environment`` checks about the device.
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


@frozen
class QuantVerdict:
    """A vendor's verdict on one method: ``status`` on ``archs`` (None: every arch).

    A method may have several verdicts for different architectures: the first that matches
    the device's arch applies. When none matches, ``otherwise`` (status, reason) of the last
    one applies. ``packages`` replaces the catalogue's list where the vendor ships a
    dependency under another distribution name.
    """

    method: str
    status: SupportLevel
    reason: str
    source: str
    archs: frozenset[str] | None = None
    otherwise: tuple[SupportLevel, str] | None = None
    min_arch: str | None = None
    packages: tuple[str, ...] | None = None


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
    """Resolve a vendor's verdicts for one architecture (None: unknown), sorted by method."""
    groups: dict[str, list[QuantVerdict]] = {}
    for v in verdicts:
        groups.setdefault(v.method, []).append(v)
    return tuple(_resolve(groups[m], arch) for m in sorted(groups))
