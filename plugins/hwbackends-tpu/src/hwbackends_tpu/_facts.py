"""Facts about Google Cloud TPUs under PyTorch, each with its source."""

from __future__ import annotations

from hwbackends.facts import ArchFacts, PciModel, Stack
from hwbackends.plugin import Limitation

HF = "docs/reference/hf-integration.md"

# AI-Hypercomputer/cloud-accelerator-diagnostics tpu_info/tpu_info/device.py: TpuChip
# .from_pci_device_id (vendor 0x1ae0). v2 and v3 share 0x0027 (told apart by the subsystem
# id, which the host does not carry).
_TPU_INFO = "cloud-accelerator-diagnostics tpu_info/device.py TpuChip.from_pci_device_id"
PCI_MODELS: dict[str, PciModel] = {
    "0x0027": PciModel("Google TPU v2/v3", "v2/v3", _TPU_INFO),
    "0x005e": PciModel("Google TPU v4", "v4", _TPU_INFO),
    "0x0063": PciModel("Google TPU v5e", "v5e", _TPU_INFO),
    "0x0062": PciModel("Google TPU v5p", "v5p", _TPU_INFO),
    "0x006f": PciModel("Google TPU v6e", "v6e", _TPU_INFO),
    "0x0076": PciModel("Google TPU7x", "v7x", _TPU_INFO),
}

_EXPLICIT = Limitation(
    "Accelerate's device_map='auto' cannot see TPUs (get_max_memory has no tpu or xla "
    "branch): load with an explicit device",
    f"accelerate utils/modeling.py get_max_memory ({HF} §3.1, §3.2)",
)
_NO_FLEX = Limitation(
    "flex_attention is refused on TPU (is_torch_flex_attn_available is False there)",
    f"transformers utils/import_utils.py is_torch_flex_attn_available ({HF} §1.2)",
)

# TorchTPU (google-pytorch/torch_tpu): the native backend, device "tpu". Transformers
# initialises its process group with "tpu_dist"; Accelerate has no torch_tpu support.
NATIVE_STACK = Stack(
    label="torch-tpu (TorchTPU native backend)",
    device_type="tpu",
    distributed_backend="tpu_dist",
    packages=("torch-tpu",),
    kernel_device="tpu",
    device_map_auto=False,
    limitations=(
        _EXPLICIT,
        _NO_FLEX,
        Limitation(
            "Accelerate has no torch_tpu support (no DistributedType for it); use "
            "Transformers' own distributed initialisation or torch.distributed directly",
            f"accelerate source has no torch_tpu ({HF} §5.1)",
        ),
        Limitation(
            "torch_tpu gives each process a single chip, always at index 0: run one process "
            "per chip",
            "transformers distributed/utils.py _bind_local_device",
        ),
    ),
    source=(
        "transformers is_torch_tpu_available (torch.accelerator 'tpu', registered by "
        "torch_tpu) and distributed/utils.py DISTRIBUTED_BACKEND_MAP tpu -> tpu_dist "
        f"({HF} §5.2); docs.cloud.google.com/tpu/docs/pytorch-on-tpu (TorchTPU)"
    ),
)

# PyTorch/XLA: device "xla", collectives through XLA (Accelerate DistributedType.XLA).
XLA_STACK = Stack(
    label="torch-xla (PyTorch/XLA)",
    device_type="xla",
    distributed_backend="xla",
    packages=("torch-xla",),
    torch_matches="torch-xla",
    kernel_device=None,
    device_map_auto=False,
    limitations=(
        _EXPLICIT,
        _NO_FLEX,
        Limitation(
            "torch-xla needs libtpu for TPUs (pip install 'torch_xla[tpu]'); kernels has no "
            "variant for the xla device",
            f"docs.pytorch.org/xla; kernels backends.py ({HF} §2.3)",
        ),
    ),
    source=(
        f"accelerate state.py _prepare_backend: torch_xla -> backend xla ({HF} §3.4, §5.1); "
        "torch-xla releases follow torch (2.9.0 for torch 2.9)"
    ),
)

BF16 = ArchFacts(
    ("float32", "bfloat16"),
    "bf16",
    "TPU matrix units compute in bf16; transformers is_torch_bf16_gpu_available is True on "
    f"TPU and Accelerate refuses fp16 mixed precision on XLA TPUs ({HF} §3.5)",
)

LIMITATIONS = (
    Limitation(
        "on v2/v3 (and v7x) one chip holds two TensorCores, which JAX counts as two devices; "
        "visibility here counts chips",
        "docs/reference/visibility.md §4; tpu_info/device.py devices_per_chip",
    ),
)

#: The stacks in order of preference (the backend's ``stacks`` declaration).
STACKS = (NATIVE_STACK, XLA_STACK)
