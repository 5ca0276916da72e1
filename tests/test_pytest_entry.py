"""The core's ``pytest11`` entry point runs in every pytest session of every project where
hwbackends is installed: it must cost nothing there and load the conformance kit only when a
test uses the kit's fixture; the kit itself says clearly when pytest is missing."""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys
import textwrap
from pathlib import Path

from coretest import clean_env


def test_the_entry_point_names_the_light_module() -> None:
    (entry,) = [e for e in md.entry_points(group="pytest11") if e.name == "hwbackends"]
    assert entry.value == "hwbackends._pytest_plugin"
    assert entry.dist is not None and entry.dist.name == "hwbackends"


def test_importing_the_entry_loads_nothing_of_the_kit() -> None:
    code = (
        "import sys, pytest\n"
        "before = set(sys.modules)\n"
        "import hwbackends._pytest_plugin\n"
        "print(sorted(set(sys.modules) - before))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert (
        out.stdout.strip() == "['hwbackends', 'hwbackends._pytest_plugin', 'hwbackends._version']"
    )


def test_a_session_of_another_project_loads_the_kit_only_for_its_fixture(tmp_path: Path) -> None:
    (tmp_path / "test_other.py").write_text(
        textwrap.dedent(
            """
            import sys

            def test_first_nothing_of_hwbackends_is_loaded():
                loaded = sorted(m for m in sys.modules if m.startswith("hwbackends"))
                light = ["hwbackends", "hwbackends._pytest_plugin", "hwbackends._version"]
                assert loaded == light, loaded

            def test_then_the_fixture_builds_a_host(hwbackends_host):
                host = hwbackends_host(devices=[{"vendor": "acme", "name": "A1"}])
                assert [d.name for d in host.devices] == ["A1"]
                assert "hwbackends.testing" not in sys.modules
            """
        ),
        encoding="utf-8",
    )
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error",
         "-p", "no:randomly", "test_other.py"],
        cwd=tmp_path, capture_output=True, text=True, env=clean_env(), timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 passed" in out.stdout


def test_the_kit_without_pytest_says_what_to_install() -> None:
    code = "import sys\nsys.modules['pytest'] = None\nimport hwbackends.testing\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=120
    )
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (
        "ModuleNotFoundError: hwbackends.testing, the conformance kit, runs under pytest, which "
        "is not installed here. Expected pytest>=8 in this environment. Fix: pip install pytest"
    )
