"""``use_kernels`` with the Hub off: recommended on opt-in when every repository the model's
layers need for this device is in the local cache, refused naming the missing ones and the
command that downloads them otherwise. The cache is a fake one in huggingface_hub's layout
(``kernels--org--name/refs/<branch>``, ``snapshots/<commit>/``) under ``HF_HUB_CACHE``; nothing
is downloaded."""

from __future__ import annotations

from pathlib import Path

import kernels  # noqa: F401  (the mapping object is built from kernels' classes)
import pytest
import torch  # noqa: F401  (the model classes' modules need it)
from transformers import GptOssConfig, LlamaConfig
from transformers.integrations import hub_kernels

import hwbackends.transformers as hwt
from hwbackends import UnsupportedSettingError
from hwbackends._integrations.use_kernels import hub_cache_dir, hub_kernels_for

TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "head_dim": 16,
        "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 128}  # fmt: skip
OSS = GptOssConfig(**TINY, num_local_experts=4, num_experts_per_tok=2)


def _cpu_repo() -> tuple[str, str]:
    """The repository and revision GPT-OSS's MegaBlocksMoeMLP loads on cpu for inference, as
    the installed Transformers maps it (never a copy of its table)."""
    from kernels import Mode

    entry = hub_kernels.get_kernel_mapping_transformers()["MegaBlocksMoeMLP"]["cpu"]
    repo = entry[Mode.INFERENCE] if isinstance(entry, dict) else entry
    return repo._repo_id, repo._revision or f"v{repo._version}"


def cache_with(root: Path, repo_id: str, revision: str) -> Path:
    """A cache holding one snapshot of ``repo_id`` that the branch ``revision`` names."""
    folder = root / ("kernels--" + repo_id.replace("/", "--"))
    (folder / "refs").mkdir(parents=True)
    commit = "1" * 40
    (folder / "refs" / revision).write_text(commit)
    build = folder / "snapshots" / commit / "build" / "torch-cpu"  # noarch: any system
    build.mkdir(parents=True)
    (build / "metadata.json").write_text("{}")
    return root


