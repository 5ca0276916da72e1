"""An explicit ``attn_implementation`` checked the way the installed Transformers checks it:
the names it registers, the flex_attention device rule, and hub kernel ids (their pattern, the
repository id, the device builds and who may publish them)."""

from __future__ import annotations

from hwbackends._base.errors import UnsupportedSettingError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from hwbackends._base.protocol import AttentionOption, Capabilities
    from hwbackends._integrations.model import ModelFacts
    from hwbackends._integrations.use_kernels import KernelsStatus
    from hwbackends._kit.hf_tables import TransformersTables
    from hwbackends._machine.host import Host


#: Device types on which Transformers refuses flex_attention: ``is_torch_flex_attn_available()``
#: is ``get_device_type() != "tpu"`` (transformers 5.22.2, utils/import_utils.py).
_FLEX_REFUSED_ON = ("tpu",)


def _attention_names(tables: TransformersTables) -> frozenset[str]:
    """Every name Transformers accepts: its registry as shipped, plus names registered in this
    process with ``AttentionInterface.register`` (seen only if Transformers is imported)."""
    import sys

    names = set(tables.attention_names)
    mu = sys.modules.get("transformers.modeling_utils")
    live = getattr(mu, "ALL_ATTENTION_FUNCTIONS", None)
    if live is not None:
        names.update(str(k) for k in live.valid_keys())
    return frozenset(names)


def _hub_attention(
    caps: Capabilities, requested: str, kernels: KernelsStatus, tables: TransformersTables
) -> str:
    """Check a hub kernel id the way Transformers will: its pattern, the repo's device builds,
    and whether the kernels integration is on. Returns the id, or raises saying which failed."""
    if not tables.is_hub_kernel(requested):
        raise UnsupportedSettingError(
            f"attn_implementation={requested!r} is not a hub kernel id Transformers accepts",
            "org/repo, optionally followed by @revision and :function, with no other '/' or "
            f"':' (the pattern {tables.hub_kernel_pattern} of Transformers' "
            "hub_kernels.is_kernel)",
            "write it as kernels-community/flash-attn2 or org/repo@v1:function",
        )
    repo_id = _hub_repo_id(requested)
    invalid = _invalid_repo_id(repo_id)
    if invalid is not None:
        raise UnsupportedSettingError(
            f"attn_implementation={requested!r} names the repository {repo_id!r}, which the Hub "
            f"refuses: {invalid} (huggingface_hub.utils.validate_repo_id)",
            "a repository id of letters, digits, '-', '_' and '.', without spaces, '--' or '..'",
            "write it as kernels-community/flash-attn2 or org/repo@v1:function",
        )
    key = kernels.device_key
    builds = tables.kernel_builds(requested)
    if builds is not None and key is not None and key not in builds:
        fits = sorted(r for r, devs in tables.kernel_devices.items() if key in devs)
        raise UnsupportedSettingError(
            f"hub kernel {requested} ships builds for {', '.join(builds)} only, not for "
            f"{key} ({caps.arch or caps.device_type}, {caps.backend}); Transformers' "
            "FLASH_ATTN_KERNEL_DEVICES says so",
            f"a repository built for {key}: " + (", ".join(fits) or "none is listed"),
            "pick one of those, or use attention='auto'",
        )
    if not kernels.available:
        raise UnsupportedSettingError(
            f"hub kernel {requested} cannot load here: {kernels.reason}",
            "a kernels device key, a kernels release the installed Transformers accepts, and "
            "Hub access",
            "use attention='auto', or fix what the reason names",
        )
    return requested


def _hub_repo_id(requested: str) -> str:
    """The repository of ``org/repo[@revision][:function]``, as Transformers splits it
    (integrations/hub_kernels.py load_and_register_attn_kernel, which strips each part)."""
    return requested.split(":")[0].partition("@")[0].strip()


