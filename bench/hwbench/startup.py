"""Start-up cost of choosing a backend, against a bare interpreter and the usual alternatives.

Each case is ``python -c CODE`` in a fresh process; the cases run round-robin (one of each per
round, in a rotating order) so that machine noise lands on all of them evenly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .proc import NO_CACHE, Run, Summary, clean_env, run_capture, spawn, summarize

__all__ = ["CASES", "Case", "StartupResult", "cache_state", "discovered", "run_startup"]

GROUP = "hwbackends.backends"

# The usual way: importlib.metadata.entry_points(group=...), turned into the core's specs, and
# the very same selection code on top (loading, probing, choosing). Only discovery differs.
_ENTRY_POINTS_ROUTE = f"""
import hwbackends, hwbackends._selection.registry as _r
from hwbackends._discovery.scan import EntryPointSpec
from importlib.metadata import entry_points
def _discover(path=None, group={GROUP!r}, env=None):
    return [EntryPointSpec(e.name, e.value, e.dist.name if e.dist else '',
                           e.dist.version if e.dist else '')
            for e in entry_points(group=group)], 'entry_points'
_r.discover = _discover
"""


# A reference, not hwbackends code: the file reads that discovery and the PCI probe cannot avoid
# (list every sys.path folder, read each *.dist-info/entry_points.txt, list and read the PCI
# vendor files), with nothing imported beyond os and sys. The distance from `floor` to this is
# what the unavoidable I/O costs; everything above it is imports and Python work.
LEAN_BOUND = """
import os, sys
seen = set()
for entry in sys.path:
    base = entry or '.'
    try:
        names = os.listdir(base)
    except OSError:
        continue
    for fn in names:
        if not fn.endswith('.dist-info'):
            continue
        key = fn.partition('-')[0].lower().replace('_', '-').replace('.', '-')
        if key in seen:
            continue
        seen.add(key)
        try:
            with open(base + '/' + fn + '/entry_points.txt', encoding='utf-8') as f:
                '[hwbackends.backends]' in f.read()
        except OSError:
            pass
pci = '/sys/bus/pci/devices'
for bus in (os.listdir(pci) if os.path.isdir(pci) else ()):
    with open(pci + '/' + bus + '/vendor') as f:
        f.read()
