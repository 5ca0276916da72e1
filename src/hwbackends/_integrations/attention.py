"""An explicit ``attn_implementation`` checked the way the installed Transformers checks it:
the names it registers, the flex_attention device rule, and hub kernel ids (their pattern, the
repository id, the device builds and who may publish them)."""

from __future__ import annotations

from hwbackends._base.errors import UnsupportedSettingError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hwbackends._base.protocol import Capabilities
    from hwbackends._kit.hf_tables import TransformersTables
    from hwbackends.transformers import KernelsStatus


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
