"""Hub kernels: whether the kernels integration works here (``KernelsStatus``), and
``use_kernels``: set only on the user's opt-in, for a model with a layer the installed
kernels map for the device, and only where its hub kernels can load: the Hub is allowed, or
every repository they come from is already in the local cache. Said plainly otherwise: it
makes ``from_pretrained`` fetch and run code from the Hub.

The layer -> repository mapping is the installed Transformers' own object
(``transformers.integrations.hub_kernels.get_kernel_mapping_transformers()``), each layer's
repository picked for the device key and the kernelize mode as ``kernels`` picks it
(``kernels/layer/repos.py::_select_repository``). The cache is looked up as ``kernels`` looks
it up offline (``kernels/resolver.py::resolve_hub_cache_kernel``): ``snapshot_download(...,
repo_type="kernel", local_files_only=True)``, which never touches the network.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from hwbackends._base.errors import UnsupportedSettingError
from hwbackends._base.record import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hwbackends._base.protocol import Capabilities
    from hwbackends._integrations.model import ModelFacts
    from hwbackends._selection.target import Target

__all__ = ["HubKernel", "KernelsStatus", "hub_cache_dir", "hub_kernels_for", "kernels_status"]


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
    offline: bool = False
    """True when the integration works but the Hub is off (``HF_HUB_OFFLINE`` /
    ``TRANSFORMERS_OFFLINE``): hub kernels load only from the local cache."""

    def to_dict(self) -> dict[str, Any]:
        """This status as JSON-able data."""
        return {
            "available": self.available,
            "reason": self.reason,
            "device_key": self.device_key,
            "transformers": self.transformers,
            "kernels": self.kernels,
            "offline": self.offline,
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
        why = "hub kernels cannot be fetched: HF_HUB_OFFLINE is set"
        return KernelsStatus(False, why, key, tv, kv, offline=True)
    return KernelsStatus(True, state.reason, key, tv, kv)


@frozen
class HubKernel:
    """One repository a layer's hub kernel comes from, and whether it is in the local cache."""

    layer: str
    """The layer name the model marks (``RMSNorm``)."""
    repo_id: str
    """The hub repository (``kernels-community/liger-kernels``)."""
    revision: str
    """The revision ``kernels`` loads: ``v<N>`` (the branch of major version N) or a pin."""
    cached: bool
    """True when ``kernels`` can load it from the local cache: the snapshot of that revision,
    with a build for this system."""
    gap: str = ""
    """What the cache lacks when it cannot (``no snapshot of v1``); empty when cached."""

    def download(self) -> str:
        """The command that puts this revision in the cache (``hf``, from huggingface_hub)."""
        return f"hf download {self.repo_id} --repo-type kernel --revision {self.revision}"

    def to_dict(self) -> dict[str, Any]:
        """This kernel as JSON-able data."""
        return {
            "layer": self.layer,
            "repo_id": self.repo_id,
            "revision": self.revision,
            "cached": self.cached,
            "gap": self.gap,
        }


def hub_cache_dir(env: Mapping[str, str]) -> str:
    """The folder ``kernels`` finds hub kernels in: ``KERNELS_CACHE`` (kernels/hf_hub.py
    ``_get_cache_dir``), else huggingface_hub's ``HF_HUB_CACHE`` with its fallbacks
    (``HUGGINGFACE_HUB_CACHE``, ``HF_HOME``/hub, ``XDG_CACHE_HOME``/huggingface/hub,
    ``~/.cache``/huggingface/hub; huggingface_hub/constants.py), read from ``env``.

    :param env: the environment the load will run under.
    """
    if env.get("KERNELS_CACHE"):
        return env["KERNELS_CACHE"]
    home = env.get("HF_HOME")
    if home is None:
        xdg = env.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache"))
        home = os.path.join(xdg, "huggingface")
    hub = env.get("HF_HUB_CACHE", env.get("HUGGINGFACE_HUB_CACHE", os.path.join(home, "hub")))
    return os.path.expandvars(os.path.expanduser(hub))


