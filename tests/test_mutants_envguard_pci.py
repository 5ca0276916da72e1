"""Behaviour that mutation testing (``scripts/mutation.py --module envguard`` / ``pci``) found
untested: the environment guard's repairs and its state in a forked child, and the edges of
the PCI helpers plugins use (``pci_id``, ``normalise_bus_id``, ``match_node``).

Each test fails on one or more planted bugs of those modules; tests/mutation-survivors.md
lists the mutants no test can kill."""

from __future__ import annotations

import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwbackends._base import envguard, guard
from hwbackends.plugin import match_node, normalise_bus_id, pci_id

LINUX = sys.platform.startswith("linux")

# -- the environment guard --------------------------------------------------------------------


def _c_getenv(name: str) -> bytes | None:
    import ctypes

    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    got: bytes | None = libc.getenv(name.encode())
    return got


class _AppWriters:
    """An application's own ``os.putenv`` / ``os.unsetenv`` (an audit log of environment
    writes): each call is recorded, then made with the functions they replaced."""

    def __init__(self) -> None:
        self.real = (os.putenv, os.unsetenv)
        self.seen: list[str] = []

    def putenv(self, key: str | bytes, value: str | bytes) -> None:
        self.seen.append(os.fsdecode(key))
        self.real[0](key, value)

    def unsetenv(self, key: str | bytes) -> None:
        self.seen.append(os.fsdecode(key))
        self.real[1](key)


@pytest.fixture
def app_writers() -> Iterator[_AppWriters]:
    """The application's writers, installed; the originals are back afterwards."""
    app = _AppWriters()
    os.putenv, os.unsetenv = app.putenv, app.unsetenv
    try:
        yield app
    finally:
        os.putenv, os.unsetenv = app.real


def _plugin_writes(code: Callable[[], None]) -> guard.PluginFault:
    with pytest.raises(guard.PluginFault) as caught:
        guard.call("acme.probe()", code, timeout=5)
    return caught.value


@pytest.mark.skipif(not LINUX, reason="C environment via ctypes")
def test_an_edit_of_os_environs_mapping_is_put_back_to_the_value_the_process_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plugin that rewrites os.environ's mapping of a variable the application set (the C
    environment untouched) is blamed, and os.environ says the application's value again."""
    import ctypes  # noqa: F401 - loaded before the call: the C environment is compared

    monkeypatch.setenv("HWB_MUT_PRESENT", "mine")

    def plugin() -> None:
        os.environ._data[b"HWB_MUT_PRESENT"] = b"plugin"  # type: ignore[attr-defined]

    fault = _plugin_writes(plugin)
    assert "HWB_MUT_PRESENT (edited os.environ's mapping)" in fault.reason
    assert os.environ.get("HWB_MUT_PRESENT") == "mine"
    assert _c_getenv("HWB_MUT_PRESENT") == b"mine"


def test_a_plugins_writes_and_their_undo_go_through_the_applications_own_writers(
    monkeypatch: pytest.MonkeyPatch, app_writers: _AppWriters
) -> None:
    """While a plugin call runs, the guard wraps os.putenv / os.unsetenv to see the plugin's
    writes; what it wraps are the application's own (an audit log of environment writes):
    the plugin's writes and deletions reach them, and so does the guard's undo."""
    monkeypatch.setenv("HWB_MUT_PRESENT", "mine")
    monkeypatch.delenv("HWB_MUT_NEW", raising=False)
    app_writers.seen.clear()

    def plugin() -> None:
        os.environ["HWB_MUT_NEW"] = "plugin"
        del os.environ["HWB_MUT_PRESENT"]

    fault = _plugin_writes(plugin)
    assert "changed os.environ (HWB_MUT_NEW, HWB_MUT_PRESENT)" in fault.reason
    assert os.environ.get("HWB_MUT_PRESENT") == "mine" and "HWB_MUT_NEW" not in os.environ
    assert app_writers.seen == ["HWB_MUT_NEW", "HWB_MUT_PRESENT", "HWB_MUT_NEW", "HWB_MUT_PRESENT"]


