"""``resolve_target``: which backend and device the integrations work from, for each way of
naming them (the selected backend, a name, an object; a logical index, a ``Device``, none)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwbackends import BackendUnavailableError, Host, HwBackendsError
from hwbackends._selection.target import resolve_target

ROOT = Path(__file__).resolve().parents[1]
H100_8 = Host.from_file(ROOT / "plugins/hwbackends-cuda/tests/hosts/h100-sxm-8.json")


def test_the_selected_backend_and_its_first_device() -> None:
    t = resolve_target(host=H100_8, env={})
    assert t.name == "cuda" and len(t.devices) == 8
    assert t.device is not None and t.device.torch_device == "cuda:0"


def test_a_logical_index_or_a_device_object() -> None:
    t = resolve_target(device=7, host=H100_8, env={})
    assert t.device is not None and t.device.torch_device == "cuda:7"
    again = resolve_target(device=t.device, host=H100_8, env={})
    assert again.device is t.device
    named = resolve_target("cuda", 2, host=H100_8, env={})
    assert named.device is not None and named.device.torch_device == "cuda:2"
    obj = resolve_target(named.backend, 1, host=H100_8, env={})
    assert obj.name == "cuda" and obj.device is not None and obj.device.torch_device == "cuda:1"


@pytest.mark.parametrize("index", [8, -1, 100])
def test_an_index_past_the_visible_devices_is_refused(index: int) -> None:
    with pytest.raises(HwBackendsError, match=rf"device index {index} is out of range: cuda "
                       r"shows 8 visible device\(s\)"):  # fmt: skip
        resolve_target(device=index, host=H100_8, env={})


@pytest.mark.parametrize("device", [True, "cuda:0", 1.0])
def test_what_is_not_a_device_is_refused(device: object) -> None:
    with pytest.raises(HwBackendsError, match=r"is not a device"):
        resolve_target(device=device, host=H100_8, env={})  # type: ignore[arg-type]


def test_a_named_backend_that_cannot_run_here_says_why() -> None:
    with pytest.raises(BackendUnavailableError, match="the rocm backend is not available here"):
        resolve_target("rocm", host=H100_8, env={})
    assert resolve_target(" CUDA ", host=H100_8, env={}).name == "cuda"  # names are normalised


def test_the_cpu_backend_ignores_local_rank() -> None:
    """One CPU device for every rank: LOCAL_RANK picks among accelerators only."""
    t = resolve_target("cpu", host=H100_8, env={"LOCAL_RANK": "3"})
    assert t.device is not None and t.device.torch_device == "cpu"


class _Declared:
    """A backend's declarations as torch_fix reads them, nothing else."""

    def __init__(self, name: str, flavour: str | None, hint: str) -> None:
        self.name, self.torch_flavour, self.install_hint = name, flavour, hint


def test_torch_fix_falls_back_to_the_backends_install_hint() -> None:
    import sys

    from hwbackends._selection.target import torch_fix

    bare = Host.from_dict({"devices": []})
    py = sys.executable
    pip_hint = _Declared("acme", None, "pip install torch-acme")
    assert torch_fix(pip_hint, bare) == f"install torch: {py} -m pip install torch-acme"  # type: ignore[arg-type]
    other = _Declared("acme", "nosuchflavour", "  follow https://acme.example/torch  ")
    assert torch_fix(other, bare) == "install torch: follow https://acme.example/torch"  # type: ignore[arg-type]
    blank = _Declared("acme", None, "   ")
    assert torch_fix(blank, bare) == f"install torch: {py} -m pip install torch"  # type: ignore[arg-type]
    installed = Host.from_dict({"torch": {"version": "2.13.0+cpu"}, "devices": []})
    assert torch_fix(pip_hint, installed) == (  # type: ignore[arg-type]
        f"reinstall torch, whose installed 2.13.0+cpu does not import: {py} -m pip install "
        "torch-acme"
    )


@pytest.mark.parametrize("rank", ["8", "9", "100"])
def test_a_local_rank_past_the_visible_devices_is_never_an_index_error(rank: str) -> None:
    """LOCAL_RANK=8 on eight GPUs names no device: whatever the answer (a stated error or a
    fallback), it is never Python's IndexError from reading past the list."""
    try:
        t = resolve_target(host=H100_8, env={"LOCAL_RANK": rank})
    except HwBackendsError:
        return  # a stated refusal: what the user needs
    assert t.device is not None and t.device in t.devices


def test_a_device_asked_for_is_where_the_model_goes() -> None:
    """``device=3`` on an 8-GPU host loads onto cuda:3 alone; with no device and no launcher
    the model is spread (``"auto"``). Before, ``device=`` changed the capabilities consulted
    but ``device_map`` stayed ``"auto"``."""
    from hwbackends.transformers import plan_pretrained

    plan = plan_pretrained(device=3, host=H100_8, env={}, kernels=False)
    assert plan.kwargs["device_map"] == "cuda:3"
    assert plan.reasons["device_map"] == (
        "the device asked for (device=3): the model loads onto it alone"
    )
    assert plan_pretrained(host=H100_8, env={}, kernels=False).kwargs["device_map"] == "auto"
    # a launcher's rank still decides when no device is named
    ranked = plan_pretrained(host=H100_8, env={"LOCAL_RANK": "5"}, kernels=False)
    assert ranked.kwargs["device_map"] == "cuda:5"


