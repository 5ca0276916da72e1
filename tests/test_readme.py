"""The README's Transformers usage works on this machine, as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_transformers_usage_runs(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1
    setup = (
        "import torch, transformers\n"
        "from hwbackends._smoke import tiny_llama_config\n"
        f"path = {str(tmp_path)!r}\n"
        "transformers.LlamaForCausalLM(tiny_llama_config()).save_pretrained(path)\n"
    )
    check = "\nassert model.config._attn_implementation in ('sdpa', 'eager')\nprint('ok')\n"
    out = subprocess.run(
        [sys.executable, "-c", setup + blocks[0] + check], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")
