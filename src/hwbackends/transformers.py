"""``from_pretrained`` settings that will really load on this hardware.

``pretrained_kwargs()`` gives the dict; ``plan_pretrained()`` gives the same dict with the
reason for each choice. torch, transformers and kernels are imported inside the functions.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hwbackends._base.errors import QuantizationError, UnsupportedSettingError
from hwbackends._base.record import frozen
from hwbackends._integrations.attention import (
    _FLEX_REFUSED_ON,
    _attention_names,
    _hub_attention,
    _trust_rule,
)
from hwbackends._integrations.placement import _device_map, _spread_caps
from hwbackends._integrations.rank import process_rank
from hwbackends._selection.target import Target, resolve_target

if TYPE_CHECKING:
    from hwbackends._base.protocol import Backend, Capabilities, Device, QuantSupport
    from hwbackends._machine.host import Host

__all__ = [
    "KernelsStatus",
    "PretrainedPlan",
    "kernels_status",
    "plan_pretrained",
    "pretrained_kwargs",
    "resolve_attention",
]

_DTYPE_ALIASES = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float32": "float32",
    "float": "float32",
}


@frozen
class KernelsStatus:
    """Whether hub kernels (``use_kernels``, hub attention fallbacks) can work here."""

    available: bool
    """True when hub kernels can work here: the backend has a ``kernels`` device key, the
    host's Transformers is known to accept its ``kernels`` release, and the Hub is not off
    (``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE``)."""
    reason: str
    """Why, in words: the versions compared, or what is missing or switched off."""
    device_key: str | None
    """The device's ``kernels`` key (``cuda``, ``rocm``, ``xpu``, ...); None when it has none."""
    transformers: str | None = None
    """The host's Transformers version; None when it is not installed."""
    kernels: str | None = None
    """The host's ``kernels`` version; None when it is not installed."""

    def to_dict(self) -> dict[str, Any]:
        """This status as JSON-able data."""
        return {
            "available": self.available,
            "reason": self.reason,
            "device_key": self.device_key,
            "transformers": self.transformers,
            "kernels": self.kernels,
        }


def kernels_status(target: Target) -> KernelsStatus:
    """Is the ``transformers``/``kernels`` pair coherent, is there a device key, is the hub on?

    The accepted ``kernels`` range comes from the host's Transformers, read as text (never
    imported), as ``hwbackends.facts.kernels_state`` reads it for the GPU plugins' tables.

    :param target: the backend, device capabilities, host and environment to answer for, as
        ``plan_pretrained`` resolves them (its ``kernels`` is this answer).
    """
    from hwbackends._kit.hf_tables import kernels_state, transformers_tables

    key = target.caps.kernel_device
    tv = target.host.package("transformers")
    kv = target.host.package("kernels")
    if key is None:
        return KernelsStatus(False, f"kernels has no device key for {target.name}", None, tv, kv)
    state = kernels_state(target.host, transformers_tables(target.host))
    if not state.usable:
        why = state.reason
        if kv is None and tv is not None:
            why += " (pip install 'transformers[kernels]')"
        prefix = "" if tv is None else "kernels integration unavailable: "
        return KernelsStatus(False, prefix + why, key, tv, kv)
    offline = target.env.get("HF_HUB_OFFLINE") or target.env.get("TRANSFORMERS_OFFLINE") or ""
    if offline.strip().lower() in ("1", "true", "yes", "on"):
        return KernelsStatus(
            False, "hub kernels cannot be fetched: HF_HUB_OFFLINE is set", key, tv, kv
        )
    return KernelsStatus(True, state.reason, key, tv, kv)


def _missing(packages: tuple[str, ...], host: Host) -> list[str]:
    return [p for p in packages if host.package(p) is None]


