"""scripts/device_check.py: the check against a real accelerator, run here without one.

On this machine (no accelerator) it says so and exits 0. Its GPU path runs against a faked
runtime: a machine tree with two NVIDIA H200s (PCI functions, the driver's /proc files, /dev
nodes) and, first on the path, a stand-in ``torch`` (a CUDA build's ``version.py`` and a
``torch.cuda`` that answers from a description of the two GPUs, reading
``CUDA_VISIBLE_DEVICES`` as the CUDA runtime does for the values the script tries) and a
stand-in ``pynvml``. The fakes can be told to disagree, and the script must then say where.
The tiny-model step runs for real on the CPU.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from coretest import clean_env, needs_plugins

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "device_check.py"
GPUS = [
    {"bus": [0, 0x1B, 0], "uuid": "GPU-5a88edbe-1111-2222-3333-444444444444"},
    {"bus": [0, 0x43, 0], "uuid": "GPU-7d1a2244-5555-6666-7777-888888888888"},
]
BUSES = ["0000:1b:00.0", "0000:43:00.0"]
H200 = {"name": "NVIDIA H200", "memory": 150754820096, "cc": [9, 0]}

FAKE_TORCH = '''
import json, os
from types import SimpleNamespace

SPEC = json.loads(os.environ["FAKE_RUNTIME"])
GPUS = SPEC["gpus"]


def _visible():
    """CUDA_VISIBLE_DEVICES as the CUDA runtime reads it (identical GPUs: FASTEST_FIRST is PCI
    order): each entry an index (leading blanks and a "+" skipped, digits up to the first other
    character) or a unique UUID prefix; the first entry that names no device ends the list; a
    device named twice leaves none."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return list(range(len(GPUS)))
    if value in SPEC.get("lies", {}):
        return SPEC["lies"][value]
    out = []
    for entry in value.split(","):
        e = entry.lstrip(" ")
        if e.startswith("GPU-"):
            hits = [i for i, g in enumerate(GPUS) if g["uuid"].startswith(e)]
            if len(hits) != 1:
                break
            i = hits[0]
        else:
            e = e[1:] if e.startswith("+") else e
            digits = ""
            for ch in e:
                if not ch.isdigit():
                    break
                digits += ch
            if not digits or int(digits) >= len(GPUS):
                break
            i = int(digits)
        if i in out:
            return []
        out.append(i)
    return out


def device_count():
    return len(_visible())


def get_device_properties(i):
    g = GPUS[_visible()[i]]
    dom, bus, dev = g["bus"]
    return SimpleNamespace(name=g["name"], uuid=g["uuid"][4:], pci_domain_id=dom,
                           pci_bus_id=bus, pci_device_id=dev, total_memory=g["memory"],
                           major=g["cc"][0], minor=g["cc"][1])
