"""Without its hardware, an accelerator backend judges its software from its declarations
alone (its fact modules stay unloaded); the answer agrees with what its stacks would say."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwbackends import Host

PLUGINS_DIR = Path(__file__).resolve().parents[1] / "plugins"
PLUGINS = ["xpu", "mps", "neuron", "tpu", "npu", "mlu", "musa", "hpu"]
PACKAGES = [
    "torch-neuronx", "torch-xla", "torch-tpu", "torch-npu", "torch-mlu", "torch-musa",
    "habana-torch-plugin",
]  # fmt: skip
TORCH = {
    None: None,
    "cpu": {"version": "2.13.0+cpu"},
    "xpu": {"version": "2.13.0+xpu", "xpu": "20250101"},
    "cuda": {"version": "2.13.0+cu128", "cuda": "12.8"},
}


def backend_of(name: str) -> type:
    mod = importlib.import_module(f"hwbackends_{name}")
    (cls,) = [
        v
        for k, v in vars(mod).items()
        if k.endswith("Backend") and isinstance(v, type) and v.__module__ == mod.__name__
    ]
    return cls


@pytest.mark.parametrize("name", PLUGINS)
@settings(max_examples=40, deadline=None)
@given(packages=st.sets(st.sampled_from(PACKAGES)), torch=st.sampled_from(sorted(TORCH, key=str)))
def test_no_hardware_software_verdict_agrees_with_the_stacks(
    name: str, packages: set[str], torch: str | None
) -> None:
    cls = backend_of(name)
    data: dict[str, object] = {"packages": {p: "2.13.0" for p in packages}}
    if TORCH[torch] is not None:
        data["torch"] = TORCH[torch]
    host = Host.from_dict(data)
    backend = cls()
    probe = backend.probe(host)
    assert not probe.hardware_present
    by_stacks = any(s.problem(host, frozenset()) is None for s in backend.stacks)
    assert probe.software_ready == by_stacks


def test_the_fact_modules_load_only_when_asked() -> None:
    import sys

    cls = backend_of("hpu")
    facts = f"{cls.__module__}._facts"
    sys.modules.pop(facts, None)
    importlib.reload(sys.modules[cls.__module__])
    cls = backend_of("hpu")
    cls().probe(Host.from_dict({}))
    assert facts not in sys.modules
    assert cls().pci_models and facts in sys.modules  # the declared table, on first read


@pytest.mark.parametrize(
    ("name", "host_file", "arch"),
    [
        ("hpu", "gaudi1_dl1", "gaudi1"),
        ("neuron", "trn1_32xlarge", "trn1"),
        ("tpu", "v4_8_accel_nodes", "v4"),
        ("tpu", "v6e8_torch_tpu", "v6e"),
    ],
)
def test_arch_of_a_bare_device_is_what_devices_show(name: str, host_file: str, arch: str) -> None:
    # a host device with only its PCI id: arch_of completes it from the PCI table, as the
    # devices (and `hwbackends devices`) do
    backend = backend_of(name)()
    host = Host.from_file(
        PLUGINS_DIR / f"hwbackends-{name}" / "tests" / "hosts" / f"{host_file}.json"
    )
    own = [d for d in host.devices_of(backend.vendor) if backend.accepts(d)]  # its own kinds
    assert own and all(d.arch is None for d in own)
    assert {backend.arch_of(d) for d in own} == {arch}
    assert {d.arch for d in backend.devices(host, {})} == {arch}


def test_first_gen_gaudi_is_pointed_at_the_last_release_that_supports_it() -> None:
    hpu = backend_of("hpu")()
    hosts = PLUGINS_DIR / "hwbackends-hpu" / "tests" / "hosts"
    data = json.loads((hosts / "gaudi1_dl1.json").read_text(encoding="utf-8"))
    data["packages"] = {"torch": "2.1.1"}  # the Gaudi PyTorch packages not installed
    probe = hpu.probe(Host.from_dict(data))
    assert (probe.hardware_present, probe.software_ready) == (True, False)
    assert probe.hint is not None
    assert probe.hint.startswith("first-gen Gaudi needs Intel Gaudi software 1.21 or earlier")
    # Gaudi 3: the current installer
    gaudi3 = hpu.probe(Host.from_file(hosts / "gaudi3_no_package.json"))
    assert gaudi3.hint == hpu.install_hint


@pytest.mark.parametrize(("driver", "says"), [
    ("vfio-pci", "which keeps it for a virtual machine's guest"),
    ("pci-stub", "which keeps every driver off it"),
])  # fmt: skip
def test_devices_held_back_from_their_vendors_driver_are_not_ready(driver: str, says: str) -> None:
    """Any vendor's accelerators bound to vfio-pci or pci-stub (a GPU passed to a VM) are
    present and not ready, with the fix, whatever software is installed; one left to its
    vendor's driver keeps the backend's usual answer."""
    from hwbackends_hpu import HpuBackend

    d = json.loads(
        (
            Path(__file__).resolve().parent.parent
            / "plugins/hwbackends-hpu/tests/hosts/hls_gaudi2_8.json"
        ).read_text()
    )
    ready = HpuBackend().probe(Host.from_dict(d))
    held = json.loads(json.dumps(d))
    for dev in held["devices"]:
        dev["driver"] = driver
    p = HpuBackend().probe(Host.from_dict(held))
    assert (p.hardware_present, p.available) == (True, False)
    assert (
        "but 0000:33:00.0, 0000:9a:00.0, " in p.reason
        and f"are bound to {driver}, {says}" in p.reason
    )
    assert p.hint and f"{driver}.ids=" in p.hint
    held["devices"][0]["driver"] = "habanalabs"
    assert HpuBackend().probe(Host.from_dict(held)).available == ready.available
