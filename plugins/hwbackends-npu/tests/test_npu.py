"""The npu backend on simulated Ascend hosts, through the real selection."""

from __future__ import annotations

from pathlib import Path

from hwbackends_npu import NpuBackend

import hwbackends
from hwbackends import Host, SelectionReport
from hwbackends.testing import make_registry

HOSTS = Path(__file__).parent / "hosts"
REGISTRY = make_registry(NpuBackend)  # the built-in cpu plus this backend


def host(name: str) -> Host:
    return Host.from_file(HOSTS / f"{name}.json")


def select(name: str, env: dict[str, str] | None = None) -> SelectionReport:
    e = dict(env or {})
    return REGISTRY.select(e, host(name))


def test_910b_box() -> None:
    rep = select("atlas800t_a2_910b_x8")
    assert rep.chosen == "npu"
    p = rep.status("npu").probe
    # the HiSilicon DMA and ZIP engines of the Kunpeng host are not NPUs
    assert p is not None and "8 Huawei Ascend device(s): Huawei Ascend 910B" in p.reason
    assert [(d.index, d.physical_index) for d in rep.devices] == [(i, i) for i in range(8)]
    assert rep.devices[0].pci_bus_id == "0000:c1:00.0" and rep.devices[0].arch == "ascend910b"


def test_910b_visible_devices() -> None:
    rep = select("atlas800t_a2_910b_x8", {"ASCEND_RT_VISIBLE_DEVICES": "2,3"})
    assert [(d.index, d.physical_index, d.torch_device) for d in rep.devices] == [
        (0, 2, "npu:0"),
        (1, 3, "npu:1"),
    ]


def test_910b_capabilities() -> None:
    h = host("atlas800t_a2_910b_x8")
    b = NpuBackend()
    caps = b.capabilities(b.devices(h, {})[0], host=h)
    assert (caps.device_type, caps.distributed_backend, caps.kernel_device) == (
        "npu",
        "hccl",
        "npu",
    )
    assert caps.device_map_auto is True
    assert caps.training_precision == "bf16"
    fa2 = caps.attention[0]
    assert fa2.name == "flash_attention_2" and fa2.packages == ("torch-npu",)
    assert fa2.hub_kernel is None and "NPU_FA2_SPARSE_MODE" in fa2.note
    assert [a.name for a in caps.attention[1:]] == ["sdpa", "eager"]


def test_910_first_generation_is_fp16() -> None:
    rep = select("atlas800_910_x8")
    caps = NpuBackend().capabilities(rep.devices[0], host=host("atlas800_910_x8"))
    assert caps.arch == "ascend910"
    assert caps.training_precision == "fp16" and "bfloat16" not in caps.dtypes
    assert [a.name for a in caps.attention] == ["sdpa", "eager"]


def test_310p_is_inference_only() -> None:
    rep = select("atlas300i_duo_310p")
    caps = NpuBackend().capabilities(rep.devices[0], host=host("atlas300i_duo_310p"))
    assert any("inference chips" in lim.text for lim in caps.limitations)


def test_torch_npu_version_mismatch() -> None:
    p = select("910b_torch_npu_mismatch").status("npu").probe
    assert p is not None and p.hardware_present and not p.software_ready
    assert "torch-npu 2.5.1 is built for torch 2.5, but torch 2.6.0 is installed" in p.reason


def test_package_but_no_npu() -> None:
    rep = select("kunpeng_no_npu")
    p = rep.status("npu").probe
    assert p is not None and not p.hardware_present and p.software_ready
    assert rep.chosen == "cpu"


def test_npu_but_no_package() -> None:
    p = select("910b_no_package").status("npu").probe
    assert p is not None and p.hardware_present and not p.software_ready
    assert p.reason.endswith("but the torch-npu package is not installed")
    assert p.hint is not None and "torch-npu" in p.hint


def test_through_installed_entry_points() -> None:
    rep = hwbackends.explain(
        env={"ASCEND_RT_VISIBLE_DEVICES": "7"}, host=host("atlas800t_a2_910b_x8")
    )
    assert rep.chosen == "npu"
    assert [(d.index, d.physical_index) for d in rep.devices] == [(0, 7)]
