"""``training_kwargs()`` and ``detect_launch()`` next to Accelerate's own decisions.

For every environment set of a grid (launcher variables of torchrun, MPI and Slurm, alone
and mixed, with the spellings ``int()`` accepts), a subprocess runs the real
``accelerate.PartialState(cpu=True)``, ``TrainingArguments(use_cpu=True)`` and
``TrainingArguments(**training_kwargs())`` on this CPU and compares:

- hwbackends sets ``ddp_backend`` exactly where Accelerate forms a process group;
- ``TrainingArguments(**training_kwargs())`` works wherever ``TrainingArguments`` without
  hwbackends works; where that fails for want of a rendezvous variable (MPI without
  ``MASTER_ADDR``, a lone ``LOCAL_RANK``), ``training_kwargs()`` refuses with the fix
  instead, and it refuses nowhere else but where a launch of several processes would train
  each alone;
- the rank and world size Accelerate starts the group with are ``detect_launch()``'s, except
  for the deliberate differences docs/reference/launchers.md lists.

``torch.distributed.init_process_group`` is recorded, checked for the variables torch's
``env://`` rendezvous reads (as ``_env_rendezvous_handler`` raises), and then given a
one-rank group, so a set that asks for two ranks does not wait for a second process
(tests/integrations/test_launchers.py starts real ones).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import accelerate  # noqa: F401 - installed by scripts/test.sh: a missing one fails, not skips
import pytest
import transformers  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "reference" / "launchers.md"

LOCAL = [{}, {"LOCAL_RANK": "-1"}, {"LOCAL_RANK": "0"}, {"LOCAL_RANK": " 1"}, {"LOCAL_RANK": "x"}]
TORCH = [
    {},
    {"RANK": "1", "WORLD_SIZE": "2"},
    {"RANK": " 1", "WORLD_SIZE": " 2"},  # int(" 2") == 2, as Accelerate reads it
    {"WORLD_SIZE": "2"},  # no RANK: Accelerate takes rank 0
    {"WORLD_SIZE": "1"},
]
MPI = [
    {},
    {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"},
    {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
     "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
    {"PMI_RANK": "0", "PMI_SIZE": "1"},
]  # fmt: skip
SLURM = [
    {},
    # a batch shell of --ntasks=3 (sbatch(1) OUTPUT ENVIRONMENT VARIABLES)
    {"SLURM_JOB_ID": "4242", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NTASKS": "3",
     "SLURM_JOB_NODELIST": "localhost"},
    # task 1 of a two-task srun step (srun(1) OUTPUT ENVIRONMENT VARIABLES)
    {"SLURM_JOB_ID": "4242", "SLURM_PROCID": "1", "SLURM_LOCALID": "1", "SLURM_NTASKS": "2",
     "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "localhost",
     "SLURM_JOB_NODELIST": "localhost"},
]  # fmt: skip
BASE = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"}


def grid() -> list[dict[str, str]]:
    full = [
        {**BASE, **a, **b, **c, **d} for a, b, c, d in itertools.product(LOCAL, TORCH, MPI, SLURM)
    ]
    # without a rendezvous address: mpiexec/mpirun and a lone LOCAL_RANK export none
    bare = [{**a, **c, **d} for a, c, d in itertools.product(LOCAL, MPI, SLURM)]
    return full + bare


RUNNER = r"""
import json, os, sys, tempfile, warnings
import torch.distributed as dist
from torch.distributed import HashStore
from accelerate import PartialState
from transformers import TrainingArguments
import hwbackends
from hwbackends.accelerate import training_kwargs
from hwbackends.distributed import LaunchError, detect_launch

calls = []
real_init = dist.init_process_group

def recording_init(backend=None, **kw):
    calls.append({"backend": backend, "rank": kw.get("rank"), "world": kw.get("world_size")})
    if "init_method" not in kw and "store" not in kw:  # env://, as torch reads it
        needed = [n for n, given in (("RANK", "rank"), ("WORLD_SIZE", "world_size"))
                  if kw.get(given) is None] + ["MASTER_ADDR", "MASTER_PORT"]
        for name in needed:
            if not os.environ.get(name):
                raise ValueError("Error initializing torch.distributed using env:// "
                                 f"rendezvous: environment variable {name} expected, but not set")
    real_init(backend="gloo", store=HashStore(), rank=0, world_size=1)

