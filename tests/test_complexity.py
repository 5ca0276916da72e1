"""Every function in src/ and plugins/*/src is one a reader can hold: radon's cyclomatic
complexity at most LIMIT. Methods, closures and functions of nested classes count, each on its
own (radon does not add a closure's branches to its parent's)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from radon.visitors import Class, ComplexityVisitor, Function

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 25

# Functions allowed above LIMIT (file, radon's name): none. An entry that is no longer above
# LIMIT (or is gone) fails too. Never add to it: split the new function instead.
ALLOWED: set[tuple[str, str]] = set()


def _sources(root: Path) -> list[Path]:
    files = list((root / "src").rglob("*.py"))
    for plugin_src in sorted((root / "plugins").glob("*/src")):
        files.extend(plugin_src.rglob("*.py"))
    return sorted(files)


def _functions(blocks: Sequence[Function | Class], prefix: str = "") -> Iterator[Function]:
    for block in blocks:
        name = prefix + block.name
        if isinstance(block, Function):
            yield block._replace(name=name, classname=None)
            yield from _functions(block.closures, name + ".")
        else:
            yield from _functions(block.methods, name + ".")
            yield from _functions(block.inner_classes, name + ".")


def over_limit(root: Path, limit: int = LIMIT) -> dict[tuple[str, str], str]:
    """(file, function) -> 'file:line function (score)' for each function above ``limit``."""
    found = {}
    for path in _sources(root):
        rel = path.relative_to(root).as_posix()
        visitor = ComplexityVisitor.from_code(path.read_text(encoding="utf-8"))
        for function in _functions([*visitor.functions, *visitor.classes]):
            if function.complexity > limit:
                where = f"{rel}:{function.lineno} {function.name} ({function.complexity})"
                found[(rel, function.name)] = where
    return found


def _problems(found: dict[tuple[str, str], str], allowed: set[tuple[str, str]]) -> list[str]:
    new = [where for key, where in sorted(found.items()) if key not in allowed]
    stale = [f"{file} {name}" for file, name in sorted(allowed - found.keys())]
    problems = []
    if new:
        problems.append(
            f"functions above cyclomatic complexity {LIMIT} (radon): "
            + "; ".join(new)
            + ". Expected at most "
            + str(LIMIT)
            + ": split each into named steps (small private functions)."
        )
    if stale:
        problems.append(
            "allow-listed functions no longer above the limit (or gone): "
            + "; ".join(stale)
            + ". Remove them from ALLOWED in tests/test_complexity.py."
        )
    return problems


def test_no_function_above_the_limit() -> None:
    assert _problems(over_limit(ROOT), ALLOWED) == []


def test_a_new_function_above_the_limit_is_named_with_its_file_line_and_score(
    tmp_path: Path,
) -> None:
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(LIMIT))
    source = tmp_path / "src" / "pkg" / "mod.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "def small(x):\n    return x\n\n\n"
        f"class Big:\n    def method(self, x):\n{branches.replace('    ', '        ')}"
        "        return -1\n\n\n"
        f"def outer():\n    def inner(x):\n{branches.replace('    ', '        ')}"
        "        return -1\n\n    return inner\n",
        encoding="utf-8",
    )
    (tmp_path / "plugins" / "p" / "src").mkdir(parents=True)
    (tmp_path / "plugins" / "p" / "src" / "plug.py").write_text(
        f"def probe(x):\n{branches}    return -1\n", encoding="utf-8"
    )
    found = over_limit(tmp_path)
    assert sorted(found.values()) == [
        "plugins/p/src/plug.py:1 probe (26)",
        "src/pkg/mod.py:6 Big.method (26)",
        "src/pkg/mod.py:61 outer.inner (26)",
    ]
    [problem] = _problems(found, {("src/pkg/mod.py", "Big.method")})
    assert "plugins/p/src/plug.py:1 probe (26)" in problem
    assert "src/pkg/mod.py:61 outer.inner (26)" in problem
    assert "Big.method" not in problem


def test_an_allowed_function_that_is_split_must_leave_the_list() -> None:
    found = {("a.py", "f"): "a.py:1 f (30)"}
    [problem] = _problems(found, {("a.py", "f"), ("b.py", "g")})
    assert "b.py g" in problem and "Remove them from ALLOWED" in problem
