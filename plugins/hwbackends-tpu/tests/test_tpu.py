"""The tpu backend on simulated TPU VMs, through the real selection."""

from __future__ import annotations

from pathlib import Path

from hwbackends_tpu import TpuBackend

import hwbackends
from hwbackends import Host, SelectionReport
from hwbackends.testing import make_registry

HOSTS = Path(__file__).parent / "hosts"
REGISTRY = make_registry(TpuBackend)  # the built-in cpu plus this backend


def host(name: str) -> Host:
    return Host.from_file(HOSTS / f"{name}.json")


def select(name: str, env: dict[str, str] | None = None) -> SelectionReport:
    e = dict(env or {})
    return REGISTRY.select(e, host(name))


def test_v5litepod8_xla() -> None:
    rep = select("v5litepod8_xla")
    assert rep.chosen == "tpu"
    p = rep.status("tpu").probe
    assert p is not None and "8 Google TPU device(s): Google TPU v5e" in p.reason
    assert "torch-xla" in p.reason
    # the gVNIC function (0x0042) is not a chip
    assert [(d.index, d.physical_index, d.torch_device) for d in rep.devices] == [
        (i, i, f"xla:{i}") for i in range(8)
    ]
    assert rep.devices[0].arch == "v5e"
    caps = TpuBackend().capabilities(rep.devices[0], host=host("v5litepod8_xla"))
    assert (caps.device_type, caps.distributed_backend, caps.kernel_device) == ("xla", "xla", None)
    assert caps.device_map_auto is False
    assert caps.training_precision == "bf16" and caps.dtypes == ("float32", "bfloat16")
    assert "flex_attention" not in [a.name for a in caps.attention]
    assert any("flex_attention" in lim.text for lim in caps.limitations)


def test_v5e_visible_chips_with_bounds() -> None:
    env = {
        "TPU_VISIBLE_CHIPS": "2,3",
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,2,1",
        "TPU_PROCESS_BOUNDS": "1,1,1",
    }
    rep = select("v5litepod8_xla", env)
    assert [(d.index, d.physical_index) for d in rep.devices] == [(0, 2), (1, 3)]


def test_torch_tpu_preferred() -> None:
    rep = select("v6e8_torch_tpu")
    assert [d.torch_device for d in rep.devices][:2] == ["tpu:0", "tpu:1"]
    caps = TpuBackend().capabilities(rep.devices[0], host=host("v6e8_torch_tpu"))
    assert (caps.device_type, caps.distributed_backend, caps.kernel_device) == (
        "tpu",
        "tpu_dist",
        "tpu",
    )
    assert caps.arch == "v6e"


def test_torch_xla_version_mismatch() -> None:
    p = select("v4_8_accel_nodes").status("tpu").probe
    assert p is not None and p.hardware_present and not p.software_ready
    assert "torch-xla 2.8.0 is built for torch 2.8, but torch 2.9.0 is installed" in p.reason
    assert "/dev/accel0" in " ".join(p.evidence)


def test_package_but_no_tpu() -> None:
    rep = select("cpu_vm_torch_xla")
    p = rep.status("tpu").probe
    assert p is not None and not p.hardware_present and p.software_ready
    assert rep.chosen == "cpu"


def test_tpu_but_no_package() -> None:
    p = select("v5e_no_package").status("tpu").probe
    assert p is not None and p.hardware_present and not p.software_ready
    assert p.reason.endswith("but the torch-tpu package is not installed")
    assert p.hint is not None and "torch_xla[tpu]" in p.hint


def test_through_installed_entry_points() -> None:
    rep = hwbackends.explain(env={"TPU_VISIBLE_CHIPS": "5"}, host=host("v5litepod8_xla"))
    assert rep.chosen == "tpu"
    assert [(d.index, d.physical_index) for d in rep.devices] == [(0, 5)]
