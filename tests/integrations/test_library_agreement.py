"""hwbackends' verdicts held next to the installed libraries' own.

Each test calls the rule inside Transformers, kernels or Accelerate that decides the same
question on this CPU, so a release that changes the rule fails here, not for a user.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Installed by the test environment (scripts/test.sh): a missing one is a failure, not a skip.
import accelerate  # noqa: F401
import kernels  # noqa: F401
import pytest
import transformers

from hwbackends import Host, UnsupportedSettingError
from hwbackends._integrations.smoke import tiny_llama_config
from hwbackends._kit.hf_tables import kernels_state, transformers_tables
from hwbackends.accelerate import training_kwargs
from hwbackends.distributed import LaunchError, launch_plan
from hwbackends.transformers import plan_pretrained, pretrained_kwargs

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
CPU_ONLY = {"HWBACKENDS_PLUGINS": ""}


def host_of(case: str, **packages: str) -> Host:
    family, name = case.split("/")
    d = Host.from_file(PLUGINS / f"hwbackends-{family}/tests/hosts/{name}.json").to_dict()
    if packages:  # this machine's Transformers, so its files are the host's tables
        d["packages"] = {**d.get("packages", {}), **packages}
    return Host.from_dict(d)


def installed(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def on_this_stack(case: str) -> Host:
    return host_of(case, transformers=installed("transformers"), kernels=installed("kernels"))


# -- item 4: the hub-kernel id pattern ------------------------------------------------------

IDS = ["kernels-community/flash-attn2", "org/repo@v1", "org/repo:fn", "org/repo@main:fn",
       "a/b/c", "org//repo", "/repo", "org/", "org/repo:a:b", "org/repo@a@b",
       "https://huggingface.co/org/repo", "org/repo@", "org/repo:", "o r/g", "x"]  # fmt: skip


def test_hub_kernel_ids_are_judged_as_transformers_judges_them() -> None:
    from transformers.integrations.hub_kernels import is_kernel

    tables = transformers_tables(None)
    assert tables.read_at_runtime
    host = on_this_stack("cuda/h100-sxm-8")
    for s in IDS:
        theirs = is_kernel(s)
        assert tables.is_hub_kernel(s) is theirs, s
        if "/" not in s and ":" not in s:
            continue
        try:
            pretrained_kwargs(host=host, env={}, attention=s)
            ours = True
        except UnsupportedSettingError as exc:
            ours = "is not a hub kernel id" not in str(exc)  # refused for another reason
        assert ours is theirs, s


def test_malformed_hub_id_error_is_pinned() -> None:
    with pytest.raises(
        UnsupportedSettingError,
        match=r"^attn_implementation='a/b/c' is not a hub kernel id Transformers accepts\. "
        r"Expected org/repo, optionally followed by @revision and :function",
    ):
        pretrained_kwargs(host=on_this_stack("cuda/h100-sxm-8"), env={}, attention="a/b/c")


# -- item 5: a hub repo must ship a build for the device ----------------------------------


@pytest.mark.parametrize(("case", "key"), [("rocm/mi300x-8", "rocm"), ("cuda/h100-sxm-8", "cuda")])
def test_hub_repo_device_builds_follow_transformers_table(case: str, key: str) -> None:
    from transformers.modeling_flash_attention_utils import FLASH_ATTN_KERNEL_DEVICES

    host = on_this_stack(case)
    for repo, devices in FLASH_ATTN_KERNEL_DEVICES.items():
        if key in devices:
            kw = pretrained_kwargs(host=host, env={}, attention=repo)
            assert kw["attn_implementation"] == repo
        else:
            with pytest.raises(UnsupportedSettingError, match=f"ships builds for .* not for {key}"):
                pretrained_kwargs(host=host, env={}, attention=repo)
    # a repo Transformers does not list is allowed everywhere, as in Transformers
    assert pretrained_kwargs(host=host, env={}, attention="someorg/attn")["attn_implementation"]


def test_flash_attn2_repo_refused_on_mi300x_names_the_rocm_build() -> None:
    with pytest.raises(
        UnsupportedSettingError,
        match=r"^hub kernel kernels-community/flash-attn2 ships builds for cuda, xpu only, not "
        r"for rocm \(gfx942, rocm\).*Expected a repository built for rocm: "
        r"kernels-community/aiter-flash-attn\.",
    ):
        pretrained_kwargs(
            host=on_this_stack("rocm/mi300x-8"), env={}, attention="kernels-community/flash-attn2"
        )


# -- item 6: every registered attention name -----------------------------------------------


@pytest.fixture(scope="module")
def tiny_model() -> Any:
    return transformers.LlamaForCausalLM(tiny_llama_config())


def transformers_accepts(model: Any, name: str) -> str | None:
    """What Transformers' own check makes of ``name`` (None: refused)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # paged|sdpa: accepted, with a warning
        try:
            return str(model._check_and_adjust_attn_implementation(name, is_init_check=True))
        except (ValueError, ImportError):
            return None


