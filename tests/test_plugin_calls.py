"""One door to plugin code: outside the guard's own modules, a backend's protocol methods are
called only through ``plugin_call`` (or the guard), so a plugin that raises, hangs or edits the
environment there becomes a ``PluginError`` naming it, and its edit is put back."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from typing import Any

import pytest
from coretest import Site, good_plugin, refresh

import hwbackends
from hwbackends import Host, PluginError
from hwbackends._base.record import replace
from hwbackends._selection.registry import get_from_report
from hwbackends._selection.view import raw

ROOT = Path(__file__).resolve().parents[1]

#: The protocol's methods (hwbackends.Backend): plugin code the core reaches only by the door.
METHODS = frozenset({"probe", "devices", "capabilities", "visibility_env"})
#: The calls that run what they are given under the guard.
DOORS = frozenset({"plugin_call", "guarded", "call", "call_many"})
#: The door itself, and the conformance kit (a plugin's own CI calls the plugin under test
#: directly: its failures are the test's findings, not the host's to isolate).
EXEMPT = frozenset({"src/hwbackends/_selection/calls.py", "src/hwbackends/testing.py"})


def _imported_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).partition(".")[0] for a in node.names)
    return names


def _raw_calls(path: Path) -> list[str]:
    """The calls of a protocol method in ``path`` made outside a door: not on ``self``,
    ``super()`` or a module, and not inside a lambda handed to a door."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules = _imported_names(tree)
    parent: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parent[child] = node
    found = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in METHODS
        ):
            continue
        recv = node.func.value
        if isinstance(recv, ast.Name) and (recv.id == "self" or recv.id in modules):
            continue  # a plugin's own method, or a module's function of that name
        if isinstance(recv, ast.Call) and getattr(recv.func, "id", "") == "super":
            continue
        p: ast.AST = node
        through_door = False
        while p in parent:
            up = parent[p]
            if isinstance(p, ast.Lambda) and isinstance(up, ast.Call):
                fn = up.func
                called = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
                if called in DOORS:
                    through_door = True
                    break
            p = up
        if not through_door:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def _sources() -> list[Path]:
    files = sorted((ROOT / "src").rglob("*.py")) + sorted(ROOT.glob("plugins/*/src/**/*.py"))
    return [f for f in files if str(f.relative_to(ROOT)) not in EXEMPT]


def test_no_module_calls_a_plugin_method_except_through_the_door() -> None:
    """Before, ``_integrations/placement.py`` (``_spread_caps``), ``transformers.py``
    (an explicit device after an iGPU), ``_selection/confirm.py`` and ``cli/_plugin_doc.py``
    called ``capabilities()``/``devices()`` on the plugin object itself."""
    raw = [line for f in _sources() for line in _raw_calls(f)]
    assert raw == []


def test_the_scan_sees_a_raw_call(tmp_path: Path) -> None:
    """The scan finds what it looks for (and lets the door's own spelling through)."""
    sample = ROOT / "tests" / "_scan_sample.py"
    sample.write_text(
        "from hwbackends._selection.calls import plugin_call\n"
        "def f(t, d):\n"
        "    ok = plugin_call('x', 'capabilities', lambda: t.backend.capabilities(d))\n"
        "    return t.backend.capabilities(d, host=t.host)\n",
        encoding="utf-8",
    )
    try:
        assert _raw_calls(sample) == [
            "tests/_scan_sample.py:4: t.backend.capabilities(d, host=t.host)"
        ]
    finally:
        sample.unlink()


#: Two RTX 3090s (sm_86) and two RTX 4090s (sm_89): a spread model spans two architectures.
MIXED = Host.from_file(ROOT / "plugins/hwbackends-cuda/tests/hosts/mixed-4-unknown-order.json")


class _Hostile:
    """The cuda backend, except that ``capabilities()`` of the second architecture edits the
    environment and divides by zero."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._inner, attr)

    def capabilities(self, device: Any = None, *, host: Any = None) -> Any:
        if device is not None and device.arch == "sm_89":
            os.environ["HWBACKENDS_TEST_HOSTILE"] = "1"
            return 1 // 0
        return self._inner.capabilities(device, host=host)


def test_a_plugin_that_edits_and_raises_in_capabilities_of_a_spread_model() -> None:
    """``device_map="auto"`` over 3090s and 4090s asks the capabilities of each
    architecture. Before, that call was the plugin's own: ``ZeroDivisionError`` escaped
    ``pretrained_kwargs()``. Now it is a ``PluginError`` naming the call (the edit itself is
    the plugin's to answer for: the guard reports edits, it never undoes them)."""
    from hwbackends._selection.target import resolve_target
    from hwbackends.transformers import plan_for_target

    t = resolve_target(host=MIXED, env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    hostile = replace(t, backend=_Hostile(t.backend))
    with pytest.raises(PluginError, match=r"cuda\.capabilities\(\)") as info:
        plan_for_target(hostile, kernels=False)
    assert "ZeroDivisionError" in str(info.value)
    assert os.environ.pop("HWBACKENDS_TEST_HOSTILE") == "1"  # not undone by guessing


#: A plugin whose ``devices()`` and a helper of its own divide by zero when asked to.
HOSTILE = (
    good_plugin("hostile", 90)
    + """
    def devices(self, host, env):
        if env.get("HOSTILE") == "1":
            return 1 // 0
        return super().devices(host, env)

    def helper(self):
        return 1 // 0
"""
)


def test_current_and_get_return_guarded_views(
    isolated: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, ``hwbackends.current()`` and ``get()`` returned the plugin's own object: a
    user's ``current().devices(...)`` raised the plugin's ``ZeroDivisionError`` outside the
    guard. Now both are views whose calls go through the door, each naming the plugin."""
    isolated.add_plugin("hostile", HOSTILE)
    refresh(isolated)
    host_file = tmp_path / "host.json"
    host_file.write_text(json.dumps({"device_nodes": ["/dev/hostile0"]}), encoding="utf-8")
    monkeypatch.setenv("HWBACKENDS_HOST", str(host_file))
    host = Host.from_file(host_file)
    current, got = hwbackends.current(), hwbackends.get("hostile")
    assert current is hwbackends.current() and current == got
    for backend in (current, got):
        assert isinstance(backend, hwbackends.Backend)
        assert (backend.name, backend.device_type, backend.priority) == ("hostile", "hostile", 90)
        assert type(backend.name) is str and backend.api_version == hwbackends.API_VERSION
        assert [d.torch_device for d in backend.devices(host, {})] == ["hostile:0"]
        with pytest.raises(PluginError, match=r"hostile\.devices\(\) raised ZeroDivisionError"):
            backend.devices(host, {"HOSTILE": "1"})
        with pytest.raises(PluginError, match=r"hostile\.helper\(\) raised ZeroDivisionError"):
            backend.helper()
        assert backend.probe(host).available
        with pytest.raises(AttributeError):
            backend.no_such_attribute  # noqa: B018
    assert raw(current) is get_from_report(hwbackends.explain())  # the library's own calls