def _cache_gap(repo_id: str, revision: str, cache: str) -> str:
    """What the local cache lacks for ``kernels`` to load this revision offline, as
    ``resolve_hub_cache_kernel`` looks for it (the snapshot, a build variant for this
    system, its ``metadata.json``); empty when nothing."""
    from pathlib import Path

    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError
    from kernels.variants import get_variants_local, resolve_variant  # type: ignore[import-untyped]

    try:
        snap = snapshot_download(
            repo_id, repo_type="kernel", revision=revision, cache_dir=cache, local_files_only=True
        )
    except (LocalEntryNotFoundError, OSError):
        return f"no snapshot of {revision}"
    variant, _ = resolve_variant(get_variants_local(Path(snap) / "build"))
    if variant is None:
        return f"its {revision} snapshot has no build for this system"
    if not (Path(snap) / "build" / variant.variant_str / "metadata.json").is_file():
        return f"its {revision} build {variant.variant_str} has no metadata.json"
    return ""


def _modes(training: bool) -> list[Any]:
    from kernels import Mode  # type: ignore[import-untyped]

    # from_pretrained kernelizes the model it returns in eval mode (INFERENCE); the Trainer's
    # model.train() kernelizes again in TRAINING mode (transformers modeling_utils.py
    # PreTrainedModel.train -> set_use_kernels -> hub_kernels.kernelize)
    return [Mode.INFERENCE, Mode.TRAINING] if training else [Mode.INFERENCE]


def _repos_of(entry: Any, modes: list[Any]) -> list[Any]:
    """The repositories ``kernels`` selects from one device's entry for each mode."""
    from kernels.layer.repos import _select_repository  # type: ignore[import-untyped]

    if not isinstance(entry, Mapping):
        return [entry]  # one repository for every mode (registered as Mode.FALLBACK)
    out = []
    for mode in modes:
        picked = _select_repository(dict(entry), mode=mode)
        if picked is not None and picked[0] not in out:
            out.append(picked[0])
    return out


def hub_kernels_for(
    device_key: str, layers: tuple[str, ...], env: Mapping[str, str], *, training: bool = False
) -> tuple[HubKernel, ...]:
    """The hub repositories ``use_kernels=True`` loads for ``layers`` on a device key, each
    with its cache state, from the installed Transformers' mapping object.

    A layer with no repository for this device in the modes it runs in is left out. Where a
    device key has entries for several capability ranges (``Device(type="cuda",
    properties=CUDAProperties(...))``), every one is listed: the device's capability already
    chose the layers (``Capabilities.kernel_layers``), any of them serves it.

    :param device_key: the ``kernels`` device key (``cuda``, ``rocm``, ``cpu``, ...).
    :param layers: the layer names to look up.
    :param env: the environment the load runs under (its cache variables).
    :param training: True when the model will also be trained (TRAINING mode too).
    :raises ImportError: when the installed Transformers has no kernels mapping (kernels
        missing or an incompatible release).
    """
    from transformers.integrations import hub_kernels

    mapping = hub_kernels.get_kernel_mapping_transformers()
    cache = hub_cache_dir(env)
    modes = _modes(training)
    out: list[HubKernel] = []
    for layer in layers:
        for device, entry in (mapping.get(layer) or {}).items():
            if getattr(device, "type", device) != device_key:
                continue
            for repo in _repos_of(entry, modes):
                repo_id = getattr(repo, "_repo_id", None)
                if not isinstance(repo_id, str):
                    continue  # a local repository: no hub, nothing to cache
                rev = getattr(repo, "_revision", None) or f"v{getattr(repo, '_version', 1)}"
                gap = _cache_gap(repo_id, str(rev), cache)
                out.append(HubKernel(layer, repo_id, str(rev), not gap, gap))
    return tuple(dict.fromkeys(out))


def _served(kernels: tuple[HubKernel, ...]) -> tuple[str, ...]:
    """The layers with at least one of their repositories in the cache."""
    return tuple(dict.fromkeys(k.layer for k in kernels if k.cached))


def _describe(kernels: tuple[HubKernel, ...], *, offline: bool) -> str:
    repos = sorted({(k.repo_id, k.revision, k.gap) for k in kernels})
    listed = ", ".join(f"{r}@{v} ({f'not cached: {g}' if g else 'cached'})" for r, v, g in repos)
    if offline:
        return f"from {listed}; offline, only cached ones load"
    return f"from {listed}; what is not cached is downloaded from the Hub"


@frozen
class _Need:
    """What ``use_kernels=True`` would load here and why it cannot, if it cannot."""

    layers: tuple[str, ...]
    would: str
    problem: str | None
    fix: str
    kernels: tuple[HubKernel, ...] | None


