"""Ascend with descending ids: the sources disagree, so say so."""

from __future__ import annotations

from hwbackends import Host
from hwbackends.visibility import explain_visibility

NPU8 = Host.from_dict({"devices": [{"vendor": "huawei"} for _ in range(8)]})


def test_descending_ids_are_uncertain_and_cite_both_cann_versions() -> None:
    report = explain_visibility("npu", {"ASCEND_RT_VISIBLE_DEVICES": "3,1"}, NPU8)
    assert report.physical == [3]  # hwbackends' reading: the list ends at the descending id
    assert report.uncertain
    assert list(report.warnings) == [
        "ASCEND_RT_VISIBLE_DEVICES lists 1 after 3: CANN 8.5 documents only ascending ids as "
        "supported (envref_07_0028), while CANN 6.3's documentation shows a descending list "
        "kept in order; hwbackends takes the list to end here, which may not be what this "
        "runtime does. List ids in ascending order."
    ]
    ascending = explain_visibility("npu", {"ASCEND_RT_VISIBLE_DEVICES": "1,3"}, NPU8)
    assert ascending.physical == [1, 3] and not ascending.uncertain
