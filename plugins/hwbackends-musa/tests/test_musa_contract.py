"""The hwbackends conformance kit against the musa backend."""

from __future__ import annotations

from hwbackends_musa import MusaBackend

from hwbackends.testing import BackendContract


class TestMusaContract(BackendContract):
    backend_cls = MusaBackend
    hosts = ("hosts/s4000_x4.json",)
    other_hosts = ("hosts/s4000_no_package.json", "hosts/torch_musa_no_gpu.json")
    sdk_modules = ("torch_musa", "torch")
