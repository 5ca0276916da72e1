"""The hpu backend on simulated Gaudi hosts, through the real selection."""

from __future__ import annotations

from pathlib import Path

from hwbackends_hpu import HpuBackend

import hwbackends
from hwbackends import Host, SelectionReport
from hwbackends.testing import make_registry

HOSTS = Path(__file__).parent / "hosts"
REGISTRY = make_registry(HpuBackend)  # the built-in cpu plus this backend


def host(name: str) -> Host:
    return Host.from_file(HOSTS / f"{name}.json")


def select(name: str, env: dict[str, str] | None = None) -> SelectionReport:
    e = dict(env or {})
    return REGISTRY.select(e, host(name))


def test_gaudi2_box_all_modules() -> None:
    rep = select("hls_gaudi2_8")
    assert rep.chosen == "hpu"
    p = rep.status("hpu").probe
    assert p is not None and "8 Intel Gaudi device(s): Intel Gaudi 2" in p.reason
    assert [(d.index, d.physical_index) for d in rep.devices] == [(i, i) for i in range(8)]
    assert {d.arch for d in rep.devices} == {"gaudi2"}


def test_gaudi2_visible_modules_follow_module_ids_not_pci_order() -> None:
    rep = select("hls_gaudi2_8", {"HABANA_VISIBLE_MODULES": "4,5"})
    assert [(d.index, d.physical_index, d.label) for d in rep.devices] == [
        (0, 4, "4"),
        (1, 5, "5"),
    ]
    # module 4 sits at PCI bus 0xb3, module 5 at 0x4e: not PCI order
    assert [d.pci_bus_id for d in rep.devices] == ["0000:b3:00.0", "0000:4e:00.0"]


def test_gaudi2_capabilities() -> None:
    h = host("hls_gaudi2_8")
    b = HpuBackend()
    caps = b.capabilities(b.devices(h, {})[0], host=h)
    assert (caps.device_type, caps.distributed_backend, caps.kernel_device) == ("hpu", "hccl", None)
    assert caps.device_map_auto is True
    assert caps.training_precision == "bf16" and "float16" in caps.dtypes
    assert [a.name for a in caps.attention] == ["sdpa", "eager"]
    assert caps.quant("bitsandbytes").status == "unknown"


def test_gaudi1_has_no_fp16() -> None:
    rep = select("gaudi1_dl1")
    caps = HpuBackend().capabilities(rep.devices[0], host=host("gaudi1_dl1"))
    assert caps.arch == "gaudi1"
    assert caps.training_precision == "bf16" and "float16" not in caps.dtypes


def test_goya_is_not_driven_by_pytorch() -> None:
    goya = {"vendor": "habana", "pci_device_id": "0x0001"}
    h = Host.from_dict({"packages": {"habana-torch-plugin": "1.21.0"}, "devices": [goya]})
    p = HpuBackend().probe(h)
    assert p.hardware_present and not p.software_ready and "does not support goya" in p.reason


def test_plugin_without_gaudi() -> None:
    rep = select("plugin_no_gaudi")
    p = rep.status("hpu").probe
    assert p is not None and not p.hardware_present and p.software_ready
    assert rep.chosen == "cpu"


def test_gaudi_without_plugin() -> None:
    p = select("gaudi3_no_package").status("hpu").probe
    assert p is not None and p.hardware_present and not p.software_ready
    assert "Intel Gaudi 3" in p.reason
    assert p.reason.endswith("but the habana-torch-plugin package is not installed")
    assert p.hint is not None and "habana-torch-plugin" in p.hint


def test_through_installed_entry_points() -> None:
    rep = hwbackends.explain(env={"HABANA_VISIBLE_MODULES": "6,7"}, host=host("hls_gaudi2_8"))
    assert rep.chosen == "hpu"
    assert [d.physical_index for d in rep.devices] == [6, 7]
