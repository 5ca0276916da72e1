"""Launch plans fit the scheduler: an sbatch script never sets a visibility
variable (Slurm sets it per step from the job's GRES allocation) and requests the devices
instead; a batch or multi-node plan made where the accelerator is not (a login node), or for a
named backend whose hardware is elsewhere, carries a warning with the fix, on stderr and in
``--json`` ``warnings``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from coretest import needs_plugins, run_main

from hwbackends import Host
from hwbackends._base.errors import BackendUnavailableError
from hwbackends.distributed import launch_plan
from hwbackends.visibility import variables_for

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ROOT / "plugins"
H100 = str(PLUGINS / "hwbackends-cuda" / "tests" / "hosts" / "h100-sxm-8.json")
LOGIN = str(ROOT / "tests" / "hosts" / "dummy-box.json")  # no accelerator: a login node
ALL_HOSTS = sorted(p for p in PLUGINS.glob("hwbackends-*/tests/hosts/*.json"))

pytestmark = needs_plugins


def assigned(script: str) -> set[str]:
    """Every variable the script exports, assigns or unsets."""
    names = set()
    for line in script.splitlines():
        words = line.split()
        if words[:1] == ["export"]:
            names.add(words[1].partition("=")[0])
        elif words[:1] == ["unset"]:
            names.update(words[1:])
        elif words and "=" in words[0] and words[0].partition("=")[0].isidentifier():
            names.add(words[0].partition("=")[0])
    return names


@pytest.mark.parametrize("path", ALL_HOSTS, ids=[p.stem for p in ALL_HOSTS])
def test_no_sbatch_script_sets_a_visibility_variable(path: Path) -> None:
    host = Host.from_file(path)
    env = {"CUDA_VISIBLE_DEVICES": "1,0", "ROCR_VISIBLE_DEVICES": "0"}
    plan = launch_plan(nnodes=2, scheduler="slurm", host=host, env=env)
    declared = set(variables_for(plan.backend)) if plan.backend != "cpu" else set()
    for script in (plan.sbatch, plan.sbatch_torchrun):
        assert not assigned(script) & (declared | set(env)), script
        assert "_VISIBLE_DEVICES=" not in script


def test_gpu_sbatch_requests_the_gpus_and_says_slurm_sets_the_variable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for style in ("slurm", "slurm-torchrun"):
        code, out, err = run_main(
            capsys, "launch-plan", "--scheduler", style, "--nnodes", "2", "--host", H100
        )
        assert code == 0 and err == ""
        assert "#SBATCH --gpus-per-node=8" in out
        assert "export CUDA_VISIBLE_DEVICES" not in out and "unset" not in out
        assert "CUDA_VISIBLE_DEVICES per step itself" in out
    plan = launch_plan(4, nnodes=2, scheduler="slurm", host=Host.from_file(H100), env={})
    assert "#SBATCH --gpus-per-node=4" in plan.sbatch and plan.warnings == ()


def test_a_login_node_plan_warns_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "launch-plan", "--scheduler", "slurm", "--nnodes", "2",
                         "--host", LOGIN)  # fmt: skip
    assert code == 0 and "#SBATCH --ntasks-per-node=1" in out
    flat = " ".join(err.split())
    assert flat.startswith("hwbackends: warning: an sbatch script for the cpu backend")
    assert "--host FILE" in flat and "--backend NAME --nproc-per-node N" in flat
    code, out, _ = run_main(
        capsys, "launch-plan", "--json", "--scheduler", "slurm", "--host", LOGIN
    )
    (w,) = json.loads(out)["warnings"]
    assert "login node" in w and "--backend NAME --nproc-per-node N" in w
    # a multi-node torchrun plan made on the login node warns too, in the text report
    code, out, _ = run_main(capsys, "launch-plan", "--nnodes", "2", "--rdzv-endpoint", "n0:29500",
                       "--host", LOGIN)  # fmt: skip
    assert "Warnings" in out and "a 2-node plan for the cpu backend" in " ".join(out.split())
    plan = launch_plan(nnodes=2, scheduler="slurm", host=Host.from_file(LOGIN), env={})
    assert len(plan.warnings) == 1
    # one node, no scheduler: a CPU plan for this very machine is what was asked
    assert launch_plan(host=Host.from_file(LOGIN), env={}).warnings == ()


def test_a_named_backend_without_hardware_here_is_planned_with_a_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["launch-plan", "--scheduler", "slurm", "--nnodes", "2", "--host", LOGIN]
    code, out, err = run_main(capsys, *argv, "--backend", "cuda", "--nproc-per-node", "4")
    assert code == 0
    assert "#SBATCH --gpus-per-node=4" in out and "#SBATCH --ntasks-per-node=4" in out
    flat = " ".join(err.split())
    assert "warning: this machine has no usable cuda hardware" in flat
    assert "--host FILE" in flat
    code, out, _ = run_main(capsys, *argv, "--backend", "cuda", "--nproc-per-node", "4", "--json")
    d = json.loads(out)
    assert d["backend"] == "cuda" and d["collective"] == "nccl" and d["problems"] == []
    assert [r["torch_device"] for r in d["ranks"]] == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    assert len(d["warnings"]) == 1
    # without the count there is nothing to plan with: refused, naming the option
    code, _, err = run_main(capsys, *argv, "--backend", "cuda")
    assert code == 2 and "--nproc-per-node N" in err
    with pytest.raises(BackendUnavailableError, match="nproc_per_node=N"):
        launch_plan(nnodes=2, scheduler="slurm", backend="cuda", host=Host.from_file(LOGIN))
    # a one-node plan for this machine still refuses a backend it cannot run
    with pytest.raises(BackendUnavailableError):
        launch_plan(4, backend="cuda", host=Host.from_file(LOGIN), env={})


def _note(script: str) -> str:
    """The script's comment about visibility (before ``set -euo pipefail``), as one line."""
    head = script.partition("set -euo pipefail")[0]
    return " ".join(line[2:] for line in head.splitlines() if line.startswith("# "))


