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
    #: Backends with hardware whose every device the visibility variables hide: for each,
    #: ``backend``, the ``variables`` set, the engine's per-entry ``reasons``, all its
    #: ``steps``, ``physical_devices`` (seen with the variables unset) and the ``fix``.
    hidden: tuple[Mapping[str, Any], ...] = ()

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
            "hidden": [dict(h) for h in self.hidden],
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
        ids = ":".join(
            str(x).removeprefix("0x") for x in (d.extra.get("pci_vendor_id"), d.pci_device_id) if x
        )
        at = ", ".join(x.pci_bus_id for x in devs if x.pci_bus_id)
        place = " ".join(p for p in (f"PCI {ids}" if ids else "", f"at {at}" if at else "") if p)
        out.append(
            f"{len(devs)} {what}" + (f" ({place})" if place else "") + ": no hwbackends plugin "
            "exists for this hardware, so no backend can use it"
        )
    for d in host.devices:
        if d.vendor in claimed or d.vendor in seen or d.extra.get("known_function"):
            continue
        seen.add(d.vendor)
        same = [
            x for x in host.devices if x.vendor == d.vendor and not x.extra.get("known_function")
        ]
        n = len(same)
        buses = [x.pci_bus_id for x in same if x.pci_bus_id]
        # what is known, and nothing for what is not (no "?" a reader must decode)
        where = ", ".join(buses) or "no PCI address given"
        k = known_for(d.vendor)
        if k is None:
            pid = str(d.extra.get("pci_vendor_id", d.vendor))
            pid += f":{d.pci_device_id}" if d.pci_device_id else ""
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
                f"{n} {what} that no installed backend claims (PCI {pid}"
                + (f" at {where}). " if buses else "). ")
                + f"Fix: install {whose} hwbackends plugin; `hwbackends plugins` lists the "
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


def hidden_backend(
    name: str,
    backend: Any,
    env: Mapping[str, str],
    host: Host,
    vis_report: tuple[Any, tuple[str, ...]],
    limit: float | None,
) -> dict[str, Any]:
    """Why visibility hides every device of a backend with hardware, entry by entry, and the
    fix: the engine's steps from the first set variable on, its warnings, and how many
    devices the same process would see with the variables unset."""
    from hwbackends._base.errors import VisibilityError
    from hwbackends._discovery.loading import Broken, guarded
    from hwbackends._visibility.explain import explain_visibility

    rep, declared = vis_report
    set_vars = {k: env[k] for k in declared if k in env}
    steps = [str(x) for x in rep.steps]
    start = next(
        (i for i, x in enumerate(steps) if any(x.startswith(f"{k}=") for k in set_vars)),
        len(steps),
    )
    reasons = [
        x
        for x in steps[start:]
        if not any(x.startswith((f"{k}=", f"{k} is unset.")) for k in declared)
    ]
    reasons += [str(w) for w in rep.warnings if str(w) not in reasons]
    bare = {k: v for k, v in env.items() if k not in set_vars}
    try:
        total = len(
            guarded(
                f"the {name} visibility rule",
                lambda: explain_visibility(backend, bare, host),
                passthrough=(VisibilityError,),
                timeout=limit,
            ).units
        )
    except (Broken, VisibilityError):
        total = 0
    names = " and ".join(set_vars)
    pick = f"0 to {total - 1}" if total > 2 else " and ".join(map(str, range(total)))
    example, what = ("0,1", "devices 0 and 1") if total > 1 else ("0", "device 0")
    fix = (
        f"unset {names} to see all {total} {name} device(s), or select physical indices "
        f"{pick} (`hwbackends pin {example}` prints the setting for {what})"
        if total
        else f"unset {names}"
    )
    return {
        "backend": name,
        "variables": set_vars,
        "reasons": reasons or steps,
        "steps": steps,
        "physical_devices": total,
        "fix": fix,
    }


def unusable_why(
    name: str, probe_reason: str, shown: str, gone: Mapping[str, Any] | None
) -> tuple[str, str]:
    """``(reason, warning)`` for a ready backend that shows this process no device: hidden by
    the visibility variables (``gone``, from ``hidden_backend``: the engine's reasons and the
    fix), or found without a device to enumerate."""
    if gone is not None:
        why = (
            f"{name} hardware is present, but the visibility variables hide every device from "
            f"this process ({shown}): " + "; ".join(r.rstrip(".") for r in gone["reasons"])
        )
        return why, f"{why}. Fix: {gone['fix']}"
    why = (
        f"{name} hardware evidence was found ({probe_reason}), but no device could be "
        "enumerated from the host's PCI devices"
    )
    return why, f"{why}; this process cannot use it"
