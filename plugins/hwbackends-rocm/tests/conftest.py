"""Fixtures of the rocm plugin's tests: its host files and a selection over both GPU plugins."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hwbackends_cuda import CudaBackend
from hwbackends_rocm import RocmBackend

from hwbackends import Host, SelectionReport
from hwbackends.testing import make_registry

ROCM_HOSTS = Path(__file__).parent / "hosts"


@pytest.fixture(scope="module")
def gpu_registry() -> Any:
    """The rocm and cuda plugins (plus the built-in cpu), as a user who installed both has."""
    return make_registry(RocmBackend, CudaBackend)


@pytest.fixture
def rocm_host() -> Callable[[str], Host]:
    return lambda name: Host.from_file(ROCM_HOSTS / f"{name}.json")


@pytest.fixture
def choose(gpu_registry: Any, rocm_host: Callable[[str], Host]) -> Callable[..., SelectionReport]:
    """``choose("mi300x-8", ROCR_VISIBLE_DEVICES="1")``: the selection report for a host."""

    def run(name: str, env: Mapping[str, str] | None = None, **variables: str) -> SelectionReport:
        e = {**(env or {}), **variables}
        return gpu_registry.select(e, rocm_host(name))

    return run
