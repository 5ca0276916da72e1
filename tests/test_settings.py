"""The library's own ``HWBACKENDS_*`` settings: allow and deny lists naming absent plugins,
misspelt setting names, time limits too small to run anything, and a report that names only
the settings that were made."""

from __future__ import annotations

import subprocess
import warnings

import pytest
from coretest import Site, clean_env, good_plugin, run_python

import hwbackends
from hwbackends import Host
from hwbackends._base.errors import HwBackendsWarning
from hwbackends._base.settings import Settings
from hwbackends._selection.registry import Registry

HOST = Host.from_dict({"device_nodes": ["/dev/alpha0"]})


def cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_python("-m", "hwbackends", *args, env=env, timeout=timeout)


def select(site: Site, env: dict[str, str]) -> hwbackends.SelectionReport:
    return Registry(path=[str(site.path)]).select(env, HOST, Settings.from_env(env))


def test_disabling_an_absent_plugin_is_a_no_op_with_a_warning(site: Site) -> None:
    site.add_plugin("alpha", good_plugin("alpha", 70))
    env = {"HWBACKENDS_DISABLE": "nosuch-plugin-h21, alpha"}
    with pytest.warns(HwBackendsWarning, match="HWBACKENDS_DISABLE names 'nosuch-plugin-h21'"):
        r = select(site, env)
    assert r.chosen == "cpu" and r.status("alpha").state == "disabled"
    assert any("nosuch-plugin-h21" in w and w.endswith("ignored") for w in r.warnings)


def test_an_allow_list_warns_about_absent_names_unless_nothing_remains(site: Site) -> None:
    site.add_plugin("alpha", good_plugin("alpha", 70))
    with pytest.warns(HwBackendsWarning, match="HWBACKENDS_PLUGINS names 'alpah-h21'"):
        r = select(site, {"HWBACKENDS_PLUGINS": "alpha,alpah-h21"})
    assert r.chosen == "alpha"
    with pytest.raises(hwbackends.BackendNotFoundError, match="none of which is installed"):
        select(site, {"HWBACKENDS_PLUGINS": "alpah-h21"})


@pytest.mark.parametrize(
    "name", ["hwbackends_backend", "HWBACKEND_BACKEND", "HWBACKENDS_Backend", "HWBACKENDS_BACKNED"]
)
def test_unknown_setting_names_warn_once_per_process_with_a_suggestion(
    site: Site, name: str
) -> None:
    env = {name: "cpu"}
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        for _ in range(3):
            r = select(site, env)
    mine = [w for w in got if issubclass(w.category, HwBackendsWarning)]
    assert len(mine) == 1, [str(w.message) for w in mine]
    assert f"{name} is not a hwbackends variable" in str(mine[0].message)
    assert "'HWBACKENDS_BACKEND'" in str(mine[0].message)
    assert any(name in w for w in r.warnings)


def test_a_timeout_too_small_to_run_anything_is_refused_at_parse_time() -> None:
    out = cli("env", env=clean_env(HWBACKENDS_TIMEOUT="1e-5"))
    assert out.returncode == 2
    assert "HWBACKENDS_TIMEOUT='1e-5' is too small for any plugin call" in out.stderr
    assert "at least 0.01 seconds" in out.stderr


def test_no_backend_at_all_names_only_a_setting_that_was_made(site: Site) -> None:
    with pytest.raises(hwbackends.BackendUnavailableError) as info:
        select(site, {"HWBACKENDS_DISABLE": "cpu"})
    assert "Fix: remove cpu from HWBACKENDS_DISABLE" in str(info.value)
    assert "HWBACKENDS_PLUGINS" not in str(info.value)
