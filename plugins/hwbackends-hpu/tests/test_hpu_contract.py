"""The hwbackends conformance kit against the hpu backend."""

from __future__ import annotations

from hwbackends_hpu import HpuBackend

from hwbackends.testing import BackendContract


class TestHpuContract(BackendContract):
    backend_cls = HpuBackend
    hosts = ("hosts/hls_gaudi2_8.json", "hosts/gaudi1_dl1.json")
    other_hosts = ("hosts/gaudi3_no_package.json", "hosts/plugin_no_gaudi.json")
    sdk_modules = ("habana_frameworks", "torch")
