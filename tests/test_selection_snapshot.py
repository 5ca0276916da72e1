"""One selection per process, one snapshot of the environment per answer.

The integrations work from the selection ``current()`` uses: a second ``pretrained_kwargs()``
reads nothing and selects nothing. An answer comes from one copy of ``os.environ``, so a
thread writing the visibility variables meanwhile can neither tear one answer nor make the
selection cache store an answer under the key of other inputs. The heavier run of the stress
tests is ``bench/snapshot_stress.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from coretest import Site, clean_env

from hwbackends import Host

ROOT = Path(__file__).resolve().parents[1]
H100_FILE = ROOT / "plugins/hwbackends-cuda/tests/hosts/h100-sxm-8.json"

SECOND_CALL = r"""
import json, sys
from hwbackends import accelerate, transformers
from hwbackends._selection import calls, choose, registry

runs = {"select": 0, "devices": 0, "opens": 0}
select, devices = registry.Registry.select, calls._devices
def counted_select(*a, **k):
    runs["select"] += 1
    return select(*a, **k)
def counted_devices(*a, **k):
    runs["devices"] += 1
    return devices(*a, **k)
registry.Registry.select = counted_select
calls._devices = choose._devices = counted_devices
on = [False]
def hook(event, args):
    if on[0] and event in ("open", "os.listdir", "os.scandir"):
        runs["opens"] += 1
sys.addaudithook(hook)
first = transformers.pretrained_kwargs(kernels=False)
before = dict(runs)
on[0] = True
second = transformers.pretrained_kwargs(kernels=False)
accelerate.training_kwargs()
on[0] = False
print(json.dumps({"first": before, "after": {k: runs[k] - before.get(k, 0) for k in runs},
                  "same": repr(first) == repr(second)}))
