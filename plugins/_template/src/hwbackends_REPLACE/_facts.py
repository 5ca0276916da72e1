"""What REPLACE_DISPLAY devices can do. Each fact names its source: replace
them with yours.

Imported on demand (from ``capabilities``), never by selection: put tables here,
and declare one a class attribute with
``hwbackends.plugin.lazy("hwbackends_REPLACE._facts", "NAME")``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwbackends import Capabilities
from hwbackends.plugin import common_attention

if TYPE_CHECKING:
    from hwbackends import Device
    from hwbackends.plugin import BaseBackend

SOURCE = "REPLACE_DISPLAY documentation (the page that states each fact)"


def capabilities_for(backend: BaseBackend, device: Device | None) -> Capabilities:
    return Capabilities(
        backend=backend.name,
        device_type=backend.device_type,
        arch=device.arch if device else None,
        dtypes=("float32",),
        training_precision="fp32",
        attention=common_attention(),
        distributed_backend=backend.distributed_backend,
        kernel_device=None,
        device_map_auto=False,
        sources={
            "training_precision": f"fp32 until native bf16 is confirmed: {SOURCE}",
            "distributed_backend": f"gloo until a native collective exists: {SOURCE}",
            "device_map_auto": (
                "Accelerate cannot enumerate new device types: explicit device"
            ),
        },
    )
