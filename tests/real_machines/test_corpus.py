"""Real machines, not our fixtures: every case in ``cases/`` is a capture others published.

Each case folder holds ``root/`` (a machine's files: sysfs, procfs, /dev names) and
``case.json``: where the files come from and the truth read from the capture itself (see
``README.md``). The real reader runs on ``root/`` with the installed in-repo plugins, through
``Host.from_system`` and through ``hwbackends env --root``. A folder of further cases dropped
next to these is run the same way: nothing here names a case.

``case.json``'s ``pending`` names the assertions that wait on work not done yet; each one is a
strict xfail, so it fails the day the work lands and the entry must be removed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from hwbackends import Host, HostDevice
from hwbackends.cli import main

CASES = Path(__file__).resolve().parent / "cases"
PLUGINS = Path(__file__).resolve().parent.parent.parent / "plugins"

pytestmark = pytest.mark.skipif(
    not (PLUGINS / "hwbackends-cuda").exists(), reason="the in-repo plugins are needed"
)

# What each aspect checks; a case's ``pending`` may name any of them.
ASPECTS = (
    "devices",
    "arch",
    "unclaimed",
    "non_compute",
    "no_plugin",
    "driver",
    "pci_driver",
    "cpu_arch",
    "hint",
    "evidence",
    "cli",
)


def _case_dirs() -> list[Path]:
    return sorted(p for p in CASES.iterdir() if (p / "case.json").is_file())


@cache
def _meta(case: Path) -> dict[str, Any]:
    data = json.loads((case / "case.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{case}/case.json must be an object"
    return data


def _applies(meta: Mapping[str, Any], aspect: str) -> bool:
    truth = meta["truth"]
    if aspect == "arch":
        return any("arch" in d for ds in truth.get("devices", {}).values() for d in ds)
    if aspect == "driver":
        return bool(truth.get("drivers_bound"))
    if aspect == "pci_driver":
        return bool(truth.get("pci_drivers"))
    if aspect == "cpu_arch":
        return "cpu_arch" in truth
    if aspect == "hint":
        return "hint" in truth
    if aspect == "evidence":
        return bool(meta.get("evidence"))
    if aspect == "non_compute":
        return bool(truth.get("non_compute"))
    if aspect == "no_plugin":
        return bool(truth.get("no_plugin"))
    return True


def params(aspect: str) -> list[Any]:
    return list(_params(aspect))


def _params(aspect: str) -> Iterator[Any]:
    for case in _case_dirs():
        meta = _meta(case)
        if not _applies(meta, aspect):
            continue
        why = meta.get("pending", {}).get(aspect)
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        yield pytest.param(case, id=case.name, marks=marks)


@cache
def _host(case: Path) -> Host:
    return Host.from_system(root=str(case / "root"))


@cache
def _backends() -> dict[str, Any]:
    """vendor key -> the installed backend that serves it."""
    from hwbackends._discovery.loading import installed_backends

    return {b.vendor: b for b in installed_backends() if getattr(b, "vendor", None)}


@cache
def _by_name() -> dict[str, Any]:
    from hwbackends._discovery.loading import installed_backends

    return {b.name: b for b in installed_backends()}


def _listed_only(d: HostDevice) -> bool:
    """A function the report lists but no backend serves: an unclaimed accelerator, or a
    known function that computes nothing (a crypto engine) or has no plugin."""
    return bool(d.extra.get("unclaimed") or d.extra.get("known_function"))


def _physical(d: HostDevice) -> str | None:
    """The PCI function a device is on: a partition's names the one its partitions share."""
    got = d.extra.get("physical_pci_bus_id")
    return got if isinstance(got, str) else d.pci_bus_id


def _claimed(host: Host, vendor: str) -> tuple[HostDevice, ...]:
    return tuple(d for d in host.devices_of(vendor) if not _listed_only(d))


# -- the corpus itself ------------------------------------------------------------------------


