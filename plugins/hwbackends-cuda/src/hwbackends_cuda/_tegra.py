"""NVIDIA Jetson (Tegra): the integrated GPU, known by the traces L4T leaves (no PCI, no NVML).

A Jetson's GPU sits on the SoC, not on PCI, and its driver (nvgpu) writes no
``/proc/driver/nvidia``: none of the discrete GPU's traces exist. What a Jetson shows instead:

- ``/etc/nv_tegra_release``, L4T's release file: ``# R32 (release), REVISION: 7.1, GCID: ...,
  BOARD: t210ref, EABI: aarch64, DATE: ...`` (NVIDIA Jetson Linux Developer Guide, "Quick
  Start": ``head -n 1 /etc/nv_tegra_release`` gives the L4T release);
- the device tree's root ``compatible`` strings (``/proc/device-tree/compatible``, the same
  folder as ``/sys/firmware/devicetree/base``: Linux Documentation/ABI/testing/sysfs-firmware-ofw),
  NUL-separated, ending in the SoC (``nvidia,tegra210``), and its ``model`` (``NVIDIA Jetson
  Nano Developer Kit``);
- the platform GPU device, named by the SoC's GPU (``57000000.gpu``, ``17000000.gv11b``,
  ``17000000.ga10b``: the names jetson_stats' ``find_igpu`` looks for, rbonghi/jetson_stats
  ``jtop/core/gpu.py``), and nvgpu's ``/dev`` nodes (``nvhost-gpu``, ``nvhost-ctrl-gpu``,
  ``nvmap``; ``nvgpu/igpu0`` from L4T R35): the nodes say L4T's GPU driver runs.

Torch for a Jetson is NVIDIA's build for its JetPack release, never a download.pytorch.org
cuXXX wheel (those target discrete GPUs and SBSA servers): "Installing PyTorch for Jetson
Platform", https://docs.nvidia.com/deeplearning/frameworks/install-pytorch-jetson-platform/.
Jetson Thor (tegra264, JetPack 7) moved to the SBSA CUDA stack, so PyTorch's own CUDA 13
aarch64 wheels serve it (NVIDIA JetPack 7 release notes: "Jetson Thor ... SBSA").

Every read is bounded and non-blocking (``hwbackends.plugin.read_text``); folders are listed,
never walked.
"""

from __future__ import annotations

import os

from hwbackends.plugin import list_dir, read_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hwbackends import Host, HostDevice

__all__ = [
    "EVIDENCE",
    "JETSON_DOC",
    "JETSON_NODES_HINT",
    "SOCS",
    "is_jetson",
    "jetson_gpus",
    "jetson_hint",
    "pytorch_index_build",
    "read",
]

#: The evidence name of a Jetson's GPU (``HostDevice.extra["evidence"]``).
EVIDENCE = "tegra"
RELEASE = "etc/nv_tegra_release"
_DT = ("proc/device-tree", "sys/firmware/devicetree/base")
#: nvgpu's device nodes (L4T's /dev): one of them means the GPU driver runs.
NODES = ("nvhost-gpu", "nvhost-ctrl-gpu", "nvmap", "nvgpu/igpu0")
#: The platform GPU's node names (the part after the unit address): NVIDIA's GPU names
#: (each a Tegra generation's) and the generic ``gpu``, another vendor's too (Mali), which
#: counts only beside a Tegra device tree or L4T's release file.
CHIPS: dict[str, str] = {"gm20b": "sm_53", "gp10b": "sm_62", "gv11b": "sm_72", "ga10b": "sm_87"}
_GPU_NODES = frozenset({"gpu", *CHIPS})
JETSON_DOC = "https://docs.nvidia.com/deeplearning/frameworks/install-pytorch-jetson-platform/"

#: Tegra SoC (the device tree's ``nvidia,<soc>``) -> (product line, compute capability), from
#: NVIDIA's "CUDA GPUs - Compute Capability" list (Jetson products).
SOCS: dict[str, tuple[str, str]] = {
    "tegra210": ("Jetson TX1 / Nano (Tegra X1)", "sm_53"),
    "tegra186": ("Jetson TX2 (Tegra X2)", "sm_62"),
    "tegra194": ("Jetson AGX Xavier / Xavier NX", "sm_72"),
    "tegra234": ("Jetson AGX Orin / Orin NX / Orin Nano", "sm_87"),
    "tegra264": ("Jetson AGX Thor", "sm_110"),
}


def _release(root: str) -> dict[str, str]:
    """The fields of L4T's release line: ``release`` (``R32.7.1``), ``BOARD``, ``EABI``."""
    text = read_text(os.path.join(root, RELEASE), 1024) or ""
    line = text.partition("\n")[0].strip()
    if not line.startswith("# R"):
        return {}
    head, _, rest = line[2:].partition(" ")
    out = {}
    for part in rest.split(","):
        k, sep, v = part.partition(":")
        if sep:
            out[k.strip().upper()] = v.strip()
    major, revision = head.removeprefix("R"), out.get("REVISION", "")
    if major.isdigit() and len(major) < 4:
        out["release"] = f"R{major}.{revision}" if revision else f"R{major}"
    return out


