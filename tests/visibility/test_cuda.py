"""CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER (spec §1, §12)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from coretest import clean_env, run_python
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwbackends import Host, VisibilityError
from hwbackends.visibility import explain_visibility, visibility_env, visible_devices

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GUIDE = (
    "https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html"
)
MIG_GUIDE = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/mig-device-names.html"


def gpus(n: int, **host: Any) -> Host:
    devices = [
        {
            "vendor": "nvidia",
            "uuid": f"GPU-{i}{i}{i}{i}5a88-0000-0000",
            "pci_bus_id": f"0000:{i + 1:02x}:00.0",
            "name": "NVIDIA A100",
            "arch": "sm_80",
        }
        for i in range(n)
    ]
    return Host.from_dict({"devices": devices, **host})


HOST4 = gpus(4)
HOST8 = gpus(8)


def cvd(value: str | None, host: Host = HOST4, **extra: str) -> list[int]:
    env = dict(extra)
    if value is not None:
        env["CUDA_VISIBLE_DEVICES"] = value
    return visible_devices("cuda", env, host)


# -- documented rules (spec §1.1, GUIDE) ------------------------------------------------------


def test_unset_means_all_and_empty_means_none() -> None:
    # spec §1.1 rule 1: "If the variable is not set, all GPU devices are visible. If ... set to
    # an empty string, no GPU devices are visible." (GUIDE)
    assert cvd(None) == [0, 1, 2, 3]
    assert cvd("") == []


def test_list_order_is_kept() -> None:
    # spec §1.1: "CUDA_VISIBLE_DEVICES=2,1 ... enumerates device 2 before device 1" (GUIDE)
    assert cvd("2,1") == [2, 1]


def test_invalid_index_truncates() -> None:
    # spec §1.1 rule 2: "0,2,-1,1 makes devices 0 and 2 visible" (GUIDE)
    assert cvd("0,2,-1,1") == [0, 2]


def test_out_of_range_truncates() -> None:
    # spec §1.1 rule 2 (inferred, consistent with pytorch/pytorch#92315)
    assert cvd("1,7,0") == [1]


def test_duplicate_after_invalid_is_irrelevant() -> None:
    # spec §1.1 rule 5: "0,1,2,3,-1,0,6,7 -> 4 devices" (ptrblck, pytorch/pytorch#92315)
    assert cvd("0,1,2,3,-1,0,6,7", HOST8) == [0, 1, 2, 3]


def test_duplicates_empty_the_list_with_a_warning() -> None:
    # spec §1.1 rule 5: PyTorch "Repeated ordinal results in empty set" (torch/cuda/__init__.py)
    report = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "0,1,0"}, HOST4)
    assert report.physical == []
    assert report.uncertain
    assert any("repeats" in w for w in report.warnings)


def test_strtoul_like_integers() -> None:
    # spec §1.1 rules 6-7: "1gpu2,2ampere" == "1,2"; "0-2" reads as 0; leading blanks skipped
    # (PyTorch comment "CUDA_VISIBLE_DEVICES uses something like strtoul", torch/cuda/__init__.py)
    assert cvd("1gpu2,2ampere") == [1, 2]
    assert cvd("0-2") == [0]
    assert cvd(" 1,\t2") == [1, 2]
    assert cvd("1 2") == [1]
    assert cvd("+1") == [1]
    assert cvd("0x1") == [0]
    report = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "+1"}, HOST4)
    assert report.uncertain  # the '+' rule is inferred


def test_uuid_unique_prefixes() -> None:
    # spec §1.1 rule 8: prefixes of different lengths incl. a trailing '-' (pytorch/pytorch#92315)
    host = Host.from_dict(
        {
            "devices": [
                {"vendor": "nvidia", "uuid": u}
                for u in ("GPU-5a88edbe-1", "GPU-7d1a2244-2", "GPU-121d0000-3", "GPU-1220000-4")
            ]
        }
    )
    assert cvd("GPU-5a88edbe,GPU-7d1a2244-,GPU-121d", host) == [0, 1, 2]
    # "GPU-12" is a prefix of two UUIDs: ambiguous, the list ends (spec §1.1 rule 2, inferred)
    assert cvd("GPU-7d,GPU-12,GPU-5a", host) == [1]
    # NVML prints lower case; upper case does not match (spec §1.1 rule 8, undocumented)
    report = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "GPU-5A88"}, host)
    assert report.physical == []
    assert report.uncertain and report.warnings


def test_uuid_and_integer_select_the_same_gpu() -> None:
    # spec §1.1 rule 4: UUIDs identify a GPU independently of ordering
    host = gpus(3, cuda_fastest_first=[2, 0, 1])
    assert cvd("GPU-2222", host) == [2]
    assert cvd("0", host) == [2]  # integer 0 is the fastest GPU (spec §1.1 rule 3)


def test_uuid_lists_with_blanks_warn_about_pytorch() -> None:
    # spec §12.5: PyTorch does not strip UUID entries, "GPU-a, GPU-b" -> 1 device
    report = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "GPU-0000, GPU-1111"}, HOST4)
    assert report.physical == [0, 1]
    assert report.uncertain
    assert any("PyTorch" in w for w in report.warnings)


def test_mixed_lists_warn() -> None:
    # spec §12.6: driver behaviour for mixed lists is undocumented
    report = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "1,GPU-0000"}, HOST4)
    assert report.physical == [1, 0]
    assert report.uncertain


# -- CUDA_DEVICE_ORDER (spec §1.3, GUIDE#cuda-device-order) ------------------------------------


def mixed(**host: Any) -> Host:
    devices = [
        {"vendor": "nvidia", "uuid": "GPU-a", "pci_bus_id": "0000:01:00.0", "name": "T4"},
        {"vendor": "nvidia", "uuid": "GPU-b", "pci_bus_id": "0000:02:00.0", "name": "A100"},
        {"vendor": "nvidia", "uuid": "GPU-c", "pci_bus_id": "0000:03:00.0", "name": "T4"},
    ]
    return Host.from_dict({"devices": devices, **host})


def test_pci_bus_id_order() -> None:
    # spec §1.3: "PCI_BUS_ID: enumerated by PCI bus ID in ascending order" (GUIDE)
    host = mixed(cuda_fastest_first=[1, 0, 2])
    report = explain_visibility("cuda", {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, host)
    assert report.physical == [0, 1, 2]
    assert not report.uncertain and not report.warnings


def test_pci_bus_id_sorts_by_bus_even_if_host_order_differs() -> None:
    host = Host.from_dict(
        {
            "devices": [
                {"vendor": "nvidia", "pci_bus_id": "0000:81:00.0"},
                {"vendor": "nvidia", "pci_bus_id": "0000:01:00.0"},
            ]
        }
    )
    assert cvd("0", host, CUDA_DEVICE_ORDER="PCI_BUS_ID") == [1]


def test_fastest_first_uses_the_known_permutation() -> None:
    # spec §1.1 rule 3: CUDA_VISIBLE_DEVICES=0 is the fastest GPU by default
    # (NVIDIA/nvidia-docker#262; tensorflow/tensorflow#152)
    host = mixed(cuda_fastest_first=[1, 0, 2])
    report = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "0"}, host)
    assert report.physical == [1]
    assert not report.uncertain
    assert any("CUDA_DEVICE_ORDER=PCI_BUS_ID" in w for w in report.warnings)
    # PyTorch's NVML helpers use NVML index 0 for cuda:0 (spec §12.1)
    assert any("NVML" in w for w in report.warnings)


def test_unknown_permutation_on_different_gpus_is_uncertain() -> None:
    # spec §1.3: "model FASTEST_FIRST as an injected permutation, never compute it"
    report = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "0,1"}, mixed())
    assert report.physical == [0, 1]  # PCI order assumed
    assert report.uncertain
    assert any("CUDA_DEVICE_ORDER=PCI_BUS_ID" in w for w in report.warnings)
    # UUIDs do not depend on the order: not uncertain (spec §1.1 rule 4)
    uuid_report = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "GPU-b"}, mixed())
    assert uuid_report.physical == [1] and not uuid_report.uncertain


def test_identical_gpus_assume_pci_order_without_warning() -> None:
    report = explain_visibility("cuda", {}, HOST4)
    assert report.physical == [0, 1, 2, 3]
    assert not report.warnings and not report.uncertain


def test_unknown_order_value_warns() -> None:
    # spec §1.3: "Values other than the two above: behaviour undocumented"
    report = explain_visibility("cuda", {"CUDA_DEVICE_ORDER": "pci_bus_id"}, HOST4)
    assert report.uncertain and report.warnings


# -- MIG (spec §1.2, MIG_GUIDE) -----------------------------------------------------------------


def mig_host(driver: str | None = None) -> Host:
    d: dict[str, Any] = {
        "devices": [
            {"vendor": "nvidia", "uuid": "GPU-aaaa"},
            {
                "vendor": "nvidia",
                "uuid": "GPU-bbbb",
                "mig": [
                    {"uuid": "MIG-c6d4f1ef", "gi": 1, "ci": 0, "profile": "3g.40gb"},
                    {"uuid": "MIG-d7e5a2b3", "gi": 2, "ci": 0},
                    {"uuid": "MIG-e8f6b3c4", "gi": 2, "ci": 1},
                ],
            },
        ]
    }
    if driver:
        d["drivers"] = {"nvidia": driver}
    return Host.from_dict(d)


def test_mig_units_are_numbered_after_gpus() -> None:
    report = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "MIG-d7e5"}, mig_host())
    (unit,) = report.units
    assert (unit.physical_index, unit.device_position, unit.sub_index) == (3, 1, 1)
    assert unit.label == "MIG-d7e5a2b3"


def test_legacy_mig_form() -> None:
    # spec §1.2: drivers < R470 use MIG-<GPU-UUID>/<GI>/<CI> (MIG_GUIDE)
    assert cvd("MIG-GPU-bbbb/1/0", mig_host()) == [2]
    assert cvd("MIG-GPU-bbbb/2/1,0", mig_host()) == [4, 0]
    assert cvd("MIG-GPU-bbbb/9/0,0", mig_host()) == []


def test_unset_with_r570_picks_one_ci_per_gi() -> None:
    # spec §1.2: "if unset CUDA will pick one from each GPU instance" (R570+, MIG_GUIDE)
    report = explain_visibility("cuda", {}, mig_host("570.86.10"))
    assert report.physical == [0, 2, 3]
    assert report.uncertain  # which CI, and MIG vs non-MIG order, are undocumented


def test_old_drivers_enumerate_a_single_mig_instance() -> None:
    # spec §1.2: R450..R560 "only enumeration of a single MIG instance is supported";
    # measured MIG-a,MIG-b -> device_count()==1 (pytorch/pytorch#92315)
    assert cvd("MIG-c6,MIG-d7", mig_host("535.104.05")) == [2]
    assert cvd("0,MIG-d7", mig_host("535.104.05")) == [3]
    assert cvd("MIG-c6,MIG-d7", mig_host("570.86.10")) == [2, 3]


def test_second_ci_of_a_gi_is_dropped() -> None:
    # spec §1.2: if several CIs of one GI are listed "CUDA will pick one from the list"
    report = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "MIG-d7,MIG-e8"}, mig_host())
    assert report.physical == [3]
    assert report.uncertain


def test_mig_writer() -> None:
    env = visibility_env("cuda", [3, 0], mig_host())
    assert env == {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": "MIG-d7e5a2b3,GPU-aaaa",
    }
    with pytest.raises(VisibilityError, match="MIG mode"):
        visibility_env("cuda", [1], mig_host())
    with pytest.raises(VisibilityError, match="one GPU instance"):
        visibility_env("cuda", [3, 4], mig_host())
    with pytest.raises(VisibilityError, match="single MIG"):
        visibility_env("cuda", [2, 3], mig_host("535.1"))


def test_malformed_mig_extra_is_a_clear_error() -> None:
    host = Host.from_dict({"devices": [{"vendor": "nvidia", "mig": [{"uuid": "GPU-x"}]}]})
    with pytest.raises(VisibilityError, match="MIG UUID"):
        visible_devices("cuda", {}, host)


# -- PyTorch disagreements (spec §12) ------------------------------------------------------------


@pytest.mark.parametrize("value", ["-", "+", "0,+x", "²"])
def test_values_that_make_torch_raise_are_reported(value: str) -> None:
    # spec §12.2: these make torch.cuda.device_count() raise ValueError before CUDA init
    report = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": value}, HOST4)
    assert report.physical == ([0] if value == "0,+x" else [])
    assert any("ValueError" in w for w in report.warnings)


def test_unicode_digits_disagree_with_torch() -> None:
    # spec §12.3: str.isdigit() accepts "١" (-> 1) in PyTorch; the C driver does not
    report = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "١"}, HOST4)
    assert report.physical == []
    assert any("torch.cuda.device_count() reports 1" in w for w in report.warnings)


def test_more_than_64_gpus_disagree_with_torch() -> None:
    # spec §12.4: unset is range(64) in PyTorch's pre-init parser
    report = explain_visibility("cuda", {}, gpus(70))
    assert len(report.physical) == 70
    assert any("reports 64" in w for w in report.warnings)


# -- laws (spec §10) ----------------------------------------------------------------------------

entries = st.one_of(
    st.integers(-2, 9).map(str),
    st.sampled_from(["GPU-0000", "GPU-1", "GPU-3333", "x", "", " 2", "1a"]),
)


@FAST
@given(st.lists(entries, max_size=8), st.lists(entries, max_size=4))
def test_truncation_law(head: list[str], tail: list[str]) -> None:
    # spec §10: f(L) == f(prefix of L before its first invalid entry)
    value = ",".join(head)
    assert cvd(",".join([*head, "-1", *tail]) if head else "-1") == (cvd(value) if head else [])


@FAST
@given(st.lists(entries, min_size=1, max_size=8), entries)
def test_prefix_law(head: list[str], extra: str) -> None:
    # spec §10: f(L + [x]) starts with f(L) unless a duplicate empties it
    before = cvd(",".join(head))
    after = cvd(",".join([*head, extra]))
    assert after[: len(before)] == before or after == []
    assert len(set(after)) == len(after)
    assert set(after) <= set(range(4))


@FAST
@given(st.lists(st.integers(0, 7), unique=True, max_size=8), st.permutations(range(8)))
def test_writer_pins_pci_order(selection: list[int], fastest: list[int]) -> None:
    host = Host.from_dict(
        {
            "devices": [
                {
                    "vendor": "nvidia",
                    "name": "H100" if i % 2 else "L4",
                    "pci_bus_id": f"0000:{i:02x}:00.0",
                }
                for i in range(8)
            ],
            "cuda_fastest_first": fastest,
        }
    )
    env = visibility_env("cuda", selection, host)
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    report = explain_visibility("cuda", env, host)
    assert report.physical == selection
    assert not report.uncertain


PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
H100 = Host.from_file(PLUGINS / "hwbackends-cuda/tests/hosts/h100-sxm-8.json")
MIG = Host.from_file(PLUGINS / "hwbackends-cuda/tests/hosts/a100-mig.json")
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


EIGHT_H100 = Path(__file__).resolve().parents[2] / "docs/hosts/eight-h100.json"


def cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_python("-m", "hwbackends", *args, env=env, timeout=timeout)


def test_huge_indices_are_the_users_error_never_a_crash() -> None:
    import hwbackends_cuda  # noqa: F401 - the H100 host's devices are cuda's

    from hwbackends.visibility import explain_visibility

    host = Host.from_file(EIGHT_H100)
    # strtoul semantics: leading zeros are read through, an out-of-range value names no device
    rep = explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "0" * 5000 + "1"}, host)
    assert rep.physical == [1]
    assert explain_visibility("cuda", {"CUDA_VISIBLE_DEVICES": "9" * 5000}, host).physical == []
    out = cli("pin", "9" * 5000, "--host", str(EIGHT_H100), env=clean_env())
    assert out.returncode == 2 and "is not a list of physical device indices" in out.stderr
    assert "internal error" not in out.stderr