'''

FAKE_PYNVML = """
import json, os
from types import SimpleNamespace

SPEC = json.loads(os.environ["FAKE_RUNTIME"])
GPUS = SPEC["gpus"]

def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlDeviceGetCount(): return len(GPUS)
def nvmlDeviceGetHandleByIndex(i): return GPUS[i]
def nvmlDeviceGetName(h): return SPEC.get("nvml_names", {}).get(h["uuid"], h["name"]).encode()
def nvmlDeviceGetUUID(h): return h["uuid"]
def nvmlDeviceGetPciInfo(h):
    return SimpleNamespace(busId=("%08X:%02X:%02X.0" % tuple(h["bus"])).encode())
def nvmlDeviceGetMemoryInfo(h): return SimpleNamespace(total=h["memory"])
def nvmlDeviceGetCudaComputeCapability(h): return tuple(h["cc"])
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture
def machine(tmp_path: Path) -> tuple[Path, Path]:
    """(root, fakes): the machine tree of two H200s and the folder of the faked runtime."""
    root = tmp_path / "root"
    for bus, g in zip(BUSES, GPUS, strict=True):
        fn = root / "sys/bus/pci/devices" / bus
        for name, value in (("vendor", "0x10de"), ("device", "0x2335"), ("class", "0x030200")):
            _write(fn / name, value + "\n")
        _write(
            root / "proc/driver/nvidia/gpus" / bus / "information",
            f"Model: \t\t NVIDIA H200\nGPU UUID: \t {g['uuid']}\nBus Location: \t {bus}\n",
        )
    _write(root / "proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel "
           "Module  570.86.15  Release Build\n")  # fmt: skip
    for node in ("nvidia0", "nvidia1", "nvidiactl"):
        _write(root / "dev" / node, "")
    fakes = tmp_path / "fakes"
    _write(
        fakes / "torch/__init__.py",
        "from . import cuda, version\n__version__ = version.__version__\n",
    )
    _write(fakes / "torch/version.py", "__version__ = '2.13.0+cu128'\ncuda = '12.8'\nhip = None\n")
    _write(fakes / "torch/cuda/__init__.py", FAKE_TORCH)
    _write(fakes / "pynvml.py", FAKE_PYNVML)
    return root, fakes


def run(
    root: Path, fakes: Path | None, spec: dict[str, Any], *args: str
) -> tuple[int, dict[str, Any]]:
    env = clean_env(FAKE_RUNTIME=json.dumps(spec), HWBACKENDS_NO_CACHE="1")
    for k in [k for k in env if k.endswith(("_VISIBLE_DEVICES", "DEVICE_ORDER"))]:
        del env[k]
    if fakes is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(fakes), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root), *args],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert proc.stdout.startswith("{"), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def test_no_accelerator_here(tmp_path: Path) -> None:
    code, report = run(tmp_path, None, {})
    assert (code, report["accelerator"], report["verdict"]) == (0, False, "no accelerator here")
    assert report["ok"] is True and "visibility" not in report


def _spec(**extra: Any) -> dict[str, Any]:
    return {"gpus": [{**H200, **g} for g in GPUS], **extra}


@needs_plugins
def test_files_and_a_faked_runtime_agree(machine: tuple[Path, Path]) -> None:
    root, fakes = machine
    code, report = run(root, fakes, _spec(), "--no-train", "--jobs", "4")
    assert report["mismatches"] == []
    assert (code, report["verdict"], report["backend"]) == (0, "files and runtime agree", "cuda")
    assert [d["pci_bus_id"] for d in report["files"]["devices"]] == BUSES
    assert report["compare"]["torch"]["runtime_count"] == 2
    assert report["compare"]["nvml"]["runtime_count"] == 2
    vis = report["visibility"]
    assert vis["cases"] >= 40 and vis["agree"] == vis["cases"]
    by_env = {json.dumps(r["env"], sort_keys=True): r for r in vis["results"]}
    swapped = by_env[json.dumps({"CUDA_VISIBLE_DEVICES": "1,0"})]
    assert swapped["predicted"] == swapped["runtime"] == BUSES[::-1]
    by_uuid = by_env[json.dumps({"CUDA_VISIBLE_DEVICES": GPUS[1]["uuid"] + ",0"})]
    assert by_uuid["runtime"] == [BUSES[1], BUSES[0]]
    assert report["train"] == {"skipped": "--no-train"}


@needs_plugins
def test_a_disagreeing_runtime_is_named(machine: tuple[Path, Path]) -> None:
    root, fakes = machine
    spec = _spec(lies={"0,-1,1": [0, 1]}, nvml_names={GPUS[1]["uuid"]: "NVIDIA H100"})
    code, report = run(root, fakes, spec, "--no-train", "--jobs", "4", "--no-visibility")
    assert code == 1 and report["verdict"] == "mismatch"
    assert report["mismatches"] == [
        "nvml device 1 name: files 'NVIDIA H200', runtime 'NVIDIA H100'"
    ]
    code, report = run(root, fakes, spec, "--no-train", "--jobs", "4")
    assert code == 1
    assert [m for m in report["mismatches"] if m.startswith("visibility")] == [
        f"visibility {{'CUDA_VISIBLE_DEVICES': '0,-1,1'}}: predicted ['{BUSES[0]}'], runtime "
        f"{BUSES!r}",
        f"visibility {{'CUDA_VISIBLE_DEVICES': '0,-1,1', 'CUDA_DEVICE_ORDER': 'PCI_BUS_ID'}}: "
        f"predicted ['{BUSES[0]}'], runtime {BUSES!r}",
    ]


def test_the_tiny_model_trains_with_the_recommended_settings() -> None:
    import torch  # noqa: F401 - the training child imports it; without torch this skips

    spec = importlib.util.spec_from_file_location("device_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    got = mod.train("cpu", clean_env(HF_HUB_OFFLINE="1"), 300.0)
    assert got["ok"] is True, got
    assert got["device"] == "cpu" and got["loss"] > 0
    assert set(got["timings_s"]) >= {"build", "load", "generate", "train"}
