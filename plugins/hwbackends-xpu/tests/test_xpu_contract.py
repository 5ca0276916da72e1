"""The hwbackends conformance kit against the xpu backend."""

from __future__ import annotations

from hwbackends_xpu import XpuBackend

from hwbackends.testing import BackendContract


class TestXpuContract(BackendContract):
    backend_cls = XpuBackend
    hosts = (
        "hosts/max1550_x4.json",
        "hosts/desktop_igpu_b580.json",
        "hosts/laptop_igpu_xpu_torch.json",
    )
    other_hosts = (
        "hosts/max1550_cpu_torch.json",
        "hosts/laptop_igpu_cpu_torch.json",
        "hosts/xpu_torch_no_gpu.json",
    )
    sdk_modules = ("intel_extension_for_pytorch", "torch")
