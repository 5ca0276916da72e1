"""The CPU backend, built into the core so that the core alone always has an answer."""

from __future__ import annotations

from hwbackends._version import API_VERSION
from hwbackends.plugin import BaseBackend, common_attention

TYPE_CHECKING = False  # see hwbackends.plugin: this module is on the cached-selection path
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import ClassVar

    from hwbackends._base.protocol import Capabilities, Device, Probe
    from hwbackends._machine.host import Host

__all__ = ["CpuBackend"]

# x86: AVX512-BF16 / AMX-BF16 run bf16 matmuls natively; Arm: the "bf16" feature (FEAT_BF16).
# Flag names are the kernel's /proc/cpuinfo spellings (arch/x86/include/asm/cpufeatures.h,
# arch/arm64/kernel/cpuinfo.c).
_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
_FP16_FLAGS = frozenset({"avx512_fp16", "amx_fp16", "fphp", "asimdhp"})
_FLAGS_SOURCE = "/proc/cpuinfo flags (Linux arch/x86/include/asm/cpufeatures.h, arm64 cpuinfo.c)"
_KERNEL_DEVICE_SOURCE = (
    "kernels 0.17.2 kernels/layer/kernelize.py _validate_device_type accepts cpu, and "
    "transformers 5.22.2 integrations/hub_kernels.py _build_kernel_mapping maps cpu layers"
)
_KERNEL_CONFIG_SOURCE = (
    "transformers 5.22.2 utils/kernel_config.py KERNELS_SUPPORTED_DEVICE_TYPES (no cpu)"
)


class CpuBackend(BaseBackend):
    name: ClassVar[str] = "cpu"
    api_version: ClassVar[int] = API_VERSION  # built in: always the core's own
    device_type: ClassVar[str] = "cpu"
    priority: ClassVar[int] = 0  # every accelerator comes first
    distributed_backend: ClassVar[str] = "gloo"

    def probe(self, host: Host) -> Probe:
        from hwbackends._base.protocol import Probe

        model = host.cpu.model or "unknown model"
        n = host.cpu.count
        cores = f"{n} logical core{'' if n == 1 else 's'}" if n else "core count not known"
        return Probe(
            backend=self.name,
            hardware_present=True,
            software_ready=True,
            reason=f"the CPU is always usable ({model}, {cores})",
            evidence=(f"cpu: {model}",),
        )

    def devices(self, host: Host, env: Mapping[str, str]) -> list[Device]:
        # No runtime variable hides the CPU (hwbackends.visibility says so for "cpu").
        from hwbackends._base.protocol import Device

        return [
            Device(
                backend=self.name,
                device_type="cpu",
                index=0,
                physical_index=0,
                name=host.cpu.model or None,
                arch=host.machine,
                label="cpu",
            )
        ]

    def capabilities(
        self, device: Device | None = None, *, host: Host | None = None
    ) -> Capabilities:
        from hwbackends._base.protocol import Capabilities, Limitation
        from hwbackends._kit.hf_tables import kernel_layers, transformers_tables

        flags = host.cpu.flags if host is not None else frozenset()
        bf16 = bool(flags & _BF16_FLAGS)
        fp16 = bool(flags & _FP16_FLAGS)
        dtypes = ("float32", "bfloat16", "float16")  # all run on CPU; speed differs
        if bf16:
            why = f"native bf16 ({', '.join(sorted(flags & _BF16_FLAGS))})"
        elif host is None:
            why = "no host given: CPU features unknown, fp32 is the safe choice"
        else:
            why = "no native bf16 instructions: bf16 would be emulated and slow"
        return Capabilities(
            backend=self.name,
            device_type="cpu",
            arch=host.machine if host is not None else None,
            dtypes=dtypes,
            training_precision="bf16" if bf16 else "fp32",
            # Loading in bf16 pays off with AMX tiles; with AVX512-BF16 alone the matmul gain is
            # small while the rounding is real, so weights stay fp32 for inference.
            inference_dtype="bfloat16" if "amx_bf16" in flags else "float32",
            attention=common_attention(),
            distributed_backend=self.distributed_backend,
            # kernelize() accepts "cpu" and Transformers' default mapping has cpu entries, but
            # KernelConfig's device list omits it: use_kernels works, a kernel_config does not.
            kernel_device="cpu",
            kernel_layers=kernel_layers("cpu", None, transformers_tables(host)),
            limitations=(
                Limitation(
                    text=(
                        "use_kernels=True maps the CPU layers of Transformers' default kernel "
                        "mapping, but a KernelConfig cannot name the CPU: its device list omits "
                        "cpu and it raises 'Only devices in [...] are supported, got: cpu'"
                    ),
                    source=_KERNEL_CONFIG_SOURCE,
                ),
            ),
            device_map_auto=True,
            sources={
                "training_precision": f"{why}; {_FLAGS_SOURCE}",
                "fp16": ("native fp16 " if fp16 else "no native fp16; ") + _FLAGS_SOURCE,
                "inference_dtype": "bf16 weights only with amx_bf16 (Intel AMX); " + _FLAGS_SOURCE,
                "distributed_backend": "accelerate/state.py: gloo (mpi only when built with it)",
                "kernel_device": _KERNEL_DEVICE_SOURCE,
            },
        )
