"""The selection cache in this process: its key, its folder and file checks, its answers.

tests/test_fast.py and tests/test_reliability.py check the cache end to end in child
processes; these check the same decisions where a planted bug shows at once (and where
``scripts/mutation.py`` can see them), without root and without the user's real cache.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from coretest import Site, good_plugin

import hwbackends
from hwbackends._selection import cache


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cache folder under a temporary XDG_CACHE_HOME (not created yet)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "hwbackends"


@pytest.fixture
def dfd(folder: Path) -> Iterator[int]:
    fd = cache._open_dir(create=True)
    assert fd is not None
    yield fd
    os.close(fd)


# -- where the cache lives --------------------------------------------------------------------


def test_cache_folder_follows_the_xdg_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    """XDG Base Directory Specification: $XDG_CACHE_HOME if set to an absolute path, else
    $HOME/.cache (https://specifications.freedesktop.org/basedir-spec/latest/)."""
    monkeypatch.setenv("HOME", "/home/ada")
    monkeypatch.setenv("XDG_CACHE_HOME", "/var/cache/ada")
    assert cache.cache_dir() == "/var/cache/ada/hwbackends"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert cache.cache_dir() == "/home/ada/.cache/hwbackends"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == "/home/ada/.cache/hwbackends"
    for home in ("", "relative"):
        monkeypatch.setenv("HOME", home)
        assert cache.cache_dir() is None and cache.cache_file() is None


def test_one_file_per_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    name = cache._file_name()
    assert name.startswith("selection-") and name.endswith(".bin") and len(name) == 22
    assert cache._file_name() == name
    monkeypatch.setattr(sys, "executable", sys.executable + "-other")
    assert cache._file_name() != name


@pytest.mark.parametrize(
    ("value", "on"),
    [("", True), ("0", True), ("false", True), ("No", True), ("off", True),
     ("1", False), ("true", False), ("yes", False), ("x", False)],
)  # fmt: skip
@pytest.mark.parametrize("var", ["HWBACKENDS_NO_CACHE", "HWBACKENDS_STRICT"])
def test_bypass_and_strict_turn_it_off(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, on: bool
) -> None:
    for k in ("HWBACKENDS_NO_CACHE", "HWBACKENDS_STRICT", "HWBACKENDS_HOST"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv(var, value)
    assert cache.enabled() is on


def test_a_simulated_host_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HWBACKENDS_NO_CACHE", raising=False)
    monkeypatch.setenv("HWBACKENDS_HOST", "  ")
    assert cache.enabled() is True  # blank: no host file
    monkeypatch.setenv("HWBACKENDS_HOST", "box.json")
    assert cache.enabled() is False


# -- the folder and the file are this user's own --------------------------------------------------


def test_folder_is_created_private_and_kept_private(folder: Path) -> None:
    fd = cache._open_dir(create=False)
    assert fd is None and not folder.exists()  # a lookup never creates it
    fd = cache._open_dir(create=True)
    assert fd is not None
    os.close(fd)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    folder.chmod(0o755)  # made by an older release or a loose umask
    fd = cache._open_dir(create=False)
    assert fd is not None
    os.close(fd)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_folder_is_made_inside_an_existing_cache_home(folder: Path) -> None:
    """The usual case: ~/.cache exists already, hwbackends/ inside it does not."""
    folder.parent.mkdir()
    fd = cache._open_dir(create=True)
    assert fd is not None
    os.close(fd)
    assert folder.is_dir()


def test_answers_round_trip_and_a_corrupt_file_is_empty(dfd: int, folder: Path) -> None:
    assert cache._read(dfd) == {}
    cache._store(dfd, {b"k": ("w", {b"d": ("cpu", "")})})
    assert cache._read(dfd) == {b"k": ("w", {b"d": ("cpu", "")})}
    path = folder / cache._file_name()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in folder.iterdir()] == [path.name]  # no temporary file left
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # one bit flipped: digest mismatch
    assert cache._read(dfd) == {}
    path.write_bytes(b"hwbsel3\n" + data[8:])  # an older format
    assert cache._read(dfd) == {}
    path.write_bytes(data[: len(cache._MAGIC) + 16])  # a digest and no payload
    assert cache._read(dfd) == {}


def test_a_huge_file_or_a_symlink_is_not_read(dfd: int, folder: Path, tmp_path: Path) -> None:
    cache._store(dfd, {b"k": 1})
    path = folder / cache._file_name()
    good = path.read_bytes()
    path.write_bytes(good + b"\0" * cache._MAX_BYTES)
    assert cache._read(dfd) == {}
    path.unlink()
    (tmp_path / "elsewhere").write_bytes(good)
    path.symlink_to(tmp_path / "elsewhere")
    assert cache._read(dfd) == {}
    cache._store(dfd, {b"k": 2})  # replaces the link, never writes through it
    assert (tmp_path / "elsewhere").read_bytes() == good
    assert not path.is_symlink() and cache._read(dfd) == {b"k": 2}


def test_a_valid_file_over_one_mebibyte_is_not_read(dfd: int, folder: Path) -> None:
    """A real cache file is ~10 kB: one over 1 MiB is refused before it is read, even with a
    correct digest (so a huge file never costs its size in memory)."""
    cache._store(dfd, {b"k": b"x" * (1 << 20)})
    assert (folder / cache._file_name()).stat().st_size > 1 << 20
    assert cache._read(dfd) == {}
    cache._store(dfd, {b"k": b"x" * 1000})
    assert cache._read(dfd) == {b"k": b"x" * 1000}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_fifo_in_place_of_the_file_is_not_waited_on(dfd: int, folder: Path) -> None:
    os.mkfifo(folder / cache._file_name())
    assert cache._read(dfd) == {}  # returns: a FIFO opened non-blocking, then refused


def test_another_users_folder_or_file_is_not_trusted(
    dfd: int, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs without root: instead of giving the files to another user, this process takes
    another user's id, so that its own files are someone else's (tests/test_reliability.py
    does it with chown when run as root)."""
    cache._store(dfd, {b"k": 1})
    assert cache._read(dfd) == {b"k": 1}
    me = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: me + 4242)
    assert cache._read(dfd) == {}
    assert cache._open_dir(create=False) is None
    assert cache._open_dir(create=True) is None


# -- what the key is made of ---------------------------------------------------------------------


def test_selection_variables_change_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    base = cache._key(cache.fingerprint())
    monkeypatch.setenv("UNRELATED_SETTING", "x")
    assert cache._key(cache.fingerprint()) == base
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert cache._key(cache.fingerprint()) != base
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setenv("HWBACKENDS_DEBUG", "1")
    assert cache._key(cache.fingerprint()) != base


def test_installing_into_a_path_folder_changes_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    os.utime(site, ns=(1, 1))
    monkeypatch.setattr(sys, "path", [sys.path[0], str(site), *sys.path[1:]])
    base = cache._key(cache.fingerprint())
    (site / "acme-1.0.dist-info").mkdir()
    os.utime(site, ns=(2, 2))  # explicit: two changes within one clock tick share a time
    assert cache._key(cache.fingerprint()) != base


def test_the_script_folder_counts_only_when_it_holds_a_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "prog"
    script.mkdir()
    monkeypatch.setattr(sys, "path", [str(script), *sys.path[1:]])
    before = cache._paths_part()
    assert str(script) not in [p for p, _ in before]  # type: ignore[misc]
    (script / "odd-1.0.dist-info").mkdir()
    assert cache._paths_part()[0][0] == str(script)  # type: ignore[index]


def test_a_torch_rebuilt_in_place_changes_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "torch").mkdir()
    version = tmp_path / "torch" / "version.py"
    version.write_text("__version__ = '2.13.0+cpu'\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    part = cache._torch_part()
    assert part[0] == str(tmp_path)
    version.write_text("__version__ = '2.13.0+cu128'\n")  # longer: another size
    assert cache._torch_part() != part


# -- answers are resolved through installed metadata ---------------------------------------------


def test_a_cached_answer_names_an_entry_point_on_sys_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = tmp_path / "hwbackends_acme-1.0.dist-info"
    info.mkdir()
    (info / "entry_points.txt").write_text(
        "[hwbackends.backends]\nacme = hwbackends_acme:AcmeBackend\n"
    )
    assert cache._declared_value("acme", str(info)) is None  # not on sys.path
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])
    assert cache._declared_value("acme", str(info)) == "hwbackends_acme:AcmeBackend"
    assert cache._declared_value("other", str(info)) is None
    assert cache._declared_value("acme", str(tmp_path)) is None  # not a dist-info folder
    assert cache._declared_value("acme", 42) is None  # type: ignore[arg-type]


def test_malformed_entries_are_misses() -> None:
    watch: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    good = {cache._key(cache.detail(watch)): ("cpu", "", ())}
    hit = cache._lookup((watch, good))
    assert hit is not None and hit[0].name == "cpu" and hit[1] == ()
    for entry in (None, (watch,), (watch, []), (("x",), good), (((1,), ()), good),
                  (watch, {cache._key(cache.detail(watch)): ("cpu",)}),
                  (watch, {cache._key(cache.detail(watch)): ("cpu", "")}),
                  (watch, {cache._key(cache.detail(watch)): ("cpu", "", (1,))}),
                  (watch, {cache._key(cache.detail(watch)): (1, "", ())}),
                  (watch, {b"another detail": ("cpu", "", ())}),
                  (watch, {cache._key(cache.detail(watch)): ("gpu", "", ())})):  # fmt: skip
        assert cache._lookup(entry) is None, entry


def test_a_plugin_named_by_a_cached_answer_is_imported_under_the_guard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin module that raises SystemExit on import makes a miss (the full selection then
    says why), not an exit of the program: the import runs under the plugin guard."""
    info = tmp_path / "hwbackends_bye-1.0.dist-info"
    info.mkdir()
    (info / "entry_points.txt").write_text("[hwbackends.backends]\nbye = hwb_cache_bye:Backend\n")
    (tmp_path / "hwb_cache_bye.py").write_text("raise SystemExit(3)\n")
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])
    watch: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    try:
        entry = {cache._key(cache.detail(watch)): ("bye", str(info), ())}
        assert cache._lookup((watch, entry)) is None
    finally:
        sys.modules.pop("hwb_cache_bye", None)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_miss_then_hit_in_this_process(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first call runs the full selection and stores its answer; the next process (here:
    the same one, forgotten) gets the same backend from the file. No descriptor is left open."""
    monkeypatch.delenv("HWBACKENDS_NO_CACHE", raising=False)
    monkeypatch.setenv("HWBACKENDS_PLUGINS", "")  # the built-in cpu only: the same anywhere
    hwbackends.reset()
    try:
        fds = open_fds()
        first = cache.cached_backend()
        assert (cache.LAST, first is not None and first.name) == ("miss", "cpu")
        assert cache.cached_backend() is first  # remembered in this process
        assert [p.name for p in folder.iterdir()] == [cache._file_name()]
        # the process now has a registry (the miss ran it): its answer wins over the file's
        monkeypatch.setattr(cache, "_chosen", None)
        assert cache.cached_backend() is None and cache.LAST == "off"
        assert open_fds() == fds
        hwbackends.reset()
        second = cache.cached_backend()
        assert (cache.LAST, second is not None and second.name) == ("hit", "cpu")
        assert open_fds() == fds
        hwbackends.reset()
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # another key: a miss, then stored
        assert cache.cached_backend() is not None and cache.LAST == "miss"
        hwbackends.reset()
        assert cache.cached_backend() is not None and cache.LAST == "hit"
        hwbackends.reset()
        monkeypatch.setenv("HWBACKENDS_NO_CACHE", "1")
        assert cache.cached_backend() is None and cache.LAST == "off"
    finally:
        hwbackends.reset()


def test_the_sixteen_most_recent_answers_are_kept(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Programs whose variables differ keep their own answers, up to 16; the oldest goes first."""
    monkeypatch.delenv("HWBACKENDS_NO_CACHE", raising=False)
    monkeypatch.setenv("HWBACKENDS_PLUGINS", "")

    def lookup(value: str) -> str:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)  # part of the key
        hwbackends.reset()
        assert cache.cached_backend() is not None
        return cache.LAST

    try:
        assert [lookup(str(i)) for i in range(17)] == ["miss"] * 17
        assert lookup("16") == "hit"
        assert lookup("1") == "hit"  # the 16 most recent: 1..16
        assert lookup("0") == "miss"  # the oldest was dropped
    finally:
        hwbackends.reset()


