"""Settings for the model the user loads (``model=``): the attention its class supports as the
installed Transformers decides, refusals where a choice fails in use, hub kernels only on
opt-in, ``pipeline`` settings, and clear errors for what is not a model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from transformers import (
    Gemma2Config,
    GptOssConfig,
    GptOssForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    PretrainedConfig,
)

import hwbackends.transformers as hwt
from hwbackends import Host, UnsupportedSettingError
from hwbackends.transformers import ModelError, model_facts, pipeline_kwargs, plan_pretrained

CPU = {"HWBACKENDS_PLUGINS": "", "HF_HUB_OFFLINE": "1"}
TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "head_dim": 16,
        "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 128}  # fmt: skip
PLUGINS = Path(__file__).resolve().parents[2] / "plugins"


def save(tmp: Path, config: PretrainedConfig) -> Path:
    torch.manual_seed(0)
    model: Any = transformers.AutoModelForCausalLM.from_config(config)
    model.save_pretrained(tmp)
    return tmp


@pytest.fixture(scope="module")
def gpt_oss(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers

    cfg = GptOssConfig(**TINY, num_local_experts=4, num_experts_per_tok=2)
    path = save(tmp_path_factory.mktemp("gpt-oss"), cfg)
    words = Tokenizer(models.WordLevel({f"w{i}": i for i in range(128)}, unk_token="w0"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=words, unk_token="w0")
    tok.save_pretrained(path)
    return path


def test_the_attention_is_one_the_class_supports_and_the_reason_names_it(gpt_oss: Path) -> None:
    # on 74a0405 every CPU plan said sdpa, which Transformers refuses for GPT-OSS and Gemma2
    for model in (gpt_oss, GptOssConfig(), GptOssForCausalLM, Gemma2Config()):
        plan = plan_pretrained(env=CPU, model=model)
        assert plan.kwargs["attn_implementation"] == "eager", model
        assert "sdpa: " in plan.reasons["attn_implementation"]  # passed over, with why
    plan = plan_pretrained(env=CPU, model=LlamaConfig())
    assert plan.kwargs["attn_implementation"] == "sdpa"
    assert "LlamaForCausalLM supports" in plan.reasons["attn_implementation"]
    # Transformers loads and runs what was recommended
    kw = hwt.pretrained_kwargs(env=CPU, model=gpt_oss)
    loaded: Any = transformers.AutoModelForCausalLM.from_pretrained(gpt_oss, **kw)
    loaded(input_ids=torch.tensor([[1, 2, 3]]))
    assert loaded.config._attn_implementation == "eager"


def test_the_facts_are_the_class_declarations() -> None:
    for cls in (LlamaForCausalLM, GptOssForCausalLM):
        f = model_facts(cls)
        assert (f.sdpa, f.flash, f.flex) == (
            cls._supports_sdpa,
            cls._supports_flash_attn,
            cls._supports_flex_attn,
        )
    oss = model_facts(GptOssForCausalLM)
    assert oss.compatible_flash == tuple(GptOssForCausalLM._compatible_flash_implementations or ())
    assert oss.refusal("flash_attention_2") is not None  # Transformers would swap it
    assert "MegaBlocksMoeMLP" in oss.kernel_layers and oss.sinks


def test_without_a_model_nothing_a_class_refuses_is_recommended() -> None:
    plan = plan_pretrained(env=CPU)
    assert "attn_implementation" not in plan.kwargs
    assert plan.reasons["attn_implementation"].startswith("left to Transformers")


def test_flex_attention_is_refused_where_it_fails_in_use(gpt_oss: Path) -> None:
    # loads on CPU, but torch has no CPU backward: training fails
    with pytest.raises(UnsupportedSettingError, match="does not support backward on CPU"):
        hwt.pretrained_kwargs(env=CPU, attention="flex_attention", model=LlamaConfig(),
                              purpose="training")  # fmt: skip
    # GPT-OSS's attention sinks cannot run under flex on CPU at all
    with pytest.raises(UnsupportedSettingError, match="attention sinks"):
        hwt.pretrained_kwargs(env=CPU, attention="flex_attention", model=gpt_oss)
    # inference of a class without sinks runs: passed on
    ok = hwt.pretrained_kwargs(env=CPU, attention="flex_attention", model=LlamaConfig())
    assert ok["attn_implementation"] == "flex_attention"
    # a name the class refuses is refused with the class's reason
    with pytest.raises(UnsupportedSettingError, match=r"Gemma2ForCausalLM does not support sdpa"):
        hwt.pretrained_kwargs(env=CPU, attention="sdpa", model=Gemma2Config())


def test_use_kernels_only_on_opt_in(gpt_oss: Path) -> None:
    online = {"HWBACKENDS_PLUGINS": ""}
    for model in (None, gpt_oss, LlamaConfig()):
        plan = plan_pretrained(env=online, model=model)
        assert "use_kernels" not in plan.kwargs  # 74a0405 set it on every CPU
        assert "pass kernels=True" in plan.reasons["use_kernels"]
    # opted in: only where the class has a layer the installed kernels map for this device
    assert hwt.pretrained_kwargs(env=online, model=gpt_oss, kernels=True)["use_kernels"] is True
    with pytest.raises(UnsupportedSettingError, match="would do nothing"):
        hwt.pretrained_kwargs(env=online, model=LlamaConfig(), kernels=True)


def test_pipeline_kwargs_carry_the_attention(gpt_oss: Path) -> None:
    # the example of docs/quickstart.md (run there too by tests/docs/test_docs_examples.py)
    path = str(gpt_oss)
    pipe = transformers.pipeline(
        "text-generation", model=path, **pipeline_kwargs(model=path, env=CPU)
    )
    assert pipe.model.config._attn_implementation == "eager"
    # passed to pipeline() directly, Transformers drops it and loads sdpa (refused by the class
    # at from_pretrained, so it is never reached): model_kwargs is the only carrier
    kw = pipeline_kwargs(model=path, env=CPU, attention="eager")
    assert set(kw) == {"device_map", "dtype", "model_kwargs"}
    assert kw["model_kwargs"] == {"attn_implementation": "eager"}


def test_bad_models_get_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"a folder without a config\.json"):
        plan_pretrained(env=CPU, model=tmp_path)
    with pytest.raises(ModelError, match="no such folder"):
        plan_pretrained(env=CPU, model=str(tmp_path / "missing"))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "not-a-model-type"}))
    with pytest.raises(ModelError, match="does not know"):
        plan_pretrained(env=CPU, model=tmp_path)

    class Odd(PretrainedConfig):
        model_type = "hwbackends-odd"

    with pytest.raises(ModelError, match=r"model_type 'hwbackends-odd', which the installed"):
        plan_pretrained(env=CPU, model=Odd())
    with pytest.raises(ModelError, match="not in the local Hugging Face cache") as exc:
        plan_pretrained(env=CPU, model="hwbackends-test/not-cached-anywhere")
    assert "Fix: download it first" in str(exc.value)
    with pytest.raises(ModelError, match="is not a model hwbackends can plan for"):
        plan_pretrained(env=CPU, model=42)


def test_env_model_shows_the_plan_for_that_model(gpt_oss: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "hwbackends", "env", "--json", "--model", str(gpt_oss)],
        capture_output=True, text=True, env={**CPU, "PATH": ""}, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    pre = json.loads(out.stdout)["settings"]["from_pretrained"]
    assert pre["kwargs"]["attn_implementation"] == "eager"
    assert pre["model"]["class"] == "GptOssForCausalLM"
    bad = subprocess.run(
        [sys.executable, "-m", "hwbackends", "env", "--model", "/nonexistent/model"],
        capture_output=True, text=True, env={**CPU, "PATH": ""}, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2 and "no such folder" in bad.stderr and "Traceback" not in bad.stderr


def test_flash_refusal_says_a_package_is_missing() -> None:
    # an L40S (sm_89, Ada) runs flash-attention 2; what is missing is flash-attn / kernels
    h = Host.from_dict(
        {
            "torch": {"version": "2.8.0+cu128", "cuda": "12.8"},
            "packages": {"transformers": "5.22.2"},
            "drivers": {"nvidia": "570.124.04"},
            "devices": [{"vendor": "nvidia", "pci_bus_id": "0000:01:00.0", "name": "NVIDIA L40S"}],
        }
    )  # fmt: skip
    with pytest.raises(UnsupportedSettingError) as exc:
        plan_pretrained(host=h, env={}, attention="flash_attention_2", model=LlamaConfig())
    text = str(exc.value)
    assert "flash-attn not installed" in text and "does not support it" not in text
    assert "a package is missing, not device support" in text


GPU_HOSTS = sorted(
    p for p in PLUGINS.glob("hwbackends-*/tests/hosts/*.json") if "_template" not in str(p)
)
CLASSES = ("LlamaForCausalLM", "GptOssForCausalLM", "Gemma2ForCausalLM", "BloomForCausalLM",
           "Qwen3MoeForCausalLM", "FalconForCausalLM", "GPT2LMHeadModel")  # fmt: skip


@pytest.mark.parametrize("host_file", GPU_HOSTS, ids=lambda p: f"{p.parents[2].name}/{p.stem}")
def test_on_every_simulated_host_each_class_gets_an_attention_it_declares(host_file: Path) -> None:
    h = Host.from_file(host_file)
    env = dict(h.env or {})
    try:
        plan_pretrained(host=h, env=env)
    except Exception:  # a host where no settings are right (no device for the rank, ...)
        pytest.skip("no plan on this host")
    for name in CLASSES:
        facts = model_facts(getattr(transformers, name))
        for kernels in ("auto", True):
            try:
                plan = plan_pretrained(host=h, env=env, model=facts, kernels=kernels)
            except UnsupportedSettingError:
                assert kernels is True  # only an opt-in may be refused
                continue
            impl = plan.kwargs["attn_implementation"]
            assert facts.refusal(impl) is None, (name, impl)
            assert facts.class_name in plan.reasons["attn_implementation"]


def test_a_hub_id_is_read_from_the_local_cache_only(tmp_path: Path) -> None:
    # the cache layout huggingface_hub writes: refs/main names the snapshot
    repo = tmp_path / "hub" / "models--hwbackends-test--tiny-oss"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    snap = repo / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True)
    GptOssConfig(**TINY).save_pretrained(snap)
    code = (
        "from hwbackends.transformers import plan_pretrained\n"
        "p = plan_pretrained(model='hwbackends-test/tiny-oss')\n"
        "print(p.kwargs['attn_implementation'], p.model.class_name)\n"
    )
    env = {**CPU, "HF_HUB_CACHE": str(tmp_path / "hub"), "PATH": ""}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["eager", "GptOssForCausalLM"]


def test_seq2seq_and_encoder_models_get_settings_their_class_loads(tmp_path: Path) -> None:
    from transformers import AutoModel, AutoModelForSeq2SeqLM, BertConfig, T5Config

    t5 = T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=2,
                  decoder_start_token_id=0)  # fmt: skip
    bert = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=64)  # fmt: skip
    for config, auto in ((t5, AutoModelForSeq2SeqLM), (bert, AutoModel)):
        path = tmp_path / config.model_type
        torch.manual_seed(0)
        auto.from_config(config).save_pretrained(path)
        kw = hwt.pretrained_kwargs(env=CPU, model=path)
        facts = model_facts(path)
        assert facts.refusal(kw["attn_implementation"]) is None
        model: Any = auto.from_pretrained(path, **kw)
        ids = torch.tensor([[1, 2, 3]])
        extra = {"decoder_input_ids": ids} if auto is AutoModelForSeq2SeqLM else {}
        model(input_ids=ids, **extra)
        assert model.config._attn_implementation == kw["attn_implementation"]


def test_smoke_plans_for_the_model_it_loads(gpt_oss: Path) -> None:
    from hwbackends._integrations.smoke import run_smoke

    result = run_smoke(env=CPU, model=str(gpt_oss), log=lambda _line: None, new_tokens=2)
    assert result.settings["attn_implementation"] == "eager"  # GPT-OSS refuses sdpa
    assert result.exercised["attn_implementation"] == "eager"
    assert "pass kernels=True" in result.exercised["use_kernels"]["why"]


def test_smoke_kernel_message_is_true_for_the_device() -> None:
    from hwbackends._integrations.smoke import _kernels_why

    plan = plan_pretrained(env=CPU, kernels=False)
    assert plan.kernels.device_key == "cpu"
    # RMSNorm has no CPU kernel: Hub access would change nothing (74a0405 said it would)
    why = _kernels_why([], ["model.norm (RMSNorm)"], plan)
    assert "keep their own forward with or without Hub access" in why
    why = _kernels_why([], ["model.layers.0.mlp (MegaBlocksMoeMLP)"], plan)
    assert "a run with Hub access downloads 1 of them" in why
