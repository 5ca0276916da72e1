"""scripts/check_dist.py, the release check that `twine check` does not do, finds what it
claims to find (CI runs it on the real artifacts: scripts/build_dist.sh)."""

from __future__ import annotations

import importlib.util
import io
import sys
import tarfile
import zipfile
from pathlib import Path
from types import ModuleType

import hwbackends

ROOT = Path(__file__).resolve().parent.parent


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_dist", ROOT / "scripts" / "check_dist.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_dist"] = module
    spec.loader.exec_module(module)
    return module


check_dist = _load()
V = hwbackends.__version__
LICENSE = (ROOT / "LICENSE").read_bytes()
LOW = ".".join(V.split(".")[:2])
HIGH = check_dist._next_line(LOW)


def metadata(name: str, *, mv: str = "2.4", requires: tuple[str, ...] = (), body: str = "") -> str:
    lines = [
        f"Metadata-Version: {mv}",
        f"Name: {name}",
        f"Version: {V}",
        "License-Expression: Apache-2.0",
        "License-File: LICENSE",
        "Project-URL: Source, https://github.com/hwbackends/hwbackends",
        *(f"Requires-Dist: {r}" for r in requires),
    ]
    return "\n".join(lines) + "\n\n" + body


def wheel(dist: Path, name: str, meta: str, licence: bytes | None = LICENSE) -> None:
    stem = f"{name.replace('-', '_')}-{V}"
    with zipfile.ZipFile(dist / f"{stem}-py3-none-any.whl", "w") as z:
        z.writestr(f"{stem}.dist-info/METADATA", meta)
        if licence is not None:
            z.writestr(f"{stem}.dist-info/licenses/LICENSE", licence)


def sdist(dist: Path, name: str, meta: str, licence: bytes | None = LICENSE) -> None:
    stem = f"{name.replace('-', '_')}-{V}"
    with tarfile.open(dist / f"{stem}.tar.gz", "w:gz") as t:
        files = {"PKG-INFO": meta.encode()}
        if licence is not None:
            files["LICENSE"] = licence
        for file, data in files.items():
            info = tarfile.TarInfo(f"{stem}/{file}")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


def good_set(dist: Path) -> None:
    plugins = [n for n in check_dist.projects() if n != "hwbackends"]
    line = f"hwbackends<{HIGH},>={LOW}"
    core_requires = ["packaging>=22"]
    for p in plugins:
        short = p.removeprefix("hwbackends-")
        core_requires += [
            f"{p}<{HIGH},>={LOW}; extra == '{short}'",
            f"{p}<{HIGH},>={LOW}; extra == 'all'",
        ]
    extras = "".join(
        f"Provides-Extra: {e}\n" for e in ["all", *(p.removeprefix("hwbackends-") for p in plugins)]
    )
    core = metadata("hwbackends", requires=tuple(core_requires)).replace(
        "\n\n", "\n" + extras + "\n"
    )
    wheel(dist, "hwbackends", core)
    sdist(dist, "hwbackends", core)
    for p in plugins:
        wheel(dist, p, metadata(p, requires=(line,)))
        sdist(dist, p, metadata(p, requires=(line,)))


def test_a_consistent_set_passes(tmp_path: Path) -> None:
    good_set(tmp_path)
    assert check_dist.check(tmp_path) == []


def test_an_empty_folder_lacks_all_22(tmp_path: Path) -> None:
    problems = check_dist.check(tmp_path)
    assert len(problems) == 11
    assert "hwbackends-cuda: found [], expected sdist and wheel" in problems


def test_what_a_broken_release_gets_wrong_is_named(tmp_path: Path) -> None:
    good_set(tmp_path)
    meta = metadata(
        "hwbackends-cuda", mv="2.5", requires=(f"hwbackends>={LOW}",), body="[x](../../README.md)"
    )
    wheel(tmp_path, "hwbackends-cuda", meta, licence=None)
    problems = check_dist.check(tmp_path)
    whl = f"hwbackends_cuda-{V}-py3-none-any.whl"
    assert problems == [
        f"{whl}: Metadata-Version 2.5, expected 2.4 (build-system.requires and "
        "core-metadata-version)",
        f"{whl}: no copy of LICENSE inside (found [])",
        f"{whl}: the description links into the checkout (../ or ./)",
        f"{whl}: requires ['hwbackends>={LOW}'], expected ['hwbackends<{HIGH},>={LOW}']",
    ]
