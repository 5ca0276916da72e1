"""Plugins claiming one backend name, intended replacements, and the user's order.

Real distributions (``*.dist-info`` with entry points) are put on the path beside the
installed ``hwbackends-cuda``, and every surface is run: selection's report, ``env``,
``explain``, ``plugins --check`` and ``hwbackends.get``. A clash must give the same message and
the same fix everywhere; ``HWBACKENDS_DISABLE`` / ``HWBACKENDS_PLUGINS`` with a distribution
name resolve it; ``replaces = "cuda"`` makes a replacement first-class.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from coretest import Site, clean_env, good_plugin, run_python

from hwbackends import Host
from hwbackends._base.settings import Settings
from hwbackends._discovery.loading import clash_error
from hwbackends._discovery.scan import EntryPointSpec
from hwbackends._selection.registry import Registry

REPO = Path(__file__).resolve().parents[1]
H100 = REPO / "plugins/hwbackends-cuda/tests/hosts/h100-sxm-8.json"

DGX = """
from hwbackends_cuda import CudaBackend

class Backend(CudaBackend):
    replaces = "cuda"
"""
FORK = """
from hwbackends_cuda import CudaBackend

class Backend(CudaBackend):
    pass
"""


def cli(site: Site, *args: str, **env: str) -> tuple[int, str, str]:
    e = clean_env(**env)
    e["PYTHONPATH"] = os.pathsep.join([str(site.path), e.get("PYTHONPATH", "")])
    e["HWBACKENDS_NO_CACHE"] = "1"
    e["COLUMNS"] = "400"  # one line per reason: the messages are compared whole
    out = run_python("-m", "hwbackends", *args, env=e)
    return out.returncode, out.stdout, out.stderr


def flat(text: str) -> str:
    return " ".join(text.split())


def test_a_declared_replacement_replaces(site: Site) -> None:
    site.add_plugin("cuda", DGX, dist="hwbackends-cuda-dgx", version="2.0")
    code, out, err = cli(site, "plugins", "--host", str(H100), "--json")
    assert code == 0, err
    rows = [p for p in json.loads(out)["plugins"] if p["name"] == "cuda"]
    by_origin = {p["origin"]: p for p in rows}
    assert by_origin["hwbackends-cuda-dgx"]["state"] == "selected"
    assert by_origin["hwbackends-cuda-dgx"]["replaces"] == "hwbackends-cuda"
    replaced = by_origin["hwbackends-cuda"]
    assert (replaced["state"], replaced["replaced_by"]) == ("disabled", "hwbackends-cuda-dgx")
    assert replaced["reason"] == "replaced by hwbackends-cuda-dgx (it declares replaces = 'cuda')"
    code, out, err = cli(site, "plugins", "--check", "--host", str(H100))
    assert code == 0, err
    assert "cuda (hwbackends-cuda-dgx, replaces hwbackends-cuda)" in out
    assert "disabled (replaced)" in out
    # the process-wide entry points hand out the replacement, not the replaced plugin
    probe = (
        "import hwbackends; from hwbackends._selection.view import raw; "
        "print(type(raw(hwbackends.get('cuda'))).__module__)"
    )
    e = clean_env(PYTHONPATH=os.pathsep.join([str(site.path), os.environ.get("PYTHONPATH", "")]))
    got = run_python("-c", probe, env=e)
    assert got.stdout.strip() == site.modules[0], got.stderr


def test_a_clash_says_the_same_everywhere_and_a_distribution_name_resolves_it(
    site: Site,
) -> None:
    site.add_plugin("cuda", FORK, dist="hwbackends-cuda-fork", version="1.5")
    reg = Registry(path=[str(site.path)] + [p for p in sys.path if p])
    specs = [s for s in reg.specs if s.name == "cuda"]
    message = clash_error("cuda", specs)
    assert message.startswith("backend name 'cuda' is claimed by 2 plugins: ")
    assert (
        "Fix: set HWBACKENDS_DISABLE=hwbackends-cuda-fork to use hwbackends-cuda or "
        "HWBACKENDS_DISABLE=hwbackends-cuda to use hwbackends-cuda-fork (or uninstall all but "
        "one); a plugin meant to replace another declares replaces = 'cuda' in its backend."
    ) in message

    code, out, err = cli(site, "env", "--verbose", "--host", str(H100))
    assert code == 0, err
    assert message in flat(out)  # the backend's row
    assert f"8 NVIDIA GPU(s) found, but {message.rstrip('.')}" in flat(out)  # the warning
    code, out, err = cli(site, "explain", "--host", str(H100))
    assert code == 0, err
    assert message in flat(out)
    code, out, err = cli(site, "plugins", "--check", "--host", str(H100))
    assert code == 1
    assert message in flat(err)
    e = clean_env(PYTHONPATH=os.pathsep.join([str(site.path), os.environ.get("PYTHONPATH", "")]))
    got = run_python("-c", "import hwbackends; hwbackends.get('cuda')", env=e)
    assert f"PluginError: {message}" in flat(got.stderr)

    # the user picks one by its distribution name, either way, in either spelling
    for env in (
        {"HWBACKENDS_DISABLE": "hwbackends-cuda-fork"},
        {"HWBACKENDS_DISABLE": "hwbackends_cuda_fork"},
        {"HWBACKENDS_PLUGINS": "hwbackends-cuda"},
    ):
        code, out, err = cli(site, "plugins", "--check", "--host", str(H100), "--json", **env)
        assert code == 0, (env, err)
        rows = {p["origin"]: p for p in json.loads(out)["plugins"] if p["name"] == "cuda"}
        assert rows["hwbackends-cuda"]["state"] == "selected", env
        assert rows["hwbackends-cuda-fork"]["state"] == "disabled", env
    code, out, err = cli(
        site, "env", "--json", "--host", str(H100), HWBACKENDS_DISABLE="hwbackends-cuda"
    )
    assert code == 0, err
    report = json.loads(out)
    chosen = next(c for c in report["candidates"] if c["state"] == "selected")
    assert (chosen["name"], chosen["origin"]) == ("cuda", "hwbackends-cuda-fork")
    got = run_python(
        "-c",
        "import hwbackends; from hwbackends._selection.view import raw; "
        "print(type(raw(hwbackends.get('cuda'))).__module__)",
        env=dict(e, HWBACKENDS_DISABLE="hwbackends-cuda"),
    )
    assert got.stdout.strip() == site.modules[0], got.stderr


def test_a_replacement_under_its_own_name(site: Site) -> None:
    code = good_plugin("alpha", 70) + '    replaces = "beta"\n'
    site.add_plugin("alpha", code, dist="hwbackends-alpha")
    site.add_plugin("beta", good_plugin("beta", 90), dist="hwbackends-beta")
    reg = Registry(path=[str(site.path)])
    host = Host.from_dict({"device_nodes": ["/dev/alpha0", "/dev/beta0"]})
    r = reg.select({}, host, Settings.from_env({}))
    assert r.chosen == "alpha"
    beta = r.status("beta")
    assert (beta.state, beta.replaced_by) == ("disabled", "hwbackends-alpha")
    assert r.status("alpha").replaces == "hwbackends-beta"


def test_two_claimants_of_one_name_without_a_winner_in_a_registry(site: Site) -> None:
    site.add_plugin("alpha", good_plugin("alpha", 70), dist="hwbackends-alpha")
    site.add_plugin("alpha", good_plugin("alpha", 70), dist="alpha-fork")
    host = Host.from_dict({"device_nodes": ["/dev/alpha0"]})
    reg = Registry(path=[str(site.path)])
    specs: list[EntryPointSpec] = [s for s in reg.specs if s.name == "alpha"]
    r = reg.select({}, host, Settings.from_env({}))
    assert r.status("alpha").reason == clash_error("alpha", specs)
    env = {"HWBACKENDS_DISABLE": "alpha-fork"}
    r = reg.select(env, host, Settings.from_env(env))
    assert (r.chosen, r.status("alpha").origin) == ("alpha", "hwbackends-alpha")
    (off,) = [c for c in r.candidates if c.origin == "alpha-fork"]
    assert (off.state, off.reason) == ("disabled", "listed in HWBACKENDS_DISABLE")


@pytest.mark.parametrize(
    ("value", "chosen", "rule"),
    [
        ("beta,alpha", "beta", "preferred"),
        ("alpha,beta", "alpha", "preferred"),
        ("gamma,beta", "beta", "preferred"),  # gamma is installed but has no hardware here
        ("cuda,beta", "beta", "preferred"),  # a known plugin missing here is passed over
        ("beta", "beta", "forced"),
    ],
)
def test_the_users_order(site: Site, value: str, chosen: str, rule: str) -> None:
    site.add_plugin("alpha", good_plugin("alpha", 90))
    site.add_plugin("beta", good_plugin("beta", 10))
    site.add_plugin("gamma", good_plugin("gamma", 99))
    reg = Registry(path=[str(site.path)])
    host = Host.from_dict({"device_nodes": ["/dev/alpha0", "/dev/beta0"]})
    env = {"HWBACKENDS_BACKEND": value}
    r = reg.select(env, host, Settings.from_env(env))
    assert (r.chosen, r.rule) == (chosen, rule)
    if value.startswith("gamma"):
        assert r.reason == (
            "the first usable backend in HWBACKENDS_BACKEND=gamma,beta (gamma: unavailable)"
        )


def test_the_users_order_refuses_a_typo_and_names_every_reason(site: Site) -> None:
    from hwbackends import BackendNotFoundError, BackendUnavailableError

    site.add_plugin("alpha", good_plugin("alpha", 90))
    site.add_plugin("gamma", good_plugin("gamma", 99))
    reg = Registry(path=[str(site.path)])
    host = Host.from_dict({"device_nodes": ["/dev/alpha0"]})
    env = {"HWBACKENDS_BACKEND": "alpah,gamma"}
    with pytest.raises(BackendNotFoundError, match=r"lists 'alpah', which is no installed backend"):
        reg.select(env, host, Settings.from_env(env))
    env = {"HWBACKENDS_BACKEND": "gamma,cpu"}
    r = reg.select(env, host, Settings.from_env(env))
    assert (r.chosen, r.rule) == ("cpu", "preferred")
    env = {"HWBACKENDS_BACKEND": "gamma"}
    with pytest.raises(BackendUnavailableError, match="that backend is unavailable"):
        reg.select(env, host, Settings.from_env(env))


SAME_BUS = """
from typing import ClassVar
from hwbackends.plugin import BaseBackend

