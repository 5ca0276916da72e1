"""Checking the arguments of the public functions: a wrong type is an ``ArgumentError``
(a ``HwBackendsError`` and a ``TypeError``) that names the argument, what it takes and the
fix, not an ``AttributeError`` from deep inside."""

from __future__ import annotations

# collections.abc's own module: importing collections.abc imports collections (1 ms)
from _collections_abc import Mapping

from hwbackends._base.errors import ArgumentError

__all__ = ["check_count", "check_env", "check_name"]

#: The most processes one node's launch plan describes: beyond any machine's cores (the
#: largest have under 1,000 hardware threads), and the plan lists every rank.
MAX_PROCESSES_PER_NODE = 4096
#: The most nodes a launch plan describes (the largest clusters have tens of thousands).
MAX_NODES = 1 << 20


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"a {type(value).__name__}"


def check_env(env: object, where: str = "") -> None:
    """``env`` is None or a mapping of names to string values (``os.environ``, a dict)."""
    if env is None:
        return
    if not isinstance(env, Mapping):
        raise ArgumentError(
            f"{where}(env={_shown(env)}): env is a {type(env).__name__}, not a mapping"
            if where
            else f"env={_shown(env)} is a {type(env).__name__}, not a mapping",
            "None (this process's environment) or a mapping of names to values, such as "
            "os.environ or {'CUDA_VISIBLE_DEVICES': '0'}",
            "pass env=dict(os.environ, CUDA_VISIBLE_DEVICES='0')"
            if not isinstance(env, (list, tuple))
            else "pass env=dict(item.split('=', 1) for item in items)",
        )
    bad = next(
        ((k, v) for k, v in env.items() if not (isinstance(k, str) and isinstance(v, str))), None
    )
    if bad is not None:
        raise ArgumentError(
            f"{where or 'env'}: the entry {bad[0]!r}: {_shown(bad[1])} is not a string to a string",
            "names and values that are strings, as in os.environ (unset: leave the name out)",
            f"pass {bad[0]!r}: {str(bad[1])!r}",
        )


def check_name(value: object, argument: str, where: str, example: str) -> None:
    """``value`` is a string (a backend name and the like)."""
    if not isinstance(value, str):
        raise ArgumentError(
            f"{where}({argument}={_shown(value)}): {argument} is a {type(value).__name__}",
            f"a string such as {example!r}",
            f"pass {argument}={example!r}",
        )


def check_count(value: object, argument: str, where: str, low: int, high: int) -> None:
    """``value`` is an int (not a bool) from ``low`` to ``high``."""
    if isinstance(value, bool) or not isinstance(value, int):
        hint = f"pass {argument}={int(value)}" if isinstance(value, str) and value.isdigit() else (
            f"pass an int, such as {argument}={low}"
        )  # fmt: skip
        raise ArgumentError(
            f"{where}({argument}={_shown(value)}): {argument} is a {type(value).__name__}",
            f"an int from {low} to {high:,}",
            hint,
        )
    if not low <= value <= high:
        raise ArgumentError(
            f"{where}({argument}={value:,}) is out of range",
            f"an int from {low} to {high:,}",
            f"pass a {argument} of at most {high:,}"
            if value > high
            else f"pass {argument}={low} or more",
        )
