"""One verdict per device, rendered everywhere: the Install line, every fix and the Hardware
line never name a backend, plugin or wheel index that a device's verdict says cannot serve it,
and the Python API and the CLI give one diagnosis for the same tree or host file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from coretest import needs_plugins, run_main

from hwbackends import Host, explain

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ROOT / "plugins"
CASES = ROOT / "tests" / "real_machines" / "cases"
HOST_FILES = sorted(
    str(p)
    for p in (
        *ROOT.glob("tests/hosts/*.json"),
        *ROOT.glob("docs/hosts/*.json"),
        *PLUGINS.glob("hwbackends-*/tests/hosts/*.json"),
    )
    if p.stem != "typo-field"  # a host file refused on purpose (docs' error example)
)
# the trees `env --root` reads: one holding none of sys/, proc/ and dev/ (a Jetson known by its
# /etc/nv_tegra_release alone) is refused as a usage error, by design
TREES = sorted(
    str(p) for p in CASES.glob("*/root") if any((p / d).is_dir() for d in ("sys", "proc", "dev"))
)
M2070 = str(ROOT / "tests/hosts/tesla-m2070-x3-sm20-cpu-torch.json")
HD6670_TREE = str(CASES / "amd-radeon-hd6670-pre-gcn-vm/root")
P100_TREE = str(CASES / "nvidia-p100-vm-driver-link-only/root")

pytestmark = needs_plugins


def _machine(where: str) -> tuple[str, ...]:
    return ("--root", where) if where in TREES else ("--host", where)


def _env(capsys: pytest.CaptureFixture[str], where: str) -> tuple[dict[str, Any], str]:
    """``env --json`` and ``env``'s text of a machine."""
    _, out, _ = run_main(capsys, "env", "--json", *_machine(where))
    _, text, _ = run_main(capsys, "env", *_machine(where))
    return json.loads(out), text


def _indexes(text: str) -> set[str]:
    """The torch wheel indexes a fix installs from (``--index-url``)."""
    return {u.rstrip("):;,.") for u in re.findall(r"--index-url[ =]'?([^\s']+)", text)}


def _fixes(d: dict[str, Any]) -> dict[str, str]:
    """Backend name -> the fix its warning gives (the words after "Fix: ")."""
    out = {}
    for w in d["warnings"]:
        name, sep, rest = w.partition(": ")
        if sep and " Fix: " in rest:
            out[name] = rest.partition(" Fix: ")[2]
    return out


