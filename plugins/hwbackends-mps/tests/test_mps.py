"""The mps backend on simulated Macs, through the real selection."""

from __future__ import annotations

from pathlib import Path

from hwbackends_mps import MpsBackend

import hwbackends
from hwbackends import Host, SelectionReport
from hwbackends.testing import make_registry

HOSTS = Path(__file__).parent / "hosts"
REGISTRY = make_registry(MpsBackend)  # the built-in cpu plus this backend


def host(name: str) -> Host:
    return Host.from_file(HOSTS / f"{name}.json")


def select(name: str, env: dict[str, str] | None = None) -> SelectionReport:
    e = dict(env or {})
    return REGISTRY.select(e, host(name))


def test_m2_sonoma_bf16() -> None:
    rep = select("m2_max_sonoma")
    assert rep.chosen == "mps"
    assert [(d.index, d.physical_index, d.torch_device) for d in rep.devices] == [(0, 0, "mps:0")]
    caps = MpsBackend().capabilities(rep.devices[0], host=host("m2_max_sonoma"))
    assert caps.training_precision == "bf16" and "bfloat16" in caps.dtypes
    assert (caps.device_type, caps.distributed_backend, caps.kernel_device) == (
        "mps",
        "gloo",
        "mps",
    )
    assert caps.device_map_auto is True
    assert [a.name for a in caps.attention] == [
        "sdpa",
        "kernels-community/metal-flash-sdpa",
        "eager",
    ]
    assert caps.attention[1].hub_kernel == "kernels-community/metal-flash-sdpa"
    assert caps.quant("metal").status == "partial"
    assert caps.quant("eetq").status == "unsupported"


def test_ventura_has_no_bf16() -> None:
    rep = select("m1_ventura")
    assert rep.chosen == "mps"
    caps = MpsBackend().capabilities(rep.devices[0], host=host("m1_ventura"))
    assert caps.training_precision == "fp32" and "bfloat16" not in caps.dtypes
    assert "14.0" in caps.sources["training_precision"]


def test_unknown_macos_is_fp32() -> None:
    caps = MpsBackend().capabilities(host=host("m2_unknown_macos"))
    assert caps.training_precision == "fp32"
    assert "unknown" in caps.sources["training_precision"]


def test_macos_too_old() -> None:
    p = select("m1_monterey_old").status("mps").probe
    assert p is not None and p.hardware_present and not p.software_ready
    assert "MPS needs macOS >= 12.3, this Mac runs macOS 12.2" in p.reason


def test_hardware_but_no_torch() -> None:
    rep = select("m3_no_torch")
    p = rep.status("mps").probe
    assert p is not None and p.hardware_present and not p.software_ready
    assert p.reason.endswith("but the torch package is not installed")
    assert p.hint == "pip install torch (the macOS arm64 wheel includes MPS)"
    assert rep.chosen == "cpu"


def test_torch_but_no_mac() -> None:
    p = select("linux_with_torch").status("mps").probe
    assert p is not None and not p.hardware_present and p.software_ready
    assert p.reason == "no Apple Silicon GPU hardware found"


def test_through_installed_entry_points() -> None:
    rep = hwbackends.explain(env={}, host=host("m2_max_sonoma"))
    assert rep.chosen == "mps"
    assert [d.torch_device for d in rep.devices] == ["mps:0"]
