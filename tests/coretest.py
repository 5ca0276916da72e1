"""Helpers for hermetic core tests: plugins installed on the machine never change results."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

import hwbackends
from hwbackends._selection import registry as _registry
from hwbackends._selection.registry import Registry

HOSTS = Path(__file__).parent / "hosts"
PLUGINS = Path(__file__).resolve().parent.parent / "plugins"
#: For modules whose tests read the in-repo plugins' host files.
needs_plugins = pytest.mark.skipif(
    not (PLUGINS / "hwbackends-cuda").exists(), reason="the in-repo GPU plugins are needed"
)
_T = TypeVar("_T")


@dataclass
class Site:
    """A temporary site directory holding hand-made distributions with real entry points."""

    path: Path
    modules: list[str] = field(default_factory=list)

    def add_plugin(
        self,
        name: str,
        code: str,
        *,
        dist: str | None = None,
        version: str = "1.0",
        module: str | None = None,
        attr: str = "Backend",
        group: str = "hwbackends.backends",
    ) -> str:
        module = module or f"hwb_test_{name}_{len(self.modules)}"
        dist = dist or f"hwbackends-{name}"
        (self.path / f"{module}.py").write_text(textwrap.dedent(code), encoding="utf-8")
        info = self.path / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8"
        )
        eps = info / "entry_points.txt"
        old = eps.read_text(encoding="utf-8") if eps.exists() else ""
        eps.write_text(old + f"[{group}]\n{name} = {module}:{attr}\n", encoding="utf-8")
        self.modules.append(module)
        # A listing of this folder cached by an earlier import may carry the folder's current
        # mtime (its clock ticks coarsely) and so hide the module just written.
        importlib.invalidate_caches()
        return module


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    d = tmp_path / "site"
    d.mkdir()
    monkeypatch.syspath_prepend(str(d))
    s = Site(d)
    yield s
    for m in s.modules:
        sys.modules.pop(m, None)


@pytest.fixture
def isolated(site: Site, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    """Make the process-wide registry see only ``site`` (plus the built-in cpu)."""
    hwbackends.reset()
    monkeypatch.setattr(_registry, "_registry", Registry(path=[str(site.path)]))
    yield site
    hwbackends.reset()


def refresh(site: Site) -> None:
    """Re-discover after adding plugins to an isolated site."""
    _registry._registry = Registry(path=[str(site.path)])
    _registry._cached = None


GOOD = """
from typing import ClassVar
from hwbackends.plugin import BaseBackend

class Backend(BaseBackend):
    name: ClassVar[str] = "{name}"
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "{name}"
    priority: ClassVar[int] = {priority}
    device_nodes: ClassVar[tuple[str, ...]] = ("{name}{{n}}",)
"""


def good_plugin(name: str, priority: int = 50) -> str:
    return GOOD.format(name=name, priority=priority)


def dtype_text(name: str) -> str:
    """``str()`` of the ``dtype`` that pretrained_kwargs() returns: a torch dtype where torch
    is installed, else its name (.ci/wheels.sh runs the tests without torch)."""
    return f"torch.{name}" if importlib.util.find_spec("torch") is not None else name


def as_installed(text: str) -> str:
    """Report text from the docs as this installation prints it. The docs show reports of the
    core installed from this checkout and run from its root, whose install command names the
    checkout's folders (``'./[transformers]' ./plugins/hwbackends-cuda``); a core installed from
    its wheel (.ci/wheels.sh) names the published distributions instead."""
    from hwbackends._discovery.catalog import core_checkout

    if core_checkout() is not None:
        return text
    return re.sub(
        r"'\./\[transformers\]' \./plugins/(hwbackends-[a-z]+)",
        r"'hwbackends[transformers]' \1",
        text,
    )


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without the library's own ``HWBACKENDS_*`` settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWBACKENDS_")}
    env.update(extra)
    return env


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``hwbackends ARGV`` in this process: the exit code, standard output and error."""
    from hwbackends.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_python(
    *argv: str, env: dict[str, str], cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python ARGV`` with this interpreter, output captured as text."""
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout
    )


def pip_install(project: Path, target: Path) -> None:
    """Install a distribution folder into ``target`` with pip, as a user would (no index)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(project)],
        capture_output=True, text=True,
    )  # fmt: skip
    if proc.returncode != 0:
        pytest.fail(f"pip could not install {project}:\n{proc.stderr}")


def pci_function(root: Path, bus: str, vendor: str, device: str, klass: str) -> None:
    """One PCI function in a fake sysfs tree under ``root``."""
    base = root / "sys/bus/pci/devices" / bus
    base.mkdir(parents=True, exist_ok=True)
    for name, value in (("vendor", vendor), ("device", device), ("class", klass)):
        (base / name).write_text(value + "\n", encoding="utf-8")


def free_port(low: int = 20000, high: int = 60000) -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (chosen at random so that
    parallel test runs rarely pick the same one)."""
    import random
    import socket

    for _ in range(200):
        port = random.randint(low, high)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {low}..{high}")


def on_a_free_port(body: Callable[[int], _T], low: int = 20000, high: int = 60000) -> _T:
    """``body(port)`` with a free port, again on another port if the one chosen was taken.

    A port cannot be held open for a child process that binds it itself (torchrun's store,
    a rank's rendezvous), so another process may take it in between; the child then fails
    with EADDRINUSE, which ``body``'s assertion message carries. Any other failure is raised
    at once."""
    for attempt in range(3):
        try:
            return body(free_port(low, high))
        except AssertionError as exc:
            if attempt < 2 and "address already in use" in str(exc).lower():
                continue
            raise
    raise AssertionError("unreachable")  # pragma: no cover