def _device_tree(root: str) -> tuple[str | None, str | None]:
    """``(SoC, model)`` from the device tree's root ``compatible`` and ``model``."""
    for base in _DT:
        compat = read_text(os.path.join(root, base, "compatible"), 1024)
        if compat is None:
            continue
        socs = [c.partition(",")[2] for c in compat.split("\0") if c.startswith("nvidia,tegra")]
        model = (read_text(os.path.join(root, base, "model"), 256) or "").strip("\0\n ")
        return (socs[-1] if socs else None), (model[:120] or None)
    return None, None


def _driver_runs(root: str) -> bool:
    """nvgpu's /dev nodes exist (only while it runs; the upstream kernel's nouveau, which
    also binds a Tegra GPU, makes none of them)."""
    return any(os.path.lexists(os.path.join(root, "dev", n)) for n in NODES)


def _platform_gpu(root: str) -> str | None:
    """The platform GPU device's node name (``gpu``, ``gv11b``...), or None."""
    for base in ("sys/devices/platform", "sys/devices"):
        for name in list_dir(os.path.join(root, base))[:4096]:
            _, dot, node = name.partition(".")
            if dot and node in _GPU_NODES:
                return node
            if name == "gpu.0":
                return "gpu"
    return None


def is_jetson(root: str) -> bool:
    """Whether the tree may be a Jetson's: an L4T release file, a device tree, nvgpu's nodes
    or a platform GPU device (a few stats and two listings; ``read`` decides)."""
    j = os.path.join
    return (
        os.path.lexists(j(root, RELEASE))
        or any(os.path.lexists(j(root, b, "compatible")) for b in _DT)
        or any(os.path.lexists(j(root, "dev", n)) for n in NODES)
        or _platform_gpu(root) in CHIPS
    )


def read(root: str) -> HostDevice | None:
    """The Jetson's integrated GPU, or None when the tree is no Jetson's."""
    from hwbackends import HostDevice

    rel = _release(root)
    soc, model = _device_tree(root)
    chip = _platform_gpu(root)
    if soc is None and not rel and chip not in CHIPS:
        return None
    extra: dict[str, object] = {"evidence": [EVIDENCE], "integrated": True}
    if soc is not None:
        extra["soc"] = soc
    if chip is not None:
        extra["platform_gpu"] = chip
    if "release" in rel:
        extra["l4t"] = rel["release"]
    if rel.get("BOARD"):
        extra["board"] = rel["BOARD"][:40]
    if _driver_runs(root):
        extra["driver"] = "nvgpu"
    product, arch = SOCS.get(soc or "", (None, CHIPS.get(chip or "")))
    name = model or (f"NVIDIA {product}" if product else "NVIDIA Jetson")
    return HostDevice(vendor="nvidia", name=name, arch=arch, extra=extra)


#: Where a Jetson's GPU nodes are missing: a container started without NVIDIA's runtime (the
#: NVIDIA Container Toolkit mounts /dev/nvhost-* and /dev/nvmap into it on JetPack).
JETSON_NODES_HINT = (
    "in a container, start it with --runtime nvidia (the NVIDIA Container Toolkit that JetPack "
    "installs); on the Jetson itself, check that JetPack's L4T drivers are installed "
    "(sudo apt install nvidia-jetpack)"
)


def jetson_gpus(gpus: tuple[HostDevice, ...]) -> list[HostDevice]:
    """The Jetson integrated GPUs among ``gpus``."""
    return [d for d in gpus if EVIDENCE in (d.extra.get("evidence") or ())]


def pytorch_index_build(host: Host, gpus: tuple[HostDevice, ...]) -> bool:
    """Whether the installed torch is one of download.pytorch.org's CUDA builds (a ``+cuXXX``
    local version) on a Jetson that is no Thor: those wheels target discrete GPUs and SBSA
    servers, NVIDIA's Jetson builds carry no such tag (``2.1.0a0+41361538.nv23.06``)."""
    t = host.torch
    if t is None or t.flavour != "cuda" or "+cu" not in t.version:
        return False
    return any(d.extra.get("soc") != "tegra264" for d in jetson_gpus(gpus))


def jetson_hint(gpus: tuple[HostDevice, ...]) -> str | None:
    """The torch fix for a Jetson's GPU: NVIDIA's JetPack build (Thor: PyTorch's CUDA 13
    aarch64 wheels); None when no GPU here is a Jetson's."""
    jet = jetson_gpus(gpus)
    if not jet:
        return None
    if all(d.extra.get("soc") == "tegra264" for d in jet):
        return (
            "pip install torch --index-url https://download.pytorch.org/whl/cu130 (Jetson "
            "Thor runs JetPack 7's SBSA CUDA 13 stack, which PyTorch's aarch64 CUDA wheels "
            "target)"
        )
    l4t = next((str(d.extra["l4t"]) for d in jet if d.extra.get("l4t")), None)
    on = f" for this L4T release ({l4t})" if l4t else ""
    return (
        f"install NVIDIA's PyTorch wheel for the JetPack release{on}, as {JETSON_DOC} says "
        "(pip3 install --no-cache <the wheel from "
        "https://developer.download.nvidia.com/compute/redist/jp/>): download.pytorch.org's "
        "cuXXX wheels do not run on a Jetson's integrated GPU"
    )
