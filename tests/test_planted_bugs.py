"""Bugs that once survived the whole suite, each now failing a test here (issue 26, items 1-4).

Each test names the bug it catches. None measures time: a call that must give up early is
checked by its reported state and by an ``Event`` the abandoned job sets only when it
finishes, which must still be clear when the call has returned.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from coretest import Site, good_plugin, pci_function
from hypothesis import given
from hypothesis import strategies as st

from hwbackends import Host
from hwbackends._base import guard
from hwbackends._base.versions import version_in_range
from hwbackends._integrations.rank import process_rank
from hwbackends._selection import cache
from hwbackends._selection.registry import Registry
from hwbackends._selection.target import resolve_target
from hwbackends.distributed import init_process_group
from hwbackends.transformers import plan_pretrained, pretrained_kwargs

ROOT = Path(__file__).resolve().parents[1]
H100_8 = ROOT / "plugins/hwbackends-cuda/tests/hosts/h100-sxm-8.json"


# -- 1. LOCAL_RANK picks the rank's own device ------------------------------------------------


def torchrun_env(local: int, **extra: str) -> dict[str, str]:
    """What torchrun sets for local rank ``local`` on the second of two 8-process nodes
    (https://docs.pytorch.org/docs/stable/elastic/run.html, "Environment Variables")."""
    return {
        "RANK": str(8 + local),
        "WORLD_SIZE": "16",
        "LOCAL_RANK": str(local),
        "LOCAL_WORLD_SIZE": "8",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
        **extra,
    }


@pytest.mark.parametrize("local", [0, 3, 7])
def test_local_rank_selects_its_own_device_on_an_eight_gpu_host(local: int) -> None:
    """Bug: LOCAL_RANK ignored (every rank on cuda:0) or off by one (rank 3 on cuda:4)."""
    host = Host.from_file(H100_8)
    env = torchrun_env(local)
    assert pretrained_kwargs(host=host, env=env)["device_map"] == f"cuda:{local}"
    plan = plan_pretrained(host=host, env=env)
    assert plan.device is not None and plan.device.torch_device == f"cuda:{local}"
    t = resolve_target(host=host, env=env, rank_of=process_rank)
    assert t.device is not None and (t.device.index, t.device.torch_device) == (
        local,
        f"cuda:{local}",
    )


def test_local_rank_counts_among_the_visible_devices() -> None:
    """LOCAL_RANK is a logical index: with physical GPUs 4-7 visible, rank 3 is cuda:3, the
    physical GPU 7 (torchrun's model: every rank of a node sees the same devices)."""
    host = Host.from_file(H100_8)
    env = torchrun_env(3, CUDA_VISIBLE_DEVICES="4,5,6,7")
    t = resolve_target(host=host, env=env, rank_of=process_rank)
    assert t.device is not None
    assert (t.device.torch_device, t.device.physical_index) == ("cuda:3", 7)
    assert pretrained_kwargs(host=host, env=env)["device_map"] == "cuda:3"


def test_init_process_group_binds_the_rank_to_its_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """init_process_group under torchrun on the 8-GPU host: the rank is bound to device
    LOCAL_RANK before the group forms, and the group gets the launcher's rank and world."""
    import torch
    import torch.distributed as dist

    bound: list[int] = []
    groups: list[dict[str, object]] = []
    monkeypatch.setattr(torch.accelerator, "set_device_index", bound.append)
    monkeypatch.setattr(dist, "init_process_group", lambda **kw: groups.append(kw))
    host = Host.from_file(H100_8)
    assert init_process_group(host=host, env=torchrun_env(3)) == "nccl"
    assert bound == [3]
    (kw,) = groups
    assert (kw["backend"], kw["rank"], kw["world_size"]) == ("nccl", 11, 16)
    assert kw["init_method"] == "tcp://10.0.0.1:29500"


# -- 2. the selection cache's key -------------------------------------------------------------


def fake_root(tmp_path: Path) -> Path:
    for d in ("sys/bus/pci/devices", "dev", "sys/module"):
        (tmp_path / d).mkdir(parents=True)
    return tmp_path


def test_a_new_pci_device_changes_the_cache_key(tmp_path: Path) -> None:
    """Bug: the fingerprint without the PCI list (a new GPU did not invalidate the cache)."""
    root = fake_root(tmp_path)
    before = cache._key(cache.fingerprint(str(root)))
    pci_function(root, "0000:41:00.0", "0x10de", "0x2330", "0x030200")
    assert cache._key(cache.fingerprint(str(root))) != before


def test_a_new_dev_node_changes_the_cache_key(tmp_path: Path) -> None:
    """Bug: the fingerprint without the /dev listing (a driver's node appearing after boot)."""
    root = fake_root(tmp_path)
    before = cache._key(cache.fingerprint(str(root)))
    (root / "dev" / "nvidia0").write_text("")
    assert cache._key(cache.fingerprint(str(root))) != before


def test_a_loaded_kernel_module_changes_the_cache_key(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    before = cache._key(cache.fingerprint(str(root)))
    (root / "sys/module/amdgpu").mkdir()
    assert cache._key(cache.fingerprint(str(root))) != before


def test_the_machine_part_of_the_key_is_stable(tmp_path: Path) -> None:
    """The other side: nothing changed, the same key (else the cache never hits)."""
    root = fake_root(tmp_path)
    pci_function(root, "0000:41:00.0", "0x10de", "0x2330", "0x030200")
    assert cache._key(cache.fingerprint(str(root))) == cache._key(cache.fingerprint(str(root)))


def test_a_driver_version_change_changes_the_watched_detail(tmp_path: Path) -> None:
    """Bug: the cache key without the watched driver paths (a driver upgrade did not
    invalidate). The path is the one the cuda plugin declares; loading a new driver module
    makes a new /proc file, so its modification time changes (set explicitly here: two writes
    within one clock tick may share a time)."""
    from hwbackends_cuda import CudaBackend

    assert "proc/driver/nvidia/version" in CudaBackend.watch_paths
    root = fake_root(tmp_path)
    version = root / "proc/driver/nvidia/version"
    version.parent.mkdir(parents=True)
    version.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.20\n")
    os.utime(version, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    watch = ((), tuple(CudaBackend.watch_paths))
    before = cache._key(cache.detail(watch, str(root)))
    assert cache._key(cache.detail(watch, str(root))) == before
    version.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  575.51.03\n")
    os.utime(version, ns=(1_700_000_100_000_000_000, 1_700_000_100_000_000_000))
    assert cache._key(cache.detail(watch, str(root))) != before


def test_a_new_node_in_a_watched_dev_folder_changes_the_watched_detail(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    (root / "dev/dri").mkdir()
    watch = ((), ("dev/dri",))
    before = cache._key(cache.detail(watch, str(root)))
    (root / "dev/dri/renderD128").write_text("")
    os.utime(root / "dev/dri", ns=(1, 1))  # the listing alone must tell, whatever the mtime
    after = cache._key(cache.detail(watch, str(root)))
    assert after != before


def test_a_watched_variable_changes_the_watched_detail(monkeypatch: pytest.MonkeyPatch) -> None:
    watch = (("CUDA_DEVICE_ORDER",), ())
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    before = cache._key(cache.detail(watch))
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert cache._key(cache.detail(watch)) != before


# -- 3. plugin time limits ----------------------------------------------------------------------


class SlowJob:
    """A job that takes 3 s unless released; ``done`` is set only if it ran to its end."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.done = threading.Event()

    def __call__(self) -> str:
        self.release.wait(3)
        self.done.set()
        return "finished"


def test_a_single_call_past_its_limit_is_reported_hung() -> None:
    """Bug: the limit not enforced (the caller waited 10x the limit: a 3 s job under 0.5 s
    came back as a success)."""
    job = SlowJob()
    try:
        with pytest.raises(guard.PluginFault) as caught:
            guard.call("acme.probe()", job, timeout=0.5)
        returned_first = not job.done.is_set()
    finally:
        job.release.set()
    assert caught.value.reason == (
        "acme.probe() did not return within 0.5 s and was abandoned (it may hang); raise "
        "HWBACKENDS_TIMEOUT if it is only slow"
    )
    assert returned_first, "the call waited for the job to finish"


def test_a_batched_call_past_its_limit_is_reported_hung() -> None:
    """Bug: batched loads/probes abandoned only after 10x the limit."""
    job = SlowJob()
    try:
        jobs = [("a.probe()", lambda: 1), ("b.probe()", job), ("c.probe()", lambda: 3)]
        got = guard.call_many(jobs, timeout=0.5)
        returned_first = not job.done.is_set()
    finally:
        job.release.set()
    assert got[0] == (True, 1) and got[2] == (True, 3)
    ok, fault = got[1]
    assert not ok and fault.reason.startswith("b.probe() did not return within 0.5 s")
    assert returned_first, "call_many waited for the job to finish"


SLOW_PROBE = """
    def probe(self, host):
        import hwb_planted_sync as s
        s.job()
        return super().probe(host)
"""


def test_a_slow_probe_is_reported_broken_by_selection(site: Site) -> None:
    """Through selection, as users see it: HWBACKENDS_TIMEOUT=0.5 and a probe that takes 3 s
    give a broken backend whose reason says it hung, and the answer comes before the probe
    would have finished."""
    job = SlowJob()
    (site.path / "hwb_planted_sync.py").write_text("job = None\n", encoding="utf-8")
    import importlib

    importlib.invalidate_caches()  # the folder's listing may be cached from before the write
    sync = importlib.import_module("hwb_planted_sync")
    site.modules.append("hwb_planted_sync")
    sync.job = job
    site.add_plugin("slowpoke", good_plugin("slowpoke", 90) + SLOW_PROBE)
    site.add_plugin("quick", good_plugin("quick", 10))
    try:
        report = Registry(path=[str(site.path)]).select({"HWBACKENDS_TIMEOUT": "0.5"},
                                                         Host.from_file(H100_8))  # fmt: skip
        returned_first = not job.done.is_set()
    finally:
        job.release.set()
    status = report.status("slowpoke")
    assert status.state == "broken"
    assert status.reason.startswith("slowpoke.probe() did not return within 0.5 s")
    assert report.chosen != "slowpoke"
    assert returned_first, "selection waited for the probe to finish"


# -- 4. PEP 440: trailing zeros -----------------------------------------------------------------


def test_trailing_zeros_do_not_change_a_version() -> None:
    """Bug: 2.8 and 2.8.0 compared as different versions. PEP 440, "Release segment": "1.0"
    and "1.0.0" are equal (https://peps.python.org/pep-0440/#release-segment)."""
    assert version_in_range("2.8", "2.8.0") is True
    assert version_in_range("2.8.0", "2.8") is True
    assert version_in_range("2.8.0.0", "2.8", "2.8.0.1") is True
    assert version_in_range("2.8", "2.7", "2.8.0") is False  # the high bound is excluded
    assert version_in_range("2.8.0+cu128", "2.8", "2.9.0") is True


releases = st.lists(st.integers(0, 30), min_size=1, max_size=4)


@given(releases, releases, st.integers(0, 3), st.integers(0, 3))
def test_padding_with_zeros_never_changes_an_answer(
    v: list[int], low: list[int], pad_v: int, pad_low: int
) -> None:
    """Trailing-zero variants of both sides, generated explicitly, agree with packaging."""
    from packaging.version import Version

    def text(parts: list[int], pad: int) -> str:
        return ".".join(map(str, [*parts, *[0] * pad]))

    version, bound = text(v, pad_v), text(low, pad_low)
    assert version_in_range(version, bound) is (Version(version) >= Version(bound))
    assert version_in_range(version, text(v, 0)) is True
