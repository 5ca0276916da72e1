"""The distributions installed on a search path, read from their ``*.dist-info`` folders.

No ``importlib.metadata``: each folder's ``METADATA`` head is read as text, once per folder
mtime."""

from __future__ import annotations

import os

from hwbackends._base.files import _listdir, _read_text, normalize_dist_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator


_DIST_CACHE: dict[tuple[tuple[str, int], ...], list[tuple[str, str, str]]] = {}


def iter_dist_infos(path: Iterable[str]) -> Iterator[tuple[str, str, str]]:
    """Yield ``(normalised name, version, dist-info dir)`` in ``sys.path`` order.

    Shared by the package reader and entry-point discovery; like importlib.metadata, a
    distribution name seen earlier on the path shadows later ones. One listing serves both
    within a process until a directory on the path changes (its mtime is in the key).
    """
    entries = list(path)
    key = tuple((e, _mtime_ns(e or ".")) for e in entries)
    found = _DIST_CACHE.get(key)
    if found is None:
        found = _DIST_CACHE[key] = list(_scan_dist_infos(entries))
    return iter(found)


def _mtime_ns(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def _scan_dist_infos(path: Iterable[str]) -> Iterator[tuple[str, str, str]]:
    seen: set[str] = set()
    for entry in path:
        base = entry or "."
        for fn in _listdir(base):
            if fn.endswith(".dist-info"):
                stem = fn[: -len(".dist-info")]
            elif fn.endswith(".egg-info"):
                stem = fn[: -len(".egg-info")]
            else:
                continue
            name, _, version = stem.partition("-")
            version = version.partition("-")[0]  # egg-info may add -pyX.Y
            norm = normalize_dist_name(name)
            if norm in seen:
                continue
            seen.add(norm)
            full = os.path.join(base, fn)
            yield norm, version or _metadata_version(full), full


def _metadata_version(info_dir: str) -> str:
    """Version from METADATA / PKG-INFO, for folders whose name carries none."""
    for meta in ("METADATA", "PKG-INFO"):
        # bounded and non-blocking: a FIFO planted on sys.path must not hang discovery
        text = _read_text(os.path.join(info_dir, meta), 1 << 16)
        if text is None:
            continue
        for line in text.splitlines():
            if line.startswith("Version:"):
                return line[len("Version:") :].strip()
            if not line.strip():
                break
    return ""


def _scan_packages(path: Iterable[str]) -> Iterator[tuple[str, str]]:
    for norm, version, _ in iter_dist_infos(path):
        yield norm, version
