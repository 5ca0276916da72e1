"""The explicit "confirm" step: ask the real runtime, in a child process, what it sees.

Probes never start a device runtime (DESIGN.md rule 2). ``confirm`` is the opt-in exception:
it runs ``sys.executable -I -c <script>`` with the environment under test; the child imports
torch, counts ``torch.<device_type>`` devices and reads each one's PCI address where torch
exposes it, then prints one JSON line. The parent compares that with the prediction,
``backend.devices(host, env)``. The parent itself never imports torch, so it stays fork-safe.

Isolated: ``-I`` keeps the working directory, the user's site folder and ``PYTHON*`` variables
out of the child, which runs in ``/``; the ``PYTHONPATH`` entries and user site folder this
process uses are put back, less relative entries and the working directory. A ``torch.py``
(or a ``*.dist-info``) another user left in a shared ``/tmp`` is never imported
(https://docs.python.org/3/using/cmdline.html#cmdoption-I).

PCI addresses: CUDA and ROCm builds of torch give ``pci_domain_id``, ``pci_bus_id`` and
``pci_device_id`` on ``torch.cuda.get_device_properties(i)`` (used that way by
``torch/numa/binding.py`` in torch 2.13; the CPU wheel has no such class). Other device
modules are asked the same attributes; when any is missing only the counts are compared.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hwbackends._base.record import frozen, replace

if TYPE_CHECKING:
    from hwbackends._base.protocol import Backend
    from hwbackends._machine.host import Host

__all__ = ["Confirmation", "confirm"]

# The child's program. It must work on any torch (or none) and always print one JSON object.
_SCRIPT = r"""
import json, sys
device_type = sys.argv[1]
out = {"device_type": device_type}
try:
    import torch
except Exception as exc:
    out["error"] = "torch cannot be imported: %s: %s" % (type(exc).__name__, exc)
    print(json.dumps(out)); sys.exit(0)
out["torch"] = getattr(torch, "__version__", None)
version = getattr(torch, "version", None)
out["build"] = {"cuda": getattr(version, "cuda", None), "hip": getattr(version, "hip", None)}
mod = getattr(torch, device_type, None)
if mod is None or not hasattr(mod, "device_count"):
    out["error"] = "torch %s has no torch.%s module with device_count()" % (
        out["torch"], device_type)
    print(json.dumps(out)); sys.exit(0)
try:
    n = int(mod.device_count())
except Exception as exc:
    out["error"] = "torch.%s.device_count() raised %s: %s" % (device_type, type(exc).__name__, exc)
    print(json.dumps(out)); sys.exit(0)
out["count"] = n
buses = []
props = getattr(mod, "get_device_properties", None)
for i in range(n):
    bus = None
    if props is not None:
        try:
            p = props(i)
            keys = ("pci_domain_id", "pci_bus_id", "pci_device_id")
            d, b, s = (getattr(p, k, None) for k in keys)
            if all(isinstance(x, int) for x in (d, b, s)):
                bus = "%04x:%02x:%02x.0" % (d, b, s)
        except Exception:
            bus = None
    buses.append(bus)