def resolve_attention(
    caps: Capabilities,
    host: Host,
    requested: str,
    kernels: KernelsStatus,
    *,
    paged: bool = False,
) -> tuple[str, str]:
    """The ``attn_implementation`` to use and why; never one that will fail to load or fail
    in use.

    ``caps.attention`` is best-first; an option loads when its packages are installed and,
    for a hub kernel, when the kernels integration works. ``"auto"`` takes the first that
    loads; an explicit name must be one of those, else ``UnsupportedSettingError``. A
    ``paged|eager`` is accepted only with ``paged=True`` (generation with a paged cache);
    other ``paged|`` names become the name without the prefix, as Transformers makes them.

    :param caps: the device's capabilities (``backend.capabilities(device, host=host)``): its
        ``attention`` options, best first, and the names it refuses (``refused_attention``).
    :param host: the machine whose installed packages and Transformers decide what loads.
    :param requested: ``"auto"``, or the ``attn_implementation`` asked for, as
        ``pretrained_kwargs``'s ``attention`` describes.
    :param kernels: whether the kernels integration works here (``kernels_status``): a
        hub-kernel option or id needs it.
    :param paged: True when the model will generate with a paged cache: only then is
        ``paged|eager`` accepted.
    :returns: ``(attn_implementation, reason)``.
    :raises UnsupportedSettingError: when the requested name cannot load or run here.
    """
    # Transformers keeps the prefix only for paged|eager (modeling_utils.py,
    # _check_and_adjust_attn_implementation) and strips it elsewhere (handled below).
    if requested == "paged|eager" and not paged:
        plain = requested.removeprefix("paged|")
        raise UnsupportedSettingError(
            f"attn_implementation={requested!r} loads, but an ordinary forward or generate() "
            'raises "called without a paged attention cache" (transformers '
            "integrations/eager_paged.py): paged| implementations serve only generation with "
            "a paged cache (continuous batching, generate_batch)",
            f"{plain!r} for ordinary use, or paged=True when you generate with a paged cache",
            f"pass attention={plain!r}, or paged=True",
        )
    loadable: list[str] = []
    why_not: dict[str, str] = {}
    refused = caps.refused_attention
    if requested in refused:
        works = ", ".join(o.name for o in caps.attention if o.name not in refused)
        raise UnsupportedSettingError(
            f"attn_implementation={requested!r} cannot load on {caps.arch or caps.device_type} "
            f"({caps.backend}): {refused[requested]}",
            f"one of {works}",
            "pick one of those, or use attention='auto'",
        )
    for opt in caps.attention:
        if opt.name in refused:
            continue  # the plugin lists it and refuses it: the refusal wins
        missing = _missing(opt.packages, host)
        if missing:
            why_not.setdefault(opt.name, f"needs {', '.join(missing)} installed")
            continue
        if opt.hub_kernel and not kernels.available:
            why_not.setdefault(opt.name, f"hub kernel {opt.hub_kernel}: {kernels.reason}")
            continue
        if requested in ("auto", opt.name):
            via = f" through hub kernel {opt.hub_kernel}" if opt.hub_kernel else ""
            note = f" ({opt.note})" if opt.note else ""
            rule = "best available" if requested == "auto" else "requested"
            return opt.name, f"{rule} on {caps.arch or caps.device_type}{via}{note}"
        loadable.append(opt.name)
    if requested == "auto":  # every option failed: only possible with a malformed table
        raise UnsupportedSettingError(
            f"no attention implementation of the {caps.backend} backend can load here",
            "at least sdpa or eager in the backend's attention table",
        )
    where = f"{caps.arch or caps.device_type} ({caps.backend})"
    if requested.startswith("paged|") and requested != "paged|eager":
        # Transformers strips the prefix with a FutureWarning (modeling_utils.py,
        # _check_and_adjust_attn_implementation); the stripped name is what loads cleanly.
        impl, why = resolve_attention(
            caps, host, requested.removeprefix("paged|"), kernels, paged=paged
        )
        return impl, (
            f"{why}; {requested!r} became {impl!r}: Transformers only keeps the paged| prefix "
            "for paged|eager and strips it elsewhere with a FutureWarning"
        )
    from hwbackends._kit.hf_tables import transformers_tables

    tables = transformers_tables(host)
    if "/" in requested or ":" in requested:
        return _hub_attention(caps, requested, kernels, tables), (
            f"hub kernel {requested} as requested; {_trust_rule(requested)}"
        )
    if requested in _attention_names(tables) and "flash" not in requested:
        # Registered in Transformers and not a flash variant (those need the device's table
        # above): Transformers' only device rule for them is flex_attention refusing TPU.
        if requested == "flex_attention" and caps.device_type in _FLEX_REFUSED_ON:
            raise UnsupportedSettingError(
                f"attn_implementation='flex_attention' cannot load on {where}: Transformers "
                "refuses flex_attention on TPU (is_torch_flex_attn_available)",
                "sdpa or eager",
                "use attention='auto'",
            )
        why = (
            f"requested; registered in Transformers' AttentionInterface (not one of the "
            f"{caps.backend} backend's measured options, so not chosen by 'auto')"
        )
        if requested.startswith("paged|"):
            why += "; for generation with a paged cache, as asked (paged=True)"
        return requested, why
    known = why_not.get(requested)
    works = ", ".join(
        dict.fromkeys(loadable + [o.name for o in caps.attention if o.name not in why_not])
    )
    what = (
        f"attn_implementation={requested!r} cannot load on {caps.arch or caps.device_type} "
        f"({caps.backend})" + (f": {known}" if known else ": this device does not support it")
    )
    raise UnsupportedSettingError(what, f"one of {works}", "pick one of those, or use 'auto'")


