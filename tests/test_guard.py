"""The plugin guard's verdicts on what plugin code returns or raises (``call``), its time
limits (per call, and the overall deadline of a selection) and the threads a hang holds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from coretest import Site, clean_env, good_plugin, run_python

from hwbackends import Host
from hwbackends._base import guard
from hwbackends._base.settings import Settings
from hwbackends._selection.registry import Registry


def _raise(exc: BaseException) -> None:
    raise exc


def test_a_fault_raised_by_hwbackends_checks_inside_the_call_is_kept_as_it_is() -> None:
    """hwbackends' own result checks run inside the call and raise PluginFault with the whole
    reason: it must reach the caller unchanged, not as "raised PluginFault: ..."."""
    with pytest.raises(guard.PluginFault) as caught:
        guard.call("acme.probe()", lambda: _raise(guard.PluginFault("acme.probe() returned 3")))
    assert caught.value.reason == "acme.probe() returned 3"


def test_a_result_error_is_the_whole_reason_and_other_exceptions_name_the_call() -> None:
    with pytest.raises(guard.PluginFault) as checked:
        guard.call("acme.devices()", lambda: _raise(guard.ResultError("devices() must be a list")))
    assert checked.value.reason == "devices() must be a list" and checked.value.tb is None
    with pytest.raises(guard.PluginFault) as raised:
        guard.call("acme.devices()", lambda: _raise(OSError("no /dev/acme0")))
    assert raised.value.reason == "acme.devices() raised OSError: no /dev/acme0"
    assert raised.value.tb is not None and "OSError: no /dev/acme0" in raised.value.tb


def test_passthrough_exceptions_propagate_as_they_are() -> None:
    with pytest.raises(KeyError):
        guard.call("acme.probe()", lambda: _raise(KeyError("x")), passthrough=(KeyError,))


@pytest.mark.parametrize("timeout", [0, 5])
def test_a_value_comes_back_inline_or_from_a_worker(timeout: float) -> None:
    assert guard.call("acme.probe()", lambda: 42, timeout=timeout) == 42


def test_no_limit_runs_a_batch_inline_and_waits_for_every_call() -> None:
    """HWBACKENDS_TIMEOUT=0: no limit. A call that takes a while still comes back with its
    value (a zero limit must not turn into an immediate "did not return")."""
    import threading

    def slow() -> str:
        threading.Event().wait(0.2)
        return "done"

    assert guard.call_many([("a.probe()", slow), ("b.probe()", slow)], timeout=0) == [
        (True, "done"),
        (True, "done"),
    ]


def test_each_call_of_a_batch_has_its_own_limit() -> None:
    """Four calls of 0.4 s under a 1 s limit all succeed although the batch takes 1.6 s: the
    limit is per call, measured from when that call started."""
    import threading

    def slow() -> str:
        threading.Event().wait(0.4)
        return "done"

    got = guard.call_many([(f"p{i}.probe()", slow) for i in range(4)], timeout=1.0)
    assert got == [(True, "done")] * 4


def test_a_long_exception_message_is_cut_at_500_characters() -> None:
    assert guard.describe(ValueError("x" * 600)) == "ValueError: " + "x" * 500 + "…"
    assert guard.describe(ValueError("x" * 500)) == "ValueError: " + "x" * 500
    assert guard.describe(ValueError()) == "ValueError"


@pytest.mark.parametrize(("raw", "seconds"), [("", 30.0), ("0", 0.0), ("off", 0.0), ("None", 0.0),
                                              ("2.5", 2.5)])  # fmt: skip
def test_the_time_limit_setting(raw: str, seconds: float) -> None:
    from hwbackends._base.settings import timeout_from

    assert timeout_from({"HWBACKENDS_TIMEOUT": raw}) == seconds


def test_a_variable_put_back_by_the_plugin_is_no_change(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HWBACKENDS_GUARD_SAME", "before")
    guard.take_reports()

    def plugin() -> str:
        os.environ["HWBACKENDS_GUARD_SAME"] = "during"
        os.environ["HWBACKENDS_GUARD_SAME"] = "before"  # restored: nothing changed
        return "ok"

    assert guard.call("acme.probe()", plugin, timeout=5) == "ok"
    assert guard.take_reports() == []


@pytest.mark.parametrize("timeout", [0, 5])
def test_after_a_call_the_caller_is_not_running_plugin_code(timeout: float) -> None:
    inside: list[bool] = []
    guard.call("acme.probe()", lambda: inside.append(guard.running_plugin_code()), timeout=timeout)
    assert inside == [True]
    assert guard.running_plugin_code() is False


def test_a_selection_ends_by_its_overall_deadline(site: Site) -> None:
    """Bug: 10 slow plugins took 18 s under HWBACKENDS_TIMEOUT=1 (each call in its limit).
    With HWBACKENDS_DEADLINE=1 the selection's plugin calls end by 1 s: the slow ones are
    cut, those after them not called, and cpu (hwbackends' own) is still chosen."""
    import time

    for i in range(10):
        site.add_plugin(
            f"slow{i}",
            good_plugin(f"slow{i}", 90)
            + "    def probe(self, host):\n        import time\n        time.sleep(0.45)\n"
            + "        return super().probe(host)\n",
        )
    env = {"HWBACKENDS_TIMEOUT": "1", "HWBACKENDS_DEADLINE": "1"}
    t0 = time.monotonic()
    r = Registry(path=[str(site.path)]).select(env, Host.from_dict({}), Settings.from_env(env))
    took = time.monotonic() - t0
    reasons = [r.status(f"slow{i}").reason for i in range(10)]
    assert took < 3.0, took  # 1 s of plugin calls, plus the selection's own work
    assert any("overall deadline" in why for why in reasons), reasons
    assert r.chosen in ("cpu", *(f"slow{i}" for i in range(10)))


@pytest.mark.parametrize(("raw", "message"), [
    ("soon", "is not a number of seconds"),
    ("of", "did you mean 'off'"),
    ("0.001", "is too small"),
])  # fmt: skip
def test_the_deadline_setting_is_validated(raw: str, message: str) -> None:
    from hwbackends._base.errors import SettingsError

    assert Settings.from_env({"HWBACKENDS_DEADLINE": "2.5"}).deadline == 2.5
    assert Settings.from_env({"HWBACKENDS_DEADLINE": "off"}).deadline == 0.0
    assert Settings.from_env({}).deadline == 60.0
    with pytest.raises(SettingsError, match=message):
        Settings.from_env({"HWBACKENDS_DEADLINE": raw})


HANG_RESETS = """
import os, sys, hwbackends
from hwbackends import Host
host = Host.from_dict({"device_nodes": ["/dev/acme0"]})
for _ in range(200):
    hwbackends.reset()
    hwbackends.current(env={"HWBACKENDS_TIMEOUT": "0.05"}, host=host)
print(len(os.listdir("/proc/self/task")))
os._exit(0)  # the hung probe never returns
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux /proc")
def test_a_hanging_plugin_holds_one_thread_however_often_the_selection_is_reset(
    tmp_path: Path,
) -> None:
    """Bug: a hanging plugin leaked one OS thread per reset() (200 resets: 202 threads)."""
    s = Site(tmp_path / "site")
    s.path.mkdir()
    s.add_plugin(
        "acme",
        "import threading\nEV = threading.Event()\n"
        + good_plugin("acme", 90)
        + "    def probe(self, host):\n        EV.wait()\n        return super().probe(host)\n",
    )
    env = clean_env(PYTHONPATH=str(s.path), HWBACKENDS_NO_CACHE="1")
    out = run_python("-c", HANG_RESETS, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip().splitlines()[-1]) < 12, out.stdout


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_a_ctrl_c_while_waiting_reaches_the_caller_and_the_worker_ends_with_its_call() -> None:
    """The caller's Ctrl-C is raised as is; the worker it abandons exits once its call has
    returned (not left waiting for work that never comes: one thread lost per Ctrl-C)."""
    import _thread
    import signal
    import threading
    import time

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not Python's KeyboardInterrupt here")
    release, ran_on = threading.Event(), []

    def plugin() -> None:
        ran_on.append(_thread.get_ident())
        release.wait(30)

    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))  # a real Ctrl-C
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            guard.call("acme.probe()", plugin, timeout=20)
    finally:
        timer.cancel()
        release.set()
    deadline = time.monotonic() + 5
    while ran_on[0] in guard._plugin_threads and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ran_on[0] not in guard._plugin_threads
