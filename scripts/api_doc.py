"""The Python API reference, read from the code: every public name with its docstring, every
parameter, field, attribute and method with its meaning.

Used by ``scripts/gen_docs.py`` (which writes ``docs/generated/api.md``) and by
``tests/docs/test_api_reference.py`` (which fails on anything undocumented):

    python scripts/api_doc.py            # list what lacks a docstring, file:line first

Conventions the reader understands (the Sphinx style that ``mkdocs.yml`` sets for
mkdocstrings, so the Plugin API page shows the same text):

* a function's or method's parameters: ``:param name: meaning`` lines in its docstring, with
  ``:returns:`` and ``:raises Error: when`` where they say something the summary does not;
* a record's field, a class attribute or a module constant: a string literal on the line
  after its assignment (an attribute docstring, PEP 257).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import sys
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

API_MODULES = (
    "hwbackends",
    "hwbackends.transformers",
    "hwbackends.accelerate",
    "hwbackends.distributed",
    "hwbackends.visibility",
    "hwbackends.plugin",
    "hwbackends.facts",
    "hwbackends.testing",
)


# -- docstrings ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Doc:
    """A docstring split into its parts."""

    summary: str
    body: str
    params: Mapping[str, str]
    returns: str
    raises: tuple[tuple[str, str], ...]


_FIELD = re.compile(r"^:(param|parameter|arg|returns?|raises?)\b\s*([^:]*):\s*(.*)$")


def parse(text: str | None) -> Doc:
    """Split a Sphinx-style docstring: first paragraph, the rest, ``:param:`` and co."""
    lines = inspect.cleandoc(text or "").splitlines()
    prose: list[str] = []
    params: dict[str, str] = {}
    returns = ""
    raises: list[tuple[str, str]] = []
    current: list[str] | None = None
    fields: list[tuple[str, str, list[str]]] = []
    for line in lines:
        m = _FIELD.match(line.strip()) if not line.startswith(" ") else None
        if m:
            current = [m.group(3)]
            fields.append((m.group(1), m.group(2).strip(), current))
        elif current is not None and (line.startswith(" ") or not line.strip()):
            current.append(line.strip())
        else:
            current = None
            prose.append(line)
    for kind, arg, words in fields:
        said = " ".join(" ".join(words).split())
        if kind in ("param", "parameter", "arg"):
            params[arg.split()[-1] if arg else ""] = said
        elif kind.startswith("return"):
            returns = said
        else:
            raises.append((arg, said))
    paragraphs = "\n".join(prose).strip().split("\n\n")
    summary = " ".join(paragraphs[0].split())
    return Doc(summary, "\n\n".join(paragraphs[1:]).strip(), params, returns, tuple(raises))


def docstring(obj: Any) -> str:
    """The object's own docstring; not the signature dataclasses write when it has none."""
    doc = inspect.getdoc(obj) or ""
    if inspect.isclass(obj) and doc.startswith(obj.__name__ + "("):
        return ""
    return doc


# -- attribute docstrings --------------------------------------------------------------------


def _assigned(node: ast.stmt) -> str | None:
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    if (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
    ):
        return node.targets[0].id
    return None


def _attribute_docs(body: Sequence[ast.stmt], path: str) -> dict[str, tuple[str, str]]:
    """name -> (docstring, "file:line") for each assignment in ``body`` (None docstring: "")."""
    out: dict[str, tuple[str, str]] = {}
    for i, node in enumerate(body):
        name = _assigned(node)
        if name is None:
            continue
        doc = ""
        nxt = body[i + 1] if i + 1 < len(body) else None
        if (
            isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            doc = inspect.cleandoc(nxt.value.value)
        out[name] = (doc, f"{path}:{node.lineno}")
    return out


@cache
def _tree(path: str) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"))


def _rel(path: str) -> str:
    try:
        return Path(path).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return path


def class_attribute_docs(cls: type) -> dict[str, tuple[str, str]]:
    """Attribute docstrings of ``cls`` and of its bases from this project, nearest first."""
    out: dict[str, tuple[str, str]] = {}
    for klass in reversed(cls.__mro__):
        if not klass.__module__.startswith("hwbackends"):
            continue
        path = inspect.getsourcefile(klass)
        if path is None:
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef) and node.name == klass.__name__:
                for name, (doc, where) in _attribute_docs(node.body, _rel(path)).items():
                    # a subclass that only sets a value keeps the base class's meaning
                    if doc or name not in out:
                        out[name] = (doc, where)
                break
    return out


@cache
def module_constant_docs() -> dict[str, list[tuple[str, str]]]:
    """name -> [(docstring, "file:line")] for every top-level assignment under ``src/``."""
    out: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(SRC.rglob("*.py")):
        body = _tree(str(path)).body
        # names assigned under `if TYPE_CHECKING:` too (the type aliases live there)
        blocks = [body] + [n.body for n in body if isinstance(n, ast.If)]
        for block in blocks:
            for name, found in _attribute_docs(block, _rel(str(path))).items():
                out.setdefault(name, []).append(found)
    return out


def constant_doc(name: str) -> tuple[str, str]:
    """The docstring of the module constant ``name`` (where several modules assign one, the
    documented one) and where it is."""
    found = module_constant_docs().get(name, [])
    documented = [f for f in found if f[0]]
    if documented:
        return documented[0]
    return ("", found[0][1] if found else "?")


# -- what the public modules hold ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Member:
    """One public name of one public module."""

    module: str
    name: str
    obj: Any
    kind: str  # class, function, fixture, type, table, constant
    first: str  # "module.name" where the same object was listed first (itself if first)

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"


