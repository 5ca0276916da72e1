"""The hwbackends conformance kit against the mps backend."""

from __future__ import annotations

from hwbackends_mps import MpsBackend

from hwbackends.testing import BackendContract


class TestMpsContract(BackendContract):
    backend_cls = MpsBackend
    hosts = ("hosts/m2_max_sonoma.json", "hosts/m1_ventura.json")
    other_hosts = (
        "hosts/m3_no_torch.json",
        "hosts/m1_monterey_old.json",
        "hosts/linux_with_torch.json",
    )
    sdk_modules = ("torch",)
