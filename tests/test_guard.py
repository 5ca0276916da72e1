"""The plugin guard's verdicts on what plugin code returns or raises (``call``): exact builtin
copies of its values, its time limits (per call, batched, and the overall deadline of a
selection), the hung list across ``reset()``, the threads a hang holds, a nested
``current()`` refused, and forks during and after plugin calls."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest
from coretest import Site, clean_env, good_plugin, run_python

import hwbackends
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


H100_8 = Path(__file__).resolve().parents[1] / "plugins/hwbackends-cuda/tests/hosts/h100-sxm-8.json"


class SlowJob:
    """A job that takes 3 s unless released; ``done`` is set only if it ran to its end."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.done = threading.Event()

    def __call__(self) -> str:
        self.release.wait(3)
        self.done.set()
        return "finished"


SLOW_PROBE = """
    def probe(self, host):
        import hwb_planted_sync as s
        s.job()
        return super().probe(host)
"""


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


HOST = Host.from_dict({"device_nodes": ["/dev/acme0", "/dev/beta0"]})


def _run(code: str, env: dict[str, str], timeout: float = 90) -> dict[str, object]:
    out = run_python("-c", code, env=env, timeout=timeout)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    got["stderr"] = out.stderr
    return dict(got)


HOSTILE_STR = """
import os
class Hostile(str):
    def __format__(self, spec):
        raise RuntimeError("__format__ ran outside the guard")
    def __str__(self):
        raise RuntimeError("__str__ ran outside the guard")
    def __repr__(self):
        raise RuntimeError("__repr__ ran outside the guard")
"""
HANGS = """
import os, threading
CALLS = []
RELEASE = threading.Event()
"""
STRESS = r"""
import json, os, sys, threading
sys.setswitchinterval(1e-6)
import hwbackends
from hwbackends import Host
host = Host.from_dict({"device_nodes": ["/dev/acme0"]})
N, M = int(sys.argv[1]), int(sys.argv[2])
stop = threading.Event()
lost, writes, wrong = [0], [0], [0]
def writer(k):
    i, value = 0, ""
    key = "APP_SHARED" if k == 0 else "APP_%d" % k
    while not stop.is_set():
        i += 1
        value = str(i % 1000)  # few distinct values: glibc's setenv keeps every one
        os.environ[key] = value
        got = os.environ.get(key)
        if got not in (value, "plugin"):  # an undo put an older value back over ours
            lost[0] += 1
        writes[0] += 1
    if i and os.environ.get(key) not in (value, "plugin"):
        lost[0] += 1
def selector():
    for _ in range(M):
        r = hwbackends.explain(env={}, host=host)
        if r.chosen != "acme":  # the variables it writes are none selection reads
            wrong[0] += 1
ws = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
ss = [threading.Thread(target=selector) for _ in range(N)]
for t in ws + ss:
    t.start()
for t in ss:
    t.join()
stop.set()
for t in ws:
    t.join()
print(json.dumps({"ops": N * M, "lost": lost[0], "wrong": wrong[0], "writes": writes[0]}))
"""
FORK = r"""
import json, os, signal, sys, threading, time
import hwbackends
t = threading.Thread(target=hwbackends.current)
t.start()
while not os.path.exists(sys.argv[1]):  # the worker is now inside the slow import
    time.sleep(0.01)
pid = os.fork()
if pid == 0:
    signal.alarm(20)  # a child stuck on the import lock dies of SIGALRM
    try:
        import hwb_slowdep
        ok = hwb_slowdep.READY and hwbackends.current().name == "acme"
    except BaseException:
        ok = False
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
t.join()
print(json.dumps({"status": status, "parent": hwbackends.current().name}))
"""
FORK_DURING_AN_IMPORT = r"""
import os, sys, threading, time
import hwbackends
hwbackends.current()  # a selection has run: its fork handlers are in place
t = threading.Thread(target=__import__, args=("hwb_slowmod",), daemon=True)
t.start()
while not os.path.exists(sys.argv[1]):  # the thread is now inside the import
    time.sleep(0.01)
t0 = time.monotonic()
pid = os.fork()
if pid == 0:
    os._exit(0)
took = time.monotonic() - t0
os.waitpid(pid, 0)
print(took)
"""


def test_a_str_subclass_from_a_probe_leaves_the_guard_as_a_plain_str(site: Site) -> None:
    site.add_plugin(
        "acme",
        HOSTILE_STR
        + good_plugin("acme", 90)
        + "    def probe(self, host):\n"
        + "        from hwbackends import Probe\n"
        + "        return Probe(Hostile('acme'), True, False, Hostile('why'), Hostile('fix'),\n"
        + "                     (Hostile('ev'),))\n",
    )
    r = Registry(path=[str(site.path)]).select({}, HOST, Settings())
    st = r.status("acme")
    assert st.probe is not None
    for v in (st.probe.backend, st.probe.reason, st.probe.hint, *st.probe.evidence):
        assert type(v) is str
    text = f"{r.warnings} {st.reason} {r.to_dict()}"  # formatting runs no plugin code
    assert "acme: why. Fix: fix" in text


