"""``from_pretrained`` settings that will really load on this hardware.

``pretrained_kwargs()`` gives the dict; ``plan_pretrained()`` gives the same dict with the
reason for each choice. torch, transformers and kernels are imported inside the functions.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hwbackends._base.errors import ModelError, QuantizationError, UnsupportedSettingError
from hwbackends._base.record import frozen, replace
from hwbackends._integrations.attention import (
    _attention_names,
    _cannot_load,
    _check_in_use,
    _check_paged,
    _check_refused,
    _hub_attention,
    _missing,
    _option_problem,
    _registered_name,
    _skipped_for_model,
    _trust_rule,
)
from hwbackends._integrations.dtype import _dtype_choice, _torch_dtype
from hwbackends._integrations.model import ModelFacts, model_facts
from hwbackends._integrations.placement import _device_map, _spread_caps
from hwbackends._integrations.rank import process_rank
from hwbackends._integrations.use_kernels import (
    HubKernel,
    KernelsStatus,
    _kernels_choice,
    kernels_status,
)
from hwbackends._selection.target import Target, resolve_target

if TYPE_CHECKING:
    from hwbackends._base.protocol import Backend, Capabilities, Device, QuantSupport
    from hwbackends._machine.host import Host

__all__ = [
    "HubKernel",
    "KernelsStatus",
    "ModelError",
    "ModelFacts",
    "PretrainedPlan",
    "kernels_status",
    "model_facts",
    "pipeline_kwargs",
    "plan_pretrained",
    "pretrained_kwargs",
    "resolve_attention",
]


def resolve_attention(
    caps: Capabilities,
    host: Host,
    requested: str,
    kernels: KernelsStatus,
    *,
    paged: bool = False,
    model: ModelFacts | None = None,
    training: bool = False,
    hub: bool = True,
) -> tuple[str, str]:
    """The ``attn_implementation`` to use and why; never one that will fail to load or fail
    in use on this device for ``model``.

    ``caps.attention`` is best-first; an option loads when its packages are installed and,
    for a hub kernel, when the kernels integration works. ``"auto"`` takes the first that
    loads, that ``model``'s class accepts (as Transformers' ``_check_and_adjust_attn_
    implementation`` decides from the class's ``_supports_*`` flags) and that runs in use
    (``training`` included); an explicit name must be one of those, else
    ``UnsupportedSettingError``. Without ``model`` the answer is the device's alone (some
    classes may refuse it: ``plan_pretrained`` leaves ``"auto"`` to Transformers then). A
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
    :param model: the model class's facts (``model_facts``); None: the device's answer alone.
    :param training: True when the model will be trained (a backward pass must run).
    :param hub: whether ``"auto"`` may take a hub-kernel option (Hub code): False unless the
        user opted in to hub kernels.
    :returns: ``(attn_implementation, reason)``.
    :raises UnsupportedSettingError: when the requested name cannot load or run here.
    """
    _check_paged(requested, paged)
    _check_refused(caps, requested)
    if requested != "auto":
        _check_in_use(caps, requested, model, training)
    loadable: list[str] = []
    why_not: dict[str, str] = {}
    for opt in caps.attention:
        why = _option_problem(opt, caps, host, kernels, requested, model, training, hub)
        if why is not None:
            why_not.setdefault(opt.name, why)
            continue
        if requested in ("auto", opt.name):
            via = f" through hub kernel {opt.hub_kernel}" if opt.hub_kernel else ""
            note = f" ({opt.note})" if opt.note else ""
            rule = "best available" if requested == "auto" else "requested"
            for_model = f" that {model.class_name} supports" if model is not None else ""
            skipped = _skipped_for_model(why_not) if model is not None else ""
            return (
                opt.name,
                f"{rule}{for_model} on {caps.arch or caps.device_type}{via}{note}{skipped}",
            )
        loadable.append(opt.name)
    if requested == "auto":  # every option failed: only possible with a malformed table
        raise UnsupportedSettingError(
            f"no attention implementation of the {caps.backend} backend can load here",
            "at least sdpa or eager in the backend's attention table",
        )
    return _explicit_attention(
        caps, host, requested, kernels, paged, model, training, why_not, loadable
    )


def _explicit_attention(
    caps: Capabilities,
    host: Host,
    requested: str,
    kernels: KernelsStatus,
    paged: bool,
    model: ModelFacts | None,
    training: bool,
    why_not: Mapping[str, str],
    loadable: list[str],
) -> tuple[str, str]:
    """A name that is not one of the device's loadable options: a paged| alias, a hub
    kernel id, or another name Transformers registers; else the refusal with its cause."""
    if requested.startswith("paged|") and requested != "paged|eager":
        # Transformers strips the prefix with a FutureWarning (modeling_utils.py,
        # _check_and_adjust_attn_implementation); the stripped name is what loads cleanly.
        impl, why = resolve_attention(
            caps,
            host,
            requested.removeprefix("paged|"),
            kernels,
            paged=paged,
            model=model,
            training=training,
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
        return requested, _registered_name(caps, requested)
    raise _cannot_load(caps, host, requested, why_not, loadable)


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


def _loads_everywhere(
    impl: str, spread: list[Capabilities], host: Host, ask: _AttentionAsk
) -> bool:
    for c in spread:
        try:
            _resolve(c, host, impl, ask)
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
    model: ModelFacts | None = None
    """The facts of the model class planned for (``model=``); None when none was given."""
    hub_kernels: tuple[HubKernel, ...] | None = None
    """The hub repositories ``use_kernels=True`` loads here (the installed Transformers'
    mapping for the device key and mode), each with its local cache state; None when the
    mapping was not read (no opt-in; without one, read only offline for a model class)."""

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
            "model": self.model.to_dict() if self.model else None,
            "hub_kernels": None
            if self.hub_kernels is None
            else [k.to_dict() for k in self.hub_kernels],
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
    model: Any = None,
    purpose: str = "inference",
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
    :param model: the model to plan for (``pretrained_kwargs``'s ``model``); None: none.
    :param purpose: ``"inference"`` or ``"training"`` (``pretrained_kwargs``'s ``purpose``).
    :raises UnsupportedSettingError: when ``attention``, ``dtype`` or ``kernels`` cannot work
        here, or is not a value it takes.
    :raises ModelError: when ``model`` names no model Transformers resolves without a download.
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
        model=model,
        purpose=purpose,
    )


_TRAINING_DTYPE = (
    "float32: weights to train stay fp32, the master copy under bf16/fp16 mixed precision "
    "(fp16 weights under fp16 AMP fail in GradScaler.unscale_: 'Attempting to unscale FP16 "
    "gradients'); hwbackends.accelerate.training_plan() plans the load and the training "
    "together, and pure bf16 on request"
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
    model: Any = None,
    purpose: str = "inference",
) -> PretrainedPlan:
    """``plan_pretrained`` for a resolved target; ``torch_objects=False`` keeps dtype a name
    (the CLI uses that to avoid importing torch)."""
    if not isinstance(attention, str):
        raise UnsupportedSettingError(
            f"attention={attention!r} is not an attn_implementation name",
            "'auto' or a name such as 'sdpa' or 'flash_attention_2'",
            "pass attention='auto' (the default) or a name",
        )
    if kernels not in (True, False, "auto"):
        raise UnsupportedSettingError(f"kernels={kernels!r}", "'auto', True or False")
    if purpose not in ("inference", "training"):
        raise UnsupportedSettingError(
            f"purpose={purpose!r} is not a purpose hwbackends plans for",
            "'inference' or 'training'",
            "pass purpose='training' when the model will be trained, else leave it out",
        )
    training = purpose == "training"
    facts = None if model is None else model_facts(model)
    reasons: dict[str, str] = {}
    kwargs: dict[str, Any] = {}
    kwargs["device_map"], reasons["device_map"] = _device_map(t)
    caps, spread = _placement_caps(t, kwargs["device_map"])
    name, reasons["dtype"] = _dtype_choice(t, caps, spread, dtype)
    if training and dtype == "auto":  # the device's half type would train with no fp32 copy
        name, reasons["dtype"] = "float32", _TRAINING_DTYPE
    kwargs["dtype"] = _torch_dtype(name) if torch_objects else name
    kstat = kernels_status(t)
    choice = _AttentionAsk(attention, kstat, paged, facts, training, hub=kernels is True)
    impl, reasons["attn_implementation"] = _attention_choice(t, caps, spread, choice)
    if impl is not None:
        kwargs["attn_implementation"] = impl
    hub = _kernels_choice(t, caps, kstat, kernels, facts, kwargs, reasons, training=training)
    notes: list[str] = []
    support = None
    if quantization is not None:
        support, notes = _preflight(caps, t.host, quantization)
        _, config = _normalise_quant(quantization)
        if config is not None:
            kwargs["quantization_config"] = config
        reasons["quantization"] = f"{support.status}: {support.reason}"
    for n in notes:
        warnings.warn(n, UserWarning, stacklevel=3)
    plan = PretrainedPlan(kwargs, t.name, t.device, reasons, tuple(notes), kstat, support)
    return replace(plan, model=facts, hub_kernels=hub)


def _placement_caps(t: Target, device_map: Any) -> tuple[Capabilities, list[Capabilities]]:
    """The capabilities leading the choices, and those of every device the model spans."""
    caps = t.caps
    # With device_map="auto" the model spans every visible device: each setting must work on
    # all of them (a 3090 next to an H100 gets neither FA3 nor a dtype only one runs).
    spread = _spread_caps(t) if device_map == "auto" else [caps]
    if (
        device_map != "auto"
        and t.device is not None
        and device_map not in ("cpu", t.device.torch_device)
    ):  # the explicit device is not the primary one (an iGPU came first)
        chosen = next(d for d in t.devices if d.torch_device == device_map)
        caps = t.capabilities_of(chosen)
        spread = [caps]
    return caps, spread


@frozen
class _AttentionAsk:
    """What the attention choice is asked for, as ``resolve_attention`` takes it."""

    requested: str
    kernels: KernelsStatus
    paged: bool
    model: ModelFacts | None
    training: bool
    hub: bool


def _resolve(c: Capabilities, host: Host, impl: str, ask: _AttentionAsk) -> tuple[str, str]:
    a = ask
    return resolve_attention(
        c, host, impl, a.kernels, paged=a.paged, model=a.model, training=a.training, hub=a.hub
    )


def _attention_choice(
    t: Target, caps: Capabilities, spread: list[Capabilities], ask: _AttentionAsk
) -> tuple[str | None, str]:
    """The ``attn_implementation`` (None: left to Transformers) and why."""
    impl, why = _resolve(caps, t.host, ask.requested, ask)
    if ask.requested == "auto" and ask.model is None:
        # Without the class, any name some installed class refuses would be worse than
        # nothing: Transformers' own default (sdpa where the class supports it, else eager)
        # never fails to load.
        return None, (
            "left to Transformers: it takes sdpa where the model class supports it, else "
            f"eager; this device's best is {impl} ({why}); pass model= (a folder, config, "
            "class or cached hub id) to choose for the class"
        )
    if len(spread) == 1 or _loads_everywhere(impl, spread, t.host, ask):
        return impl, why
    if ask.requested != "auto":
        bad = next(c for c in spread if not _loads_everywhere(impl, [c], t.host, ask))
        _resolve(bad, t.host, ask.requested, ask)  # raises, naming the device
    impl = next(o.name for o in caps.attention if _loads_everywhere(o.name, spread, t.host, ask))
    return impl, (
        f"{impl}: the best implementation that loads on every visible device "
        f"({', '.join(sorted({c.arch or c.device_type for c in spread}))})"
    )


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
    model: Any = None,
    purpose: str = "inference",
) -> dict[str, Any]:
    """Keyword arguments for ``AutoModel*.from_pretrained`` on this hardware.

    ``device_map`` and ``dtype`` always; ``attn_implementation`` when ``model`` is given (one
    its class supports) or one was asked for; ``use_kernels`` only on opt-in
    (``kernels=True``); ``quantization_config`` when a config was given and passed the
    pre-flight check. See ``plan_pretrained`` for the reasons.

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
    :param attention: the ``attn_implementation``. ``"auto"`` with ``model``: the first option
        of the device's capability table (``capabilities().attention``, best first) that loads
        here (its packages installed; a hub kernel only with ``kernels=True`` and the kernels
        integration working), that the model's class supports and that runs in use for
        ``purpose``; with ``device_map="auto"``, the first that does so on every visible
        device. ``"auto"`` without ``model``: left to Transformers (see ``model``). An explicit
        name is checked as Transformers checks it, on each device the model spans: an option of
        that table is taken when it loads; another name Transformers registers, not a flash
        variant (``flex_attention``, refused on TPU; names added with
        ``AttentionInterface.register``), is passed on unless it fails in use (flex attention:
        the backward pass on CPU/MPS when training, attention sinks on CPU); a name ``model``'s
        class refuses raises; a hub kernel id ``org/repo[@revision][:function]`` needs a
        repository id
        the Hub accepts, a build for the device's kernels key and the kernels integration
        working; ``paged|eager`` needs ``paged=True``, and another ``paged|<name>`` is planned
        as ``<name>``. A name the backend refuses, one that cannot load, any other string, or
        a value that is not a string (``None``) raises ``UnsupportedSettingError``.
    :param kernels: whether to set ``use_kernels=True`` (Transformers swaps the layers of
        ``capabilities().kernel_layers`` for hub kernels, fetched and run from the Hub).
        ``"auto"``: never set (Hub code runs only on opt-in); the reason says what it would do
        and how to opt in, and hub-kernel attention options are not chosen. ``True``: set when
        hub kernels can work here (see ``kernels_status``: a kernels device key, a ``kernels``
        release the host's Transformers accepts; the Hub on, or offline every repository the
        layers need in the local cache) and ``model``'s class (or, without one, the device)
        has a layer they map, else ``UnsupportedSettingError`` naming what to download; the
        hub-kernel attention options become choosable. ``False``: never set.
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
    :param model: the model ``from_pretrained`` will load, so the attention is one its class
        supports in the installed Transformers (its ``_supports_sdpa`` / ``_supports_flash_attn``
        / ``_supports_flex_attn`` flags and ``_compatible_flash_implementations``, which
        ``_check_and_adjust_attn_implementation`` reads) and ``use_kernels`` is set only for
        a class with a layer the installed kernels map here. A local folder ``save_pretrained``
        wrote, a ``PretrainedConfig``, a ``PreTrainedModel`` subclass, or a hub id already in
        the local cache (read with ``local_files_only``: nothing is downloaded); the class is
        the config's ``architectures``, else the causal-LM, seq2seq or base Auto mapping of its
        ``model_type``. None: no ``attn_implementation`` is set for ``"auto"`` (Transformers'
        default, sdpa where the class supports it, else eager, is what never fails to load),
        and the reason names the device's best.
    :param purpose: ``"inference"`` (default) or ``"training"``: training also refuses what
        fails in the backward pass (flex attention on CPU and MPS, flex with attention
        dropout), and ``dtype="auto"`` loads float32 weights (the master copy under mixed
        precision; ``hwbackends.accelerate.training_plan`` plans load and training together).
        Any other value raises ``UnsupportedSettingError``.
    :raises UnsupportedSettingError: when ``attention``, ``dtype`` or ``kernels`` cannot work
        here, or is not a value it takes.
    :raises ModelError: when ``model`` is not a model folder, names a model type the installed
        Transformers does not know, or is a hub id that is not in the local cache.
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
        model=model,
        purpose=purpose,
    ).kwargs