@pytest.mark.parametrize(
    "where", HOST_FILES + TREES, ids=[Path(p).stem if p.endswith(".json") else Path(p).parent.name
                                      for p in HOST_FILES + TREES]
)  # fmt: skip
def test_no_surface_names_what_a_verdict_says_cannot_serve(
    where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    d, text = _env(capsys, where)
    verdicts = d["verdicts"]
    assert len(verdicts) == len(d["host"]["accelerators"])  # one per device
    install = d["install"]
    by_backend: dict[str, list[dict[str, Any]]] = {}
    for v in verdicts:
        if v["backend"]:
            by_backend.setdefault(v["backend"], []).append(v)
    fixes = _fixes(d)
    for name, vs in by_backend.items():
        origin = next(c["origin"] for c in d["candidates"] if c["name"] == name)
        if not any(v["state"] in ("served", "install") for v in vs):
            # no device of this backend can be served: nothing installs it or its build
            assert install["backend"] != name, (name, install)
            assert not any(origin in w for w in install["argv"]), (name, install["argv"])
            assert name not in fixes, (name, fixes[name])
            assert all(c["fix"] is None for c in d["candidates"] if c["name"] == name)
            assert f"{name}: fix:" not in text, text
            continue
        named = {v["torch_index"] for v in vs if v["state"] == "install" and v["torch_index"]}
        if named:
            # the index the devices' verdicts name, and only it, in the Install line and fix
            if install["backend"] == name:
                assert install["torch_index"] in named, (install, named)
            assert _indexes(fixes.get(name, "")) <= named, (fixes[name], named)
            fix = next(c["fix"] for c in d["candidates"] if c["name"] == name)
            assert _indexes(fix or "") <= named, (fix, named)
    if install["backend"] != "cpu":
        mine = by_backend.get(install["backend"], [])
        assert any(v["state"] in ("served", "install") for v in mine), (install, verdicts)
    else:
        assert not any(v["state"] == "install" for v in verdicts), verdicts


def _diagnosis(d: dict[str, Any]) -> dict[str, Any]:
    """What a report says about the machine, less the timings and where it was read from."""
    return {
        "chosen": d["chosen"],
        "rule": d["rule"],
        "candidates": [
            (c["name"], c["state"], c["reason"], (c["probe"] or {}).get("hint"))
            for c in d["candidates"]
        ],
        "verdicts": d["verdicts"],
        "warnings": d["warnings"],
        "devices": d["devices"],
    }


@pytest.mark.parametrize(
    "where", [*TREES, M2070], ids=[*(Path(p).parent.name for p in TREES), "m2070"]
)
def test_the_api_and_the_cli_give_one_diagnosis(
    where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, Host.from_system(root=R) read as this machine ("/dev/kfd is missing" on the
    # KFD-only captures) while `--root R` read it as a tree that describes no drivers.
    host = Host.from_system(root=where) if where in TREES else Host.from_file(where)
    api = explain(host=host).to_dict()
    _, out, _ = run_main(capsys, "explain", "--json", *_machine(where))
    assert _diagnosis(api) == _diagnosis(json.loads(out))
    assert api["host"]["source"] == json.loads(out)["host"]["source"]


def test_a_terascale_radeon_gets_the_cpu_install_line(capsys: pytest.CaptureFixture[str]) -> None:
    # Before: the rocm line said "no ROCm support for this GPU" and the Install line installed
    # hwbackends-rocm from the rocm6.4 index.
    host_file = PLUGINS / "hwbackends-rocm/tests/hosts/radeon-hd6670-terascale.json"
    for where in (HD6670_TREE, str(host_file)):
        d, text = _env(capsys, where)
        (v,) = [v for v in d["verdicts"] if v["vendor"] == "amd"]
        assert (v["backend"], v["state"], v["build"]) == (
            "rocm",
            "unusable",
            "no PyTorch wheel supports it",
        )
        assert d["install"]["backend"] == "cpu", d["install"]
        assert "rocm" not in d["install"]["command"], d["install"]["command"]
        assert "rocm: no PyTorch wheel supports it" in " ".join(text.split())


def test_three_fermi_teslas_get_no_cuda_wheel(capsys: pytest.CaptureFixture[str]) -> None:
    # Before: "3 NVIDIA GPU(s) found", the fix and the Install line a cu128 wheel, though no
    # PyTorch CUDA wheel has sm_20 kernels, and the Hardware line "not used by the cuda backend".
    d, text = _env(capsys, M2070)
    assert {(v["backend"], v["state"]) for v in d["verdicts"]} == {("cuda", "unusable")}
    assert all("no PyTorch CUDA wheel" in v["reason"] for v in d["verdicts"])
    assert d["install"]["backend"] == "cpu" and "cu1" not in d["install"]["command"]
    assert "cuda" not in _fixes(d)
    assert any(
        w.startswith("cuda: ") and " No fix: no PyTorch CUDA wheel" in w for w in d["warnings"]
    )
    flat = " ".join(text.split())
    assert "cuda: no fix: no PyTorch CUDA wheel" in flat and "whl/cu" not in flat
    # the device id names it since the cuda plugin knows Fermi ids
    assert "3 × NVIDIA Tesla M2070 (nvidia, sm_20): cuda: no PyTorch wheel supports it" in flat


def test_a_gpu_known_by_its_pci_id_alone_is_its_backends(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The cuda backend claims these three functions (its probe counts them) even when it
    # cannot name them: the Hardware line said "not used by the cuda backend".
    data = json.loads(Path(M2070).read_text(encoding="utf-8"))
    for dev in data["devices"]:
        del dev["arch"]
    f = tmp_path / "m2070-pci-only.json"
    f.write_text(json.dumps(data), encoding="utf-8")
    d, text = _env(capsys, str(f))
    assert {v["backend"] for v in d["verdicts"]} == {"cuda"}
    assert "not used by" not in text


@pytest.mark.parametrize(
    ("where", "index"),
    [
        (P100_TREE, "https://download.pytorch.org/whl/cu126"),
        (str(PLUGINS / "hwbackends-cuda/tests/hosts/p100-pci-only-no-torch.json"), "https://download.pytorch.org/whl/cu126"),
        (str(PLUGINS / "hwbackends-cuda/tests/hosts/v100-torch211-cu128.json"), "https://download.pytorch.org/whl/cu126"),
    ],
    ids=["p100-tree", "p100-host", "v100-torch-2.11"],
)  # fmt: skip
def test_pascal_and_volta_install_from_the_index_their_fix_names(
    where: str, index: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the cuda fix said cu126 ("cu128 wheels have no kernels for ...") and the
    # Install line cu128.
    d, _ = _env(capsys, where)
    assert d["install"]["backend"] == "cuda"
    assert d["install"]["torch_index"] == index
    assert _indexes(_fixes(d)["cuda"]) == {index}
    assert {v["torch_index"] for v in d["verdicts"] if v["backend"] == "cuda"} == {index}


def test_a_torch_release_pin_reaches_the_install_line(capsys: pytest.CaptureFixture[str]) -> None:
    # torch 2.11's cu128 wheels dropped Volta: the fix stays on 2.11 (its cu126 wheels), and so
    # does the Install line, quoted as one word
    d, text = _env(capsys, str(PLUGINS / "hwbackends-cuda/tests/hosts/v100-torch211-cu128.json"))
    assert "torch==2.11.*" in d["install"]["argv"]
    assert "'torch==2.11.*'" in text


@pytest.mark.parametrize(
    "where",
    [
        str(PLUGINS / "hwbackends-cuda/tests/hosts/nvidia-cpu-torch.json"),
        str(PLUGINS / "hwbackends-cuda/tests/hosts/m60-pci-only-cpu-torch.json"),
    ],
    ids=["nvidia-cpu-torch", "m60-cpu-torch"],
)
def test_an_nvidia_machine_with_a_cpu_torch_gets_the_cuda_install_line(
    where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The CPU line would reinstall the wrong torch: the line is for the hardware present but
    # not ready (a planted `_install_target` that returns the CPU survived the whole suite).
    d, _ = _env(capsys, where)
    install = d["install"]
    assert install["backend"] == "cuda" and install["needed"], install
    assert any(w.endswith("hwbackends-cuda") for w in install["argv"]), install["argv"]
    assert re.fullmatch(r"https://download\.pytorch\.org/whl/cu\d+", install["torch_index"] or "")


def test_a_broken_device_support_hook_falls_back_to_the_probe() -> None:
    from hwbackends._selection.verdict import build_verdicts

    class Hostile:
        def host_devices(self, host: Host) -> tuple[Any, ...]:
            return host.devices

        def device_support(self, host: Host) -> object:
            return ["not a DeviceSupport"]

    host = Host.from_file(M2070)
    report = explain(host=host)
    verdicts, problems = build_verdicts(
        host, report.candidates, lambda name: Hostile() if name == "cuda" else None, "cpu", None
    )
    assert {v.state for v in verdicts} == {"install"}  # the probe's answer, its fix
    assert problems and "cuda.device_support() failed" in problems[0]


# -- the decisions one by one, on statuses and backends made here ------------------------------


def _status(name: str, state: str, vendor: str | None, *, present: bool = True,
            hint: str | None = None, ready: bool = False, probed: bool = True) -> Any:  # fmt: skip
    from hwbackends import Probe
    from hwbackends._selection.report import BackendStatus

    probe = Probe(name, present, ready, f"{name}'s runtime is missing", hint) if probed else None
    return BackendStatus(name, "test", "1", name, state, probe=probe, vendor=vendor,
                         error=None if probed else f"{name} was not probed")  # fmt: skip


class _Owns:
    """A loaded backend whose ``host_devices`` are the given PCI addresses."""

    def __init__(self, *buses: str) -> None:
        self.buses = buses

    def host_devices(self, host: Host) -> tuple[Any, ...]:
        return tuple(d for d in host.devices if d.pci_bus_id in self.buses)


def _two_gpus() -> Host:
    from hwbackends import HostDevice

    return Host(devices=(
        HostDevice("nvidia", "0000:01:00.0", name="GPU A"),
        HostDevice("nvidia", "0000:02:00.0", name="GPU B"),
    ))  # fmt: skip


def _verdicts(host: Host, statuses: list[Any], loaded: dict[str, Any], chosen: str) -> list[Any]:
    from hwbackends._selection.verdict import build_verdicts

    verdicts, problems = build_verdicts(host, statuses, loaded.get, chosen, None)
    assert problems == []
    return list(verdicts)


def test_the_chosen_backend_claims_a_shared_device_first_and_keeps_it() -> None:
    # two backends of one vendor (a vendor's own build beside the stock one): "acme" sorts
    # first by name, but the chosen "cuda" claims both; a device claimed stays claimed
    host = _two_gpus()
    statuses = [_status("acme", "unavailable", "nvidia"), _status("cuda", "unavailable", "nvidia")]
    both = ("0000:01:00.0", "0000:02:00.0")
    loaded = {"acme": _Owns(*both), "cuda": _Owns(*both)}
    assert [v.backend for v in _verdicts(host, statuses, loaded, "cuda")] == ["cuda", "cuda"]
    # the chosen one owns only the first: the other backend gets the second, not both
    loaded["cuda"] = _Owns("0000:01:00.0")
    assert [v.backend for v in _verdicts(host, statuses, loaded, "cuda")] == ["cuda", "acme"]


def test_a_device_its_vendors_backend_does_not_own_is_left_to_no_backend() -> None:
    host = _two_gpus()
    got = _verdicts(host, [_status("cuda", "unavailable", "nvidia")],
                    {"cuda": _Owns("0000:01:00.0")}, "cpu")  # fmt: skip
    assert [(v.backend, v.state) for v in got] == [("cuda", "install"), (None, "no-backend")]
    assert got[1].reason.startswith("not used by the cuda backend (not one of its devices")


def test_only_a_loaded_backend_in_a_good_state_claims_devices() -> None:
    host = _two_gpus()
    # broken and disabled backends never claim; nor does one whose instance is not loaded
    for statuses, loaded in (
        ([_status("cuda", "broken", "nvidia")], {"cuda": _Owns("0000:01:00.0")}),
        ([_status("cuda", "disabled", "nvidia")], {"cuda": _Owns("0000:01:00.0")}),
        ([_status("cuda", "unavailable", "nvidia")], {}),
    ):
        got = _verdicts(host, statuses, loaded, "cpu")
        assert [v.backend for v in got] == [None, None], statuses
    # and a good state claims only its own vendor's devices, whatever state the others are in
    others = [_status("rocm", "unavailable", "amd"), _status("cpu", "selected", None)]
    got = _verdicts(host, others, {}, "cpu")
    assert all(v.backend is None and "not used by" not in v.reason for v in got), got


def test_an_unclaimed_known_vendors_device_gets_the_catalogs_fix() -> None:
    got = _verdicts(_two_gpus(), [_status("cpu", "selected", None)], {}, "cpu")
    assert all(v.state == "no-backend" for v in got)
    assert all(v.fix and "hwbackends-cuda" in v.fix for v in got), got


def test_a_function_that_is_no_accelerator_says_so() -> None:
    host = Host.from_file(str(ROOT / "tests/hosts/qat-server.json"))
    got = [v for v in explain(host=host).verdicts if v.label.startswith("Intel QuickAssist")]
    assert got and {v.reason for v in got} == {"not an accelerator: no backend computes on it"}
    assert {(v.backend, v.state, v.fix) for v in got} == {(None, "no-backend", None)}


def test_a_device_its_backend_does_not_name_keeps_the_hosts_name() -> None:
    got = _verdicts(_two_gpus(), [_status("cuda", "unavailable", "nvidia")],
                    {"cuda": _Owns("0000:01:00.0", "0000:02:00.0")}, "cpu")  # fmt: skip
    assert [v.label for v in got] == ["GPU A", "GPU B"]


def test_a_backend_whose_probe_names_no_fix_shows_none() -> None:
    from hwbackends import Probe
    from hwbackends._selection.verdict import Verdict, backend_fix

    mine = [Verdict(0, "GPU A", None, "nvidia", "cuda", "unusable", "too old", fix="buy one")]
    assert backend_fix("cuda", Probe("cuda", True, False, "no runtime", None), mine) is None
    hinted = Probe("cuda", True, False, "no runtime", "pip install it")
    assert backend_fix("cuda", hinted, mine) == "buy one"  # its devices' own fix
    assert backend_fix("cuda", hinted, []) == "pip install it"


def test_the_install_line_takes_the_index_of_that_backends_own_device() -> None:
    from hwbackends._selection.verdict import Verdict, install_choice

    other = Verdict(0, "MI50", None, "amd", "rocm", "unusable", "no wheel", torch_index="R")
    first = Verdict(1, "GPU A", None, "nvidia", "cuda", "install", "no torch")
    named = Verdict(2, "GPU B", None, "nvidia", "cuda", "install", "no torch", torch_index="C")
    assert install_choice([other, first, named], "cpu") == ("cuda", named)
    assert install_choice([other, first], "cpu") == ("cuda", first)


class _Facts(_Owns):
    """A backend that also gives per-device facts (``device_support``)."""

    def __init__(self, facts: tuple[Any, ...], *buses: str, own: bool = True) -> None:
        super().__init__(*buses)
        self.facts = facts
        if not own:
            self.host_devices = None  # type: ignore[assignment]

    def device_support(self, host: Host) -> tuple[Any, ...]:
        return self.facts


def _fact(bus: str | None, **kw: Any) -> Any:
    from hwbackends.plugin import DeviceSupport

    return DeviceSupport(bus, kw.pop("label", "Chip"), kw.pop("supported", True),
                         kw.pop("reason", "its kernels are in the wheel"), **kw)  # fmt: skip


_BOTH = ("0000:01:00.0", "0000:02:00.0")


def test_a_claimed_device_follows_its_backends_probe() -> None:
    from hwbackends import TorchBuild
    from hwbackends._base.record import replace

    host = replace(_two_gpus(), torch=TorchBuild("2.13.0+cu128", cuda="12.8"))
    loaded = {"cuda": _Owns(*_BOTH)}

    def one(**kw: Any) -> Any:
        return _verdicts(host, [_status("cuda", "unavailable", "nvidia", **kw)], loaded, "cpu")[0]

    served = one(ready=True)
    assert (served.state, served.build) == ("served", "the installed torch 2.13.0+cu128")
    unprobed = one(probed=False)
    assert (unprobed.state, unprobed.reason) == ("unusable", "cuda was not probed")
    absent = one(present=False)
    assert (absent.state, absent.fix) == ("unusable", None)
    hinted = one(hint="pip install torch --index-url https://download.pytorch.org/whl/cu126")
    assert (hinted.state, hinted.torch_index) == (
        "install",
        "https://download.pytorch.org/whl/cu126",
    )
    assert hinted.build == "torch from https://download.pytorch.org/whl/cu126"


def test_a_backends_device_facts_shape_the_build() -> None:
    host = _two_gpus()
    hint = "pip install torch --index-url https://example.org/whl"

    def one(fact: Any, probe_hint: str | None = hint) -> Any:
        statuses = [_status("cuda", "unavailable", "nvidia", hint=probe_hint)]
        return _verdicts(host, statuses, {"cuda": _Facts((fact,), *_BOTH)}, "cpu")[0]

    pinned = one(_fact(_BOTH[0], torch_index="https://example.org/cu126", torch_pin="2.9"))
    assert (pinned.torch_pin, pinned.build) == ("2.9", "torch 2.9 from https://example.org/cu126")
    unknown = one(_fact(_BOTH[0], supported=None, reason="a new chip", torch_index="I"))
    assert unknown.build == "torch from I (unknown whether it has kernels for it: a new chip)"
    # present, not ready, no fix named: its own build, whatever index its facts name
    own = one(_fact(_BOTH[0], torch_index="I"), probe_hint=None)
    assert (own.state, own.build, own.torch_index) == ("install", "the cuda backend's torch build",
                                                       None)  # fmt: skip


def test_devices_without_a_pci_address_are_matched_by_equality_and_position() -> None:
    from hwbackends import HostDevice

    a, b = HostDevice("google", None, name="TPU 0"), HostDevice("google", None, name="TPU 1")
    host = Host(devices=(a, b))

    class OnlyFirst:
        def host_devices(self, host: Host) -> tuple[Any, ...]:
            return (a,)

    statuses = [_status("tpu", "unavailable", "google")]
    got = _verdicts(host, statuses, {"tpu": OnlyFirst()}, "cpu")
    assert [v.backend for v in got] == ["tpu", None]
    # no host_devices hook: every device of its vendor is its own
    assert [v.backend for v in _verdicts(host, statuses, {"tpu": object()}, "cpu")] == ["tpu"] * 2
    # facts without addresses, one per own device: each device gets its own, in order
    facts = (_fact(None, label="v5e chip 0"), _fact(None, label="v5e chip 1"))

    class Both(_Facts):
        def host_devices(self, host: Host) -> tuple[Any, ...]:
            return (a, b)

    got = _verdicts(host, statuses, {"tpu": Both(facts)}, "cpu")
    assert [v.label for v in got] == ["v5e chip 0", "v5e chip 1"]


def test_the_chosen_backends_own_names_label_its_devices() -> None:
    from hwbackends._selection.verdict import build_verdicts

    statuses = [_status("cuda", "unavailable", "nvidia")]
    verdicts, _ = build_verdicts(_two_gpus(), statuses, {"cuda": _Owns(*_BOTH)}.get, "cpu", None,
                                 names={_BOTH[1]: "NVIDIA H100 80GB HBM3"})  # fmt: skip
    assert [v.label for v in verdicts] == ["GPU A", "NVIDIA H100 80GB HBM3"]


def test_a_backend_that_found_hardware_claims_before_one_that_did_not() -> None:
    asked: list[str] = []
    loaded = {"acme": _Owns(*_BOTH), "zeta": _Owns(*_BOTH), "rocm": _Owns()}

    def load(name: str) -> Any:
        asked.append(name)
        return loaded.get(name)

    from hwbackends._selection.verdict import build_verdicts

    statuses = [_status("acme", "unavailable", "nvidia", present=False),
                _status("zeta", "unavailable", "nvidia"), _status("rocm", "unavailable", "amd"),
                _status("omega", "unavailable", "nvidia", present=False)]  # fmt: skip
    verdicts, _ = build_verdicts(_two_gpus(), statuses, load, "cpu", None)
    assert [v.backend for v in verdicts] == ["zeta", "zeta"]
    # a backend with none of its vendor's devices here, or whose devices are all claimed
    # already, is not even asked for
    assert asked == ["zeta"]


def test_hardware_no_plugin_exists_for_says_so() -> None:
    from hwbackends import HostDevice

    host = Host(devices=(HostDevice("pci_1e3e", "0000:05:00.0", name="Iluvatar",
                                    extra={"known_function": "no-plugin"}),))  # fmt: skip
    (v,) = _verdicts(host, [_status("cpu", "selected", None)], {}, "cpu")
    assert (v.state, v.reason) == (
        "no-backend",
        "no hwbackends plugin exists for this hardware, so no backend can use it",
    )


def test_the_notes_and_fixes_the_surfaces_render() -> None:
    from hwbackends._selection.verdict import (
        Verdict,
        install_choice,
        unusable_note,
        verdict_groups,
        with_fixes,
    )

    old = Verdict(0, "K80", None, "nvidia", "cuda", "unusable", "no wheel has sm_37")
    old2 = Verdict(1, "K80", None, "nvidia", "cuda", "unusable", "no wheel has sm_37")
    new = Verdict(2, "A100", None, "nvidia", "cuda", "served", "ready")
    amd = Verdict(3, "MI300X", None, "amd", "rocm", "install", "no ROCm torch")
    assert unusable_note("cuda", [old, old2]) == "no wheel has sm_37"
    assert unusable_note("cuda", [old, new]) is None
    assert unusable_note("rocm", [old]) is None
    assert verdict_groups([old, old2, new]) == [(old, 2), (new, 1)]
    # the chosen backend's served device first, before another backend's install
    assert install_choice([amd, new], "cuda") == ("cuda", new)
    assert install_choice([amd, new], "cpu") == ("rocm", amd)
    hinted = _status("rocm", "unavailable", "amd", hint="pip install hwbackends-rocm")
    unprobed = _status("npu", "broken", "huawei", probed=False)
    fixed = with_fixes({"rocm": hinted, "npu": unprobed}, [amd])
    assert (fixed["rocm"].fix, fixed["npu"]) == ("pip install hwbackends-rocm", unprobed)


def test_a_backends_enriched_copy_of_a_device_is_still_that_device() -> None:
    from hwbackends._base.record import replace

    class Enriched:
        def host_devices(self, host: Host) -> tuple[Any, ...]:
            return tuple(replace(d, arch="sm_90") for d in host.devices[:1])  # same address

    got = _verdicts(_two_gpus(), [_status("cuda", "unavailable", "nvidia")],
                    {"cuda": Enriched()}, "cpu")  # fmt: skip
    assert [v.backend for v in got] == ["cuda", None]


def test_device_facts_that_are_not_a_tuple_are_a_plugin_fault_named_as_such() -> None:
    from hwbackends._selection.verdict import build_verdicts

    statuses = [_status("cuda", "unavailable", "nvidia")]
    backend = _Facts(_fact(_BOTH[0]), *_BOTH)  # one record, not a tuple of them
    verdicts, problems = build_verdicts(_two_gpus(), statuses, {"cuda": backend}.get, "cpu", None)
    assert [v.state for v in verdicts] == ["install", "install"]  # from the probe alone
    assert len(problems) == 1
    assert "returned DeviceSupport, expected a tuple of DeviceSupport" in problems[0], problems
