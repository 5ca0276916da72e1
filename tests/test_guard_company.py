"""Process-wide edits seen around a plugin call while other threads of the application exist.

Bug: the guard compared ``sys.path``, the working directory and the rest before and after a
plugin call and put back every difference, blaming the plugin: an application thread that
added a ``sys.path`` entry or changed directory during a probe had its change undone, and the
plugin was reported broken for it (so its hardware was not used). Now a ``chdir`` is the
thread's that made it, a replaced ``sys.modules`` entry is always the plugin's, and the edits
that nothing attributes are neither put back nor blamed while another thread exists.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from coretest import Site, good_plugin

from hwbackends import Host
from hwbackends._base import company as _company
from hwbackends._base import guard
from hwbackends._base.settings import Settings
from hwbackends._selection.registry import Registry

HOST = Host.from_dict({"device_nodes": ["/dev/acme0"]})

# The probe says it has started, then waits for the application thread to have done its edit.
WAITS = """
    def probe(self, host):
        import hwb_company_sync as sync
        sync.STARTED.set()
        sync.GO.wait(30)
        return super().probe(host)
"""


PLUGIN_CHDIR = "__import__('os').chdir('/')\n        "


@pytest.fixture
def sync() -> Iterator[types.SimpleNamespace]:
    mod = types.ModuleType("hwb_company_sync")
    mod.STARTED = threading.Event()  # type: ignore[attr-defined]
    mod.GO = threading.Event()  # type: ignore[attr-defined]
    sys.modules["hwb_company_sync"] = mod
    yield mod  # type: ignore[misc]
    mod.GO.set()  # type: ignore[attr-defined]
    sys.modules.pop("hwb_company_sync", None)
    guard.late_writes()


@pytest.fixture
def idle_thread() -> Iterator[threading.Thread]:
    """An application thread that waits the whole time (tqdm's monitor thread, which
    Transformers starts, waits in ``Event.wait``)."""
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    yield t
    stop.set()
    t.join()


@pytest.fixture
def busy_thread() -> Iterator[threading.Thread]:
    """An application thread that runs a little Python code every millisecond: a loop around
    ``time.sleep`` comes back to the same frame and instruction after each iteration."""
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            time.sleep(0.001)

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    yield t
    stop.set()
    t.join()


def select(site: Site) -> tuple[str, str, tuple[str, ...]]:
    guard.late_writes()  # forget what earlier tests left
    r = Registry(path=[str(site.path)]).select({}, HOST, Settings())
    st = r.status("acme")
    return st.state, st.reason, r.warnings


def during_probe(sync: types.SimpleNamespace, edit: object) -> threading.Thread:
    """An application thread that makes ``edit`` while the probe runs."""

    def run() -> None:
        assert sync.STARTED.wait(30)
        edit()  # type: ignore[operator]
        sync.GO.set()

    t = threading.Thread(target=run)
    t.start()
    return t


def test_an_application_threads_sys_path_entry_during_a_probe_stays_and_nobody_is_blamed(
    site: Site, sync: types.SimpleNamespace, tmp_path: Path
) -> None:
    site.add_plugin("acme", good_plugin("acme", 90) + WAITS)
    mine = str(tmp_path / "added-by-the-application")
    t = during_probe(sync, lambda: sys.path.append(mine))
    try:
        state, reason, warnings = select(site)
        t.join()
        assert state == "selected", reason
        assert mine in sys.path
        note = [w for w in warnings if "acme.probe()" in w and repr(mine) in w]
        assert len(note) == 1, warnings
        assert "neither put back nor blamed on the plugin" in note[0]
    finally:
        while mine in sys.path:
            sys.path.remove(mine)


def test_an_application_threads_chdir_during_a_probe_stays_and_nobody_is_blamed(
    site: Site, sync: types.SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    there = tmp_path / "the-applications-own"
    there.mkdir()
    site.add_plugin("acme", good_plugin("acme", 90) + WAITS)
    t = during_probe(sync, lambda: os.chdir(there))
    state, reason, warnings = select(site)
    t.join()
    assert state == "selected", reason
    assert Path.cwd() == there  # the wrappers knew whose chdir it was: nothing to report
    assert not [w for w in warnings if "working directory" in w], warnings
    assert os.chdir.__module__ == "posix" or sys.platform == "win32"  # unwrapped again


def test_an_application_threads_chdir_is_kept_even_after_the_plugins_own(
    site: Site, sync: types.SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last chdir decides, as for environment writes: the application's stands."""
    monkeypatch.chdir(tmp_path)
    there = tmp_path / "the-applications-own"
    there.mkdir()
    site.add_plugin(
        "acme",
        good_plugin("acme", 90)
        + WAITS.replace("sync.STARTED.set()", PLUGIN_CHDIR + "sync.STARTED.set()"),
    )
    t = during_probe(sync, lambda: os.chdir(there))
    state, reason, _ = select(site)
    t.join()
    assert state == "selected", reason
    assert Path.cwd() == there


