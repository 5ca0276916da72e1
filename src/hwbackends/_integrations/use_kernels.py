"""``use_kernels``: set only on the user's opt-in, for a model with a layer the installed
kernels map for the device, and said plainly otherwise: it makes ``from_pretrained`` fetch and
run code from the Hub."""

from __future__ import annotations

from typing import Any

from hwbackends._base.errors import UnsupportedSettingError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hwbackends._base.protocol import Capabilities
    from hwbackends._integrations.model import ModelFacts
    from hwbackends._selection.target import Target
    from hwbackends.transformers import KernelsStatus


def _kernels_choice(
    t: Target,
    caps: Capabilities,
    kstat: KernelsStatus,
    kernels: bool | str,
    facts: ModelFacts | None,
    kwargs: dict[str, Any],
    reasons: dict[str, str],
) -> None:
    """``use_kernels=True`` only on the user's opt-in (``kernels=True``): it makes
    ``from_pretrained`` fetch and run code from the Hub."""
    if kernels is False:
        return
    layers = caps.kernel_layers
    if facts is not None:
        layers = tuple(x for x in layers if x in facts.kernel_layers)
    whose = f"{facts.class_name}'s layers" if facts is not None else "layers"
    would = (
        f"use_kernels=True would swap {whose} {', '.join(layers)} for hub kernels "
        f"(kernels device key {kstat.device_key!r}), fetched and run from the Hub"
        if layers
        else f"no {whose} map to a hub kernel for kernels device key {kstat.device_key!r} "
        f"on {caps.arch or caps.device_type}, so use_kernels=True would do nothing"
    )
    if kernels == "auto":
        reasons["use_kernels"] = (
            f"not enabled: hub kernels run code from the Hub, so only on opt-in "
            f"(pass kernels=True); {would}; {kstat.reason}"
        )
        return
    problem = None if kstat.available else kstat.reason
    fix = "install a kernels release that transformers accepts, or pass kernels=False"
    if problem is None and not layers:
        problem, fix = would, "pass kernels=False: there is nothing to swap"
    if problem is not None:
        raise UnsupportedSettingError(
            f"use_kernels was requested but cannot work here: {problem}",
            "a backend with a kernels device key, a coherent transformers/kernels pair, a "
            "model layer the installed kernels map for this device, and the kernels cached "
            "or the Hub allowed",
            fix,
        )
    kwargs["use_kernels"] = True
    reasons["use_kernels"] = (
        f"opted in (kernels=True): {would}; {kstat.reason}; they help prefill and large "
        "batches, measure before relying on them for small-batch decoding"
    )