@pytest.mark.skipif(not LINUX, reason="C environment via ctypes")
def test_repairs_of_the_c_environment_go_through_the_applications_own_writers(
    monkeypatch: pytest.MonkeyPatch, app_writers: _AppWriters
) -> None:
    """A plugin that sets the C environment behind os.environ's back (ctypes ``setenv``) is
    undone with the os.putenv / os.unsetenv the application had in place, as every other
    environment write of the process is: an application auditing them sees the repair."""
    import ctypes

    monkeypatch.setenv("HWB_MUT_PRESENT", "mine")
    app_writers.seen.clear()

    def plugin() -> None:
        libc = ctypes.CDLL(None)
        libc.setenv(b"HWB_MUT_PRESENT", b"plugin", 1)
        libc.setenv(b"HWB_MUT_C_ONLY", b"plugin", 1)

    fault = _plugin_writes(plugin)
    assert "bypassing os.environ" in fault.reason
    assert _c_getenv("HWB_MUT_PRESENT") == b"mine" and _c_getenv("HWB_MUT_C_ONLY") is None
    assert sorted(app_writers.seen) == ["HWB_MUT_C_ONLY", "HWB_MUT_PRESENT"]


@pytest.mark.skipif(os.name != "posix", reason="POSIX file descriptors")
@pytest.mark.usefixtures("alone")
def test_a_plugin_closing_standard_error_is_reported() -> None:
    """Standard error (descriptor 2) is watched like standard output: a plugin that closes it
    is blamed, with the descriptor's number (nothing can reopen it for the application)."""
    saved = os.dup(2)
    try:
        fault = _plugin_writes(lambda: os.close(2))
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    assert "closed file descriptor 2 (cannot be undone)" in fault.reason


def _fork_and_write(app: _AppWriters) -> int:
    """Fork; the child writes one variable and exits 0 when the application's os.putenv
    carried it (1 when not). The child's exit status."""
    with warnings.catch_warnings():  # Python >= 3.12 warns of fork with other threads alive
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            app.seen.clear()
            os.environ["HWB_MUT_CHILD"] = "1"
            code = 0 if app.seen == ["HWB_MUT_CHILD"] else 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60  # a safety net for a child stuck on a lock, no timing
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child did not exit")
        time.sleep(0.01)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
@pytest.mark.parametrize("installed", ["before the plugin call", "while it hangs"])
def test_a_hung_plugin_call_leaves_the_applications_putenv_in_place_and_in_forked_children(
    installed: str,
) -> None:
    """An abandoned (hung) plugin call keeps the guard's writers in place until it returns.
    A process the application forks meanwhile (data-loader workers) has only the forking
    thread, and writes its environment through the application's os.putenv, the one in place
    at the fork; once the call returns, so does the application. Whether the application
    installed its own before the plugin call or since, its own stays."""
    app = _AppWriters()
    release = threading.Event()
    try:
        if installed == "before the plugin call":
            os.putenv, os.unsetenv = app.putenv, app.unsetenv
        with pytest.raises(guard.PluginFault, match="did not return within"):
            guard.call("acme.probe()", lambda: release.wait(60), timeout=0.1)
        if installed == "while it hangs":
            os.putenv, os.unsetenv = app.putenv, app.unsetenv
        assert _fork_and_write(app) == 0
        release.set()
        _wait_until_no_plugin_call_runs()
        app.seen.clear()
        os.environ["HWB_MUT_AFTER"] = "1"
        del os.environ["HWB_MUT_AFTER"]
        assert app.seen == ["HWB_MUT_AFTER", "HWB_MUT_AFTER"]
    finally:
        release.set()
        _wait_until_no_plugin_call_runs()
        os.putenv, os.unsetenv = app.real
        os.environ.pop("HWB_MUT_AFTER", None)


