"""Intel Gaudi (spec §5) and Huawei Ascend (spec §6)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwbackends import Host, VisibilityError
from hwbackends.visibility import explain_visibility, visibility_env, visible_devices

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HABANA_DOC = (
    "https://docs.habana.ai/en/latest/Orchestration/Multiple_Tenants_on_HPU/"
    "Multiple_Workloads_Single_Docker.html"
)
CANN_DOC = (
    "https://www.hiascend.com/document/detail/en/canncommercial/850/maintenref/envvar/"
    "envref_07_0028.html"
)

GAUDI = Host.from_dict(
    {"devices": [{"vendor": "habana", "module_id": m} for m in (2, 3, 0, 1, 6, 7, 4, 5)]}
)


def hpu(**env: str) -> list[int]:
    return visible_devices("hpu", env, GAUDI)


def test_habana_modules_map_through_module_ids() -> None:
    # spec §5: HABANA_VISIBLE_MODULES is a list of module IDs (HABANA_DOC)
    assert hpu() == list(range(8))
    assert hpu(HABANA_VISIBLE_MODULES="0,1") == [2, 3]
    report = explain_visibility("hpu", {"HABANA_VISIBLE_MODULES": "4,5"}, GAUDI)
    assert [u.label for u in report.units] == ["4", "5"]


def test_habana_module_id_defaults_to_position() -> None:
    host = Host.from_dict({"devices": [{"vendor": "habana"} for _ in range(4)]})
    assert visible_devices("hpu", {"HABANA_VISIBLE_MODULES": "3,1"}, host) == [3, 1]


def test_habana_invalid_and_repeated_entries() -> None:
    # spec §5: unique values documented; invalid ids undocumented (list ends, uncertain)
    report = explain_visibility("hpu", {"HABANA_VISIBLE_MODULES": "0,0,1,9,2"}, GAUDI)
    assert report.physical == [2, 3]
    assert report.uncertain and len(report.warnings) == 2


def test_habana_repeated_module_ids_in_host_are_an_error() -> None:
    host = Host.from_dict({"devices": [{"vendor": "habana", "module_id": 1}] * 2})
    with pytest.raises(VisibilityError, match="module"):
        visible_devices("hpu", {}, host)


def test_habana_container_variable_is_not_applied() -> None:
    report = explain_visibility("hpu", {"HABANA_VISIBLE_DEVICES": "0"}, GAUDI)
    assert report.physical == list(range(8))
    assert report.variables["HABANA_VISIBLE_DEVICES"] == "0"


@FAST
@given(st.lists(st.integers(0, 7), unique=True, min_size=1))
def test_habana_round_trip(selection: list[int]) -> None:
    env = visibility_env("hpu", selection, GAUDI)
    assert hpu(**env) == selection


# -- Ascend (spec §6, CANN_DOC) --------------------------------------------------------------------

NPU8 = Host.from_dict({"devices": [{"vendor": "huawei"} for _ in range(8)]})


def npu(value: str | None) -> list[int]:
    env = {} if value is None else {"ASCEND_RT_VISIBLE_DEVICES": value}
    return visible_devices("npu", env, NPU8)


def test_ascend_documented_examples() -> None:
    # spec §6: "1, 2,3" -> [1]; "1,3,8" on 8 devices -> [1,3]; re-indexed from 0 (CANN_DOC)
    assert npu(None) == list(range(8))
    assert npu("1,2,3") == [1, 2, 3]
    assert npu("1, 2,3") == [1]
    assert npu("1,3,8") == [1, 3]


def test_ascend_descending_entry_ends_the_list() -> None:
    # spec §6: "Only ascending device IDs are supported"; descending undocumented
    report = explain_visibility("npu", {"ASCEND_RT_VISIBLE_DEVICES": "1,4,2,5"}, NPU8)
    assert report.physical == [1, 4]
    assert report.uncertain
    assert npu("3,3") == [3]


def test_ascend_other_characters() -> None:
    report = explain_visibility("npu", {"ASCEND_RT_VISIBLE_DEVICES": "1,2a,3"}, NPU8)
    assert report.physical == [1, 2] and report.uncertain
    assert npu(",1") == []
    assert npu("1,,2") == [1]
    assert npu("0,1,") == [0, 1]


def test_ascend_writer_refuses_descending() -> None:
    assert visibility_env("npu", [0, 3], NPU8) == {"ASCEND_RT_VISIBLE_DEVICES": "0,3"}
    with pytest.raises(VisibilityError, match="ascending"):
        visibility_env("npu", [3, 0], NPU8)
    with pytest.raises(VisibilityError):
        visibility_env("npu", [], NPU8)


@FAST
@given(
    st.lists(st.integers(0, 7), unique=True, min_size=1).map(sorted),
    st.sampled_from([" ", "x", "-", ";", "\t", "8", "99"]),
    st.text(max_size=6),
)
def test_ascend_truncation_law(ids: list[int], bad: str, tail: str) -> None:
    head = ",".join(map(str, ids))
    assert npu(f"{head},{bad}{tail}") == ids
