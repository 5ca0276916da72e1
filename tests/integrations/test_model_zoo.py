"""The causal-LM zoo of the installed Transformers (``zoo.py``): a deterministic sample loads
and runs one forward pass with ``pretrained_kwargs(model=path)`` wherever Transformers'
defaults do, and trains 2 ``Trainer`` steps with the recommended settings wherever default
training works. ``bench/zoo.py`` runs the whole zoo (the table in ``bench/README.md``)."""

from __future__ import annotations

import pytest
from integrations import zoo

#: Types whose classes refuse sdpa or need flex/flash care, always in the sample; then every
#: n-th other type, sorted, so the sample is the same on every run and machine.
ALWAYS = ("llama", "gpt_oss", "gemma2", "bloom", "mpt", "mamba", "qwen3_moe", "gpt2")
SAMPLE = zoo.sample(zoo.model_types(), 24, ALWAYS)


def test_the_sample_is_the_zoo_of_the_installed_transformers() -> None:
    types = zoo.model_types()
    assert len(types) > 100 and set(SAMPLE) <= set(types) and len(SAMPLE) == 24
    assert zoo.sample(types, 24, ALWAYS) == SAMPLE  # deterministic


@pytest.mark.parametrize("model_type", SAMPLE)
def test_recommended_settings_work_wherever_the_defaults_do(model_type: str) -> None:
    row = zoo.run_type(model_type)
    if not row["built"]:
        pytest.skip(f"{model_type} cannot be built tiny: {row['class']}")
    assert zoo.regressions(row) == [], row
    if row["ours_load"]:
        # the attention chosen is what Transformers itself resolved for the class
        assert row["ours_attn"] in ("sdpa", "eager"), row
