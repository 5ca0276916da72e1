"""Child: where ``import hwbackends; hwbackends.current()`` spends its time.

Usage: python profile_current.py MODE, MODE one of

* ``phases``: wall time of ``import hwbackends``, then of ``current()``, with the report's own
  timings (discovery, each probe, devices) and a second ``Host.from_system()`` for scale;
* ``cprofile``: the top functions of one run under cProfile, by cumulative and by own time;
* ``audit``: every file opened and directory listed (an audit hook), grouped by kind and phase;
* ``plugins``: the import time of each discovered plugin module in discovery order, with the
  modules it pulled in (``-X importtime`` cannot show these: ``importlib.import_module`` goes
  around the C import path that importtime instruments, so only the plugins' own sub-imports
  appear there).

Prints one JSON object. Only ``sys`` and ``time`` (both built in) are imported before the
measured code, so nothing it needs (typing, re, json, ...) is imported ahead of it.
"""

from __future__ import annotations

import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def phases() -> dict[str, Any]:
    t0 = time.perf_counter()
    import hwbackends

    t1 = time.perf_counter()
    hwbackends.current()
    t2 = time.perf_counter()
    report = hwbackends.explain()
    t3 = time.perf_counter()
    hwbackends.Host.from_system()
    t4 = time.perf_counter()
    from hwbackends._discovery import scan as _discovery

    _discovery.discover()
    t5 = time.perf_counter()
    fast = sys.modules.get("hwbackends._selection.cache")
    return {
        "cache": getattr(fast, "LAST", None) or "not used",
        "import_ms": round((t1 - t0) * 1000, 3),
        "current_ms": round((t2 - t1) * 1000, 3),
        "report_timings_ms": {k: round(v, 3) for k, v in report.timings_ms.items()},
        "cached_explain_ms": round((t3 - t2) * 1000, 4),
        "host_from_system_again_ms": round((t4 - t3) * 1000, 3),
        "discover_again_ms": round((t5 - t4) * 1000, 3),
        "modules_after": len(sys.modules),
    }


def cprofile(top: int = 25) -> dict[str, Any]:
    import cProfile

    pr = cProfile.Profile()
    pr.enable()
    import hwbackends

    hwbackends.current()
    pr.disable()
    import pstats

    st = pstats.Stats(pr)
    rows: list[dict[str, Any]] = []
    for (file, line, func), (cc, nc, tt, ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        where = file if file == "~" else f"{_short(file)}:{line}"
        rows.append(
            {
                "function": f"{where}({func})",
                "ncalls": nc,
                "primitive": cc,
                "tottime_ms": round(tt * 1000, 3),
                "cumtime_ms": round(ct * 1000, 3),
            }
        )
    by_cum = sorted(rows, key=lambda r: -r["cumtime_ms"])[:top]
    by_tot = sorted(rows, key=lambda r: -r["tottime_ms"])[:top]
    total = sum(r["tottime_ms"] for r in rows)
    return {"total_ms": round(total, 3), "by_cumulative": by_cum, "by_own_time": by_tot}


def _short(path: str) -> str:
    for marker in ("/site-packages/", "/src/", "/lib/python3"):
        i = path.find(marker)
        if i >= 0:
            return path[i + len(marker) :].lstrip("0123456789./")
    return path


def _kind(path: str) -> str:
    if path.endswith((".pyc", ".py", ".so", ".pth")):
        return "python import (.py/.pyc/.so/.pth)"
    if ".dist-info" in path or ".egg-info" in path:
        return "dist-info metadata (" + path.rsplit("/", 1)[-1] + ")"
    for prefix in ("/sys/", "/proc/", "/dev"):
        if path.startswith(prefix):
            return prefix.strip("/") + " (host facts)"
    if path.endswith("version.py"):
        return "torch/version.py (as text)"
    return "other"


def audit() -> dict[str, Any]:
    events: list[tuple[str, str, str]] = []
    phase = ["import"]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open" and args and isinstance(args[0], str):
            events.append((phase[0], "open", args[0]))
        elif event in ("os.listdir", "os.scandir") and args:
            events.append((phase[0], "listdir", str(args[0])))

    sys.addaudithook(hook)
    import hwbackends

    phase[0] = "current"
    hwbackends.current()
    phase[0] = "done"
    out: dict[str, Any] = {}
    for ph in ("import", "current"):
        kinds: dict[str, int] = {}
        dirs: dict[str, int] = {}
        for p, what, path in events:
            if p != ph:
                continue
            if what == "open":
                k = _kind(path)
                kinds[k] = kinds.get(k, 0) + 1
            else:
                dirs[path] = dirs.get(path, 0) + 1
        out[ph] = {
            "opens": sum(kinds.values()),
            "opens_by_kind": dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
            "listdirs": sum(dirs.values()),
            "listed": dict(sorted(dirs.items(), key=lambda kv: -kv[1])[:15]),
        }
    return out


def plugins() -> dict[str, Any]:
    import importlib

    import hwbackends
    from hwbackends._discovery import scan as _discovery

    specs, method = _discovery.discover()
    rows: list[dict[str, Any]] = []
    for spec in sorted(specs, key=lambda s: s.name):  # the order selection loads them in
        before = set(sys.modules)
        t0 = time.perf_counter()
        try:
            importlib.import_module(spec.module)
            error = None
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        ms = (time.perf_counter() - t0) * 1000
        new = sorted(set(sys.modules) - before)
        rows.append(
            {
                "name": spec.name,
                "module": spec.module,
                "import_ms": round(ms, 3),
                "new_modules": new,
                "error": error,
            }
        )
    t0 = time.perf_counter()
    hwbackends.current()
    rest = (time.perf_counter() - t0) * 1000
    total = sum(r["import_ms"] for r in rows)
    return {
        "method": method,
        "plugins": rows,
        "total_import_ms": round(total, 3),
        "current_after_imports_ms": round(rest, 3),
    }


def main() -> None:
    mode = sys.argv[1]
    fn = {"phases": phases, "cprofile": cprofile, "audit": audit, "plugins": plugins}[mode]
    result = fn()
    import json

    print(json.dumps(result))


if __name__ == "__main__":
    main()
