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
    from hwbackends._selection.verdict import Verdict

    State = Literal["selected", "available", "unavailable", "broken", "disabled", "not-probed"]


@frozen
class BackendStatus:
    """One candidate backend and what became of it."""

    name: str
    """The backend's name (``cuda``, ``rocm``, ``cpu``, ...), as its entry point declares it."""
    origin: str
    """``"builtin"`` for a backend built into hwbackends (cpu), else the distribution that
    declares it (``hwbackends-cuda``)."""
    version: str
    """The version of the distribution that provides it (hwbackends' own for a built-in)."""
    target: str
    """The entry point's object reference, ``module:attr`` (``hwbackends_cuda:CudaBackend``)."""
    state: State
    """``"selected"`` (the backend this process uses), ``"available"`` (ready, not chosen),
    ``"unavailable"`` (not ready, or no visible device), ``"broken"``, ``"disabled"``
    (``HWBACKENDS_PLUGINS`` / ``HWBACKENDS_DISABLE``, or replaced) or ``"not-probed"``."""
    probe: Probe | None = None
    """Its probe's answer (hardware found, software ready, reason, hint); None when no probe
    result is kept: disabled, not probed, or broken."""
    error: str | None = None
    """Why it is broken, disabled, not probed, or unusable despite a ready probe; None
    otherwise."""
    traceback: str | None = None
    """The traceback of the plugin's failure, for a broken backend; ``to_dict`` shows it only
    with ``debug`` (``HWBACKENDS_DEBUG``)."""
    priority: int | None = None
    """Its declared priority: of several available backends the highest wins, ties by name.
    None when it did not load."""
    device_type: str | None = None
    """The torch device type it declares (``cuda``, ``xpu``, ``cpu``, ...); None when it did
    not load."""
    probe_ms: float = 0.0
    """Milliseconds its load and probe took; 0.0 when it was not probed or broke."""
    vendor: str | None = None
    """The host-device key it declares (``nvidia``, ``amd``, ...): the ``HostDevice.vendor``
    of the hardware it serves; None when it did not load or declares none."""
    replaces: str | None = None
    """The distributions this one replaces (it declares ``replaces``), comma-separated; None
    when it replaces none."""
    replaced_by: str | None = None
    """The distribution that replaces this one (its state is then ``"disabled"``); None when
    none does."""
    fix: str | None = None
    """The fix its devices' verdicts allow (``SelectionReport.verdicts``): its probe's hint
    where one of its devices can be served once it is applied, else the devices' own fix, else
    None (no build of it would run them, or nothing to fix)."""

    @property
    def source(self) -> str:
        """Where it comes from, as every report shows it: ``hwbackends-cuda-dgx, replaces
        hwbackends-cuda``."""
        return f"{self.origin}, replaces {self.replaces}" if self.replaces else self.origin

    @property
    def broken(self) -> bool:
        """Whether its state is ``"broken"``."""
        return self.state == "broken"

    @property
    def reason(self) -> str:
        """Why it is in its state: ``error`` when set, else the probe's reason, else ``""``."""
        if self.error:
            return self.error
        if self.probe is not None:
            return self.probe.reason
        return ""

    def to_dict(self, *, debug: bool = False) -> dict[str, Any]:
        """This status as JSON-able data, with ``reason`` and the probe's own ``to_dict``.

        :param debug: add ``traceback`` too (the report does so under ``HWBACKENDS_DEBUG``).
        """
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
            "fix": self.fix,
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
    """The name of the backend this process uses (the one ``hwbackends.current()`` returns)."""
    device_type: str
    """The torch device type to use (``cuda``, ``xpu``, ``cpu``, ...): the first device's,
    which may depend on the software stack (neuron, xla), else the chosen backend's."""
    rule: str
    """How it was chosen: ``"forced"`` (``HWBACKENDS_BACKEND`` names one backend),
    ``"preferred"`` (the first usable of a ``HWBACKENDS_BACKEND`` list), ``"priority"``,
    ``"only-available"`` or ``"cpu-fallback"`` (hardware or backends found, none usable)."""
    reason: str
    """The rule in words, for people (``"the only available backend"``)."""
    candidates: tuple[BackendStatus, ...]
    """Every discovered backend's status, sorted by name, followed by the other claimants of a
    name (a clash, a replaced or disabled distribution, a plugin reusing a built-in name)."""
    devices: tuple[Device, ...]
    """The chosen backend's devices as this process sees them (after the visibility
    variables), in logical index order."""
    env_read: Mapping[str, str | None]
    """The environment variables selection read and their values (None: unset): every
    ``HWBACKENDS_*`` setting, the chosen backend's visibility variables, and those that hide
    every device of another backend (see ``hidden``)."""
    warnings: tuple[str, ...]
    """Problems worth fixing, one sentence each with its fix where there is one: hardware no
    ready backend serves, devices hidden by visibility variables, plugin misbehaviour, ..."""
    timings_ms: Mapping[str, float]
    """Milliseconds by step: ``discovery``, ``probe:<name>`` for each probed backend and
    ``devices:<name>`` for each backend whose devices were listed."""
    discovery: str
    """How the plugins were found: ``"scan"`` (their ``*.dist-info`` folders read directly),
    ``"importlib"`` (``importlib.metadata``) or ``"given"`` (a registry of given classes)."""
    host: Host
    """The machine selection read: this one, or a simulated one (``host=``, ``HWBACKENDS_HOST``)."""
    visibility: Mapping[str, Any] | None = None
    """How the chosen backend's runtime reads its visibility variables here (the report of
    ``hwbackends.visibility.explain_visibility`` as a dict); None when the chosen backend
    declares none and another backend's devices were all hidden (``hidden`` explains)."""
    debug: bool = False
    """Whether ``HWBACKENDS_DEBUG`` is on: ``to_dict`` then shows each candidate's traceback."""
    hidden: tuple[Mapping[str, Any], ...] = ()
    """Backends with hardware whose every device the visibility variables hide: for each,
    ``backend``, the ``variables`` set, the engine's per-entry ``reasons``, all its
    ``steps``, ``physical_devices`` (seen with the variables unset) and the ``fix``."""
    verdicts: tuple[Verdict, ...] = ()
    """One verdict per host device, in the host's order (``Host.devices``): the backend that
    serves it or would, with which torch build, or why none can, and the one fix. Every
    surface (the Hardware line, the backend lines, the fixes, the Install line, ``--json``)
    renders these."""

    def status(self, name: str) -> BackendStatus:
        """The status of one candidate.

        :param name: a backend name as ``candidates`` lists it (``"cuda"``).
        :raises KeyError: when no candidate has that name.
        """
        for c in self.candidates:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def broken(self) -> tuple[BackendStatus, ...]:
        """The candidates whose state is ``"broken"``."""
        return tuple(c for c in self.candidates if c.broken)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-able data, as ``hwbackends explain --json`` prints it (the host
        summarised: source, system, machine, CPU, torch build, accelerators)."""
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
            "verdicts": [v.to_dict() for v in self.verdicts],
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
    from hwbackends._discovery.catalog import known_for

    claimed = {
        st.vendor
        for st in statuses.values()
        if st.state in ("available", "unavailable", "selected", "not-probed") and st.vendor
    }
    out = _no_plugin_exists(host, claimed)
    checkout: list[str | None] = []  # the core's checkout, looked up once if needed
    seen: set[str] = set()
    for d in host.devices:
        if d.vendor in claimed or d.vendor in seen or d.extra.get("known_function"):
            continue
        seen.add(d.vendor)
        same = [
            x for x in host.devices if x.vendor == d.vendor and not x.extra.get("known_function")
        ]
        k = known_for(d.vendor)
        line = (
            _unclaimed(d, same)
            if k is None
            else _known_unserved(k, same, statuses.get(k.backend), by_name, checkout)
        )
        if line:
            out.append(line)
    return out


def _no_plugin_exists(host: Host, claimed: set[str]) -> list[str]:
    """Known hardware for which no plugin exists (NEC VE, Xeon Phi), one line per model."""
    named: dict[str, list[HostDevice]] = {}
    for d in host.devices:
        kind = d.extra.get("known_function")
        if d.vendor not in claimed and kind == "no-plugin" and d.name:
            named.setdefault(d.name, []).append(d)
    out = []
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
    return out


def _unclaimed(d: HostDevice, same: list[HostDevice]) -> str:
    """Accelerators of a vendor no installed backend claims and the catalog does not know."""
    buses = [x.pci_bus_id for x in same if x.pci_bus_id]
    pid = str(d.extra.get("pci_vendor_id", d.vendor))
    pid += f":{d.pci_device_id}" if d.pci_device_id else ""
    # names from the machine's PCI ID database, where the reader found one; what is known,
    # and nothing for what is not (no "?" a reader must decode)
    maker = d.extra.get("pci_vendor_name")
    model = d.extra.get("pci_device_name")
    what = f"{maker} accelerator(s)" if isinstance(maker, str) and maker else "accelerator(s)"
    if isinstance(model, str) and model:
        what += f" ({model})"
    whose = f"{maker}'s" if isinstance(maker, str) and maker else "the vendor's"
    return (
        f"{len(same)} {what} that no installed backend claims (PCI {pid}"
        + (f" at {', '.join(buses)}). " if buses else "). ")
        + f"Fix: install {whose} hwbackends plugin; `hwbackends plugins` lists the "
        "installed ones"
    )


def _known_unserved(
    k: Any,
    same: list[HostDevice],
    known_status: BackendStatus | None,
    by_name: Mapping[str, Any],
    checkout: list[str | None],
) -> str | None:
    """Hardware of a catalogued plugin that is broken, disabled or not installed; None when
    a backend of that name is installed but serves another vendor key (its probe says)."""
    from hwbackends._discovery.catalog import core_checkout, install_command

    n = len(same)
    where = ", ".join(x.pci_bus_id for x in same if x.pci_bus_id) or "no PCI address given"
    state = known_status.state if known_status is not None else None
    if known_status is not None and state == "broken" and "Fix: " in known_status.reason:
        # a reason that carries its own fix (a name claimed twice): the same words
        return f"{n} {k.display}(s) found, but {known_status.reason.rstrip('.')}"
    if known_status is not None and state == "broken":
        return (
            f"{n} {k.display}(s) found, but the {k.backend} backend is broken: "
            f"{known_status.reason}. Fix: reinstall or update {known_status.origin}; "
            "`hwbackends plugins --check` shows the "
            "traceback"
        )
    if known_status is not None and state == "disabled":
        return (
            f"{n} {k.display}(s) found, but the {k.backend} backend is {known_status.reason}. "
            "Fix: change HWBACKENDS_PLUGINS / HWBACKENDS_DISABLE"
        )
    if k.backend in by_name:
        return None
    if not checkout:
        checkout.append(core_checkout())
    cmd, which = install_command(k.distribution, checkout[0])
    return (
        f"{n} {k.display}(s) found ({where}), but {k.distribution} is not installed. "
        f"Fix: {cmd} ({which})"
    )


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


# -- a device type torch does not know: the extension that registers it ------------------------


def unregistered_device(name: str, device_type: str, host: Host) -> list[str]:
    """A warning when the chosen backend's device type is none of torch's own and nothing
    installed will register it when torch is imported (read from ``entry_points.txt``, nothing
    imported): ``device_map="tt:0"`` then fails inside Transformers. Nothing for a host file,
    whose installed extensions are not this interpreter's (a ``--root`` tree, ``"root ..."``,
    is read with this interpreter's packages)."""
    import sys

    from hwbackends._discovery.torch_ext import TORCH_DEVICE_TYPES, autoload_entry_points

    here = host.source == "system" or host.source.startswith("root ")
    if device_type in TORCH_DEVICE_TYPES or not here or autoload_entry_points(sys.path):
        return []
    return [
        f"{name}: torch has no {device_type!r} device of its own: device_map='{device_type}:0' "
        f"and torch.device({device_type!r}) work only once {name}'s torch extension has "
        "registered it, and no installed distribution declares a torch.backends entry point, "
        "so `import torch` does not register it (torch's device-backend autoload). Fix: import "
        "the extension's module before from_pretrained (or install a release of it that "
        "declares the torch.backends entry point)"
    ]
