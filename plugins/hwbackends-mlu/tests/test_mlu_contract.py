"""The hwbackends conformance kit against the mlu backend."""

from __future__ import annotations

from hwbackends_mlu import MluBackend

from hwbackends.testing import BackendContract


class TestMluContract(BackendContract):
    backend_cls = MluBackend
    hosts = ("hosts/mlu370_x4.json",)
    other_hosts = ("hosts/mlu370_no_package.json", "hosts/torch_mlu_no_card.json")
    sdk_modules = ("torch_mlu", "torch")
