"""The plugin guard's reports of what a plugin call changed in the process: the variables
selection reads, ``sys.path``, the working directory, the recursion limit, the standard file
descriptors. Reported naming the call, never undone (nothing tells the plugin's edit from one
another thread of the application made meanwhile); a fault only under ``HWBACKENDS_STRICT=1``.
The application's own writes are never touched.

Before this design the guard put edits back and marked the plugin broken for them ."""

from __future__ import annotations

import json
import os
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from coretest import Site, clean_env, good_plugin, run_python

from hwbackends import Host
from hwbackends._base import guard
from hwbackends._base.settings import Settings
from hwbackends._selection.registry import Registry

HOST = Host.from_dict({"device_nodes": ["/dev/acme0"]})


@pytest.fixture(autouse=True)
def _no_reports_left() -> Iterator[None]:
    guard.take_reports()  # whatever earlier tests left
    yield
    guard.take_reports()


def _probe_does(site: Site, code: str) -> None:
    site.add_plugin(
        "acme",
        good_plugin("acme", 90)
        + f"    def probe(self, host):\n        {code}\n        return super().probe(host)\n",
    )


EDITS = {
    "variable": (
        "import os\n        os.environ['HWBACKENDS_DEBUG'] = '1'",
        "the environment variables HWBACKENDS_DEBUG",
    ),
    "sys.path": (
        "import sys\n        sys.path.insert(0, '/hwb-planted')",
        "sys.path (added '/hwb-planted')",
    ),
    "chdir": ("import os\n        os.chdir('/')", "the working directory"),
    "recursion": ("import sys\n        sys.setrecursionlimit(50000)", "the recursion limit"),
}


