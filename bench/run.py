"""Run the hwbackends benchmarks: ``.venv/bin/python bench/run.py [--quick] [--json OUT]``.

Sections (all by default): start-up side by side, discovery scaling on synthetic site dirs,
device resolution on simulated hosts, peak memory of ``hwbackends env``, and a profile of
``import hwbackends; hwbackends.current()``. Results are printed as Markdown; ``--json`` also
writes everything, raw samples included; ``--readme`` rewrites the results part of
bench/README.md. No number is ever asserted: this reports, it does not test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from hwbench.proc import BENCH_DIR, ChildError, clean_env, run_capture
from hwbench.report import evaluate_goals, machine_info, markdown

SECTIONS = ("startup", "scaling", "devices", "memory", "profile")
README = BENCH_DIR / "README.md"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer rounds and trees (~1 minute)")
    p.add_argument("--json", metavar="OUT", help="write all results (with samples) as JSON")
    p.add_argument("--readme", action="store_true", help="rewrite the results in bench/README.md")
    p.add_argument("--rounds", type=int, help="start-up rounds (default 30, quick 8)")
    p.add_argument("--scaling-rounds", type=int, help="scaling rounds (default 10, quick 3)")
    p.add_argument(
        "--only", action="append", choices=SECTIONS, help="run only this section (repeatable)"
    )
    p.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter for every child process (default: this one, i.e. .venv/bin/python)",
    )
    return p.parse_args(argv)


def _ratios(st: dict[str, Any]) -> list[str]:
    c = st["cases"]
    floor = c["floor"]["wall_ms"]["median"]
    out = []
    for mine in ("current", "current_nocache"):
        if mine not in c:
            continue
        cur = c[mine]["wall_ms"]["median"]
        out.append(f"`{mine}` = {cur / floor:.2f}× `pass`")
        for key in ("entry_points", "core_importlib", "accelerate", "torch"):
            if key in c and key != mine:
                other = c[key]["wall_ms"]["median"]
                over = (other - floor) / max(cur - floor, 1e-9)
                out.append(
                    f"`{key}` / `{mine}` = {other / cur:.1f}× total wall, "
                    f"{over:.1f}× cost over the floor"
                )
    return out


def _plugins(python: str) -> tuple[list[str], dict[str, Any]]:
    from hwbench.startup import discovered

    d = discovered(python)
    names = [f"{c['name']} ({c['origin']}, {c['state']})" for c in d["scan"]["candidates"]]
    return names, d


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    quick: bool = args.quick
    sections = tuple(args.only or SECTIONS)
    python: str = args.python
    t_start = time.perf_counter()
    res: dict[str, Any] = {"quick": quick, "sections": list(sections)}
    res["command"] = "python bench/run.py " + " ".join(sys.argv[1:] if argv is None else argv)

    names, disc = _plugins(python)
    res["discovered"] = disc
    log(f"backends discovered ({disc['scan']['discovery']}): {', '.join(names)}")
    if not disc["agree"]:
        log("WARNING: the discovery routes disagree; see 'discovered' in the JSON output")

    if "startup" in sections:
        from hwbench.startup import run_startup

        rounds = args.rounds or (8 if quick else 30)
        log(f"start-up: {rounds} rounds")
        st = run_startup(python, rounds, log=log).to_dict()
        res["startup"] = st
        res["ratios"] = _ratios(st)
        from hwbench.startup import cache_state

        res["selection_cache"] = cache_state(python)
        log(f"  selection cache for the `current` case: {res['selection_cache']}")

    if "scaling" in sections:
        from hwbench.scaling import FULL_GRID, QUICK_GRID, TreeCache, fit_growth, run_scaling

        grid = QUICK_GRID if quick else FULL_GRID
        rounds = args.scaling_rounds or (3 if quick else 10)
        log(f"scaling: {len(grid)} synthetic site dirs, {rounds} rounds")
        cache = TreeCache()
        try:
            sc = run_scaling(
                python, grid, rounds, cache, percall_budget_s=0.1 if quick else 0.3, log=log
            ).to_dict()
        finally:
            cache.close()
        base = [t for t in sc["trees"].values() if t["n_plugins"] in (0, 10)]
        sc["growth_fresh_scan"] = fit_growth(
            [(t["dists_on_path"], t["discovery_added_ms"]) for t in base]
        )
        for fn in ("scan", "entry_points"):
            sc[f"growth_percall_{fn}"] = fit_growth(
                [(t["dists_on_path"], t["percall"][fn]["min_ms"]) for t in base]
            )
        res["scaling"] = sc

    if "devices" in sections:
        log("device resolution")
        child = str(BENCH_DIR / "hwbench" / "children" / "devres.py")
        repeat_s, repeats = ("0.005", "5") if quick else ("0.02", "9")
        try:
            res["devices"] = json.loads(
                run_capture([python, child, repeat_s, repeats], clean_env())
            )
        except ChildError as exc:
            res["devices"] = {"error": str(exc)}

    if "memory" in sections:
        from hwbench.memory import run_memory

        log("peak memory")
        try:
            res["memory"] = run_memory(python, 3 if quick else 7).to_dict()
        except ChildError as exc:
            res["memory"] = None
            log(f"  memory: {exc}")

    if "profile" in sections:
        from hwbench.profiling import run_profile

        log("profile")
        res["profile"] = run_profile(python, 3 if quick else 9, log=log).to_dict()

    res["machine"] = machine_info(python, names)
    res["elapsed_s"] = round(time.perf_counter() - t_start, 1)
    res["goals"] = [g.to_dict() for g in evaluate_goals(res)]
    res.setdefault("ratios", [])
    text = markdown(res)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
        log(f"wrote {args.json}")
    if args.readme:
        _update_readme(text)
        log(f"updated {README}")
    return 0


def _update_readme(text: str) -> None:
    old = README.read_text(encoding="utf-8") if README.exists() else f"{BEGIN}\n{END}\n"
    head, sep, rest = old.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise SystemExit(f"{README} has no {BEGIN} ... {END} markers")
    README.write_text(f"{head}{BEGIN}\n{text}{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