def _invalid_repo_id(repo_id: str) -> str | None:
    """Why huggingface_hub's own validator refuses ``repo_id``; None when it accepts it or
    huggingface_hub is not installed (then Transformers cannot fetch kernels either)."""
    try:
        # the public path; huggingface_hub.utils re-exports without __all__, hence the ignore
        from huggingface_hub.utils import (  # type: ignore[attr-defined]
            HFValidationError,
            validate_repo_id,
        )
    except ImportError:
        return None
    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        return str(exc).rstrip(".")
    return None


#: kernels 0.17.2 hf_hub._check_trust_remote_code: without trust_remote_code only
#: repositories of publishers the Hub marks as trusted kernel publishers load;
#: kernels-community is the one Transformers' own tables use.
_TRUSTED_PUBLISHER = "kernels-community"


def _trust_rule(requested: str) -> str:
    org = _hub_repo_id(requested).split("/")[0]
    if org == _TRUSTED_PUBLISHER:
        return f"{org} is a trusted kernel publisher on the Hub"
    return (
        f"the kernels package loads hub kernels only from publishers the Hub marks as trusted "
        f"(kernels-community is one); for {org} pass allow_all_kernels=True to from_pretrained "
        "(Transformers hands it to kernels as trust_remote_code) once you trust that code, "
        "unless the model lists the kernel in _compatible_flash_implementations"
    )


# -- the steps of resolve_attention (hwbackends.transformers) ------------------------------


#: Devices where torch's FlexAttention has no backward pass
#: (torch/nn/attention/flex_attention.py, _validate_device).
_FLEX_NO_BACKWARD = ("cpu", "mps")


def _missing(packages: tuple[str, ...], host: Host) -> list[str]:
    return [p for p in packages if host.package(p) is None]


def _check_paged(requested: str, paged: bool) -> None:
    # Transformers keeps the prefix only for paged|eager (modeling_utils.py,
    # _check_and_adjust_attn_implementation) and strips it elsewhere.
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


def _check_refused(caps: Capabilities, requested: str) -> None:
    refused = caps.refused_attention
    if requested in refused:
        works = ", ".join(o.name for o in caps.attention if o.name not in refused)
        raise UnsupportedSettingError(
            f"attn_implementation={requested!r} cannot load on {caps.arch or caps.device_type} "
            f"({caps.backend}): {refused[requested]}",
            f"one of {works}",
            "pick one of those, or use attention='auto'",
        )


def _check_in_use(
    caps: Capabilities, requested: str, model: ModelFacts | None, training: bool
) -> None:
    """An explicit name the model class refuses at load, or that fails in its forward or
    backward pass here, raises."""
    where = f"{caps.arch or caps.device_type} ({caps.backend})"
    if model is not None:
        refusal = model.refusal(requested)
        if refusal is not None:
            ok = ", ".join(o.name for o in caps.attention if model.refusal(o.name) is None)
            raise UnsupportedSettingError(
                f"attn_implementation={requested!r} cannot load for {model.given}: {refusal}",
                f"one that {model.class_name} supports here: {ok}",
                "pick one of those, or use attention='auto'",
            )
    problem = _in_use_problem(caps, requested.removeprefix("paged|"), model, training)
    if problem is not None:
        raise UnsupportedSettingError(
            f"attn_implementation={requested!r} loads on {where} but fails in use: {problem}",
            "sdpa or eager, which run forward and backward on every device",
            "use attention='auto'" + ("" if training else ", or plan for another device"),
        )


def _in_use_problem(
    caps: Capabilities, impl: str, model: ModelFacts | None, training: bool
) -> str | None:
    """Why ``impl`` fails in the forward or backward pass on this device, or None."""
    if impl != "flex_attention":
        return None
    if training and caps.device_type in _FLEX_NO_BACKWARD:
        return (
            f"FlexAttention does not support backward on {caps.device_type.upper()} "
            "(torch.nn.attention.flex_attention._validate_device), so training fails"
        )
    if model is not None and model.sinks and caps.device_type == "cpu":
        return (
            f"{model.class_name} uses attention sinks, which flex attention cannot run on CPU "
            "(transformers integrations/flex_attention.py)"
        )
    if model is not None and training and model.attention_dropout > 0:
        return (
            f"{model.class_name} has attention_dropout={model.attention_dropout}, and flex "
            "attention refuses dropout in training (transformers integrations/flex_attention.py)"
        )
    return None


