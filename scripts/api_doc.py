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

Signatures are ``text`` blocks: the docs tests run ``python`` blocks, and a signature is not a
program.
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
    from hwbackends._base.record import FIELDS_HEADING

    doc = inspect.getdoc(obj) or ""
    if inspect.isclass(obj) and doc.startswith(obj.__name__ + "("):
        return ""
    # a record's fields, which help() lists under its docstring, have a table of their own
    return doc.split(FIELDS_HEADING)[0]


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


def unwrapped(obj: Any) -> Any:
    """The function under a pytest fixture's wrapper (the object itself otherwise)."""
    get = getattr(obj, "_get_wrapped_function", None)
    return get() if callable(get) else obj


def members() -> list[Member]:
    out: list[Member] = []
    first: dict[object, str] = {}
    for modname in API_MODULES:
        mod = importlib.import_module(modname)
        for name in sorted(getattr(mod, "__all__", ())):
            obj = getattr(mod, name)
            kind = kind_of(obj)
            here = f"{modname}.{name}"
            # a class, function or alias exported by several modules is described once; a
            # constant is its own entry wherever it is (two modules' ints may be one object)
            key: object = id(obj) if kind in ("class", "function", "fixture", "type") else here
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


def record_signature(cls: type) -> str:
    """A record's constructor as its fields say (``@frozen`` builds a generic ``__init__``)."""
    shown = []
    for f in dataclasses.fields(cls):
        if not f.init or f.name.startswith("_"):  # a private field is not for callers
            continue
        if f.default is not dataclasses.MISSING:
            shown.append(f"{f.name}={f.default!r}")
        elif f.default_factory is not dataclasses.MISSING:
            shown.append(f"{f.name}={f.default_factory()!r}")
        else:
            shown.append(f.name)
    return ", ".join(shown)


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
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            value = getattr(cls, name, dataclasses.MISSING)
            default = "required" if value is dataclasses.MISSING else _short(value)
            text = _type_text(ann)
            if text.startswith("ClassVar[") and text.endswith("]"):
                text = text[len("ClassVar[") : -1]
            out.append((name, text, default))
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
            func = unwrapped(m.obj)
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


# -- the page -------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    """One table cell: no newlines, pipes escaped, empty shown as a dash."""
    text = _roles(" ".join(str(value or "").split()))
    return text.replace("|", "\\|") if text else "–"


_ROLE = re.compile(r":(?:func|meth|data|mod|class|attr|exc|obj):`~?([^`]+)`")


def _roles(text: str) -> str:
    """Sphinx cross-reference roles (``:func:`name```) as Markdown code, and a paragraph's
    closing ``::`` (reST for "a code block follows", which Markdown's indented block is) as
    one colon."""
    return re.sub(r"::$", ":", _ROLE.sub(r"`\1`", text), flags=re.M)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def slug(text: str) -> str:
    """The anchor MkDocs gives a heading (Python-Markdown's toc ``slugify``)."""
    value = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


def _prose(doc: Doc) -> list[str]:
    out = [_roles(doc.summary), ""] if doc.summary else []
    if doc.body:
        out += [_roles(doc.body), ""]
    return out


def _callable_parts(func: Callable[..., Any], doc: Doc) -> list[str]:
    # a list, not a table: a parameter's meaning can be a paragraph
    out: list[str] = []
    items = []
    for p in parameters(func):
        stars = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
        facts = []
        if p.annotation is not inspect.Parameter.empty:
            facts.append(f"`{_type_text(p.annotation)}`")
        if p.default is not inspect.Parameter.empty:
            facts.append(f"default `{_short(p.default)}`")
        elif not stars:
            facts.append("required")
        said = _roles(" ".join(doc.params.get(p.name, "–").split()))
        items.append(f"- `{stars}{p.name}` ({', '.join(facts)}): {said}")
    if items:
        out += ["**Parameters:**", "", *items, ""]
    if doc.returns:
        out += [f"**Returns:** {_roles(' '.join(doc.returns.split()))}", ""]
    if doc.raises:
        out += ["**Raises:**", ""]
        out += [f"- `{e}`: {_roles(' '.join(said.split()))}" for e, said in doc.raises]
        out.append("")
    return out


def _method_cell(func: Callable[..., Any], how: str) -> str:
    doc = parse(docstring(func))
    parts = [doc.summary]
    if how != "property":
        for p in parameters(func):
            parts.append(f"`{p.name}`: {doc.params.get(p.name, '–')}")
        if doc.returns:
            parts.append(f"Returns: {doc.returns}")
    for error, said in doc.raises:
        parts.append(f"Raises `{error}`: {said}")
    return _cell(" ".join(parts).replace("  ", " "))


