"""The opt-in confirm step (hwbackends._selection.confirm), run for real in a subprocess on this
CPU box, and with faked runtime answers for what a CPU box cannot show (GPUs, mismatches,
timeouts)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest
from hwbackends_cuda import CudaBackend

from hwbackends import Host
from hwbackends._base.protocol import Device
from hwbackends._kit.cpu import CpuBackend
from hwbackends._selection import confirm as _confirm
from hwbackends.plugin import BaseBackend


class NoSuchDevice(BaseBackend):
    """A backend whose torch module does not exist: torch.nosuchdev."""

    name: ClassVar[str] = "nosuchdev"
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "nosuchdev"

    def devices(self, host: Host, env: Mapping[str, str]) -> list[Device]:
        return []


@pytest.fixture(scope="module")
def system() -> Host:
    return Host.from_system()


def test_cpu_backend_confirms_for_real(system: Host) -> None:
    import torch  # noqa: F401 - the confirm step imports it in a child process

    c = CpuBackend().confirm(system, {}, timeout=120)
    assert c.ok, c.message
    assert (c.predicted_count, c.observed_count) == (1, 1)
    assert c.message.startswith("torch 2.13.0+cpu torch.cpu agrees with the prediction")
    assert c.seconds > 0
    assert json.loads(json.dumps(c.to_dict()))["ok"] is True


def test_cuda_on_a_machine_without_gpus_confirms_zero(system: Host) -> None:
    import torch  # noqa: F401 - the confirm step imports it in a child process

    if system.devices_of("nvidia"):
        pytest.skip("this machine has NVIDIA GPUs")
    c = CudaBackend().confirm(system, {}, timeout=120)
    assert c.ok, c.message
    assert (c.predicted_count, c.observed_count) == (0, 0)


def test_missing_device_module_is_a_clear_failure(system: Host) -> None:
    import torch  # noqa: F401 - the confirm step imports it in a child process

    c = NoSuchDevice().confirm(system, {}, timeout=120)
    assert not c.ok
    assert c.observed_count is None
    assert c.message == "torch 2.13.0+cpu has no torch.nosuchdev module with device_count()"


def test_missing_torch_is_a_clear_failure(system: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    bare = shutil.which("python3", path="/usr/bin:/bin")
    if bare is None:
        pytest.skip("no system python3")
    probe = subprocess.run([bare, "-c", "import torch"], capture_output=True, timeout=60)
    if probe.returncode == 0:
        pytest.skip("the system python3 has torch")
    monkeypatch.setattr(sys, "executable", bare)
    c = CpuBackend().confirm(system, {}, timeout=120)
    assert not c.ok
    assert c.message.startswith("torch cannot be imported: ModuleNotFoundError")


def _fake(monkeypatch: pytest.MonkeyPatch, result: dict[str, object]) -> list[dict[str, str]]:
    seen: list[dict[str, str]] = []

    def run(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int, str, str]:
        assert argv[:3] == [sys.executable, "-I", "-c"] and argv[-1] == "cuda"
        seen.append(env)
        return 0, "some warning on stdout\n" + json.dumps(result) + "\n", ""

    monkeypatch.setattr(_confirm, "_run", run)
    return seen


def h100s() -> Host:
    return Host.from_file(Path(__file__).parent / "hosts" / "h100-sxm-8.json")


def test_faked_runtime_that_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    host = h100s()
    buses = ["0000:3a:00.0", "0000:2a:00.0"]
    seen = _fake(monkeypatch, {"torch": "2.8.0+cu128", "count": 2, "bus_ids": buses})
    # The parent's own values must not leak: env decides the visibility variables.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    c = CudaBackend().confirm(host, {"CUDA_VISIBLE_DEVICES": "2,1"})
    assert c.ok, c.message
    assert c.predicted_bus_ids == ("0000:3a:00.0", "0000:2a:00.0")
    assert c.message == (
        "torch 2.8.0+cu128 torch.cuda agrees with the prediction (count and PCI bus ids: "
        "2 device(s)) (the prediction comes from the simulated host "
        f"{host.source})"
    )
    assert seen[0]["CUDA_VISIBLE_DEVICES"] == "2,1"
    assert "CUDA_DEVICE_ORDER" not in seen[0]


def test_faked_runtime_that_disagrees(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(monkeypatch, {"torch": "2.8.0+cu128", "count": 2,
                        "bus_ids": ["0000:2a:00.0", "0000:3a:00.0"]})  # fmt: skip
    c = CudaBackend().confirm(h100s(), {"CUDA_VISIBLE_DEVICES": "2,1"})
    assert not c.ok
    assert c.message.startswith(
        "mismatch in device order: 0: predicted 0000:3a:00.0 observed 0000:2a:00.0"
    )
    _fake(monkeypatch, {"torch": "2.8.0+cu128", "count": 7, "bus_ids": [None] * 7})
    c = CudaBackend().confirm(h100s(), {})
    assert not c.ok
    assert c.message.startswith("mismatch: torch 2.8.0+cu128 torch.cuda sees 7 device(s), "
                                "hwbackends predicted 8")  # fmt: skip
    assert c.observed_count == 7


def test_count_only_when_bus_ids_are_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(monkeypatch, {"torch": "2.8.0+cu128", "count": 8, "bus_ids": [None] * 8})
    c = CudaBackend().confirm(h100s(), {})
    assert c.ok
    assert "count (bus ids not available)" in c.message


def test_timeout_and_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    def hang(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int, str, str]:
        raise subprocess.TimeoutExpired(argv, timeout)

    monkeypatch.setattr(_confirm, "_run", hang)
    c = CudaBackend().confirm(h100s(), {}, timeout=0.5)
    assert not c.ok
    assert c.message.startswith("the runtime did not answer within 0.5 s (timed out)")

    def crash(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int, str, str]:
        return -11, "", "Fatal Python error: Segmentation fault\n"

    monkeypatch.setattr(_confirm, "_run", crash)
    c = CudaBackend().confirm(h100s(), {})
    assert not c.ok
    assert c.message.startswith(
        "the runtime check exited with code -11 and no result: Fatal Python error: "
        "Segmentation fault"
    )


def test_real_timeout(system: Host) -> None:
    # A timeout far shorter than an interpreter start with torch: the real subprocess path.
    c = CpuBackend().confirm(system, {}, timeout=0.001)
    assert not c.ok
    assert "timed out" in c.message
