"""Synthetic site directories: N installed distributions and P hwbackends plugins.

A filler distribution is a ``*.dist-info`` folder with METADATA, RECORD, WHEEL and INSTALLER,
like pip leaves behind; one in three also has an ``entry_points.txt`` with ``console_scripts``
and one other group (pytest plugins, Sphinx builders, ...), and one in fifty mentions the word
``hwbackends`` outside the hwbackends group, so the scan's text filter meets near misses.

A plugin distribution declares one ``hwbackends.backends`` entry point that points at a real,
tiny module in the same folder: a ``BaseBackend`` subclass for a vendor no host has, so it loads
and probes as "unavailable" and selection still ends on the CPU.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SynthTree", "build_tree"]

_OTHER_GROUPS = (
    "pytest11",
    "gui_scripts",
    "sphinx.builders",
    "flake8.extension",
    "fsspec.specs",
    "babel.extractors",
    "paste.app_factory",
    "opentelemetry_instrumentor",
)

_METADATA = """\
Metadata-Version: 2.3
Name: {name}
Version: {version}
Summary: Synthetic distribution {i} for the hwbackends discovery benchmark
Home-page: https://example.invalid/{name}
Author: Bench Bot
Author-email: bench@example.invalid
License: MIT
Classifier: Programming Language :: Python :: 3
Classifier: License :: OSI Approved :: MIT License
Requires-Python: >=3.9
Requires-Dist: requests>=2
Requires-Dist: typing-extensions; python_version < "3.11"
Provides-Extra: test
Requires-Dist: pytest; extra == "test"
Description-Content-Type: text/markdown

# {name}

A package that exists only to make site-packages look lived in.
"""

_WHEEL = "Wheel-Version: 1.0\nGenerator: bench 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"

_PLUGIN_MODULE = """\
from hwbackends.plugin import BaseBackend


class Backend(BaseBackend):
    name = {name!r}
    api_version = 1
    device_type = {name!r}
    vendor = {name!r}
    priority = 10
"""


@dataclass(frozen=True)
class SynthTree:
    path: Path
    n_dists: int
    n_plugins: int
    plugin_names: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.n_dists}d/{self.n_plugins}p"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:43]


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def _record(files: dict[str, str], info: str, extra: list[str]) -> str:
    lines = [f"{info}/{fn},sha256={_digest(body)},{len(body)}" for fn, body in files.items()]
    lines += [f"{p},sha256={_digest(p)},{100 + len(p)}" for p in extra]
    lines.append(f"{info}/RECORD,,")
    return "\n".join(lines) + "\n"


def _dist(root: Path, name: str, version: str, i: int, eps: str | None, modules: list[str]) -> None:
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    d = root / info
    d.mkdir()
    files = {
        "METADATA": _METADATA.format(name=name, version=version, i=i),
        "WHEEL": _WHEEL,
        "INSTALLER": "pip\n",
    }
    if eps is not None:
        files["entry_points.txt"] = eps
    for fn, body in files.items():
        _write(d / fn, body)
    _write(d / "RECORD", _record(files, info, modules))


def _filler_eps(i: int) -> str | None:
    if i % 3:
        return None
    n = 1 + i % 3
    lines = ["[console_scripts]"]
    lines += [f"synth-tool-{i}-{k} = synth_pkg_{i:05d}.cli:main{k}" for k in range(n)]
    if i % 50 == 0:  # a near miss for the text filter
        lines.append(f"synth-hwbackends-helper-{i} = synth_pkg_{i:05d}.hwbackends_compat:main")
    group = _OTHER_GROUPS[(i // 3) % len(_OTHER_GROUPS)]
    lines += ["", f"[{group}]", f"synth{i} = synth_pkg_{i:05d}.ext:Plugin", ""]
    return "\n".join(lines)


def build_tree(root: Path, n_dists: int, n_plugins: int) -> SynthTree:
    """Write one site directory under ``root`` (which must not exist yet)."""
    root.mkdir(parents=True)
    for i in range(n_dists):
        name = f"synth-pkg-{i:05d}"
        mods = [f"synth_pkg_{i:05d}/__init__.py", f"synth_pkg_{i:05d}/core.py"]
        _dist(root, name, f"1.{i % 10}.{i % 7}", i, _filler_eps(i), mods)
    names: list[str] = []
    for j in range(n_plugins):
        bname = f"synth{j:03d}"
        mod = f"synth_hwb_plugin_{j:03d}"
        names.append(bname)
        _write(root / f"{mod}.py", _PLUGIN_MODULE.format(name=bname))
        eps = f"[hwbackends.backends]\n{bname} = {mod}:Backend\n"
        _dist(root, f"synth-hwb-plugin-{j:03d}", "0.1.0", j, eps, [f"{mod}.py"])
    return SynthTree(root, n_dists, n_plugins, tuple(sorted(names)))
