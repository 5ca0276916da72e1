"""docs/code-map.md's "Where a change goes" names places that exist: each ``file::name`` is a
file of this checkout defining that name, each ``file`` a file or folder of it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "docs" / "code-map.md"
KINDS = (
    "A visibility grammar",
    "A launcher",
    "A recommended setting",
    "An evidence source",
    "A CLI command",
)


def section() -> str:
    text = MAP.read_text(encoding="utf-8")
    start = text.index("## Where a change goes")
    return text[start : text.index("\n## ", start + 1)]


def places(text: str) -> list[str]:
    """Every backticked path in the section's list items (``file`` or ``file::name``)."""
    found = []
    for line in text.splitlines():
        if line.startswith("- "):
            words = re.findall(r"`([^`\s]+)`", line)
            # a pattern such as cli/_<command>.py names no one file
            found += [p for p in words if ("/" in p or "::" in p) and "<" not in p]
    return found


def defined(path: Path, name: str) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        if isinstance(node, kinds) and node.name == name:
            return True
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def missing(text: str, root: Path) -> list[str]:
    out = []
    for place in places(text):
        file, _, name = place.partition("::")
        path = root / file
        if not path.exists():
            # a step module named by its file alone, beside a full path on the same line
            sibling = next((p for p in root.glob(f"src/hwbackends/**/{file}")), None)
            if sibling is None:
                out.append(f"{place}: no such file")
            continue
        if name and not defined(path, name):
            out.append(f"{place}: {file} defines no {name}")
    return out


def test_every_kind_of_change_is_mapped() -> None:
    text = section()
    for kind in KINDS:
        assert f"**{kind}**" in text, kind
        body = text.split(f"**{kind}**", 1)[1].split("\n\n", 1)[0]
        assert len(places(body)) >= 4, (kind, places(body))


def test_every_named_place_exists() -> None:
    assert missing(section(), ROOT) == []


def test_a_renamed_place_is_found(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "mod.py").write_text("def kept():\n    pass\n", encoding="utf-8")
    text = "- `src/mod.py::kept` — here\n- `src/mod.py::renamed` — gone\n- `src/gone.py` — gone\n"
    assert missing(text, tmp_path) == [
        "src/mod.py::renamed: src/mod.py defines no renamed",
        "src/gone.py: no such file",
    ]
