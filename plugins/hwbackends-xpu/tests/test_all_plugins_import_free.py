"""Importing any of the eight accelerator plugins imports no torch, transformers or vendor SDK.

One subprocess covers all eight (this file lives in the xpu plugin's tests only).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PLUGINS = Path(__file__).resolve().parents[2]
NAMES = ("xpu", "mps", "neuron", "tpu", "hpu", "npu", "mlu", "musa")
FORBIDDEN = (
    "torch", "transformers", "accelerate", "kernels", "torch_xla", "torch_neuronx",
    "torch_tpu", "torch_npu", "torch_mlu", "torch_musa", "habana_frameworks", "libtpu",
    "intel_extension_for_pytorch", "numpy",
)  # fmt: skip

SCRIPT = """
import sys
sys.path[:0] = {paths!r}
for name in {names!r}:
    mod = __import__("hwbackends_" + name)
    cls = getattr(mod, name.capitalize() + "Backend")
    assert cls.name == name, (cls.name, name)
    cls()  # constructing a backend is free too
bad = sorted(m for m in {forbidden!r} if m in sys.modules)
print("LOADED:" + ",".join(bad))
"""


def test_plugin_imports_load_no_heavy_module() -> None:
    paths = [str(PLUGINS / f"hwbackends-{n}" / "src") for n in NAMES]
    code = SCRIPT.format(paths=paths, names=NAMES, forbidden=FORBIDDEN)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "LOADED:"