dist.init_process_group = recording_init
clean = dict(os.environ)
out_dir = tempfile.mkdtemp()

def attempt(make):
    calls.clear()
    try:
        make()
        result = {"ok": True, "group": calls[0] if calls else None}
    except Exception as exc:
        result = {"ok": False, "error": type(exc).__name__, "message": str(exc)[:200]}
    PartialState._reset_state()
    if dist.is_initialized():
        dist.destroy_process_group()
    os.environ.clear()
    os.environ.update(clean)
    return result

results = []
for case in json.load(sys.stdin):
    os.environ.clear()
    os.environ.update({**clean, **case})
    hwbackends.reset()  # the defaults keep the process's first reading until reset()
    try:
        kw = training_kwargs()
    except Exception as exc:
        kw = {"error": type(exc).__name__, "message": str(exc)}
    try:
        info = detect_launch()
        launch = {"launcher": info.launcher, "rank": info.rank, "world": info.world_size}
    except LaunchError as exc:
        launch = {"error": str(exc)[:120]}
    os.environ.clear()
    os.environ.update({**clean, **case})
    state = attempt(lambda: PartialState(cpu=True))
    os.environ.update(case)
    plain = attempt(lambda: TrainingArguments(output_dir=out_dir, use_cpu=True))
    os.environ.update(case)
    ours = ({"refused": True} if "error" in kw
            else attempt(lambda: TrainingArguments(output_dir=out_dir, **kw)))
    results.append({"case": case, "kwargs": kw, "launch": launch, "state": state,
                    "plain": plain, "ours": ours})
