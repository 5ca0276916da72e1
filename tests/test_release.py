"""The 11 distributions cannot drift apart: one version source each, released together, plugins
bound to the core's release line, the licence in every project, and a core that speaks a newer
plugin API refuses an old plugin (built and installed for real into a fresh environment)."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import re
import shutil
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from the `test` dependency group
    import tomli as tomllib

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

import hwbackends

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = sorted(
    d for d in (ROOT / "plugins").glob("hwbackends-*") if (d / "pyproject.toml").is_file()
)
TEMPLATE = ROOT / "plugins" / "_template"
SUPPORTED = ("3.10", "3.11", "3.12", "3.13")


def _pyproject(project: Path) -> dict[str, object]:
    return tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))


def _source_version(project: Path) -> str:
    config = _pyproject(project)
    path = config["tool"]["hatch"]["version"]["path"]  # type: ignore[index]
    text = (project / path).read_text(encoding="utf-8")
    found = re.findall(r'^__version__ = "([^"]+)"$', text, re.M)
    assert len(found) == 1, f"{project / path}: expected one __version__ line"
    return str(found[0])


def _release_line(version: str) -> tuple[str, str]:
    """The core range a plugin for ``version`` requires: the same 0.x minor (or major)."""
    v = Version(version)
    if v.major == 0:
        return f"0.{v.minor}", f"0.{v.minor + 1}"
    return f"{v.major}", f"{v.major + 1}"


def test_hwbackends_version_the_metadata_and_the_module_agree() -> None:
    exe = Path(sys.executable).with_name("hwbackends")
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    installed = md.version("hwbackends")
    assert out.stdout == f"hwbackends {installed}\n"
    assert hwbackends.__version__ == installed == _source_version(ROOT), (
        "the installed metadata is older than src/hwbackends/_version.py: reinstall "
        "(bash scripts/test.sh)"
    )


@pytest.mark.parametrize("project", PLUGINS, ids=lambda p: p.name)
def test_every_plugin_is_released_with_the_core(project: Path) -> None:
    """Each plugin's metadata, module and source agree, and all 11 carry one version."""
    module = importlib.import_module(project.name.replace("-", "_"))
    assert md.version(project.name) == module.__version__ == _source_version(project)
    assert module.__version__ == hwbackends.__version__


@pytest.mark.parametrize("project", [*PLUGINS, TEMPLATE], ids=lambda p: p.name)
def test_plugins_require_the_core_release_line_and_declare_their_api(project: Path) -> None:
    config = _pyproject(project)["project"]
    low, high = _release_line(hwbackends.__version__)
    assert config["dependencies"] == [f"hwbackends>={low},<{high}"]  # type: ignore[index]
    assert config["dynamic"] == ["version"] and "version" not in config  # type: ignore[operator]
    source = next((project / "src").glob("hwbackends_*/__init__.py")).read_text(encoding="utf-8")
    declared = re.findall(r"^    api_version: ClassVar\[int\] = (\d+)$", source, re.M)
    assert declared == [str(hwbackends.API_VERSION)]


def test_the_core_extras_pull_every_plugin_by_range() -> None:
    config = _pyproject(ROOT)["project"]
    extras: dict[str, list[str]] = config["optional-dependencies"]  # type: ignore[index]
    low, high = _release_line(hwbackends.__version__)
    names = [p.name for p in PLUGINS]
    for name in names:
        assert extras[name.removeprefix("hwbackends-")] == [f"{name}>={low},<{high}"]
    assert sorted(extras["all"]) == sorted(f"{n}>={low},<{high}" for n in names)
    assert "nvml" not in extras and not {"dev", "test", "docs"} & set(extras)
    for reqs in extras.values():
        for req in map(Requirement, reqs):
            assert not any(s.operator in ("==", "===") for s in req.specifier), req


@pytest.mark.parametrize("project", [ROOT, *PLUGINS, TEMPLATE], ids=lambda p: p.name)
def test_every_project_ships_the_licence_and_index_metadata(project: Path) -> None:
    assert (project / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    config = _pyproject(project)
    meta = config["project"]
    assert meta["license"] == "Apache-2.0" and meta["license-files"] == ["LICENSE"]  # type: ignore[index]
    classifiers: list[str] = meta["classifiers"]  # type: ignore[index]
    assert [
        c for c in classifiers if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ] == [f"Programming Language :: Python :: {v}" for v in SUPPORTED]
    assert meta["requires-python"] == f">={SUPPORTED[0]}"  # type: ignore[index]
    assert not re.fullmatch(r"hwbackends plugin: the \w+ backend\.", str(meta["description"]))
    requires = config["build-system"]["requires"]  # type: ignore[index]
    assert requires == ["hatchling>=1.27,<2"]
    for target in ("sdist", "wheel"):
        assert config["tool"]["hatch"]["build"]["targets"][target]["core-metadata-version"] == "2.4"  # type: ignore[index]
    readme = (project / "README.md").read_text(encoding="utf-8")
    assert "](../" not in readme and "](./" not in readme, "links an index page cannot follow"
    if project != TEMPLATE:
        urls: dict[str, str] = meta["urls"]  # type: ignore[index]
        assert all(u.startswith("https://github.com/hwbackends/hwbackends") for u in urls.values())


def _build_wheel(project: Path, out: Path) -> Path:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--wheel-dir", str(out), str(project)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out


def test_a_core_speaking_a_newer_api_refuses_an_old_plugin(tmp_path: Path) -> None:
    """hwbackends 0.2.0 built with API_VERSION = 2, with hwbackends-cuda 0.1.0 (API 1) installed
    beside it against its requirement: pip says so, and the core refuses to load it."""
    import hatchling  # noqa: F401 - builds a core wheel (the `test` dependency group)

    core = tmp_path / "core"
    core.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md"):
        shutil.copy(ROOT / name, core / name)
    shutil.copytree(ROOT / "src", core / "src", ignore=shutil.ignore_patterns("__pycache__"))
    version = core / "src" / "hwbackends" / "_version.py"
    text = version.read_text(encoding="utf-8")
    patched = re.sub(r"(?m)^API_VERSION = \d+$", "API_VERSION = 2", text)
    patched = re.sub(r'(?m)^__version__ = "[^"]+"$', '__version__ = "0.2.0"', patched)
    assert patched.count("= 2") == 1 and '"0.2.0"' in patched
    version.write_text(patched, encoding="utf-8")
    wheels = tmp_path / "wheels"
    _build_wheel(core, wheels)
    _build_wheel(ROOT / "plugins" / "hwbackends-cuda", wheels)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    install = subprocess.run(
        [*pip, "install", "--quiet", "--no-deps", "--no-index", *map(str, wheels.glob("*.whl"))],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr
    check = subprocess.run([*pip, "check"], capture_output=True, text=True, timeout=120)
    assert check.returncode == 1
    assert (
        "hwbackends-cuda 0.1.0 has requirement hwbackends<0.2,>=0.1, but you have hwbackends 0.2.0"
        in check.stdout
    )
    env = {"PATH": "/usr/bin:/bin", "HWBACKENDS_NO_CACHE": "1"}
    out = subprocess.run(
        [str(python), "-m", "hwbackends", "plugins", "--check"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    report = " ".join((out.stdout + out.stderr).split())
    assert (
        "CudaBackend was written for plugin API version 1, but hwbackends 0.2.0 speaks plugin "
        "API version 2; install a release of hwbackends-cuda written for API 2, or a "
        "hwbackends release that speaks API 1"
    ) in report, report
