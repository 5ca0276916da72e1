"""Fixtures of the rocm plugin's tests: its host files and a selection over both GPU plugins."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from hwbackends import Host
from hwbackends._discovery import EntryPointSpec
from hwbackends._registry import Registry, SelectionReport, Settings

ROCM_HOSTS = Path(__file__).parent / "hosts"


@pytest.fixture(scope="module")
def gpu_registry() -> Registry:
    """The rocm and cuda plugins (plus the built-in cpu), loaded by their entry-point values."""
    return Registry(
        specs=[
            EntryPointSpec("rocm", "hwbackends_rocm:RocmBackend", "hwbackends-rocm", "0.1.0"),
            EntryPointSpec("cuda", "hwbackends_cuda:CudaBackend", "hwbackends-cuda", "0.1.0"),
        ]
    )


@pytest.fixture
def rocm_host() -> Callable[[str], Host]:
    return lambda name: Host.from_file(ROCM_HOSTS / f"{name}.json")


@pytest.fixture
def choose(
    gpu_registry: Registry, rocm_host: Callable[[str], Host]
) -> Callable[..., SelectionReport]:
    """``choose("mi300x-8", ROCR_VISIBLE_DEVICES="1")``: the selection report for a host."""

    def run(name: str, env: Mapping[str, str] | None = None, **variables: str) -> SelectionReport:
        e = {**(env or {}), **variables}
        return gpu_registry.select(e, rocm_host(name), Settings.from_env(e))

    return run