NAMES = ["sdpa", "eager", "flex_attention", "paged|eager", "paged|sdpa", "bogus", "eager_paged",
         "sdpa_paged", "paged|bogus"]  # fmt: skip


@pytest.mark.parametrize("case", ["cuda/h100-sxm-8", "cpu"])
def test_attention_names_agree_with_transformers(tiny_model: Any, case: str) -> None:
    host, env = (None, CPU_ONLY) if case == "cpu" else (on_this_stack(case), {})
    for name in NAMES:
        theirs = transformers_accepts(tiny_model, name)
        try:  # paged|eager: only for generation with a paged cache (paged=True)
            ours: str | None = pretrained_kwargs(
                host=host, env=env, attention=name, paged=name.startswith("paged|")
            )["attn_implementation"]
        except UnsupportedSettingError:
            ours = None
        assert ours == theirs, name


def test_paged_eager_is_refused_unless_generation_with_a_paged_cache_was_asked() -> None:
    """paged|eager loads, and then an ordinary forward fails."""
    import torch

    model = transformers.LlamaForCausalLM(tiny_llama_config())
    model.set_attn_implementation("paged|eager")
    with pytest.raises(Exception, match="called without a paged attention cache"):
        model(torch.tensor([[1, 2, 3]]))
    with pytest.raises(
        UnsupportedSettingError,
        match=r"^attn_implementation='paged\|eager' loads, but an ordinary forward or generate\(\) "
        r"raises \"called without a paged attention cache\".*Fix: pass attention='eager', or "
        r"paged=True\.$",
    ):
        pretrained_kwargs(env=CPU_ONLY, attention="paged|eager")
    plan = plan_pretrained(env=CPU_ONLY, attention="paged|eager", paged=True)
    assert plan.kwargs["attn_implementation"] == "paged|eager"
    assert plan.reasons["attn_implementation"].endswith("as asked (paged=True)")


@pytest.mark.parametrize("bad", ["org /repo", "org/re po", "org/repo--x", "org/.repo"])
def test_hub_ids_are_validated_with_huggingface_hubs_validator(bad: str) -> None:
    from huggingface_hub.utils import HFValidationError, validate_repo_id
    from transformers.integrations.hub_kernels import is_kernel

    assert is_kernel(bad)  # Transformers' pattern lets it through, to fail at download
    with pytest.raises(HFValidationError):
        validate_repo_id(bad)
    with pytest.raises(UnsupportedSettingError, match=r"which the Hub refuses: .*validate_repo_id"):
        pretrained_kwargs(host=on_this_stack("cuda/h100-sxm-8"), env={}, attention=bad)


def test_the_trust_rule_is_explained_as_the_installed_libraries_apply_it() -> None:
    import inspect

    from kernels import hf_hub
    from transformers.integrations import hub_kernels

    # Transformers hands allow_all_kernels to kernels as trust_remote_code, and kernels checks
    # the publisher's trust unless it is set
    assert "trust_remote_code=allow_all_kernels" in inspect.getsource(hub_kernels.get_kernel)
    assert "trust_remote_code" in inspect.signature(hf_hub._check_trust_remote_code).parameters
    host = on_this_stack("cuda/h100-sxm-8")
    other = plan_pretrained(host=host, env={}, attention="someorg/flash-attn")
    assert "pass allow_all_kernels=True to from_pretrained" in other.reasons["attn_implementation"]
    trusted = plan_pretrained(host=host, env={}, attention="kernels-community/flash-attn2")
    assert "allow_all_kernels" not in trusted.reasons["attn_implementation"]


