"""Reading one ``entry_points.txt``: shared by discovery and the selection cache.

Builtins only, so the selection cache can check a cached answer against the installed
metadata without importing discovery.
"""

from __future__ import annotations

__all__ = ["parse_entry_points"]


def parse_entry_points(text: str, group: str) -> list[tuple[str, str]]:
    """The ``(name, value)`` pairs of one section of an ``entry_points.txt``.

    Same reading as importlib.metadata: lines are stripped, blank lines and ``#`` / ``;``
    comments are skipped, ``name = value`` split at the first ``=``.
    """
    out: list[tuple[str, str]] = []
    in_group = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line[0] == "[" and line[-1] == "]":
            in_group = line[1:-1].strip() == group
            continue
        if in_group:
            name, sep, value = line.partition("=")
            if sep:
                out.append((name.strip(), value.strip()))
    return out
