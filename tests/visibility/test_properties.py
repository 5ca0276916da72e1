"""Properties every backend must have: robustness, results within the host, round trips."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwbackends import Host, VisibilityError
from hwbackends.visibility import (
    explain_visibility,
    variables_for,
    visibility_env,
    visibility_unset,
)

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

DEVICES: list[dict[str, Any]] = [
    # NVIDIA: two models (so FASTEST_FIRST matters), one GPU in MIG mode with two GIs.
    {"vendor": "nvidia", "uuid": "GPU-aa11", "pci_bus_id": "0000:01:00.0", "name": "A100"},
    {"vendor": "nvidia", "uuid": "GPU-aa22", "pci_bus_id": "0000:02:00.0", "name": "A100"},
    {"vendor": "nvidia", "uuid": "GPU-bb33", "pci_bus_id": "0000:03:00.0", "name": "H100"},
    {
        "vendor": "nvidia",
        "uuid": "GPU-cc44",
        "pci_bus_id": "0000:04:00.0",
        "name": "H100",
        "mig": [
            {"uuid": "MIG-m1", "gi": 1, "ci": 0},
            {"uuid": "MIG-m2", "gi": 2, "ci": 0},
            {"uuid": "MIG-m3", "gi": 2, "ci": 1},
        ],
    },
    *[{"vendor": "amd", "uuid": f"GPU-{i:016x}", "arch": "gfx942"} for i in (1, 2, 0x21, 4)],
    {"vendor": "intel", "pci_bus_id": "0000:3a:00.0", "name": "Max 1550", "tiles": 2},
    {"vendor": "intel", "pci_bus_id": "0000:9a:00.0", "name": "Max 1550", "tiles": 2},
    {"vendor": "intel", "pci_bus_id": "0000:ca:00.0", "name": "Max 1100"},
    {"vendor": "aws", "arch": "trainium2"},
    {"vendor": "aws", "arch": "trainium2"},
    *[{"vendor": "google"} for _ in range(4)],
    *[{"vendor": "habana", "module_id": m} for m in (3, 2, 1, 0, 7, 6, 5, 4)],
    *[{"vendor": "huawei"} for _ in range(8)],
    *[{"vendor": "cambricon"} for _ in range(2)],
    *[{"vendor": "mthreads"} for _ in range(3)],
    {"vendor": "apple"},
]
HOST = Host.from_dict({"devices": DEVICES, "cuda_fastest_first": [2, 3, 0, 1]})
HOST_UNKNOWN_ORDER = Host.from_dict({"devices": DEVICES})

# Largest physical index space per backend (over every setting of its variables).
SPACE = {
    "cuda": 4 + 3,
    "rocm": 4,
    "xpu": 5,  # FLAT: 2 + 2 + 1 tiles; COMPOSITE: 3 cards
    "neuron": 16,  # 2 Trainium2 x 8 cores at LNC=1
    "tpu": 4,
    "hpu": 8,
    "npu": 8,
    "mlu": 2,
    "musa": 3,
    "mps": 1,
    "cpu": 0,
}
VENDOR_COUNT = {
    "cuda": 4,
    "rocm": 4,
    "xpu": 3,
    "neuron": 2,
    "tpu": 4,
    "hpu": 8,
    "npu": 8,
    "mlu": 2,
    "musa": 3,
    "mps": 1,
    "cpu": 0,
}
BACKENDS = sorted(SPACE)

PIECES = [
    "0", "1", "2", "3", "7", "-1", "+1", " 1", "1 ", "0x1", "010", "1gpu2", "0-2", "3-1", "",
    " ", "GPU-", "GPU-aa", "GPU-aa11", "gpu-aa11", "MIG-m", "MIG-m2", "MIG-GPU-cc44/2/0",
    "GPU-0000000000000021", "G", "0.1", "1.0", "*", "*.*", "gpu", "level_zero:*",
    "!level_zero:0", "opencl:gpu", "1,1,1", "2,2,1", "FLAT", "COMPOSITE", "PCI_BUS_ID", "²",
    "١", "\u00a0", "99999999999999999999999", "9" * 5000,
]  # fmt: skip
text_values = st.one_of(
    st.text(max_size=30),
    st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=8).map(",".join),
    st.lists(st.sampled_from(PIECES), max_size=4).map(";".join),
)


def envs(backend: str) -> st.SearchStrategy[dict[str, str]]:
    names = [*variables_for(backend), "CUDA_VISIBLE_DEVICES", "PYTORCH_ENABLE_MPS_FALLBACK"]
    return st.dictionaries(st.sampled_from(names), text_values, max_size=len(names))


def check_report(backend: str, env: dict[str, str]) -> None:
    for host in (HOST, HOST_UNKNOWN_ORDER):
        try:
            report = explain_visibility(backend, env, host)
        except VisibilityError as exc:
            assert exc.what
            continue
        keys = [(u.physical_index, u.sub_index) for u in report.units]
        assert len(keys) == len(set(keys)), "a unit appears twice"
        assert [u.logical_index for u in report.units] == list(range(len(report.units)))
        for u in report.units:
            assert 0 <= u.physical_index < SPACE[backend]
            assert 0 <= u.device_position < VENDOR_COUNT[backend]
        if backend != "xpu":  # xpu tiles exposed by SYCL share their card's index
            assert len(report.physical) == len(set(report.physical))
        json.dumps(report.to_dict())
        for name, value in env.items():
            if name in variables_for(backend):
                assert report.variables[name] == value


@FAST
@given(st.sampled_from(BACKENDS).flatmap(lambda b: st.tuples(st.just(b), envs(b))))
def test_any_text_only_raises_visibility_error(case: tuple[str, dict[str, str]]) -> None:
    check_report(*case)


@FAST
@given(st.sampled_from(BACKENDS), st.integers(0, 3))
def test_huge_lists_do_not_blow_up(backend: str, which: int) -> None:
    entry = ["0", "1", "0-1", "level_zero:0"][which]
    env = {name: ",".join([entry] * 20000) for name in variables_for(backend)}
    check_report(backend, env)


def _writable(backend: str) -> st.SearchStrategy[list[int]]:
    """Selections each writer must express exactly (see the backend modules)."""
    n = SPACE[backend]
    subsets = st.lists(st.integers(0, max(n - 1, 0)), unique=True, max_size=n) if n else st.just([])
    if backend == "cuda":
        # GPU 3 is in MIG mode (not selectable whole); MIG 5 and 6 share a GPU instance.
        pool = st.lists(st.sampled_from([0, 1, 2, 4, 5, 6]), unique=True, max_size=5)
        return pool.filter(lambda s: not {5, 6} <= set(s))
    if backend == "xpu":
        return subsets.map(sorted)
    if backend == "neuron":
        return st.lists(st.integers(0, 7), unique=True, min_size=1, max_size=8).map(sorted)
    if backend == "npu":
        return st.lists(st.integers(0, n - 1), unique=True, min_size=1).map(sorted)
    if backend == "tpu":
        sizes = st.sampled_from([1, 2, 4])
        return sizes.flatmap(
            lambda k: st.lists(st.integers(0, 3), unique=True, min_size=k, max_size=k)
        ).map(sorted)
    if backend in ("hpu", "mlu", "musa"):
        return st.lists(st.integers(0, n - 1), unique=True, min_size=1, max_size=n)
    if backend == "mps":
        return st.just([0])
    if backend == "cpu":
        return st.just([])
    return subsets  # rocm: any order, empty included


@FAST
@given(st.sampled_from(BACKENDS).flatmap(lambda b: st.tuples(st.just(b), _writable(b))))
def test_writer_reader_round_trip(case: tuple[str, list[int]]) -> None:
    backend, selection = case
    for host in (HOST, HOST_UNKNOWN_ORDER):
        written = visibility_env(backend, selection, host)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in written.items())
        # Applying to a polluted environment: unset first, then assign (documented order).
        polluted = {name: "0" for name in variables_for(backend)}
        for name in visibility_unset(backend):
            polluted.pop(name, None)
        polluted.update(written)
        assert explain_visibility(backend, polluted, host).physical == selection
        assert explain_visibility(backend, written, host).physical == selection


@FAST
@given(st.sampled_from(BACKENDS), st.lists(st.integers(-5, 40), max_size=6))
def test_writer_never_names_missing_devices(backend: str, selection: list[int]) -> None:
    try:
        written = visibility_env(backend, selection, HOST)
    except VisibilityError:
        return
    assert all(0 <= p < SPACE[backend] for p in selection)
    assert explain_visibility(backend, written, HOST).physical == selection
