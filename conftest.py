"""Settings for every test in the repository (core, plugins, docs)."""

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

# The selection cache (hwbackends._selection.cache) is tested on its own in tests/test_cache.py;
# everywhere else each test must see a fresh selection, in this process and in the ones it
# starts.
os.environ["HWBACKENDS_NO_CACHE"] = "1"

# pytest-xdist's workers set COLUMNS=80 and LINES=24; a command's output width must not depend
# on how the suite is run (the docs show commands run without a terminal).
for _var in ("COLUMNS", "LINES"):
    os.environ.pop(_var, None)

# No test may write the user's real cache, even one that turns the cache back on or starts a
# process with a cleaned environment: the cache of this session lives in a temporary folder, and
# the real file of this interpreter must be unchanged at the end (checked below).
_REAL_CACHE_HOMES = [
    d
    for d in {os.environ.get("XDG_CACHE_HOME") or "", os.path.expanduser("~/.cache")}
    if os.path.isabs(d)
]
_SESSION_CACHE = tempfile.mkdtemp(prefix="hwbackends-test-cache-")
os.environ["XDG_CACHE_HOME"] = _SESSION_CACHE

# No implicit timing assertion: Hypothesis' default 200 ms deadline fails a property test on a
# busy machine although nothing is wrong.
# A missing dependency is a failure, never a silent skip: the editable run (scripts/test.sh)
# installs everything. A run that deliberately lacks some (.ci/wheels.sh on a Python for which
# the index has no CPU torch) names them in HWBACKENDS_TESTS_WITHOUT; importing one of those
# then skips the importing test (or module), with that reason, and nothing else. The variable
# is read and removed: the library warns about a HWBACKENDS_* variable it does not know, and
# no test (nor a process one starts) may see that warning.
_WITHOUT = frozenset(
    m.strip() for m in os.environ.pop("HWBACKENDS_TESTS_WITHOUT", "").split(",") if m.strip()
)


class _DeclaredAbsent:
    """A meta-path finder that turns an import of a declared-absent module into a skip.

    Only an import: ``importlib.util.find_spec`` asking whether the module is installed (as
    Transformers does for torch, and the tests that expect what a user without torch sees)
    gets the true answer, not installed."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] in _WITHOUT:
            # the import system's frames: _find_spec, called by _find_and_load_unlocked for an
            # import statement, __import__ or importlib.import_module; by find_spec for a query
            if sys._getframe(2).f_code.co_name != "_find_and_load_unlocked":
                return None
            raise pytest.skip.Exception(
                f"{name} is declared absent in this run (HWBACKENDS_TESTS_WITHOUT)",
                allow_module_level=True,
            )


if _WITHOUT:
    sys.meta_path.insert(0, _DeclaredAbsent())

settings.register_profile("hwbackends", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("hwbackends")


def _real_cache_files() -> dict[str, tuple[int, int, int] | None]:
    # Only this interpreter's file: the cache keeps one file per interpreter, so other
    # environments using the same home folder at the same time never count as this session.
    from hwbackends._selection.cache import _file_name

    out: dict[str, tuple[int, int, int] | None] = {}
    for home in _REAL_CACHE_HOMES:
        path = os.path.join(home, "hwbackends", _file_name())
        try:
            st = os.stat(path)
        except OSError:
            out[path] = None
        else:
            out[path] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


_BEFORE = _real_cache_files()


@pytest.fixture(scope="session", autouse=True)
def _the_real_user_cache_is_untouched() -> Iterator[None]:
    yield
    after = _real_cache_files()
    shutil.rmtree(_SESSION_CACHE, ignore_errors=True)
    written = [p for p, state in after.items() if state != _BEFORE.get(p)]
    assert written == [], f"a test wrote the user's real selection cache: {written}"
