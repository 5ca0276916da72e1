"""The hwbackends conformance kit, plus this backend's own cases."""

from __future__ import annotations

from pathlib import Path

from hwbackends import Host
from hwbackends.testing import BackendContract

from hwbackends_REPLACE import REPLACE_CLASSBackend

HOSTS = Path(__file__).parent / "hosts"


class TestREPLACE_CLASSContract(BackendContract):
    backend_cls = REPLACE_CLASSBackend
    hosts = ("hosts/REPLACE-2.json",)
    other_hosts = ("hosts/REPLACE-no-package.json",)
    # the runtime's own modules: importing the plugin must not import them
    sdk_modules = REPLACE_SDK_MODULES


def test_hardware_without_package_says_what_to_install() -> None:
    host = Host.from_file(HOSTS / "REPLACE-no-package.json")
    probe = REPLACE_CLASSBackend().probe(host)
    assert (probe.hardware_present, probe.software_ready) == (True, False)
    assert probe.hint == "pip install REPLACE_PACKAGE"
