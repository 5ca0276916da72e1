"""Fixtures of the cuda plugin's tests: simulated hosts and the real two-plugin selection."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from hwbackends import Host
from hwbackends._discovery import EntryPointSpec
from hwbackends._registry import Registry, SelectionReport, Settings

CUDA_HOSTS = Path(__file__).parent / "hosts"

#: cuda and rocm side by side, as a user who installed both plugins has them.
GPU_SPECS = (
    EntryPointSpec("cuda", "hwbackends_cuda:CudaBackend", "hwbackends-cuda", "0.1.0"),
    EntryPointSpec("rocm", "hwbackends_rocm:RocmBackend", "hwbackends-rocm", "0.1.0"),
)


def cuda_host(name: str) -> Host:
    return Host.from_file(CUDA_HOSTS / f"{name}.json")


@pytest.fixture
def load_host() -> Callable[[str], Host]:
    """``load_host("h100-sxm-8")``: a host file of this plugin's tests/hosts."""
    return cuda_host


@pytest.fixture
def select() -> Callable[..., SelectionReport]:
    """``select("h100-sxm-8", env)``: the real selection over cuda + rocm (+ built-in cpu)."""

    def run(name: str, env: Mapping[str, str] | None = None) -> SelectionReport:
        e = dict(env or {})
        return Registry(specs=GPU_SPECS).select(e, cuda_host(name), Settings.from_env(e))

    return run
