"""The API reference is complete: every public name,
parameter, field, attribute and method has a docstring, and the generated reference shows each
of them with its meaning; Literal aliases are types, long tables are tables."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import api_doc  # noqa: E402

PAGE = (ROOT / "docs" / "generated" / "api.md").read_text(encoding="utf-8")


def section(qualname: str) -> str:
    head = f"\n### `{qualname}`\n"
    assert head in PAGE, f"no section for {qualname}"
    return PAGE.split(head, 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]


def rows(text: str) -> dict[str, list[str]]:
    """First cell -> the other cells of each table row in ``text``."""
    out = {}
    for line in text.splitlines():
        if line.startswith(("| `", "| [`")):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            out[cells[0]] = cells[1:]
    return out


def parameters(text: str) -> dict[str, str]:
    """Parameter name -> its meaning, from the **Parameters:** list of a section."""
    found = re.findall(r"^- `([*\w]+)` \([^\n]*?\): (.*)$", text, re.M)
    return dict(found)


def test_every_public_name_parameter_field_and_method_has_a_docstring() -> None:
    gaps = api_doc.missing()
    assert gaps == [], f"{len(gaps)} undocumented (python scripts/api_doc.py lists them)"


def test_every_public_name_has_an_entry_and_a_section() -> None:
    for m in api_doc.members():
        table = PAGE.split(f"\n## `{m.module}`\n", 1)[1].split("\n## ", 1)[0]
        assert f"[`{m.name}`](#{api_doc.slug(m.first)})" in table, m.qualname
        section(m.first)


def test_every_field_attribute_and_parameter_is_shown_with_its_meaning() -> None:
    for m in api_doc.members():
        if m.first != m.qualname:
            continue
        shown = rows(section(m.qualname))
        if m.kind == "class":
            for name, _type, _default in api_doc.record_fields(m.obj):
                assert shown.get(f"`{name}`", ["", "", "–"])[2] != "–", f"{m.qualname}.{name}"
            for name, _func, _how in api_doc.public_methods(m.obj):
                key = next(k for k in shown if k.startswith((f"`{name}(", f"`{name}`")))
                assert shown[key][0] != "–", f"{m.qualname}.{name}"
        elif m.kind == "function":
            params = parameters(section(m.qualname))
            for p in api_doc.parameters(m.obj):
                stars = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
                assert params.get(f"{stars}{p.name}", "–") != "–", f"{m.qualname}({p.name})"


def test_the_answers_users_act_on_are_described() -> None:
    # the fields and parameters the issue names
    for qualname, name in [
        ("hwbackends.SelectionReport", "rule"),
        ("hwbackends.SelectionReport", "devices"),
        ("hwbackends.SelectionReport", "warnings"),
        ("hwbackends.SelectionReport", "hidden"),
        ("hwbackends.transformers.PretrainedPlan", "reasons"),
        ("hwbackends.distributed.LaunchPlan", "torchrun"),
        ("hwbackends.distributed.LaunchPlan", "sbatch"),
        ("hwbackends.distributed.LaunchPlan", "warnings"),
        ("hwbackends.transformers.pretrained_kwargs", "device"),
        ("hwbackends.transformers.pretrained_kwargs", "dtype"),
        ("hwbackends.transformers.pretrained_kwargs", "kernels"),
        ("hwbackends.transformers.pretrained_kwargs", "quantization"),
    ]:
        text = section(qualname)
        meaning = rows(text).get(f"`{name}`", [parameters(text).get(name, "")])[-1]
        assert len(meaning.split()) >= 4, (qualname, name, meaning)


def test_literal_aliases_are_types_not_functions() -> None:
    table = rows(PAGE.split("\n## `hwbackends.facts`\n", 1)[1].split("\n## ", 1)[0])
    for alias in ("Precision", "SupportLevel"):
        link = f"[`{alias}`](#{api_doc.slug('hwbackends.facts.' + alias)})"
        assert table[link][0] == "type"
        assert f"{alias} = Literal[" in section(f"hwbackends.facts.{alias}")


def test_long_tables_are_tables() -> None:
    from hwbackends.facts import QUANT_METHODS

    # no table is a data dump squeezed into one row (QUANT_METHODS was 6,157 characters)
    assert max(len(line) for line in PAGE.splitlines() if line.startswith("|")) < 1000
    shown = rows(section("hwbackends.facts.QUANT_METHODS"))
    assert all(f"`{k}`" in shown for k in QUANT_METHODS)


def test_records_show_their_constructor_not_a_generic_one() -> None:
    from hwbackends.transformers import PretrainedPlan

    shown = section("hwbackends.transformers.PretrainedPlan")
    assert "(*args, **kwargs)" not in shown
    names = ", ".join(f.name for f in dataclasses.fields(PretrainedPlan))
    assert f"PretrainedPlan({names.split(',')[0]}" in shown


@pytest.mark.parametrize(
    ("text", "summary", "params", "returns"),
    [
        ("One line.", "One line.", {}, ""),
        (
            "Sum.\n\nMore words.\n\n:param a: the first\n    continued\n:param b: two\n"
            ":returns: a number\n:raises ValueError: when bad",
            "Sum.",
            {"a": "the first continued", "b": "two"},
            "a number",
        ),
        (":param int x: typed", "", {"x": "typed"}, ""),
    ],
)
def test_docstring_parser(text: str, summary: str, params: dict[str, str], returns: str) -> None:
    doc = api_doc.parse(text)
    assert (doc.summary, dict(doc.params), doc.returns) == (summary, params, returns)


def test_the_readme_says_how_to_build_the_docs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "python scripts/gen_docs.py" in readme and "mkdocs build" in readme