def _normalise_quant(q: Any) -> tuple[str, Any]:
    if isinstance(q, str):
        return q, None
    if isinstance(q, Mapping) and isinstance(q.get("quant_method"), str):
        return str(q["quant_method"]), q
    method = getattr(q, "quant_method", None)
    method = getattr(method, "value", method)  # QuantizationMethod is a str enum
    if isinstance(method, str):
        return method, q
    raise QuantizationError(
        f"quantization={q!r} names no method",
        "a method name such as 'awq' or a transformers quantization config",
    )


def _preflight(caps: Capabilities, host: Host, q: Any) -> tuple[QuantSupport, list[str]]:
    method, _ = _normalise_quant(q)
    support = caps.quant(method)
    notes: list[str] = []
    where = f"{caps.arch or caps.device_type} ({caps.backend})"
    if support.status == "unsupported":
        raise QuantizationError(
            f"quantization {method!r} will fail on {where}: {support.reason}",
            "a method this device supports: "
            + (", ".join(q.method for q in caps.quantization if q.status == "supported") or "none"),
            "choose another method or another checkpoint; nothing was downloaded",
        )
    missing = _missing(support.packages, host)
    if missing:
        raise QuantizationError(
            f"quantization {method!r} needs {', '.join(missing)}, which is not installed",
            f"{', '.join(support.packages)} installed",
            f"pip install {' '.join(missing)}",
        )
    if support.status == "partial":
        notes.append(
            f"quantization {method!r} is only partly supported on {where}: {support.reason}"
        )
    elif support.status == "unknown":
        notes.append(f"quantization {method!r} on {where}: {support.reason}; it may fail at load")
    return support, notes


def _torch_dtype(name: str) -> Any:
    try:
        import torch
    except ImportError:
        return name  # from_pretrained also takes the dtype's name
    return getattr(torch, name)


def _loads_everywhere(
    impl: str, spread: list[Capabilities], host: Host, kstat: KernelsStatus, paged: bool = False
) -> bool:
    for c in spread:
        try:
            resolve_attention(c, host, impl, kstat, paged=paged)
        except UnsupportedSettingError:
            return False
    return True


