"""``device_names`` (the names ``env``'s Hardware line gives the machine's devices) calls the
``devices()`` of backends that selection did not choose: a plugin that raises, hangs or edits
the environment there leaves the report as it was and the application's state untouched."""

from __future__ import annotations

import os
import sys
import threading
import time
import types

import pytest
from coretest import Site, good_plugin

from hwbackends import Host
from hwbackends._base import guard
from hwbackends._selection.order import device_names
from hwbackends._selection.registry import Registry, Settings

HOST = Host.from_dict({"device_nodes": ["/dev/alpha0", "/dev/beta0"]})

MISBEHAVING = {
    "raises": "        raise OSError('no ioctl')\n",
    "hangs": "        import hwb_names_sync\n        hwb_names_sync.GO.wait(60)\n",
    "edits the environment": "        import os\n"
    "        os.environ['HWBACKENDS_NAMES_PLANTED'] = '1'\n"
    "        return super().devices(host, env)\n",
}


@pytest.mark.parametrize("kind", sorted(MISBEHAVING))
def test_an_unchosen_backend_misbehaving_in_devices_leaves_the_names_alone(
    site: Site, kind: str
) -> None:
    # alpha's devices() is fine while selection chooses beta (higher priority), and misbehaves
    # only when asked with its visibility variables dropped, as device_names asks
    site.add_plugin(
        "alpha",
        good_plugin("alpha", 50)
        + "    def devices(self, host, env):\n"
        + "        if 'HWB_SELECTING' in env:\n"
        + "            return super().devices(host, env)\n"
        + MISBEHAVING[kind],
    )
    site.add_plugin("beta", good_plugin("beta", 60))
    reg = Registry(path=[str(site.path)])
    env = {"HWB_SELECTING": "1"}
    report = reg.select(env, HOST, Settings.from_env(env))
    alpha = report.status("alpha")
    assert (report.chosen, alpha.state) == ("beta", "available"), alpha.reason
    sync = types.ModuleType("hwb_names_sync")
    sync.GO = threading.Event()  # type: ignore[attr-defined]
    sys.modules["hwb_names_sync"] = sync
    t0 = time.monotonic()
    try:
        names = device_names(report, {}, reg.get, timeout=0.5)
    finally:
        # let the hung call end: its owner is called again once it has returned
        sync.GO.set()  # type: ignore[attr-defined]
        while guard._hung and time.monotonic() - t0 < 60:
            time.sleep(0.01)
        del sys.modules["hwb_names_sync"]
        planted = os.environ.pop("HWBACKENDS_NAMES_PLANTED", None)
    assert time.monotonic() - t0 < 20  # the hang is cut at its limit, not waited out
    assert names == {}  # /dev nodes carry no PCI address: nothing to name, nothing raised
    reports = guard.take_reports()
    if kind == "edits the environment":  # reported, naming the call, and not undone
        assert planted == "1" and any("HWBACKENDS_NAMES_PLANTED" in w for w in reports), reports