def test_a_hit_repeats_the_settings_warnings(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A variable the library does not know is warned about on a hit too (the stored answer
    keeps no settings warnings: they are made again from this process's environment)."""
    from hwbackends import HwBackendsWarning
    from hwbackends._base import settings

    monkeypatch.delenv("HWBACKENDS_NO_CACHE", raising=False)
    monkeypatch.setenv("HWBACKENDS_PLUGINS", "")  # the built-in cpu only: the same anywhere
    monkeypatch.setenv("HWBACKENDS_PLUGINZ", "x")
    hwbackends.reset()
    try:
        with pytest.warns(HwBackendsWarning, match="HWBACKENDS_PLUGINZ"):
            cache.cached_backend()
        assert cache.LAST == "miss"
        hwbackends.reset()
        monkeypatch.setattr(settings, "_warned", set())  # a new process: nothing said yet
        with pytest.warns(HwBackendsWarning, match="HWBACKENDS_PLUGINZ"):
            found = cache.cached_backend()
        assert cache.LAST == "hit" and found is not None and found.name == "cpu"
    finally:
        hwbackends.reset()


def test_a_selection_with_a_broken_plugin_is_not_stored(
    folder: Path, monkeypatch: pytest.MonkeyPatch, site: Site
) -> None:
    """A plugin broken in its probe may be healthy in the next process: the answer of a
    selection in which it was broken is not stored, and the next lookup misses again."""
    site.add_plugin(
        "flaky",
        good_plugin("flaky") + "    def probe(self, host):\n        raise OSError('EAGAIN')\n",
    )
    monkeypatch.delenv("HWBACKENDS_NO_CACHE", raising=False)
    hwbackends.reset()
    try:
        found = cache.cached_backend()
        assert cache.LAST == "miss" and found is not None
        assert hwbackends.explain().status("flaky").state == "broken"
        hwbackends.reset()
        cache.cached_backend()
        assert cache.LAST == "miss"
    finally:
        hwbackends.reset()
