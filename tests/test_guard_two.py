"""Reliability, round two (issue 21): the cache, the guard, reentrancy, abandoned calls,
fork during a plugin import.

Each test failed on the main before this round: a transient plugin failure was cached and
later processes got the CPU; a ``str`` subclass from a probe ran its ``__format__`` in the
caller's thread; a nested ``current()`` waited for its own caller; a timed-out plugin was
called again; a fork during a plugin import left the child's import stuck or half done.
(The process-wide edits are tests/test_guard_reports.py's.)
"""

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

HOST = Host.from_dict({"device_nodes": ["/dev/acme0", "/dev/beta0"]})

# A plugin that is available on any machine (the real reader, so the selection cache is used),
# and fails while the file MARK exists: its probe raises EAGAIN, or runs past the limit.
ACME = """
import errno, os, time
from typing import ClassVar
from hwbackends import Device, Probe
from hwbackends.plugin import BaseBackend

MARK = {mark!r}
MODE = {mode!r}

class Backend(BaseBackend):
    name: ClassVar[str] = "acme"
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "acme"
    priority: ClassVar[int] = 95

    def probe(self, host):
        if os.path.exists(MARK):
            if MODE == "eagain":
                raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
            time.sleep(3)
        return Probe("acme", True, True, "acme hardware found", None, ("test",))

    def devices(self, host, env):
        return [Device("acme", "acme", 0, 0)]
"""

REPORT = (
    "import json, hwbackends, hwbackends._selection.cache as c\n"
    "b = hwbackends.current()\n"
    "last = c.LAST\n"
    "r = hwbackends.explain()\n"
    "print(json.dumps({'current': b.name, 'last': last, 'explain': r.chosen,\n"
    "                  'after': hwbackends.current().name, 'warnings': list(r.warnings)}))\n"
)


def _run(code: str, env: dict[str, str], timeout: float = 90) -> dict[str, object]:
    out = run_python("-c", code, env=env, timeout=timeout)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    got["stderr"] = out.stderr
    return dict(got)


def _acme_site(tmp_path: Path, mode: str, extra: str = "") -> tuple[Path, Path]:
    s = Site(tmp_path / "site")
    s.path.mkdir()
    mark = tmp_path / "fail-now"
    s.add_plugin("acme", ACME.format(mark=str(mark), mode=mode))
    if extra:
        s.add_plugin("beta", extra)
    return s.path, mark


# -- 1. only a settled answer is cached -------------------------------------------------------


@pytest.mark.parametrize("mode", ["eagain", "timeout"])
def test_a_transient_failure_is_not_cached_and_the_next_processes_get_the_accelerator(
    tmp_path: Path, mode: str
) -> None:
    site, mark = _acme_site(tmp_path, mode)
    env = clean_env(
        PYTHONPATH=str(site), XDG_CACHE_HOME=str(tmp_path / "cache"), HWBACKENDS_TIMEOUT="1"
    )
    mark.write_text("")
    first = _run(REPORT, env)
    assert (first["current"], first["explain"]) == ("cpu", "cpu"), first
    mark.unlink()  # the plugin is healthy from now on
    second = _run(REPORT, env)
    third = _run(REPORT, env)
    for got in (second, third):
        assert got["current"] == got["explain"] == got["after"] == "acme", got
    assert (second["last"], third["last"]) == ("miss", "hit")


def test_current_and_explain_never_disagree_when_a_cached_answer_goes_stale(
    tmp_path: Path,
) -> None:
    site, mark = _acme_site(tmp_path, "eagain")
    env = clean_env(PYTHONPATH=str(site), XDG_CACHE_HOME=str(tmp_path / "cache"))
    assert _run(REPORT, env)["current"] == "acme"  # stored: a settled answer
    mark.write_text("")  # now its probe fails: the cache still says acme
    got = _run(REPORT, env)
    assert got["last"] == "hit" and got["current"] == "acme"
    assert got["explain"] == got["after"] == "cpu", got  # one answer from here on
    assert any("current() answered 'acme' earlier" in w for w in got["warnings"])  # type: ignore[union-attr]
    mark.unlink()
    again = _run(REPORT, env)  # the stale answer was dropped: a full selection again
    assert again["last"] == "miss" and again["current"] == "acme"


BETA_UNREADY = (
    good_plugin("beta", 10)
    + "    def probe(self, host):\n"
    + "        from hwbackends import Probe\n"
    + "        return Probe('beta', True, False, 'beta driver not loaded', 'load it', ())\n"
)


def test_a_cache_hit_warns_when_the_stored_selection_had_caveats(tmp_path: Path) -> None:
    site, _ = _acme_site(tmp_path, "eagain", BETA_UNREADY)
    env = clean_env(PYTHONPATH=str(site), XDG_CACHE_HOME=str(tmp_path / "cache"))
    first = _run(REPORT, env)
    assert first["last"] == "miss" and "beta: beta driver not loaded" in " ".join(
        first["warnings"]  # type: ignore[arg-type]
    )
    second = _run(REPORT, env)
    assert second["last"] == "hit"
    assert "answered 'acme' from the selection cache" in str(second["stderr"])
    assert "beta: beta driver not loaded" in str(second["stderr"])


# -- 2. plugin values cross the guard as exact builtin copies ---------------------------------

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


# -- 3. a nested current() from plugin code is refused at once --------------------------------


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


# -- 4. abandoned calls are bounded -----------------------------------------------------------

HANGS = """
import os, threading
CALLS = []
RELEASE = threading.Event()
"""


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


# -- 6. fork during a plugin import ------------------------------------------------------------

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
