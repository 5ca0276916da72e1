#!/usr/bin/env python3
"""Check hwbackends against a real accelerator: what the files say against what the runtime says.

    python scripts/device_check.py                 # this machine; one JSON report on stdout
    python scripts/device_check.py --no-train      # skip the tiny training run
    python scripts/device_check.py --root /copy    # read the files of a copy of a machine

hwbackends reads a machine from files only (sysfs, /proc, /dev) and predicts what the runtime
will see. This script asks the runtime itself and compares, on the machine it runs on:

1. The file-only reading: the backend ``hwbackends env`` selects, and its devices (count, order,
   names, PCI bus ids, UUIDs, memory, architecture).
2. The runtime's own answers, each in a fresh child process: torch (``torch.cuda`` on NVIDIA and
   AMD builds, else ``torch.<device_type>``), and the management library where it is installed
   (NVML through ``pynvml`` on NVIDIA; ``amdsmi`` on AMD). Field by field: a value the files do
   not give is listed as unknown, never as a mismatch; memory agrees within 5 %.
3. Visibility: dozens of values of the backend's variables (``CUDA_VISIBLE_DEVICES`` with
   ``CUDA_DEVICE_ORDER``; ``ROCR_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES`` on AMD), each in a
   fresh child process with a time limit: the devices torch sees, by bus id and in order,
   against hwbackends' prediction for the same environment.
4. ``hwbackends smoke --json`` in a child: a tiny random model built from a config (nothing is
   downloaded), loaded with the recommended ``from_pretrained`` settings, a few tokens
   generated and one training step with the recommended ``TrainingArguments``, on the device.

The parent never imports torch or a vendor library. A machine without an accelerator gets
``"verdict": "no accelerator here"`` and exit status 0; any mismatch or failed step exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# The runtime's view, printed as one JSON line by a child process (argv[1]: the device type).
# It must run on any torch, or none, and never raise.
RUNTIME_CHILD = r"""
import json, sys
device_type = sys.argv[1]
out = {}
try:
    import torch
except Exception as exc:
    print(json.dumps({"error": "torch cannot be imported: %s: %s" % (type(exc).__name__, exc)}))
    sys.exit(0)
version = getattr(torch, "version", None)
out["torch"] = getattr(torch, "__version__", None)
out["build"] = {"cuda": getattr(version, "cuda", None), "hip": getattr(version, "hip", None)}
mod = getattr(torch, device_type, None)
try:
    out["count"] = int(mod.device_count())
except Exception as exc:
    out["count"] = 0
    out["error"] = "torch.%s.device_count() failed: %s: %s" % (device_type, type(exc).__name__, exc)
parse = getattr(mod, "_parse_visible_devices", None)  # torch's own pre-init reading, if any
if parse is not None:
    try:
        out["torch_parser"] = [str(x) for x in parse()]
    except Exception as exc:
        out["torch_parser"] = "raised %s" % type(exc).__name__
devices = []
for i in range(out["count"]):
    d = {}
    try:
        p = mod.get_device_properties(i)
        d["name"] = getattr(p, "name", None)
        keys = ("pci_domain_id", "pci_bus_id", "pci_device_id")
        dom, bus, dev = (getattr(p, k, None) for k in keys)
        if all(isinstance(x, int) for x in (dom, bus, dev)):
            d["pci_bus_id"] = "%04x:%02x:%02x.0" % (dom, bus, dev)
        uuid = getattr(p, "uuid", None)
        if uuid is not None:
            u = str(uuid)
            d["uuid"] = u if u.startswith(("GPU-", "MIG-")) or out["build"]["hip"] else "GPU-" + u
        d["memory_bytes"] = getattr(p, "total_memory", None)
        gcn = getattr(p, "gcnArchName", None)
        if out["build"]["hip"] and gcn:
            d["arch"] = str(gcn).split(":")[0]
        elif isinstance(getattr(p, "major", None), int):
            d["arch"] = "sm_%d%d" % (p.major, p.minor)
    except Exception as exc:
        d["error"] = "%s: %s" % (type(exc).__name__, exc)
    devices.append(d)
out["devices"] = devices
print(json.dumps(out))
"""

# The management library's view of every physical device (NVML ignores CUDA_VISIBLE_DEVICES).
MANAGER_CHILD = r"""
import json, sys
def text(x):
    return x.decode() if isinstance(x, bytes) else str(x)
