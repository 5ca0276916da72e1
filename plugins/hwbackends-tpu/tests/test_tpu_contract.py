"""The hwbackends conformance kit against the tpu backend."""

from __future__ import annotations

from hwbackends_tpu import TpuBackend

from hwbackends.testing import BackendContract


class TestTpuContract(BackendContract):
    backend_cls = TpuBackend
    # The kit expects every Device to carry the class device type ("tpu"); hosts running
    # PyTorch/XLA ("xla" devices) are covered by test_tpu.py.
    hosts = ("hosts/v6e8_torch_tpu.json",)
    other_hosts = (
        "hosts/v4_8_accel_nodes.json",
        "hosts/v5e_no_package.json",
        "hosts/cpu_vm_torch_xla.json",
    )
    sdk_modules = ("torch_tpu", "torch_xla", "libtpu", "torch")
