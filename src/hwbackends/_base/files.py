"""Bounded reads of small text files and folder listings, and package-name normalisation.

What every reader of a machine or of installed metadata shares: regular files only, read with
a size cap and without blocking (a FIFO or a device never hangs the caller)."""

from __future__ import annotations

import os


def normalize_dist_name(name: str) -> str:
    """PEP 503 normalisation without ``re`` (it is not imported at start-up)."""
    out = name.lower().replace("_", "-").replace(".", "-")
    while "--" in out:  # runs of separators are rare: loop only then
        out = out.replace("--", "-")
    return out


def _read_text(path: str, limit: int = 1 << 16) -> str | None:
    """A regular file's text, at most ``limit`` characters; None when it is not one.

    Opened non-blocking and checked to be a regular file first, so a FIFO or device planted
    where a sysfs file is expected cannot hang the caller.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace")


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def match_node(pattern: str, name: str) -> bool:
    """Whether a ``/dev`` name (``"dri/renderD128"``) matches a declared pattern.

    A pattern is an exact name, or a name with one ``{n}`` standing for one or more ASCII
    digits: ``"acme{n}"`` matches ``acme0`` and ``acme12`` but not ``acmectl``.

    :param pattern: the declared pattern (an entry of ``BaseBackend.device_nodes``).
    :param name: the name under ``/dev``.
    """
    head, sep, tail = pattern.partition("{n}")
    if not sep:
        return name == pattern
    if len(name) <= len(head) + len(tail) or not name.startswith(head):
        return False
    if tail and not name.endswith(tail):
        return False
    middle = name[len(head) : len(name) - len(tail)]
    return middle.isascii() and middle.isdigit()
