"""Where the start-up of ``import hwbackends; hwbackends.current()`` goes, with the selection
cache warm (``cached``) and bypassed (``full``).

* ``-X importtime`` over several runs: per module the median self and cumulative time, and the
  modules this case imports that a bare ``python -c pass`` does not;
* one cProfile run, one run with an audit hook (files opened, directories listed), one run
  that times the phases and one that times each plugin's import (children/profile_current.py).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .proc import BENCH_DIR, NO_CACHE, clean_env, run_capture, temp_dir

__all__ = ["VARIANTS", "ImportRow", "ProfileResult", "parse_importtime", "run_profile"]

CODE = "import hwbackends; hwbackends.current()"


@dataclass(frozen=True)
class ImportRow:
    module: str
    depth: int
    self_us: float
    cumulative_us: float
    parent: str | None


def parse_importtime(text: str) -> list[ImportRow]:
    """Rows of ``-X importtime`` output, with the importing (enclosing) module of each."""
    rows: list[tuple[str, int, float, float]] = []
    for line in text.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        parts = line[len("import time:") :].split("|")
        if len(parts) != 3:
            continue
        name = parts[2].rstrip()
        stripped = name.lstrip(" ")
        depth = (len(name) - len(stripped) - 1) // 2
        rows.append((stripped, depth, float(parts[0]), float(parts[1])))
    # importtime prints a module after its children; the parent of a row at depth d is the
    # next row below it at depth d - 1.
    out: list[ImportRow] = []
    for i, (mod, depth, s, c) in enumerate(rows):
        parent = next((m for m, d, _, _ in rows[i + 1 :] if d == depth - 1), None)
        out.append(ImportRow(mod, depth, s, c, parent if depth > 0 else None))
    return out


#: The two ways ``current()`` runs: a warm selection cache (the default on a known machine)
#: and the full selection (first run, changed machine, or HWBACKENDS_NO_CACHE=1).
VARIANTS: dict[str, dict[str, str]] = {"cached": {}, "full": dict(NO_CACHE)}


@dataclass
class ProfileResult:
    runs: int
    variants: dict[str, dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"code": CODE, "importtime_runs": self.runs, "variants": self.variants}


def _importtime(python: str, code: str, extra: dict[str, str]) -> list[ImportRow]:
    argv = [python, "-X", "importtime", "-c", code]
    return parse_importtime(run_capture(argv, clean_env(extra), stderr=True))


def _importtime_summary(python: str, runs: int, extra: dict[str, str]) -> dict[str, Any]:
    base = {r.module for r in _importtime(python, "pass", {})}
    per_mod: dict[str, list[tuple[float, float]]] = {}
    meta: dict[str, ImportRow] = {}
    for _ in range(runs):
        for row in _importtime(python, CODE, extra):
            if row.module in base:
                continue
            per_mod.setdefault(row.module, []).append((row.self_us, row.cumulative_us))
            meta[row.module] = row
    mods: list[dict[str, Any]] = []
    for mod, xs in per_mod.items():
        r = meta[mod]
        mods.append(
            {
                "module": mod,
                "imported_by": r.parent,
                "depth": r.depth,
                "self_ms": round(statistics.median(s for s, _ in xs) / 1000, 3),
                "cumulative_ms": round(statistics.median(c for _, c in xs) / 1000, 3),
            }
        )
    mods.sort(key=lambda m: -float(m["cumulative_ms"]))
    top = [m for m in mods if m["depth"] == 0]
    return {
        "importtime_total_ms": round(sum(float(m["cumulative_ms"]) for m in top), 3),
        "importtime_top_level": top,
        "importtime_modules": mods,
    }


def run_profile(python: str, runs: int, *, log: Callable[[str], None] = print) -> ProfileResult:
    child = str(BENCH_DIR / "hwbench" / "children" / "profile_current.py")
    out: dict[str, dict[str, Any]] = {}
    for name, base_extra in VARIANTS.items():
        # The cache keeps one answer per interpreter, and sys.path (whose first entry differs
        # between ``-c`` and a script) is part of its key: each way of starting gets its own
        # cache folder, warmed once, or the two would evict each other on every run.
        extra = {**base_extra, "XDG_CACHE_HOME": str(temp_dir(f"cache-prof-{name}-c"))}
        extra_script = {**base_extra, "XDG_CACHE_HOME": str(temp_dir(f"cache-prof-{name}-s"))}
        run_capture([python, "-c", CODE], clean_env(extra))
        run_capture([python, child, "phases"], clean_env(extra_script))
        v = _importtime_summary(python, runs, extra)
        modes: tuple[str, ...] = ("phases", "cprofile", "audit")
        if name == "full":
            modes += ("plugins",)
        for mode in modes:
            v[mode] = json.loads(run_capture([python, child, mode], clean_env(extra_script)))
        out[name] = v
        log(
            f"  {name}: importtime {v['importtime_total_ms']:.1f} ms in "
            f"{len(v['importtime_modules'])} modules not imported by `pass`"
        )
    return ProfileResult(runs, out)
