"""Error messages that used to mislead command-line users, through
the real command in a subprocess: each says what to do on the command line, while the Python
API keeps its Python advice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from coretest import clean_env, run_python

from hwbackends import Host
from hwbackends._base.errors import BackendUnavailableError, VisibilityError
from hwbackends._selection.target import resolve_target, torch_fix

ROOT = Path(__file__).resolve().parent.parent
TWO = str(ROOT / "docs" / "hosts" / "two-l40s.json")
V100 = str(ROOT / "plugins" / "hwbackends-cuda" / "tests" / "hosts" / "v100-4.json")


def cli(
    *argv: str, pythonpath: str | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    env = clean_env(COLUMNS="200", NO_COLOR="1", PYTHONIOENCODING="utf-8", **extra)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, env.get("PYTHONPATH")]))
    return run_python("-m", "hwbackends", *argv, env=env, cwd=ROOT, timeout=300)


@pytest.fixture
def no_torch(tmp_path: Path) -> str:
    """A folder that, first on PYTHONPATH, makes `import torch` fail as a missing torch does."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'torch'\")\n"
    )
    return str(tmp_path)


# The PyTorch install selector's CPU and CUDA 12.8 wheel indexes
# (https://pytorch.org/get-started/locally/, pip + Linux): literals, not the module's table.
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CU128_INDEX = "https://download.pytorch.org/whl/cu128"