@frozen
class PretrainedPlan:
    """``from_pretrained`` keyword arguments with the reason for each and any warnings."""

    kwargs: dict[str, Any]
    """The keyword arguments for ``from_pretrained``: ``device_map``, ``dtype`` (a
    ``torch.dtype``; its name without torch) and ``attn_implementation`` always,
    ``use_kernels`` when enabled, ``quantization_config`` when a config was given."""
    backend: str
    """The name of the backend the plan is for."""
    device: Device | None
    """The device the plan was made for (the one asked for, the local rank's, or the first
    visible); None when the backend shows no device."""
    reasons: Mapping[str, str]
    """Why each setting was chosen, by name: ``device_map``, ``dtype``,
    ``attn_implementation``, ``use_kernels`` (also when left out, unless ``kernels=False``),
    and ``quantization`` when one was asked for."""
    warnings: tuple[str, ...]
    """What may still fail at load: a quantization method only partly supported here, or one
    the backend has no data on. Each was also issued as a ``UserWarning``."""
    kernels: KernelsStatus
    """Whether hub kernels can work here (``kernels_status``), which decides ``use_kernels``
    and the hub-kernel attention options."""
    quantization: QuantSupport | None = None
    """What the backend says of the quantization method asked for (status, reason, packages);
    None when none was."""

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-able data: a ``torch.dtype`` shown as its name, other objects (a
        quantization config) as their text."""
        return {
            "kwargs": {k: _show(v) for k, v in self.kwargs.items()},
            "backend": self.backend,
            "device": self.device.to_dict() if self.device else None,
            "reasons": dict(self.reasons),
            "warnings": list(self.warnings),
            "kernels": self.kernels.to_dict(),
            "quantization": self.quantization.to_dict() if self.quantization else None,
        }


def _show(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v).removeprefix("torch.")


def plan_pretrained(
    *,
    backend: str | Backend | None = None,
    device: Device | int | None = None,
    attention: str = "auto",
    kernels: bool | str = "auto",
    quantization: Any = None,
    dtype: Any = "auto",
    env: Mapping[str, str] | None = None,
    host: Host | None = None,
    paged: bool = False,
) -> PretrainedPlan:
    """Every ``from_pretrained`` setting for this hardware, with the reason for each.

    ``kwargs`` is what ``pretrained_kwargs`` returns; ``reasons`` says why each was chosen.

    Every parameter means what it means for ``pretrained_kwargs``, which describes each one
    in full; so do the errors.

    :param backend: the backend to plan for (``pretrained_kwargs``'s ``backend``).
    :param device: the device to load onto (``pretrained_kwargs``'s ``device``).
    :param attention: ``"auto"`` or the ``attn_implementation`` asked for.
    :param kernels: ``"auto"``, True or False: whether to set ``use_kernels=True``.
    :param quantization: a method name or a quantization config to check, or None.
    :param dtype: ``"auto"``, or the weights' dtype (a ``torch.dtype`` or its name).
    :param env: the environment to read; None: ``os.environ`` (or a simulated host's ``env``).
    :param host: the machine to plan for; None: ``HWBACKENDS_HOST``'s file, else this one.
    :param paged: True when the model will generate with a paged cache.
    :raises UnsupportedSettingError: when ``attention``, ``dtype`` or ``kernels`` cannot work
        here, or is not a value it takes.
    :raises QuantizationError: when ``quantization`` would fail here.
    :raises RankError: when this process's local rank has no visible device.
    """
    t = resolve_target(backend, device, env=env, host=host, rank_of=process_rank)
    return plan_for_target(
        t,
        attention=attention,
        kernels=kernels,
        quantization=quantization,
        dtype=dtype,
        torch_objects=True,
        paged=paged,
    )


def plan_for_target(
    t: Target,
    *,
    attention: str = "auto",
    kernels: bool | str = "auto",
    quantization: Any = None,
    dtype: Any = "auto",
    torch_objects: bool = True,
    paged: bool = False,
) -> PretrainedPlan:
    """``plan_pretrained`` for a resolved target; ``torch_objects=False`` keeps dtype a name
    (the CLI uses that to avoid importing torch)."""
    caps = t.caps
    reasons: dict[str, str] = {}
    notes: list[str] = []
    kwargs: dict[str, Any] = {}
    if not isinstance(attention, str):
        raise UnsupportedSettingError(
            f"attention={attention!r} is not an attn_implementation name",
            "'auto' or a name such as 'sdpa' or 'flash_attention_2'",
            "pass attention='auto' (the default) or a name",
        )

    kwargs["device_map"], reasons["device_map"] = _device_map(t)
    # With device_map="auto" the model spans every visible device: each setting must work on
    # all of them (a 3090 next to an H100 gets neither FA3 nor a dtype only one runs).
    spread = _spread_caps(t) if kwargs["device_map"] == "auto" else [caps]
    if (
        kwargs["device_map"] != "auto"
        and t.device is not None
        and kwargs["device_map"] not in ("cpu", t.device.torch_device)
    ):  # the explicit device is not the primary one (an iGPU came first)
        chosen = next(d for d in t.devices if d.torch_device == kwargs["device_map"])
        caps = t.capabilities_of(chosen)
        spread = [caps]

    if dtype == "auto":
        name = caps.load_dtype
        src = caps.sources.get("inference_dtype") or caps.sources.get("training_precision")
        reasons["dtype"] = f"{name}: {src or 'capability table'}"
        if any(c.load_dtype != name for c in spread):
            name = next(
                d for d in ("bfloat16", "float16", "float32")
                if all(d == c.load_dtype or (d != "bfloat16" and d in c.dtypes) for c in spread)
            )  # fmt: skip
            archs = ", ".join(sorted({c.arch or c.device_type for c in spread}))
            reasons["dtype"] = f"{name}: the one dtype every visible device runs well ({archs})"
    else:
        raw = str(dtype).removeprefix("torch.")
        name = _DTYPE_ALIASES.get(raw, "")
        if not name:
            raise UnsupportedSettingError(
                f"dtype={dtype!r} is not a floating dtype hwbackends knows",
                "'auto', 'bfloat16', 'float16', 'float32' or the torch dtype",
            )
        # with device_map="auto" the weights land on every visible device: each must run it
        for c in spread:
            if name not in c.dtypes:
                common = [d for d in c.dtypes if all(d in o.dtypes for o in spread)]
                raise UnsupportedSettingError(
                    f"dtype {name} does not run on {c.arch or c.device_type} ({t.name})"
                    + (", one of the visible devices the model spans" if len(spread) > 1 else ""),
                    f"one of {', '.join(common or c.dtypes)}",
                    "use dtype='auto'"
                    + (", or name one device with device=N" if len(spread) > 1 else ""),
                )
        reasons["dtype"] = f"{name}: requested"
    kwargs["dtype"] = _torch_dtype(name) if torch_objects else name

    kstat = kernels_status(t)
    impl, reasons["attn_implementation"] = resolve_attention(
        caps, t.host, attention, kstat, paged=paged
    )
    if len(spread) > 1 and not _loads_everywhere(impl, spread, t.host, kstat, paged):
        if attention != "auto":
            resolve_attention(
                next(c for c in spread if not _loads_everywhere(impl, [c], t.host, kstat, paged)),
                t.host,
                attention,
                kstat,
                paged=paged,
            )  # raises, naming the device
        impl = next(
            o.name for o in caps.attention if _loads_everywhere(o.name, spread, t.host, kstat)
        )
        reasons["attn_implementation"] = (
            f"{impl}: the best implementation that loads on every visible device "
            f"({', '.join(sorted({c.arch or c.device_type for c in spread}))})"
        )
    kwargs["attn_implementation"] = impl

    if kernels is True or kernels == "auto":
        if kstat.available and kstat.device_key:
            kwargs["use_kernels"] = True
            reasons["use_kernels"] = (
                f"hub kernels for device key {kstat.device_key!r}: {kstat.reason}; they help "
                "prefill and large batches, measure before relying on them for small-batch "
                "decoding"
            )
            # No KernelConfig is passed: Transformers' default mapping already selects the
            # entries of this device key, and a config naming layers the model lacks is
            # rejected by KernelConfig.sanitize_kernel_mapping. caps.kernel_layers lists them.
        elif kernels is True:
            raise UnsupportedSettingError(
                f"use_kernels was requested but cannot work here: {kstat.reason}",
                "a backend with a kernels device key and a coherent transformers/kernels pair",
                "install a kernels release that transformers accepts, or pass kernels=False",
            )
        else:
            reasons["use_kernels"] = f"not enabled: {kstat.reason}"
    elif kernels is not False:
        raise UnsupportedSettingError(f"kernels={kernels!r}", "'auto', True or False")

    support = None
    if quantization is not None:
        support, qnotes = _preflight(caps, t.host, quantization)
        notes += qnotes
        _, config = _normalise_quant(quantization)
        if config is not None:
            kwargs["quantization_config"] = config
        reasons["quantization"] = f"{support.status}: {support.reason}"
    for n in notes:
        warnings.warn(n, UserWarning, stacklevel=3)
    return PretrainedPlan(kwargs, t.name, t.device, reasons, tuple(notes), kstat, support)


def pretrained_kwargs(
    *,
    backend: str | Backend | None = None,
    device: Device | int | None = None,
    attention: str = "auto",
    kernels: bool | str = "auto",
    quantization: Any = None,
    dtype: Any = "auto",
    env: Mapping[str, str] | None = None,
    host: Host | None = None,
    paged: bool = False,
) -> dict[str, Any]:
    """Keyword arguments for ``AutoModel*.from_pretrained`` on this hardware.

    ``device_map``, ``dtype`` and ``attn_implementation`` always; ``use_kernels`` where hub
    kernels can work; ``quantization_config`` when a config was
    given and passed the pre-flight check. See ``plan_pretrained`` for the reasons.

    :param backend: the backend to plan for. None: the one selected here (as
        ``hwbackends.explain()`` reports it). A name (``"cuda"``, any case): that backend, which
        must be installed and available here. A ``Backend`` object: used as it is.
    :param device: the device to load onto. None: this process's device: under a launcher
        (``LOCAL_RANK``, or the local rank srun, mpirun or jsrun set) its local rank's device,
        which ``device_map`` then names; with no launcher and several visible devices,
        ``device_map`` is ``"auto"`` for Accelerate to spread the model over all of them
        (unless the backend's ``capabilities().device_map_auto`` is False, or an integrated GPU
        sits next to discrete ones: then one device is named), with the first visible device's
        capabilities leading the other choices. An ``int``: that logical index among the
        backend's visible devices (``hwbackends devices`` lists them), which ``device_map``
        names: the model loads onto it alone. A ``Device`` (from
        ``hwbackends.explain().devices``): the same, for that device. A local rank past the
        visible devices raises ``RankError``; an index out of range, or another type
        (``"cuda:0"``, ``True``), raises ``HwBackendsError``.
    :param attention: the ``attn_implementation``. ``"auto"``: the first option of the device's
        capability table (``capabilities().attention``, best first) that loads here: its
        packages installed and, for a hub kernel, the kernels integration working; with
        ``device_map="auto"``, the first that loads on every visible device. An explicit name is
        checked as Transformers checks it, on each device the model spans: an option of that
        table is taken when it loads; another name Transformers registers, not a flash variant
        (``flex_attention``, refused on TPU; names added with ``AttentionInterface.register``),
        is passed on; a hub kernel id ``org/repo[@revision][:function]`` needs a repository id
        the Hub accepts, a build for the device's kernels key and the kernels integration
        working; ``paged|eager`` needs ``paged=True``, and another ``paged|<name>`` is planned
        as ``<name>``. A name the backend refuses, one that cannot load, any other string, or
        a value that is not a string (``None``) raises ``UnsupportedSettingError``.
    :param kernels: whether to set ``use_kernels=True`` (Transformers swaps the layers of
        ``capabilities().kernel_layers`` for hub kernels). ``"auto"``: set when hub kernels can
        work here (see ``kernels_status``: a kernels device key, a ``kernels`` release the host's
        Transformers accepts, the Hub not offline), else left out with the reason. ``True``: the
        same, but raises ``UnsupportedSettingError`` when they cannot work. ``False``: never set.
        Any other value (``None``, ``1``, ``"yes"``) raises ``UnsupportedSettingError``. It does
        not change ``attention``: hub-kernel attention depends on the integration alone.
    :param quantization: the quantization to check before anything is downloaded. None: none.
        A method name (``"awq"``, ``"bitsandbytes"``; any case, ``-`` or ``_``) is only checked
        (a pre-quantized checkpoint names its method itself): no ``quantization_config`` is set.
        A Transformers quantization config (``BitsAndBytesConfig(...)``, any object with a
        ``quant_method``) or a dict with a string ``"quant_method"`` is checked, then passed on
        unchanged as ``quantization_config``. ``QuantizationError`` when the backend says the
        method fails on this device, a package it needs is missing, or the value names no
        method; a method only partly supported, or one the backend has no data on, is a warning
        (a ``UserWarning`` and ``warnings``).
    :param dtype: the weights' dtype. ``"auto"``: the device's load dtype from its capability
        table (``bfloat16``, ``float16`` or ``float32``), not the checkpoint's (Transformers'
        own ``"auto"``); with ``device_map="auto"`` over different architectures, the first of
        those that every visible device runs (``bfloat16`` only when all load in it). Else a
        ``torch.dtype`` or its name: ``bfloat16``/``bf16``, ``float16``/``fp16``/``half``,
        ``float32``/``fp32``/``float`` (``torch.`` prefix allowed), which the device must run
        (``capabilities().dtypes``), and with ``device_map="auto"`` every visible device. Any
        other value, ``None`` included, raises ``UnsupportedSettingError``. The ``dtype``
        given to ``from_pretrained`` is the ``torch.dtype``, or its name when torch cannot be
        imported.
    :param env: the environment to read, name to value (a name left out is unset): the
        ``HWBACKENDS_*`` settings, the visibility variables, the launcher's local rank,
        ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE``. None: ``os.environ``, or a simulated
        ``host``'s own ``env``.
    :param host: the machine to plan for: a ``Host`` (``Host.from_file(path)`` for a simulated
        one). None: the host file ``HWBACKENDS_HOST`` names, else this machine.
    :param paged: True when the model will generate with a paged cache (continuous batching,
        ``generate_batch``): only then is ``paged|eager`` accepted.
    :raises UnsupportedSettingError: when ``attention``, ``dtype`` or ``kernels`` cannot work
        here, or is not a value it takes.
    :raises QuantizationError: when ``quantization`` would fail here.
    :raises RankError: when this process's local rank is not a number, is negative, or has no
        visible device.
    :raises BackendNotFoundError: when ``backend`` names no installed backend.
    :raises BackendUnavailableError: when ``backend`` names one that cannot run here.
    :raises HwBackendsError: when ``device`` is out of range or not a device.
    """
    return plan_pretrained(
        backend=backend,
        device=device,
        attention=attention,
        kernels=kernels,
        quantization=quantization,
        dtype=dtype,
        env=env,
        host=host,
        paged=paged,
    ).kwargs