def bus(x):
    x = text(x).strip().lower()
    dom, _, rest = x.rpartition(":")
    d, _, b = dom.rpartition(":")
    return "%04x:%s:%s" % (int(d or "0", 16), b, rest)
out = {"devices": []}
if sys.argv[1] == "nvml":
    try:
        import pynvml as n
        n.nvmlInit()
    except Exception as exc:
        print(json.dumps({"error": "NVML unavailable: %s: %s" % (type(exc).__name__, exc)}))
        sys.exit(0)
    try:
        for i in range(n.nvmlDeviceGetCount()):
            h = n.nvmlDeviceGetHandleByIndex(i)
            major, minor = n.nvmlDeviceGetCudaComputeCapability(h)
            out["devices"].append({
                "name": text(n.nvmlDeviceGetName(h)), "uuid": text(n.nvmlDeviceGetUUID(h)),
                "pci_bus_id": bus(n.nvmlDeviceGetPciInfo(h).busId),
                "memory_bytes": int(n.nvmlDeviceGetMemoryInfo(h).total),
                "arch": "sm_%d%d" % (major, minor)})
    except Exception as exc:
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
    finally:
        n.nvmlShutdown()
else:
    try:
        import amdsmi as a
        a.amdsmi_init()
    except Exception as exc:
        print(json.dumps({"error": "amdsmi unavailable: %s: %s" % (type(exc).__name__, exc)}))
        sys.exit(0)
    try:
        for h in a.amdsmi_get_processor_handles():
            d = {"pci_bus_id": bus(a.amdsmi_get_gpu_device_bdf(h))}
            for key, call in (
                ("uuid", lambda: a.amdsmi_get_gpu_device_uuid(h)),
                ("name", lambda: a.amdsmi_get_gpu_asic_info(h)["market_name"]),
                ("arch", lambda: a.amdsmi_get_gpu_asic_info(h)["target_graphics_version"]),
                ("memory_bytes", lambda: a.amdsmi_get_gpu_memory_total(h, a.AmdSmiMemoryType.VRAM)),
            ):
                try:
                    d[key] = call()
                except Exception:
                    d[key] = None
            out["devices"].append(d)
    except Exception as exc:
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
    finally:
        a.amdsmi_shut_down()