def _option_problem(
    opt: AttentionOption,
    caps: Capabilities,
    host: Host,
    kernels: KernelsStatus,
    requested: str,
    model: ModelFacts | None,
    training: bool,
    hub: bool,
) -> str | None:
    """Why one option of the device's table cannot serve this request, or None."""
    if opt.name in caps.refused_attention:
        return caps.refused_attention[opt.name]  # the plugin lists it and refuses it
    missing = _missing(opt.packages, host)
    if missing:
        return f"needs {', '.join(missing)} installed"
    if opt.hub_kernel and not kernels.available:
        return f"hub kernel {opt.hub_kernel}: {kernels.reason}"
    if opt.hub_kernel and requested == "auto" and not hub:
        return f"runs the hub kernel {opt.hub_kernel} (Hub code): only with kernels=True"
    if model is not None:
        return model.refusal(opt.name) or _in_use_problem(caps, opt.name, model, training)
    return None


def _skipped_for_model(why_not: Mapping[str, str]) -> str:
    if not why_not:
        return ""
    return "; passed over: " + "; ".join(f"{k}: {v}" for k, v in why_not.items())


def _registered_name(caps: Capabilities, requested: str) -> str:
    # Registered in Transformers and not a flash variant (those need the device's table):
    # Transformers' only device rule for them is flex_attention refusing TPU.
    where = f"{caps.arch or caps.device_type} ({caps.backend})"
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
    return why


def _package_first(host: Host, requested: str, cause: str | None) -> str | None:
    """A flash version the device runs but whose package is missing says so first: the
    fallback's own problem (no kernels) is secondary."""
    import re

    from hwbackends._kit.hf_facts import FLASH_PACKAGES

    m = re.fullmatch(r"flash_attention_(\d)", requested)
    if cause is None or m is None or int(m.group(1)) not in FLASH_PACKAGES:
        return cause
    pkg = FLASH_PACKAGES[int(m.group(1))]
    device_cannot = (
        "not for" in cause or "requires capability" in cause or "does not support" in cause
    )
    if host.package(pkg) is not None or device_cannot or f"{pkg} not installed" in cause:
        return cause
    return f"{pkg} not installed, and this device runs it ({cause})"


def _cannot_load(
    caps: Capabilities,
    host: Host,
    requested: str,
    why_not: Mapping[str, str],
    loadable: list[str],
) -> UnsupportedSettingError:
    """The refusal of a name the device's table cannot serve, with the real cause: a package
    missing (``why_not``, or the table's "not offered" notes) or a device that cannot."""
    import re

    works = ", ".join(
        dict.fromkeys(loadable + [o.name for o in caps.attention if o.name not in why_not])
    )
    cause = why_not.get(requested)
    if cause is None:
        # the plugin's table notes why it left a version out (flash_attention_options)
        m = re.search(
            rf"{re.escape(requested)}: (.*?)(?=; flash_attention_\d: |$)",
            caps.sources.get("attention", ""),
        )
        cause = m.group(1) if m else None
    cause = _package_first(host, requested, cause)
    where = f"{caps.arch or caps.device_type} ({caps.backend})"
    what = f"attn_implementation={requested!r} cannot load on {where}: " + (
        cause or "this device does not support it"
    )
    fix = "pick one of those, or use 'auto'"
    if cause and ("not installed" in cause or "needs " in cause):
        fix = (
            "install the package the reason names (a package is missing, not device support), "
            + fix
        )
    return UnsupportedSettingError(what, f"one of {works}", fix)
