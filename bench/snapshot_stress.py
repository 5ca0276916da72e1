"""The snapshot stress runs at full size (the suite runs them bounded, in
tests/test_selection_snapshot.py): wrong answers under writers of the visibility variables.

    .venv/bin/python bench/snapshot_stress.py [--seconds 10] [--procs 4] [--trials 35]
                                              [--readers 40]

1. Torn answers: ``plan_pretrained(host=...)`` on an H100 host without an environment of its
   own, while a thread flips ``CUDA_VISIBLE_DEVICES`` between ``0`` and ``""``; an answer that
   is neither of the two answers is torn.
2. The selection cache across processes: ``--procs`` processes at once, each making
   ``--trials`` first selections (cache file removed first) while its own thread flips a
   declared visibility variable, each followed by what the cache alone answers for both
   values; then ``--readers`` later processes, which only call ``current()``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_selection_snapshot import (  # noqa: E402 - the suite's own child and plugin
    CACHE_STRESS,
    H100_FILE,
    STRESS_PLUGIN,
    _Flipper,
)

READER = (
    "import json, hwbackends, hwbackends._selection.cache as c\n"
    "print(json.dumps({'name': hwbackends.current().name, 'last': c.LAST}))\n"
)


def torn(seconds: float) -> dict[str, int]:
    from hwbackends import Host
    from hwbackends.transformers import plan_pretrained

    data = json.loads(H100_FILE.read_text(encoding="utf-8"))
    data.pop("env")
    host = Host.from_dict(data, source="an H100 box, no env of its own")
    allowed = set()
    for value in ("0", ""):
        os.environ["CUDA_VISIBLE_DEVICES"] = value
        allowed.add(repr(plan_pretrained(host=host, kernels=False).kwargs))
    calls = wrong = 0
    sys.setswitchinterval(1e-5)
    with _Flipper("CUDA_VISIBLE_DEVICES", ("0", "")) as flipper:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            calls += 1
            wrong += repr(plan_pretrained(host=host, kernels=False).kwargs) not in allowed
    sys.setswitchinterval(0.005)
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    return {"calls": calls, "torn": wrong, "writes": flipper.writes}


def _site(folder: Path) -> None:
    (folder / "hwb_stress.py").write_text(STRESS_PLUGIN, encoding="utf-8")
    info = folder / "hwbackends_stress-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: hwbackends-stress\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[hwbackends.backends]\nstress = hwb_stress:Backend\n", encoding="utf-8"
    )


def cache(procs: int, trials: int, readers: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        site.mkdir()
        _site(site)
        env = {k: v for k, v in os.environ.items() if not k.startswith("HWBACKENDS_")}
        env.pop("STRESS_VISIBLE_DEVICES", None)
        path = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
        env.update(PYTHONPATH=path, XDG_CACHE_HOME=str(Path(tmp) / "cache"))
        running = [
            subprocess.Popen(
                [sys.executable, "-c", CACHE_STRESS, str(trials)],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(procs)
        ]
        hits = wrong = 0
        for p in running:
            out, _ = p.communicate()
            got = json.loads(out.strip().splitlines()[-1])
            hits += got["hits"]
            wrong += got["wrong"]
        truth = {"0": "stress", "": "cpu"}
        later = {"hits": 0, "wrong": 0}
        for i in range(readers):
            value = ("0", "")[i % 2]
            out = subprocess.run(
                [sys.executable, "-c", READER],
                env={**env, "STRESS_VISIBLE_DEVICES": value},
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            got = json.loads(out.strip().splitlines()[-1])
            later["hits"] += got["last"] == "hit"
            later["wrong"] += got["name"] != truth[value]
        return {
            "first_selections": procs * trials,
            "cache_reads_after_them": hits,
            "wrong": wrong,
            "later_processes": readers,
            "later_hits": later["hits"],
            "later_wrong": later["wrong"],
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--trials", type=int, default=35)
    ap.add_argument("--readers", type=int, default=40)
    args = ap.parse_args()
    os.environ["HWBACKENDS_NO_CACHE"] = "1"  # the torn run: the full selection every call
    print("torn:", json.dumps(torn(args.seconds)))
    print("cache:", json.dumps(cache(args.procs, args.trials, args.readers)))


if __name__ == "__main__":
    main()
