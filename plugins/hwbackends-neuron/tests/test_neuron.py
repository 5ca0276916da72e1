"""The neuron backend on simulated trn1, trn2 and inf2 hosts, through the real selection."""

from __future__ import annotations

from pathlib import Path

import pytest
from hwbackends_neuron import NeuronBackend

import hwbackends
from hwbackends import Host, SelectionReport
from hwbackends.testing import make_registry

HOSTS = Path(__file__).parent / "hosts"
REGISTRY = make_registry(NeuronBackend)  # the built-in cpu plus this backend


def select(name: str, env: dict[str, str] | None = None) -> SelectionReport:
    e = dict(env or {})
    return REGISTRY.select(e, Host.from_file(HOSTS / f"{name}.json"))


def test_trn1_xla_stack_all_cores() -> None:
    rep = select("trn1_32xlarge")
    assert rep.chosen == "neuron"
    p = rep.status("neuron").probe
    assert p is not None and p.available
    assert "16 AWS Neuron device(s): AWS Trainium" in p.reason
    assert "XLA-based" in p.reason
    # 16 devices x 2 NeuronCores; the EC2 VGA function (0x1111) is not a Neuron device.
    assert [(d.index, d.physical_index) for d in rep.devices] == [(i, i) for i in range(32)]
    assert {d.device_type for d in rep.devices} == {"xla"}
    assert rep.devices[3].torch_device == "xla:3"
    assert rep.devices[3].pci_bus_id == "0000:11:1e.0" and rep.devices[3].sub_index == 1
    assert rep.devices[0].arch == "trn1" and rep.devices[0].name == "AWS Trainium"


def test_trn1_visible_cores_range() -> None:
    rep = select("trn1_32xlarge", {"NEURON_RT_VISIBLE_CORES": "4-7"})
    assert [(d.index, d.physical_index) for d in rep.devices] == [(0, 4), (1, 5), (2, 6), (3, 7)]


def test_trn1_capabilities() -> None:
    host = Host.from_file(HOSTS / "trn1_32xlarge.json")
    b = NeuronBackend()
    caps = b.capabilities(b.devices(host, {})[0], host=host)
    assert caps.device_type == "xla"
    assert caps.distributed_backend == "xla"
    assert caps.kernel_device is None
    assert caps.device_map_auto is False
    assert caps.training_precision == "bf16"
    assert [a.name for a in caps.attention] == ["sdpa", "eager"]
    assert caps.quant("eetq").status == "unsupported"
    assert caps.quant("awq").status == "unknown"
    assert any("fp16" in lim.text for lim in caps.limitations)


def test_trn2_native_lnc2() -> None:
    rep = select("trn2_48xlarge")
    assert rep.chosen == "neuron"
    # 16 devices x 8 physical cores, paired by LNC=2 (the Trn2 default): 64 logical cores.
    assert len(rep.devices) == 64
    assert rep.devices[5].torch_device == "neuron:5"
    assert rep.devices[5].pci_bus_id == "0000:11:1e.0"
    host = Host.from_file(HOSTS / "trn2_48xlarge.json")
    caps = NeuronBackend().capabilities(rep.devices[0], host=host)
    assert (caps.device_type, caps.distributed_backend, caps.kernel_device) == (
        "neuron",
        "neuron",
        "neuron",
    )
    assert caps.device_map_auto is False


def test_inf2_with_native_only_is_unsupported() -> None:
    rep = select("inf2_24xlarge_native")
    assert rep.chosen == "cpu" and rep.rule == "cpu-fallback"
    p = rep.status("neuron").probe
    assert p is not None and p.hardware_present and not p.software_ready
    assert "TorchNeuron native backend) does not support inf2" in p.reason
    assert p.hint is not None and "torch-xla" in p.hint


def test_inf2_xla() -> None:
    rep = select("inf2_xlarge_xla")
    assert rep.chosen == "neuron"
    assert [d.torch_device for d in rep.devices] == ["xla:0", "xla:1"]
    assert rep.devices[0].arch == "inf2"


def test_torch_version_mismatch() -> None:
    p = select("trn2_torch_mismatch").status("neuron").probe
    assert p is not None and not p.available
    assert "torch-neuronx 2.13.3.0.1201 is built for torch 2.13, but torch 2.14.0" in p.reason


def test_package_but_no_hardware() -> None:
    rep = select("m7i_with_torch_neuronx")
    p = rep.status("neuron").probe
    assert p is not None and not p.hardware_present and p.software_ready
    assert p.reason == "no AWS Neuron hardware found"
    assert p.hint is not None and "neuron-ls" in p.hint
    assert rep.chosen == "cpu"


def test_hardware_but_no_package() -> None:
    rep = select("trn1_no_package")
    p = rep.status("neuron").probe
    assert p is not None and p.hardware_present and not p.software_ready
    assert p.reason.endswith("but the torch-neuronx package is not installed")
    assert p.hint is not None and "pip.repos.neuron.amazonaws.com" in p.hint
    assert rep.chosen == "cpu" and rep.rule == "cpu-fallback"
    assert any("neuron:" in w for w in rep.warnings)


def test_device_node_alone_is_evidence() -> None:
    host = Host.from_dict(
        {"device_nodes": ["/dev/neuron0"], "packages": {"torch-neuronx": "2.13.3.0"}}
    )
    p = NeuronBackend().probe(host)
    assert p.hardware_present and "/dev/neuron0" in p.reason


def test_through_installed_entry_points() -> None:
    host = Host.from_file(HOSTS / "trn2_48xlarge.json")
    rep = hwbackends.explain(env={"NEURON_RT_VISIBLE_CORES": "8,9"}, host=host)
    assert rep.chosen == "neuron"
    assert [(d.index, d.physical_index, d.torch_device) for d in rep.devices] == [
        (0, 8, "neuron:0"),
        (1, 9, "neuron:1"),
    ]


@pytest.mark.parametrize("indices", [[0], [3, 4], [10, 11, 12]])
def test_visibility_env_round_trip(indices: list[int]) -> None:
    host = Host.from_file(HOSTS / "trn1_32xlarge.json")
    b = NeuronBackend()
    env = b.visibility_env(indices, host=host)
    assert [d.physical_index for d in b.devices(host, env)] == indices
