"""hwbackends backend for REPLACE_DISPLAY accelerators.

Importing this module imports no vendor SDK and changes nothing; the core calls the methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from hwbackends.plugin import BaseBackend

from ._facts import capabilities_for

if TYPE_CHECKING:
    from hwbackends import Capabilities, Device, Host

__all__ = ["REPLACE_CLASSBackend"]


class REPLACE_CLASSBackend(BaseBackend):
    name: ClassVar[str] = "REPLACE"
    device_type: ClassVar[str] = "REPLACE_DEVICE"
    priority: ClassVar[int] = 50
    vendor: ClassVar[str | None] = "REPLACE_VENDOR"
    device_nodes: ClassVar[tuple[str, ...]] = ("REPLACE",)
    packages: ClassVar[tuple[str, ...]] = ("REPLACE_PACKAGE",)
    install_hint: ClassVar[str] = "pip install REPLACE_PACKAGE"
    distributed_backend: ClassVar[str] = "gloo"

    @property
    def display_name(self) -> str:
        return "REPLACE_DISPLAY"

    def capabilities(
        self, device: Device | None = None, *, host: Host | None = None
    ) -> Capabilities:
        return capabilities_for(self, device)
