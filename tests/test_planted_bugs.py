"""Bugs that once survived the whole suite, each now failing a test here (issue 26, items 1-4).

Each test names the bug it catches. None measures time: a call that must give up early is
checked by its reported state and by an ``Event`` the abandoned job sets only when it
finishes, which must still be clear when the call has returned.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from coretest import Site, good_plugin

from hwbackends import Host
from hwbackends._base import guard
from hwbackends._selection.registry import Registry

H100_8 = Path(__file__).resolve().parents[1] / "plugins/hwbackends-cuda/tests/hosts/h100-sxm-8.json"


# -- 3. plugin time limits ----------------------------------------------------------------------


class SlowJob:
    """A job that takes 3 s unless released; ``done`` is set only if it ran to its end."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.done = threading.Event()

    def __call__(self) -> str:
        self.release.wait(3)
        self.done.set()
        return "finished"


def test_a_single_call_past_its_limit_is_reported_hung() -> None:
    """Bug: the limit not enforced (the caller waited 10x the limit: a 3 s job under 0.5 s
    came back as a success)."""
    job = SlowJob()
    try:
        with pytest.raises(guard.PluginFault) as caught:
            guard.call("acme.probe()", job, timeout=0.5)
        returned_first = not job.done.is_set()
    finally:
        job.release.set()
    assert caught.value.reason == (
        "acme.probe() did not return within 0.5 s and was abandoned (it may hang); raise "
        "HWBACKENDS_TIMEOUT if it is only slow"
    )
    assert returned_first, "the call waited for the job to finish"


def test_a_batched_call_past_its_limit_is_reported_hung() -> None:
    """Bug: batched loads/probes abandoned only after 10x the limit."""
    job = SlowJob()
    try:
        jobs = [("a.probe()", lambda: 1), ("b.probe()", job), ("c.probe()", lambda: 3)]
        got = guard.call_many(jobs, timeout=0.5)
        returned_first = not job.done.is_set()
    finally:
        job.release.set()
    assert got[0] == (True, 1) and got[2] == (True, 3)
    ok, fault = got[1]
    assert not ok and fault.reason.startswith("b.probe() did not return within 0.5 s")
    assert returned_first, "call_many waited for the job to finish"


SLOW_PROBE = """
    def probe(self, host):
        import hwb_planted_sync as s
        s.job()
        return super().probe(host)
"""


def test_a_slow_probe_is_reported_broken_by_selection(site: Site) -> None:
    """Through selection, as users see it: HWBACKENDS_TIMEOUT=0.5 and a probe that takes 3 s
    give a broken backend whose reason says it hung, and the answer comes before the probe
    would have finished."""
    job = SlowJob()
    (site.path / "hwb_planted_sync.py").write_text("job = None\n", encoding="utf-8")
    import importlib

    importlib.invalidate_caches()  # the folder's listing may be cached from before the write
    sync = importlib.import_module("hwb_planted_sync")
    site.modules.append("hwb_planted_sync")
    sync.job = job
    site.add_plugin("slowpoke", good_plugin("slowpoke", 90) + SLOW_PROBE)
    site.add_plugin("quick", good_plugin("quick", 10))
    try:
        report = Registry(path=[str(site.path)]).select({"HWBACKENDS_TIMEOUT": "0.5"},
                                                         Host.from_file(H100_8))  # fmt: skip
        returned_first = not job.done.is_set()
    finally:
        job.release.set()
    status = report.status("slowpoke")
    assert status.state == "broken"
    assert status.reason.startswith("slowpoke.probe() did not return within 0.5 s")
    assert report.chosen != "slowpoke"
    assert returned_first, "selection waited for the probe to finish"