json.dump(results, sys.stdout)
"""


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, object]]:
    tmp = tmp_path_factory.mktemp("grid")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "PMI_", "MV2_", "MPI_", "ACCELERATE_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                         "MASTER_PORT")}  # fmt: skip
    env.update(HWBACKENDS_PLUGINS="", OMP_NUM_THREADS="1", HF_HOME=str(tmp / "hf"))
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", RUNNER],
        input=json.dumps(grid()),
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results: list[dict[str, object]] = json.loads(proc.stdout)
    assert len(results) == len(grid()) == 360
    return results


def test_ddp_backend_is_set_exactly_where_accelerate_forms_a_group(
    outcomes: list[dict[str, object]],
) -> None:
    wrong = []
    for r in outcomes:
        state, kw = r["state"], r["kwargs"]
        assert isinstance(state, dict) and isinstance(kw, dict)
        if not state["ok"] or "error" in kw:  # Accelerate (int("x"), MASTER_ADDR) or we refuse
            continue
        if ("ddp_backend" in kw) != (state["group"] is not None):
            wrong.append(r)
    assert not wrong, json.dumps(wrong[:3], indent=1)


def test_training_kwargs_never_break_what_works_without_them(
    outcomes: list[dict[str, object]],
) -> None:
    worse = []
    for r in outcomes:
        plain, ours = r["plain"], r["ours"]
        assert isinstance(plain, dict) and isinstance(ours, dict)
        if ours.get("refused"):
            continue  # test_refusals_name_the_fix_exactly_where_training_would_break
        same_group = not ours["ok"] or (ours["group"] is None) == (plain["group"] is None)
        if plain["ok"] != ours["ok"] or plain.get("error") != ours.get("error") or not same_group:
            worse.append(r)
    assert not worse, json.dumps(worse[:3], indent=1)
    # LOCAL_RANK=-1 alone: works, no group, no ddp_backend
    (minus_one,) = [r for r in outcomes if r["case"] == {**BASE, "LOCAL_RANK": "-1"}]
    assert minus_one["ours"] == {"ok": True, "group": None}
    assert "ddp_backend" not in minus_one["kwargs"]  # type: ignore[operator]


_RENDEZVOUS = ("expected, but not set", "MASTER_ADDR` env was not set")


def test_refusals_name_the_fix_exactly_where_training_would_break(
    outcomes: list[dict[str, object]],
) -> None:
    """Under mpiexec/mpirun without MASTER_ADDR, or a lone LOCAL_RANK, TrainingArguments
    fails in torch's env:// rendezvous: training_kwargs() refuses there, naming the fix; it
    refuses elsewhere only where several launched processes would each train alone."""
    refused, wrong = 0, []
    for r in outcomes:
        plain, kw, launch = r["plain"], r["kwargs"], r["launch"]
        assert isinstance(plain, dict) and isinstance(kw, dict) and isinstance(launch, dict)
        breaks = not plain["ok"] and any(m in plain["message"] for m in _RENDEZVOUS)
        alone = plain["ok"] and plain["group"] is None and launch.get("world", 1) > 1
        if "error" not in kw:
            if breaks:
                wrong.append(r)
            continue
        refused += 1
        fix = "init_process_group()" in kw["message"] or "unset" in kw["message"]
        if kw["error"] != "LaunchError" or not fix or not (breaks or alone):
            wrong.append(r)
    assert not wrong, json.dumps(wrong[:3], indent=1)
    assert refused >= 20  # the grid really has sets that break


def deliberate_difference(case: dict[str, str]) -> str | None:
    """Why detect_launch may read a set otherwise than Accelerate; each phrase is in the docs."""
    if "SLURM_STEP_NUM_TASKS" in case and not any(
        k in case for k in ("PMI_RANK", "OMPI_COMM_WORLD_RANK")
    ) and "RANK" not in case:  # fmt: skip
        return "Accelerate does not read Slurm's variables"
    if ("RANK" in case) != ("WORLD_SIZE" in case):
        return "a lone WORLD_SIZE or RANK is not a launch"
    return None


def test_ranks_agree_with_accelerate_where_it_forms_a_group(
    outcomes: list[dict[str, object]],
) -> None:
    compared, differ = 0, []
    for r in outcomes:
        state, launch = r["state"], r["launch"]
        assert isinstance(state, dict) and isinstance(launch, dict)
        case = r["case"]
        assert isinstance(case, dict)
        if not state["ok"] or state["group"] is None:
            continue
        group = state["group"]
        got = (launch.get("rank"), launch.get("world"))
        if got == (group["rank"], group["world"]):
            compared += 1
            continue
        why = deliberate_difference(case)
        assert why is not None, json.dumps(r, indent=1)
        differ.append(why)
    assert compared >= 100  # the grid really compares ranks
    text = DOCS.read_text(encoding="utf-8")
    for why in set(differ):
        assert why in text, why


PRECISION = r"""
import json, os, tempfile
from transformers import TrainingArguments
from hwbackends.accelerate import plan_training
plan = plan_training()
args = TrainingArguments(output_dir=tempfile.mkdtemp(), **plan.kwargs)
print(json.dumps({"kwargs": plan.kwargs, "why": plan.reasons.get("precision"),
                  "mixed": args.mixed_precision}))
"""


@pytest.mark.parametrize("chosen", ["fp16", "bf16", "no", None])
def test_the_launchers_mixed_precision_wins(tmp_path: Path, chosen: str | None) -> None:
    """`accelerate launch --mixed_precision X` exports ACCELERATE_MIXED_PRECISION=X, which
    TrainingArguments reads unless bf16/fp16 is passed; training_kwargs() passes neither then."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELERATE_")}
    env.update(HWBACKENDS_PLUGINS="", OMP_NUM_THREADS="1", HF_HOME=str(tmp_path / "hf"))
    if chosen is not None:
        env["ACCELERATE_MIXED_PRECISION"] = chosen
    proc = subprocess.run([sys.executable, "-c", PRECISION], capture_output=True, text=True,
                          env=env, timeout=600, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    if chosen is None:  # nothing chosen: hwbackends chooses (bf16 on this CPU)
        assert seen["kwargs"].get("bf16") is True and seen["mixed"] == "bf16"
        return
    assert "bf16" not in seen["kwargs"] and "fp16" not in seen["kwargs"]
    assert seen["mixed"] == chosen
    assert seen["why"].startswith(f"{chosen} as chosen by ACCELERATE_MIXED_PRECISION")