class Backend(BaseBackend):
    name: ClassVar[str] = "{name}"
    api_version: ClassVar[int] = 1
    device_type: ClassVar[str] = "{name}"
    priority: ClassVar[int] = {priority}
    vendor: ClassVar[str] = "nvidia"
"""


def test_two_backends_claiming_the_same_devices_are_named_with_the_setting(site: Site) -> None:
    site.add_plugin("acme", SAME_BUS.format(name="acme", priority=120))
    site.add_plugin("zeta", SAME_BUS.format(name="zeta", priority=50))
    host = Host.from_dict(
        {"devices": [{"vendor": "nvidia", "pci_bus_id": f"0000:0{i}:00.0"} for i in (1, 2)]}
    )
    reg = Registry(path=[str(site.path)])
    r = reg.select({}, host, Settings.from_env({}))
    assert r.chosen == "acme"
    assert (
        "acme and zeta both claim the same devices (0000:01:00.0, 0000:02:00.0); acme is used "
        "(priority 120 vs 50). HWBACKENDS_BACKEND decides: set HWBACKENDS_BACKEND=zeta,acme to "
        "prefer zeta, or HWBACKENDS_DISABLE=zeta to keep acme alone"
    ) in r.warnings
    # once the user has stated the order there is nothing to warn about
    env = {"HWBACKENDS_BACKEND": "zeta,acme"}
    r = reg.select(env, host, Settings.from_env(env))
    assert r.chosen == "zeta"
    assert not [w for w in r.warnings if "both claim" in w]
    # a backend on other devices is in no clash
    site.add_plugin("solo", SAME_BUS.format(name="solo", priority=10).replace('"nvidia"', '"solo"'))
    both = Host.from_dict(
        {
            "devices": [
                {"vendor": "nvidia", "pci_bus_id": "0000:01:00.0"},
                {"vendor": "solo", "pci_bus_id": "0000:02:00.0"},
            ]
        }
    )
    r = Registry(path=[str(site.path)]).select({}, both, Settings.from_env({}))
    assert r.status("solo").state == "available"
    assert [w for w in r.warnings if "both claim" in w] == [
        "acme and zeta both claim the same devices (0000:01:00.0); acme is used (priority 120 "
        "vs 50). HWBACKENDS_BACKEND decides: set HWBACKENDS_BACKEND=zeta,acme to prefer zeta, "
        "or HWBACKENDS_DISABLE=zeta to keep acme alone"
    ]


def test_the_selection_cache_remembers_the_replacement(site: Site, tmp_path: Path) -> None:
    # /dev/null is on every machine: both plugins are available here
    node = good_plugin("alpha", 70).replace('("alpha{n}",)', '("null",)')
    site.add_plugin("alpha", node, dist="hwbackends-alpha")
    replacing = site.add_plugin("alpha", node + '    replaces = "alpha"\n', dist="zeta-alpha")
    probe = (
        "import json, hwbackends; from hwbackends._selection import cache; "
        "from hwbackends._selection.view import raw; "
        "b = hwbackends.current(); print(json.dumps([cache.LAST, type(raw(b)).__module__]))"
    )
    env = clean_env(XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONPATH=str(site.path))
    runs = [run_python("-c", probe, env=env) for _ in range(2)]
    assert [json.loads(r.stdout) for r in runs] == [["miss", replacing], ["hit", replacing]], [
        r.stderr for r in runs
    ]