def _need(
    t: Target,
    caps: Capabilities,
    kstat: KernelsStatus,
    facts: ModelFacts | None,
    *,
    read_repos: bool,
    training: bool,
) -> _Need:
    layers = caps.kernel_layers
    if facts is not None:
        layers = tuple(x for x in layers if x in facts.kernel_layers)
    whose = f"{facts.class_name}'s layers" if facts is not None else "layers"
    key = kstat.device_key
    fix = "install a kernels release that transformers accepts, or pass kernels=False"
    problem = None if kstat.available or kstat.offline else kstat.reason
    hub: tuple[HubKernel, ...] | None = None
    if layers and key is not None and problem is None and read_repos:
        hub, problem = _read_hub(key, layers, t.env, training)
        if hub is not None:
            layers = tuple(dict.fromkeys(k.layer for k in hub))
    if not layers:
        would = (
            f"no {whose} map to a hub kernel for kernels device key {key!r} "
            f"on {caps.arch or caps.device_type}, so use_kernels=True would do nothing"
        )
        if problem is None:
            problem, fix = would, "pass kernels=False: there is nothing to swap"
        return _Need(layers, would, problem, fix, hub)
    would = f"use_kernels=True would swap {whose} {', '.join(layers)} for hub kernels " + (
        _describe(hub, offline=kstat.offline)
        if hub is not None
        else f"(kernels device key {key!r}), fetched and run from the Hub"
    )
    if problem is None and kstat.offline and hub is not None:
        problem, fix = _offline_gap(hub, t.env) or (None, fix)
    return _Need(layers, would, problem, fix, hub)


def _read_hub(
    key: str, layers: tuple[str, ...], env: Mapping[str, str], training: bool
) -> tuple[tuple[HubKernel, ...] | None, str | None]:
    """``hub_kernels_for``, or why the mapping cannot be read."""
    try:
        return hub_kernels_for(key, layers, env, training=training), None
    except (ImportError, AttributeError) as exc:
        return None, f"the installed Transformers' kernel mapping cannot be read ({exc})"


def _offline_gap(hub: tuple[HubKernel, ...], env: Mapping[str, str]) -> tuple[str, str] | None:
    """With the Hub off: the layers whose kernels are not in the cache, and the fix."""
    served = _served(hub)
    missing = [k for k in hub if k.layer not in served]
    if not missing:
        return None
    repos = sorted({f"{k.repo_id} ({k.gap})" for k in missing})
    problem = (
        f"HF_HUB_OFFLINE is set and {', '.join(sorted({k.layer for k in missing}))} "
        f"need {', '.join(repos)}, not in the local cache {hub_cache_dir(env)}"
    )
    fix = "download them first (" + "; ".join(sorted({k.download() for k in missing}))
    return problem, fix + "), or unset HF_HUB_OFFLINE, or pass kernels=False"


def _kernels_choice(
    t: Target,
    caps: Capabilities,
    kstat: KernelsStatus,
    kernels: bool | str,
    facts: ModelFacts | None,
    kwargs: dict[str, Any],
    reasons: dict[str, str],
    *,
    training: bool = False,
) -> tuple[HubKernel, ...] | None:
    """``use_kernels=True`` only on the user's opt-in (``kernels=True``): it makes
    ``from_pretrained`` fetch and run code from the Hub. Offline, only when every layer's
    kernel is in the local cache. Returns the hub kernels it would load, when it read them."""
    if kernels is False:
        return None
    # the mapping object needs torch and kernels imported: read it when asked for, or when
    # the model's class is loaded already (torch is) and the cache decides the answer
    read = kernels is True or (kstat.offline and facts is not None)
    need = _need(t, caps, kstat, facts, read_repos=read, training=training)
    if kernels == "auto":
        reasons["use_kernels"] = (
            f"not enabled: hub kernels run code from the Hub, so only on opt-in "
            f"(pass kernels=True); {need.would}; {kstat.reason}"
        )
        return need.kernels
    if need.problem is not None:
        raise UnsupportedSettingError(
            f"use_kernels was requested but cannot work here: {need.problem}",
            "a backend with a kernels device key, a coherent transformers/kernels pair, a "
            "model layer the installed kernels map for this device, and the kernels cached "
            "or the Hub allowed",
            need.fix,
        )
    kwargs["use_kernels"] = True
    reasons["use_kernels"] = (
        f"opted in (kernels=True): {need.would}; {kstat.reason}; they help prefill and large "
        "batches, measure before relying on them for small-batch decoding"
    )
    return need.kernels