out["bus_ids"] = buses
print(json.dumps(out))
"""


@frozen
class Confirmation:
    """What the runtime saw against what hwbackends predicted, and whether they agree.

    ``checked`` is False when the runtime could not be asked at all (torch does not import,
    the child crashed or timed out): ``ok`` is then False too, but nothing disagreed, and
    ``fix`` says how to make the check possible.
    """

    backend: str
    """The name of the backend that was checked."""
    ok: bool
    """True when the runtime sees as many devices as predicted and, where both sides know
    them, the same PCI bus ids in the same order."""
    predicted_count: int
    """How many devices ``backend.devices(host, env)`` predicts for this environment."""
    observed_count: int | None
    """How many devices ``torch.<device_type>.device_count()`` gave in the child; None when
    the runtime gave no count (``checked`` is False)."""
    predicted_bus_ids: tuple[str | None, ...]
    """The PCI bus id of each predicted device in logical order, spelled ``0000:3b:00.0``;
    None for a device whose address is unknown."""
    observed_bus_ids: tuple[str | None, ...] | None
    """The PCI bus id torch gives for each device it sees, in its order and the same spelling
    (None where torch exposes none); None when the runtime gave no list."""
    message: str
    """What was compared and found, in words (the mismatch, or what kept the check from
    running)."""
    seconds: float
    """How long the check took in seconds, prediction and child process together."""
    checked: bool = True
    """False when the runtime could not be asked (no torch, a torch without the device
    module, a crash or a timeout): ``ok`` is then False, though nothing disagreed."""
    fix: str | None = None
    """What makes the check possible when ``checked`` is False (install or repair torch,
    check the driver, ...); None otherwise."""

    def to_dict(self) -> dict[str, Any]:
        """This confirmation as JSON-able data (the ``confirmation`` that ``--confirm --json``
        adds to ``hwbackends devices``, ``env`` and ``explain``)."""
        return {
            "backend": self.backend,
            "ok": self.ok,
            "predicted_count": self.predicted_count,
            "observed_count": self.observed_count,
            "predicted_bus_ids": list(self.predicted_bus_ids),
            "observed_bus_ids": (
                list(self.observed_bus_ids) if self.observed_bus_ids is not None else None
            ),
            "message": self.message,
            "seconds": round(self.seconds, 3),
            "checked": self.checked,
            "fix": self.fix,
        }


def _norm_bus(bus: str | None) -> str | None:
    """``00000000:3B:00.0`` (NVML) and ``0000:3b:00.0`` (sysfs) compare equal."""
    if not bus:
        return None
    domain, sep, rest = bus.strip().lower().rpartition(":")
    if not sep:
        return bus.strip().lower()
    dom, _, b = domain.rpartition(":")
    try:
        return f"{int(dom or '0', 16):04x}:{b}:{rest}"
    except ValueError:
        return bus.strip().lower()


def child_env(backend_name: str, env: Mapping[str, str]) -> dict[str, str]:
    """The child's environment: this process's, with the backend's visibility variables
    exactly as in ``env`` (unset there means unset in the child) and ``env`` laid on top."""
    out = dict(os.environ)
    try:
        from hwbackends.visibility import variables_for

        for name in variables_for(backend_name):
            out.pop(name, None)
    except Exception:  # a backend the visibility layer does not model: nothing to clear
        pass
    out.update(env)
    return out


def child_path() -> tuple[list[str], list[str]]:
    """What ``-I`` leaves out of a child's import path that this process has on purpose: the
    ``PYTHONPATH`` entries and the user's site folder. Relative entries and the working
    directory are dropped: they name whatever folder the command was started in."""
    try:
        here: str | None = os.path.realpath(os.getcwd())
    except OSError:  # a removed working directory: nothing to compare with
        here = None

    def kept(p: str) -> bool:
        return os.path.isabs(p) and os.path.realpath(p) != here

    front = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and kept(p)]
    site = sys.modules.get("site")
    user = getattr(site, "USER_SITE", None) if getattr(site, "ENABLE_USER_SITE", False) else None
    back = [user] if isinstance(user, str) and kept(user) and user in sys.path else []
    return front, back


def python_argv(script: str, *args: str) -> list[str]:
    """``sys.executable -I -c script *args``, the isolated child every check starts (no
    working directory, user site or ``PYTHON*`` variables: a ``torch.py`` left in a shared
    folder is never imported), with ``child_path``'s entries put back; ``script`` sees
    ``args`` as ``sys.argv[1:]``."""
    front, back = child_path()
    # literals, not an import of json: the child's own imports are what some checks watch
    prelude = f"import sys as _s; _s.path[:0] = {front!r}; _s.path += {back!r}; del _s\n"
    return [sys.executable, "-I", "-c", prelude + script, *args]


def _run(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int, str, str]:
    """Run the child; separate so that tests can substitute a faked result."""
    import subprocess

    proc = subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=timeout, check=False, cwd="/"
    )
    return proc.returncode, proc.stdout, proc.stderr


def _last_json(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def confirm(
    backend: Backend, host: Host, env: Mapping[str, str], timeout: float = 60.0
) -> Confirmation:
    """Run the real runtime in a subprocess and compare it with ``backend.devices(host, env)``.

    Never raises for a runtime problem: a missing torch, a torch without the backend's device
    module, a crash or a timeout give ``ok=False`` with ``checked=False``, a message that says
    what happened and a ``fix``; a real disagreement has ``checked=True``.
    """
    t0 = time.perf_counter()
    from hwbackends._selection.calls import plugin_call

    name = str(getattr(backend, "name", type(backend).__name__))
    predicted = plugin_call(name, "devices", lambda: backend.devices(host, env), list)
    pred_bus = tuple(_norm_bus(d.pci_bus_id) for d in predicted)

    def done(ok: bool, msg: str, count: int | None = None,
             buses: tuple[str | None, ...] | None = None) -> Confirmation:  # fmt: skip
        if host.simulated:
            msg += f" (the prediction comes from the simulated host {host.source})"
        return Confirmation(backend.name, ok, len(predicted), count, pred_bus, buses, msg,
                            time.perf_counter() - t0)  # fmt: skip

    def unchecked(msg: str, fix: str) -> Confirmation:
        return replace(done(False, msg), checked=False, fix=fix)

    retry = "run it again; if it fails again, check that torch imports and its driver loads"

    argv = python_argv(_SCRIPT, backend.device_type)
    try:
        rc, out, err = _run(argv, child_env(backend.name, env), timeout)
    except OSError as exc:
        return unchecked(f"could not start {sys.executable}: {exc}", "repair that Python")
    except Exception as exc:  # subprocess.TimeoutExpired and anything else from the runner
        if type(exc).__name__ == "TimeoutExpired":
            return unchecked(f"the runtime did not answer within {timeout:g} s (timed out); "
                             "a hung driver or a very slow first initialisation",
                             "check the driver (its own tools, dmesg), then " + retry)  # fmt: skip
        return unchecked(f"running the runtime check failed: {type(exc).__name__}: {exc}", retry)
    data = _last_json(out)
    if data is None:
        tail = (err.strip().splitlines() or ["no output"])[-1]
        return unchecked(f"the runtime check exited with code {rc} and no result: {tail}", retry)
    if "error" in data and "torch" not in data:  # the child got no further than `import torch`
        from hwbackends._selection.target import torch_fix

        return unchecked(str(data["error"]), torch_fix(backend, host))
    if "error" in data:
        return unchecked(
            str(data["error"]),
            f"make torch.{backend.device_type} work: a torch build for it and a loaded driver "
            "(`hwbackends env` names what is missing)",
        )
    count = data.get("count")
    if not isinstance(count, int):
        return unchecked(f"the runtime check returned no device count: {data!r}", retry)
    raw = data.get("bus_ids")
    observed = (
        tuple(_norm_bus(b) if isinstance(b, str) else None for b in raw)
        if isinstance(raw, list)
        else None
    )
    where = f"torch {data.get('torch')} torch.{backend.device_type}"
    if count != len(predicted):
        return done(False, f"mismatch: {where} sees {count} device(s), hwbackends predicted "
                    f"{len(predicted)}", count, observed)  # fmt: skip
    comparable = (
        observed is not None
        and all(b is not None for b in observed)
        and all(b is not None for b in pred_bus)
    )
    if comparable and observed != pred_bus:
        pairs = ", ".join(
            f"{i}: predicted {p} observed {o}"
            for i, (p, o) in enumerate(zip(pred_bus, observed or (), strict=False))
            if p != o
        )
        return done(False, f"mismatch in device order: {pairs}", count, observed)
    how = "count and PCI bus ids" if comparable else "count (bus ids not available)"
    return done(True, f"{where} agrees with the prediction ({how}: {count} device(s))", count,
                observed)  # fmt: skip
