"""Peak memory (max RSS) of ``hwbackends env`` against a bare interpreter.

The RSS of each child is its own ``ru_maxrss`` from ``wait4`` (what
``resource.getrusage(RUSAGE_CHILDREN)`` reports for a single child), taken by a tiny launcher
process (children/rss_launcher.py): a child forked by the benchmark process itself would be
charged the benchmark's own RSS at ``exec``. ``launcher_floor`` (``/bin/true`` through the same
launcher) is the smallest value this method can report.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .proc import BENCH_DIR, NO_CACHE, ChildError, Summary, clean_env, run_capture, summarize

__all__ = ["MemoryResult", "run_memory"]


@dataclass
class MemoryResult:
    rounds: int
    maxrss_kib: dict[str, Summary]
    wall_ms: dict[str, Summary]
    labels: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        floor = self.maxrss_kib["floor"].median
        return {
            "rounds": self.rounds,
            "cases": {
                k: {
                    "label": self.labels[k],
                    "maxrss_kib": s.to_dict(),
                    "added_mib": round((s.median - floor) / 1024, 2),
                    "ratio_to_floor": round(s.median / floor, 3),
                    "wall_ms": self.wall_ms[k].to_dict(),
                }
                for k, s in self.maxrss_kib.items()
            },
        }


def _sim_host(n: int) -> dict[str, Any]:
    from .children.devres import host_dict

    return host_dict(n)


def run_memory(python: str, rounds: int) -> MemoryResult:
    script = Path(python).parent / "hwbackends"
    cli: Sequence[str] = [python, str(script)] if script.is_file() else [python, "-m", "hwbackends"]
    with tempfile.TemporaryDirectory(prefix="hwbench-host-") as tmp:
        host_file = Path(tmp) / "h100x64.json"
        host_file.write_text(json.dumps(_sim_host(64)))
        cases: dict[str, tuple[str, list[str], dict[str, str]]] = {
            "floor": ("python -c pass", [python, "-c", "pass"], {}),
            "current": (
                "python -c 'import hwbackends; hwbackends.current()' (selection cache warm)",
                [python, "-c", "import hwbackends; hwbackends.current()"],
                {},
            ),
            "current_nocache": (
                "the same, HWBACKENDS_NO_CACHE=1 (full selection)",
                [python, "-c", "import hwbackends; hwbackends.current()"],
                dict(NO_CACHE),
            ),
            "env": ("hwbackends env (this machine)", [*cli, "env"], {}),
            "env_json": ("hwbackends env --json (this machine)", [*cli, "env", "--json"], {}),
            "env_sim64": (
                "hwbackends env, simulated 64-GPU host (HWBACKENDS_HOST)",
                [*cli, "env"],
                {"HWBACKENDS_HOST": str(host_file)},
            ),
            "accelerate": (
                "python -c 'import accelerate; accelerate.PartialState().device'",
                [python, "-c", "import accelerate; accelerate.PartialState().device"],
                {},
            ),
        }
        cases["launcher_floor"] = ("/bin/true (the launcher's own floor)", ["/bin/true"], {})
        launcher = [python, "-I", "-S", str(BENCH_DIR / "hwbench" / "children" / "rss_launcher.py")]

        def once(argv: Sequence[str], extra: dict[str, str]) -> tuple[float, float]:
            rc, kib, wall = run_capture([*launcher, *argv], clean_env(extra)).split()
            if rc != "0":
                raise ChildError(f"{' '.join(argv)!r} exited with {rc} (memory benchmark)")
            return float(kib), float(wall) * 1000

        for _, argv, extra in cases.values():  # warm-up
            once(argv, extra)
        rss: dict[str, list[float]] = {k: [] for k in cases}
        wall: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(rounds):
            for k, (_, argv, extra) in cases.items():
                kib, ms = once(argv, extra)
                rss[k].append(kib)
                wall[k].append(ms)
    return MemoryResult(
        rounds=rounds,
        maxrss_kib={k: summarize(v) for k, v in rss.items()},
        wall_ms={k: summarize(v) for k, v in wall.items()},
        labels={k: v[0] for k, v in cases.items()},
    )
