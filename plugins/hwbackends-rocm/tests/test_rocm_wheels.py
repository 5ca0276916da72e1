"""PyTorch's ROCm wheels beside AMD's support list: which index has kernels for which gfx target.

Truths: ``PYTORCH_ROCM_ARCH`` in pytorch/pytorch ``.ci/docker/manywheel/build.sh`` and
``ROCM_ARCHES`` in ``.github/scripts/generate_binary_build_matrix.py`` at each release branch;
rocBLAS without gfx900/gfx906 Tensile libraries from ROCm 6.4 on (ROCm/ROCm#4625,
pytorch/pytorch#179865); AMD's ROCm system requirements (gfx900 not listed, gfx906 deprecated);
pre-GCN ids from the amdgpu driver's ``amdgpu_unsupported_pciidlist``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hwbackends_rocm._arch import GFX, pci_row
from hwbackends_rocm._wheels import NEWEST, RELEASES, WHEELS, advise, wheel_for, wheel_of

from hwbackends import SelectionReport

Choose = Callable[..., SelectionReport]
IDX = "https://download.pytorch.org/whl/"


# -- the table --------------------------------------------------------------------------------


def test_every_row_cites_the_build_scripts_at_its_release() -> None:
    assert RELEASES == ("2.7", "2.8", "2.9", "2.10", "2.11", "2.12", "2.13", "2.14")
    for w in WHEELS:
        tag = f"@release/{w.torch}"
        assert f".ci/docker/manywheel/build.sh{tag} (PYTORCH_ROCM_ARCH)" in w.source, w
        assert f".github/scripts/generate_binary_build_matrix.py{tag} (ROCM_ARCHES)" in w.source
        assert w.index.startswith("rocm") and w.archs, w
        assert set(w.archs) <= set(GFX), set(w.archs) - set(GFX)  # every target is described
        assert set(w.no_blas) <= set(w.archs)
        if w.no_blas:  # a listed target without kernels says where that is shown
            assert "ROCm/ROCm#4625" in w.source and "pytorch/pytorch#179865" in w.source
    # each release ships two ROCm versions; the matrix's pairs, oldest first
    pairs = {r: [w.index for w in WHEELS if w.torch == r] for r in RELEASES}
    assert pairs["2.7"] == ["rocm6.2.4", "rocm6.3"]
    assert pairs["2.9"] == ["rocm6.3", "rocm6.4"]
    assert pairs["2.10"] == ["rocm7.0", "rocm7.1"]
    assert pairs["2.14"] == ["rocm7.2", "rocm7.14"]


def test_the_vega_targets_stay_listed_but_lose_their_blas_from_rocm_6_4() -> None:
    for w in WHEELS:
        listed = "gfx900" in w.archs
        assert listed == (w.index != "rocm7.14"), w  # TheRock's 7.14 wheels drop them
        old_blas = w.rocm in ("6.2.4", "6.3")
        assert w.carries("gfx900") == (listed and old_blas), w
        assert w.carries("gfx906") == (listed and old_blas), w
    assert "gfx1103" in wheel_of("2.13.0+rocm7.2").archs  # type: ignore[union-attr]
    assert "gfx1103" not in wheel_of("2.12.0+rocm7.2").archs  # type: ignore[union-attr]
    assert "gfx950" in wheel_of("2.10.0+rocm7.0").archs  # type: ignore[union-attr]
    assert "gfx950" not in wheel_of("2.9.0+rocm6.4").archs  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("torch", "hip", "index"),
    [
        ("2.8.0+rocm6.4", "6.4.43482", "rocm6.4"),
        ("2.7.1+rocm6.2.4", None, "rocm6.2.4"),
        ("2.9.1+rocm6.3", None, "rocm6.3"),
        ("2.9.0", "6.3.42131", "rocm6.3"),  # no local version: the HIP it was built with
        ("2.14.0+rocm7.14.0", None, "rocm7.14"),
    ],
)
def test_installed_wheels_are_recognised(torch: str, hip: str | None, index: str) -> None:
    w = wheel_of(torch, hip)
    assert w is not None and w.index == index


def test_unknown_builds_are_not_guessed() -> None:
    assert wheel_of("2.6.0+rocm6.2.4") is None  # before the table
    assert wheel_of("2.8.0+rocm7.0") is None  # not an index 2.8 shipped
    assert wheel_of("2.8.0", None) is None
    assert wheel_of(None) is None


# -- one device's answer ------------------------------------------------------------------------


def test_a_target_the_default_index_carries_keeps_it() -> None:
    a = wheel_for("gfx942")
    assert (a.status, a.index, a.release, a.reason, a.vendor) == (
        "default",
        "rocm6.4",
        None,
        "",
        "",
    )
    assert a.command == f"pip install torch --index-url {IDX}rocm6.4"


def test_gfx900_gets_the_last_wheel_with_kernels_and_both_facts() -> None:
    a = wheel_for("gfx900")
    assert (a.status, a.index, a.release) == ("older", "rocm6.3", "2.9")
    assert a.command == f"pip install 'torch==2.9.*' --index-url {IDX}rocm6.3"
    assert "list gfx900 in PYTORCH_ROCM_ARCH but bundle a rocBLAS (ROCm 6.4)" in a.reason
    assert "torch 2.9's rocm6.3 wheels are the last with kernels for gfx900" in a.reason
    assert a.vendor.startswith("AMD's ROCm support list has gfx900 as unsupported (https://")
    assert "release/2.9" in a.source and "ROCm/ROCm#4625" in a.source


def test_gfx906_is_deprecated_by_amd_and_last_carried_by_rocm_6_3() -> None:
    a = wheel_for("gfx906")
    assert (a.status, a.index, a.release) == ("older", "rocm6.3", "2.9")
    assert "AMD's ROCm support list has gfx906 as deprecated" in a.vendor
    # on the installed release line, its own rocm6.3 index is the answer
    on_28 = advise([("gfx906", "MI50")], line="2.8")
    assert (on_28.status, on_28.index, on_28.release) == ("index", "rocm6.3", "2.8")


def test_a_target_only_newer_wheels_carry_gets_the_newest_index() -> None:
    a = wheel_for("gfx1151")
    assert (a.status, a.index, a.release) == ("index", "rocm7.14", None)
    assert "PyTorch's rocm6.4 wheels (torch 2.9, the newest on that index) are not built for " in (
        a.reason
    )
    # AMD does not support gfx1103, PyTorch's wheels carry it since 2.13: both are said
    b = wheel_for("gfx1103")
    assert b.index == "rocm7.14" and "gfx1103 as unsupported" in b.vendor


def test_a_target_no_wheel_carries_gets_no_install_line() -> None:
    for arch in ("gfx803", "gfx1031", "gfx600"):
        a = wheel_for(arch)
        assert a.status == "none" and a.command is None and a.index is None
        assert a.reason.startswith(f"no PyTorch ROCm wheel from 2.7 to {NEWEST} has kernels for")


def test_terascale_gets_no_pytorch_wheel_and_no_rocm_advice(choose: Choose) -> None:
    row = pci_row("0x6758")  # Radeon HD 6670 (Turks, TeraScale 2)
    assert row is not None and row.pre_gcn
    a = wheel_for(None, pre_gcn=row.pre_gcn)
    assert (a.status, a.command) == ("none", None)
    assert a.reason.startswith("no PyTorch wheel supports it: it is older than GCN")
    assert "amdgpu_unsupported_pciidlist" in a.source
    rocm = choose("radeon-hd6670-terascale").status("rocm")
    assert rocm.probe is not None and rocm.probe.hint is None
    assert "pip install" not in rocm.reason and "rocm6" not in rocm.reason


def test_advice_as_data() -> None:
    d = wheel_for("gfx900").to_dict()
    assert d["command"] == f"pip install 'torch==2.9.*' --index-url {IDX}rocm6.3"
    assert set(d) == {"status", "index", "release", "command", "reason", "vendor", "source"}


# -- hosts -------------------------------------------------------------------------------------


def test_mi25_host_gets_the_rocm63_index_and_both_facts(choose: Choose) -> None:
    r = choose("mi25-vega10-no-torch")
    rocm = r.status("rocm")
    assert rocm.probe is not None
    assert rocm.reason == (
        "4 AMD GPU(s) (4× gfx900 (Instinct MI25, Radeon RX Vega 56/64)) found, but torch is "
        "not installed; and gfx900 is not on AMD's ROCm support list: "
        "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/reference/"
        "system-requirements.html, but PyTorch's rocm6.3 wheels of torch 2.9 carry kernels for it"
    )
    hint = rocm.probe.hint or ""
    assert hint.startswith(f"pip install 'torch==2.9.*' --index-url {IDX}rocm6.3 (")
    assert "rocm6.4 wheels (torch 2.9, the newest on that index) list gfx900" in hint
    ev = rocm.probe.evidence
    assert sum("is unsupported in ROCm" in e for e in ev) == 1  # once, not once per GPU
    assert any(e.startswith("PyTorch ROCm wheels: ") and "@release/2.9" in e for e in ev)


def test_mi50_on_a_rocm64_wheel_is_not_ready_and_told_which_index_has_kernels(
    choose: Choose,
) -> None:
    r = choose("mi50-torch28-rocm64")
    assert r.chosen == "cpu"  # "ROCm ready" before: the wheel's rocBLAS has no gfx906 kernels
    p = r.status("rocm").probe
    assert p is not None and not p.available
    mi50 = "gfx906 (Instinct MI50/MI60, Radeon VII)"
    assert p.hint == (
        f"pip install 'torch==2.8.*' --index-url {IDX}rocm6.3 (torch 2.8's rocm6.3 wheels have "
        f"kernels for {mi50})"
    )
    assert p.reason.endswith(
        f"the installed torch 2.8.0+rocm6.4 has no kernels for {mi50}: PyTorch's rocm6.4 wheels "
        "of torch 2.8 list gfx906 in PYTORCH_ROCM_ARCH but bundle a rocBLAS (ROCm 6.4) with no "
        "gfx906 kernels"
    )
    assert any("is deprecated in ROCm" in e for e in p.evidence)  # AMD's fact, beside ours
    assert any("ROCm/ROCm#4625" in e for e in p.evidence)


def test_a_gpu_the_installed_wheel_serves_stays_ready(choose: Choose) -> None:
    rocm = choose("mi250x-device-id-only").status("rocm")  # gfx90a under 2.8.0+rocm6.4
    assert rocm.state == "selected" and rocm.probe is not None
    assert not any(e.startswith("PyTorch ROCm wheels") for e in rocm.probe.evidence)