def _section(m: Member) -> list[str]:
    head = [f"### `{m.qualname}`", ""]
    obj = m.obj
    if m.kind in ("function", "fixture"):
        func = unwrapped(obj)
        doc = parse(docstring(func))
        shown = f"{m.name}{signature(func)}"
        note = ["A pytest fixture (the kit's pytest plugin provides it).", ""]
        return [
            *head,
            "```text",
            shown,
            "```",
            "",
            *(note if m.kind == "fixture" else []),
            *_prose(doc),
            *_callable_parts(func, doc),
        ]
    if m.kind == "type":
        said = constant_doc(m.name)[0]
        shown = f"{m.name} = {alias_text(obj)}"
        return [*head, "```text", shown, "```", "", *_prose(parse(said))]
    if m.kind == "constant":
        said = constant_doc(m.name)[0]
        return [*head, "```text", f"{m.name} = {_short(obj)}", "```", "", *_prose(parse(said))]
    if m.kind == "table":
        said = constant_doc(m.name)[0]
        rows = [[f"`{k}`", _cell(_short(v).replace("...", "…"))] for k, v in obj.items()]
        return [
            *head,
            *_prose(parse(said)),
            f"{len(obj)} entries:",
            "",
            *_table(["Key", "Value"], rows),
            "",
        ]
    # a class
    doc = parse(docstring(obj))
    bases = [
        f"`{b.__module__.replace('hwbackends._', 'hwbackends.')}.{b.__qualname__}`"
        if b.__module__ not in ("builtins", "typing")
        else f"`{b.__qualname__}`"
        for b in obj.__bases__
        if b is not object
    ]
    out = [*head]
    if dataclasses.is_dataclass(obj):
        out += ["```text", f"{m.name}({record_signature(obj)})", "```", ""]
    elif bases:
        out += [f"Subclass of {', '.join(bases)}.", ""]
    out += _prose(doc)
    docs = class_attribute_docs(obj)
    fields = record_fields(obj)
    if fields:
        label = "Field" if dataclasses.is_dataclass(obj) else "Attribute"
        rows = [
            [f"`{n}`", _cell(t), _cell(d), _cell(docs.get(n, ("", ""))[0])] for n, t, d in fields
        ]
        out += [f"**{label}s:**", "", *_table([label, "Type", "Default", "Meaning"], rows), ""]
    methods = sorted(public_methods(obj), key=lambda x: x[0])
    if methods:
        rows = []
        for name, func, how in methods:
            shown = name if how == "property" else f"{name}{signature(func, drop_self=True)}"
            label = " (property)" if how == "property" else ""
            rows.append([f"`{shown}`{label}", _method_cell(func, how)])
        out += ["**Methods:**", "", *_table(["Method", "Meaning"], rows), ""]
    return out


def _summary(m: Member) -> str:
    if m.kind in ("function", "fixture"):
        func = unwrapped(m.obj)
        return parse(docstring(func)).summary
    if m.kind == "class":
        return parse(docstring(m.obj)).summary
    return parse(constant_doc(m.name)[0]).summary


def page(header: str) -> str:
    """The whole ``docs/generated/api.md``."""
    lines = [header, "", "# Python API reference", ""]
    lines.append(
        "Every name in the `__all__` of each public module. Each module starts with a table "
        "of its names; below it, one section per name: the signature, what it does, each "
        "parameter, each field or attribute and each method, with its meaning. A name that "
        "several modules export is described where it is listed first. Generated from the "
        "docstrings by `scripts/gen_docs.py`; types are shown as the code writes them."
    )
    lines.append("")
    all_members = members()
    for modname in API_MODULES:
        mod = importlib.import_module(modname)
        here = [m for m in all_members if m.module == modname]
        mdoc = parse(inspect.getdoc(mod))
        lines += [f"## `{modname}`", "", *_prose(mdoc)]
        rows = []
        for m in here:
            link = f"[`{m.name}`](#{slug(m.first)})"
            same = f"The same object as `{m.first}`."
            said = same if m.first != m.qualname else _summary(m)
            rows.append([link, m.kind, _cell(said)])
        lines += [*_table(["Name", "Kind", "Description"], rows), ""]
        for m in here:
            if m.first == m.qualname:
                lines += _section(m)
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    gaps = missing()
    print("\n".join(gaps))
    print(f"api_doc: {len(gaps)} gap(s)", file=sys.stderr)
    return 1 if gaps else 0


if __name__ == "__main__":
    sys.path.insert(0, str(SRC))
    sys.exit(main())
