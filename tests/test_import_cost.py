"""`import hwbackends` is nearly free: no heavy library, no plugin, no metadata machinery."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "transformers", "accelerate", "importlib.metadata", "kernels", "pynvml", "json")


def loaded_after(code: str) -> list[str]:
    probe = code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_is_free() -> None:
    before = set(loaded_after("pass"))
    mods = set(loaded_after("import hwbackends")) - before
    assert not [m for m in mods if m.split(".")[0] in HEAVY or m in HEAVY]
    assert not [m for m in mods if m.startswith("hwbackends_")], "a plugin module was imported"
    # names are imported on first use: the package root costs two tiny modules
    assert mods <= {"hwbackends", "hwbackends._version", "__future__"}
    assert "hwbackends" in mods


def test_names_resolve_lazily() -> None:
    mods = loaded_after("import hwbackends; hwbackends.Host; hwbackends.HwBackendsError")
    assert "hwbackends._host" in mods and "hwbackends._errors" in mods
    assert "hwbackends._registry" not in mods


def test_selection_imports_no_heavy_library() -> None:
    mods = loaded_after("import hwbackends; hwbackends.current()")
    assert not [m for m in mods if m.split(".")[0] in ("torch", "transformers", "accelerate")]
    assert "importlib.metadata" not in mods
