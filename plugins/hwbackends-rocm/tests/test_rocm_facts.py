"""Where the Transformers tables come from (installed files vs the sourced copy), and the
declarative rocm tables themselves."""

from __future__ import annotations

from pathlib import Path

import pytest
from hwbackends_rocm import RocmBackend
from hwbackends_rocm._arch import GFX, capability
from hwbackends_rocm._attention import FLASH
from hwbackends_rocm._quant import VERDICTS

from hwbackends import Host
from hwbackends._kit import hf_tables as _facts
from hwbackends._kit.hf_facts import QUANT_METHODS

MI300 = {"vendor": "amd", "arch": "gfx942", "pci_bus_id": "0000:05:00.0"}
ROCM_TORCH = {"version": "2.8.0+rocm6.4", "hip": "6.4.43482"}


def mi300(packages: dict[str, str]) -> Host:
    return Host.from_dict({"torch": ROCM_TORCH, "packages": packages, "devices": [MI300]})


def test_installed_transformers_is_read_at_run_time() -> None:
    if Host.from_system().package("transformers") != "5.22.2":  # pinned by .ci/constraints.txt
        pytest.skip("needs the pinned transformers 5.22.2 installed")
    t = _facts.transformers_tables(mi300({"transformers": "5.22.2", "kernels": "0.17.2"}))
    assert t.read_at_runtime and t.version == "5.22.2"
    assert t.fallback(rocm=True)["flash_attention_3"] == "kernels-community/aiter-flash-attn"
    assert t.fallback(rocm=False)["flash_attention_3"] == "kernels-community/vllm-flash-attn3"
    assert t.kernel_devices["kernels-community/aiter-flash-attn"] == ("rocm",)
    assert t.kernels_range == ("0.17.2", "0.18.0")
    assert t.fa_min_major == {3: 8, 4: 9}


def test_without_transformers_the_sourced_copy_says_so() -> None:
    host = mi300({"flash-attn": "2.7.4"})
    t = _facts.transformers_tables(host)
    assert not t.read_at_runtime and not t.installed
    assert t.origin.endswith("transformers is not installed on this host")
    caps = RocmBackend().capabilities(host=host)
    # Nothing can fetch a hub kernel; the installed package is still offered.
    first = caps.attention[0]
    assert (first.name, first.packages) == (
        "flash_attention_2",
        ("flash-attn",),
    )
    assert "sourced copy of transformers 5.23.0" in caps.sources["attention"]
    assert any("transformers is not installed" in lim.text for lim in caps.limitations)


def test_other_transformers_release_with_an_incompatible_kernels() -> None:
    host = mi300({"transformers": "5.23.0", "kernels": "0.17.2"})
    t = _facts.transformers_tables(host)
    assert not t.read_at_runtime and t.kernels_range == ("0.18.2", "0.19")
    state = _facts.kernels_state(host, t)
    assert state.usable is False
    assert state.reason == (
        "kernels 0.17.2, transformers 5.23.0 accepts >=0.18.2,<0.19: integration switched off"
    )
    caps = RocmBackend().capabilities(host=host)
    assert [a.name for a in caps.attention] == ["sdpa", "eager"]
    assert "needs the kernels integration" in caps.sources["attention"]


def test_unknown_release_offers_hub_kernels_unverified() -> None:
    host = mi300({"transformers": "5.10.0", "kernels": "0.17.2"})
    caps = RocmBackend().capabilities(host=host)
    assert caps.attention[0].hub_kernel == "kernels-community/aiter-flash-attn"
    assert "kernels compatibility unverified" in caps.attention[0].note


def test_unreadable_install_falls_back_to_the_sourced_copy(tmp_path: Path) -> None:
    (tmp_path / "utils").mkdir()
    (tmp_path / "integrations").mkdir()
    (tmp_path / "modeling_flash_attention_utils.py").write_text("FLASH_ATTN_KERNEL_FALLBACK = 3\n")
    (tmp_path / "utils/import_utils.py").write_text("KERNELS_MIN_VERSION = '1'\n")
    (tmp_path / "integrations/hub_kernels.py").write_text("def f(): pass\n")
    t = _facts._read_installed(str(tmp_path), "9.9.9")
    assert not t.read_at_runtime
    assert "the installed transformers 9.9.9 could not be read" in t.origin
    assert t.fallback(rocm=True)["flash_attention_2"] == "kernels-community/aiter-flash-attn"


@pytest.mark.parametrize(
    ("arch", "cap"),
    [("gfx942", 94), ("gfx90a", 90), ("gfx950", 95), ("gfx1151", 115), ("gfx1201", 120),
     ("gfx906", 90), ("sm_90", None), ("gfx", None)],
)  # fmt: skip
def test_gfx_capability_is_what_torch_reports(arch: str, cap: int | None) -> None:
    assert capability(arch) == cap


def test_tables_are_sourced_and_consistent() -> None:
    assert all(row.source and row.capability for row in GFX.values())
    assert all(r.source for r in FLASH) and all(v.source for v in VERDICTS)
    archs = set(GFX)
    for r in FLASH:
        assert (r.package_archs or set()) <= archs and (r.hub_archs or set()) <= archs
    methods = {v.method for v in VERDICTS}
    assert methods <= set(QUANT_METHODS)
    assert set(QUANT_METHODS) - methods == set()  # every Transformers method has a verdict
