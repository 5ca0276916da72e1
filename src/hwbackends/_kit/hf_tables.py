"""The tables of the installed Transformers and ``kernels``, read from source as text.

Flash-attention → hub-kernel fallbacks, the devices each hub kernel ships builds for, the
default ``use_kernels`` layer mapping, the ``kernels`` versions Transformers accepts and the
attention names it registers: read from Transformers' own ``.py`` files with :mod:`ast`,
never imported, once per process (about a millisecond each); a sourced copy of a known
release when they cannot be read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from hwbackends._base.protocol import Limitation
from hwbackends._base.record import frozen
from hwbackends._base.versions import version_in_range

if TYPE_CHECKING:
    import ast

    from hwbackends._machine.host import Host

__all__ = [
    "HF_REF",
    "USE_KERNELS_ADVICE",
    "KernelsState",
    "TransformersTables",
    "kernel_layers",
    "kernels_state",
    "transformers_tables",
]


HF_REF = "docs/reference/hf-integration.md"
"""The reference page that hwbackends' Hugging Face facts cite, as sources write it
(``f"{HF_REF} §4.2"``)."""


#: (device key, min capability, max capability) of one ``use_kernels`` mapping entry.
KernelTarget = tuple[str, int | None, int | None]


@frozen
class TransformersTables:
    """The device tables of one Transformers release and where they were read.

    ``origin`` says whether they were read from the installed files at run time or come from
    the sourced copy in this module (and why).
    """

    version: str | None
    """The Transformers release the tables are for; None when the host has none."""
    origin: str
    """Where they were read: the installed files at run time, or the sourced copy and why."""
    read_at_runtime: bool
    """True when read from the installed Transformers' files; False for the sourced copy."""
    fallback_cuda: Mapping[str, str]
    """``FLASH_ATTN_KERNEL_FALLBACK`` on a CUDA build: ``flash_attention_N`` to the hub kernel
    used when its package is missing (``kernels-community/flash-attn2``)."""
    fallback_rocm: Mapping[str, str]
    """The same table on a ROCm build (``kernels-community/aiter-flash-attn``)."""
    kernel_devices: Mapping[str, tuple[str, ...]]
    """``FLASH_ATTN_KERNEL_DEVICES``: hub repository to the ``kernels`` device keys it ships
    builds for; a repository not listed is taken to serve every device."""
    fa_min_major: Mapping[int, int]
    """Flash-attention version to the minimum CUDA compute capability major (``{3: 8, 4: 9}``)."""
    kernels_range: tuple[str, str] | None
    """``(low, high)``: the ``kernels`` releases Transformers accepts, ``>=low,<high``; None:
    not known for this release."""
    kernel_mapping: Mapping[str, tuple[KernelTarget, ...]]
    """The default ``use_kernels`` mapping: layer name to ``(device key, min capability, max
    capability)`` entries, capabilities as major*10+minor (None: no bound)."""
    installed: bool = True
    """False when the host has no Transformers at all."""
    hub_kernel_pattern: str = r"^[^/:]+/[^/:]+(?:@[^/:]+)?(?::[^/:]+)?$"
    """``hub_kernels.is_kernel``'s pattern: what an ``attn_implementation`` hub id must look
    like."""
    attention_names: tuple[str, ...] = (
        "eager", "flash_attention_4", "flash_attention_3", "flash_attention_2",
        "flex_attention", "sdpa", "paged|eager",
    )  # fmt: skip
    """The attention names Transformers registers at import
    (``AttentionInterface._global_mapping``'s keys), and ``"eager"``."""

    def is_hub_kernel(self, name: str) -> bool:
        """Whether Transformers treats ``name`` as a hub kernel id (``org/repo[@rev][:fn]``).

        :param name: an ``attn_implementation`` value.
        """
        import re

        return re.search(self.hub_kernel_pattern, name) is not None

    def kernel_builds(self, repo_id: str) -> tuple[str, ...] | None:
        """The ``kernels`` device keys a hub attention repo ships builds for; None: unlisted,
        which Transformers treats as every device.

        :param repo_id: a hub kernel id, ``org/repo`` with an optional ``@revision`` and
            ``:function``.
        """
        repo = repo_id.split(":", 1)[0].split("@", 1)[0]
        return self.kernel_devices.get(repo)

    def fallback(self, *, rocm: bool) -> Mapping[str, str]:
        """``FLASH_ATTN_KERNEL_FALLBACK`` as Transformers computes it on this torch build.

        :param rocm: whether torch is a ROCm build (``fallback_rocm``), else ``fallback_cuda``.
        """
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