@pytest.mark.parametrize("kind", sorted(EDITS))
@pytest.mark.parametrize("strict", [False, True])
def test_process_wide_edits_are_reported_naming_the_call_and_left_as_they_are(
    site: Site, kind: str, strict: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reported (a warning naming acme.probe()), not undone, and the plugin stays usable;
    under strict mode the plugin is broken for it instead."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HWBACKENDS_DEBUG", raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    limit = sys.getrecursionlimit()
    code, message = EDITS[kind]
    _probe_does(site, code)
    try:
        r = Registry(path=[str(site.path)]).select({}, HOST, Settings(strict=strict))
        st = r.status("acme")
        changed = (
            os.environ.get("HWBACKENDS_DEBUG") == "1",
            "/hwb-planted" in sys.path,
            Path.cwd() != tmp_path,
            sys.getrecursionlimit() != limit,
        )
    finally:
        os.environ.pop("HWBACKENDS_DEBUG", None)
        sys.setrecursionlimit(limit)
    assert changed[list(("variable", "sys.path", "chdir", "recursion")).index(kind)]  # left
    if strict:
        assert st.state == "broken" and message in st.reason, st.reason
        assert "HWBACKENDS_STRICT=1 makes this a fault" in st.reason
    else:
        assert st.state == "selected", st.reason
        note = [w for w in r.warnings if w.startswith("acme.probe() changed")]
        assert len(note) == 1 and message in note[0], r.warnings
        assert "not undone" in note[0]


def test_a_declared_visibility_variable_changed_by_a_probe_is_reported(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a backend's visibility variables have been read, a call changing one is seen."""
    monkeypatch.delenv("HWB_ACME_VISIBLE", raising=False)
    site.add_plugin(
        "acme",
        "from hwbackends.visibility import IndexList\n"
        + good_plugin("acme", 90)
        + "    visibility = IndexList('HWB_ACME_VISIBLE')\n"
        + "    def capabilities(self, device=None):\n"
        + "        import os\n        os.environ['HWB_ACME_VISIBLE'] = '7'\n"
        + "        return super().capabilities(device)\n",
    )
    reg = Registry(path=[str(site.path)])
    reg.select({}, HOST, Settings())  # reads acme's visibility rule: its variable is watched
    from hwbackends._selection.calls import plugin_call

    try:
        backend = reg.get("acme")
        plugin_call("acme", "capabilities", backend.capabilities)
    finally:
        os.environ.pop("HWB_ACME_VISIBLE", None)
    assert any("HWB_ACME_VISIBLE" in w and "acme.capabilities()" in w for w in guard.take_reports())


def test_a_variable_selection_does_not_read_is_not_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HWB_GUARD_OTHER", raising=False)
    guard.call("acme.probe()", lambda: os.environ.__setitem__("HWB_GUARD_OTHER", "1"), timeout=5)
    assert guard.take_reports() == []
    assert os.environ["HWB_GUARD_OTHER"] == "1"  # and left, like everything else


def test_an_application_threads_write_during_a_plugin_call_is_never_touched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The plugin writes a variable, the application writes it after it while the call is
    still under way: the application's value stands (nothing is ever put back)."""
    monkeypatch.delenv("HWBACKENDS_SHARED_TEST", raising=False)
    wrote, resume = threading.Event(), threading.Event()

    def plugin_code() -> None:
        os.environ["HWBACKENDS_SHARED_TEST"] = "plugin"
        wrote.set()
        resume.wait(5)

    def app() -> None:
        wrote.wait(5)
        os.environ["HWBACKENDS_SHARED_TEST"] = "application"
        resume.set()

    t = threading.Thread(target=app)
    t.start()
    try:
        guard.call("acme.probe()", plugin_code, timeout=10)
        t.join()
        assert os.environ["HWBACKENDS_SHARED_TEST"] == "application"
        assert any("HWBACKENDS_SHARED_TEST" in w for w in guard.take_reports())
    finally:
        os.environ.pop("HWBACKENDS_SHARED_TEST", None)


def test_an_application_threads_sys_path_entry_and_chdir_during_a_probe_stay(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An application thread edits sys.path and the working directory while a probe runs:
    both stand, the plugin is not broken for them, and the report says it may not be its."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    there = tmp_path / "the-applications-own"
    there.mkdir()
    mine = str(tmp_path / "added-by-the-application")
    sync = types.ModuleType("hwb_reports_sync")
    sync.STARTED, sync.GO = threading.Event(), threading.Event()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "hwb_reports_sync", sync)
    _probe_does(
        site, "import hwb_reports_sync as s\n        s.STARTED.set()\n        s.GO.wait(30)"
    )

    def app() -> None:
        sync.STARTED.wait(30)  # type: ignore[attr-defined]
        sys.path.append(mine)
        os.chdir(there)
        sync.GO.set()  # type: ignore[attr-defined]

    t = threading.Thread(target=app)
    t.start()
    r = Registry(path=[str(site.path)]).select({}, HOST, Settings())
    t.join()
    assert r.status("acme").state == "selected", r.status("acme").reason
    assert mine in sys.path and Path.cwd() == there
    note = [w for w in r.warnings if w.startswith("acme.probe() changed")]
    assert len(note) == 1 and repr(mine) in note[0] and "working directory" in note[0]
    assert "another thread of the application" in note[0]


def test_an_abandoned_call_returning_later_is_reported_and_keeps_the_applications_sys_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hung call that returns later is compared with its own start then: reported (the
    application has gone on meanwhile, so it may be the application's), never undone (bug
    once: the next test's site folder vanished from sys.path)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    release, done = threading.Event(), threading.Event()

    def hangs() -> None:
        release.wait(30)
        done.set()

    with pytest.raises(guard.PluginFault, match=r"did not return within 0\.2 s"):
        guard.call("acme.probe()", hangs, timeout=0.2, owner="acme-late")
    mine = str(tmp_path / "added-by-the-application")
    sys.path.insert(0, mine)  # the application goes on while the probe hangs
    release.set()
    assert done.wait(30)
    import time

    deadline = time.monotonic() + 30
    while "acme-late" in guard._hung and time.monotonic() < deadline:
        time.sleep(0.01)  # its worker reports once the probe has returned
    assert mine in sys.path
    late = guard.take_reports()
    assert any("acme.probe() returned after it was abandoned" in w and mine in w for w in late)


@pytest.mark.skipif(os.name != "posix", reason="POSIX file descriptors")
@pytest.mark.parametrize("fd", [1, 2])
def test_a_plugin_closing_standard_output_or_error_is_reported(tmp_path: Path, fd: int) -> None:
    s = Site(tmp_path / "site")
    s.path.mkdir()
    _probe_does(s, f"import os\n        os.close({fd})")
    host = tmp_path / "host.json"
    host.write_text(json.dumps({"device_nodes": ["/dev/acme0"]}))
    env = clean_env(PYTHONPATH=str(s.path), HWBACKENDS_HOST=str(host), HWBACKENDS_NO_CACHE="1")
    code = (
        "import os, hwbackends\n"
        "r = hwbackends.explain()\n"
        f"os.write({3 - fd}, '\\n'.join(r.warnings).encode())\n"
    )
    out = run_python("-c", code, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"acme.probe() changed file descriptor {fd} (closed)" in (out.stdout + out.stderr)


@pytest.mark.skipif(os.name != "posix", reason="POSIX file descriptors")
def test_a_call_closing_standard_error_is_reported_in_process() -> None:
    saved = os.dup(2)
    try:
        guard.call("acme.probe()", lambda: os.close(2), timeout=5)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    assert any("acme.probe() changed file descriptor 2 (closed)" in w for w in guard.take_reports())


def test_a_plugin_call_never_replaces_the_applications_environment_writers() -> None:
    """The guard wraps nothing: the application's own os.putenv stays in place during and
    after a plugin call, a hung one included (and so in a child forked meanwhile)."""
    seen: list[str] = []
    real = os.putenv

    def mine(key: str | bytes, value: str | bytes) -> None:
        seen.append(os.fsdecode(key))
        real(key, value)

    release = threading.Event()
    os.putenv = mine
    try:
        with pytest.raises(guard.PluginFault, match="did not return within"):
            guard.call("acme.probe()", lambda: release.wait(60), timeout=0.1)
        assert os.putenv is mine
        os.environ["HWB_GUARD_MINE"] = "1"
        assert seen == ["HWB_GUARD_MINE"]
    finally:
        release.set()
        os.putenv = real
        os.environ.pop("HWB_GUARD_MINE", None)


@pytest.mark.parametrize("strict", ["0", "1"])
def test_plugins_check_names_the_edit_and_fails_only_in_strict_mode(
    tmp_path: Path, strict: str
) -> None:
    s = Site(tmp_path / "site")
    s.path.mkdir()
    _probe_does(s, "import sys\n        sys.path.append('/hwb-planted-by-acme')")
    host = tmp_path / "host.json"
    host.write_text(json.dumps({"device_nodes": ["/dev/acme0"]}))
    env = clean_env(PYTHONPATH=str(s.path), HWBACKENDS_HOST=str(host), HWBACKENDS_STRICT=strict)
    out = run_python("-m", "hwbackends", "plugins", "--check", env=env, timeout=60)
    assert (out.returncode == 0) == (strict == "0"), out.stderr  # strict: broken, as any fault
    assert "acme.probe() changed sys.path (added '/hwb-planted-by-acme')" in out.stderr
