"""Intel GPU: ZE_AFFINITY_MASK, ZE_FLAT_DEVICE_HIERARCHY, ONEAPI_DEVICE_SELECTOR (spec §7)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwbackends import Host, VisibilityError
from hwbackends.visibility import (
    VisibilityReport,
    explain_visibility,
    visibility_env,
    visible_devices,
)

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
L0_SPEC = (
    "https://oneapi-src.github.io/level-zero-spec/level-zero/latest/core/PROG.html#affinity-mask"
)
INTEL_FLAT = (
    "https://www.intel.com/content/www/us/en/developer/articles/technical/"
    "flattening-gpu-tile-hierarchy.html"
)
SYCL_DOC = "intel/llvm sycl/doc/EnvironmentVariables.md"

# Two 4-tile cards (so that the spec's COMPOSITE examples 0.2, 1.3 exist), then a 1-tile card.
MAX = Host.from_dict(
    {
        "devices": [
            {"vendor": "intel", "pci_bus_id": "0000:3a:00.0", "name": "Max", "tiles": 4},
            {"vendor": "intel", "pci_bus_id": "0000:9a:00.0", "name": "Max", "tiles": 4},
            {"vendor": "intel", "pci_bus_id": "0000:ca:00.0", "name": "Flex"},
        ]
    }
)
PINNED = {"ZE_ENABLE_PCI_ID_DEVICE_ORDER": "1"}


def xpu(**env: str) -> VisibilityReport:
    return explain_visibility("xpu", {**PINNED, **env}, MAX)


def labels(**env: str) -> list[str]:
    return [u.label for u in explain_visibility("xpu", {**PINNED, **env}, MAX).units]


def test_composite_examples_from_the_spec() -> None:
    # spec §7.1 (L0_SPEC): 0 -> card 0 with all tiles; 0.0 -> tile 0 of card 0 as a root;
    # "1.1, 1.2" -> card 1 with tiles 1,2; "0.2, 1.3, 1.0, 0.3" -> card 0 {2,3}, card 1 {0,3}
    c = {"ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE"}
    assert labels(**c, ZE_AFFINITY_MASK="0") == ["0"]
    assert labels(**c, ZE_AFFINITY_MASK="0.0") == ["0.0"]
    assert labels(**c, ZE_AFFINITY_MASK="1.1, 1.2") == ["1.{1,2}"]
    assert labels(**c, ZE_AFFINITY_MASK="0.2, 1.3, 1.0, 0.3") == ["0.{2,3}", "1.{0,3}"]
    assert labels(**c) == ["0", "1", "2"]


def test_flat_numbers_tiles_across_cards() -> None:
    # spec §7.1: FLAT: root = tile; "1" = card 0 tile 1
    report = explain_visibility(
        "xpu", {**PINNED, "ZE_FLAT_DEVICE_HIERARCHY": "FLAT", "ZE_AFFINITY_MASK": "1,4,8"}, MAX
    )
    assert report.physical == [1, 4, 8]
    assert [(u.device_position, u.sub_index) for u in report.units] == [(0, 1), (1, 0), (2, 0)]
    assert not report.uncertain


def test_mask_never_reorders() -> None:
    # spec §7.1: "not affected by the order of devices in the affinity mask" (L0_SPEC)
    assert visible_devices("xpu", {**PINNED, "ZE_AFFINITY_MASK": "5,0,3"}, MAX) == [0, 3, 5]


def test_default_hierarchy_is_flat_with_a_warning_on_multi_tile_cards() -> None:
    # spec §7.1: spec table says COMPOSITE, Intel says FLAT (INTEL_FLAT): sources disagree
    report = explain_visibility("xpu", PINNED, MAX)
    assert report.physical == list(range(9))
    assert report.uncertain
    assert any("ZE_FLAT_DEVICE_HIERARCHY" in w for w in report.warnings)
    single = Host.from_dict({"devices": [{"vendor": "intel", "name": "Arc"}]})
    quiet = explain_visibility("xpu", {}, single)
    assert quiet.physical == [0] and not quiet.warnings


def test_invalid_mask_entries_are_ignored() -> None:
    # spec §7.1: invalid entries undocumented -> ignored, uncertain
    report = xpu(ZE_FLAT_DEVICE_HIERARCHY="FLAT", ZE_AFFINITY_MASK="x,2,99,0.1,3")
    assert report.physical == [2, 3]
    assert report.uncertain and len(report.warnings) == 3


def test_without_pci_order_several_cards_are_uncertain() -> None:
    report = explain_visibility("xpu", {"ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE"}, MAX)
    assert report.uncertain
    assert any("ZE_ENABLE_PCI_ID_DEVICE_ORDER=1" in w for w in report.warnings)


def test_selector_accept_and_discard() -> None:
    # spec §7.2 (SYCL_DOC): discards win; only-discard gets an implicit accept-all
    flat = {"ZE_FLAT_DEVICE_HIERARCHY": "FLAT"}
    assert xpu(**flat, ONEAPI_DEVICE_SELECTOR="level_zero:0,2").physical == [0, 2]
    assert xpu(**flat, ONEAPI_DEVICE_SELECTOR="level_zero:*;!level_zero:1").physical == [
        0, 2, 3, 4, 5, 6, 7, 8,
    ]  # fmt: skip
    assert xpu(**flat, ONEAPI_DEVICE_SELECTOR="!level_zero:0").physical == list(range(1, 9))
    assert xpu(**flat, ONEAPI_DEVICE_SELECTOR="*:gpu").physical == list(range(9))
    assert xpu(**flat, ONEAPI_DEVICE_SELECTOR="LEVEL_ZERO:1").physical == [1]


def test_selector_without_level_zero_yields_none() -> None:
    for sel in ("opencl:gpu", "opencl:*;cuda:0", "level_zero:cpu", "!*:gpu", "*:fpga"):
        assert xpu(ZE_FLAT_DEVICE_HIERARCHY="FLAT", ONEAPI_DEVICE_SELECTOR=sel).physical == []


def test_selector_indexes_devices_left_by_the_mask() -> None:
    report = xpu(
        ZE_FLAT_DEVICE_HIERARCHY="FLAT",
        ZE_AFFINITY_MASK="2,5,7",
        ONEAPI_DEVICE_SELECTOR="level_zero:1",
    )
    assert report.physical == [5]


def test_selector_sub_devices_in_composite() -> None:
    # spec §7.2: N.M exposes sub-devices as SYCL root devices
    report = xpu(ZE_FLAT_DEVICE_HIERARCHY="COMPOSITE", ONEAPI_DEVICE_SELECTOR="level_zero:1.*")
    assert [(u.physical_index, u.sub_index, u.label) for u in report.units] == [
        (1, 0, "1.0"), (1, 1, "1.1"), (1, 2, "1.2"), (1, 3, "1.3"),
    ]  # fmt: skip
    masked = xpu(
        ZE_FLAT_DEVICE_HIERARCHY="COMPOSITE",
        ZE_AFFINITY_MASK="0.2,0.3",
        ONEAPI_DEVICE_SELECTOR="level_zero:0.1",
    )
    assert [u.label for u in masked.units] == ["0.3"]
    # FLAT roots have no sub-devices
    assert (
        xpu(ZE_FLAT_DEVICE_HIERARCHY="FLAT", ONEAPI_DEVICE_SELECTOR="level_zero:*.*").physical == []
    )


@pytest.mark.parametrize(
    "selector",
    ["", "level_zero", "gpu", "level_zero:", "foo:0", "!opencl:0;level_zero:0", "level_zero:*.0",
     "level_zero:0.1.2.3", "level_zero:-1", "level_zero:0;;opencl:0"],
)  # fmt: skip
def test_malformed_selectors_raise(selector: str) -> None:
    # spec §7.2: the backend is mandatory, "An error will be thrown if it is absent"
    with pytest.raises(VisibilityError) as info:
        xpu(ONEAPI_DEVICE_SELECTOR=selector)
    assert "ONEAPI_DEVICE_SELECTOR" in str(info.value)


def test_writer_refuses_reordering_and_pins_flat() -> None:
    env = visibility_env("xpu", [1, 4], MAX)
    assert env == {
        "ZE_FLAT_DEVICE_HIERARCHY": "FLAT",
        "ZE_ENABLE_PCI_ID_DEVICE_ORDER": "1",
        "ZE_AFFINITY_MASK": "1,4",
    }
    with pytest.raises(VisibilityError, match="never reorders"):
        visibility_env("xpu", [4, 1], MAX)
    assert visible_devices("xpu", visibility_env("xpu", [], MAX), MAX) == []


@FAST
@given(
    st.lists(st.integers(0, 8), max_size=9).flatmap(
        lambda m: st.tuples(st.just(m), st.permutations(m))
    )
)
def test_level_zero_order_independence(case: tuple[list[int], list[int]]) -> None:
    # spec §10: f(permute(L)) == f(L)
    mask, shuffled = case
    for hierarchy in ("FLAT", "COMPOSITE", "COMBINED"):
        a = xpu(ZE_FLAT_DEVICE_HIERARCHY=hierarchy, ZE_AFFINITY_MASK=",".join(map(str, mask)))
        b = xpu(ZE_FLAT_DEVICE_HIERARCHY=hierarchy, ZE_AFFINITY_MASK=",".join(map(str, shuffled)))
        assert a.units == b.units


@FAST
@given(
    st.lists(
        st.sampled_from(["0", "1", "2", "0.1", "1.*", "*", "gpu", "2.0"]), min_size=1, max_size=5
    )
)
def test_selector_device_order_does_not_matter(devices: list[str]) -> None:
    a = xpu(
        ZE_FLAT_DEVICE_HIERARCHY="COMPOSITE",
        ONEAPI_DEVICE_SELECTOR="level_zero:" + ",".join(devices),
    )
    b = xpu(
        ZE_FLAT_DEVICE_HIERARCHY="COMPOSITE",
        ONEAPI_DEVICE_SELECTOR="level_zero:" + ",".join(reversed(devices)),
    )
    assert a.units == b.units
    keys = [(u.physical_index, u.sub_index) for u in a.units]
    assert keys == sorted(keys, key=lambda k: (k[0], -1 if k[1] is None else k[1]))


def test_an_intel_card_with_no_tiles_is_refused() -> None:
    host = Host.from_dict({"devices": [{"vendor": "intel", "tiles": 0}]})
    with pytest.raises(VisibilityError, match="intel device 0 has tiles=0"):
        explain_visibility("xpu", {}, host)


@pytest.mark.parametrize("value", ["0", "00", "+0", " 0", "", "1x", "off"])
def test_pci_order_off_keeps_the_card_order_uncertain(value: str) -> None:
    # Level Zero sorts cards by PCI id only for a nonzero number: 0 (or no number) is the
    # driver's own order, which must stay uncertain with the warning (a planted "0 reads as
    # on" survived the whole suite)
    report = explain_visibility(
        "xpu",
        {"ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE", "ZE_ENABLE_PCI_ID_DEVICE_ORDER": value},
        MAX,
    )
    assert report.uncertain
    assert any("ZE_ENABLE_PCI_ID_DEVICE_ORDER=1" in w for w in report.warnings)
    assert "Cards are enumerated by ascending PCI bus id." not in [str(s) for s in report.steps]


@pytest.mark.parametrize("value", ["1", " 1", "+2"])
def test_pci_order_on_pins_the_card_order(value: str) -> None:
    report = explain_visibility(
        "xpu",
        {"ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE", "ZE_ENABLE_PCI_ID_DEVICE_ORDER": value},
        MAX,
    )
    assert not report.uncertain and not report.warnings
    assert "Cards are enumerated by ascending PCI bus id." in [str(s) for s in report.steps]