_versions_seen: dict[str, tuple[tuple[int, int, int], str | None]] = {}


def _installed_version(init_path: str) -> str | None:
    """The ``__version__`` of the transformers whose ``__init__.py`` is ``init_path``; read
    again only when the file's stat changes (a reinstall), so a later call opens no file."""
    try:
        st = os.stat(init_path)
    except OSError:
        return None
    stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    seen = _versions_seen.get(init_path)
    if seen is not None and seen[0] == stamp:
        return seen[1]
    init = _read(init_path)
    version = _version_of(init) if init else None
    _versions_seen[init_path] = (stamp, version)
    return version


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

    :param host: the machine whose Transformers applies; None: the copy installed here.
    """
    base = _local_transformers_dir()
    local = _installed_version(os.path.join(base, "__init__.py")) if base else None
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


@frozen
class KernelsState:
    """Whether Transformers' ``kernels`` integration is switched on for a host.

    ``usable`` is None when it cannot be told (a Transformers release whose accepted
    ``kernels`` range is not known here).
    """

    usable: bool | None
    """True: switched on; False: off (Transformers or ``kernels`` missing, or a ``kernels``
    release Transformers refuses); None: cannot be told."""
    reason: str
    """Why, with the versions compared (``kernels 0.18.2, transformers 5.23.0 accepts
    >=0.18.2,<0.19``)."""


def kernels_state(host: Host | None, tables: TransformersTables) -> KernelsState:
    """``is_kernels_available()`` of the host's Transformers, decided from package versions.

    :param host: the machine whose installed ``kernels`` is checked; None: unknown packages,
        so ``usable`` is None.
    :param tables: the host's Transformers tables (``transformers_tables(host)``).
    """
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

    :param device_key: a ``kernels`` device key (``cuda``, ``rocm``, ``xpu``, ``mps``, ...).
    :param capability: the device's capability as above, or None.
    :param tables: the Transformers tables whose default mapping is read.
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
"""A ``Limitation`` for a plugin's devices with hub kernels: ``use_kernels=True`` helps prefill
and large batches; measure small-batch decoding first (no vendor claims a speed-up for all)."""


def reporter_names() -> tuple[str, ...] | None:
    """The ``report_to`` names the installed Transformers knows (the keys of
    ``INTEGRATION_TO_CALLBACK`` in ``transformers/integrations/integration_utils.py``, read as
    text), with ``"all"`` and ``"none"``; None without Transformers or that table."""
    import re

    base = _local_transformers_dir()
    if base in _reporters_cache:  # read once per installed Transformers and process
        return _reporters_cache[base]
    text = _read(os.path.join(base, "integrations", "integration_utils.py")) if base else None
    table = re.search(r"^INTEGRATION_TO_CALLBACK = \{(.*?)^\}", text or "", re.S | re.M)
    names = re.findall(r'^\s*"([a-z0-9_]+)"\s*:', table.group(1), re.M) if table else []
    found = ("all", "none", *names) if names else None
    _reporters_cache[base] = found
    return found


_reporters_cache: dict[str | None, tuple[str, ...] | None] = {}


def check_reporter_names(report_to: object) -> None:
    """Refuse a ``report_to`` name the installed Transformers does not know (``"wandbb"``),
    with close matches: TrainingArguments would refuse it only later, at ``Trainer``."""
    wanted = [report_to] if isinstance(report_to, str) else list(report_to or ())  # type: ignore[call-overload]
    if not wanted:
        return  # nothing named: nothing to read or import (a repeated call must stay cheap)
    import difflib

    from hwbackends._base.errors import UnsupportedSettingError

    known = reporter_names()
    bad = [r for r in wanted if known is not None and r not in known]
    if bad:
        near = difflib.get_close_matches(bad[0], known or (), n=1)
        raise UnsupportedSettingError(
            f"report_to={bad[0]!r} is not a reporter the installed Transformers knows"
            + (f" (did you mean {near[0]!r}?)" if near else ""),
            f"one of {', '.join(known or ())}",
            f"pass report_to={near[0]!r}" if near else "pick one of those names",
        )
