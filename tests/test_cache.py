"""The selection cache: its key, its folder and file checks, its answers, in this process
(where a planted bug shows at once and ``scripts/mutation.py`` can see it, without root and
without the user's real cache) and end to end in child processes (hits skip every plugin
import, any relevant change misses, a transient failure is never stored);
tests/test_reliability.py checks it under hostile files and concurrent processes.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from coretest import Site, clean_env, good_plugin, pci_function, run_python

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


def test_watched_paths_are_traced_by_kind_and_a_missing_one_costs_one_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file's trace holds its first bytes, a folder's its listing; a path that is absent
    (most of the watched driver paths, on most machines) is one failed open, nothing more."""
    (tmp_path / "version").write_text("535.104.05\n")
    (tmp_path / "nodes").mkdir()
    (tmp_path / "nodes" / "1").mkdir()
    assert cache._trace(str(tmp_path / "version"))[2] == b"535.104.05\n"
    assert cache._trace(str(tmp_path / "nodes"))[0] == ("1",)
    calls: list[str] = []
    for name in ("listdir", "stat"):
        real = getattr(os, name)

        def counted(*a: object, _n: str = name, _r: Any = real, **k: object) -> Any:
            calls.append(_n)
            return _r(*a, **k)

        monkeypatch.setattr(os, name, counted)
    assert cache._trace(str(tmp_path / "absent")) == ((), -1)
    assert calls == []


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
    cpu = ("cpu", "cpu", 0)
    good = {cache._key(cache.detail(watch)): ("cpu", "", (), cpu)}
    hit = cache._lookup((watch, good))
    assert hit is not None and hit[0].name == "cpu" and hit[1] == () and hit[2] == cpu
    for entry in (None, (watch,), (watch, []), (("x",), good), (((1,), ()), good),
                  (watch, {cache._key(cache.detail(watch)): ("cpu",)}),
                  (watch, {cache._key(cache.detail(watch)): ("cpu", "")}),
                  (watch, {cache._key(cache.detail(watch)): ("cpu", "", ())}),
                  (watch, {cache._key(cache.detail(watch)): ("cpu", "", (1,), cpu)}),
                  (watch, {cache._key(cache.detail(watch)): (1, "", (), cpu)}),
                  (watch, {cache._key(cache.detail(watch)): ("cpu", "", (), None)}),
                  (watch, {cache._key(cache.detail(watch)): ("cpu", "", (), ("cpu", "cpu"))}),
                  (watch, {cache._key(cache.detail(watch)): ("cpu", "", (), ("cpu", "cpu", 0.5))}),
                  (watch, {cache._key(cache.detail(watch)): ("cpu", "", (), ("gpu", "cpu", 0))}),
                  (watch, {b"another detail": ("cpu", "", (), cpu)}),
                  (watch, {cache._key(cache.detail(watch)): ("gpu", "", (), cpu)})):  # fmt: skip
        assert cache._lookup(entry) is None, entry


def test_a_hit_on_the_builtin_imports_nothing_until_used(tmp_path: Path) -> None:
    """Before, a hit imported the built-in's module (hwbackends.plugin with it: 30 kB of
    bytecode) to answer its name; its view now carries the stored identity and makes the
    backend on first use."""
    code = (
        "import sys, hwbackends\n"
        "b = hwbackends.current()\n"
        "from hwbackends._selection import cache\n"
        "print(cache.LAST, b.name, 'hwbackends.plugin' in sys.modules)\n"
        "print(len(b.devices(hwbackends.Host.from_dict({}), {})), b == hwbackends.get('cpu'))\n"
    )
    env = clean_env(HWBACKENDS_PLUGINS="")
    env["XDG_CACHE_HOME"] = str(tmp_path)
    runs = [run_python("-c", code, env=env) for _ in range(2)]
    assert [r.stdout.split() for r in runs] == [
        ["miss", "cpu", "True", "1", "True"],
        ["hit", "cpu", "False", "1", "True"],
    ], [r.stderr for r in runs]


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
        entry = {cache._key(cache.detail(watch)): ("bye", str(info), (), ("bye", "bye", 1))}
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


def fake_root(tmp_path: Path) -> Path:
    for d in ("sys/bus/pci/devices", "dev", "sys/module"):
        (tmp_path / d).mkdir(parents=True)
    return tmp_path


def test_a_new_pci_device_changes_the_cache_key(tmp_path: Path) -> None:
    """Bug: the fingerprint without the PCI list (a new GPU did not invalidate the cache)."""
    root = fake_root(tmp_path)
    before = cache._key(cache.fingerprint(str(root)))
    pci_function(root, "0000:41:00.0", "0x10de", "0x2330", "0x030200")
    assert cache._key(cache.fingerprint(str(root))) != before