def offline(cache: Path, **more: str) -> dict[str, str]:
    return {"HWBACKENDS_PLUGINS": "", "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), **more}


def test_offline_opt_in_loads_from_the_local_cache(tmp_path: Path) -> None:
    repo_id, rev = _cpu_repo()
    env = offline(cache_with(tmp_path / "hub", repo_id, rev))
    plan = hwt.plan_pretrained(env=env, model=OSS, kernels=True)
    # before: refused whenever HF_HUB_OFFLINE was set, cached or not
    assert plan.kwargs["use_kernels"] is True
    assert (
        f"from {repo_id}@{rev} (cached); offline, only cached ones load"
        in (plan.reasons["use_kernels"])
    )
    # without the opt-in it stays off, and says what the cache holds
    auto = hwt.plan_pretrained(env=env, model=OSS)
    assert "use_kernels" not in auto.kwargs
    assert f"{repo_id}@{rev} (cached)" in auto.reasons["use_kernels"]


def test_offline_opt_in_without_the_kernel_names_it_and_the_download(tmp_path: Path) -> None:
    repo_id, rev = _cpu_repo()
    other = cache_with(tmp_path / "hub", repo_id, "v999")  # another version only
    with pytest.raises(UnsupportedSettingError) as err:
        hwt.plan_pretrained(env=offline(other), model=OSS, kernels=True)
    text = str(err.value)
    assert (
        f"MegaBlocksMoeMLP need {repo_id} (no snapshot of {rev}), not in the local cache {other}"
        in text
    )
    assert f"hf download {repo_id} --repo-type kernel --revision {rev}" in text
    assert "unset HF_HUB_OFFLINE" in text
    auto = hwt.plan_pretrained(env=offline(other), model=OSS)
    assert f"{repo_id}@{rev} (not cached: no snapshot of {rev})" in auto.reasons["use_kernels"]


def test_a_snapshot_without_a_build_for_this_system_is_not_cached(tmp_path: Path) -> None:
    repo_id, rev = _cpu_repo()
    cache = cache_with(tmp_path, repo_id, rev)
    build = next(cache.glob("*/snapshots/*/build"))
    (build / "torch-cpu" / "metadata.json").unlink()  # kernels reads it to load the build
    with pytest.raises(UnsupportedSettingError, match=r"build torch-cpu has no metadata\.json"):
        hwt.plan_pretrained(env=offline(cache), model=OSS, kernels=True)
    (build / "torch-cpu").rename(build / "torch-xpu")  # a build for another backend only
    with pytest.raises(UnsupportedSettingError, match="snapshot has no build for this system"):
        hwt.plan_pretrained(env=offline(cache), model=OSS, kernels=True)


def test_a_model_without_a_mapped_layer_is_still_refused(tmp_path: Path) -> None:
    # Llama's RMSNorm and rotary_pos_emb have no cpu kernel: the cache cannot change that
    with pytest.raises(UnsupportedSettingError, match="would do nothing") as err:
        hwt.plan_pretrained(env=offline(tmp_path), model=LlamaConfig(**TINY), kernels=True)
    assert "pass kernels=False: there is nothing to swap" in str(err.value)


def test_the_cache_folder_is_found_as_kernels_and_huggingface_hub_find_it(tmp_path: Path) -> None:
    assert hub_cache_dir({"HF_HOME": "/h"}) == "/h/hub"
    assert hub_cache_dir({"XDG_CACHE_HOME": "/x"}) == "/x/huggingface/hub"
    assert hub_cache_dir({"HF_HOME": "/h", "HUGGINGFACE_HUB_CACHE": "/old"}) == "/old"
    assert hub_cache_dir({"HUGGINGFACE_HUB_CACHE": "/old", "HF_HUB_CACHE": "/new"}) == "/new"
    assert hub_cache_dir({"HF_HUB_CACHE": "/new", "KERNELS_CACHE": "/k"}) == "/k"
    assert hub_cache_dir({"HF_HUB_CACHE": "/new", "KERNELS_CACHE": ""}) == "/new"
    repo_id, rev = _cpu_repo()
    cache_with(tmp_path / "home" / "hub", repo_id, rev)
    env = {"HWBACKENDS_PLUGINS": "", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "home")}
    assert hwt.plan_pretrained(env=env, model=OSS, kernels=True).kwargs["use_kernels"] is True
    # KERNELS_CACHE wins over the hub cache, as kernels reads it
    env["KERNELS_CACHE"] = str(tmp_path / "empty")
    with pytest.raises(UnsupportedSettingError, match="not in the local cache"):
        hwt.plan_pretrained(env=env, model=OSS, kernels=True)


def test_repositories_follow_the_mode_kernels_selects(tmp_path: Path) -> None:
    from kernels import Mode

    mapping = hub_kernels.get_kernel_mapping_transformers()
    # a layer mapped for inference only on a device: training adds no repository for it
    layer, key = next(
        (name, str(getattr(dev, "type", dev)))
        for name, devices in mapping.items()
        for dev, entry in devices.items()
        if isinstance(entry, dict) and set(entry) == {Mode.INFERENCE}
    )
    inference = hub_kernels_for(key, (layer,), {"HF_HUB_CACHE": str(tmp_path)})
    training = hub_kernels_for(key, (layer,), {"HF_HUB_CACHE": str(tmp_path)}, training=True)
    assert len(inference) == 1 and not inference[0].cached
    assert training == inference  # from_pretrained's eval-mode load still uses it
    assert hub_kernels_for(key, ("NoSuchLayer",), {"HF_HUB_CACHE": str(tmp_path)}) == ()


def test_smoke_says_what_the_plan_found_for_this_device(tmp_path: Path) -> None:
    from hwbackends._base.record import replace
    from hwbackends._integrations.smoke import _kernels_why

    online = {"HWBACKENDS_PLUGINS": "", "HF_HUB_CACHE": str(tmp_path)}
    plan = hwt.plan_pretrained(env=online, model=OSS, kernels=True)
    assert plan.hub_kernels is not None
    assert [(k.layer, k.cached) for k in plan.hub_kernels] == [("MegaBlocksMoeMLP", False)]
    assert plan.to_dict()["hub_kernels"][0]["gap"] == plan.hub_kernels[0].gap
    kept = ["model.layers.0.mlp (MegaBlocksMoeMLP)", "model.norm (RMSNorm)"]
    assert "a run with Hub access downloads 1 of them" in _kernels_why([], kept, plan)
    # the plan's mapping (device key, capability, mode) decides, not the table for any device
    none = replace(plan, hub_kernels=())
    assert "keep their own forward with or without Hub access" in _kernels_why([], kept, none)
