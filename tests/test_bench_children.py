"""The benchmark's child scripts run against this checkout's modules.

They import private modules by path (the bench measures the code, not the public API), so a
move of a module breaks them without any other test noticing: `bench/run.py` failed in its
scaling section after the layer restructure (`hwbackends._machine.host.iter_dist_infos`
had moved to `hwbackends._discovery.dists`). Each child runs once here with the smallest
budget; no time is asserted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from coretest import clean_env, run_python

CHILDREN = Path(__file__).resolve().parent.parent / "bench" / "hwbench" / "children"

pytestmark = pytest.mark.skipif(not CHILDREN.is_dir(), reason="runs in a checkout")


def child(name: str, *argv: str) -> dict[str, object]:
    out = run_python(
        str(CHILDREN / name), *argv, env=clean_env(HWBACKENDS_NO_CACHE="1"), timeout=300
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert isinstance(got, dict)
    return got


def test_discovery_per_call(tmp_path: Path) -> None:
    got = child("discovery_percall.py", str(tmp_path), "0.001")
    assert got["agree"] is True and isinstance(got["dists_on_path"], int)


@pytest.mark.parametrize("mode", ["phases", "cprofile", "audit", "plugins"])
def test_profile_current(mode: str) -> None:
    assert child("profile_current.py", mode)


def test_device_resolution() -> None:
    got = child("devres.py", "0.001", "1")
    assert "error" not in got, got.get("error")