def cpu_torch_fix() -> str:
    """The fix for the cpu backend when torch does not import: this interpreter's pip and the
    CPU wheel index. Where torch's files are installed (scripts/test.sh's run), reinstalled
    over the installed version (read from the installed metadata); where torch is not
    installed at all (.ci/wheels.sh's run), installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("torch")
    except PackageNotFoundError:
        return f"install torch: {sys.executable} -m pip install torch --index-url {CPU_INDEX}"
    return (
        f"reinstall torch, whose installed {installed} does not import: "
        f"{sys.executable} -m pip install torch --index-url {CPU_INDEX} --force-reinstall"
    )


# -- pin: an index the host lacks --------------------------------------------------------------


def test_pin_an_index_the_host_lacks_names_a_command() -> None:
    proc = cli("pin", "5", "--host", TWO, "--env", "CUDA_VISIBLE_DEVICES=1")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        "hwbackends: error: physical index 5 for cuda does not exist on this host. Expected "
        "NVIDIA GPUs and MIG instances in 0..1. Fix: run `hwbackends devices --host "
        f"{TWO} --env CUDA_VISIBLE_DEVICES=1` to list the physical indices and pick from them.\n"
    )


def test_the_python_api_keeps_its_python_advice_for_an_unknown_index() -> None:
    import hwbackends

    with pytest.raises(VisibilityError) as err:
        hwbackends.get("cuda").visibility_env([5], host=Host.from_file(TWO))
    assert "Fix: list the host's units with hwbackends.visibility.explain_visibility(" in str(
        err.value
    )


# -- smoke --backend on a machine without that hardware ---------------------------------------


def test_smoke_with_an_unavailable_backend_names_the_option() -> None:
    import hwbackends

    probe = next(c.probe for c in hwbackends.explain(env={}).candidates if c.name == "cuda")
    if probe is None or probe.available:
        pytest.skip("cuda is available on this machine")
    proc = cli("smoke", "--backend", "cuda")
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr
    assert err.startswith(
        "hwbackends: error: --backend cuda: the cuda backend is not available here: "
    ), err
    assert "Fix: drop --backend to smoke-test the backend `hwbackends env` selects" in err
    assert "backend=None" not in err


def test_the_python_api_keeps_backend_none_advice() -> None:
    with pytest.raises(BackendUnavailableError, match=r"leave backend=None"):
        resolve_target("rocm", host=Host.from_file(TWO), env={})


# -- smoke and --confirm without torch ---------------------------------------------------------


def test_smoke_without_torch_says_how_to_install_it(no_torch: str) -> None:
    # the cpu backend on every machine: the expected command does not depend on the hardware
    proc = cli("smoke", pythonpath=no_torch, HWBACKENDS_BACKEND="cpu")
    assert proc.returncode == 2, proc.stderr
    assert (
        "hwbackends: error: smoke needs torch, and torch cannot be imported here: "
        "ModuleNotFoundError: No module named 'torch'. Expected torch importable by "
        f"{sys.executable}. Fix: {cpu_torch_fix()}.\n"
    ) in proc.stderr


def test_torch_fix_is_the_command_for_the_backend_build() -> None:
    import hwbackends

    bare = Host.from_dict({"system": "Linux", "machine": "x86_64", "devices": []})
    assert torch_fix(hwbackends.get("cpu"), bare) == (
        f"install torch: {sys.executable} -m pip install torch --index-url {CPU_INDEX}"
    )
    installed = Host.from_file(TWO)  # a CUDA build is installed there
    assert torch_fix(hwbackends.get("cuda"), installed) == (
        "reinstall torch, whose installed 2.8.0+cu128 does not import: "
        f"{sys.executable} -m pip install torch --index-url {CU128_INDEX} "
        "--force-reinstall"
    )


def test_confirm_without_torch_could_not_check_and_says_the_fix(no_torch: str) -> None:
    fix = cpu_torch_fix()
    proc = cli("env", "--confirm", pythonpath=no_torch, HWBACKENDS_BACKEND="cpu")
    assert proc.returncode == 1, proc.stderr
    assert "DISAGREES" not in proc.stdout
    line = next(x for x in proc.stdout.splitlines() if x.startswith("Runtime check"))
    assert line.startswith(
        "Runtime check  could not check: torch cannot be imported: ModuleNotFoundError: "
        "No module named 'torch' ("
    ), line
    assert line.endswith(f"s). Fix: {fix}"), line

    proc = cli("devices", "--confirm", "--json", pythonpath=no_torch)
    assert proc.returncode == 1, proc.stderr
    conf = json.loads(proc.stdout)["confirmation"]
    assert (conf["ok"], conf["checked"], conf["fix"]) == (False, False, fix)


# -- --backend NAME that is unavailable names every available backend --------------------------


def test_an_unavailable_backend_option_lists_every_available_backend() -> None:
    proc = cli("env", "--host", TWO, "--backend", "rocm")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(
        "hwbackends: error: --backend rocm was given but that backend is unavailable: no AMD "
        "GPU found"
    ), proc.stderr
    assert "Expected an available backend (cpu, cuda)." in proc.stderr
    assert "drop --backend" in proc.stderr and "HWBACKENDS_BACKEND" not in proc.stderr


def test_the_variable_also_lists_every_available_backend() -> None:
    import hwbackends

    with pytest.raises(BackendUnavailableError) as err:
        hwbackends.explain(env={"HWBACKENDS_BACKEND": "rocm"}, host=Host.from_file(TWO))
    assert str(err.value).startswith("HWBACKENDS_BACKEND=rocm but that backend is unavailable")
    assert "Expected an available backend (cpu, cuda)." in str(err.value)
    assert "unset HWBACKENDS_BACKEND" in str(err.value)


# -- item 8: an arch the plugin does not know ---------------------------------------------------


def _with_arch(tmp_path: Path, source: str, arch: str) -> str:
    data = json.loads(Path(source).read_text())
    for d in data["devices"]:
        d["arch"] = arch
    p = tmp_path / f"{arch}.json"
    p.write_text(json.dumps(data))
    return str(p)


def _quant(report: dict[str, Any]) -> dict[str, str]:
    return {q["method"]: q["status"] for q in report["capabilities"]["quantization"]}


def test_an_unknown_arch_is_a_warning_and_unknown_in_quantization(tmp_path: Path) -> None:
    host = _with_arch(tmp_path, TWO, "sm_999")
    text = " ".join(cli("env", "--host", host).stdout.split())
    assert (
        "! cuda:0 (NVIDIA L40S), cuda:1 (NVIDIA L40S): arch 'sm_999' is not one the cuda "
        "backend knows (known: sm_20, sm_30, sm_35, sm_37, sm_50, "
    ) in text
    assert (
        "sm_121); its answers about dtypes, attention and quantization on these devices are "
        "uncertain. Fix: correct the arch (in the host file, or the driver's report), or update "
        "hwbackends-cuda"
    ) in text
    report = json.loads(cli("env", "--host", host, "--json").stdout)
    assert any("arch 'sm_999' is not one the cuda backend knows" in w for w in report["warnings"])
    quant = _quant(report)
    # never "older than 8.9 / 7.5": the gated methods are unknown on an unknown arch
    assert {m: quant[m] for m in ("fp8", "mxfp4", "fbgemm_fp8", "nvfp4")} == dict.fromkeys(
        ("fp8", "mxfp4", "fbgemm_fp8", "nvfp4"), "unknown"
    )
    verbose = " ".join(cli("env", "--host", host, "--verbose").stdout.split())
    assert "quant unknown compressed_tensors, fbgemm_fp8, fouroversix, fp8," in verbose


def test_known_archs_keep_their_verdicts_and_give_no_warning() -> None:
    new = json.loads(cli("env", "--host", TWO, "--json").stdout)  # sm_89
    old = json.loads(cli("env", "--host", V100, "--json").stdout)  # sm_70
    assert not any("backend knows" in w for w in new["warnings"] + old["warnings"])
    assert (_quant(new)["fp8"], _quant(new)["fbgemm_fp8"]) == ("supported", "unsupported")
    assert (_quant(old)["fp8"], _quant(old)["mxfp4"]) == ("partial", "partial")


def test_torch_fix_follows_the_devices_wheel_index() -> None:
    """A Pascal host is sent to the cu126 index (its probe's choice), not the default cu128."""
    import hwbackends

    p100 = Path(__file__).parents[1] / "plugins/hwbackends-cuda/tests/hosts"
    host = Host.from_file(p100 / "p100-pci-only-no-torch.json")
    assert torch_fix(hwbackends.get("cuda"), host) == (
        f"install torch: {sys.executable} -m pip install torch --index-url "
        "https://download.pytorch.org/whl/cu126"
    )