def test_the_corpus_is_large_and_varied() -> None:
    """At least 40 cases from 10 hardware vendors, partial captures (containers, VMs), negative
    controls, a partitioned GPU, accelerators no plugin serves and non-x86 machines: the
    issue's floor for this corpus."""
    metas = [_meta(c) for c in _case_dirs()]
    assert len(metas) >= 40
    # a PCI vendor id and the backend's vendor key name the same maker once
    same = {"0x10de": "nvidia", "0x1002": "amd", "0x8086": "intel"}
    vendors = {v for m in metas for v in m["truth"]["devices"]}
    for field in ("unclaimed", "no_plugin"):
        vendors |= {
            same.get(u["pci_vendor_id"], u["pci_vendor_id"])
            for m in metas
            for u in m["truth"].get(field, [])
        }
    assert len(vendors) >= 10, vendors
    assert any(not m["truth"]["devices"] for m in metas), "a negative control"
    assert any(m["truth"].get("partitions") for m in metas), "a partitioned GPU"
    assert any(m["truth"].get("no_plugin") for m in metas), "an accelerator with no plugin"
    assert any(m["truth"].get("cpu_arch") for m in metas), "a machine that is not x86_64"
    sources = {s for m in metas for s in m.get("evidence", {}).values()}
    assert {"kfd", "nvidia-proc", "dev", "pci"} <= sources, sources


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in _case_dirs()])
def test_every_case_says_where_it_comes_from(case: Path) -> None:
    meta = _meta(case)
    src = meta["source"]
    assert meta["kind"] in ("capture", "transcription", "conversion", "constructed")
    assert src.get("license"), "state the license (or that none is stated)"
    if meta["kind"] != "constructed":
        assert src.get("repository") and src.get("path"), "cite repository and path"
        assert len(src.get("commit") or "") == 40, "cite the commit"
    else:
        assert src.get("url"), "a constructed case cites the documentation it follows"
    assert meta.get("how_read"), "say how the truth was read from the capture"
    unknown = set(meta.get("pending", {})) - set(ASPECTS)
    assert not unknown, f"pending names unknown aspects {unknown}"
    assert (case / "root").is_dir()


# -- what the reader finds --------------------------------------------------------------------


@pytest.mark.parametrize("case", params("devices"))
def test_devices(case: Path) -> None:
    """Count, order, bus ids, device ids, names, UUIDs and memory, vendor by vendor."""
    meta = _meta(case)
    truth = meta["truth"]
    host = _host(case)
    found = {d.vendor for d in host.devices if not _listed_only(d)}
    assert found == set(truth["devices"]), f"vendors found {found}"
    for vendor, want in truth["devices"].items():
        got = _claimed(host, vendor)
        assert len(got) == len(want), f"{vendor}: {len(got)} device(s), expected {len(want)}"
        pairs = list(zip(got, want, strict=True))
        if not meta.get("ordered"):
            key = lambda x: x or ""  # noqa: E731
            got_s = sorted(got, key=lambda d: key(d.pci_bus_id))
            want_s = sorted(want, key=lambda w: key(w.get("pci_bus_id")))
            pairs = list(zip(got_s, want_s, strict=True))
        for d, w in pairs:
            for field in ("pci_bus_id", "pci_device_id", "name", "uuid", "memory_bytes"):
                if field in w:
                    assert getattr(d, field) == w[field], f"{vendor} {field}: {d.to_dict()}"
    for vendor, buses in truth.get("physical_pci_bus_ids", {}).items():
        got_buses: list[str | None] = []
        for d in _claimed(host, vendor):
            if _physical(d) not in got_buses:
                got_buses.append(_physical(d))
        assert got_buses == buses
        per = truth["partitions"][vendor]
        got_per = {b: sum(_physical(d) == b for d in _claimed(host, vendor)) for b in buses}
        assert got_per == per, "partitions per physical GPU"
        parts = [d.extra.get("partition") for d in _claimed(host, vendor)]
        assert all(isinstance(p, int) for p in parts), "each partition says which one it is"
    assert not host.reader_errors, host.reader_errors


@pytest.mark.parametrize("case", params("arch"))
def test_arch(case: Path) -> None:
    """The architecture each backend reports for its devices (``arch_of``)."""
    truth = _meta(case)["truth"]
    host = _host(case)
    for vendor, want in truth["devices"].items():
        backend = _backends()[vendor]
        got = [backend.arch_of(d) for d in _claimed(host, vendor)]
        expected = [w.get("arch") for w in want]
        if not _meta(case).get("ordered"):
            got, expected = sorted(map(str, got)), sorted(map(str, expected))
        assert got == expected


@pytest.mark.parametrize("case", params("unclaimed"))
def test_unclaimed_accelerators(case: Path) -> None:
    """Accelerator-class functions no plugin serves, and nothing else, are reported as such."""
    truth = _meta(case)["truth"]
    host = _host(case)
    unclaimed = [d for d in host.devices if d.extra.get("unclaimed")]
    got = sorted((d.pci_bus_id, d.extra.get("pci_vendor_id")) for d in unclaimed)
    want = sorted((u["pci_bus_id"], u["pci_vendor_id"]) for u in truth["unclaimed"])
    assert got == want


@pytest.mark.parametrize("case", params("non_compute"))
def test_non_compute_functions_are_named_as_such(case: Path) -> None:
    """A crypto or compression engine is listed as what it is, never as an accelerator."""
    host = _host(case)
    got = sorted(
        d.pci_bus_id for d in host.devices if d.extra.get("known_function") == "not-compute"
    )
    assert got == sorted(_meta(case)["truth"]["non_compute"])