def test_a_new_dev_node_changes_the_cache_key(tmp_path: Path) -> None:
    """Bug: the fingerprint without the /dev listing (a driver's node appearing after boot)."""
    root = fake_root(tmp_path)
    before = cache._key(cache.fingerprint(str(root)))
    (root / "dev" / "nvidia0").write_text("")
    assert cache._key(cache.fingerprint(str(root))) != before


def test_a_loaded_kernel_module_changes_the_cache_key(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    before = cache._key(cache.fingerprint(str(root)))
    (root / "sys/module/amdgpu").mkdir()
    assert cache._key(cache.fingerprint(str(root))) != before


def test_the_machine_part_of_the_key_is_stable(tmp_path: Path) -> None:
    """The other side: nothing changed, the same key (else the cache never hits)."""
    root = fake_root(tmp_path)
    pci_function(root, "0000:41:00.0", "0x10de", "0x2330", "0x030200")
    assert cache._key(cache.fingerprint(str(root))) == cache._key(cache.fingerprint(str(root)))


def test_a_driver_version_change_changes_the_watched_detail(tmp_path: Path) -> None:
    """Bug: the cache key without the watched driver paths (a driver upgrade did not
    invalidate). The path is the one the cuda plugin declares; loading a new driver module
    makes a new /proc file, so its modification time changes (set explicitly here: two writes
    within one clock tick may share a time)."""
    from hwbackends_cuda import CudaBackend

    assert "proc/driver/nvidia/version" in CudaBackend.watch_paths
    root = fake_root(tmp_path)
    version = root / "proc/driver/nvidia/version"
    version.parent.mkdir(parents=True)
    version.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.20\n")
    os.utime(version, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    watch = ((), tuple(CudaBackend.watch_paths))
    before = cache._key(cache.detail(watch, str(root)))
    assert cache._key(cache.detail(watch, str(root))) == before
    version.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  575.51.03\n")
    os.utime(version, ns=(1_700_000_100_000_000_000, 1_700_000_100_000_000_000))
    assert cache._key(cache.detail(watch, str(root))) != before


def test_a_new_node_in_a_watched_dev_folder_changes_the_watched_detail(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    (root / "dev/dri").mkdir()
    watch = ((), ("dev/dri",))
    before = cache._key(cache.detail(watch, str(root)))
    (root / "dev/dri/renderD128").write_text("")
    os.utime(root / "dev/dri", ns=(1, 1))  # the listing alone must tell, whatever the mtime
    after = cache._key(cache.detail(watch, str(root)))
    assert after != before


def test_a_watched_variable_changes_the_watched_detail(monkeypatch: pytest.MonkeyPatch) -> None:
    watch = (("CUDA_DEVICE_ORDER",), ())
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    before = cache._key(cache.detail(watch))
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert cache._key(cache.detail(watch)) != before


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


BETA_UNREADY = (
    good_plugin("beta", 10)
    + "    def probe(self, host):\n"
    + "        from hwbackends import Probe\n"
    + "        return Probe('beta', True, False, 'beta driver not loaded', 'load it', ())\n"
)


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


@pytest.mark.parametrize("bytecode", [True, False], ids=["bytecode-on", "bytecode-off"])
def test_a_plugin_writing_its_bytecode_on_first_import_still_hits_next_time(
    tmp_path: Path, bytecode: bool
) -> None:
    # The plugin is a top-level module in its sys.path folder: its first import creates
    # __pycache__ there, which moves the folder's mtime, a part of the fingerprint.
    site, _ = _acme_site(tmp_path, "eagain")
    env = clean_env(PYTHONPATH=str(site), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    assert _run(REPORT, env)["last"] == "miss"
    assert (site / "__pycache__").is_dir() is bytecode  # the case this test is about happened
    assert _run(REPORT, env)["last"] == "hit"


# A plugin whose import adds a file beside it, as an install running during the selection would.
ADDS_A_FILE = (
    ACME.replace('"acme"', '"adds"')
    + "\nimport pathlib\n"
    + "(pathlib.Path(__file__).parent / f'new-{{os.getpid()}}.dist-info').mkdir()\n"
)


def test_a_folder_that_changed_during_the_selection_is_not_stored_under_its_new_state(
    tmp_path: Path,
) -> None:
    s = Site(tmp_path / "site")
    s.path.mkdir()
    s.add_plugin("adds", ADDS_A_FILE.format(mark=str(tmp_path / "never"), mode="eagain"))
    env = clean_env(PYTHONPATH=str(s.path), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    assert _run(REPORT, env)["last"] == "miss"
    # each run adds a distribution while it selects: the folder the next run sees was never
    # the one an answer was made from
    assert _run(REPORT, env)["last"] == "miss"


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


PROBE = (
    "import sys, json, hwbackends, hwbackends._selection.cache as f\n"
    "b = hwbackends.current()\n"
    "heavy = sorted(m for m in sys.modules if m.startswith(('hwbackends_', 'dataclasses', "
    "'typing', 'hwbackends._selection.registry')))\n"
    "print(json.dumps({'last': f.LAST, 'name': b.name, 'same': b is hwbackends.current(), "
    "'heavy': heavy}))\n"
)


def run(tmp: Path, site: Path, cwd: Path | None = None, **extra: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWBACKENDS_")}
    env.update({"XDG_CACHE_HOME": str(tmp / "cache"), "PYTHONPATH": str(site), **extra})
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=cwd
    )
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_cache_hit_miss_and_invalidation(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    first = run(tmp_path, site)
    assert first["last"] == "miss" and first["same"] is True
    hit = run(tmp_path, site)
    assert hit["last"] == "hit" and hit["name"] == first["name"] and hit["same"] is True
    # a hit imports only the chosen backend's plugin: on a CPU machine nothing at all, on a
    # machine with an accelerator that plugin alone, and never the registry
    name = str(hit["name"])
    heavy = [str(m) for m in hit["heavy"]]  # type: ignore[attr-defined]
    if name == "cpu":
        assert heavy == []
    else:
        assert "hwbackends._selection.registry" not in heavy
        plugins = {m.split(".")[0] for m in heavy if m.startswith("hwbackends_")}
        assert plugins <= {f"hwbackends_{name}"}
    # installing a distribution changes its directory's mtime
    (site / "newdist-1.0.dist-info").mkdir()
    os.utime(site, ns=(1, 1))
    assert run(tmp_path, site)["last"] == "miss"
    assert run(tmp_path, site)["last"] == "hit"
    # a variable that selection reads
    assert run(tmp_path, site, CUDA_VISIBLE_DEVICES="0")["last"] == "miss"
    # bypass, simulated hosts and strict mode never use it
    assert run(tmp_path, site, HWBACKENDS_NO_CACHE="1")["last"] == "off"
    assert run(tmp_path, site, HWBACKENDS_STRICT="1")["last"] == "off"
    assert run(tmp_path, site, HWBACKENDS_NO_CACHE="true")["last"] == "off"
    assert run(tmp_path, site, HWBACKENDS_NO_CACHE="false")["last"] == "miss"  # a new key
    assert run(tmp_path, site, HWBACKENDS_NO_CACHE="false")["last"] == "hit"


def test_unreadable_or_corrupt_cache_is_ignored(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    run(tmp_path, site)
    (cache,) = (tmp_path / "cache" / "hwbackends").iterdir()
    cache.write_bytes(b"\x00garbage")
    assert run(tmp_path, site)["last"] == "miss"
    assert run(tmp_path, site)["last"] == "hit"


def test_unwritable_cache_location_still_answers(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory would be")
    first, second = run(tmp_path, site), run(tmp_path, site)
    assert (first["last"], second["last"]) == ("miss", "miss")  # never stored, never fatal
    assert first["name"] == second["name"]


def test_working_directory_and_alternating_environments_keep_hitting(tmp_path: Path) -> None:
    site = tmp_path / "site"
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (site, a, b):
        d.mkdir()
    assert run(tmp_path, site, cwd=a)["last"] == "miss"
    (a / "notes.txt").write_text("a new file in the working directory")
    assert run(tmp_path, site, cwd=b)["last"] == "hit"
    assert run(tmp_path, site, cwd=a)["last"] == "hit"
    # two environments in turn: each keeps its own answer
    assert run(tmp_path, site, CUDA_VISIBLE_DEVICES="1")["last"] == "miss"
    assert run(tmp_path, site)["last"] == "hit"
    assert run(tmp_path, site, CUDA_VISIBLE_DEVICES="1")["last"] == "hit"


def test_declared_variables_and_paths_without_visible_in_their_name_miss(tmp_path: Path) -> None:
    """The cache watches what installed backends declare (the cuda plugin's
    CUDA_DEVICE_ORDER, the neuron plugin's NEURON_LOGICAL_NC_CONFIG), not a vendor list."""
    site = tmp_path / "site"
    site.mkdir()
    assert run(tmp_path, site)["last"] == "miss"
    assert run(tmp_path, site)["last"] == "hit"
    for var, value in (("CUDA_DEVICE_ORDER", "PCI_BUS_ID"), ("NEURON_LOGICAL_NC_CONFIG", "1")):
        assert run(tmp_path, site, **{var: value})["last"] == "miss", var
        assert run(tmp_path, site, **{var: value})["last"] == "hit", var
    assert run(tmp_path, site, UNRELATED_SETTING="x")["last"] == "hit"


def test_watch_lists_come_from_declarations() -> None:
    from hwbackends._selection.registry import watch_lists

    names, paths = watch_lists()
    assert "CUDA_DEVICE_ORDER" in names and "proc/driver/nvidia/version" in paths


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