def test_slurm_is_said_to_set_only_what_its_gpu_gres_sets() -> None:
    # Slurm's gres.conf(5) "Flags": the gpu GRES sets CUDA_VISIBLE_DEVICES,
    # ROCR_VISIBLE_DEVICES, ZE_AFFINITY_MASK, GPU_DEVICE_ORDINAL; no other GRES sets any
    from hwbackends._integrations.sbatch import sbatch_scripts

    def note(gres: str | None, variables: list[str]) -> str:
        return _note(
            sbatch_scripts("tt", 1, 4, ["t.py"], used_devices=4, gres=gres, variables=variables)[0]
        )

    tt = note("tenstorrent", ["TT_VISIBLE_DEVICES"])
    assert tt == (
        "Slurm gives the job its tt devices from its 'tenstorrent' GRES allocation but sets no "
        "variable tt's runtime reads (it sets them for the gpu GRES only): the job sees the "
        "devices the node's cgroup device constraint leaves it."
    )
    assert note(None, ["TT_VISIBLE_DEVICES"]).startswith(
        "Request 4 tt devices per node as this cluster names them (the tt backend declares no "
        "Slurm GRES); Slurm sets no variable tt's runtime reads"
    )
    # a gpu GRES whose runtime reads none of Slurm's variables
    assert "it sets only CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES / ZE_AFFINITY_MASK" in note(
        "gpu", ["ACME_VISIBLE_DEVICES"]
    )
    assert note("gpu", ["ONEAPI_DEVICE_SELECTOR", "ZE_AFFINITY_MASK"]).startswith(
        "Slurm gives the job its tt devices from its GRES allocation and sets ZE_AFFINITY_MASK "
        "per step itself"
    )


def test_a_rocm_plan_names_what_slurm_sets_and_not_hip() -> None:
    host = Host.from_file(PLUGINS / "hwbackends-rocm" / "tests" / "hosts" / "mi300x-8.json")
    plan = launch_plan(2, nnodes=2, scheduler="slurm", host=host, env={})
    assert _note(plan.sbatch).startswith(
        "Slurm gives the job its rocm devices from its GRES allocation and sets "
        "ROCR_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES / GPU_DEVICE_ORDINAL per step itself"
    )
    assert "HIP_VISIBLE_DEVICES" not in plan.sbatch  # the HIP runtime's, not Slurm's
