"""Facts about Intel Gaudi (HPU), each with its source."""

from __future__ import annotations

from hwbackends.facts import ArchFacts, PciModel, Stack
from hwbackends.plugin import Limitation

HF = "docs/reference/hf-integration.md"

# PCI ids (vendor 0x1da3): the habanalabs driver (Linux drivers/accel/habanalabs
# habanalabs_drv.c and HabanaAI's out-of-tree habanalabs driver), HabanaAI rdma-core (HL-288,
# HL-338 board ids). Goya and Greco are inference chips the PyTorch HPU stack does not drive.
_DRV = "habanalabs driver habanalabs_drv.c PCI_IDS_* (Linux kernel, HabanaAI/habanalabs)"
_RDMA = "HabanaAI rdma-core hlib: PCI_IDS_GAUDI2_HL_288, PCI_IDS_GAUDI3_HL_338"
PCI_MODELS: dict[str, PciModel] = {
    "0x0001": PciModel("Habana Goya", "goya", _DRV),
    "0x0020": PciModel("Habana Greco", "greco", _DRV),
    "0x0030": PciModel("Habana Greco", "greco", _DRV),
    "0x1000": PciModel("Intel Gaudi", "gaudi1", _DRV),
    "0x1001": PciModel("Intel Gaudi (HL-2000M)", "gaudi1", _DRV),
    "0x1010": PciModel("Intel Gaudi", "gaudi1", _DRV),
    "0x1011": PciModel("Intel Gaudi (HL-2000M)", "gaudi1", _DRV),
    "0x1020": PciModel("Intel Gaudi 2", "gaudi2", _DRV),
    "0x1021": PciModel("Intel Gaudi 2 (HL-288)", "gaudi2", _RDMA),
    "0x1030": PciModel("Intel Gaudi 2", "gaudi2", _DRV),
    "0x1060": PciModel("Intel Gaudi 3", "gaudi3", _DRV),
    "0x1062": PciModel("Intel Gaudi 3 (single die)", "gaudi3", _DRV),
    "0x1063": PciModel("Intel Gaudi 3 (HL-338)", "gaudi3", _RDMA),
}

STACK = Stack(
    label="Intel Gaudi PyTorch bridge (habana-torch-plugin)",
    device_type="hpu",
    distributed_backend="hccl",
    packages=("habana-torch-plugin",),
    archs=frozenset({"gaudi1", "gaudi2", "gaudi3"}),
    kernel_device=None,
    device_map_auto=True,
    source=(
        "docs.habana.ai Installation_Guide/Installers_Appendix (habana-torch-plugin provides "
        "habana_frameworks.torch); accelerate state.py: hpu -> hccl, utils/modeling.py "
        f"get_max_memory has an hpu branch ({HF} §3.2, §3.4)"
    ),
)

GAUDI1 = ArchFacts(
    ("float32", "bfloat16"),
    "bf16",
    "Gaudi1 has no fp16: transformers is_torch_fp16_available_on_device and accelerate "
    f"is_fp16_available are False on Gaudi1; bf16 is always available on HPU ({HF} §3.5)",
)
GAUDI2 = ArchFacts(
    ("float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2"),
    "bf16",
    "transformers is_torch_bf16_gpu_available is True on HPU; fp16 beyond Gaudi1; fp8 "
    f"through the Intel Gaudi Transformer Engine (docs.habana.ai FP8 Training) ({HF} §3.5)",
)
ARCH_FACTS = {"gaudi1": GAUDI1, "gaudi2": GAUDI2, "gaudi3": GAUDI2}
DEFAULT_FACTS = ArchFacts(
    ("float32", "bfloat16"),
    "bf16",
    f"Gaudi generation unknown: bf16 is available on every HPU ({HF} §3.5), fp16 is not on Gaudi1",
)

LIMITATIONS = (
    Limitation(
        "Gaudi needs Intel's own torch build next to habana-torch-plugin (the installer's "
        "'torch' package with Gaudi support)",
        "docs.habana.ai Installation_Guide/Installers_Appendix",
    ),
    Limitation(
        "Transformers' is_torch_hpu_available() patches torch globally (gather, scatter, "
        "take_along_dim, linalg.cholesky) and makes torch.compile default to hpu_backend",
        f"transformers utils/import_utils.py ({HF} §7)",
    ),
    Limitation(
        "kernels has no hpu device key: use_kernels / KernelConfig cannot target Gaudi",
        f"kernels layer/repos.py DeviceRepos.create_repo ({HF} §2.3)",
    ),
    Limitation(
        "HABANA_VISIBLE_MODULES names module ids, not PCI order; only 2- and 4-module "
        "partial allocations are supported (0,1 2,3 4,5 6,7 0,1,2,3 4,5,6,7)",
        "docs.habana.ai Orchestration/Multiple_Tenants_on_HPU (docs/reference/visibility.md §5)",
    ),
)

#: The stacks in order of preference (the backend's ``stacks`` declaration).
STACKS = (STACK,)