def test_a_declaration_property_that_raises_is_the_plugins_fault_not_the_callers(
    tmp_path: Path,
) -> None:
    s = Site(tmp_path / "site")
    s.path.mkdir()
    s.add_plugin(
        "acme",
        good_plugin("acme", 90)
        + "    @property\n    def vendor(self):\n        raise RuntimeError('honest bug')\n",
    )
    s.add_plugin(
        "beta",
        good_plugin("beta", 80)
        + "    @property\n    def device_nodes(self):\n        raise RuntimeError('another')\n",
    )
    env = clean_env(PYTHONPATH=str(s.path), HWBACKENDS_NO_CACHE="1")
    code = (
        "import json, hwbackends\n"
        "r = hwbackends.explain()\n"
        "print(json.dumps({'chosen': hwbackends.current().name,\n"
        "  'broken': {b.name: b.reason for b in r.broken}}))\n"
    )
    got = _run(code, env)
    assert got["chosen"] == "cpu"
    broken = got["broken"]
    assert isinstance(broken, dict) and set(broken) == {"acme", "beta"}
    assert "honest bug" in broken["acme"] and "another" in broken["beta"]


def test_the_reader_reads_each_declaration_once_inside_the_guard() -> None:
    from hwbackends._machine.reader import read_system

    reads: list[str] = []
    callers: list[bool] = []

    class Counting:
        name = "acme"
        device_type = "acme"
        priority = 1
        api_version = 1

        def __getattribute__(self, attr: str) -> object:
            if attr in ("vendor", "device_nodes", "pci_vendor_ids", "watch_paths"):
                reads.append(attr)
                callers.append(guard.running_plugin_code())
            return object.__getattribute__(self, attr)

        vendor = "acme"
        device_nodes = ("acme{n}",)
        pci_vendor_ids = (0x1234,)
        watch_paths = ()

        def probe(self, host: object) -> None: ...
        def devices(self, host: object, env: object) -> list[object]:
            return []

        def capabilities(self) -> None: ...
        def visibility_env(self, *a: object, **k: object) -> dict[str, str]:
            return {}

        def read_devices(
            self, root: str, found: tuple[object, ...], **kw: object
        ) -> tuple[object, ...]:
            return found

        def read_drivers(self, root: str) -> dict[str, str]:
            return {}

    b = Counting()
    read_system("/nonexistent-root", backends=[b])
    assert sorted(reads) == ["device_nodes", "pci_vendor_ids", "vendor", "watch_paths"]
    assert all(callers)  # every read ran as plugin code, under the guard


@pytest.mark.parametrize("limit", ["30", "0"])
def test_a_nested_current_from_a_probe_is_refused_at_once(tmp_path: Path, limit: str) -> None:
    s = Site(tmp_path / "site")
    s.path.mkdir()
    s.add_plugin(
        "acme",
        good_plugin("acme", 90)
        + "    def probe(self, host):\n        import hwbackends\n"
        + "        hwbackends.current()\n        return super().probe(host)\n",
    )
    env = clean_env(PYTHONPATH=str(s.path), HWBACKENDS_NO_CACHE="1", HWBACKENDS_TIMEOUT=limit)
    code = (
        "import json, hwbackends\n"
        "b = hwbackends.current()\n"
        "r = hwbackends.explain()\n"
        "print(json.dumps({'chosen': b.name, 'reason': r.status('acme').reason}))\n"
    )
    got = _run(code, env, timeout=25)  # a wait (30 s, or forever with 0) fails here
    assert got["chosen"] == "cpu"
    assert "called hwbackends.current() / explain() from its own code" in str(got["reason"])
    assert "did not return within" not in str(got["reason"])


def test_a_backend_whose_call_hangs_is_not_called_again_while_it_runs_across_reset(
    isolated: Site,
) -> None:
    """Bug: each reset() let a hung plugin be called, and hang, once more (one more thread
    each time). Its owner is refused while the hung call runs, reset() or not, and called
    again once that call has returned."""
    isolated.add_plugin(
        "acme",
        HANGS
        + good_plugin("acme", 90)
        + "    def probe(self, host):\n        CALLS.append(1)\n        RELEASE.wait(30)\n"
        + "        return super().probe(host)\n",
        module="hwb_hangs_once",
    )
    from coretest import refresh

    env = {"HWBACKENDS_TIMEOUT": "0.3"}
    try:
        for _ in range(3):
            hwbackends.reset()
            refresh(isolated)
            r = hwbackends.explain(env=env, host=HOST)
            assert r.chosen == "cpu"
        mod = sys.modules["hwb_hangs_once"]
        assert len(mod.CALLS) == 1  # called once, then refused at once
        assert "did not return within 0.3 s earlier in this process" in r.status("acme").reason
        assert "not called again until that call returns" in r.status("acme").reason
    finally:
        sys.modules["hwb_hangs_once"].RELEASE.set()
    deadline = time.monotonic() + 30
    while "acme" in guard._hung and time.monotonic() < deadline:
        time.sleep(0.01)
    refresh(isolated)
    assert hwbackends.explain(env=env, host=HOST).chosen == "acme"  # returned: called again


