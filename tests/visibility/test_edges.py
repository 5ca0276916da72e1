"""Visibility edges that mutation testing found untested (scripts/mutation.py): identical-GPU
ordering, MIG instance ids too long to be ids, trailing text after a device number, empty HIP
variables, and Intel cards declared with no tiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwbackends import Host, VisibilityError
from hwbackends.visibility import explain_visibility

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
H100 = Host.from_file(PLUGINS / "hwbackends-cuda/tests/hosts/h100-sxm-8.json")
MIG = Host.from_file(PLUGINS / "hwbackends-cuda/tests/hosts/a100-mig.json")
MI300 = Host.from_file(PLUGINS / "hwbackends-rocm/tests/hosts/mi300x-8.json")
GPU0 = "GPU-5a88edbe-1c3a-4d5e-8f90-0a1b2c3d4e5f"  # the MIG-enabled GPU of a100-mig.json


def test_identical_gpus_in_fastest_first_order_are_in_pci_order() -> None:
    rep = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "1"}, H100)
    assert any(s.startswith("FASTEST_FIRST with identical GPUs: assumed equal to PCI bus order")
               for s in rep.steps), rep.steps  # fmt: skip
    one = Host.from_dict({**H100.to_dict(), "devices": H100.to_dict()["devices"][:1]})
    alone = explain_visibility("cuda", {}, one)
    assert not any("identical GPUs" in s for s in alone.steps)  # one GPU: nothing to order


@pytest.mark.parametrize(
    ("ids", "reason"),
    [("1/0", "is MIG instance"), ("123456789/0", "names no MIG instance gi=123456789 ci=0"),
     ("1234567890/0", "names no MIG instance"), ("1/1234567890", "names no MIG instance")],
)  # fmt: skip
def test_mig_instance_ids_of_ten_digits_name_nothing(ids: str, reason: str) -> None:
    rep = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": f"MIG-{GPU0}/{ids}"}, MIG)
    text = " ".join(rep.steps)
    assert reason in text, rep.steps
    if ids.startswith("1234567890") or ids.endswith("1234567890"):
        assert "gi=" not in text  # refused before it is read as a number


def test_text_after_a_device_number_is_noted() -> None:
    """strtoul reads "1abc" as 1 and stops at "abc" (C11 7.22.1.4); "1" alone has no note."""
    noted = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "1abc"}, H100)
    assert any("(strtoul stops at 'abc')" in s for s in noted.steps), noted.steps
    assert noted.physical == [1]
    plain = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "1"}, H100)
    assert not any("strtoul stops" in s for s in plain.steps)


def test_hip_reads_hip_visible_devices_first_and_empty_means_unset() -> None:
    """ROCm: HIP_VISIBLE_DEVICES wins over CUDA_VISIBLE_DEVICES; an empty one is unset to HIP
    (it shows every GPU) and is worth a warning."""
    rep = explain_visibility("rocm", {"HIP_VISIBLE_DEVICES": "2", "CUDA_VISIBLE_DEVICES": "5"},
                             MI300)  # fmt: skip
    assert rep.physical == [2]
    empty_hip = explain_visibility("rocm", {"HIP_VISIBLE_DEVICES": ""}, MI300)
    assert empty_hip.physical == list(range(8))
    assert any(w.startswith("HIP_VISIBLE_DEVICES is set but empty") for w in empty_hip.warnings)
    empty_cvd = explain_visibility("rocm", {"CUDA_VISIBLE_DEVICES": ""}, MI300)
    assert any(w.startswith("CUDA_VISIBLE_DEVICES is set but empty") for w in empty_cvd.warnings)
    set_hip = explain_visibility("rocm", {"HIP_VISIBLE_DEVICES": "1"}, MI300)
    assert not any("is set but empty" in w for w in set_hip.warnings)


def test_an_intel_card_with_no_tiles_is_refused() -> None:
    host = Host.from_dict({"devices": [{"vendor": "intel", "tiles": 0}]})
    with pytest.raises(VisibilityError, match="intel device 0 has tiles=0"):
        explain_visibility("xpu", {}, host)
