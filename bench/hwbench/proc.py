"""Fresh child processes timed by wall clock, and summary statistics.

Children are started with ``os.posix_spawn`` (no Python between fork and exec) and reaped with
``os.waitpid``. Every child gets the same clean environment and an empty working directory.
"""

from __future__ import annotations

import atexit
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "BENCH_DIR",
    "NO_CACHE",
    "REPO",
    "ChildError",
    "Run",
    "Summary",
    "clean_env",
    "run_capture",
    "spawn",
    "summarize",
    "temp_dir",
]

BENCH_DIR = Path(__file__).resolve().parent.parent
REPO = BENCH_DIR.parent

# Variables kept from the parent; everything else (PYTHON*, HWBACKENDS_*, CUDA_*, HF_*, ...) is
# dropped so that no case sees a PYTHONPATH, a forced backend or a visibility variable.
_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LOGNAME")


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every child starts with (plus ``extra``).

    ``XDG_CACHE_HOME`` points at a folder of this invocation, so hwbackends' selection cache
    (``hwbackends._selection.cache``) starts empty and the user's own cache is neither read nor
    written.
    """
    env = {k: os.environ[k] for k in _KEEP if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env.setdefault("LANG", "C.UTF-8")
    env["XDG_CACHE_HOME"] = str(temp_dir("cache"))
    if extra:
        env.update(extra)
    return env


#: Full selection, every time: the selection cache is bypassed (hwbackends._selection.cache).
NO_CACHE: Mapping[str, str] = {"HWBACKENDS_NO_CACHE": "1"}


class ChildError(RuntimeError):
    """A child process failed; the message carries its command and the end of its stderr."""


@dataclass(frozen=True)
class Run:
    wall_s: float
    returncode: int


_root: Path | None = None


def temp_dir(name: str) -> Path:
    """A folder of this invocation's temp tree (removed at exit)."""
    global _root
    if _root is None:
        _root = Path(tempfile.mkdtemp(prefix="hwbench-"))
        atexit.register(shutil.rmtree, _root, True)
    d = _root / name
    d.mkdir(exist_ok=True)
    return d


def scratch_dir() -> Path:
    """An empty directory: the children's working directory."""
    return temp_dir("cwd")


def spawn(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    stdout: str | None = None,
    check: bool = True,
) -> Run:
    """Start ``argv`` once, wait for it, and return its wall time.

    (Its ``ru_maxrss`` is not returned: Linux charges a child that this large process spawns
    with this process's RSS at ``exec``; memory.py measures through a small launcher.)

    stdout goes to ``stdout`` (a file path) or /dev/null; stderr to a scratch file that is shown
    in the error when the child fails.
    """
    cwd = scratch_dir()
    err_path = temp_dir("out") / "stderr"
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (
            os.POSIX_SPAWN_OPEN,
            1,
            stdout or os.devnull,
            os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
            0o644,
        ),
        (os.POSIX_SPAWN_OPEN, 2, str(err_path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
    ]
    old = os.getcwd()
    os.chdir(cwd)  # posix_spawn has no cwd argument on every platform; the child inherits it
    try:
        t0 = time.perf_counter()
        pid = os.posix_spawn(argv[0], list(argv), dict(env), file_actions=actions)
        _, status = os.waitpid(pid, 0)
        wall = time.perf_counter() - t0
    finally:
        os.chdir(old)
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0 and check:
        tail = err_path.read_text(errors="replace")[-3000:]
        raise ChildError(f"{' '.join(argv)!r} exited with {rc}:\n{tail}")
    return Run(wall_s=wall, returncode=rc)


def run_capture(argv: Sequence[str], env: Mapping[str, str], *, stderr: bool = False) -> str:
    """Run ``argv`` once and return its stdout (or stderr) as text."""
    out = temp_dir("out") / "stdout"
    spawn(argv, env, stdout=str(out))
    if stderr:
        return (temp_dir("out") / "stderr").read_text(errors="replace")
    return out.read_text(errors="replace")


@dataclass
class Summary:
    """Median, p10 and p90 of repeated samples (milliseconds or any other unit)."""

    n: int
    median: float
    p10: float
    p90: float
    samples: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "n": self.n,
            "median": round(self.median, 4),
            "p10": round(self.p10, 4),
            "p90": round(self.p90, 4),
            "samples": [round(s, 4) for s in self.samples],
        }


def summarize(samples: Sequence[float]) -> Summary:
    xs = sorted(samples)
    if not xs:
        raise ValueError("no samples")
    if len(xs) == 1:
        return Summary(1, xs[0], xs[0], xs[0], list(samples))
    q = statistics.quantiles(xs, n=10, method="inclusive")
    return Summary(len(xs), statistics.median(xs), q[0], q[-1], list(samples))
