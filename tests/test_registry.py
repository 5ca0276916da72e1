"""Selection, isolation of broken plugins, strict mode, allow/deny lists, forcing."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from coretest import Site, clean_env, good_plugin, refresh, run_python

import hwbackends
from hwbackends import Host
from hwbackends._base.settings import Settings
from hwbackends._selection.registry import Registry

HOST_WITH = Host.from_dict({"device_nodes": ["/dev/alpha0", "/dev/beta0"]})
BARE = Host.from_dict({})


def select(site: Site, env: dict[str, str] | None = None, host: Host = HOST_WITH):
    reg = Registry(path=[str(site.path)])
    e = env or {}
    return reg.select(e, host, Settings.from_env(e))


def test_cpu_alone(site: Site) -> None:
    r = select(site, host=BARE)
    assert r.chosen == "cpu"
    assert r.rule == "only-available"
    assert [c.name for c in r.candidates] == ["cpu"]
    assert r.devices[0].torch_device == "cpu"


def test_priority_then_name(site: Site) -> None:
    site.add_plugin("alpha", good_plugin("alpha", 70))
    site.add_plugin("beta", good_plugin("beta", 70))
    r = select(site)
    # equal priority: ties break by name, and the report says so
    assert r.chosen == "alpha"
    assert r.rule == "priority"
    assert "ties break by name" in r.reason
    assert r.status("beta").state == "available"
    assert r.status("cpu").state == "available"


def test_unavailable_hardware_is_not_a_silent_fallback(site: Site) -> None:
    code = good_plugin("alpha", 70) + (
        '    packages: ClassVar[tuple[str, ...]] = ("alpha-runtime",)\n'
        '    install_hint: ClassVar[str] = "pip install alpha-runtime"\n'
    )
    site.add_plugin("alpha", code)
    r = select(site)
    assert r.chosen == "cpu"
    assert r.rule == "cpu-fallback"
    st = r.status("alpha")
    assert st.state == "unavailable"
    assert st.reason == "alpha hardware found, but the alpha-runtime package is not installed"
    assert r.warnings == (
        "alpha: alpha hardware found, but the alpha-runtime package is not installed. "
        "Fix: pip install alpha-runtime",
    )


BROKEN = {
    "import-error": ("raise ImportError('vendor SDK missing')\n", "importing"),
    "not-a-class": ("Backend = 42\n", "is a int, expected a backend class"),
    "not-protocol": (
        "class Backend:\n    api_version = 1\n    name = 'x'\n",
        "does not satisfy the Backend protocol",
    ),
    "probe-raises": (
        good_plugin("{n}") + "    def probe(self, host):\n        raise RuntimeError('boom')\n",
        "probe() raised RuntimeError: boom",
    ),
    "probe-wrong-type": (
        good_plugin("{n}") + "    def probe(self, host):\n        return True\n",
        "probe() returned bool, expected hwbackends.Probe",
    ),
    "api-version": (
        good_plugin("{n}") + "    api_version = 2\n",
        f"Backend was written for plugin API version 2, but hwbackends "
        f"{hwbackends.__version__} speaks plugin API version 1; install a release of "
        "hwbackends-bad written for API 1, or a hwbackends release that speaks API 2",
    ),
    # BaseBackend carries no api_version: a class that declares none is not loaded
    "api-undeclared": (
        good_plugin("{n}").replace("    api_version: ClassVar[int] = 1\n", ""),
        "Backend declares no plugin API version (no api_version in its class); hwbackends "
        f"{hwbackends.__version__} speaks plugin API version 1: install a release of "
        "hwbackends-bad that declares it, or add `api_version = 1` to the class",
    ),
    "api-not-int": (
        good_plugin("{n}") + "    api_version = '1'\n",
        "Backend.api_version is '1', expected an int (the plugin API version it was written for)",
    ),
    "wrong-name": (good_plugin("other"), "its entry point is named"),
    "sys-exit": ("import sys\nsys.exit(3)\n", "raised SystemExit"),
    # Probe fields of the wrong type: a string "False" must not make a backend available
    "probe-hint-int": (
        good_plugin("{n}")
        + "    def probe(self, host):\n        from hwbackends import Probe\n"
        + "        return Probe('{n}', True, True, 'ok', hint=5)\n",
        "probe() returned a Probe with mistyped field(s): hint=5 (expected str or None)",
    ),
    "probe-evidence-int": (
        good_plugin("{n}")
        + "    def probe(self, host):\n        from hwbackends import Probe\n"
        + "        return Probe('{n}', True, True, 'ok', evidence=7)\n",
        "evidence=7 (expected tuple of str)",
    ),
    "probe-string-bools": (
        good_plugin("{n}")
        + "    def probe(self, host):\n        from hwbackends import Probe\n"
        + "        return Probe('{n}', 'False', 'True', 'ok')\n",
        "hardware_present='False' (expected bool); software_ready='True' (expected bool)",
    ),
    "device-wrong-types": (
        good_plugin("bad", 99)
        + "    device_nodes = ('bad0',)\n"
        + "    def devices(self, host, env):\n        from hwbackends import Device\n"
        + "        return [Device('{n}', '{n}', index='0', physical_index=0)]\n",
        "devices() returned a Device with mistyped field(s): index='0' (expected int)",
    ),
    "devices-visibility-error": (
        good_plugin("bad", 99)
        + "    device_nodes = ('bad0',)\n"
        + "    def devices(self, host, env):\n"
        + "        from hwbackends import VisibilityError\n"
        + "        raise VisibilityError('the SDK has no device table')\n",
        "devices() raised VisibilityError: the SDK has no device table",
    ),
    "keyboard-interrupt": (
        good_plugin("{n}") + "    def probe(self, host):\n        raise KeyboardInterrupt\n",
        "probe() raised KeyboardInterrupt",
    ),
    "generator-exit": (
        good_plugin("{n}") + "    def probe(self, host):\n        raise GeneratorExit('x')\n",
        "probe() raised GeneratorExit: x",
    ),
    "custom-base-exception": (
        "class Stop(BaseException):\n    pass\n"
        + good_plugin("{n}")
        + "    def probe(self, host):\n        raise Stop('halt')\n",
        "probe() raised Stop: halt",
    ),
    "hostile-str": (
        "class Bad(Exception):\n    def __str__(self):\n        raise RuntimeError\n"
        + good_plugin("{n}")
        + "    def probe(self, host):\n        raise Bad()\n",
        "probe() raised Bad: <the exception's message could not be read>",
    ),
    "priority-property-raises": (
        good_plugin("{n}").replace("    priority: ClassVar[int] = 50\n", "")
        + "    @property\n    def priority(self):\n        raise RuntimeError('no')\n",
        "reading the attributes of Backend() raised RuntimeError: no",
    ),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_each_broken_plugin_is_reported_and_skipped(site: Site, kind: str) -> None:
    code, message = BROKEN[kind]
    site.add_plugin("alpha", good_plugin("alpha", 70))
    site.add_plugin("bad", code.replace("{n}", "bad"), dist="hwbackends-bad", version="0.3")
    r = select(site, host=Host.from_dict({"device_nodes": ["/dev/alpha0", "/dev/bad0"]}))
    bad = r.status("bad")
    assert bad.state == "broken", bad.reason
    assert message in bad.reason
    assert bad.origin == "hwbackends-bad" and bad.version == "0.3"
    # the others keep working
    assert r.chosen == "alpha"
    assert r.status("cpu").state == "available"


def test_traceback_is_kept_and_shown_only_in_debug(site: Site) -> None:
    site.add_plugin("bad", "raise ImportError('vendor SDK missing')\n")
    r = select(site)
    assert "ImportError: vendor SDK missing" in (r.status("bad").traceback or "")
    assert "traceback" not in r.status("bad").to_dict()
    assert "ImportError" in r.status("bad").to_dict(debug=True)["traceback"]


def test_two_distributions_claiming_one_name(site: Site) -> None:
    site.add_plugin("alpha", good_plugin("alpha", 70), dist="hwbackends-alpha")
    site.add_plugin("alpha", good_plugin("alpha", 70), dist="alpha-fork", version="9.9")
    site.add_plugin("beta", good_plugin("beta", 60))
    r = select(site)
    a = r.status("alpha")
    assert a.state == "broken"
    assert "backend name 'alpha' is claimed by 2 plugins" in a.reason
    assert "alpha-fork 9.9" in a.reason and "hwbackends-alpha 1.0" in a.reason
    assert r.chosen == "beta"


def test_plugin_cannot_replace_builtin_cpu(site: Site) -> None:
    site.add_plugin("cpu", good_plugin("cpu", 99), dist="evil-cpu")
    r = select(site, host=BARE)
    assert (r.chosen, r.status("cpu").origin) == ("cpu", "builtin")
    (evil,) = [c for c in r.candidates if c.origin == "evil-cpu"]
    assert evil.state == "broken"
    assert "evil-cpu declares a backend named 'cpu', which is built into hwbackends" in evil.reason


def test_devices_raising_falls_through_to_next(site: Site) -> None:
    code = good_plugin("alpha", 70) + (
        "    def devices(self, host, env):\n        raise OSError('no ioctl')\n"
    )
    site.add_plugin("alpha", code)
    site.add_plugin("beta", good_plugin("beta", 60))
    r = select(site)
    assert r.status("alpha").state == "broken"
    assert "devices() raised OSError: no ioctl" in r.status("alpha").reason
    assert r.chosen == "beta"


def test_allow_list_and_deny_list(site: Site) -> None:
    site.add_plugin("alpha", good_plugin("alpha", 70))
    site.add_plugin("beta", good_plugin("beta", 60))
    r = select(site, {"HWBACKENDS_PLUGINS": ""})
    assert r.chosen == "cpu"
    assert r.status("alpha").state == "disabled"
    assert r.status("alpha").reason == "not listed in HWBACKENDS_PLUGINS"
    r = select(site, {"HWBACKENDS_PLUGINS": "hwbackends-beta"})  # distribution names work too
    assert r.chosen == "beta"
    r = select(site, {"HWBACKENDS_DISABLE": "alpha"})
    assert r.chosen == "beta"
    assert r.status("alpha").reason == "listed in HWBACKENDS_DISABLE"


def test_disabling_cpu_with_nothing_else_is_an_error(site: Site) -> None:
    with pytest.raises(hwbackends.BackendUnavailableError, match="no backend is available"):
        select(site, {"HWBACKENDS_DISABLE": "cpu"}, host=BARE)


def test_forced_backend(site: Site) -> None:
    site.add_plugin("alpha", good_plugin("alpha", 70))
    site.add_plugin("beta", good_plugin("beta", 60))
    r = select(site, {"HWBACKENDS_BACKEND": "beta"})
    assert (r.chosen, r.rule) == ("beta", "forced")
    assert r.status("alpha").state == "not-probed"


def test_forced_unknown_name_lists_close_matches(site: Site) -> None:
    site.add_plugin("alpha", good_plugin("alpha", 70))
    with pytest.raises(
        hwbackends.BackendNotFoundError,
        match=r"HWBACKENDS_BACKEND='alpah' names no installed backend \(did you mean 'alpha'\?\)\. "
        r"Expected one of alpha, cpu\.",
    ):
        select(site, {"HWBACKENDS_BACKEND": "alpah"})


def test_forced_unavailable_gives_probe_reason(site: Site) -> None:
    site.add_plugin("alpha", good_plugin("alpha", 70))
    with pytest.raises(
        hwbackends.BackendUnavailableError,
        match=r"HWBACKENDS_BACKEND=alpha but that backend is unavailable: no alpha hardware found",
    ):
        select(site, {"HWBACKENDS_BACKEND": "alpha"}, host=BARE)


def test_strict_mode_makes_broken_plugins_fatal(isolated: Site) -> None:
    isolated.add_plugin("bad", "raise ImportError('nope')\n")
    refresh(isolated)
    report = hwbackends.explain(env={}, host=BARE)
    assert report.status("bad").broken
    with pytest.raises(hwbackends.PluginError, match=r"HWBACKENDS_STRICT=1 and 1 plugin\(s\)"):
        hwbackends.explain(env={"HWBACKENDS_STRICT": "1"}, host=BARE)


def test_current_is_cached_and_thread_safe(isolated: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    isolated.add_plugin("alpha", good_plugin("alpha", 70))
    refresh(isolated)
    monkeypatch.setenv("HWBACKENDS_HOST", "")
    monkeypatch.setattr(Host, "from_system", classmethod(lambda cls, *a, **k: HOST_WITH))
    results: list[object] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        results.append(hwbackends.explain())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(r) for r in results}) == 1
    assert hwbackends.current().name == "alpha"
    assert hwbackends.current() is hwbackends.current()


def test_get_unknown_and_backends_list(isolated: Site) -> None:
    with pytest.raises(hwbackends.BackendNotFoundError, match=r"no backend named 'cdua'"):
        hwbackends.get("cdua")
    assert hwbackends.get("cpu").device_type == "cpu"
    names = [s.name for s in hwbackends.backends(env={}, host=BARE)]
    assert names == ["cpu"]


def test_report_is_json_able(site: Site) -> None:
    import json

    site.add_plugin("alpha", good_plugin("alpha", 70))
    d = select(site).to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["chosen"] == "alpha"
    assert set(d["timings_ms"]) >= {"discovery", "probe:alpha", "probe:cpu"}


def test_hidden_devices_fall_back_to_cpu_and_say_so(site: Site) -> None:
    code = (
        "from hwbackends.visibility import IndexList\n"
        + good_plugin("alpha", 70)
        + '    visibility = IndexList("ALPHA_VISIBLE_DEVICES")\n'
    )
    site.add_plugin("alpha", code)
    r = select(site, {"ALPHA_VISIBLE_DEVICES": ""})
    assert (r.chosen, r.rule) == ("cpu", "cpu-fallback")
    assert "alpha could not be used" in r.reason
    assert r.status("alpha").reason.startswith(
        "alpha hardware is present, but the visibility variables hide every device from this "
        "process (ALPHA_VISIBLE_DEVICES=''): "
    )
    (gone,) = r.hidden  # the engine's reasons and the fix travel with the report
    assert gone["backend"] == "alpha" and gone["variables"] == {"ALPHA_VISIBLE_DEVICES": ""}
    assert gone["reasons"] and gone["fix"].startswith("unset ALPHA_VISIBLE_DEVICES")
    with pytest.raises(
        hwbackends.BackendUnavailableError,
        match=r"HWBACKENDS_BACKEND=alpha but that backend is unavailable: alpha hardware is "
        r"present, but the visibility variables hide every device",
    ):
        select(site, {"HWBACKENDS_BACKEND": "alpha", "ALPHA_VISIBLE_DEVICES": ""})


def test_the_builtin_cpu_is_never_subject_to_the_plugin_time_limit(tmp_path: Path) -> None:
    s = Site(tmp_path / "site")
    s.path.mkdir()
    s.add_plugin(
        "acme",
        good_plugin("acme", 90)
        + "    def probe(self, host):\n        import time\n        time.sleep(1)\n"
        + "        return super().probe(host)\n",
    )
    # the cpu built-in is slowed past the limit as well: it must still be chosen
    env = clean_env(PYTHONPATH=str(s.path), HWBACKENDS_NO_CACHE="1", HWBACKENDS_TIMEOUT="0.01")
    code = (
        "import json, time, hwbackends\n"
        "from hwbackends._kit.cpu import CpuBackend\n"
        "slow = CpuBackend.probe\n"
        "def probe(self, host):\n"
        "    time.sleep(0.2)\n"
        "    return slow(self, host)\n"
        "CpuBackend.probe = probe\n"
        "r = hwbackends.explain()\n"
        "print(json.dumps({'chosen': r.chosen, 'acme': r.status('acme').state}))\n"
    )
    out = run_python("-c", code, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"chosen": "cpu", "acme": "broken"}