def test_paged_sdpa_reason_says_what_transformers_does() -> None:
    plan = plan_pretrained(host=on_this_stack("cuda/h100-sxm-8"), env={}, attention="paged|sdpa")
    assert plan.kwargs["attn_implementation"] == "sdpa"
    assert plan.reasons["attn_implementation"].endswith(
        "'paged|sdpa' became 'sdpa': Transformers only keeps the paged| prefix for paged|eager "
        "and strips it elsewhere with a FutureWarning"
    )


def test_a_name_registered_in_this_process_is_accepted() -> None:
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    AttentionInterface.register("hwbackends_test_attn", sdpa_attention_forward)
    try:
        kw = pretrained_kwargs(env=CPU_ONLY, attention="hwbackends_test_attn")
        assert kw["attn_implementation"] == "hwbackends_test_attn"
    finally:
        AttentionInterface._global_mapping.pop("hwbackends_test_attn")
    with pytest.raises(UnsupportedSettingError, match="'hwbackends_test_attn' cannot load"):
        pretrained_kwargs(env=CPU_ONLY, attention="hwbackends_test_attn")


# -- item 7: kernels versions in PEP 440 order ---------------------------------------------


@pytest.fixture
def fake_kernels_version(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from transformers.utils import import_utils

    def set_version(v: str) -> bool:
        monkeypatch.setattr(
            import_utils, "_is_package_available", lambda name, return_version=False: (True, v)
        )
        import_utils.is_kernels_available.cache_clear()
        return bool(import_utils.is_kernels_available())

    yield set_version
    import_utils.is_kernels_available.cache_clear()


VERSIONS = ["0.17.2rc1", "0.17.2", "0.17.2.post1", "0.17.3.dev0", "0.18.0rc1", "0.18.0.dev0",
            "0.18.0", "0.16.9", "1.0"]  # fmt: skip


def test_kernels_range_is_pep440_like_transformers(fake_kernels_version: Any) -> None:
    tables = transformers_tables(None)
    for v in VERSIONS:
        host = Host.from_dict(
            {"packages": {"transformers": installed("transformers"), "kernels": v}}
        )
        theirs = fake_kernels_version(v)
        assert kernels_state(host, tables).usable is theirs, v


# -- item 8: the CPU kernels device key ---------------------------------------------------


def test_cpu_kernels_key_as_kernels_and_transformers_define_it() -> None:
    import importlib

    from transformers.integrations.hub_kernels import _build_kernel_mapping
    from transformers.utils.kernel_config import KERNELS_SUPPORTED_DEVICE_TYPES

    kz = importlib.import_module("kernels.layer.kernelize")  # the module, not the function
    kz._validate_device_type("cpu")  # kernels accepts the key (raises otherwise)
    mapped = sorted(layer for layer, devs in _build_kernel_mapping().items() if "cpu" in devs)
    plan = plan_pretrained(env=CPU_ONLY)
    from hwbackends import get

    caps = get("cpu").capabilities(host=Host.from_system())
    assert caps.kernel_device == "cpu" == plan.kernels.device_key
    assert list(caps.kernel_layers) == mapped and mapped
    # ... and KernelConfig alone omits it: stated as a limitation
    assert "cpu" not in KERNELS_SUPPORTED_DEVICE_TYPES
    assert any("KernelConfig cannot name the CPU" in lim.text for lim in caps.limitations)


# -- item 3: ddp_backend only where Accelerate forms the group ----------------------------


def accelerate_verdict(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], cpu: bool) -> Any:
    from accelerate.state import PartialState

    for k in (
        "LOCAL_RANK",
        "WORLD_SIZE",
        "PMI_SIZE",
        "OMPI_COMM_WORLD_SIZE",
        "MV2_COMM_WORLD_SIZE",
    ):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    backend, dtype = PartialState._prepare_backend(None, cpu, False, None)  # type: ignore[arg-type]
    return backend, str(dtype.name)


