"""What selection says: each candidate's state and reason, the report, and the hardware no
ready backend serves, with the fix."""

from __future__ import annotations

from hwbackends._base.record import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Literal

    from hwbackends._base.protocol import Device, Probe
    from hwbackends._machine.host import Host
    from hwbackends._machine.values import HostDevice

    State = Literal["selected", "available", "unavailable", "broken", "disabled", "not-probed"]


@frozen
class BackendStatus:
    """One candidate backend and what became of it."""

    name: str
    origin: str  # "builtin" or the distribution that declared it
    version: str
    target: str  # "module:attr"
    state: State
    probe: Probe | None = None
    error: str | None = None
    traceback: str | None = None
    priority: int | None = None
    device_type: str | None = None
    probe_ms: float = 0.0
    vendor: str | None = None  # the host-device key the backend declares
    replaces: str | None = None  # the distributions this one replaces (it declares replaces)
    replaced_by: str | None = None  # the distribution that replaces this one

    @property
    def source(self) -> str:
        """Where it comes from, as every report shows it: ``hwbackends-cuda-dgx, replaces
        hwbackends-cuda``."""
        return f"{self.origin}, replaces {self.replaces}" if self.replaces else self.origin

    @property
    def broken(self) -> bool:
        return self.state == "broken"

    @property
    def reason(self) -> str:
        if self.error:
            return self.error
        if self.probe is not None:
            return self.probe.reason
        return ""

    def to_dict(self, *, debug: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "origin": self.origin,
            "version": self.version,
            "target": self.target,
            "state": self.state,
            "priority": self.priority,
            "device_type": self.device_type,
            "vendor": self.vendor,
            "replaces": self.replaces,
            "replaced_by": self.replaced_by,
            "reason": self.reason,
            "probe": self.probe.to_dict() if self.probe else None,
            "error": self.error,
            "probe_ms": round(self.probe_ms, 3),
        }
        if debug:
            d["traceback"] = self.traceback
        return d


@frozen
class SelectionReport:
    """Why this process uses the backend it uses."""

    chosen: str
    device_type: str
    rule: str  # "forced", "preferred", "priority", "only-available", "cpu-fallback"
    reason: str
    candidates: tuple[BackendStatus, ...]
    devices: tuple[Device, ...]
    env_read: Mapping[str, str | None]
    warnings: tuple[str, ...]
    timings_ms: Mapping[str, float]
    discovery: str
    host: Host
    visibility: Mapping[str, Any] | None = None
    debug: bool = False

    def status(self, name: str) -> BackendStatus:
        for c in self.candidates:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def broken(self) -> tuple[BackendStatus, ...]:
        return tuple(c for c in self.candidates if c.broken)

    def to_dict(self) -> dict[str, Any]:
        h = self.host
        return {
            "chosen": self.chosen,
            "device_type": self.device_type,
            "rule": self.rule,
            "reason": self.reason,
            "candidates": [c.to_dict(debug=self.debug) for c in self.candidates],
            "devices": [d.to_dict() for d in self.devices],
            "env_read": dict(self.env_read),
            "warnings": list(self.warnings),
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
            "discovery": self.discovery,
            "visibility": dict(self.visibility) if self.visibility is not None else None,
            "host": {
                "source": h.source,
                "system": h.system,
                "machine": h.machine,
                "cpu": h.cpu.model,
                "cpu_count": h.cpu.count,
                "torch": h.torch.to_dict() if h.torch else None,
                "accelerators": [d.to_dict() for d in h.devices],
            },
        }


def _replace_state(s: BackendStatus, state: State) -> BackendStatus:
    from hwbackends._base.record import replace

    return replace(s, state=state)


def _unserved_hardware(
    host: Host, statuses: Mapping[str, BackendStatus], by_name: Mapping[str, Any]
) -> list[str]:
    """Warnings for host hardware that no ready backend serves, each with the fix.

    Hardware a loaded backend claims is explained by that backend's probe; this covers the
    rest: a known plugin that is not installed, one that is broken or disabled, and
    accelerators nobody claims.
    """
    from hwbackends._discovery.catalog import core_checkout, install_command, known_for

    claimed: set[str] = set()
    for st in statuses.values():
        if st.state in ("available", "unavailable", "selected", "not-probed"):
            v = st.vendor
            if v:
                claimed.add(v)
    out: list[str] = []
    checkout: list[str | None] = []
    seen: set[str] = set()
    named: dict[str, list[HostDevice]] = {}
    for d in host.devices:
        kind = d.extra.get("known_function")
        if d.vendor not in claimed and kind == "no-plugin" and d.name:
            named.setdefault(d.name, []).append(d)
    for what, devs in named.items():
        d = devs[0]
        vid = str(d.extra.get("pci_vendor_id", "?")).removeprefix("0x")
        did = (d.pci_device_id or "?").removeprefix("0x")
        out.append(
            f"{len(devs)} {what} (PCI {vid}:{did} at "
            f"{', '.join(x.pci_bus_id or '?' for x in devs)}): no hwbackends plugin exists for "
            "this hardware, so no backend can use it"
        )
    for d in host.devices:
        if d.vendor in claimed or d.vendor in seen or d.extra.get("known_function"):
            continue
        seen.add(d.vendor)
        same = [
            x for x in host.devices if x.vendor == d.vendor and not x.extra.get("known_function")
        ]
        n = len(same)
        where = ", ".join(x.pci_bus_id or "?" for x in same)
        k = known_for(d.vendor)
        if k is None:
            pid = f"{d.extra.get('pci_vendor_id', d.vendor)}:{d.pci_device_id or '?'}"
            # names from the machine's PCI ID database, where the reader found one
            maker = d.extra.get("pci_vendor_name")
            model = d.extra.get("pci_device_name")
            what = (
                f"{maker} accelerator(s)" if isinstance(maker, str) and maker else "accelerator(s)"
            )
            if isinstance(model, str) and model:
                what += f" ({model})"
            whose = f"{maker}'s" if isinstance(maker, str) and maker else "the vendor's"
            out.append(
                f"{n} {what} that no installed backend claims (PCI {pid} at {where}). "
                f"Fix: install {whose} hwbackends plugin; `hwbackends plugins` lists the "
                "installed ones"
            )
            continue
        known_status = statuses.get(k.backend)
        if (
            known_status is not None
            and known_status.state == "broken"
            and ("Fix: " in known_status.reason)
        ):  # a reason that carries its own fix (a name claimed twice): the same words
            out.append(f"{n} {k.display}(s) found, but {known_status.reason.rstrip('.')}")
            continue
        if known_status is not None and known_status.state == "broken":
            out.append(
                f"{n} {k.display}(s) found, but the {k.backend} backend is broken: "
                f"{known_status.reason}. Fix: reinstall or update {known_status.origin}; "
                "`hwbackends plugins --check` shows the "
                "traceback"
            )
            continue
        if known_status is not None and known_status.state == "disabled":
            out.append(
                f"{n} {k.display}(s) found, but the {k.backend} backend is {known_status.reason}. "
                "Fix: change HWBACKENDS_PLUGINS / HWBACKENDS_DISABLE"
            )
            continue
        if k.backend in by_name:
            continue  # installed under this name but serving another vendor key: its probe says
        if not checkout:
            checkout.append(core_checkout())
        cmd, which = install_command(k.distribution, checkout[0])
        out.append(
            f"{n} {k.display}(s) found ({where}), but {k.distribution} is not installed. "
            f"Fix: {cmd} ({which})"
        )
    return out
