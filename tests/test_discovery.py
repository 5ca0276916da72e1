"""The direct scan finds exactly what importlib.metadata finds, on generated site directories."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwbackends._discovery.scan import (
    GROUP,
    EntryPointSpec,
    discover,
    discover_with_importlib,
    fast_scan_possible,
    parse_entry_points,
)

names = st.from_regex(r"[a-z][a-z0-9]{0,6}([-_.][a-z0-9]{1,4})?", fullmatch=True)
ep_names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)


@st.composite
def dist(draw: st.DrawFn) -> dict[str, object]:
    groups: dict[str, list[tuple[str, str]]] = {}
    for group in draw(
        st.lists(
            st.sampled_from([GROUP, "console_scripts", "other.group"]), unique=True, max_size=3
        )
    ):
        eps = draw(st.lists(ep_names, unique=True, max_size=3))
        groups[group] = [(e, f"mod_{e}:Cls{i}") for i, e in enumerate(eps)]
    return {
        "name": draw(names),
        "version": draw(st.from_regex(r"[0-9]{1,2}\.[0-9]{1,2}(\.[0-9])?", fullmatch=True)),
        "groups": groups,
        "comment": draw(st.booleans()),
        "egg": draw(st.booleans()),
    }


def write_dist(site: Path, d: dict[str, object]) -> None:
    name, version = str(d["name"]), str(d["version"])
    ext = "egg-info" if d["egg"] else "dist-info"
    info = site / f"{name.replace('-', '_')}-{version}.{ext}"
    if info.exists():
        return
    info.mkdir(parents=True)
    meta = "PKG-INFO" if d["egg"] else "METADATA"
    (info / meta).write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    groups = d["groups"]
    assert isinstance(groups, dict)
    if groups:
        lines = ["# generated\n"] if d["comment"] else []
        for group, eps in groups.items():
            lines.append(f"[{group}]\n")
            lines += [f"{n} = {v}\n" for n, v in eps]
            lines.append("\n")
        (info / "entry_points.txt").write_text("".join(lines))


def key(specs: list[EntryPointSpec]) -> list[tuple[str, str, str, str]]:
    return sorted((s.name, s.value, s.dist, s.version) for s in specs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(dist(), max_size=6), min_size=1, max_size=3))
def test_scan_equals_importlib(sites: list[list[dict[str, object]]]) -> None:
    tmp = Path(tempfile.mkdtemp())
    try:
        paths = []
        for i, dists in enumerate(sites):
            site = tmp / f"site{i}"
            site.mkdir()
            for d in dists:
                # importlib.metadata picks arbitrarily between two folders of one name in the
                # same directory; real installers never leave that, so neither do we.
                if any(
                    p.name.split("-")[0].lower().replace(".", "_")
                    == str(d["name"]).replace("-", "_").replace(".", "_")
                    for p in site.iterdir()
                ):
                    continue
                write_dist(site, d)
            paths.append(str(site))
        found, method = discover(paths, env={})
        assert method == "scan"
        assert key(found) == key(discover_with_importlib(paths))
    finally:
        shutil.rmtree(tmp)


def test_first_distribution_on_path_wins(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_dist(
        a,
        {
            "name": "hwbackends-x",
            "version": "2.0",
            "groups": {GROUP: [("x", "new:X")]},
            "comment": False,
            "egg": False,
        },
    )
    write_dist(
        b,
        {
            "name": "hwbackends_x",
            "version": "1.0",
            "groups": {GROUP: [("x", "old:X")]},
            "comment": False,
            "egg": False,
        },
    )
    found, _ = discover([str(a), str(b)], env={})
    assert [(s.value, s.version) for s in found] == [("new:X", "2.0")]
    assert key(found) == key(discover_with_importlib([str(a), str(b)]))


def test_parse_entry_points_reading() -> None:
    text = "; comment\n[hwbackends.backends]\n  a = m:A [extra]\n# c\nb=m.sub:B\n[other]\nc = x:C\n"
    assert parse_entry_points(text, GROUP) == [("a", "m:A [extra]"), ("b", "m.sub:B")]
    spec = EntryPointSpec("a", "m:A [extra]", "d", "1")
    assert (spec.module, spec.attr) == ("m", "A")


def test_fallback_for_zip_on_path_and_by_request(tmp_path: Path) -> None:
    z = tmp_path / "lib.zip"
    z.write_bytes(b"PK\x05\x06" + b"\x00" * 18)
    assert not fast_scan_possible([str(z)], {})
    assert not fast_scan_possible([], {"HWBACKENDS_DISCOVERY": "importlib"})
    assert fast_scan_possible([str(tmp_path)], {})
    _, method = discover([str(tmp_path)], env={"HWBACKENDS_DISCOVERY": "importlib"})
    assert method == "importlib"


def test_real_pip_installed_dummy_plugin(tmp_path: Path) -> None:
    """The fixture distribution, installed by pip into a temporary site directory."""
    fixture = Path(__file__).parent / "fixtures" / "hwbackends-dummy"
    target = tmp_path / "site"
    build = tmp_path / "build"
    shutil.copytree(fixture, build)  # keep build artefacts out of the source tree
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(build),
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.fail(f"pip could not install the fixture plugin:\n{proc.stderr}")
    found, _ = discover([str(target)], env={})
    assert key(found) == [("dummy", "hwbackends_dummy:DummyBackend", "hwbackends-dummy", "1.0.0")]
    assert key(found) == key(discover_with_importlib([str(target)]))

    # Through the real selection, in a fresh interpreter that has the site on its path.
    code = (
        "import hwbackends\n"
        "h = hwbackends.Host.from_dict({'device_nodes': ['/dev/dummy0', '/dev/dummy1']})\n"
        "r = hwbackends.explain(env={}, host=h)\n"
        "print(r.chosen, r.rule, [d.label for d in r.devices])\n"
    )
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "dummy priority ['dummy0', 'dummy1']"
