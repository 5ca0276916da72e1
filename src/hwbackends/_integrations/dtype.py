"""The weights' dtype: the device's load dtype, the one every device a spread model spans
runs, or the one asked for, checked against each device's dtypes."""

from __future__ import annotations

from typing import Any

from hwbackends._base.errors import UnsupportedSettingError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hwbackends._base.protocol import Capabilities
    from hwbackends._selection.target import Target

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


def _torch_dtype(name: str) -> Any:
    try:
        import torch
    except ImportError:
        return name  # from_pretrained also takes the dtype's name
    return getattr(torch, name)


def _dtype_choice(
    t: Target, caps: Capabilities, spread: list[Capabilities], dtype: Any
) -> tuple[str, str]:
    if dtype == "auto":
        name = caps.load_dtype
        src = caps.sources.get("inference_dtype") or caps.sources.get("training_precision")
        if all(c.load_dtype == name for c in spread):
            return name, f"{name}: {src or 'capability table'}"
        name = next(
            d for d in ("bfloat16", "float16", "float32")
            if all(d == c.load_dtype or (d != "bfloat16" and d in c.dtypes) for c in spread)
        )  # fmt: skip
        archs = ", ".join(sorted({c.arch or c.device_type for c in spread}))
        return name, f"{name}: the one dtype every visible device runs well ({archs})"
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
    return name, f"{name}: requested"
