"""AWS Neuron (spec §3) and Google TPU (spec §4)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwbackends import Host, VisibilityError
from hwbackends.visibility import explain_visibility, visibility_env, visible_devices

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NEURON_GUIDE = (
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/guides/"
    "configuration-guide.html"
)
LNC_DOC = (
    "aws-neuron/aws-neuron-sdk about-neuron/arch/neuron-features/logical-neuroncore-config.rst"
)
TPU_GIST = "https://gist.github.com/skye/f82ba45d2445bb19d53545538754f9a3"

TRN1 = Host.from_dict({"devices": [{"vendor": "aws", "arch": "trainium"} for _ in range(4)]})
TRN2 = Host.from_dict({"devices": [{"vendor": "aws", "arch": "trainium2"} for _ in range(2)]})
INF2 = Host.from_dict({"devices": [{"vendor": "aws", "arch": "inferentia2", "cores": 2}]})


def neuron(host: Host, **env: str) -> list[int]:
    return visible_devices("neuron", env, host)


def test_neuron_single_index_and_inclusive_range() -> None:
    # spec §3: "a single NeuronCore index or an inclusive range value" (NEURON_GUIDE)
    assert neuron(TRN1) == list(range(8))
    assert neuron(TRN1, NEURON_RT_VISIBLE_CORES="3") == [3]
    assert neuron(TRN1, NEURON_RT_VISIBLE_CORES="1-3") == [1, 2, 3]


def test_neuron_comma_lists_are_inferred() -> None:
    # spec §3: comma lists since runtime 2.16.18 (aws-neuron/aws-neuron-sdk#1024, closed PR)
    report = explain_visibility("neuron", {"NEURON_RT_VISIBLE_CORES": "0-1,4,6-7"}, TRN1)
    assert report.physical == [0, 1, 4, 6, 7]
    assert report.uncertain


def test_neuron_units_name_their_device() -> None:
    report = explain_visibility("neuron", {"NEURON_RT_VISIBLE_CORES": "3"}, TRN1)
    (unit,) = report.units
    assert (unit.device_position, unit.sub_index, unit.label) == (1, 1, "nc3")


@pytest.mark.parametrize("value", ["x", "3-1", "0-8", "8", "-1", "1-", "0,,1", "1.5"])
def test_neuron_values_the_runtime_refuses(value: str) -> None:
    with pytest.raises(VisibilityError) as info:
        neuron(TRN1, NEURON_RT_VISIBLE_CORES=value)
    assert info.value.expected and info.value.fix


def test_neuron_lnc_default_2_on_trainium2() -> None:
    # spec §3 / LNC_DOC: "With LNC=2 (default), these are grouped into 4 Logical NeuronCores"
    assert neuron(TRN2) == list(range(8))
    assert neuron(TRN2, NEURON_LOGICAL_NC_CONFIG="1") == list(range(16))
    report = explain_visibility("neuron", {"NEURON_RT_VISIBLE_CORES": "4"}, TRN2)
    assert (report.units[0].device_position, report.units[0].sub_index) == (1, 0)
    with pytest.raises(VisibilityError):
        neuron(TRN2, NEURON_LOGICAL_NC_CONFIG="3")
    lnc_on_trn1 = explain_visibility("neuron", {"NEURON_LOGICAL_NC_CONFIG": "2"}, TRN1)
    assert lnc_on_trn1.physical == list(range(8)) and lnc_on_trn1.warnings


def test_neuron_num_cores() -> None:
    # spec §3: NEURON_RT_NUM_CORES reserves that many free cores (unspecified which);
    # NEURON_RT_VISIBLE_CORES takes precedence (NEURON_GUIDE)
    report = explain_visibility("neuron", {"NEURON_RT_NUM_CORES": "2"}, TRN1)
    assert report.physical == [0, 1] and report.uncertain
    assert neuron(TRN1, NEURON_RT_NUM_CORES="0") == list(range(8))
    assert neuron(TRN1, NEURON_RT_NUM_CORES="2", NEURON_RT_VISIBLE_CORES="5") == [5]
    with pytest.raises(VisibilityError):
        neuron(TRN1, NEURON_RT_NUM_CORES="9")


def test_neuron_unordered_and_repeated_lists_are_sets() -> None:
    report = explain_visibility("neuron", {"NEURON_RT_VISIBLE_CORES": "5,1-2,2"}, TRN1)
    assert report.physical == [1, 2, 5]
    assert report.uncertain and len(report.warnings) == 2


def test_neuron_writer() -> None:
    assert visibility_env("neuron", [0, 1, 2, 5], TRN1) == {"NEURON_RT_VISIBLE_CORES": "0-2,5"}
    assert visibility_env("neuron", [3], TRN2) == {
        "NEURON_RT_VISIBLE_CORES": "3",
        "NEURON_LOGICAL_NC_CONFIG": "2",
    }
    with pytest.raises(VisibilityError, match="ascending"):
        visibility_env("neuron", [2, 1], TRN1)
    with pytest.raises(VisibilityError):
        visibility_env("neuron", [], TRN1)
    assert visibility_env("neuron", [0, 1], INF2) == {"NEURON_RT_VISIBLE_CORES": "0-1"}


@FAST
@given(st.integers(0, 7), st.integers(0, 7))
def test_neuron_range_equals_its_list(a: int, b: int) -> None:
    lo, hi = min(a, b), max(a, b)
    as_list = ",".join(str(k) for k in range(lo, hi + 1))
    assert neuron(TRN1, NEURON_RT_VISIBLE_CORES=f"{lo}-{hi}") == neuron(
        TRN1, NEURON_RT_VISIBLE_CORES=as_list
    )


@FAST
@given(st.lists(st.integers(0, 7), unique=True, min_size=1).map(sorted))
def test_neuron_round_trip(selection: list[int]) -> None:
    for host in (TRN1, TRN2):
        assert neuron(host, **visibility_env("neuron", selection, host)) == selection


# -- TPU (spec §4, TPU_GIST) ---------------------------------------------------------------------

TPU4 = Host.from_dict({"devices": [{"vendor": "google"} for _ in range(4)]})


def tpu(**env: str) -> list[int]:
    return visible_devices("tpu", env, TPU4)


def test_tpu_visible_chips_and_bounds() -> None:
    # spec §4: 1 chip "1,1,1", 2 chips "1,2,1" (TPU_GIST)
    env = {
        "TPU_VISIBLE_CHIPS": "2,3",
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,2,1",
        "TPU_PROCESS_BOUNDS": "1,1,1",
    }
    report = explain_visibility("tpu", env, TPU4)
    assert report.physical == [2, 3]
    assert not report.warnings


def test_tpu_older_spellings() -> None:
    # spec §4: TPU_VISIBLE_DEVICES and TPU_CHIPS_PER_HOST_BOUNDS / TPU_HOST_BOUNDS (TPU_GIST)
    env = {
        "TPU_VISIBLE_DEVICES": "1",
        "TPU_CHIPS_PER_HOST_BOUNDS": "1,1,1",
        "TPU_HOST_BOUNDS": "1,1,1",
    }
    report = explain_visibility("tpu", env, TPU4)
    assert report.physical == [1] and not report.warnings
    both = explain_visibility("tpu", {"TPU_VISIBLE_CHIPS": "0", "TPU_VISIBLE_DEVICES": "1"}, TPU4)
    assert both.physical == [0] and both.uncertain


def test_tpu_bounds_mismatch_warns_and_malformed_raises() -> None:
    env = {"TPU_VISIBLE_CHIPS": "0,1,2", "TPU_CHIPS_PER_PROCESS_BOUNDS": "2,2,1"}
    report = explain_visibility("tpu", env, TPU4)
    assert report.physical == [0, 1, 2]
    assert any("describes 4 chip(s) but 3" in w for w in report.warnings)
    for bad in ("2,2", "0,1,1", "a,b,c", ""):
        with pytest.raises(VisibilityError):
            tpu(TPU_CHIPS_PER_PROCESS_BOUNDS=bad)
    with pytest.raises(VisibilityError):
        tpu(TPU_VISIBLE_CHIPS="4")
    with pytest.raises(VisibilityError):
        tpu(TPU_VISIBLE_CHIPS="0,x")


def test_tpu_subset_without_bounds_warns() -> None:
    report = explain_visibility("tpu", {"TPU_VISIBLE_CHIPS": "1"}, TPU4)
    assert any("TPU_CHIPS_PER_PROCESS_BOUNDS" in w for w in report.warnings)


def test_tpu_writer() -> None:
    assert visibility_env("tpu", [0, 1, 2, 3], TPU4) == {}
    assert visibility_env("tpu", [0, 1], TPU4) == {
        "TPU_VISIBLE_CHIPS": "0,1",
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,2,1",
        "TPU_PROCESS_BOUNDS": "1,1,1",
    }
    for bad in ([0, 1, 2], [], [1, 0]):
        with pytest.raises(VisibilityError):
            visibility_env("tpu", bad, TPU4)


@FAST
@given(st.permutations(range(4)), st.integers(1, 4))
def test_tpu_order_does_not_matter(perm: list[int], k: int) -> None:
    chips = perm[:k]
    assert tpu(TPU_VISIBLE_CHIPS=",".join(map(str, chips))) == sorted(chips)


def test_writer_counts_cores_at_the_lnc_they_were_read_under() -> None:
    # logical-neuroncore-config.rst: LNC=2 (Trn2 default) groups core pairs; LNC=1 exposes
    # every physical core, so index 100 exists only under LNC=1.
    from pathlib import Path

    from hwbackends import Host
    from hwbackends.visibility import explain_visibility, visibility_env

    hosts = Path(__file__).resolve().parents[2] / "plugins/hwbackends-neuron/tests/hosts"
    h = Host.from_file(hosts / "trn2_48xlarge.json")
    lnc1 = {"NEURON_LOGICAL_NC_CONFIG": "1"}
    out = visibility_env("neuron", [3, 100], h, lnc1)
    assert out == {"NEURON_RT_VISIBLE_CORES": "3,100", "NEURON_LOGICAL_NC_CONFIG": "1"}
    assert explain_visibility("neuron", out, h).physical == [3, 100]
    assert visibility_env("neuron", [3], h)["NEURON_LOGICAL_NC_CONFIG"] == "2"
