"""docs/concepts.md "Uncertainty": a known runtime-vs-PyTorch disagreement warns but is not
uncertain; an undocumented runtime rule is."""

from __future__ import annotations

from pathlib import Path

from hwbackends import Host
from hwbackends.visibility import explain_visibility

ROOT = Path(__file__).resolve().parents[2]
H100 = Host.from_file(ROOT / "plugins/hwbackends-cuda/tests/hosts/h100-sxm-8.json")


def cuda(value: str):  # type: ignore[no-untyped-def]
    env = {"CUDA_VISIBLE_DEVICES": value, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    return explain_visibility("cuda", env, H100)


def test_pytorch_disagreement_warns_without_uncertainty() -> None:
    report = cuda("\u0663")  # an Arabic-Indic 3: PyTorch's parser reads it, the driver does not
    assert report.physical == [] and not report.uncertain
    assert report.warnings[0].startswith(
        "Before CUDA is initialised, torch.cuda.device_count() reports 1 device(s) but the "
        "driver exposes 0"
    )
    assert "the answer itself is not uncertain" in (ROOT / "docs/concepts.md").read_text()


def test_undocumented_runtime_rule_is_uncertain() -> None:
    assert cuda("0,1,0").uncertain  # a repeated entry: the driver's rule is undocumented
