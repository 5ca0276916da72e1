"""The list kinds a vendor composes: ``IndexList`` and ``IndexOrUuidList`` with their policies.

Each policy is pinned by an example, and properties hold for every policy: reading never
raises except where the policy is ``refuse``, never names a device twice or one the host
lacks, never drops an entry without a warning, and whatever the writer writes reads back.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwbackends import Host, VisibilityError
from hwbackends.visibility import (
    IndexList,
    IndexOrUuidList,
    explain_visibility,
    visibility_env,
)

UUIDS = ["ZT-a1b2c3", "ZT-a1f000", "ZT-77e0aa"]
HOST = Host.from_dict({"devices": [{"vendor": "zeta", "uuid": u} for u in UUIDS]})
BARE = Host.from_dict({"devices": [{"vendor": "zeta", "uuid": u[3:]} for u in UUIDS]})
NO_UUID = Host.from_dict({"devices": [{"vendor": "zeta"} for _ in UUIDS]})
VAR = "ZETA_VISIBLE_DEVICES"


def read(rule: IndexList, value: str | None, host: Host = HOST) -> tuple[list[int], list[str]]:
    env = {} if value is None else {VAR: value}
    rep = explain_visibility(rule, env, host)
    return rep.physical, list(rep.warnings)


@pytest.mark.parametrize(
    ("policy", "value", "physical"),
    [
        ("truncate", "1,7,0", [1]),
        ("ignore", "1,7,0", [1, 0]),
        ("ignore", "x,2", [2]),
    ],
)
def test_unknown_entry_policy(policy: str, value: str, physical: list[int]) -> None:
    got, warnings = read(IndexList(VAR, unknown=policy), value)
    assert got == physical
    assert any(f"declared unknown={policy!r}" in w for w in warnings), warnings


def test_unknown_entry_refused() -> None:
    with pytest.raises(VisibilityError, match=r"ZETA_VISIBLE_DEVICES entry 1 '7' is out of range"):
        read(IndexList(VAR, unknown="refuse"), "1,7")


@pytest.mark.parametrize(
    ("policy", "physical"),
    [("empty", []), ("truncate", [1, 0]), ("ignore", [1, 0, 2])],
)
def test_repeated_entry_policy_always_warns(policy: str, physical: list[int]) -> None:
    got, warnings = read(IndexList(VAR, repeated=policy), "1,0,1,2")
    assert got == physical
    assert any("repeats device 1" in w and repr(policy) in w for w in warnings), warnings


def test_repeated_entry_refused() -> None:
    with pytest.raises(VisibilityError, match="repeats device 1"):
        read(IndexList(VAR, repeated="refuse"), "1,1")


def test_empty_and_minus_one() -> None:
    assert read(IndexList(VAR), "") == ([], [])
    assert read(IndexList(VAR, empty="all"), "")[0] == [0, 1, 2]
    assert read(IndexList(VAR), "-1") == ([], [])  # the common "hide all" idiom: no warning
    assert read(IndexList(VAR, minus_one="none", unknown="ignore"), "-1,2")[0] == []
    assert read(IndexList(VAR, unknown="ignore"), "-1,2")[0] == [2]
    # the writer's "none": "" where documented, else -1 where declared, else refused
    assert IndexList(VAR).write([], HOST) == {VAR: ""}
    assert IndexList(VAR, empty="all", minus_one="none").write([], HOST) == {VAR: "-1"}
    with pytest.raises(VisibilityError, match="no documented value that selects no device"):
        IndexList(VAR, empty_means_none=False).write([], HOST)


def test_numbers_strtoul_or_strict() -> None:
    assert read(IndexList(VAR), " 1gpu,+2")[0] == [1, 2]
    got, warnings = read(IndexList(VAR, numbers="strict"), " 1 ,2x")
    assert got == [1] and any("'2x' is not a number" in w for w in warnings)


def test_uuid_entries_full_prefix_and_ambiguous() -> None:
    rule = IndexOrUuidList(VAR, "ZT-")
    assert read(rule, "ZT-77e0aa,0")[0] == [2, 0]
    assert read(rule, "ZT-77,ZT-a1b")[0] == [2, 0]  # unique prefixes
    got, warnings = read(rule, "2,ZT-a1,0")  # ZT-a1 is a prefix of two UUIDs
    assert got == [2]
    assert any("ambiguous" in w for w in warnings)
    assert read(IndexOrUuidList(VAR, "ZT-", prefix_match=False), "ZT-77,1")[0] == []
    # a host that records UUIDs without the prefix matches the same entries
    assert read(rule, "ZT-77e0aa", BARE)[0] == [2]
    got, warnings = read(rule, "ZT-77e0aa", NO_UUID)
    assert got == [] and any("has no device UUIDs" in w for w in warnings)


def test_uuid_labels_and_writer() -> None:
    rep = explain_visibility(IndexOrUuidList(VAR, "ZT-"), {VAR: "2"}, BARE)
    assert [u.label for u in rep.units] == ["ZT-77e0aa"]
    assert visibility_env(IndexOrUuidList(VAR, "ZT-"), [2, 0], HOST) == {VAR: "2,0"}
    as_uuid = IndexOrUuidList(VAR, "ZT-", write_as="uuid")
    assert visibility_env(as_uuid, [2, 0], BARE) == {VAR: "ZT-77e0aa,ZT-a1b2c3"}
    with pytest.raises(VisibilityError, match="device 1 has no UUID"):
        as_uuid.write([1], NO_UUID)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"unknown": "skip"}, "unknown='skip') is not a known policy"),
        ({"repeated": "drop"}, "repeated='drop') is not a known policy"),
    ],
)
def test_a_policy_typo_is_refused(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(VisibilityError, match=message.replace("(", r"\(").replace(")", r"\)")):
        IndexList(VAR, **kwargs)


@pytest.mark.parametrize("prefix", ["", "1-", "A,B", "-x"])
def test_a_bad_uuid_prefix_is_refused(prefix: str) -> None:
    with pytest.raises(VisibilityError, match="needs a UUID prefix"):
        IndexOrUuidList(VAR, prefix)


_rules = st.builds(
    lambda uuid, **kw: IndexOrUuidList(VAR, "ZT-", **kw) if uuid else IndexList(VAR, **kw),
    uuid=st.booleans(),
    unknown=st.sampled_from(["truncate", "ignore", "refuse"]),
    repeated=st.sampled_from(["empty", "truncate", "ignore", "refuse"]),
    empty=st.sampled_from(["none", "all"]),
    minus_one=st.sampled_from(["unknown", "none"]),
    numbers=st.sampled_from(["strtoul", "strict"]),
)
_tokens = st.one_of(
    st.sampled_from(["0", "1", "2", "3", "-1", " 1", "1x", "", "ZT-a1", "ZT-77", "ZT-", "+2"]),
    st.text(max_size=6),
)


@given(rule=_rules, tokens=st.lists(_tokens, max_size=6))
def test_reading_is_total_and_never_drops_silently(rule: IndexList, tokens: list[str]) -> None:
    value = ",".join(tokens)
    try:
        physical, warnings = read(rule, value)
    except VisibilityError:
        assert "refuse" in (rule.unknown, rule.repeated)
        return
    assert len(set(physical)) == len(physical)
    assert all(0 <= p < len(UUIDS) for p in physical)
    # an entry was dropped (fewer devices than entries) only with a warning or by a documented
    # "none" value ("" or a leading -1)
    documented_none = value == "" or value.split(",")[0].strip(" \t\n\v\f\r") == "-1"
    if value and len(physical) < len(tokens) and not documented_none:
        assert warnings


@given(rule=_rules, selection=st.permutations([0, 1, 2]), size=st.integers(0, 3))
def test_what_is_written_reads_back(rule: IndexList, selection: list[int], size: int) -> None:
    chosen = selection[:size]
    try:
        out = visibility_env(rule, chosen, HOST)
    except VisibilityError as exc:
        assert not chosen and "no documented value" in str(exc)
        return
    assert out.keys() == {VAR}
