"""What the plugin guard costs the rest of the program, outside plugin calls.

Side by side, each in a fresh process: no hook at all (the floor); the guard as it was before
issue 21 (an audit hook installed at the first plugin call, for the life of the process: its
body returns at once outside plugin calls, but CPython calls it on every audited event); and
the guard now (nothing wrapped, no audit hook: it compares a few values around each call).
Each case first runs one guarded plugin call, then times three operations a program does all
the time: an ``os.environ`` write, ``sys._getframe()``, and ``logging.info`` with logging at
its default level. Reported: the fastest of 7 repeats of 20,000 calls (the least disturbed by
other load, as ``timeit`` advises), in nanoseconds per call.

Run from the repository root: ``.venv/bin/python bench/guard_cost.py`` (about 20 s).
This is a measurement, never a test: nothing here asserts a time.
"""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = r"""
import json, logging, os, sys, timeit
case = sys.argv[1]
if case == "before":
    # the pre-issue-21 guard's hook, verbatim in what it does outside plugin calls
    _recorders = {}
    def _audit(event, args):
        if not _recorders:
            return
        if event != "os.putenv" and event != "os.unsetenv":
            return
    sys.addaudithook(_audit)
elif case == "after":
    import posix
    from hwbackends._base import guard
    guard.call("bench.noop()", lambda: None, timeout=5)  # one plugin call, then none
    assert os.putenv is posix.putenv, "the guard wraps nothing"
n = 20000
ops = {
    "os.environ write": "os.environ['HWB_BENCH'] = 'x'",
    "sys._getframe()": "sys._getframe()",
    "logging.info": "logging.info('x')",
}
out = {}
for name, stmt in ops.items():
    runs = timeit.repeat(stmt, globals=globals(), number=n, repeat=7)
    out[name] = min(runs) / n * 1e9  # the least disturbed run, as timeit advises
print(json.dumps(out))
"""


def main() -> None:
    rows = {}
    for case in ("none", "before", "after"):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, case],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        rows[case] = json.loads(out.stdout)
    print("| operation | no hook (ns) | guard before (ns) | guard now (ns) |")
    print("|---|---:|---:|---:|")
    for op in rows["none"]:
        cells = [f"{rows[c][op]:.0f}" for c in ("none", "before", "after")]
        print(f"| {op} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