@pytest.mark.usefixtures("busy_thread")
def test_a_plugins_chdir_is_put_back_and_blamed_even_with_other_threads(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    site.add_plugin(
        "acme",
        good_plugin("acme", 90)
        + "    def probe(self, host):\n        import os\n        os.chdir('/')\n"
        + "        return super().probe(host)\n",
    )
    state, reason, _ = select(site)
    assert state == "broken" and "changed the working directory" in reason, reason
    assert Path.cwd() == tmp_path


@pytest.mark.usefixtures("busy_thread")
def test_a_plugins_replaced_module_is_put_back_and_blamed_even_with_other_threads(
    site: Site,
) -> None:
    import json

    site.add_plugin(
        "acme",
        good_plugin("acme", 90)
        + "    def probe(self, host):\n        import sys, types\n"
        + "        sys.modules['json'] = types.ModuleType('json')\n"
        + "        return super().probe(host)\n",
    )
    state, reason, _ = select(site)
    assert state == "broken" and "replaced sys.modules entries (json)" in reason, reason
    assert sys.modules["json"] is json


def add_sys_path_plugin(site: Site, tmp_path: Path) -> str:
    """An acme plugin whose probe appends a ``sys.path`` entry; the entry."""
    entry = str(tmp_path / "added-by-the-plugin")
    site.add_plugin(
        "acme",
        good_plugin("acme", 90)
        + f"    def probe(self, host):\n        import sys\n        sys.path.append({entry!r})\n"
        + "        return super().probe(host)\n",
    )
    return entry


@pytest.mark.usefixtures("busy_thread")
def test_a_plugins_sys_path_entry_beside_a_running_thread_is_reported_not_blamed(
    site: Site, tmp_path: Path
) -> None:
    """The price of never undoing the application's own edit: while another thread runs, a
    plugin's sys.path entry cannot be told from that thread's, so it is only reported."""
    entry = add_sys_path_plugin(site, tmp_path)
    try:
        state, reason, warnings = select(site)
        assert state == "selected", reason
        assert [w for w in warnings if "acme.probe()" in w and repr(entry) in w], warnings
    finally:
        while entry in sys.path:
            sys.path.remove(entry)


@pytest.mark.parametrize("company", ["alone", "idle_thread"])
def test_alone_or_beside_waiting_threads_the_same_entry_is_put_back_and_blamed(
    site: Site, tmp_path: Path, company: str, request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue("alone" if company == "alone" else company)
    entry = add_sys_path_plugin(site, tmp_path)
    state, reason, warnings = select(site)
    if company != "alone" and not _company.FRAMES_SAFE:
        # where the frames cannot be read safely, a waiting thread is one that may run
        assert state == "selected" and any(repr(entry) in w for w in warnings), reason
        sys.path.remove(entry)
        return
    assert state == "broken" and "changed sys.path" in reason, reason
    assert entry not in sys.path


@pytest.mark.parametrize("company", ["alone", "idle_thread"])
def test_where_reading_frames_can_deadlock_the_threads_are_counted(
    site: Site,
    tmp_path: Path,
    company: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before CPython 3.11.12, sys._current_frames() can deadlock a process whose threads
    start and end (python/cpython#106883): the guard never calls it there. Alone, the
    plugin's sys.path entry is put back and blamed; beside another thread, only reported."""
    monkeypatch.setattr(_company, "FRAMES_SAFE", False)  # first: the fixtures read it
    request.getfixturevalue("alone" if company == "alone" else company)
    read: list[int] = []
    monkeypatch.setattr(sys, "_current_frames", lambda: read.append(1) or {})
    entry = add_sys_path_plugin(site, tmp_path)
    try:
        state, reason, warnings = select(site)
        assert read == []
        if company == "alone":
            assert state == "broken" and "changed sys.path" in reason, reason
            assert entry not in sys.path
        else:
            assert state == "selected" and any(repr(entry) in w for w in warnings), reason
    finally:
        while entry in sys.path:
            sys.path.remove(entry)


def test_a_looping_threads_entry_is_kept_though_it_is_back_where_it_was(
    site: Site, sync: types.SimpleNamespace, tmp_path: Path
) -> None:
    """A thread looping around time.sleep is back in the same frame at the same instruction
    after an iteration that edited sys.path: it still counts as having run."""
    site.add_plugin("acme", good_plugin("acme", 90) + WAITS)
    mine = str(tmp_path / "added-by-the-loop")
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            if sync.STARTED.is_set() and not sync.GO.is_set():
                sys.path.append(mine)
                sync.GO.set()
            time.sleep(0.001)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        state, reason, warnings = select(site)
        assert state == "selected", reason
        assert mine in sys.path
        assert [w for w in warnings if repr(mine) in w], warnings
    finally:
        stop.set()
        t.join()
        while mine in sys.path:
            sys.path.remove(mine)


@pytest.mark.usefixtures("idle_thread")
def test_a_call_abandoned_for_hanging_lets_go_of_the_other_threads_frames(
    site: Site, sync: types.SimpleNamespace
) -> None:
    """The frames held to compare with after the call keep their locals alive: a call that
    may never return must not keep them."""
    site.add_plugin("acme", good_plugin("acme", 90) + WAITS)
    guard.late_writes()
    r = Registry(path=[str(site.path)]).select({}, HOST, Settings(timeout=0.2))
    assert r.status("acme").state == "broken"
    try:
        assert sync.STARTED.is_set() and guard._frames == {}
    finally:
        sync.GO.set()
        guard.forget_hung()  # the next tests' acme plugins are called again
