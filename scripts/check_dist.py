#!/usr/bin/env python3
"""Check the release artifacts in a folder (default dist/) against the repository.

    python scripts/check_dist.py dist

scripts/build_dist.sh runs it after `twine check --strict`. It checks what twine does not:
every distribution in the repository has exactly one sdist and one wheel; each carries the
licence text (identical to LICENSE) and Metadata-Version 2.4; its version is the one in the
version module of its source; every plugin requires the core's release line and the core's
extras name every plugin; no description links to a file of the checkout (``../``), which an
index page cannot show. Exit status 1 with one line per problem.
"""

from __future__ import annotations

import contextlib
import email
import email.message
import re
import sys
import tarfile
import zipfile
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from the `test` dependency group
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
METADATA_VERSION = "2.4"
_VERSION = re.compile(r'^__version__ = "([^"]+)"$', re.M)


def projects() -> dict[str, Path]:
    """Distribution name -> project folder, the core first."""
    found = {"hwbackends": ROOT}
    for d in sorted((ROOT / "plugins").glob("hwbackends-*")):
        if (d / "pyproject.toml").is_file():
            found[d.name] = d
    return found


def source_version(project: Path) -> str:
    """The version in the module that [tool.hatch.version] names."""
    config = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    module = project / config["tool"]["hatch"]["version"]["path"]
    match = _VERSION.search(module.read_text(encoding="utf-8"))
    if match is None:
        raise SystemExit(f'check_dist: {module} has no line __version__ = "X.Y.Z"')
    return match.group(1)


def _wheel(path: Path) -> tuple[email.message.Message, dict[str, bytes]]:
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        licences = {n: z.read(n) for n in names if "/licenses/" in n}
        return email.message_from_bytes(z.read(meta)), licences


def _sdist(path: Path) -> tuple[email.message.Message, dict[str, bytes]]:
    with tarfile.open(path) as t:
        top = t.getnames()[0].split("/")[0]

        def read(name: str) -> bytes:
            f = t.extractfile(f"{top}/{name}")
            if f is None:
                raise KeyError(name)
            return f.read()

        licences = {}
        with contextlib.suppress(KeyError):  # reported as missing below
            licences["LICENSE"] = read("LICENSE")
        return email.message_from_bytes(read("PKG-INFO")), licences


def check(dist: Path) -> list[str]:
    problems: list[str] = []
    licence = (ROOT / "LICENSE").read_bytes()
    wanted = projects()
    core_version = source_version(ROOT)
    core_line = ".".join(core_version.split(".")[:2])
    files = sorted(p for p in dist.iterdir() if p.suffix in (".whl", ".gz"))
    seen: dict[str, list[str]] = {}
    for path in files:
        is_wheel = path.suffix == ".whl"
        meta, licences = _wheel(path) if is_wheel else _sdist(path)
        name = str(meta["Name"])
        seen.setdefault(name, []).append("wheel" if is_wheel else "sdist")
        where = path.name
        if name not in wanted:
            problems.append(f"{where}: {name} is no distribution of this repository")
            continue
        if meta["Metadata-Version"] != METADATA_VERSION:
            problems.append(
                f"{where}: Metadata-Version {meta['Metadata-Version']}, expected "
                f"{METADATA_VERSION} (build-system.requires and core-metadata-version)"
            )
        expected = source_version(wanted[name])
        if meta["Version"] != expected:
            problems.append(f"{where}: version {meta['Version']}, the source says {expected}")
        if meta["License-Expression"] != "Apache-2.0":
            problems.append(f"{where}: License-Expression {meta['License-Expression']!r}")
        if meta.get_all("License-File") != ["LICENSE"]:
            problems.append(f"{where}: License-File {meta.get_all('License-File')}")
        if list(licences.values()) != [licence]:
            problems.append(f"{where}: no copy of LICENSE inside (found {sorted(licences)})")
        body = meta.get_payload()
        if not isinstance(body, str) or "](../" in body or "](./" in body:
            problems.append(f"{where}: the description links into the checkout (../ or ./)")
        if not meta.get_all("Project-URL"):
            problems.append(f"{where}: no Project-URL")
        requires = meta.get_all("Requires-Dist") or []
        if name != "hwbackends":
            core = [r for r in requires if re.match(r"hwbackends\b(?!-)", r)]
            line = f"hwbackends<{_next_line(core_line)},>={core_line}"
            if core != [line]:
                problems.append(f"{where}: requires {core}, expected [{line!r}]")
            if meta["Version"] != core_version:
                problems.append(
                    f"{where}: version {meta['Version']}, the core's is {core_version} (the 11 "
                    "distributions are released together, docs/release.md)"
                )
        else:
            extras = meta.get_all("Provides-Extra") or []
            for plugin in wanted:
                if plugin == "hwbackends":
                    continue
                short = plugin.removeprefix("hwbackends-")
                for extra in (short, "all"):
                    line = f"{plugin}<{_next_line(core_line)},>={core_line}; extra == '{extra}'"
                    if extra not in extras or line not in requires:
                        problems.append(f"{where}: no extra {extra!r} requiring {line!r}")
            for r in requires:
                if "==" in r.split(";")[0]:
                    problems.append(f"{where}: {r!r} pins a version; extras take ranges")
    for name in wanted:
        if sorted(seen.get(name, [])) != ["sdist", "wheel"]:
            problems.append(f"{name}: found {sorted(seen.get(name, []))}, expected sdist and wheel")
    return problems


def _next_line(line: str) -> str:
    major, minor = (int(x) for x in line.split("."))
    return f"{major}.{minor + 1}" if major == 0 else f"{major + 1}.0"


def main(argv: list[str]) -> int:
    dist = Path(argv[1] if len(argv) > 1 else "dist")
    problems = check(dist)
    for p in problems:
        print(f"check_dist: {p}", file=sys.stderr)
    if problems:
        return 1
    count = len([p for p in dist.iterdir() if p.suffix in (".whl", ".gz")])
    print(f"check_dist: {count} artifacts of {len(projects())} distributions are consistent")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
