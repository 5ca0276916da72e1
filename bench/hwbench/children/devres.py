"""Child: in-process cost of device resolution on simulated NVIDIA hosts of 1, 8 and 64 GPUs.

Usage: python devres.py [REPEAT_S [REPEATS]]. Prints one JSON object. For each host size and
environment (visibility variables unset, a reversed index list, a reversed list of full UUIDs)
it times
``explain_visibility("cuda", env, host)`` and the cuda backend's ``devices(host, env)`` with
timeit-style repetition, plus ``Host.from_dict`` and a whole ``hwbackends.explain`` for scale.
"""

from __future__ import annotations

import json
import statistics
import sys
import timeit
import traceback
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

SIZES = (1, 8, 64)


def host_dict(n: int) -> dict[str, Any]:
    """An H100 box with ``n`` GPUs, PCI bus order, one driver, a CUDA torch build."""
    devices = []
    for i in range(n):
        bus = 0x18 + i * 0x0B if n <= 16 else 0x10 + i * 3
        u = f"{0x1A2B3C4D + i * 7919:08x}"
        devices.append(
            {
                "vendor": "nvidia",
                "pci_bus_id": f"0000:{bus:02x}:00.0",
                "uuid": f"GPU-{u}-{i:04x}-4{i:03x}-8{i:03x}-{0xC0FFEE000000 + i:012x}",
                "name": "NVIDIA H100 80GB HBM3",
                "arch": "sm_90",
                "memory_bytes": 85899345920,
                "pci_device_id": "0x2330",
            }
        )
    return {
        "system": "Linux",
        "machine": "x86_64",
        "torch": {"version": "2.8.0+cu128", "cuda": "12.8", "hip": None},
        "packages": {"torch": "2.8.0+cu128"},
        "devices": devices,
        "cuda_fastest_first": None,
        "device_nodes": ["/dev/nvidiactl", "/dev/nvidia-uvm"]
        + [f"/dev/nvidia{i}" for i in range(n)],
        "drivers": {"nvidia": "550.54.15"},
        "env": {},
    }


def envs(d: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    n = len(d["devices"])
    rev = list(range(n - 1, -1, -1))
    return {
        "unset": {},
        "indices": {
            "CUDA_VISIBLE_DEVICES": ",".join(map(str, rev)),
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        },
        "uuids": {"CUDA_VISIBLE_DEVICES": ",".join(d["devices"][i]["uuid"] for i in rev)},
    }


def per_call_us(fn: Callable[[], object], repeat_s: float, repeats: int) -> dict[str, float]:
    """timeit-style: a loop count that makes one repeat last ``repeat_s``; µs per call."""
    t = timeit.Timer(fn)
    number = 1
    while True:
        took = t.timeit(number)
        if took >= repeat_s or number >= 1 << 20:
            break
        number = max(number * 2, int(number * repeat_s / max(took, 1e-9) * 1.1))
    runs = [x / number * 1e6 for x in t.repeat(repeat=repeats, number=number)]
    return {
        "median_us": round(statistics.median(runs), 2),
        "min_us": round(min(runs), 2),
        "loops": number,
        "repeats": repeats,
    }


def _cuda_backend() -> tuple[Any, str]:
    import hwbackends

    try:
        b = hwbackends.get("cuda")
        return b, f"{type(b).__module__}.{type(b).__qualname__} (installed plugin)"
    except Exception as exc:  # the cuda plugin is not installed (yet)
        from hwbackends.plugin import BaseBackend

        class StandIn(BaseBackend):
            name = "cuda"
            api_version = 1
            device_type = "cuda"
            vendor = "nvidia"

        why = str(exc).splitlines()[0]
        return StandIn(), f"stand-in BaseBackend subclass (cuda plugin not loadable: {why})"


def main() -> None:
    repeat_s = float(sys.argv[1]) if len(sys.argv) > 1 else 0.01
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    import hwbackends

    out: dict[str, Any] = {}
    try:
        from hwbackends.visibility import explain_visibility
    except Exception:
        out["error"] = "hwbackends.visibility.explain_visibility is not importable:\n" + (
            traceback.format_exc(limit=2)
        )
        print(json.dumps(out))
        return
    backend, kind = _cuda_backend()
    out["backend"] = kind
    results: dict[str, Any] = {}
    for n in SIZES:
        d = host_dict(n)
        host = hwbackends.Host.from_dict(d)
        row: dict[str, Any] = {
            "host_from_dict": per_call_us(partial(hwbackends.Host.from_dict, d), repeat_s, repeats)
        }
        for ename, env in envs(d).items():
            rep = explain_visibility("cuda", env, host)
            devs = backend.devices(host, env)
            row[ename] = {
                "visible": len(rep.units),
                "devices": len(devs),
                "explain_visibility": per_call_us(
                    partial(explain_visibility, "cuda", env, host), repeat_s, repeats
                ),
                "backend_devices": per_call_us(
                    partial(backend.devices, host, env), repeat_s, repeats
                ),
            }
        try:
            sel = hwbackends.explain(env={}, host=host)
            row["explain_selection"] = {
                "chosen": sel.chosen,
                **per_call_us(partial(hwbackends.explain, env={}, host=host), repeat_s, repeats),
            }
        except Exception as exc:
            row["explain_selection"] = {"error": f"{type(exc).__name__}: {exc}"}
        results[str(n)] = row
    out["sizes"] = results
    print(json.dumps(out))


if __name__ == "__main__":
    main()