RENDEZVOUS = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
LAUNCHES = [{}, {"OMPI_COMM_WORLD_SIZE": "2"}, {"PMI_SIZE": "4"}, {"WORLD_SIZE": "2"},
            {"LOCAL_RANK": "0", "WORLD_SIZE": "2"}]  # fmt: skip


@pytest.mark.parametrize("launch", LAUNCHES, ids=lambda d: ",".join(d) or "none")
def test_ddp_backend_only_where_accelerate_forms_a_group(
    monkeypatch: pytest.MonkeyPatch, launch: dict[str, str]
) -> None:
    import torch

    # a CUDA host: Accelerate's verdict with torch.cuda.is_available() answering True
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    backend, _ = accelerate_verdict(monkeypatch, launch, cpu=False)
    env = {**RENDEZVOUS, **launch}
    try:
        ours = training_kwargs(host=host_of("cuda/h100-sxm-8"), env=env).get("ddp_backend")
    except LaunchError as exc:
        # Accelerate's nccl group would fail in torch's env:// rendezvous: no RANK
        assert backend == "nccl" and "RANK" not in env and "RANK" in exc.what
    else:
        assert ours == backend  # nccl under LOCAL_RANK, nothing under mpirun sizes alone
    # CPU: Accelerate's MULTI_CPU also forms a group under MPI/torch world sizes
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    backend, kind = accelerate_verdict(monkeypatch, launch, cpu=True)
    ours = training_kwargs(env={**CPU_ONLY, **env}).get("ddp_backend")
    assert (ours is not None) is (kind == "MULTI_CPU")
    if kind == "MULTI_CPU":  # without MASTER_ADDR the group cannot form: refused, with the fix
        with pytest.raises(LaunchError, match="MASTER_ADDR is not set"):
            training_kwargs(env={**CPU_ONLY, **launch})


# -- item 9: mps under a launcher ------------------------------------------------------------


def test_mps_under_a_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    host = host_of("mps/m2_max_sonoma")
    env = {"LOCAL_RANK": "0", "WORLD_SIZE": "2"}
    backend, kind = accelerate_verdict(monkeypatch, env, cpu=False)  # no mps branch at all
    assert (backend, kind) == (None, "NO")
    plan_t = training_kwargs(host=host, env=env)
    assert "ddp_backend" not in plan_t
    plan = launch_plan(2, nnodes=2, rdzv_endpoint="n0:29500", host=host, env={})
    assert plan.problems[-1].startswith(
        "Accelerate creates no process group on mps devices (the installed accelerate/state.py "
        "PartialState._prepare_backend): under accelerate launch or the Trainer each of the 4 "
        "ranks trains alone"
    )


# -- the quantization catalogue covers the installed Transformers' quantizers --------------------


def test_quant_methods_are_the_installed_transformers_quantizers() -> None:
    """``QUANT_METHODS`` claims one entry per method of Transformers' quantizer mapping; a
    Transformers release that adds or drops a quantizer fails here until the catalogue (and each
    vendor's verdicts) follow. Keys are written with ``_`` for ``-``, and the 4- and 8-bit
    bitsandbytes quantizers are one method."""
    from transformers.quantizers.auto import AUTO_QUANTIZER_MAPPING

    from hwbackends.facts import QUANT_METHODS

    def key(name: str) -> str:
        name = name.replace("-", "_")
        return "bitsandbytes" if name.startswith("bitsandbytes_") else name

    theirs = {key(k) for k in AUTO_QUANTIZER_MAPPING}
    ours = set(QUANT_METHODS)
    assert (sorted(theirs - ours), sorted(ours - theirs)) == ([], []), (
        f"transformers {transformers.__version__}: (missing from QUANT_METHODS, not a "
        "quantizer of the installed Transformers)"
    )