def pipeline_kwargs(
    *,
    model: Any = None,
    backend: str | Backend | None = None,
    device: Device | int | None = None,
    attention: str = "auto",
    kernels: bool | str = "auto",
    quantization: Any = None,
    dtype: Any = "auto",
    env: Mapping[str, str] | None = None,
    host: Host | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``transformers.pipeline`` on this hardware.

    ``pipeline()`` takes ``device_map`` and ``dtype`` itself, and hands the model's own
    settings to ``from_pretrained`` only through ``model_kwargs``: an ``attn_implementation``
    passed to it directly is dropped without a warning. So ``attn_implementation``,
    ``use_kernels`` and ``quantization_config`` go into ``model_kwargs``::

        path = "path/to/model"
        pipe = pipeline("text-generation", model=path, **pipeline_kwargs(model=path))

    Every parameter means what it means for ``pretrained_kwargs``; so do the errors.

    :param model: the model the pipeline will load (``pretrained_kwargs``'s ``model``).
    :param backend: the backend to plan for.
    :param device: the device to load onto.
    :param attention: ``"auto"`` or the ``attn_implementation`` asked for.
    :param kernels: ``"auto"``, True or False (``use_kernels`` only with True).
    :param quantization: a method name or a quantization config to check, or None.
    :param dtype: ``"auto"``, or the weights' dtype.
    :param env: the environment to read; None: ``os.environ``.
    :param host: the machine to plan for; None: this one (or ``HWBACKENDS_HOST``'s file).
    """
    kw = pretrained_kwargs(
        model=model,
        backend=backend,
        device=device,
        attention=attention,
        kernels=kernels,
        quantization=quantization,
        dtype=dtype,
        env=env,
        host=host,
    )
    out: dict[str, Any] = {"device_map": kw.pop("device_map"), "dtype": kw.pop("dtype")}
    if kw:
        out["model_kwargs"] = kw
    return out
