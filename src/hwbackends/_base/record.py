"""Frozen, typed records that cost nothing to define: the value types of hwbackends.

``@frozen`` makes a class behave like ``@dataclasses.dataclass(frozen=True)``: fields from
the annotations (``ClassVar`` excluded) with their defaults or ``field(default_factory=...)``,
``__init__`` taking them by position or keyword, ``__repr__``, ``__eq__``, ``__hash__``, and
assignment refused with ``dataclasses.FrozenInstanceError``. ``@mutable`` is the same without
freezing (and, like a dataclass with ``eq=True``, without a hash).

Why not ``dataclasses``: importing it pulls in ``inspect``, ``ast`` and ``enum``, and each
decorated class compiles its methods with ``exec``: about 20 ms on the selection path for
~30 classes. Here the methods are shared closures and nothing is compiled up front; a class
instantiated more than a few times gets a compiled ``__init__`` then, as fast as a dataclass's.

They stay dataclasses to the rest of the world: ``dataclasses.fields``, ``replace``,
``asdict`` and ``is_dataclass`` work on them, because ``__dataclass_fields__`` is built by
``dataclasses`` itself from the same declarations the first time anyone asks for it.

This module imports only builtins.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from typing_extensions import dataclass_transform  # typing's own from Python 3.11

    _C = TypeVar("_C", bound=type)


__all__ = ["field", "frozen", "mutable", "replace"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:  # stable in signatures and generated docs
        return "MISSING"


_MISSING: Any = _Missing()


class _Field:
    __slots__ = ("annotation", "compare", "default", "factory", "name", "repr")

    def __init__(self, default: Any, factory: Any, compare: bool, repr: bool) -> None:
        self.default = default
        self.factory = factory
        self.compare = compare
        self.repr = repr
        self.name = ""
        self.annotation: object = None


def field(
    *,
    default: Any = _MISSING,
    default_factory: Callable[[], Any] = _MISSING,
    compare: bool = True,
    repr: bool = True,
) -> Any:
    """A field's default factory or options, as ``dataclasses.field``.

    :param default: the field's default value.
    :param default_factory: called with no argument to make each instance's default (for
        mutable values such as ``dict``).
    :param compare: whether ``==`` and ``hash`` use the field.
    :param repr: whether ``repr`` shows the field.
    """
    return _Field(default, default_factory, compare, repr)


def _is_classvar(annotation: object) -> bool:
    if isinstance(annotation, str):
        return annotation.replace("typing.", "").lstrip().startswith("ClassVar")
    return getattr(annotation, "__origin__", None) is getattr(
        sys.modules.get("typing"), "ClassVar", object()
    )


def _collect(cls: type) -> tuple[_Field, ...]:
    fields: dict[str, _Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for f in base.__dict__.get("__record_fields__", ()):
            fields[f.name] = f
    # the class's own annotations only (inspect.get_annotations would import inspect)
    own = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    for name, annotation in own.items():
        if _is_classvar(annotation):
            continue
        value = cls.__dict__.get(name, _MISSING)
        f = value if isinstance(value, _Field) else _Field(value, _MISSING, True, True)
        f.name, f.annotation = name, annotation
        if isinstance(value, _Field):
            if f.default is _MISSING:
                delattr(cls, name)  # a factory leaves no class attribute, as in dataclasses
            else:
                setattr(cls, name, f.default)
        fields.pop(name, None)
        fields[name] = f
    seen_default = False
    for f in fields.values():
        has = f.default is not _MISSING or f.factory is not _MISSING
        if seen_default and not has:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        seen_default = seen_default or has
    return tuple(fields.values())


# A class instantiated this often gets an __init__ compiled for its fields (what dataclasses
# does for every class up front): the shared one costs nothing to define, this one less to run.
_SPECIALISE_AFTER = 16


def _specialised_init(cls: type, fields: tuple[_Field, ...]) -> Any:
    ns: dict[str, Any] = {"_MISSING": _MISSING}
    params, body = [], []
    for i, f in enumerate(fields):
        if f.default is not _MISSING:
            ns[f"_d{i}"] = f.default
            params.append(f"{f.name}=_d{i}")
            body.append(f"    _d[{f.name!r}] = {f.name}")
        elif f.factory is not _MISSING:
            ns[f"_f{i}"] = f.factory
            params.append(f"{f.name}=_MISSING")
            body.append(f"    _d[{f.name!r}] = _f{i}() if {f.name} is _MISSING else {f.name}")
        else:
            params.append(f.name)
            body.append(f"    _d[{f.name!r}] = {f.name}")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    src = f"def __init__(self, {', '.join(params)}):\n    _d = self.__dict__\n" + "\n".join(
        body or ["    pass"]
    )
    exec(src, ns)  # the source is built from the class's own field names
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _frozen_error(name: str) -> Exception:
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(f"cannot assign to field {name!r}")


def _build(cls: _C, is_frozen: bool) -> _C:
    fields = _collect(cls)
    names = tuple(f.name for f in fields)
    n = len(names)
    defaults = {f.name: f.default for f in fields if f.default is not _MISSING}
    factories = {f.name: f.factory for f in fields if f.factory is not _MISSING}
    compared = tuple(f.name for f in fields if f.compare)
    shown = tuple(f.name for f in fields if f.repr)
    qualname = cls.__qualname__

    name_set = frozenset(names)
    required = tuple(f.name for f in fields if f.default is _MISSING and f.factory is _MISSING)
    factory_items = tuple(factories.items())

    # Values go straight into the instance dict (as dataclasses' own frozen __init__ does
    # with object.__setattr__), with dict.update doing the per-field work in C.
    calls = [0]

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        calls[0] += 1
        if calls[0] == _SPECIALISE_AFTER and cls.__dict__.get("__init__") is __init__:
            type.__setattr__(cls, "__init__", _specialised_init(cls, fields))
        given = len(args)
        if given > n:
            raise TypeError(f"{qualname}() takes {n} arguments but {given} were given")
        d = self.__dict__
        d.update(defaults)
        if given:
            d.update(zip(names, args, strict=False))  # fewer args than fields: the rest below
        if kwargs:
            if not name_set.issuperset(kwargs):
                name = next(k for k in kwargs if k not in name_set)
                raise TypeError(f"{qualname}() got an unexpected keyword argument {name!r}")
            if given and not kwargs.keys().isdisjoint(names[:given]):
                name = next(k for k in names[:given] if k in kwargs)
                raise TypeError(f"{qualname}() got multiple values for argument {name!r}")
            d.update(kwargs)
        for name, factory in factory_items:
            if name not in d:
                d[name] = factory()
        for name in required:
            if name not in d:
                raise TypeError(f"{qualname}() missing required argument: {name!r}")
        post = getattr(self, "__post_init__", None)
        if post is not None:
            post()

    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{k}={getattr(self, k)!r}" for k in shown)
        return f"{type(self).__qualname__}({inner})"

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in compared)

    ns: dict[str, Any] = {"__init__": __init__, "__repr__": __repr__, "__eq__": __eq__}
    if is_frozen:

        def __hash__(self: Any) -> int:
            return hash(tuple(getattr(self, k) for k in compared))

        def __setattr__(self: Any, name: str, value: Any) -> None:
            raise _frozen_error(name)

        def __delattr__(self: Any, name: str) -> None:
            raise _frozen_error(name)

        ns.update(__hash__=__hash__, __setattr__=__setattr__, __delattr__=__delattr__)
    else:
        ns["__hash__"] = None  # mutable and compared by value: unhashable, as a dataclass
    for key, fn in ns.items():
        if fn is not None:
            fn.__qualname__ = f"{qualname}.{key}"
        # like dataclasses: a method the class defines itself is kept
        if key not in cls.__dict__ or key in ("__hash__", "__setattr__", "__delattr__"):
            type.__setattr__(cls, key, fn)
    type.__setattr__(cls, "__record_fields__", fields)
    type.__setattr__(cls, "__record_frozen__", is_frozen)
    type.__setattr__(cls, "__match_args__", names)
    type.__setattr__(cls, "__dataclass_fields__", _DataclassFields())
    type.__setattr__(cls, "__signature__", _Signature())
    type.__setattr__(cls, "__doc__", _Doc(cls.__dict__.get("__doc__")))
    return cls


class _Factory:
    """How a signature shows a field made by a factory, as ``dataclasses`` does."""

    def __repr__(self) -> str:
        return "<factory>"


class _Signature:
    """``__signature__``: the fields as ``__init__``'s parameters, for ``inspect.signature``,
    ``help()`` and Jupyter (the shared ``__init__`` takes ``*args, **kwargs``). Built with
    ``inspect`` on first use, then cached on the class."""

    def __get__(self, obj: object, cls: type) -> Any:
        import inspect

        params = []
        for f in cls.__dict__["__record_fields__"]:
            if f.default is not _MISSING:
                default = f.default
            else:
                default = inspect.Parameter.empty if f.factory is _MISSING else _Factory()
            kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
            params.append(inspect.Parameter(f.name, kind, default=default, annotation=f.annotation))
        sig = inspect.Signature(params, return_annotation=None)
        type.__setattr__(cls, "__signature__", sig)
        return sig


class _Doc:
    """``__doc__``: the class's own docstring, then each field with its type and the string
    written under it in the source (``help()`` shows it); read from the source on first use."""

    def __init__(self, doc: str | None) -> None:
        self.doc = doc
        self.full: str | None = None

    def __get__(self, obj: object, cls: type) -> str | None:
        if self.full is None:
            self.full = _with_fields(self.doc, cls)
        return self.full


#: Where ``_Doc`` starts the fields it adds to a record's docstring.
FIELDS_HEADING = "\n\nFields:\n"


def _with_fields(doc: str | None, cls: type) -> str:
    import inspect

    notes: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if "__record_fields__" in klass.__dict__:
            notes.update(_field_notes(klass))
    lines = []
    for f in cls.__dict__["__record_fields__"]:
        ann = f.annotation if isinstance(f.annotation, str) else getattr(
            f.annotation, "__name__", repr(f.annotation)
        )  # fmt: skip
        note = " ".join(notes.get(f.name, "").split())
        lines.append(f"    {f.name}: {ann}" + (f"\n        {note}" if note else ""))
    own = inspect.cleandoc(doc) if doc else ""
    return own + FIELDS_HEADING + "\n".join(lines) if lines else own


def _field_notes(cls: type) -> dict[str, str]:
    """Field name -> the string literal right under its annotation in ``cls``'s source."""
    import ast
    import inspect
    from itertools import pairwise

    try:
        tree = ast.parse(inspect.cleandoc("\n" + inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):  # no source (a frozen app, the REPL)
        return {}
    body = next((n.body for n in tree.body if isinstance(n, ast.ClassDef)), [])
    out = {}
    for node, nxt in pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            out[node.target.id] = nxt.value.value
    return out


class _DataclassFields:
    """``__dataclass_fields__``, made by ``dataclasses`` itself on first use and cached."""

    def __get__(self, obj: object, cls: type) -> Any:
        import dataclasses

        ns: dict[str, Any] = {
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
            "__annotations__": {},
        }
        for f in cls.__dict__["__record_fields__"]:
            ns["__annotations__"][f.name] = f.annotation
            kw: dict[str, Any] = {"compare": f.compare, "repr": f.repr}
            if f.factory is not _MISSING:
                kw["default_factory"] = f.factory
            elif f.default is not _MISSING:
                kw["default"] = f.default
            ns[f.name] = dataclasses.field(**kw)
        shadow: Any = dataclasses.dataclass(frozen=cls.__dict__["__record_frozen__"])(
            type(cls.__name__, (), ns)
        )
        fields = shadow.__dataclass_fields__
        type.__setattr__(cls, "__dataclass_fields__", fields)
        type.__setattr__(cls, "__dataclass_params__", shadow.__dataclass_params__)
        return fields


if TYPE_CHECKING:

    @dataclass_transform(frozen_default=True, field_specifiers=(field,))
    def frozen(cls: _C) -> _C: ...

    @dataclass_transform(field_specifiers=(field,))
    def mutable(cls: _C) -> _C: ...

else:

    def frozen(cls):
        """Like ``@dataclass(frozen=True)``."""
        return _build(cls, True)

    def mutable(cls):
        """Like ``@dataclass``."""
        return _build(cls, False)


def replace(obj: _R, /, **changes: Any) -> _R:
    """A copy of a record (or a dataclass) with some fields changed.

    :param obj: the record to copy.
    :param changes: new values by field name.
    :raises TypeError: when a name in ``changes`` is not a field.
    """
    fields = type(obj).__dict__.get("__record_fields__")
    if fields is None:
        import dataclasses

        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    values = {f.name: getattr(obj, f.name) for f in fields}
    values.update(changes)
    return type(obj)(**values)


if TYPE_CHECKING:
    _R = TypeVar("_R")
