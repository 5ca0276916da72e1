"""The selection cache: hits skip every plugin import, and any relevant change misses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = (
    "import sys, json, hwbackends, hwbackends._selection.cache as f\n"
    "b = hwbackends.current()\n"
    "heavy = sorted(m for m in sys.modules if m.startswith(('hwbackends_', 'dataclasses', "
    "'typing', 'hwbackends._selection.registry')))\n"
    "print(json.dumps({'last': f.LAST, 'name': b.name, 'same': b is hwbackends.current(), "
    "'heavy': heavy}))\n"
)


def run(tmp: Path, site: Path, cwd: Path | None = None, **extra: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWBACKENDS_")}
    env.update({"XDG_CACHE_HOME": str(tmp / "cache"), "PYTHONPATH": str(site), **extra})
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=cwd
    )
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_cache_hit_miss_and_invalidation(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    first = run(tmp_path, site)
    assert first["last"] == "miss" and first["same"] is True
    hit = run(tmp_path, site)
    assert hit["last"] == "hit" and hit["name"] == first["name"] and hit["same"] is True
    if hit["name"] == "cpu":  # on this machine: no plugin module, no dataclasses at all
        assert hit["heavy"] == []
    # installing a distribution changes its directory's mtime
    (site / "newdist-1.0.dist-info").mkdir()
    os.utime(site, ns=(1, 1))
    assert run(tmp_path, site)["last"] == "miss"
    assert run(tmp_path, site)["last"] == "hit"
    # a variable that selection reads
    assert run(tmp_path, site, CUDA_VISIBLE_DEVICES="0")["last"] == "miss"
    # bypass, simulated hosts and strict mode never use it
    assert run(tmp_path, site, HWBACKENDS_NO_CACHE="1")["last"] == "off"
    assert run(tmp_path, site, HWBACKENDS_STRICT="1")["last"] == "off"
    assert run(tmp_path, site, HWBACKENDS_NO_CACHE="true")["last"] == "off"
    assert run(tmp_path, site, HWBACKENDS_NO_CACHE="false")["last"] == "miss"  # a new key
    assert run(tmp_path, site, HWBACKENDS_NO_CACHE="false")["last"] == "hit"


def test_unreadable_or_corrupt_cache_is_ignored(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    run(tmp_path, site)
    (cache,) = (tmp_path / "cache" / "hwbackends").iterdir()
    cache.write_bytes(b"\x00garbage")
    assert run(tmp_path, site)["last"] == "miss"
    assert run(tmp_path, site)["last"] == "hit"


def test_unwritable_cache_location_still_answers(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory would be")
    first, second = run(tmp_path, site), run(tmp_path, site)
    assert (first["last"], second["last"]) == ("miss", "miss")  # never stored, never fatal
    assert first["name"] == second["name"]


def test_working_directory_and_alternating_environments_keep_hitting(tmp_path: Path) -> None:
    site = tmp_path / "site"
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (site, a, b):
        d.mkdir()
    assert run(tmp_path, site, cwd=a)["last"] == "miss"
    (a / "notes.txt").write_text("a new file in the working directory")
    assert run(tmp_path, site, cwd=b)["last"] == "hit"
    assert run(tmp_path, site, cwd=a)["last"] == "hit"
    # two environments in turn: each keeps its own answer
    assert run(tmp_path, site, CUDA_VISIBLE_DEVICES="1")["last"] == "miss"
    assert run(tmp_path, site)["last"] == "hit"
    assert run(tmp_path, site, CUDA_VISIBLE_DEVICES="1")["last"] == "hit"


def test_declared_variables_and_paths_without_visible_in_their_name_miss(tmp_path: Path) -> None:
    """The cache watches what installed backends declare (the cuda plugin's
    CUDA_DEVICE_ORDER, the neuron plugin's NEURON_LOGICAL_NC_CONFIG), not a vendor list."""
    site = tmp_path / "site"
    site.mkdir()
    assert run(tmp_path, site)["last"] == "miss"
    assert run(tmp_path, site)["last"] == "hit"
    for var, value in (("CUDA_DEVICE_ORDER", "PCI_BUS_ID"), ("NEURON_LOGICAL_NC_CONFIG", "1")):
        assert run(tmp_path, site, **{var: value})["last"] == "miss", var
        assert run(tmp_path, site, **{var: value})["last"] == "hit", var
    assert run(tmp_path, site, UNRELATED_SETTING="x")["last"] == "hit"


def test_watch_lists_come_from_declarations() -> None:
    from hwbackends._selection.registry import watch_lists

    pytest.importorskip("hwbackends_cuda")
    names, paths = watch_lists()
    assert "CUDA_DEVICE_ORDER" in names and "proc/driver/nvidia/version" in paths
