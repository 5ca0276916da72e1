"""The layers of src/hwbackends, as docs/code-map.md lists them: no import circle, no import of
a higher layer, every module on the map. Imports inside functions count (a lazy import hides a
dependency from the interpreter, not from a reader); ``if TYPE_CHECKING:`` blocks don't."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
MAP = ROOT / "docs" / "code-map.md"
ORDER = (
    "bottom",
    "discovery",
    "machine",
    "visibility",
    "selection",
    "plugin kit",
    "integrations",
    "conformance",
    "cli",
    "package face",
)


def _modules(src: Path) -> dict[str, Path]:
    out = {}
    for path in sorted((src / "hwbackends").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    return skip


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of the package that ``name`` imports at run time, anywhere in its code."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".") if is_pkg else name.split(".")[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in modules:
                    found.add(sub)  # a submodule: the package's __init__ is not the point
                elif base in modules:
                    found.add(base)
    found.discard(name)
    return found


def read_map(text: str) -> dict[str, str]:
    layers: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^\| `([\w.]+)` \| ([a-z ]+) \| .+\|$", line)
        if m:
            assert m.group(1) not in layers, f"{m.group(1)} is listed twice in code-map.md"
            layers[m.group(1)] = m.group(2)
    return layers


def layer_problems(src: Path, layers: dict[str, str]) -> list[str]:
    """Every import of a higher layer, and every module missing from (or extra on) the map."""
    modules = _modules(src)
    problems = [f"{m} is not on the map" for m in sorted(set(modules) - set(layers))]
    problems += [
        f"{m} is on the map but does not exist" for m in sorted(set(layers) - set(modules))
    ]
    problems += [f"{m}: unknown layer {lay!r}" for m, lay in layers.items() if lay not in ORDER]
    for name, path in modules.items():
        if layers.get(name) not in ORDER:
            continue
        mine = ORDER.index(layers[name])
        for dep in sorted(imports_of(name, path, modules)):
            if layers.get(dep) in ORDER and ORDER.index(layers[dep]) > mine:
                problems.append(f"{name} ({layers[name]}) imports {dep} ({layers[dep]})")
    return problems


def circles(src: Path) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    modules = _modules(src)
    graph = {m: imports_of(m, p, modules) for m, p in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_runtime_import_circle() -> None:
    assert circles(SRC) == []


def test_every_module_is_on_the_map_and_imports_only_its_layer_or_below() -> None:
    assert layer_problems(SRC, read_map(MAP.read_text(encoding="utf-8"))) == []


def test_no_module_is_over_700_lines_unless_it_says_why() -> None:
    # A longer module must say at its top why (and be a table, not logic).
    long = []
    for name, path in _modules(SRC).items():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > 700 and "is over 700 lines because" not in text[:2000]:
            long.append(f"{name}: {text.count(chr(10))} lines")
    assert long == []


def _write(tmp: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp / "src" / "hwbackends" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return tmp / "src"


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param(
            {
                "__init__.py": "",
                "_a.py": "def f():\n    from hwbackends import _b\n",
                "_b.py": "from hwbackends._a import f\n",
            },
            [["hwbackends._a", "hwbackends._b"]],
            id="lazy-import-circle",
        ),
        pytest.param(
            {
                "__init__.py": "",
                "_a.py": (
                    "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from hwbackends._b import X\n"
                ),
                "_b.py": "from hwbackends._a import TYPE_CHECKING\n",
            },
            [],
            id="type-checking-only",
        ),
        pytest.param(
            {
                "__init__.py": "",
                "p/__init__.py": "",
                "p/x.py": "from . import y\n",
                "p/y.py": "def g():\n    from .x import z\n",
            },
            [["hwbackends.p.x", "hwbackends.p.y"]],
            id="relative-circle",
        ),
    ],
)
def test_the_circle_check_can_fail(
    tmp_path: Path, files: dict[str, str], expected: list[list[str]]
) -> None:
    assert circles(_write(tmp_path, files)) == expected


def test_the_layer_check_can_fail(tmp_path: Path) -> None:
    src = _write(
        tmp_path,
        {
            "__init__.py": "",
            "_low.py": "def f():\n    from hwbackends._high import g\n",
            "_high.py": "from hwbackends._low import f\n",
            "_lost.py": "",
        },
    )
    layers = {"hwbackends": "package face", "hwbackends._low": "bottom", "hwbackends._high": "cli"}
    assert layer_problems(src, layers) == [
        "hwbackends._lost is not on the map",
        "hwbackends._low (bottom) imports hwbackends._high (cli)",
    ]


@pytest.mark.parametrize(
    "path",
    [
        "hwbackends",
        "hwbackends.plugin",
        "hwbackends.visibility",
        "hwbackends.transformers",
        "hwbackends.accelerate",
        "hwbackends.distributed",
        "hwbackends.testing",
        "hwbackends.facts",
        "hwbackends.cli",
    ],
)
def test_every_public_import_path_and_name_resolves(path: str) -> None:
    import importlib

    module = importlib.import_module(path)
    missing = [n for n in getattr(module, "__all__", ()) if not hasattr(module, n)]
    assert missing == []