"""


@dataclass(frozen=True)
class Case:
    key: str
    label: str
    code: str
    env: Mapping[str, str] = field(default_factory=dict)
    heavy: bool = False  # imports torch: seconds, not milliseconds


_CURRENT = "import hwbackends; hwbackends.current()"

CASES: tuple[Case, ...] = (
    Case("floor", "python -c pass", "pass"),
    Case(
        "lean_bound",
        "reference: the same file reads with only os and sys (no hwbackends)",
        LEAN_BOUND,
    ),
    Case("import", "import hwbackends (import only)", "import hwbackends"),
    Case("current", f"{_CURRENT} (default: selection cache warm)", _CURRENT),
    Case(
        "current_nocache",
        f"{_CURRENT}, HWBACKENDS_NO_CACHE=1 (full selection, direct scan)",
        _CURRENT,
        NO_CACHE,
    ),
    Case(
        "entry_points",
        "full selection, discovery by importlib.metadata.entry_points(group=)",
        _ENTRY_POINTS_ROUTE + "hwbackends.current()",
        NO_CACHE,
    ),
    Case(
        "core_importlib",
        "full selection, HWBACKENDS_DISCOVERY=importlib (the core's own fallback)",
        _CURRENT,
        {**NO_CACHE, "HWBACKENDS_DISCOVERY": "importlib"},
    ),
    Case(
        "accelerate",
        "import accelerate; accelerate.PartialState().device",
        "import accelerate; accelerate.PartialState().device",
        heavy=True,
    ),
    Case(
        "torch",
        "import torch; torch.cuda.is_available()",
        "import torch; torch.cuda.is_available()",
        heavy=True,
    ),
)


@dataclass
class StartupResult:
    rounds: int
    wall_ms: dict[str, Summary]
    labels: dict[str, str]
    skipped: dict[str, str]

    def ratio(self, a: str, b: str) -> float | None:
        if a not in self.wall_ms or b not in self.wall_ms:
            return None
        return self.wall_ms[a].median / self.wall_ms[b].median

    def to_dict(self) -> dict[str, Any]:
        floor = self.wall_ms["floor"].median
        return {
            "rounds": self.rounds,
            "cases": {
                k: {
                    "label": self.labels[k],
                    "wall_ms": s.to_dict(),
                    "ratio_to_floor": round(s.median / floor, 3),
                    "added_ms": round(s.median - floor, 3),
                }
                for k, s in self.wall_ms.items()
            },
            "skipped": self.skipped,
        }


def _argv(python: str, case: Case) -> list[str]:
    return [python, "-c", case.code]


def _usable(python: str, case: Case) -> str | None:
    """Why a case cannot run here (a missing package), or None."""
    try:
        spawn(_argv(python, case), clean_env(case.env))
    except Exception as exc:
        return str(exc).strip().splitlines()[-1]
    return None


def run_startup(
    python: str,
    rounds: int,
    *,
    cases: Sequence[Case] = CASES,
    log: Callable[[str], None] = print,
) -> StartupResult:
    """Warm every case once (bytecode and page cache), then time ``rounds`` rounds."""
    skipped: dict[str, str] = {}
    active: list[Case] = []
    for c in cases:
        why = _usable(python, c)  # doubles as the warm-up run
        if why is None:
            active.append(c)
        else:
            skipped[c.key] = why
            log(f"  skipping {c.key}: {why}")
    walls: dict[str, list[float]] = {c.key: [] for c in active}
    for r in range(rounds):
        k = r % len(active)
        for c in active[k:] + active[:k]:  # rotate the order every round
            run: Run = spawn(_argv(python, c), clean_env(c.env))
            walls[c.key].append(run.wall_s * 1000)
        if (r + 1) % max(1, rounds // 4) == 0:
            log(f"  round {r + 1}/{rounds}")
    return StartupResult(
        rounds=rounds,
        wall_ms={k: summarize(v) for k, v in walls.items()},
        labels={c.key: c.label for c in active},
        skipped=skipped,
    )


_DISCOVERED = """
import json, hwbackends
r = hwbackends.explain()
print(json.dumps({"discovery": r.discovery, "chosen": r.chosen,
    "candidates": [{"name": c.name, "origin": c.origin, "version": c.version,
                    "target": c.target, "state": c.state, "reason": c.reason}
                   for c in r.candidates]}))
"""


_CACHE_STATE = """
import hwbackends
hwbackends.current()
try:
    from hwbackends._selection import cache as _fast
    print(_fast.LAST or 'unknown')
except ImportError:
    print('no cache in this core')
"""


def cache_state(python: str) -> str:
    """What the selection cache did for the ``current`` case's environment ("hit" expected)."""
    return run_capture([python, "-c", _CACHE_STATE], clean_env()).strip()


def discovered(python: str) -> dict[str, Any]:
    """What ``hwbackends.explain()`` finds with each discovery route (they must agree)."""
    out: dict[str, Any] = {}
    routes: dict[str, tuple[str, dict[str, str]]] = {
        "scan": ("", dict(NO_CACHE)),
        "entry_points": (_ENTRY_POINTS_ROUTE, dict(NO_CACHE)),
        "core_importlib": ("", {**NO_CACHE, "HWBACKENDS_DISCOVERY": "importlib"}),
    }
    for key, (prefix, extra) in routes.items():
        text = run_capture([python, "-c", prefix + _DISCOVERED], clean_env(extra))
        out[key] = json.loads(text)
    names = {k: sorted((c["name"], c["target"]) for c in v["candidates"]) for k, v in out.items()}
    out["agree"] = len({json.dumps(v) for v in names.values()}) == 1
    return out
