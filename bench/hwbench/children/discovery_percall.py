"""Child: in-process cost of one discovery call, with one synthetic site dir on sys.path.

Usage: python discovery_percall.py SITE_DIR BUDGET_S. Prints one JSON object. Run as a script
(stdlib and hwbackends only), so that the parent's imports never mix with what is measured.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

GROUP = "hwbackends.backends"


def _time(fn: Callable[[], object], budget_s: float, min_calls: int = 3) -> dict[str, Any]:
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < min_calls or (
        time.perf_counter() - start < budget_s and len(samples) < 200
    ):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    steady = samples[1:]
    return {
        "first_ms": round(samples[0], 4),
        "median_ms": round(statistics.median(steady), 4),
        "min_ms": round(min(steady), 4),
        "calls": len(samples),
    }


def main() -> None:
    site, budget = sys.argv[1], float(sys.argv[2])
    sys.path.append(site)
    from importlib.metadata import entry_points

    from hwbackends._discovery import scan as _discovery
    from hwbackends._discovery.dists import iter_dist_infos

    # Timed first, so that "first_ms" is the first call in this process.
    timings = {
        "scan": _time(lambda: _discovery.discover(), budget),
        "entry_points": _time(lambda: entry_points(group=GROUP), budget),
        "core_importlib": _time(lambda: _discovery.discover_with_importlib(), budget),
    }
    n_dists = sum(1 for _ in iter_dist_infos(sys.path))
    scan, method = _discovery.discover()
    eps = entry_points(group=GROUP)
    via_core = _discovery.discover_with_importlib()
    found = {
        "scan": sorted((s.name, s.value) for s in scan),
        "entry_points": sorted((e.name, e.value) for e in eps),
        "core_importlib": sorted((s.name, s.value) for s in via_core),
    }
    out = {
        "dists_on_path": n_dists,
        "method": method,
        "found": len(found["scan"]),
        "agree": found["scan"] == found["entry_points"] == found["core_importlib"],
        **timings,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
