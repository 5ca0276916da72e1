"""The conformance kit, proven from outside: a new plugin from the template, and broken ones."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from hwbackends import Host, Probe
from hwbackends.plugin import BaseBackend
from hwbackends.testing import (
    check_capabilities,
    check_import_is_clean,
    check_probe,
    check_protocol,
    check_visibility_round_trip,
)

ROOT = Path(__file__).resolve().parent.parent


def load_new_plugin_script() -> Any:
    spec = importlib.util.spec_from_file_location("new_plugin", ROOT / "scripts" / "new_plugin.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def zeta_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A brand-new backend for an imaginary accelerator, made from the template and installed."""
    work = tmp_path_factory.mktemp("newplugin")
    made = load_new_plugin_script().create(
        "zeta", vendor="zetacorp", device="zeta", package="torch-zeta", display="Zeta TPX",
        dest=work,
    )  # fmt: skip
    site = work / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), str(made)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return made, site


def test_template_plugin_is_selected_by_env_host(zeta_site: tuple[Path, Path]) -> None:
    made, site = zeta_site
    host = made / "tests" / "hosts" / "zeta-2.json"
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HWBACKENDS_PLUGINS": "zeta"}
    out = subprocess.run(
        [sys.executable, "-m", "hwbackends", "env", "--host", str(host), "--json"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["chosen"] == "zeta"
    assert [d["name"] for d in report["devices"]] == ["Zeta TPX card", "Zeta TPX card"]
    zeta = next(c for c in report["candidates"] if c["name"] == "zeta")
    assert (zeta["origin"], zeta["version"]) == ("hwbackends-zeta", "0.1.0")
    assert report["settings"]["from_pretrained"]["kwargs"]["device_map"] == "zeta:0"


def test_template_plugin_passes_the_kit_before_any_edit(zeta_site: tuple[Path, Path]) -> None:
    made, site = zeta_site
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(made / "tests")],
        capture_output=True, text=True, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        cwd=made,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:]
    assert "9 passed" in out.stdout


# -- a second imaginary plugin, broken in each way the kit knows ---------------------------


class Good(BaseBackend):
    name: ClassVar[str] = "omega"
    device_type: ClassVar[str] = "omega"
    vendor: ClassVar[str | None] = "omegacorp"


HOST = Host.from_dict(
    {"devices": [{"vendor": "omegacorp", "name": "O1"}, {"vendor": "omegacorp", "name": "O2"}]}
)


class NoApi(Good):
    api_version: ClassVar[int] = 7  # type: ignore[misc]


class Raises(Good):
    def __init__(self) -> None:
        raise OSError("opened /dev/omega0")


class Untyped(Good):
    priority = "high"  # type: ignore[assignment]


class ProbeRaises(Good):
    def probe(self, host: Host) -> Probe:
        raise KeyError("driver")


class SilentProbe(Good):
    def probe(self, host: Host) -> Probe:
        return Probe("omega", True, False, "  ")


class WrongProbe(Good):
    def probe(self, host: Host) -> Probe:
        return Probe("alpha", True, True, "fine")


class NoHint(Good):
    def probe(self, host: Host) -> Probe:
        return Probe("omega", True, False, "package missing")


def test_check_protocol_messages() -> None:
    assert check_protocol(Good, "omega") == []
    assert check_protocol(NoApi) == [
        "NoApi declares plugin API version 7 but this hwbackends speaks version 1; install a "
        "release of the plugin built for hwbackends API 1, or a hwbackends release matching "
        "the plugin"
    ]
    assert check_protocol(Raises) == [
        "Raises() raised OSError: opened /dev/omega0; a backend must construct without "
        "arguments and without touching hardware"
    ]
    assert check_protocol(Untyped) == [
        "Untyped does not satisfy the Backend protocol: missing or mistyped priority (see "
        "hwbackends.Backend; subclass hwbackends.plugin.BaseBackend)"
    ]
    assert check_protocol(Good, "omicron") == [
        "Good.name is 'omega' but its entry point is named 'omicron'; they must be equal"
    ]


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (ProbeRaises, "omega.probe() raised KeyError: 'driver' on host dict"),
        (SilentProbe, "omega.probe() gave no reason on host dict"),
        (SilentProbe, "omega.probe() found hardware but not the software, and gave no hint "
                      "naming the fix (host dict)"),
        (WrongProbe, "omega.probe() returned a Probe for 'alpha'"),
        (NoHint, "omega.probe() found hardware but not the software, and gave no hint naming "
                 "the fix (host dict)"),
    ],
)  # fmt: skip
def test_check_probe_messages(cls: type[Good], message: str) -> None:
    assert message in check_probe(cls(), HOST)
    assert check_probe(Good(), HOST) == []


def test_check_capabilities_messages() -> None:
    from dataclasses import replace

    from hwbackends import AttentionOption

    b = Good()
    caps = b.capabilities(None)
    assert check_capabilities(caps, b) == []
    bad = replace(
        caps,
        attention=(AttentionOption("flash_attention_2", source="", packages=("flash-attn",)),),
        sources={},
        distributed_backend="",
    )
    assert check_capabilities(bad, b) == [
        "omega capabilities (default): the last attention option must need nothing (e.g. eager)",
        "omega capabilities (default): attention 'flash_attention_2' has no source",
        "omega capabilities (default) name no distributed backend",
        "omega capabilities (default): training_precision has no source",
    ]


def test_check_visibility_round_trip_catches_a_writer_that_lies() -> None:
    class Liar(Good):
        def visibility_env(self, indices: Any, *, host: Host | None = None) -> dict[str, str]:
            return {}

    from hwbackends.testing import check_devices_agree

    assert check_devices_agree(Good(), HOST, {}) == []
    # a backend without a visibility model shows every device: a reversed pick cannot hold
    assert check_visibility_round_trip(Liar(), HOST) == [
        "omega: visibility_env([0]) = {} shows physical [0, 1], not [0]",
        "omega: visibility_env([1, 0]) = {} shows physical [0, 1], not [1, 0]",
        "omega: visibility_env([1]) = {} shows physical [0, 1], not [1]",
    ]


def test_check_import_is_clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "leaky_plugin.py").write_text("import os, json\nos.environ['LEAK'] = '1'\n")
    (tmp_path / "clean_plugin.py").write_text("X = 1\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert check_import_is_clean("clean_plugin", ["json"]) == []
    assert check_import_is_clean("leaky_plugin", ["json"]) == [
        "importing leaky_plugin imported json",
        "importing leaky_plugin changed os.environ: LEAK",
    ]
