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


#: The trees being read as another machine's root (``--root DIR``), as their paths were given:
#: a path under one has its symbolic links resolved inside it (``in_root``). Process-wide, not
#: per thread, because plugin hooks run on the guard's worker thread; a path outside every
#: such tree is read as it is, so a reader of this machine in another thread is unaffected.
_ROOTS: dict[str, int] = {}


def confine(root: str) -> str | None:
    """Start reading ``root`` as a machine's root: links under it stay inside it. Returns the
    key to pass to ``release``; None for ``/`` (this machine, read as it is)."""
    key = root.rstrip("/")
    if not key or os.path.realpath(root) == "/":
        return None
    _ROOTS[key] = _ROOTS.get(key, 0) + 1
    return key


def release(key: str | None) -> None:
    """End one ``confine`` of that tree."""
    if key is not None and key in _ROOTS:
        _ROOTS[key] -= 1
        if not _ROOTS[key]:
            del _ROOTS[key]


def in_root(path: str) -> str | None:
    """``path`` with every symbolic link under a confined root resolved as a chroot would: an
    absolute target starts again at the root, ``..`` stops there, so a copied tree (whose
    ``/sys/bus/pci/devices`` links or ``/usr/share/hwdata/pci.ids`` may be absolute) is read,
    never this machine's files. Paths outside confined roots come back unchanged; None for a
    loop of links (more than 40, the kernel's limit)."""
    if not _ROOTS:
        return path
    root = next((r for r in _ROOTS if path.startswith(r + "/")), None)
    if root is None:
        return path
    parts = [p for p in path[len(root) :].split("/") if p not in ("", ".")]
    done: list[str] = []
    links = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        try:
            target = os.readlink(os.path.join(root, *done, part))
        except (OSError, ValueError):  # not a link, or absent: the open decides
            done.append(part)
            continue
        links += 1
        if links > 40:
            return None
        if target.startswith("/"):
            done = []
        parts = [p for p in target.split("/") if p not in ("", ".")] + parts
    return os.path.join(root, *done)


def _readlink(path: str) -> str:
    """The target of the link ``path`` (its folder resolved by ``in_root``); OSError when
    it is no link."""
    head, _, tail = path.rpartition("/")
    folder = in_root(head) if head else head
    if folder is None:
        raise OSError(f"too many levels of symbolic links: {head}")
    return os.readlink(f"{folder}/{tail}" if head else tail)


def _islink(path: str) -> bool:
    """Whether ``path`` is a symbolic link (its folder resolved by ``in_root``)."""
    try:
        _readlink(path)
    except (OSError, ValueError):
        return False
    return True


def _read_text(path: str, limit: int = 1 << 16) -> str | None:
    """A regular file's text, at most ``limit`` characters; None when it is not one.

    Opened non-blocking and checked to be a regular file first, so a FIFO or device planted
    where a sysfs file is expected cannot hang the caller. Under a confined root
    (``confine``) its links resolve inside that tree.
    """
    resolved = in_root(path)
    if resolved is None:
        return None
    path = resolved
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
    resolved = in_root(path)
    if resolved is None:
        return []
    try:
        return sorted(os.listdir(resolved))
    except (OSError, ValueError):
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
