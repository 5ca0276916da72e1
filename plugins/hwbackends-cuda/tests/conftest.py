"""Fixtures of the cuda plugin's tests: simulated hosts and the real two-plugin selection."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from hwbackends_cuda import CudaBackend
from hwbackends_rocm import RocmBackend

from hwbackends import Host, SelectionReport
from hwbackends.testing import make_registry

CUDA_HOSTS = Path(__file__).parent / "hosts"

#: cuda and rocm side by side, as a user who installed both plugins has them.
GPU_BACKENDS = (CudaBackend, RocmBackend)


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
        return make_registry(*GPU_BACKENDS).select(e, cuda_host(name))

    return run
