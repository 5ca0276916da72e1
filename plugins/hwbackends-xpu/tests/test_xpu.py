"""The xpu backend on simulated Intel GPU hosts, through the real selection."""

from __future__ import annotations

from pathlib import Path

from hwbackends_xpu import XpuBackend

import hwbackends
from hwbackends import Host, SelectionReport
from hwbackends.testing import make_registry

HOSTS = Path(__file__).parent / "hosts"
REGISTRY = make_registry(XpuBackend)  # the built-in cpu plus this backend


def select(name: str, env: dict[str, str] | None = None) -> SelectionReport:
    e = dict(env or {})
    return REGISTRY.select(e, Host.from_file(HOSTS / f"{name}.json"))


def test_max1550_flat_one_device_per_tile() -> None:
    rep = select("max1550_x4", {"ZE_FLAT_DEVICE_HIERARCHY": "FLAT"})
    assert rep.chosen == "xpu"
    p = rep.status("xpu").probe
    assert p is not None and "4 Intel GPU device(s): Intel Data Center GPU Max 1550" in p.reason
    assert [(d.index, d.physical_index) for d in rep.devices] == [(i, i) for i in range(8)]
    assert [d.pci_bus_id for d in rep.devices[:3]] == [
        "0000:18:00.0",
        "0000:18:00.0",
        "0000:42:00.0",
    ]
    assert [d.sub_index for d in rep.devices[:2]] == [0, 1]
    assert rep.devices[0].arch == "pvc"


def test_max1550_composite_one_device_per_card() -> None:
    rep = select("max1550_x4", {"ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE", "ZE_AFFINITY_MASK": "1,3"})
    assert [d.torch_device for d in rep.devices] == ["xpu:0", "xpu:1"]
    assert [d.pci_bus_id for d in rep.devices] == ["0000:42:00.0", "0000:96:00.0"]


def test_max1550_capabilities() -> None:
    host = Host.from_file(HOSTS / "max1550_x4.json")
    b = XpuBackend()
    caps = b.capabilities(b.devices(host, {})[0], host=host)
    assert (caps.device_type, caps.distributed_backend, caps.kernel_device) == (
        "xpu",
        "xccl",
        "xpu",
    )
    assert caps.device_map_auto is True
    assert caps.training_precision == "bf16" and "bfloat16" in caps.dtypes
    fa2 = caps.attention[0]
    assert fa2.name == "flash_attention_2" and fa2.hub_kernel == "kernels-community/flash-attn2"
    assert [a.name for a in caps.attention[1:]] == ["sdpa", "eager"]
    assert caps.quant("awq").status == "supported"
    assert caps.quant("eetq").status == "unsupported"
    assert caps.quant("fp8").status == "supported"
    assert caps.quant("hqq").status == "unknown"


def test_hardware_but_cpu_torch() -> None:
    rep = select("max1550_cpu_torch")
    p = rep.status("xpu").probe
    assert p is not None and p.hardware_present and not p.software_ready
    assert "torch 2.8.0+cpu is a cpu build, not a xpu build" in p.reason
    assert p.hint is not None and "download.pytorch.org/whl/xpu" in p.hint
    assert rep.chosen == "cpu" and rep.rule == "cpu-fallback"


def test_xpu_torch_without_gpu() -> None:
    p = select("xpu_torch_no_gpu").status("xpu").probe
    assert p is not None and not p.hardware_present and p.software_ready
    assert p.reason == "no Intel GPU hardware found"
    assert p.hint is not None


def test_old_torch_xpu_build() -> None:
    torch = {"version": "2.6.0+xpu", "xpu": "20240200"}
    host = Host.from_dict(
        {"torch": torch, "devices": [{"vendor": "intel", "pci_device_id": "0x0bd5"}]}
    )
    p = XpuBackend().probe(host)
    assert not p.available and "needs torch >= 2.7" in p.reason


def test_igpu_is_not_taken_without_xpu_torch() -> None:
    rep = select("laptop_igpu_cpu_torch")
    p = rep.status("xpu").probe
    assert p is not None and not p.hardware_present
    assert "only an integrated Intel GPU (Intel Iris Xe Graphics)" in p.reason
    assert p.hint is not None and "whl/xpu" in p.hint
    assert rep.chosen == "cpu"


def test_igpu_used_with_xpu_torch_and_fp32() -> None:
    rep = select("laptop_igpu_xpu_torch")
    assert rep.chosen == "xpu"
    assert [d.torch_device for d in rep.devices] == ["xpu:0"]
    host = Host.from_file(HOSTS / "laptop_igpu_xpu_torch.json")
    caps = XpuBackend().capabilities(rep.devices[0], host=host)
    assert caps.arch == "integrated" and caps.training_precision == "fp32"


def test_igpu_dropped_next_to_discrete() -> None:
    rep = select("desktop_igpu_b580")
    assert [(d.index, d.physical_index, d.pci_bus_id) for d in rep.devices] == [
        (0, 0, "0000:03:00.0")
    ]
    assert rep.devices[0].arch == "bmg" and rep.devices[0].name == "Intel Arc B-series (Battlemage)"


def test_through_installed_entry_points() -> None:
    host = Host.from_file(HOSTS / "max1550_x4.json")
    rep = hwbackends.explain(
        env={"ZE_FLAT_DEVICE_HIERARCHY": "FLAT", "ZE_AFFINITY_MASK": "2"}, host=host
    )
    assert rep.chosen == "xpu"
    assert [(d.index, d.physical_index) for d in rep.devices] == [(0, 2)]
