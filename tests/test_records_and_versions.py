"""The cheap building blocks of the selection path agree with the standard ones they replace:
records behave as frozen dataclasses, release-number ordering as packaging's PEP 440."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version

from hwbackends import Device, Host, Probe
from hwbackends._base.record import field, frozen, mutable, replace
from hwbackends._base.versions import _plain_order, version_in_range


@frozen
class Row:
    name: str
    size: int = 0
    tags: tuple[str, ...] = ()
    notes: Mapping[str, str] = field(default_factory=dict, compare=False)


@dataclasses.dataclass(frozen=True)
class RowDC:
    name: str
    size: int = 0
    tags: tuple[str, ...] = ()
    notes: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False)


names = st.text(max_size=5)
sizes = st.integers(-5, 5)
tags = st.lists(st.text(max_size=3), max_size=3).map(tuple)


@given(names, sizes, tags, names, sizes, tags)
def test_records_compare_hash_and_print_like_frozen_dataclasses(
    a: str, b: int, c: tuple[str, ...], d: str, e: int, f: tuple[str, ...]
) -> None:
    r1, r2 = Row(a, b, c), Row(d, size=e, tags=f, notes={"x": "y"})
    g1, g2 = RowDC(a, b, c), RowDC(d, size=e, tags=f, notes={"x": "y"})
    assert (r1 == r2) == (g1 == g2)
    if r1 == r2:
        assert hash(r1) == hash(r2)
    assert repr(r1).replace("Row(", "RowDC(") == repr(g1)
    assert dataclasses.astuple(r2) == dataclasses.astuple(g2)
    assert replace(r1, size=e) == Row(a, e, c) == dataclasses.replace(r1, size=e)


def test_records_are_frozen_dataclasses_to_the_standard_library() -> None:
    r = Row("a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.size = 3  # type: ignore[misc]
    assert dataclasses.is_dataclass(r)
    assert [f.name for f in dataclasses.fields(r)] == ["name", "size", "tags", "notes"]
    assert pickle.loads(pickle.dumps(Device("cpu", "cpu", 0, 0))) == Device("cpu", "cpu", 0, 0)
    with pytest.raises(TypeError, match=r"missing .*argument.*'name'"):
        Row()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="multiple values for argument 'name'"):
        Row("a", name="b")  # type: ignore[misc]
    with pytest.raises(TypeError, match="an unexpected keyword argument 'colour'"):
        Row("a", colour="red")  # type: ignore[call-arg]
    assert Probe("x", True, False, "r").evidence == ()


def test_a_busy_record_class_gets_a_compiled_init_that_behaves_the_same() -> None:
    @frozen
    class Pair:
        a: int
        b: tuple[int, ...] = ()
        c: list[int] = field(default_factory=list)

    shared = Pair.__init__
    made = [Pair(i, b=(i,)) for i in range(40)]
    assert Pair.__init__ is not shared  # specialised after a few instances
    assert made[39] == Pair(39, (39,)) and made[0].c is not made[1].c
    with pytest.raises(TypeError):
        Pair()  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        made[0].a = 1  # type: ignore[misc]


def test_mutable_records_are_unhashable_like_dataclasses() -> None:
    @mutable
    class Box:
        items: list[int] = field(default_factory=list)

    a, b = Box(), Box()
    a.items.append(1)
    assert b.items == [] and a != b
    with pytest.raises(TypeError):
        hash(a)


releases = st.lists(st.integers(0, 30), min_size=1, max_size=4).map(
    lambda xs: ".".join(map(str, xs))
)
locals_ = st.sampled_from(["", "+cpu", "+cu128", "+rocm6.4"])


@given(releases, locals_, releases, st.one_of(st.none(), releases))
def test_release_ordering_is_pep_440(v: str, local: str, low: str, high: str | None) -> None:
    version = v + local
    ours = _plain_order(version, low, high)
    want = Version(low) <= Version(version) and (high is None or Version(version) < Version(high))
    assert ours == want
    assert version_in_range(version, low, high) == want


@pytest.mark.parametrize("version", ["0.18.0rc1", "0.18.0.dev0", "2.8.0.post1", "1.0a1+cpu"])
def test_pre_dev_and_post_releases_go_to_packaging(version: str) -> None:
    assert _plain_order(version, "0.17.2", "0.18.0") is None
    want = Version("0.17.2") <= Version(version) < Version("0.18.0")
    assert version_in_range(version, "0.17.2", "0.18.0") == want


# -- release numbers and torch builds (what probes read from version strings) --------------------


@pytest.mark.parametrize(
    ("version", "numbers"),
    [("2.8.0+cu128", (2, 8, 0)), ("0.18.0rc1", (0, 18, 0)), ("12", (12,)),
     ("1.2.3.4", (1, 2, 3, 4)), ("570.133.20", (570, 133, 20)), ("2.0a1", (2, 0)), ("", ()),
     (None, ()), ("dev", ()), ("1..2", (1,)), ("v1.2", ())],
)  # fmt: skip
def test_release_numbers_stop_at_the_first_non_number(
    version: str | None, numbers: tuple[int, ...]
) -> None:
    """The leading release segment of PEP 440 (https://peps.python.org/pep-0440/#public-version-
    identifiers): numbers separated by dots, before a pre-, post-, dev- or local part."""
    from hwbackends._base.versions import release

    assert release(version) == numbers


def test_a_torch_build_without_a_known_wheel_index_is_an_error() -> None:
    from hwbackends._base.versions import torch_install_hint

    assert torch_install_hint("cpu") == (
        "pip install torch --index-url https://download.pytorch.org/whl/cpu"
    )  # the PyTorch install selector (https://pytorch.org/get-started/locally/)
    with pytest.raises(ValueError, match="no torch wheel index is known for 'tpu'"):
        torch_install_hint("tpu")


def test_why_a_torch_cannot_drive_a_device() -> None:
    from hwbackends._base.versions import describes_drivers, torch_build_problem

    cu128 = "pip install torch --index-url https://download.pytorch.org/whl/cu128"
    none = Host.from_dict({"devices": []})
    assert torch_build_problem(none, "cuda") == ("torch is not installed", cu128)
    cpu = Host.from_dict({"torch": {"version": "2.13.0+cpu"}, "devices": []})
    assert torch_build_problem(cpu, "cuda") == (
        "the installed torch 2.13.0+cpu is a cpu build, not a cuda build",
        f"{cu128} (replaces the cpu build)",
    )
    cuda = Host.from_dict({"torch": {"version": "2.8.0+cu128", "cuda": "12.8"}, "devices": []})
    assert torch_build_problem(cuda, "cuda") is None
    # a host file that lists neither drivers nor /dev nodes leaves them unknown
    assert describes_drivers(none) is False
    assert describes_drivers(Host.from_dict({"devices": [], "drivers": {"nvidia": "570.1"}}))
    assert describes_drivers(Host.from_dict({"devices": [], "device_nodes": ["nvidia0"]}))
    assert describes_drivers(Host.from_system("/nonexistent-root", path=[], backends=[]))


def test_trailing_zeros_do_not_change_a_version() -> None:
    """Bug: 2.8 and 2.8.0 compared as different versions. PEP 440, "Release segment": "1.0"
    and "1.0.0" are equal (https://peps.python.org/pep-0440/#release-segment)."""
    assert version_in_range("2.8", "2.8.0") is True
    assert version_in_range("2.8.0", "2.8") is True
    assert version_in_range("2.8.0.0", "2.8", "2.8.0.1") is True
    assert version_in_range("2.8", "2.7", "2.8.0") is False  # the high bound is excluded
    assert version_in_range("2.8.0+cu128", "2.8", "2.9.0") is True


release_parts = st.lists(st.integers(0, 30), min_size=1, max_size=4)


@given(release_parts, release_parts, st.integers(0, 3), st.integers(0, 3))
def test_padding_with_zeros_never_changes_an_answer(
    v: list[int], low: list[int], pad_v: int, pad_low: int
) -> None:
    """Trailing-zero variants of both sides, generated explicitly, agree with packaging."""
    from packaging.version import Version

    def text(parts: list[int], pad: int) -> str:
        return ".".join(map(str, [*parts, *[0] * pad]))

    version, bound = text(v, pad_v), text(low, pad_low)
    assert version_in_range(version, bound) is (Version(version) >= Version(bound))
    assert version_in_range(version, text(v, 0)) is True


def _record_classes() -> list[type]:
    import importlib
    import pkgutil

    import hwbackends

    found: dict[str, type] = {}
    for mod in pkgutil.walk_packages(hwbackends.__path__, "hwbackends."):
        if mod.name.endswith("__main__"):
            continue
        for obj in vars(importlib.import_module(mod.name)).values():
            if isinstance(obj, type) and "__record_fields__" in obj.__dict__:
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return list(found.values())


def test_every_record_shows_its_fields_to_help_and_inspect() -> None:
    import inspect
    import pydoc

    classes = _record_classes()
    assert len(classes) >= 29
    for cls in classes:
        names = [f.name for f in cls.__dict__["__record_fields__"]]
        sig = inspect.signature(cls)
        assert list(sig.parameters) == names, cls
        text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
        assert "*args" not in text.split("\n", 4)[3], cls  # the class line help() shows
        assert all(f"    {n}: " in text for n in names), cls
    from hwbackends._base.protocol import Device

    help_text = pydoc.render_doc(Device, renderer=pydoc.plaintext)
    assert "Logical index: what torch calls" in help_text  # the field's own docstring
    assert str(inspect.signature(Device)).startswith("(backend: 'str', device_type: 'str'")
