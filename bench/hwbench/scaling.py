"""How discovery grows with installed distributions (100 -> 5,000) and plugins (10 -> 200).

For every synthetic site directory (appended to ``sys.path`` of a fresh venv interpreter):

* fresh processes, round-robin over every (tree, case) pair:
  ``floor`` (only the ``sys.path`` append), ``core_import``
  (+ ``import hwbackends._discovery.scan``),
  ``scan`` (+ ``discover()``), ``entry_points`` (``importlib.metadata.entry_points(group=)``
  instead), ``current`` (``import hwbackends; hwbackends.current()`` with the selection cache
  bypassed: discovery, then every plugin imported and probed) and ``current_cached`` (the same
  with a warm selection cache);
* in one more process per tree: the per-call cost of each discovery function.

"Discovery adds" is ``scan - core_import``: what the scan costs on top of importing the core.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .proc import (
    BENCH_DIR,
    NO_CACHE,
    Summary,
    clean_env,
    run_capture,
    spawn,
    summarize,
    temp_dir,
)
from .synth import SynthTree, build_tree

__all__ = ["FULL_GRID", "QUICK_GRID", "ScalingResult", "TreeCache", "fit_growth", "run_scaling"]

GROUP = "hwbackends.backends"
FULL_GRID: tuple[tuple[int, int], ...] = (
    (0, 0),
    *((n, p) for n in (100, 1000, 5000) for p in (10, 50, 200)),
)
QUICK_GRID: tuple[tuple[int, int], ...] = ((0, 0), (100, 10), (1000, 10), (5000, 10), (1000, 200))

_CASES: dict[str, str] = {
    "floor": "",
    "core_import": "import hwbackends._discovery.scan",
    "scan": "import hwbackends._discovery.scan as d; d.discover()",
    "entry_points": f"from importlib.metadata import entry_points; entry_points(group={GROUP!r})",
    "current": "import hwbackends; hwbackends.current()",
    "current_cached": "import hwbackends; hwbackends.current()",
}


def _env(tree: SynthTree, case: str) -> dict[str, str]:
    """Every case bypasses the selection cache except ``current_cached``, which has a cache
    folder of its own per tree (the cache holds one answer per interpreter; trees sharing one
    would overwrite each other's and miss every time)."""
    if case == "current_cached":
        return clean_env(
            {"XDG_CACHE_HOME": str(temp_dir(f"cache-{tree.n_dists}-{tree.n_plugins}"))}
        )
    return clean_env(NO_CACHE)


class TreeCache:
    """Synthetic trees, built once per invocation in one temp dir and removed at the end."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="hwbench-site-")
        self._trees: dict[tuple[int, int], SynthTree] = {}

    def get(self, n_dists: int, n_plugins: int) -> SynthTree:
        key = (n_dists, n_plugins)
        if key not in self._trees:
            root = Path(self._tmp.name) / f"site-{n_dists}d-{n_plugins}p"
            self._trees[key] = build_tree(root, n_dists, n_plugins)
        return self._trees[key]

    def close(self) -> None:
        self._tmp.cleanup()


@dataclass
class ScalingResult:
    rounds: int
    trees: list[SynthTree]
    wall_ms: dict[str, dict[str, Summary]]  # tree key -> case -> summary
    percall: dict[str, dict[str, Any]]  # tree key -> child JSON
    build_s: float

    def added(self, key: str, case: str, base: str) -> float:
        w = self.wall_ms[key]
        return w[case].median - w[base].median

    def to_dict(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "build_s": round(self.build_s, 2),
            "trees": {
                t.key: {
                    "n_dists": t.n_dists,
                    "n_plugins": t.n_plugins,
                    "dists_on_path": self.percall[t.key].get("dists_on_path"),
                    "wall_ms": {c: s.to_dict() for c, s in self.wall_ms[t.key].items()},
                    "discovery_added_ms": round(self.added(t.key, "scan", "core_import"), 3),
                    "entry_points_added_ms": round(self.added(t.key, "entry_points", "floor"), 3),
                    "current_added_ms": round(self.added(t.key, "current", "floor"), 3),
                    "current_cached_added_ms": round(
                        self.added(t.key, "current_cached", "floor"), 3
                    ),
                    "percall": self.percall[t.key],
                }
                for t in self.trees
            },
        }


def _code(tree: SynthTree, body: str) -> str:
    pre = f"import sys; sys.path.append({str(tree.path)!r})"
    return f"{pre}; {body}" if body else pre


def run_scaling(
    python: str,
    grid: Sequence[tuple[int, int]],
    rounds: int,
    cache: TreeCache,
    *,
    percall_budget_s: float = 0.3,
    log: Callable[[str], None] = print,
) -> ScalingResult:
    import time

    t0 = time.perf_counter()
    trees = [cache.get(n, p) for n, p in grid]
    build_s = time.perf_counter() - t0
    log(f"  built {len(trees)} synthetic site dirs in {build_s:.1f} s")
    pairs = [(t, c) for t in trees for c in _CASES]
    envs = {(t.key, c): _env(t, c) for t, c in pairs}
    for t, c in pairs:  # warm-up: bytecode, dentry and page cache, the selection caches
        spawn([python, "-c", _code(t, _CASES[c])], envs[(t.key, c)])
    samples: dict[tuple[str, str], list[float]] = {(t.key, c): [] for t, c in pairs}
    for r in range(rounds):
        k = (r * 7) % len(pairs)
        for t, c in pairs[k:] + pairs[:k]:
            run = spawn([python, "-c", _code(t, _CASES[c])], envs[(t.key, c)])
            samples[(t.key, c)].append(run.wall_s * 1000)
        log(f"  round {r + 1}/{rounds}")
    wall: dict[str, dict[str, Summary]] = {t.key: {} for t in trees}
    for (key, c), xs in samples.items():
        wall[key][c] = summarize(xs)
    child = str(BENCH_DIR / "hwbench" / "children" / "discovery_percall.py")
    percall: dict[str, dict[str, Any]] = {}
    for t in trees:
        text = run_capture([python, child, str(t.path), str(percall_budget_s)], clean_env(NO_CACHE))
        percall[t.key] = json.loads(text)
    return ScalingResult(rounds, trees, wall, percall, build_s)


def fit_growth(points: Sequence[tuple[int, float]]) -> dict[str, Any]:
    """Least-squares line ms = a + b * dists, segment slopes, and the log-log exponent.

    ``points`` are (distributions on the path, added ms). Growth counts as "linear or better"
    when the last segment's slope is at most 1.25x the first one's (noise allowance) or the
    log-log exponent of the last segment is at most 1.1.
    """
    pts = sorted(points)
    n = len(pts)
    if n < 2:
        return {}
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    b = sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else 0.0
    a = my - b * mx
    seg = [
        (pts[i][0], pts[i + 1][0], (pts[i + 1][1] - pts[i][1]) / (pts[i + 1][0] - pts[i][0]) * 1000)
        for i in range(n - 1)
        if pts[i + 1][0] != pts[i][0]
    ]
    (x1, y1), (x2, y2) = pts[-2], pts[-1]
    exponent = (
        math.log(y2 / y1) / math.log(x2 / x1) if y1 > 0 and y2 > 0 and x1 > 0 else float("nan")
    )
    linear_or_better = bool(seg) and (
        seg[-1][2] <= 1.25 * max(seg[0][2], 1e-9) or (not math.isnan(exponent) and exponent <= 1.1)
    )
    return {
        "ms_per_1000_dists": round(b * 1000, 3),
        "intercept_ms": round(a, 3),
        "segments": [{"from": x0, "to": x1_, "ms_per_1000": round(s, 3)} for x0, x1_, s in seg],
        "loglog_exponent_last": round(exponent, 3) if not math.isnan(exponent) else None,
        "linear_or_better": linear_or_better,
    }