print(json.dumps(out))
"""

FIELDS = ("name", "pci_bus_id", "uuid", "memory_bytes", "arch")


def log(msg: str) -> None:
    print(f"device_check: {msg}", file=sys.stderr, flush=True)


def child(code: str, arg: str, env: dict[str, str], timeout: float) -> dict[str, Any]:
    """Run a child program in a fresh process; its last JSON line, or what went wrong."""
    try:
        proc = subprocess.run([sys.executable, "-c", code, arg], env=env, capture_output=True,
                              text=True, timeout=max(timeout, 1.0), check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in reversed(proc.stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                got = json.loads(line)
            except ValueError:
                break
            return got if isinstance(got, dict) else {"error": "not a JSON object"}
    return {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-500:]}"}


def device_record(d: Any) -> dict[str, Any]:
    return {"index": d.index, "physical_index": d.physical_index,
            **{f: getattr(d, f) for f in FIELDS}}  # fmt: skip


def same(field: str, files: Any, runtime: Any) -> bool | None:
    """Whether two values agree; None when the files do not give one."""
    if files is None:
        return None
    if runtime is None:
        return False
    if field == "memory_bytes":
        return abs(int(files) - int(runtime)) <= 0.05 * max(int(files), int(runtime))
    return str(files).strip().lower() == str(runtime).strip().lower()


def compare(
    what: str, files: list[dict[str, Any]], runtime: list[dict[str, Any]]
) -> dict[str, Any]:
    """Count, then each device field by field in order."""
    out: dict[str, Any] = {"files_count": len(files), "runtime_count": len(runtime),
                           "mismatches": [], "unknown_from_files": []}  # fmt: skip
    if len(files) != len(runtime):
        out["mismatches"].append(f"{what}: the files show {len(files)} device(s), the runtime "
                                 f"{len(runtime)}")  # fmt: skip
    for i, (f, r) in enumerate(zip(files, runtime, strict=False)):  # the count is compared above
        for field in FIELDS:
            agree = same(field, f.get(field), r.get(field))
            if agree is None and r.get(field) is not None:
                out["unknown_from_files"].append(f"{what} device {i} {field}: {r.get(field)!r}")
            elif agree is False:
                out["mismatches"].append(f"{what} device {i} {field}: files {f.get(field)!r}, "
                                         f"runtime {r.get(field)!r}")  # fmt: skip
    return out


def visibility_cases(backend: str, n: int, uuids: list[str]) -> list[dict[str, str]]:
    """Values of the backend's visibility variables, ordinary and odd, for ``n`` devices."""
    last = str(max(n - 1, 0))
    idx = ["", "0", last, "0,1", "1,0", f"{last},0", str(n), "-1", "0,-1,1", "0,0", "1,1",
           "x", "0,x,1", " 0", "0 ", "+0", "0gpu", "0-1", "00", "0,", ",0", "0,,1",
           f"0,{n + 5}"]  # fmt: skip
    ids = [u for u in uuids if u][:2]
    by_id = [*ids, *(u[:8] for u in ids[:1]), *(f"{u},0" for u in ids[-1:]), "GPU-",
             "GPU-ffffffff", *(u.upper() for u in ids[:1])]  # fmt: skip
    cases: list[dict[str, str]] = [{}]  # {}: every variable unset
    if backend == "cuda":
        for v in idx + by_id:
            cases.append({"CUDA_VISIBLE_DEVICES": v})
            cases.append({"CUDA_VISIBLE_DEVICES": v, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
        for order in ("PCI_BUS_ID", "FASTEST_FIRST", "pci_bus_id", "bogus"):
            cases.append({"CUDA_DEVICE_ORDER": order})
    elif backend == "rocm":
        for var in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
            cases += [{var: v} for v in idx + (by_id if var == "ROCR_VISIBLE_DEVICES" else [])]
        cases += [{"ROCR_VISIBLE_DEVICES": "1,0", "HIP_VISIBLE_DEVICES": "0"},
                  {"ROCR_VISIBLE_DEVICES": last, "HIP_VISIBLE_DEVICES": "1"},
                  {"HIP_VISIBLE_DEVICES": "1,0", "CUDA_VISIBLE_DEVICES": "0"}]  # fmt: skip
    unique: list[dict[str, str]] = []
    for c in cases:
        if c not in unique:
            unique.append(c)
    return unique


def check(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.monotonic()
    deadline = t0 + args.budget
    import hwbackends
    from hwbackends.visibility import variables_for

    report: dict[str, Any] = {"check": "hwbackends device check", "root": args.root,
                              "hwbackends": hwbackends.__version__,
                              "python": sys.version.split()[0]}  # fmt: skip
    host = hwbackends.Host.from_system(args.root)
    names = [b.name for b in hwbackends.backends(env={}, host=host)]
    # every visibility variable of every backend is unset in the children, then set per case
    variables = {v for n in names for v in variables_for(n)}
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in variables and not k.startswith("HWBACKENDS_")
    }
    base.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")  # nothing is ever downloaded
    explained = hwbackends.explain(env={}, host=host)
    accelerators = [d for d in host.devices if not d.extra.get("known_function")]
    report.update(backend=explained.chosen, device_type=explained.device_type,
                  reason=explained.reason, warnings=list(explained.warnings),
                  host_devices=[d.to_dict() for d in accelerators])  # fmt: skip
    if not accelerators:
        report.update(accelerator=False, ok=True, verdict="no accelerator here",
                      seconds=round(time.monotonic() - t0, 2))  # fmt: skip
        return report
    report["accelerator"] = True
    if explained.chosen == "cpu":
        report.update(ok=False, verdict="accelerator found, but no backend is ready for it",
                      seconds=round(time.monotonic() - t0, 2))  # fmt: skip
        return report
    name, device_type = explained.chosen, explained.device_type
    backend = hwbackends.get(name)
    predicted = [device_record(d) for d in backend.devices(host, {})]
    physical = sorted(predicted, key=lambda d: d["physical_index"])
    report["files"] = {"devices": predicted}
    mismatches: list[str] = []

    log(f"{name}: {len(predicted)} device(s) from the files; asking the runtime")
    runtime = child(RUNTIME_CHILD, device_type, base, min(120.0, deadline - time.monotonic()))
    report["runtime"] = {"torch": runtime}
    if "error" in runtime and not runtime.get("devices"):
        mismatches.append(f"torch: {runtime['error']}")
    cmp = compare("torch", predicted, runtime.get("devices", []))
    report["compare"] = {"torch": cmp}
    mismatches += cmp["mismatches"]
    manager = {"cuda": "nvml", "rocm": "amdsmi"}.get(name)
    managed: list[dict[str, Any]] = []
    if manager is not None:
        got = child(MANAGER_CHILD, manager, base, min(60.0, deadline - time.monotonic()))
        report["runtime"][manager] = got
        managed = got.get("devices", [])
        if managed:
            rows = physical
            if manager == "amdsmi":  # amdsmi's order is not documented as the KFD's: by bus id
                rows = sorted(physical, key=lambda d: d["pci_bus_id"] or "")
                managed = sorted(managed, key=lambda d: d["pci_bus_id"] or "")
            cmp = compare(manager, rows, managed)
            report["compare"][manager] = cmp
            mismatches += cmp["mismatches"]

    # -- visibility: each case in a fresh process, a few at a time --------------------------
    uuids = [d.get("uuid") or "" for d in (managed or runtime.get("devices", []))]
    cases = visibility_cases(name, len(physical), uuids) if not args.no_visibility else []
    log(f"{len(cases)} visibility case(s)")

    def one(case: dict[str, str]) -> dict[str, Any]:
        env = {**base, **case}
        want = [d.pci_bus_id for d in backend.devices(host, case)]
        got = child(
            RUNTIME_CHILD, device_type, env, min(args.case_timeout, deadline - time.monotonic())
        )
        seen = [d.get("pci_bus_id") for d in got.get("devices", [])]
        if "count" not in got:
            agree = None  # the runtime gave no answer (a timeout, a crash): not a verdict
        elif None in seen or None in want:
            agree = len(seen) == len(want)
        else:
            agree = seen == want
        return {"env": case, "predicted": want, "runtime": seen, "agree": agree,
                **{k: got[k] for k in ("error", "torch_parser") if k in got}}  # fmt: skip

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(one, cases))
    wrong = [r for r in results if r["agree"] is False]
    report["visibility"] = {
        "cases": len(results), "agree": sum(r["agree"] is True for r in results),
        "disagree": len(wrong), "unanswered": sum(r["agree"] is None for r in results),
        "results": results,
    }  # fmt: skip
    mismatches += [f"visibility {r['env']}: predicted {r['predicted']}, runtime {r['runtime']}"
                   for r in wrong]  # fmt: skip
    mismatches += [f"visibility {r['env']}: no answer ({r.get('error')})"
                   for r in results if r["agree"] is None]  # fmt: skip

    # -- the tiny model, with the recommended settings -----------------------------------
    if args.no_train:
        report["train"] = {"skipped": "--no-train"}
    else:
        log("hwbackends smoke: build, load, generate, train")
        report["train"] = train(name, base, max(deadline - time.monotonic(), 1.0))
        if not report["train"].get("ok"):
            mismatches.append(f"train: {report['train'].get('error', 'failed')}")
        elif not str(report["train"].get("device", "")).startswith(device_type):
            mismatches.append(f"train ran on {report['train'].get('device')}, not {device_type}")
    report.update(mismatches=mismatches, ok=not mismatches,
                  verdict="files and runtime agree" if not mismatches else "mismatch",
                  seconds=round(time.monotonic() - t0, 2))  # fmt: skip
    return report


def train(backend: str, env: dict[str, str], timeout: float) -> dict[str, Any]:
    """``hwbackends smoke --json`` for ``backend`` in a child: its report, or what failed."""
    argv = [sys.executable, "-m", "hwbackends", "smoke", "--json", "--backend", backend]
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout,
                              check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout:.0f} s"}
    try:
        got = json.loads(proc.stdout)
    except ValueError:
        return {"ok": False, "error": f"exit {proc.returncode}: {proc.stderr.strip()[-800:]}"}
    if not isinstance(got, dict):
        return {"ok": False, "error": "smoke printed no JSON object"}
    if proc.returncode != 0:
        got.setdefault("error", proc.stderr.strip()[-800:] or f"exit {proc.returncode}")
        got["ok"] = False
    return got


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--root", default="/", help="the folder whose sys, proc and dev are read")
    p.add_argument("--no-train", action="store_true", help="skip the tiny-model run")
    p.add_argument("--no-visibility", action="store_true", help="skip the visibility cases")
    p.add_argument("--jobs", type=int, default=8, help="visibility cases run at once (8)")
    p.add_argument("--case-timeout", type=float, default=60.0, help="seconds per case (60)")
    p.add_argument("--budget", type=float, default=240.0, help="seconds for everything (240)")
    args = p.parse_args(argv)
    report = check(args)
    print(json.dumps(report, indent=2, default=str))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
