"""ROCR_VISIBLE_DEVICES, then HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES (spec §2)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwbackends import Host
from hwbackends.visibility import explain_visibility, visibility_env, visible_devices

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ROCR_SRC = "ROCm/ROCR-Runtime src/core/runtime/amd_filter_device.cpp"
CLR_SRC = "ROCm/clr rocclr/device/rocm/rocdevice.cpp"

UIDS = [0x1A2B3C4D5E6F7081, 0x1A2B3C4D5E6F7082, 0x99, 0xABCDEF]
HOST = Host.from_dict(
    {"devices": [{"vendor": "amd", "uuid": f"GPU-{u:016x}", "arch": "gfx942"} for u in UIDS]}
)


def rocm(**env: str) -> list[int]:
    return visible_devices("rocm", env, HOST)


# -- ROCr (spec §2.2, observed in ROCR_SRC) ----------------------------------------------------


def test_rocr_unset_and_empty() -> None:
    # spec §2.2 rules 1-2: unset -> all; "" -> zero GPUs (SelectZeroDevices)
    assert rocm() == [0, 1, 2, 3]
    assert rocm(ROCR_VISIBLE_DEVICES="") == []


def test_rocr_reorders_and_truncates() -> None:
    # spec §2.2 rules 6-8: user order; out of range ends the list
    assert rocm(ROCR_VISIBLE_DEVICES="3,1") == [3, 1]
    assert rocm(ROCR_VISIBLE_DEVICES="1,7,2") == [1]
    assert rocm(ROCR_VISIBLE_DEVICES="1,-1,2") == [1]


def test_rocr_duplicate_is_a_terminator() -> None:
    # spec §2.2 rule 7: "Such indices are interpreted as terminators"
    assert rocm(ROCR_VISIBLE_DEVICES="2,0,2,1") == [2, 0]


def test_rocr_base0_numbers_and_no_trailing_garbage() -> None:
    # spec §2.2 rule 6: strtol(token, &end, 0); any trailing character is invalid
    assert rocm(ROCR_VISIBLE_DEVICES="0x2,01,03") == [2, 1, 3]
    assert rocm(ROCR_VISIBLE_DEVICES="1,0-2") == [1]
    assert rocm(ROCR_VISIBLE_DEVICES="1,2a") == [1]
    assert rocm(ROCR_VISIBLE_DEVICES=" 1 , 2 ") == [1, 2]  # trimmed (rule 3)
    assert rocm(ROCR_VISIBLE_DEVICES="08") == []  # octal: '8' is trailing garbage


def test_rocr_uuids_case_insensitive_prefix() -> None:
    # spec §2.2 rules 3-4, 6: upper-cased tokens, prefix of exactly one UUID, length 5..20
    assert rocm(ROCR_VISIBLE_DEVICES="gpu-0000000000000099,GPU-0000000000AB") == [2, 3]
    assert rocm(ROCR_VISIBLE_DEVICES="GPU-1a2b3c4d5e6f7082") == [1]
    assert rocm(ROCR_VISIBLE_DEVICES="GPU-1A2B,0") == []  # ambiguous prefix
    assert rocm(ROCR_VISIBLE_DEVICES="GPU-") == []  # too short (5..20)


def test_rocr_tokens_beyond_gpu_count_are_not_examined() -> None:
    # spec §2.2 rule 5: only the first min(numGPUs, numTokens) tokens are examined
    assert rocm(ROCR_VISIBLE_DEVICES="0,1,2,3,garbage") == [0, 1, 2, 3]
    assert rocm(ROCR_VISIBLE_DEVICES="0,1,2,3,") == [0, 1, 2, 3]


def test_rocr_empty_token_fails_initialisation() -> None:
    # spec §2.2 rule 6 / §13: std::string::at(0) on an empty token; outcome unverified
    report = explain_visibility("rocm", {"ROCR_VISIBLE_DEVICES": "0,,1"}, HOST)
    assert report.physical == []
    assert report.uncertain and report.warnings


# -- HIP (spec §2.3, observed in CLR_SRC) -------------------------------------------------------


def test_hip_empty_means_all() -> None:
    # spec §2.3 rule 2: empty and unset are the same; ROCm/hip#3001
    report = explain_visibility("rocm", {"HIP_VISIBLE_DEVICES": ""}, HOST)
    assert report.physical == [0, 1, 2, 3]
    assert any("ROCR_VISIBLE_DEVICES=''" in w for w in report.warnings)
    assert rocm(HIP_VISIBLE_DEVICES="", CUDA_VISIBLE_DEVICES="2") == [2]
    assert rocm(CUDA_VISIBLE_DEVICES="") == [0, 1, 2, 3]


def test_hip_wins_over_cuda_visible_devices() -> None:
    # spec §2.3 rule 2: HIP_VISIBLE_DEVICES non-empty ? HIP : CUDA
    assert rocm(HIP_VISIBLE_DEVICES="1", CUDA_VISIBLE_DEVICES="2") == [1]
    assert rocm(CUDA_VISIBLE_DEVICES="3,2") == [3, 2]


def test_hip_tokens_must_be_canonical() -> None:
    # spec §2.3 rule 6: token == std::to_string(atoi(token))
    for bad in (" 1", "01", "+1", "1a", "-1", "4"):
        assert rocm(HIP_VISIBLE_DEVICES=f"2,{bad},3") == [2]
    assert rocm(HIP_VISIBLE_DEVICES="2,3,") == [2, 3]  # trailing comma harmless (rule 4)
    assert rocm(HIP_VISIBLE_DEVICES=",2") == []


def test_hip_drops_duplicates_silently() -> None:
    # spec §2.3 rule 7
    assert rocm(HIP_VISIBLE_DEVICES="2,2,1,2") == [2, 1]


def test_hip_uuid_is_a_case_sensitive_substring() -> None:
    # spec §2.3 rule 5: first agent whose lower-case UUID contains the token; no ambiguity check
    assert rocm(HIP_VISIBLE_DEVICES="GPU-1a2b") == [0]
    assert rocm(HIP_VISIBLE_DEVICES="GPU-1A2B") == []
    assert rocm(HIP_VISIBLE_DEVICES="3,GPU-0000000000000099") == [3, 2]


def test_composition_indexes_the_rocr_list() -> None:
    # spec §2.4: "ROCR=2,3 HIP=1 => physical 3" (ROCm/ROCR-Runtime#155)
    assert rocm(ROCR_VISIBLE_DEVICES="2,3", HIP_VISIBLE_DEVICES="1") == [3]
    assert rocm(ROCR_VISIBLE_DEVICES="2,3", HIP_VISIBLE_DEVICES="3") == []
    assert rocm(ROCR_VISIBLE_DEVICES="", HIP_VISIBLE_DEVICES="0") == []


def test_gpu_device_ordinal_is_ignored_with_a_warning() -> None:
    # spec §2.3 rule 3: docs and code disagree
    report = explain_visibility("rocm", {"GPU_DEVICE_ORDINAL": "1"}, HOST)
    assert report.physical == [0, 1, 2, 3]
    assert report.uncertain and report.warnings


# -- PyTorch disagreements (spec §2.5) -----------------------------------------------------------


def torch_warning(**env: str) -> str:
    report = explain_visibility("rocm", env, HOST)
    return " ".join(w for w in report.warnings if "torch" in w)


def test_pytorch_disagreements_are_reported() -> None:
    # spec §2.5 "Consequences vs. the runtime" (torch 2.13.0 torch/cuda/__init__.py)
    assert "reports 1" in torch_warning(ROCR_VISIBLE_DEVICES="")
    assert "reports 2" in torch_warning(ROCR_VISIBLE_DEVICES="0,0")
    assert "reports 3" in torch_warning(ROCR_VISIBLE_DEVICES="0,1,7")
    assert "reports 4" in torch_warning(ROCR_VISIBLE_DEVICES="0,1,2,3", CUDA_VISIBLE_DEVICES="1")
    assert "reports 0" in torch_warning(HIP_VISIBLE_DEVICES="")
    assert "reports 0" in torch_warning(HIP_VISIBLE_DEVICES="", CUDA_VISIBLE_DEVICES="2")
    assert "reports 1" in torch_warning(ROCR_VISIBLE_DEVICES="2,3", HIP_VISIBLE_DEVICES="3")
    assert "RuntimeError" in torch_warning(ROCR_VISIBLE_DEVICES="2", HIP_VISIBLE_DEVICES="0,1")
    assert "reports 0" in torch_warning(HIP_VISIBLE_DEVICES="0,0,1")
    assert torch_warning(HIP_VISIBLE_DEVICES="1,0") == ""


# -- laws (spec §10) ------------------------------------------------------------------------------

idx = st.integers(-1, 5).map(str)


@FAST
@given(st.lists(st.one_of(idx, st.sampled_from(["x", " 1", "GPU-1a2b"])), max_size=8))
def test_hip_idempotent_under_duplicates(tokens: list[str]) -> None:
    # spec §10: HIP duplicates are idempotent, f(L) == f(dedup(L))
    dedup = list(dict.fromkeys(tokens))
    assert rocm(HIP_VISIBLE_DEVICES=",".join(tokens)) == rocm(HIP_VISIBLE_DEVICES=",".join(dedup))


@FAST
@given(
    st.lists(st.integers(0, 3), unique=True, max_size=4), st.lists(st.integers(0, 5), max_size=6)
)
def test_rocr_then_hip_composition(rocr: list[int], hip: list[int]) -> None:
    # spec §2.4 / §10: hip(rocr(P))
    expected: list[int] = []
    for h in hip:
        if h >= len(rocr):
            break
        if rocr[h] not in expected:
            expected.append(rocr[h])
    if not hip:
        expected = rocr
    got = rocm(
        ROCR_VISIBLE_DEVICES=",".join(map(str, rocr)), HIP_VISIBLE_DEVICES=",".join(map(str, hip))
    )
    assert got == expected


@FAST
@given(st.lists(st.integers(0, 3), unique=True, min_size=1, max_size=4), st.integers(0, 3))
def test_rocr_duplicate_truncates_never_empties(head: list[int], k: int) -> None:
    # spec §10: "a duplicate truncates (never empties)"
    dup = head[k % len(head)]
    assert rocm(ROCR_VISIBLE_DEVICES=",".join(map(str, [*head, dup, 0, 1]))) == head


@FAST
@given(st.lists(st.integers(0, 3), unique=True, max_size=4), st.sampled_from(["2", "0,1", ""]))
def test_writer_neutralises_an_existing_hip_layer(selection: list[int], stale: str) -> None:
    env = visibility_env("rocm", selection, HOST)
    # HIP_VISIBLE_DEVICES is overwritten; CUDA_VISIBLE_DEVICES only matters when HIP is empty
    polluted = {"CUDA_VISIBLE_DEVICES": stale, **env}
    if selection:
        assert visible_devices("rocm", polluted, HOST) == selection
    assert not [w for w in explain_visibility("rocm", env, HOST).warnings if "torch" in w]


def test_pytorch_ambiguous_uuid_disagreement() -> None:
    # spec §2.5: HIP=GPU-<ambiguous> -> torch 0 / runtime 1 (HIP takes the first match)
    assert rocm(HIP_VISIBLE_DEVICES="GPU-1a2b") == [0]
    assert "reports 0" in torch_warning(HIP_VISIBLE_DEVICES="GPU-1a2b")
    assert torch_warning(HIP_VISIBLE_DEVICES="GPU-1a2b3c4d5e6f7082") == ""


PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
MI300 = Host.from_file(PLUGINS / "hwbackends-rocm/tests/hosts/mi300x-8.json")


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
