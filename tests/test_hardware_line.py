"""``env``'s Hardware line and ``--verbose``'s device table: each device named as its backend
names it, whatever this process sees, in the words the device rows use."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from coretest import needs_plugins, run_main

from hwbackends import Host, explain

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ROOT / "plugins"
ACCEL_HOSTS = sorted(str(p) for p in PLUGINS.glob("hwbackends-*/tests/hosts/*.json"))

pytestmark = needs_plugins


def hardware_lines(out: str) -> str:
    lines = out.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("Hardware"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith(" " * 10))
    return " ".join(" ".join(lines[start:end]).split())


def verbose_names(out: str) -> list[str]:
    """The name column of ``env --verbose``'s table of devices (the text between the vendor
    and the architecture), one per device row."""
    lines = out.splitlines()
    if "Devices of accelerator vendors" not in lines:
        return []
    start = lines.index("Devices of accelerator vendors") + 1
    rows = []
    for line in lines[start:]:
        if re.match(r"  \d+  ", line):
            rows.append(re.split(r"\s{2,}", line.strip())[2])
        elif not line.startswith("    "):  # a wrapped row goes on, indented further
            break
    return rows


@pytest.mark.parametrize("host", ACCEL_HOSTS, ids=[Path(h).stem for h in ACCEL_HOSTS])
def test_the_hardware_summary_names_what_the_device_rows_name(
    host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run_main(capsys, "env", "--json", "--host", host)
    d = json.loads(out)
    if d["chosen"] == "cpu" or not d["host"]["accelerators"]:
        return
    _, text, _ = run_main(capsys, "env", "--host", host)
    summary = hardware_lines(text)
    for dev in d["devices"]:
        if dev["name"] and dev["pci_bus_id"]:
            assert dev["name"] in summary, (dev["name"], summary)


@pytest.mark.parametrize("host", ACCEL_HOSTS, ids=[Path(h).stem for h in ACCEL_HOSTS])
def test_the_hardware_lines_describe_the_machine_whatever_this_process_sees(
    host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The Hardware summary and --verbose's device table are the machine's: selecting one
    # device with the chosen backend's own variables (`pin 0`) changes neither. Before, each
    # hidden device lost its backend's name and architecture ("7 × PCI device 0x0063 (google,
    # not used by the tpu backend)" beside "1 × Google TPU v5e"; "4 × ... H100 (nvidia, 80
    # GiB)" beside "4 × ... H100 (nvidia, sm_90, 80 GiB)").
    code, out, _ = run_main(capsys, "pin", "0", "--host", host, "--json")
    if code:
        pytest.skip("no backend with pinnable devices here")
    pinned = [f"--env={k}={v}" for k, v in json.loads(out)["set"].items()]
    _, whole, _ = run_main(capsys, "env", "--host", host)
    _, one, _ = run_main(capsys, "env", "--host", host, *pinned)
    assert hardware_lines(one) == hardware_lines(whole)
    _, whole, _ = run_main(capsys, "env", "--verbose", "--host", host)
    _, one, _ = run_main(capsys, "env", "--verbose", "--host", host, *pinned)
    assert verbose_names(one) == verbose_names(whole)


def test_a_hidden_backends_devices_keep_their_names(capsys: pytest.CaptureFixture[str]) -> None:
    mi300 = str(PLUGINS / "hwbackends-rocm/tests/hosts/mi300x-8.json")
    _, out, _ = run_main(capsys, "env", "--host", mi300, "--env", "HIP_VISIBLE_DEVICES=-1")
    assert "8 × AMD Instinct MI300X" in hardware_lines(out), hardware_lines(out)
    _, out, _ = run_main(
        capsys, "env", "--verbose", "--host", mi300, "--env", "HIP_VISIBLE_DEVICES=-1"
    )
    assert set(verbose_names(out)) == {"AMD Instinct MI300X/MI300A/MI325X"}


def test_named_summaries_of_the_reported_hosts(capsys: pytest.CaptureFixture[str]) -> None:
    cases = {
        "hwbackends-rocm/tests/hosts/mi300x-8.json": "8 × AMD Instinct MI300X",
        "hwbackends-tpu/tests/hosts/v5litepod8_xla.json": "8 × Google TPU v5e (google, v5e)",
        "hwbackends-hpu/tests/hosts/hls_gaudi2_8.json": "8 × Intel Gaudi 2",
        "hwbackends-npu/tests/hosts/atlas800t_a2_910b_x8.json": "8 × Huawei Ascend 910B",
        # a backend that is not ready (torch of another build, no package, an unsupported
        # iGPU) still names its vendor's devices: the line says what the hardware is, the
        # backends' rows say why it is unused
        "hwbackends-rocm/tests/hosts/amd-cuda-torch.json": "1 × AMD Radeon RX 7900 XTX",
        "hwbackends-tpu/tests/hosts/v5e_no_package.json": "4 × Google TPU v5e (google, v5e)",
        "hwbackends-npu/tests/hosts/910b_no_package.json": "8 × Huawei Ascend 910B",
        "hwbackends-cuda/tests/hosts/hybrid-laptop-cuda-torch.json": "1 × AMD Ryzen 7040/8040",
    }
    for path, want in cases.items():
        _, out, _ = run_main(capsys, "env", "--host", str(PLUGINS / path))
        summary = hardware_lines(out)
        assert want in summary and "unnamed" not in summary, (path, summary)
    tpu = str(PLUGINS / "hwbackends-tpu/tests/hosts/v5litepod8_xla.json")
    _, out, _ = run_main(capsys, "env", "--host", tpu)
    assert "1 × PCI device 0x0042 (google, not used by the tpu backend)" in hardware_lines(out)


def test_gaudis_torch_is_its_hpu_build(capsys: pytest.CaptureFixture[str]) -> None:
    gaudi = str(PLUGINS / "hwbackends-hpu/tests/hosts/hls_gaudi2_8.json")
    _, out, _ = run_main(capsys, "env", "--host", gaudi)
    flat = " ".join(out.split())
    assert "torch 2.6.0+hpu.synapse.v1.21.0 (hpu build)" in flat and "cpu build" not in flat


def test_one_logical_core_in_the_singular(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    f = tmp_path / "one.json"
    f.write_text(json.dumps({"system": "Linux", "cpu": {"model": "Tiny", "count": 1}}))
    _, out, _ = run_main(capsys, "env", "--host", str(f))
    flat = " ".join(out.split())
    assert "(1 core)" in flat and "1 logical core)" in flat
    assert "1 cores" not in flat and "1 logical cores" not in flat


def test_an_unclaimed_device_line_has_no_question_marks() -> None:
    report = explain(
        env={}, host=Host.from_dict({"system": "Linux", "devices": [{"vendor": "acme"}]})
    )
    (line,) = [w for w in report.warnings if "no installed backend claims" in w]
    assert "?" not in line and "(PCI acme)" in line