def _is_alias(obj: Any) -> bool:
    return typing.get_origin(obj) is not None and not inspect.isclass(obj)


def kind_of(obj: Any) -> str:
    if type(obj).__name__ == "FixtureFunctionDefinition" or hasattr(obj, "_pytestfixturefunction"):
        return "fixture"
    if inspect.isclass(obj):
        return "class"
    if _is_alias(obj):
        return "type"
    if inspect.isfunction(obj):
        return "function"
    if isinstance(obj, Mapping) and len(repr(obj)) > 120:
        return "table"
    return "constant"


def members() -> list[Member]:
    out: list[Member] = []
    first: dict[int, str] = {}
    for modname in API_MODULES:
        mod = importlib.import_module(modname)
        for name in sorted(getattr(mod, "__all__", ())):
            obj = getattr(mod, name)
            kind = kind_of(obj)
            key = id(obj) if kind in ("class", "function", "fixture", "type") else id((mod, name))
            here = f"{modname}.{name}"
            out.append(Member(modname, name, obj, kind, first.setdefault(key, here)))
    return out


def public_methods(cls: type) -> Iterator[tuple[str, Callable[..., Any], str]]:
    """(name, function, "property"/"method"/...) of each public method defined by ``cls`` or a
    base class of this project, nearest definition only."""
    seen: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("hwbackends"):
            continue
        for name, raw in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            if isinstance(raw, property) and raw.fget is not None:
                seen.add(name)
                yield name, raw.fget, "property"
            elif isinstance(raw, (classmethod, staticmethod)):
                seen.add(name)
                yield name, raw.__func__, type(raw).__name__
            elif inspect.isfunction(raw):
                seen.add(name)
                yield name, raw, "method"


def parameters(func: Callable[..., Any]) -> list[inspect.Parameter]:
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return []
    return [p for p in sig.parameters.values() if p.name not in ("self", "cls")]


def signature(func: Callable[..., Any], *, drop_self: bool = False) -> str:
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return "(...)"
    params = [
        p.replace(annotation=inspect.Parameter.empty)
        for p in sig.parameters.values()
        if not (drop_self and p.name in ("self", "cls"))
    ]
    return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


def record_fields(cls: type) -> list[tuple[str, str, str]]:
    """(name, type, default) of each public field of a dataclass, or of each public annotated
    class attribute of another class (its own and its project bases')."""
    out: list[tuple[str, str, str]] = []
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if f.name.startswith("_"):
                continue
            if f.default is not dataclasses.MISSING:
                default = repr(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                default = repr(f.default_factory())
            else:
                default = "required"
            out.append((f.name, _type_text(f.type), default))
        return out
    seen: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("hwbackends"):
            continue
        for name, ann in vars(klass).get("__annotations__", {}).items():
            if name.startswith("_") or name in seen or _type_text(ann).startswith("ClassVar"):
                continue
            seen.add(name)
            value = getattr(cls, name, dataclasses.MISSING)
            default = "required" if value is dataclasses.MISSING else _short(value)
            out.append((name, _type_text(ann), default))
    return out


def _type_text(ann: Any) -> str:
    text = ann if isinstance(ann, str) else getattr(ann, "__name__", repr(ann))
    return str(text).replace("typing.", "")


def _short(value: Any) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= 80 else text[:77] + "..."


def alias_text(obj: Any) -> str:
    return repr(obj).replace("typing.", "")


# -- what is missing -----------------------------------------------------------------------


def _where(obj: Any) -> str:
    try:
        path = inspect.getsourcefile(obj)
        line = inspect.getsourcelines(obj)[1]
    except (TypeError, OSError):
        return "?"
    return f"{_rel(path or '?')}:{line}"


def _callable_gaps(func: Callable[..., Any], label: str, seen: set[int]) -> list[str]:
    out: list[str] = []
    if id(func) in seen:  # a method inherited by several public classes: reported once
        return out
    seen.add(id(func))
    doc = parse(docstring(func))
    if not doc.summary:
        out.append(f"{_where(func)}: {label}: no docstring")
    for p in parameters(func):
        if p.name not in doc.params:
            out.append(f"{_where(func)}: {label}: parameter `{p.name}` has no `:param {p.name}:`")
    return out


def missing() -> list[str]:
    """Every public name, parameter, field, attribute and method that lacks its docstring."""
    out: list[str] = []
    seen: set[int] = set()
    for m in members():
        if m.first != m.qualname:
            continue
        if m.kind in ("function", "fixture"):
            func = getattr(m.obj, "_get_wrapped_function", lambda: m.obj)()
            out += _callable_gaps(func, m.qualname, seen)
        elif m.kind in ("type", "table", "constant"):
            doc, where = constant_doc(m.name)
            if not doc:
                out.append(f"{where}: {m.qualname}: no docstring on the line after it")
        elif m.kind == "class":
            if not docstring(m.obj):
                out.append(f"{_where(m.obj)}: {m.qualname}: no docstring")
            docs = class_attribute_docs(m.obj)
            for name, _type, _default in record_fields(m.obj):
                if not docs.get(name, ("", ""))[0]:
                    where = docs.get(name, ("", _where(m.obj)))[1]
                    out.append(f"{where}: {m.qualname}.{name}: no docstring on the line after it")
            for name, func, _how in public_methods(m.obj):
                out += _callable_gaps(func, f"{m.qualname}.{name}", seen)
    return sorted(set(out))


def main() -> int:
    gaps = missing()
    print("\n".join(gaps))
    print(f"api_doc: {len(gaps)} gap(s)", file=sys.stderr)
    return 1 if gaps else 0


if __name__ == "__main__":
    sys.path.insert(0, str(SRC))
    sys.exit(main())

