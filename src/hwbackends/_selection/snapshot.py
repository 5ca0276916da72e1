"""One snapshot of the environment per answer: what every public call reads ``os.environ``
through, once. This module imports only builtins (the selection cache's path)."""

from __future__ import annotations

import os


def environ_snapshot() -> dict[str, str]:
    """``os.environ`` as it is at one instant: one copy of its data (a C-level dict copy,
    which no other thread's write can interleave with), then decoded. A public call reads the
    environment through this once and answers from that copy; the cache's key is made of the
    same copy (``os.environ`` read twice can see two values under a concurrent writer)."""
    data = getattr(os.environ, "_data", None)
    if not isinstance(data, dict):  # pragma: no cover - another Python's os.environ
        return dict(os.environ)
    raw = data.copy()
    key, value = os.environ.decodekey, os.environ.decodevalue
    return {key(k): value(v) for k, v in raw.items()}