def test_attention_that_is_not_a_name_is_refused_with_the_fix() -> None:
    from hwbackends import UnsupportedSettingError
    from hwbackends.transformers import plan_pretrained

    with pytest.raises(UnsupportedSettingError) as info:
        plan_pretrained(attention=None, host=H100_8, env={})  # type: ignore[arg-type]
    assert str(info.value) == (
        "attention=None is not an attn_implementation name. Expected 'auto' or a name such "
        "as 'sdpa' or 'flash_attention_2'. Fix: pass attention='auto' (the default) or a name."
    )


def test_an_explicit_dtype_must_run_on_every_device_a_spread_model_spans() -> None:
    """A100 first, V100 second, no device named: ``device_map="auto"`` puts weights on the
    V100 too, which has no bfloat16. Before, only the first device was asked."""
    from hwbackends import UnsupportedSettingError
    from hwbackends.transformers import plan_pretrained

    def gpu(name: str, arch: str, bus: str) -> dict[str, str]:
        return {"vendor": "nvidia", "name": name, "arch": arch, "pci_bus_id": bus}

    mixed = Host.from_dict(
        {
            "torch": {"version": "2.13.0+cu128", "cuda": "12.8"},
            "devices": [
                gpu("NVIDIA A100-SXM4-80GB", "sm_80", "0000:01:00.0"),
                gpu("Tesla V100-SXM2-16GB", "sm_70", "0000:02:00.0"),
            ],
            "device_nodes": ["nvidia0", "nvidia1", "nvidiactl"],
        },
        source="A100 + V100",
    )
    with pytest.raises(UnsupportedSettingError) as info:
        plan_pretrained(host=mixed, env={}, kernels=False, dtype="bfloat16")
    assert str(info.value) == (
        "dtype bfloat16 does not run on sm_70 (cuda), one of the visible devices the model "
        "spans. Expected one of float32, float16. Fix: use dtype='auto', or name one device "
        "with device=N."
    )
    alone = plan_pretrained(host=mixed, env={}, kernels=False, dtype="bfloat16", device=0)
    assert (
        alone.kwargs["device_map"] == "cuda:0" and alone.reasons["dtype"] == "bfloat16: requested"
    )
    auto = plan_pretrained(host=mixed, env={}, kernels=False)
    assert auto.kwargs["device_map"] == "auto" and str(auto.kwargs["dtype"]) == "torch.float16"


def test_the_target_keeps_the_name_it_read_once() -> None:
    """A plugin's ``name`` property is read once: the target answers that first value, and
    the backend's own ``name`` only when none was read."""
    from hwbackends._selection.target import Target

    t = resolve_target(host=H100_8, env={})
    flipped = _Declared("not-cuda", None, "")
    kept = Target(flipped, t.host, t.env, t.devices, t.device, t.caps, backend_name="cuda")  # type: ignore[arg-type]
    assert kept.name == "cuda"
    unread = Target(flipped, t.host, t.env, t.devices, t.device, t.caps)  # type: ignore[arg-type]
    assert unread.name == "not-cuda"


class _Hinting(_Declared):
    """A backend whose probe gives ``hint``: torch_fix may take its command."""

    def __init__(self, hint: str) -> None:
        super().__init__("acme", "cpu", "")
        self.hint = hint

    def probe(self, host: Host) -> object:
        from hwbackends import Probe

        return Probe("acme", True, False, "no torch", self.hint, ("test",))


@pytest.mark.parametrize(
    ("hint", "taken"),
    [
        # a torch install from a wheel index, with the advice after it cut off
        (
            "pip install torch --index-url https://download.pytorch.org/whl/cu126 (Pascal GPUs)",
            "pip install torch --index-url https://download.pytorch.org/whl/cu126",
        ),
        (
            "pip install 'torch==2.13.0' --index-url https://example.org/whl",
            "pip install 'torch==2.13.0' --index-url https://example.org/whl",
        ),
        ("pip install torch", None),  # no index: the backend's flavour decides
        ("pip install acme-sdk --index-url https://example.org/whl", None),  # not torch
        ("install the acme driver", None),
    ],
)
def test_torch_fix_takes_a_probes_command_only_for_torch_from_an_index(
    hint: str, taken: str | None
) -> None:
    import sys

    from hwbackends._base.versions import torch_install_hint
    from hwbackends._selection.target import torch_fix

    bare = Host.from_dict({"devices": []})
    got = torch_fix(_Hinting(hint), bare)  # type: ignore[arg-type]
    cmd = taken if taken is not None else torch_install_hint("cpu")
    assert got == f"install torch: {sys.executable} -m {cmd}"
