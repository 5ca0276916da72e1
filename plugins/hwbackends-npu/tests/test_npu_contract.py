"""The hwbackends conformance kit against the npu backend."""

from __future__ import annotations

from hwbackends_npu import NpuBackend

from hwbackends.testing import BackendContract


class TestNpuContract(BackendContract):
    backend_cls = NpuBackend
    hosts = (
        "hosts/atlas800t_a2_910b_x8.json",
        "hosts/atlas800_910_x8.json",
        "hosts/atlas300i_duo_310p.json",
    )
    other_hosts = (
        "hosts/910b_torch_npu_mismatch.json",
        "hosts/910b_no_package.json",
        "hosts/kunpeng_no_npu.json",
    )
    sdk_modules = ("torch_npu", "torch")
