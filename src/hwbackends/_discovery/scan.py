"""Find the entry points of one group without importing ``importlib.metadata``.

``importlib.metadata`` costs tens of milliseconds to import and reads every distribution's
``entry_points.txt`` before filtering by group (measured against this scan in bench/README.md).
Here ``sys.path`` is listed directly, each ``*.dist-info`` / ``*.egg-info`` folder's
``entry_points.txt`` is read, and only files whose text names the group are parsed. As in
``importlib.metadata``, the first distribution of a normalised name on the path shadows later
ones. Zip files, eggs on the path and foreign import finders fall back to ``importlib.metadata``.
"""

from __future__ import annotations

import os
import sys

from hwbackends._base.files import _read_text
from hwbackends._base.record import field, frozen
from hwbackends._discovery.dists import iter_dist_infos
from hwbackends._discovery.entry_points import parse_entry_points

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "GROUP",
    "EntryPointSpec",
    "discover",
    "discover_with_importlib",
    "fast_scan_possible",
    "parse_entry_points",
]

GROUP = "hwbackends.backends"


@frozen
class EntryPointSpec:
    """An entry point as declared: ``name = module:attr`` by distribution ``dist``."""

    name: str
    value: str
    dist: str
    version: str
    # the *.dist-info folder it was read from ("" when importlib.metadata found it)
    source: str = field(default="", compare=False)

    @property
    def module(self) -> str:
        return self.value.partition(":")[0].strip()

    @property
    def attr(self) -> str:
        return self.value.partition(":")[2].partition("[")[0].strip()

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "value": self.value, "dist": self.dist, "version": self.version}


def fast_scan_possible(path: Sequence[str], env: Mapping[str, str]) -> bool:
    """Whether the direct scan sees everything ``importlib.metadata`` would."""
    if env.get("HWBACKENDS_DISCOVERY", "").lower() == "importlib":
        return False
    for entry in path:
        if entry and os.path.isfile(entry):  # a zip or egg file on the path
            return False
    # A finder other than the standard ones may provide distributions of its own.
    for finder in sys.meta_path:
        mod = getattr(finder, "__module__", "") or ""
        if mod.startswith(("_frozen_importlib", "importlib", "zipimport", "_distutils_hack")):
            continue
        if mod.startswith("__editable__") or "editable" in mod:
            continue  # editable-install finders map modules; dists stay in dist-info folders
        if hasattr(finder, "find_distributions"):
            return False
    return True


def _scan(path: Iterable[str], group: str) -> list[EntryPointSpec]:
    marker = f"[{group}]"
    found: list[EntryPointSpec] = []
    for norm, version, info_dir in iter_dist_infos(path):
        # bounded and non-blocking: a FIFO or a huge file planted on sys.path is skipped
        text = _read_text(os.path.join(info_dir, "entry_points.txt"), 1 << 20)
        if text is None or marker not in text:
            continue
        for name, value in parse_entry_points(text, group):
            found.append(EntryPointSpec(name, value, norm, version, source=info_dir))
    return found


def discover_with_importlib(
    path: Sequence[str] | None = None, group: str = GROUP
) -> list[EntryPointSpec]:
    """The standard route, used as a fallback and by the tests as the oracle."""
    from importlib import metadata

    from hwbackends._base.files import normalize_dist_name

    dists = (
        metadata.distributions(path=list(path)) if path is not None else metadata.distributions()
    )
    found: list[EntryPointSpec] = []
    seen: set[str] = set()
    for dist in dists:
        # _normalized_name comes from the folder name (what entry_points() dedups on);
        # reading METADATA for every distribution is 4x slower.
        fast_name = getattr(dist, "_normalized_name", None)
        name = normalize_dist_name(fast_name or dist.metadata["Name"] or "")
        if name in seen:
            continue
        seen.add(name)
        for ep in dist.entry_points:
            if ep.group == group:
                found.append(EntryPointSpec(ep.name, ep.value, name, dist.version or ""))
    return found


def discover(
    path: Sequence[str] | None = None,
    group: str = GROUP,
    env: Mapping[str, str] | None = None,
) -> tuple[list[EntryPointSpec], str]:
    """Entry points of ``group`` and the method used (``"scan"`` or ``"importlib"``)."""
    search = list(sys.path if path is None else path)
    if fast_scan_possible(search, os.environ if env is None else env):
        return _scan(search, group), "scan"
    return discover_with_importlib(search, group), "importlib"
