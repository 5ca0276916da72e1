"""Goals, machine facts and the Markdown tables written into bench/README.md."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["Goal", "evaluate_goals", "machine_info", "markdown"]

IGNORED_FRAMES = ("<frozen importlib", "~(<built-in method builtins.exec>)")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(python: str, plugins: list[str]) -> dict[str, Any]:
    from importlib import metadata

    def ver(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "interpreter": python,
        "platform": platform.platform(),
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "versions": {n: ver(n) for n in ("hwbackends", "torch", "transformers", "accelerate")},
        "plugins": plugins,
        "argv": sys.argv[1:],
    }


@dataclass(frozen=True)
class Goal:
    key: str
    text: str
    measured: str
    target: str
    passed: bool | None  # None: not measured in this run
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "goal": self.text,
            "measured": self.measured,
            "target": self.target,
            "result": _verdict(self.passed),
            "note": self.note,
        }


def _verdict(p: bool | None) -> str:
    return "not measured" if p is None else ("PASS" if p else "MISS")


# (case, label, the most it may cost as a multiple of `python -c pass`)
_PATHS = (
    ("current", "selection cache warm (the default on a known machine)", 1.10),
    (
        "current_nocache",
        "full selection (first run, changed machine, HWBACKENDS_NO_CACHE=1)",
        2.5,
    ),
)


def _startup_goals(cases: dict[str, Any]) -> list[Goal]:
    goals: list[Goal] = []
    floor = cases["floor"]["wall_ms"]["median"]
    for key, label, limit in _PATHS:
        if key not in cases:
            continue
        cur = cases[key]["wall_ms"]["median"]
        ratio = cur / floor
        goals.append(
            Goal(
                f"startup_vs_floor:{key}",
                "`import hwbackends; hwbackends.current()` median wall "
                f"≤ {limit:.2f}× `python -c pass` — {label}",
                f"{ratio:.2f}× ({cur:.1f} ms vs {floor:.1f} ms)",
                f"≤ {limit:.2f}×",
                ratio <= limit,
                ""
                if ratio <= limit
                else f"over by {cur - limit * floor:.1f} ms (allowed {(limit - 1) * floor:.1f} ms "
                f"over the floor; it adds {cur - floor:.1f} ms)",
            )
        )
    if "entry_points" not in cases or "current_nocache" not in cases:
        return goals
    ep = cases["entry_points"]["wall_ms"]["median"]
    cur = cases["current_nocache"]["wall_ms"]["median"]
    goals.append(
        Goal(
            "startup_vs_entry_points:current_nocache",
            "a full selection (import, discover, probe every plugin, choose) costs less than "
            "`importlib.metadata.entry_points(group=)` discovery followed by the same selection",
            f"{cur:.1f} ms vs {ep:.1f} ms ({ep / cur:.2f}× faster)",
            "below",
            cur < ep,
            "" if cur < ep else f"slower by {cur - ep:.1f} ms",
        )
    )
    return goals


def evaluate_goals(res: dict[str, Any]) -> list[Goal]:
    goals: list[Goal] = []
    st = res.get("startup")
    if st:
        goals += _startup_goals(st["cases"])
    sc = res.get("scaling")
    if sc:
        trees = sc["trees"]
        for n, limit in ((1000, 20.0), (5000, 60.0)):
            rows = [t for t in trees.values() if t["n_dists"] == n]
            if not rows:
                continue
            worst = max(rows, key=lambda t: t["discovery_added_ms"])
            pc = max(t["percall"]["scan"]["first_ms"] for t in rows)
            w = worst["discovery_added_ms"]
            goals.append(
                Goal(
                    f"discovery_{n}",
                    f"{n:,} installed distributions: discovery adds ≤ {limit:.0f} ms",
                    f"+{w:.1f} ms fresh process (worst of {len(rows)} plugin counts; "
                    f"first in-process call {pc:.1f} ms)",
                    f"≤ {limit:.0f} ms",
                    w <= limit,
                    f"margin {limit - w:.1f} ms" if w <= limit else f"over by {w - limit:.1f} ms",
                )
            )
        fit = sc.get("growth_percall_scan")
        if fit:
            goals.append(
                Goal(
                    "discovery_growth",
                    "discovery cost grows linearly or better with installed distributions",
                    f"{fit['ms_per_1000_dists']:.2f} ms per 1,000 dists in-process; last-segment "
                    f"log-log exponent {fit['loglog_exponent_last']}",
                    "linear or better",
                    bool(fit["linear_or_better"]),
                )
            )
    dv = res.get("devices")
    if dv and "sizes" in dv and "64" in dv["sizes"]:
        row = dv["sizes"]["64"]
        worst_name, worst = "", 0.0
        for env in ("unset", "indices", "uuids"):
            for fn in ("explain_visibility", "backend_devices"):
                v = row[env][fn]["median_us"]
                if v > worst:
                    worst_name, worst = f"{fn}, {env}", v
        typical = row["unset"]["backend_devices"]["median_us"]
        goals.append(
            Goal(
                "devices_64",
                "device resolution for a 64-device host ≤ 1 ms",
                f"worst {worst / 1000:.2f} ms ({worst_name}); visibility unset "
                f"{typical / 1000:.2f} ms",
                "≤ 1 ms",
                worst <= 1000,
                "" if worst <= 1000 else f"over by {(worst - 1000) / 1000:.2f} ms ({worst_name})",
            )
        )
    elif dv:
        goals.append(
            Goal(
                "devices_64",
                "device resolution for a 64-device host ≤ 1 ms",
                "error",
                "≤ 1 ms",
                None,
                str(dv.get("error", ""))[:200],
            )
        )
    return goals


# -- Markdown ------------------------------------------------------------------------------


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _f(x: float, nd: int = 1) -> str:
    return f"{x:.{nd}f}"


def markdown(res: dict[str, Any]) -> str:
    m = res["machine"]
    lines: list[str] = []
    mode = "quick" if res["quick"] else "full"
    lines += [
        f"Measured {m['date_utc']} on {m['cpu']}, {m['cores']} cores, "
        f"{m['implementation']} {m['python']} ({m['platform']}); {mode} run, "
        f"command `{res['command']}`, {res['elapsed_s']:.0f} s in all.",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v) + ". "
        f"Backends discovered: {', '.join(m['plugins']) or 'none'}.",
        "",
        "### Goals",
        "",
    ]
    lines += _table(
        ["goal", "measured", "target", "result"],
        [
            [
                g["goal"],
                g["measured"] + (f" — {g['note']}" if g["note"] else ""),
                g["target"],
                f"**{g['result']}**",
            ]
            for g in res["goals"]
        ],
    )
    st = res.get("startup")
    if st:
        floor = st["cases"]["floor"]["wall_ms"]["median"]
        lines += ["", f"### Start-up (fresh processes, {st['rounds']} rounds, round-robin)", ""]
        rows = []
        for k, c in st["cases"].items():
            w = c["wall_ms"]
            rows.append(
                [
                    f"`{k}`: {c['label']}",
                    _f(w["median"]),
                    _f(w["p10"]),
                    _f(w["p90"]),
                    f"{c['ratio_to_floor']:.2f}×",
                    f"+{_f(w['median'] - floor)}",
                ]
            )
        lines += _table(["case", "median ms", "p10", "p90", "× floor", "over floor ms"], rows)
        lines += ["", "Key ratios: " + "; ".join(res["ratios"]) + "."]
        if res.get("selection_cache"):
            lines += [
                "",
                f"Selection cache for the `current` case after the run: {res['selection_cache']} "
                "(its own cache folder, warmed by the untimed first run).",
            ]
        if st.get("skipped"):
            lines += ["", "Skipped: " + "; ".join(f"{k} ({v})" for k, v in st["skipped"].items())]
    sc = res.get("scaling")
    if sc:
        lines += [
            "",
            f"### Discovery scaling (synthetic site dirs; fresh processes: {sc['rounds']} rounds, "
            "medians; per call: in-process, fastest steady-state call, the least disturbed by "
            "other load on the machine)",
            "",
        ]
        rows = []
        for t in sc["trees"].values():
            pc = t["percall"]
            rows.append(
                [
                    str(t["n_dists"]),
                    str(t["n_plugins"]),
                    str(pc["dists_on_path"]),
                    f"+{_f(t['discovery_added_ms'])}",
                    f"+{_f(t['entry_points_added_ms'])}",
                    f"+{_f(t['current_added_ms'])}",
                    f"+{_f(t['current_cached_added_ms'])}",
                    _f(pc["scan"]["min_ms"], 2),
                    _f(pc["entry_points"]["min_ms"], 2),
                    _f(pc["core_importlib"]["min_ms"], 2),
                    "yes" if pc["agree"] else "**NO**",
                ]
            )
        lines += _table(
            [
                "dists",
                "plugins",
                "on path",
                "scan adds ms",
                "entry_points() adds ms",
                "current() adds ms (full)",
                "current() adds ms (cache warm)",
                "scan/call ms",
                "entry_points/call ms",
                "core fallback/call ms",
                "same entries",
            ],
            rows,
        )
        lines.append("")
        for key, label in (
            ("growth_fresh_scan", "fresh-process scan"),
            ("growth_percall_scan", "in-process scan"),
            ("growth_percall_entry_points", "in-process entry_points()"),
        ):
            g = sc.get(key)
            if g:
                segs = ", ".join(
                    f"{s['from']}→{s['to']}: {s['ms_per_1000']:.2f}" for s in g["segments"]
                )
                lines.append(
                    f"- Growth, {label}: {g['ms_per_1000_dists']:.2f} ms per 1,000 dists "
                    f"(least squares; segments {segs} ms/1,000; last-segment log-log exponent "
                    f"{g['loglog_exponent_last']}) → "
                    f"{'linear or better' if g['linear_or_better'] else 'worse than linear'}."
                )
    dv = res.get("devices")
    if dv and "sizes" in dv:
        lines += [
            "",
            f"### Device resolution (in-process, µs per call, median; backend: {dv['backend']})",
            "",
        ]
        rows = []
        for n, row in dv["sizes"].items():
            for env in ("unset", "indices", "uuids"):
                r = row[env]
                rows.append(
                    [
                        n,
                        env,
                        str(r["visible"]),
                        _f(r["explain_visibility"]["median_us"]),
                        _f(r["backend_devices"]["median_us"]),
                        _f(row["host_from_dict"]["median_us"]) if env == "unset" else "",
                    ]
                )
        lines += _table(
            [
                "GPUs",
                "CUDA_VISIBLE_DEVICES",
                "visible",
                "explain_visibility µs",
                "devices() µs",
                "Host.from_dict µs",
            ],
            rows,
        )
        lines += [
            "",
            "`indices`: every GPU, reversed, with CUDA_DEVICE_ORDER=PCI_BUS_ID; "
            "`uuids`: every full GPU UUID, reversed.",
        ]
    elif dv:
        lines += ["", f"### Device resolution: not measured ({str(dv.get('error'))[:300]})"]
    mem = res.get("memory")
    if mem:
        lines += ["", f"### Peak memory (max RSS of the child, {mem['rounds']} runs, median)", ""]
        lines += _table(
            ["command", "max RSS MiB", "over `pass` MiB", "× `pass`", "wall ms"],
            [
                [
                    c["label"],
                    _f(c["maxrss_kib"]["median"] / 1024),
                    f"+{_f(c['added_mib'])}",
                    f"{c['ratio_to_floor']:.2f}×",
                    _f(c["wall_ms"]["median"]),
                ]
                for c in mem["cases"].values()
            ],
        )
    pr = res.get("profile")
    if pr:
        lines += _profile_md(pr)
    return "\n".join(lines) + "\n"


def _profile_md(pr: dict[str, Any]) -> list[str]:
    lines = ["", "### Where `import hwbackends; hwbackends.current()` spends its time"]
    titles = {
        "cached": "With the selection cache warm (the default on a known machine)",
        "full": "Full selection (HWBACKENDS_NO_CACHE=1: what a first run pays)",
    }
    for name, v in pr["variants"].items():
        lines += ["", f"#### {titles.get(name, name)}", ""]
        lines += _variant_md(v, pr["importtime_runs"], top=15 if name == "full" else 10)
    return lines


def _variant_md(v: dict[str, Any], runs: int, top: int) -> list[str]:
    ph = v["phases"]
    lines = [
        f"In-process phases: `import hwbackends` {ph['import_ms']:.1f} ms, then `current()` "
        f"{ph['current_ms']:.1f} ms (selection cache: {ph.get('cache', '?')}). A full "
        "selection's own timings (ms): "
        + ", ".join(f"{k} {v:.2f}" for k, v in ph["report_timings_ms"].items())
        + f"; `Host.from_system()` again {ph['host_from_system_again_ms']:.2f} ms, "
        f"`discover()` again {ph['discover_again_ms']:.2f} ms.",
        "",
        f"`-X importtime` (median of {runs} runs), modules not imported by `python -c pass`: "
        f"{v['importtime_total_ms']:.1f} ms in all (importtime's own overhead included). "
        f"Top {top} by cumulative time:",
        "",
    ]
    lines += _table(
        ["module", "imported by", "cumulative ms", "self ms"],
        [
            [
                f"`{m['module']}`",
                f"`{m['imported_by']}`" if m["imported_by"] else "(top level)",
                _f(m["cumulative_ms"], 2),
                _f(m["self_ms"], 2),
            ]
            for m in v["importtime_modules"][:top]
        ],
    )
    cp = v["cprofile"]
    rows = [r for r in cp["by_cumulative"] if not r["function"].startswith(IGNORED_FRAMES)]
    lines += [
        "",
        f"cProfile (one run, {cp['total_ms']:.1f} ms under the profiler), top by cumulative "
        "time (import machinery frames left out), then by own time:",
        "",
    ]
    lines += _table(
        ["function", "calls", "cumulative ms", "own ms"],
        [
            [f"`{r['function']}`", str(r["ncalls"]), _f(r["cumtime_ms"], 2), _f(r["tottime_ms"], 2)]
            for r in rows[:top]
        ],
    )
    lines += [""]
    lines += _table(
        ["function", "calls", "own ms"],
        [
            [f"`{r['function']}`", str(r["ncalls"]), _f(r["tottime_ms"], 2)]
            for r in cp["by_own_time"][:8]
        ],
    )
    pl = v.get("plugins")
    if pl:
        lines += [
            "",
            f"Plugin imports, in selection order ({pl['total_import_ms']:.1f} ms in all, measured "
            "in-process; `-X importtime` misses these, as `importlib.import_module` bypasses its "
            "instrumentation; a shared module is charged to the first plugin that imports it):",
            "",
        ]
        prow = []
        for r in pl["plugins"]:
            own = [m for m in r["new_modules"] if m.split(".")[0] != r["module"].split(".")[0]]
            prow.append(
                [
                    f"{r['name']} (`{r['module']}`)",
                    _f(r["import_ms"], 2),
                    str(len(r["new_modules"])),
                    ", ".join(f"`{m}`" for m in own[:6]) + (" …" if len(own) > 6 else ""),
                ]
            )
        lines += _table(["plugin", "import ms", "modules", "of which outside the plugin"], prow)
    au = v["audit"]
    lines += ["", "Files opened and directories listed (audit hook):", ""]
    for ph_name in ("import", "current"):
        a = au[ph_name]
        kinds = ", ".join(f"{n} {k}" for k, n in a["opens_by_kind"].items())
        lines.append(
            f"- during `{'import hwbackends' if ph_name == 'import' else 'current()'}`: "
            f"{a['opens']} opens ({kinds or 'none'}); {a['listdirs']} directory listings."
        )
    return lines