@pytest.mark.parametrize("case", params("no_plugin"))
def test_accelerators_without_a_plugin_are_named_as_such(case: Path) -> None:
    """An accelerator of a known kind that no plugin serves (a Xeon Phi, an NEC Vector Engine)
    is listed, with its vendor id, as one that has no plugin."""
    host = _host(case)
    got = sorted(
        (d.pci_bus_id or "", str(d.extra.get("pci_vendor_id")))
        for d in host.devices
        if d.extra.get("known_function") == "no-plugin"
    )
    want = sorted((u["pci_bus_id"], u["pci_vendor_id"]) for u in _meta(case)["truth"]["no_plugin"])
    assert got == want


@pytest.mark.parametrize("case", params("driver"))
def test_bound_driver_is_seen(case: Path) -> None:
    """Where the capture shows the driver bound, no backend claims it is not loaded, and a PCI
    function read from its folder names the driver its ``driver`` link or uevent gives."""
    truth = _meta(case)["truth"]
    host = _host(case)
    for name, driver in truth["drivers_bound"].items():
        backend = _by_name()[name]
        probe = backend.probe(host)
        assert "not loaded" not in probe.reason, probe.reason
        for d in _claimed(host, backend.vendor):
            ev = d.extra.get("evidence", [])
            if "pci" in ev or "drm" in ev:
                assert d.extra.get("driver") == driver, d.to_dict()


@pytest.mark.parametrize("case", params("pci_driver"))
def test_pci_function_names_its_bound_driver(case: Path) -> None:
    """Each listed function (claimed, unclaimed or known) names the driver the capture shows
    bound to it (``vfio-pci`` for a GPU handed to a VM), and is listed at all."""
    host = _host(case)
    by_bus = {d.pci_bus_id: d for d in host.devices if d.pci_bus_id}
    for bus, driver in _meta(case)["truth"]["pci_drivers"].items():
        assert bus in by_bus, f"{bus} is not listed: {sorted(by_bus)}"
        assert by_bus[bus].extra.get("driver") == driver, by_bus[bus].to_dict()


@pytest.mark.parametrize("case", params("cpu_arch"))
def test_cpu_architecture_is_the_captured_machines(case: Path) -> None:
    """``Host.machine`` under ``root`` is the captured machine's CPU architecture (as
    ``platform.machine()`` spells it), not the architecture of the machine running the test."""
    assert _host(case).machine == _meta(case)["truth"]["cpu_arch"]


@pytest.mark.parametrize("case", params("hint"))
def test_install_hint(case: Path) -> None:
    """The hint a user would get works on this device."""
    hint = _meta(case)["truth"]["hint"]
    probe = _by_name()[hint["backend"]].probe(_host(case))
    assert hint["contains"] in f"{probe.reason} {probe.hint or ''}"


@pytest.mark.parametrize("case", params("evidence"))
def test_evidence_is_named(case: Path) -> None:
    """Every device says which source of evidence found it."""
    meta = _meta(case)
    host = _host(case)
    for vendor, source in meta["evidence"].items():
        devs = _claimed(host, vendor)
        assert devs
        for d in devs:
            assert source in d.extra.get("evidence", []), d.to_dict()


@pytest.mark.parametrize("case", params("cli"))
def test_env_root_reports_the_same(case: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``hwbackends env --root`` (JSON and text) finds the devices and names the evidence."""
    meta = _meta(case)
    truth = meta["truth"]
    root = str(case / "root")
    assert main(["env", "--root", root, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    accels = data["host"]["accelerators"]
    counts: dict[str, int] = {}
    for a in accels:
        if not a.get("unclaimed") and not a.get("known_function"):
            counts[a["vendor"]] = counts.get(a["vendor"], 0) + 1
    assert counts == {v: len(ds) for v, ds in truth["devices"].items()}
    assert sorted(a["pci_bus_id"] for a in accels if a.get("unclaimed")) == sorted(
        u["pci_bus_id"] for u in truth["unclaimed"]
    )
    for a in accels:
        if a["vendor"] in meta.get("evidence", {}):
            assert meta["evidence"][a["vendor"]] in a["evidence"]
    for vendor, source in meta.get("evidence", {}).items():
        assert source in data["evidence_sources"][_backends()[vendor].name]
    assert main(["env", "--root", root]) == 0
    flat = " ".join(capsys.readouterr().out.split())  # a long device line wraps
    found_by = re.findall(r"found by ([^)]*)\)", flat)
    for source in set(meta.get("evidence", {}).values()):
        assert any(source in x for x in found_by), f"the report names {source!r}"