def _wait_until_no_plugin_call_runs() -> None:
    """The abandoned call returns once released; the next test must start with no plugin call
    under way (it would find the writers already wrapped)."""
    deadline = time.monotonic() + 30
    while envguard._active or envguard._abandoned:
        assert time.monotonic() < deadline, "the abandoned plugin call did not return"
        time.sleep(0.01)


# -- PCI ids, bus ids and /dev node patterns ---------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, 0), (0xFFFF, 0xFFFF), (0x10000, None), (-1, None),
     ("0x0000", 0), ("0xffff", 0xFFFF), ("0x10000", None)],
)  # fmt: skip
def test_an_id_is_read_over_the_whole_16_bit_range_and_no_further(
    value: int | str, expected: int | None
) -> None:
    """0x0000 and 0xFFFF are ids like any other (a host file may give either as a number or
    as text); one past 16 bits is not a PCI id."""
    assert pci_id(value) == expected


@given(st.integers())
def test_a_number_is_an_id_exactly_when_it_has_16_bits(number: int) -> None:
    assert pci_id(number) == (number if 0 <= number <= 0xFFFF else None)


def test_an_id_padded_with_blanks_to_ten_characters_is_read_and_longer_text_is_not() -> None:
    """The documented cap: ``0x`` and four digits with blanks around them, ten characters in
    all; longer text is refused before it is parsed (a host file may hold anything)."""
    assert pci_id("0x1b06".center(10)) == 0x1B06
    assert pci_id("0x1b06".center(11)) is None
    assert pci_id("0x00001b06") == 0x1B06
    assert pci_id("0x000001b06") is None


@pytest.mark.parametrize(
    ("text", "bus"),
    [("0000:ff:1e.3", "0000:ff:1e.3"),  # Intel's uncore functions live on bus 0xff
     ("0000:FE:00.0", "0000:fe:00.0"), ("0000:100:00.0", None), ("0000:0100:00.0", None),
     ("0000:00:1f.7", "0000:00:1f.7"), ("0000:00:20.0", None)],
)  # fmt: skip
def test_the_last_bus_device_and_function_numbers_are_addresses(text: str, bus: str | None) -> None:
    """A PCI bus number has 8 bits (0x00-0xff), a device 5, a function 3: the highest of each
    is an address, one more is not."""
    assert normalise_bus_id(text) == bus


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [("tenstorrent/{n}", "tenstorrent/0", True), ("tenstorrent/{n}", "tenstorrent/", False),
     ("acme{n}-ctl", "acme0-ctl", True), ("acme{n}-ctl", "acme12-ctl", True),
     ("acme{n}-ctl", "acme0-ctx", False), ("acme{n}-ctl", "acme0", False),
     ("acme{n}-ctl", "acme-ctl", False), ("acme{n}-ctl", "acmex-ctl", False),
     ("acme{n}-ctl", "acme0-ctl-ctl", False), ("acme{n}-ctl", "acme0-ct", False)],
)  # fmt: skip
def test_a_pattern_with_text_after_the_number_matches_only_that_text(
    pattern: str, name: str, matches: bool
) -> None:
    assert match_node(pattern, name) is matches


_PART = st.text(st.characters(blacklist_characters="{}", blacklist_categories=("Cs",)), max_size=8)


@given(_PART, _PART, st.integers(0, 10**6), st.text(max_size=4))
def test_a_node_matches_a_pattern_exactly_when_ascii_digits_stand_for_its_number(
    head: str, tail: str, number: int, middle: str
) -> None:
    """``{n}`` is one or more ASCII digits, wherever it stands in the pattern."""
    pattern = head + "{n}" + tail
    assert match_node(pattern, f"{head}{number}{tail}")
    expected = middle != "" and middle.isascii() and middle.isdigit()
    assert match_node(pattern, head + middle + tail) is expected
