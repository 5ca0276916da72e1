"""The musa backend on simulated hosts, through the real selection."""

from __future__ import annotations

from pathlib import Path

from hwbackends_musa import MusaBackend

import hwbackends
from hwbackends import Host, SelectionReport
from hwbackends.testing import make_registry

HOSTS = Path(__file__).parent / "hosts"
REGISTRY = make_registry(MusaBackend)  # the built-in cpu plus this backend


def host(name: str) -> Host:
    return Host.from_file(HOSTS / f"{name}.json")


def select(name: str, env: dict[str, str] | None = None) -> SelectionReport:
    e = dict(env or {})
    return REGISTRY.select(e, host(name))


def test_four_cards() -> None:
    rep = select("s4000_x4")
    assert rep.chosen == "musa"
    p = rep.status("musa").probe
    assert p is not None and "4 Moore Threads GPU device(s): MTT S4000" in p.reason
    assert [(d.index, d.physical_index, d.torch_device) for d in rep.devices] == [
        (i, i, f"musa:{i}") for i in range(4)
    ]


def test_visible_devices() -> None:
    rep = select("s4000_x4", {"MUSA_VISIBLE_DEVICES": "3,1"})
    assert [(d.index, d.physical_index) for d in rep.devices] == [(0, 3), (1, 1)]


def test_capabilities() -> None:
    h = host("s4000_x4")
    b = MusaBackend()
    caps = b.capabilities(b.devices(h, {})[0], host=h)
    assert (caps.device_type, caps.distributed_backend, caps.kernel_device) == (
        "musa",
        "mccl",
        None,
    )
    assert caps.device_map_auto is True
    assert caps.training_precision == "fp32"
    assert "is_bf16_supported" in caps.sources["training_precision"]
    fa2 = caps.attention[0]
    assert fa2.name == "flash_attention_2" and fa2.packages == ("flash-attn",)
    assert [a.name for a in caps.attention[1:]] == ["sdpa", "eager"]
    assert caps.quant("higgs").status == "unsupported"
    assert caps.quant("awq").status == "unknown"


def test_package_but_no_hardware() -> None:
    rep = select("torch_musa_no_gpu")
    p = rep.status("musa").probe
    assert p is not None and not p.hardware_present and p.software_ready
    assert p.reason == "no Moore Threads GPU hardware found"
    assert rep.chosen == "cpu"


def test_hardware_but_no_package() -> None:
    rep = select("s4000_no_package")
    p = rep.status("musa").probe
    assert p is not None and p.hardware_present and not p.software_ready
    assert p.reason.endswith("but the torch-musa package is not installed")
    assert p.hint is not None
    assert rep.chosen == "cpu" and rep.rule == "cpu-fallback"


def test_through_installed_entry_points() -> None:
    rep = hwbackends.explain(env={"MUSA_VISIBLE_DEVICES": "2"}, host=host("s4000_x4"))
    assert rep.chosen == "musa"
    assert [(d.index, d.physical_index) for d in rep.devices] == [(0, 2)]
