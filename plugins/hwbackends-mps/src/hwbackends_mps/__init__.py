"""Apple Silicon GPUs through PyTorch's MPS backend.

Available means: macOS on Apple Silicon (the host reader adds an "apple" device there), macOS
12.3 or later when the host knows the version, and torch >= 1.12 installed. There is one GPU
and no visibility variable.
"""

from __future__ import annotations

from hwbackends.facts import AcceleratorBackend, ArchFacts, Stack
from hwbackends.plugin import AttentionOption, lazy
from hwbackends.visibility import SingleDevice

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

    from hwbackends import Host, HostDevice

__all__ = ["MpsBackend"]
__version__ = "0.1.0"


def macos_version(host: Host) -> str | None:
    """The macOS release from the apple device's ``macos`` field, when the host gives it."""
    for d in host.devices_of("apple"):
        v = d.extra.get("macos")
        if isinstance(v, str) and v:
            return v
    return None


# The software stack is part of the declaration (probes without hardware consult it): it
# stays here, while the precision and attention tables load on demand from _facts.
HF = "docs/reference/hf-integration.md"

STACK = Stack(
    label="torch with MPS (macOS arm64 wheel)",
    device_type="mps",
    distributed_backend="gloo",
    packages=("torch",),
    min_torch="1.12",
    kernel_device="mps",
    device_map_auto=True,
    source=(
        "accelerate utils/imports.py is_mps_available: torch >= 1.12; MPS is not a "
        "collective backend, so process groups use gloo on the CPU (transformers "
        f"distributed/utils.py: mps falls back to CPU) ({HF} §5.2)"
    ),
)


class MpsBackend(AcceleratorBackend):
    name: ClassVar[str] = "mps"
    # The plugin API this class was written for; the core refuses it when it speaks another
    # (docs/writing-a-backend.md maps API versions to hwbackends releases).
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "mps"
    priority: ClassVar[int] = 50
    vendor: ClassVar[str | None] = "apple"
    display: ClassVar[str] = "Apple Silicon GPU"
    visibility = SingleDevice(
        notes={"PYTORCH_ENABLE_MPS_FALLBACK": "it only enables CPU fallback for missing ops"},
        why=" for MPS",
        label="mps",
    )
    stacks: ClassVar[tuple[Stack, ...]] = (STACK,)
    packages: ClassVar[tuple[str, ...]] = ("torch",)
    distributed_backend: ClassVar[str] = "gloo"
    install_hint: ClassVar[str] = "pip install torch (the macOS arm64 wheel includes MPS)"
    hardware_hint: ClassVar[str] = "MPS needs macOS on an Apple Silicon (arm64) Mac"
    attention: ClassVar[tuple[AttentionOption, ...]] = lazy("hwbackends_mps._facts", "ATTENTION")
    quantization = lazy("hwbackends_mps._facts", "QUANTIZATION")
    limitations = lazy("hwbackends_mps._facts", "LIMITATIONS")

    def read_devices(
        self, root: str, found: tuple[HostDevice, ...], *, system: str, machine: str
    ) -> tuple[HostDevice, ...]:
        """The one Apple GPU of an Apple Silicon Mac; it is not a PCI function."""
        if system != "Darwin" or machine != "arm64":
            return found
        import platform

        from hwbackends import HostDevice

        # mac_ver() reads SystemVersion.plist; MPS needs macOS 12.3, bf16 on MPS macOS 14.
        macos = platform.mac_ver()[0]
        extra = {"macos": macos} if macos else {}
        gpu = HostDevice(
            vendor="apple", name="Apple Silicon GPU", arch="apple-silicon", extra=extra
        )
        return (*found, gpu)

    def extra_problem(self, host: Host) -> str | None:
        from hwbackends.facts import version_in_range

        from . import _facts

        mac = macos_version(host)
        if mac is not None and version_in_range(mac, _facts.MIN_MACOS) is False:
            return f"MPS needs macOS >= {_facts.MIN_MACOS}, this Mac runs macOS {mac}"
        return None

    def facts_for(self, arch: str | None, host: Host | None) -> ArchFacts:
        from hwbackends.facts import version_in_range

        from . import _facts

        mac = macos_version(host) if host is not None else None
        if mac is None:
            return _facts.UNKNOWN_MACOS
        tv = host.package("torch") if host is not None else None
        ok = version_in_range(mac, _facts.BF16_MACOS) and version_in_range(tv, _facts.BF16_TORCH)
        return _facts.BF16 if ok else _facts.NO_BF16