def test_the_worker_pool_is_capped_and_shrinks_when_idle(
    isolated: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolated.add_plugin(
        "acme",
        "import threading, time\nLOCK = threading.Lock()\nNOW = [0]\nMOST = [0]\n"
        + good_plugin("acme", 90)
        + "    def probe(self, host):\n"
        + "        with LOCK:\n            NOW[0] += 1\n"
        + "            MOST[0] = max(MOST[0], NOW[0])\n"
        + "        time.sleep(0.02)\n"
        + "        with LOCK:\n            NOW[0] -= 1\n"
        + "        return super().probe(host)\n",
        module="hwb_pool_probe",
    )
    from coretest import refresh

    refresh(isolated)
    monkeypatch.setattr(guard, "_IDLE_S", 0.2)
    monkeypatch.setattr(guard, "_MAX_WORKERS", 4)
    errors: list[str] = []

    def work() -> None:
        for _ in range(5):
            try:
                assert hwbackends.explain(env={}, host=HOST).chosen == "acme"
            except BaseException as exc:
                errors.append(repr(exc))

    threads = [threading.Thread(target=work) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sys.modules["hwb_pool_probe"].MOST[0] <= 4  # the cap held
    deadline = time.monotonic() + 30
    while guard._plugin_threads and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not guard._plugin_threads  # every idle worker exited


def test_stress_threads_selecting_with_application_env_writers(tmp_path: Path) -> None:
    """Application threads write os.environ while 8 threads select 40 times each and the
    plugin writes one of the same variables: no application write is ever lost."""
    s = Site(tmp_path / "site")
    s.path.mkdir()
    s.add_plugin(
        "acme",
        good_plugin("acme", 90)
        + "    def probe(self, host):\n        import os\n"
        + "        os.environ['APP_SHARED'] = 'plugin'\n"
        + "        os.environ['HWB_PLUGIN_KEY'] = 'plugin'\n"
        + "        return super().probe(host)\n",
    )
    env = clean_env(PYTHONPATH=str(s.path), HWBACKENDS_NO_CACHE="1")
    out = run_python("-c", STRESS, "8", "40", env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["ops"] == 320 and got["wrong"] == 0, got
    assert got["lost"] == 0, got


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_fork_during_a_plugin_import_leaves_the_child_a_whole_import(tmp_path: Path) -> None:
    s = Site(tmp_path / "site")
    s.path.mkdir()
    started = tmp_path / "importing"
    (s.path / "hwb_slowdep.py").write_text(
        f"import time\nopen({str(started)!r}, 'w').close()\ntime.sleep(1.5)\nREADY = True\n"
    )
    s.add_plugin(
        "acme",
        "import hwb_slowdep\n"
        + good_plugin("acme", 90)
        + "    def probe(self, host):\n"
        + "        from hwbackends import Probe\n"
        + "        return Probe('acme', True, True, 'found', None, ())\n"
        + "    def devices(self, host, env):\n"
        + "        from hwbackends import Device\n"
        + "        return [Device('acme', 'acme', 0, 0)]\n",
    )
    env = clean_env(PYTHONPATH=str(s.path), HWBACKENDS_NO_CACHE="1")
    out = run_python("-c", FORK, str(started), env=env, timeout=90)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"status": 0, "parent": "acme"}, got


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_fork_after_a_selection_does_not_wait_for_another_threads_import(tmp_path: Path) -> None:
    """Bug: after a selection every fork waited up to 2 s while any other thread imported
    (multiprocessing.Pool(8) took 16 s instead of 0.03 s). A fork waits only for hwbackends'
    own calls: here none is under way, so it does not wait for the application's import."""
    started = tmp_path / "importing"
    (tmp_path / "hwb_slowmod.py").write_text(
        f"import time\nopen({str(started)!r}, 'w').close()\ntime.sleep(5)\n"
    )
    env = clean_env(PYTHONPATH=str(tmp_path), HWBACKENDS_NO_CACHE="1")
    out = run_python("-c", FORK_DURING_AN_IMPORT, str(started), env=env, timeout=90)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout.strip().splitlines()[-1]) < 1.0, out.stdout
