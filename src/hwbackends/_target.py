"""What the integrations work from: one backend, its visible devices, one device's facts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ._errors import BackendUnavailableError, HwBackendsError
from ._host import Host
from ._protocol import Backend, Capabilities, Device, Probe

__all__ = ["Target", "resolve_target"]


@dataclass(frozen=True)
class Target:
    backend: Backend
    host: Host
    env: Mapping[str, str]
    devices: tuple[Device, ...]
    device: Device | None
    caps: Capabilities
    backend_name: str = ""  # read once: a plugin's name property is not asked again

    @property
    def name(self) -> str:
        return self.backend_name or self.backend.name


def resolve_target(
    backend: str | Backend | None = None,
    device: Device | int | None = None,
    *,
    env: Mapping[str, str] | None = None,
    host: Host | None = None,
) -> Target:
    """Resolve the backend (chosen or named), its visible devices, and the device to use.

    ``device`` may be a ``Device``, a logical index, or None for the process's device:
    ``LOCAL_RANK`` under a launcher, else the first visible device.
    """
    from ._registry import explain, get, plugin_call, resolve_inputs

    e, h, _ = resolve_inputs(env, host)
    name: str
    if backend is None:
        name = explain(env=e, host=h).chosen
        b = get(name)
    elif isinstance(backend, str):
        name = backend.strip().lower()
        b = get(name)
        probe = plugin_call(name, "probe", lambda: b.probe(h), Probe)
        if not probe.available:
            raise BackendUnavailableError(
                f"the {name} backend is not available here: {probe.reason}",
                "a backend whose hardware and software are both ready",
                probe.hint or "leave backend=None to use the selected backend",
            )
    else:
        b = backend
        name = str(getattr(backend, "name", type(backend).__name__))
    devices = tuple(plugin_call(name, "devices", lambda: b.devices(h, e), list))
    dev: Device | None
    if isinstance(device, Device):
        dev = device
    elif isinstance(device, int) and not isinstance(device, bool):
        if not 0 <= device < len(devices):
            raise HwBackendsError(
                f"device index {device} is out of range: {name} shows {len(devices)} "
                "visible device(s) to this process",
                f"a logical index from 0 to {len(devices) - 1}" if devices else "no index",
                "check `hwbackends devices` and the visibility variables",
            )
        dev = devices[device]
    elif device is None:
        rank = _local_rank(e)
        if devices and rank is not None and rank < len(devices) and name != "cpu":
            dev = devices[rank]
        else:
            dev = devices[0] if devices else None
    else:
        raise HwBackendsError(
            f"device={device!r} is not a device",
            "a hwbackends.Device, a logical index, or None",
        )
    caps = plugin_call(name, "capabilities", lambda: b.capabilities(dev, host=h), Capabilities)
    return Target(
        backend=b, host=h, env=e, devices=devices, device=dev, caps=caps, backend_name=name
    )


def _local_rank(env: Mapping[str, str]) -> int | None:
    v = env.get("LOCAL_RANK")
    if v is not None and v.strip().isdigit():
        return int(v)
    return None
