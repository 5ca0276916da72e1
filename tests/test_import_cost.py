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
    assert "hwbackends._machine.host" in mods and "hwbackends._base.errors" in mods
    assert "hwbackends._selection.registry" not in mods


def test_selection_imports_no_heavy_library() -> None:
    mods = loaded_after("import hwbackends; hwbackends.current()")
    assert not [m for m in mods if m.split(".")[0] in ("torch", "transformers", "accelerate")]
    assert "importlib.metadata" not in mods


def test_cold_selection_loads_only_declarations() -> None:
    """A full selection on a machine with none of the plugins' hardware or packages imports
    each plugin's declaration module and nothing behind it: no fact table, no Transformers
    reader, and none of typing, dataclasses, re, inspect or packaging."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("HWBACKENDS_")}
    env["HWBACKENDS_NO_CACHE"] = "1"
    probe = (  # sys.modules is read before json (which imports re) is imported
        "import sys, hwbackends\nb = hwbackends.current()\nmods = sorted(sys.modules)\n"
        "import json\nprint(json.dumps([b.name, mods]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
    )
    name, mods = json.loads(out.stdout.strip().splitlines()[-1])
    if name != "cpu":  # pragma: no cover - a machine with an accelerator
        return
    plugins = [m for m in mods if m.startswith("hwbackends_")]
    assert plugins, "the in-repo plugins are installed in the test environment"
    facts = [m for m in plugins if m.rpartition(".")[2] in ("_facts", "_arch", "_quant",
                                                             "_attention", "_nvml")]  # fmt: skip
    assert facts == []
    assert not {
        "hwbackends._kit.hf_tables",
        "hwbackends._kit.hf_facts",
        "hwbackends.transformers",
    } & set(mods)  # the readers
    for lib in ("typing", "dataclasses", "re", "inspect", "packaging", "ast", "json"):
        assert lib not in mods, lib
    readers = [m for m in mods if m.startswith("hwbackends.visibility._") and m not in (
        "hwbackends._visibility.base", "hwbackends._visibility.kinds",
        "hwbackends._visibility.generic")]  # fmt: skip
    assert readers == [], "a runtime's visibility reader was imported without its hardware"