"""


@pytest.mark.parametrize("host_file", ["", str(H100_FILE)], ids=["this-machine", "h100-file"])
def test_a_second_integration_call_reads_nothing_and_selects_nothing(host_file: str) -> None:
    """Before: each call read the machine again (36 opens and 4 listings here, 3 opens with a
    host file), ran a full selection and the backend's devices() twice."""
    env = clean_env(HWBACKENDS_NO_CACHE="1")
    if host_file:
        env["HWBACKENDS_HOST"] = host_file
    out = subprocess.run(
        [sys.executable, "-c", SECOND_CALL], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["first"]["select"] == 1 and got["first"]["devices"] == 1
    assert got["after"] == {"select": 0, "devices": 0, "opens": 0}
    assert got["same"] is True


def test_reset_makes_the_next_call_read_the_environment_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The defaults keep their snapshot until ``hwbackends.reset()``, as ``current()`` does."""
    import hwbackends
    from hwbackends.transformers import pretrained_kwargs

    monkeypatch.setenv("HWBACKENDS_HOST", str(H100_FILE))
    hwbackends.reset()
    try:
        assert pretrained_kwargs(kernels=False)["device_map"] == "auto"
        monkeypatch.setenv("HWBACKENDS_HOST", str(ROOT / "docs/hosts/two-l40s.json"))
        assert pretrained_kwargs(kernels=False)["device_map"] == "auto"
        assert hwbackends.explain().host.source == str(H100_FILE)
        hwbackends.reset()
        assert hwbackends.explain().host.source.endswith("two-l40s.json")
    finally:
        hwbackends.reset()


def test_env_and_explain_then_an_integration_select_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``hwbackends env`` makes its settings from the report it shows, and
    ``pretrained_kwargs(env=, host=)`` after ``explain(env=, host=)`` with the same inputs from
    that report. Before, each of the two plans probed the backend and listed its devices
    again (2 probes, 2 devices() beside the selection's)."""
    import hwbackends
    from hwbackends._selection import registry
    from hwbackends.cli import main
    from hwbackends.transformers import pretrained_kwargs

    runs: dict[str, int] = {}
    select, call = registry.Registry.select, registry.plugin_call

    def counted_select(*a: Any, **k: Any) -> Any:
        runs["select"] = runs.get("select", 0) + 1
        return select(*a, **k)

    def counted_call(name: str, method: str, *a: Any, **k: Any) -> Any:
        runs[method] = runs.get(method, 0) + 1
        return call(name, method, *a, **k)

    monkeypatch.setattr(registry.Registry, "select", counted_select)
    monkeypatch.setattr(registry, "plugin_call", counted_call)
    assert main(["env", "--json", "--host", str(H100_FILE)]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["from_pretrained"]
    assert runs.get("select") == 1 and "probe" not in runs and "devices" not in runs, runs
    runs.clear()
    host = Host.from_file(H100_FILE)
    report = hwbackends.explain(env={}, host=host)
    kw = pretrained_kwargs(env={}, host=host, kernels=False)
    assert kw["device_map"] == "auto" and report.chosen == "cuda"
    assert runs.get("select") == 1 and "probe" not in runs and "devices" not in runs, runs
    runs.clear()
    pretrained_kwargs(env={"CUDA_VISIBLE_DEVICES": "0"}, host=host, kernels=False)
    assert runs.get("select") == 1, runs  # other inputs: their own selection
    hwbackends.reset()


class _Flipper:
    """A thread that writes ``name`` over and over, alternating between ``values``."""

    def __init__(self, name: str, values: tuple[str, ...]) -> None:
        self.name, self.values, self.writes = name, values, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            os.environ[self.name] = self.values[self.writes % len(self.values)]
            self.writes += 1
            time.sleep(0)

    def __enter__(self) -> _Flipper:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def test_pretrained_kwargs_is_never_torn_by_a_concurrent_writer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host without its own environment: the call reads ``os.environ``, which another
    thread flips between one visible H100 and none. Before, the selection and the device list
    read it at different moments: ``device_map='cpu'`` came with ``flash_attention_2``."""
    from hwbackends.transformers import plan_pretrained

    data = json.loads(H100_FILE.read_text(encoding="utf-8"))
    data.pop("env")
    host = Host.from_dict(data, source="an H100 box, no env of its own")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    answers = {}
    for value in ("0", ""):
        os.environ["CUDA_VISIBLE_DEVICES"] = value
        answers[value] = plan_pretrained(host=host, kernels=False).kwargs
    assert answers["0"]["device_map"] == "cuda:0" and answers[""]["device_map"] == "cpu"
    allowed = [repr(a) for a in answers.values()]
    calls, wrong = 0, []
    sys.setswitchinterval(1e-5)
    try:
        with _Flipper("CUDA_VISIBLE_DEVICES", ("0", "")):
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                got = repr(plan_pretrained(host=host, kernels=False).kwargs)
                calls += 1
                if got not in allowed:
                    wrong.append(got)
    finally:
        sys.setswitchinterval(0.005)
    assert calls > 10
    assert wrong == [], f"{len(wrong)} of {calls} answers torn, e.g. {wrong[0]}"


STRESS_PLUGIN = """
from typing import ClassVar
from hwbackends import Device, Probe
from hwbackends.plugin import BaseBackend
from hwbackends.visibility import IndexList

class Backend(BaseBackend):
    name: ClassVar[str] = "stress"
    api_version: ClassVar[int] = 1
    # torch's slot for an out-of-tree device: no "register the extension" warning
    device_type: ClassVar[str] = "privateuseone"
    priority: ClassVar[int] = 90
    visibility = IndexList("STRESS_VISIBLE_DEVICES")

    def probe(self, host):
        return Probe(backend="stress", hardware_present=True, software_ready=True,
                     reason="a test device, always present")

    def devices(self, host, env):
        if env.get("STRESS_VISIBLE_DEVICES") == "":
            return []
        return [Device(backend="stress", device_type="privateuseone", index=0, physical_index=0)]
"""

#: One process: first selections while a thread flips the declared variable, each followed
#: by what a later process with either value reads from the cache alone.
CACHE_STRESS = r"""
import json, os, sys, threading, time
import hwbackends
from hwbackends._selection import cache

N, VAR = int(sys.argv[1]), "STRESS_VISIBLE_DEVICES"
truth = {"0": "stress", "": "cpu"}
stop = threading.Event()
def flip():
    i = 0
    while not stop.is_set():
        os.environ[VAR] = ("0", "")[i % 2]
        i += 1
        time.sleep(0)
sys.setswitchinterval(1e-5)
stored = wrong = 0
bad = []
for trial in range(N):
    try:  # several of these processes may run at once (bench/snapshot_stress.py)
        os.unlink(cache.cache_file())
    except (OSError, TypeError):
        pass
    hwbackends.reset()
    stop.clear()
    t = threading.Thread(target=flip, daemon=True)
    t.start()
    hwbackends.current()
    stop.set()
    t.join()
    for value in ("0", ""):
        os.environ[VAR] = value
        hwbackends.reset()
        got = hwbackends.current().name
        if cache.LAST == "hit":
            stored += 1
            if got != truth[value]:
                wrong += 1
                bad.append((trial, value, got))
print(json.dumps({"trials": N, "hits": stored, "wrong": wrong, "bad": bad[:5]}))
"""


def test_a_writer_during_the_first_selection_never_leaves_a_wrong_cached_answer(
    site: Site, tmp_path: Path
) -> None:
    """Before, the key's fingerprint was taken before the selection and the watched values
    after it: an answer read in between was stored under a key it did not come from, and
    every later process with that value read it."""
    site.add_plugin("stress", STRESS_PLUGIN)
    env = clean_env(PYTHONPATH=str(site.path), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("STRESS_VISIBLE_DEVICES", None)
    out = subprocess.run(
        [sys.executable, "-c", CACHE_STRESS, "25"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    got: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["hits"] > 0, got  # the cache was read: the test tests something
    assert got["wrong"] == 0, got


DRIVER_PLUGIN = """
from typing import ClassVar
from hwbackends.plugin import BaseBackend

class Backend(BaseBackend):
    name: ClassVar[str] = "drv"
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "drv"
    driver_modules: ClassVar[tuple[str, ...]] = ("drvtest",)
"""


def test_a_driver_version_change_alone_misses_the_cache(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only ``/sys/module/<driver>/version`` changes (same size, same mtime, same folder):
    the watched values cover every declared driver module's version, so the next lookup
    misses. Before, a driver seen only there kept a stale answer."""
    import hwbackends
    from hwbackends._selection import cache, registry

    site.add_plugin("drv", DRIVER_PLUGIN)
    root = tmp_path / "root"
    (root / "sys/module/drvtest").mkdir(parents=True)
    version = root / "sys/module/drvtest/version"
    version.write_text("2.0\n", encoding="utf-8")
    hwbackends.reset()
    monkeypatch.setattr(registry, "_registry", registry.Registry(path=[str(site.path)]))
    try:
        watch = registry.watch_lists({})
    finally:
        hwbackends.reset()
    assert "sys/module/drvtest/version" in watch[1]
    before = cache._key(cache.detail(watch, root=str(root), env={}))
    stat = version.stat()
    version.write_text("1.0\n", encoding="utf-8")
    os.utime(version, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # as sysfs keeps it
    assert cache._key(cache.detail(watch, root=str(root), env={})) != before


AFTER_A_HIT = r"""
import json, os, warnings
import hwbackends
from hwbackends._selection import cache

warnings.simplefilter("error")
first = hwbackends.current().name
last = cache.LAST
os.environ["STRESS_VISIBLE_DEVICES"] = ""  # changed after current(): needs reset() to count
print(json.dumps({"last": last, "current": first, "explain": hwbackends.explain().chosen,
                  "again": hwbackends.current().name}))
"""


def test_the_process_selection_reads_the_copy_a_cached_answer_came_from(
    site: Site, tmp_path: Path
) -> None:
    """``current()`` answered from the selection cache; the environment changes; the
    selection the integrations and ``explain()`` make later reads the copy that answer was
    looked up with, so they agree. Before, they read a new copy, chose cpu, and the
    disagreement was a warning that made ``current()`` change its answer."""
    site.add_plugin("stress", STRESS_PLUGIN)
    env = clean_env(PYTHONPATH=str(site.path), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("STRESS_VISIBLE_DEVICES", None)
    runs = []
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", AFTER_A_HIT], capture_output=True, text=True, env=env,
            timeout=120,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert [r["last"] for r in runs] == ["miss", "hit"]
    assert runs[1] == {"last": "hit", "current": "stress", "explain": "stress", "again": "stress"}
