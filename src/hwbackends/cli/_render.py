"""Rendering a report as text: styles, widths, tables, and each section of env."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from hwbackends._base.protocol import Device
    from hwbackends._machine.host import Host
    from hwbackends._machine.values import HostDevice
    from hwbackends._selection.report import SelectionReport


def _call(name: str, kwargs: dict[str, Any]) -> str:
    def show(k: str, v: Any) -> str:
        if k == "dtype":
            return f"torch.{v}"
        return repr(v)

    return f"{name}(" + ", ".join(f"{k}={show(k, v)}" for k, v in kwargs.items()) + ")"


def render_settings(settings: dict[str, Any], st: _Style, view: _View) -> list[str]:
    pre, train = settings["from_pretrained"], settings["training_arguments"]
    lines = [st.bold("Recommended settings")]
    if pre is None:  # no setting is right for this process: say why
        what = settings["error"]["what"].partition(":")[0]
        return lines + [
            st.red(x) for x in view.wrap(f"none for this process: {what} (see Warnings)", "  ")
        ]
    for call, plan in (("from_pretrained", pre), ("TrainingArguments", train)):
        if plan is None:  # TrainingArguments would fail here: say why, the load stands
            what = settings["error"]["what"].partition(":")[0]
            text = f"{call}: none for this process: {what} (see Warnings)"
            lines += [st.red(x) for x in view.wrap(text, "  ", "      ")]
            continue
        lines += view.wrap(_call(call, plan["kwargs"]), "  ", "      ")
        for k, why in plan["reasons"].items():
            lines += [st.dim(x) for x in view.wrap_brief(f"{k}: {why}", "      ", "        ")]
    return lines


class _Style:
    def __init__(self, stream: Any) -> None:
        self.on = (
            hasattr(stream, "isatty")
            and stream.isatty()
            and "NO_COLOR" not in os.environ
            and os.environ.get("TERM") != "dumb"
        )

    def _c(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.on else text

    def bold(self, t: str) -> str:
        return self._c("1", t)

    def dim(self, t: str) -> str:
        return self._c("2", t)

    def green(self, t: str) -> str:
        return self._c("32", t)

    def red(self, t: str) -> str:
        return self._c("31", t)

    def yellow(self, t: str) -> str:
        return self._c("33", t)


_MARK = {
    "selected": "●",
    "available": "○",
    "unavailable": "·",
    "broken": "✗",
    "disabled": "-",
    "not-probed": "-",
}


def _gib(n: int | None) -> str:
    return f"{n / 2**30:.0f} GiB" if n else ""


def _memory(n: int) -> str:
    return f"{n / 2**40:.1f} TiB" if n >= 2**40 else f"{n / 2**30:.0f} GiB"


class _View:
    """How much of the report to show and how wide: the default view fits one screen (sources,
    UUIDs and the rows of absent hardware go to --verbose); --verbose shows everything."""

    #: Where a reason's citation starts: the default view shows the reason up to there.
    _SOURCE_MARKS = ("https://", "http://", " (docs/reference/", "(docs/reference/")

    def __init__(self, verbose: bool = False, width: int | None = None) -> None:
        import shutil

        self.verbose = verbose
        # COLUMNS wins, then the terminal; a pipe or file gets 80 columns
        self.width = max(20, width or shutil.get_terminal_size((80, 24)).columns)

    def wrap(self, text: str, first: str = "", rest: str | None = None) -> list[str]:
        import textwrap

        return textwrap.wrap(
            shown(text),
            self.width,
            initial_indent=first,
            subsequent_indent=first if rest is None else rest,
            break_long_words=False,
            break_on_hyphens=False,
        ) or [first.rstrip()]

    def wrap_brief(self, text: str, first: str = "", rest: str | None = None) -> list[str]:
        """``wrap`` of ``brief(text)``; the default view keeps at most two lines of it."""
        lines = self.wrap(self.brief(text), first, rest)
        if self.verbose or len(lines) <= 2:
            return lines
        last = lines[1]
        while len(last) + 2 > self.width and " " in last.strip():
            last = last.rstrip().rsplit(" ", 1)[0]  # room for the ellipsis
        return [lines[0], last.rstrip(" ,;:") + " …"]

    def brief(self, text: str) -> str:
        """A reason without its sources (default view); the whole text with --verbose."""
        if self.verbose:
            return text
        cut = min((i for m in self._SOURCE_MARKS if (i := text.find(m)) > 0), default=-1)
        if cut > 0:
            text = text[:cut].rstrip(" :;,(")
        return text


def shown(text: str) -> str:
    """A value from data (a device name, a path, a plugin's message) as one line of the
    report: its line breaks and tabs shown as ``\\xNN`` too, so it cannot start a line that
    looks like the report's own; ``emit`` escapes the rest."""
    if not any(c in "\n\r\t\x0b\x0c\x1c\x1d\x1e\x85" for c in text):
        return text
    return "".join(f"\\x{ord(c):02x}" if c in "\n\r\t\x0b\x0c\x1c\x1d\x1e\x85" else c for c in text)


#: Starts each line of a shell command in a rendered report: ``fit`` keeps such a line as it
#: is (re-wrapping it would split a quoted word or drop a continuation) and ``emit`` removes
#: the mark. A Unicode noncharacter, so no data carries it.
KEEP = "\ufdd0"


def shell_word(word: str) -> str:
    """One shell word, quoted where the shell would read it otherwise (``$(...)``, spaces,
    quotes, globs); ``K=V`` keeps its name bare and quotes the value, as a prefix
    assignment is written."""
    import shlex

    key, sep, value = word.partition("=")
    if sep and key.isidentifier():
        return f"{key}={shlex.quote(value)}"
    return shlex.quote(word)


def command_lines(
    argv: Sequence[str], width: int, first: str = "  ", rest: str = "      "
) -> list[str]:
    """``argv`` as one shell command in lines of at most ``width`` columns: every word quoted
    (``shell_word``), breaks only between words, each broken line continued with `` \\``,
    so the text pastes and runs as the argument vector in bash and dash alike. A word wider
    than the line stays whole. The lines carry ``KEEP`` for ``fit``."""
    words = [shell_word(w) for w in argv]
    out: list[str] = []
    line, empty = first, True
    for w in words:
        if not empty and len(line) + 1 + len(w) + 2 > width:
            out.append(line + " \\")
            line = rest + w
        else:
            line += ("" if empty else " ") + w
        empty = False
    out.append(line)
    # a quoted word may hold a newline: its next line is part of the command too
    return [KEEP + x.replace("\n", "\n" + KEEP) for x in out]


def fit(text: str, width: int | None = None) -> str:
    """Every line of a text report within ``width`` columns (the terminal's, COLUMNS, else
    80): a longer line breaks at spaces and continues indented under itself. A single word
    longer than the width (a URL, a path) is kept whole: a broken one could not be copied.
    The lines of a shell command (``command_lines``) are kept as they are."""
    import textwrap

    width = width or _View().width
    out: list[str] = []
    for line in text.split("\n"):
        if line.startswith(KEEP):
            out.append(line[len(KEEP) :])
            continue
        if len(line) <= width or not line.strip():
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        rest = lead + "    " if len(lead) + 4 < width // 2 else lead
        out += textwrap.wrap(
            line.strip(),
            width,
            initial_indent=lead,
            subsequent_indent=rest,
            break_long_words=False,
            break_on_hyphens=False,
        ) or [line]
    return "\n".join(out)


def _table(rows: list[list[str]], indent: str = "  ", view: _View | None = None) -> list[str]:
    """Aligned columns; the last column wraps under itself when the line is too wide."""
    if not rows:
        return []
    rows = [[shown(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        head = indent + "  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=False))
        lead = head + "  " if len(r) > 1 else indent
        line = (lead + r[-1]).rstrip()
        if view is None or len(line) <= view.width or len(lead) > view.width - 20:
            out.append(line)
        else:
            out += view.wrap_brief(r[-1], lead, " " * len(lead))
    return out


def versions_of(host: Host) -> dict[str, Any]:
    """The versions peers' reports print (`transformers env`, `accelerate env`), as fields."""
    from hwbackends._base.files import normalize_dist_name

    packages = {
        name: host.packages.get(normalize_dist_name(name))
        for name in (
            "transformers",
            "accelerate",
            "kernels",
            "huggingface_hub",
            "safetensors",
            "deepspeed",
        )
    }
    return {
        "python": host.python,
        "torch": host.torch.version if host.torch else None,
        "torch_build": host.torch.flavour if host.torch else None,
        "drivers": dict(host.drivers),
        "memory_bytes": host.memory_bytes,
        "packages": packages,
    }


#: The source of a machine read under ``--root DIR``: that tree, not the machine running this.
ROOT_SOURCE = "root "


def build_name(h: Host) -> str:
    """The torch build in words: its runtime (``cuda``, ``rocm``, ``xpu``), else the label of
    a vendor's own build (``2.6.0+hpu.synapse.v1.21.0`` is Intel Gaudi's ``hpu`` build), else
    ``cpu``."""
    import re

    if h.torch is None:
        return "no"
    flavour = h.torch.flavour
    local = h.torch.version.partition("+")[2]
    m = re.match(r"[a-z]+", local)
    if flavour == "cpu" and m and m.group(0) != "cpu":
        return m.group(0)
    return flavour


def render_host(
    report: SelectionReport,
    st: _Style,
    view: _View,
    names: Mapping[str, Device] | None = None,
) -> list[str]:
    """The Host, Software and Hardware lines (with ``--verbose``, the table of devices).

    ``names``: PCI bus id -> the device as its backend names it whatever this process sees
    (``device_names``); without it, only the devices this process sees are named by their
    backend, the rest by the host."""
    h = report.host
    # the backends' names for the machine's devices, so the hardware lines and the device
    # rows below agree (a host file or sysfs may name a device only by its PCI id)
    used = dict(names or {})
    used.update({x.pci_bus_id: x for x in report.devices if x.pci_bus_id})
    v = versions_of(h)
    lines = view.wrap(_machine_line(h, v), st.bold("Host") + "      ", " " * 10)
    lines += view.wrap(_software_line(h, v), st.bold("Software") + "  ", " " * 10)
    if not h.devices:
        lines.append(st.bold("Hardware") + "  no device of an accelerator vendor")
        return lines
    if not view.verbose:
        return lines + _hardware_lines(h, used, st, view)
    # Every PCI function of an accelerator vendor: the backends below decide which of
    # them are accelerators (a cloud VM's VGA function is listed here, not used there).
    lines.append(st.bold("Devices of accelerator vendors"))
    lines += _table(_device_rows(h, used), view=view)
    return lines


def _machine_line(h: Host, v: Mapping[str, Any]) -> str:
    """Decides the Host line: system, CPU, memory and where the description comes from."""
    if h.source.startswith(ROOT_SOURCE):
        src = f"read from the tree at {h.source.removeprefix(ROOT_SOURCE)} (--root)"
    elif h.source != "system":
        src = f"simulated from {h.source}"
    else:
        src = "this machine"
    cores = f"{h.cpu.count} core{'' if h.cpu.count == 1 else 's'}"
    machine = [f"{h.system} {h.machine}", f"{h.cpu.model or 'CPU'} ({cores})"]
    if v["memory_bytes"]:
        machine.append(f"{_memory(v['memory_bytes'])} RAM")
    machine.append(src)
    return " · ".join(machine)


def _software_line(h: Host, v: Mapping[str, Any]) -> str:
    """Decides the Software line: Python, torch, the drivers, and the packages present and
    absent."""
    soft = [f"Python {v['python'] or 'unknown'}"]
    soft.append(f"torch {h.torch.version} ({build_name(h)} build)" if h.torch else "no torch")
    soft += [f"{name} driver {ver}" for name, ver in sorted(v["drivers"].items()) if ver]
    present = [f"{k} {ver}" for k, ver in v["packages"].items() if ver]
    # DeepSpeed is optional everywhere: named only when present, as the peers do
    absent = [k for k, ver in v["packages"].items() if not ver and k != "deepspeed"]
    if absent:
        present.append("not installed: " + ", ".join(absent))
    return " · ".join(soft + present)


def _hardware_lines(h: Host, used: Mapping[str, Device], st: _Style, view: _View) -> list[str]:
    """Decides the Hardware lines: identical devices on one line each kind (the per-device
    table is in --verbose and the devices this process sees are listed below)."""
    served = {
        d.vendor: used[d.pci_bus_id].backend
        for d in h.devices
        if d.pci_bus_id and d.pci_bus_id in used
    }
    groups: dict[tuple[str, str, str, str, str], int] = {}
    for d in h.devices:
        name, arch = _named(d, used)
        if not name:
            name = f"PCI device {d.pci_device_id}" if d.pci_device_id else "unnamed device"
            # a function beside the accelerators (a bridge...): not one its backend names,
            # nameless though it may be
            if d.vendor in served and d.pci_bus_id not in used:
                arch = f"not used by the {served[d.vendor]} backend"
        key = (name, d.vendor, arch, _gib(d.memory_bytes), _found_by(d))
        groups[key] = groups.get(key, 0) + 1
    lines: list[str] = []
    label = st.bold("Hardware") + "  "
    for (name, vendor, arch, mem, found), n in groups.items():
        detail = ", ".join(x for x in (vendor, arch, mem) if x)
        found = f"; found by {found}" if found else ""
        lines += view.wrap(f"{n} × {name} ({detail}{found})", label, " " * 10)
        label = " " * 10
    return lines


def _device_rows(h: Host, used: Mapping[str, Device]) -> list[list[str]]:
    """Decides --verbose's row of each device of an accelerator vendor."""
    return [
        [
            str(i),
            d.vendor,
            name or (f"PCI device {d.pci_device_id}" if d.pci_device_id else "unnamed"),
            arch,
            d.pci_bus_id or "",
            _gib(d.memory_bytes),
            _found_by(d, driver=True),
        ]
        for i, (d, (name, arch)) in enumerate((d, _named(d, used)) for d in h.devices)
    ]


def _named(d: HostDevice, used: Mapping[str, Device]) -> tuple[str | None, str]:
    """A host device's name and architecture: its backend's where it has one, else the
    host's own."""
    mine = used.get(d.pci_bus_id or "")
    return (mine.name if mine else None) or d.name, (mine.arch if mine else None) or d.arch or ""


def _found_by(d: Any, driver: bool = False) -> str:
    """The evidence sources that found a device (``pci + nvidia-proc``), and with ``driver``
    the driver bound to it: empty for a host file's devices, which name none."""
    ev = d.extra.get("evidence")
    found = " + ".join(e for e in ev if isinstance(e, str)) if isinstance(ev, list) else ""
    bound = d.extra.get("driver")
    if driver and isinstance(bound, str):
        found = f"{found}, driver {bound}" if found else f"driver {bound}"
    return found


def render_backends(
    report: SelectionReport, st: _Style, debug: bool = False, view: _View | None = None
) -> list[str]:
    view = view or _View(verbose=True)
    rows = []
    absent: list[str] = []  # unavailable for want of hardware: one line in the default view
    for c in report.candidates:
        no_hardware = c.state == "unavailable" and not (c.probe and c.probe.hardware_present)
        if no_hardware and not view.verbose:
            absent.append(c.name)
            continue
        mark = _MARK[c.state]
        shown_state = f"{c.state} (replaced)" if c.replaced_by else c.state
        state = {"selected": st.green, "broken": st.red, "available": st.green}.get(
            c.state, lambda s: s
        )(shown_state)
        origin = [f"{c.origin} {c.version}"] if view.verbose else []
        name = f"{c.name} ({c.source})" if c.replaces else c.name
        rows.append([mark, name, state, *origin, c.reason])
    lines = [st.bold("Backends")]
    lines += _table(rows, view=view)
    if absent:
        lines += view.wrap(
            f"{', '.join(absent)}: no hardware found",
            f"  {_MARK['unavailable']}  ",
            "     ",
        )
    for c in report.candidates:
        if c.probe and c.probe.hint and c.probe.hardware_present and not c.probe.available:
            # a fix is a command to run: never shortened, its URL is the index to install from
            lines += view.wrap(f"{c.name}: fix: {c.probe.hint}", "    ", "      ")
        if debug and c.traceback:
            lines.append(st.dim("    " + c.traceback.replace("\n", "\n    ").rstrip()))
    return lines


def render_devices(report: SelectionReport, st: _Style, view: _View | None = None) -> list[str]:
    view = view or _View(verbose=True)
    vis = report.visibility or {}
    read = {k: v for k, v in (vis.get("variables") or {}).items()}
    quiet = bool(read) and all(v is None for v in read.values()) and not view.verbose
    note = "logical → physical; visibility variables unset" if quiet else "logical → physical"
    lines = [st.bold("Devices this process sees") + f"  ({note})"]
    rows = [
        [
            d.torch_device,
            "→",
            str(d.physical_index),
            *([d.label or ""] if view.verbose else []),
            d.name or "",
            d.arch or "",
            d.pci_bus_id or "",
            _gib(d.memory_bytes),
        ]
        for d in report.devices
    ]
    if len(rows) > 8 and not view.verbose:
        rows = _runs(report)
    lines += _table(rows, view=view) if rows else ["  none"]
    if read and not quiet:
        shown = ", ".join(f"{k}={'unset' if v is None else repr(v)}" for k, v in read.items())
        lines += [st.dim(x) for x in view.wrap(f"variables: {shown}", "  ", "    ")]
    elif "note" in vis:
        lines += [st.dim(x) for x in view.wrap(str(vis["note"]), "  ", "    ")]
    return lines


def hidden_warning(report: SelectionReport, warning: str) -> bool:
    """Whether ``warning`` is the one-line form of a hidden backend that ``render_hidden``
    already shows in full."""
    return any(
        warning.startswith(f"{h['backend']} hardware is present, but the visibility variables")
        for h in report.hidden
    )


def render_hidden(report: SelectionReport, st: _Style, view: _View) -> list[str]:
    """Each backend with hardware whose every device the visibility variables hide: the
    variables, the engine's reason for each entry, and the fix."""
    lines: list[str] = []
    for h in report.hidden:
        shown = ", ".join(f"{k}={v!r}" for k, v in h["variables"].items())
        n = h.get("physical_devices") or 0
        head = f"{h['backend']}: {shown} hides all {n} device(s)" if n else f"{h['backend']}: "
        if not n:
            head += f"{shown} hides every device"
        lines += [st.yellow(x) for x in view.wrap(head, "", "  ")]
        for r in h["reasons"]:
            lines += view.wrap(view.brief(r), "  - ", "    ")
        lines += view.wrap(f"Fix: {h['fix']}", "  ", "    ")
    return lines


def _runs(report: SelectionReport) -> list[list[str]]:
    """Devices in runs: consecutive logical indices on consecutive physical ones, alike in
    name, arch and memory, make one row (64 NeuronCores in order are one line)."""
    rows: list[list[str]] = []
    run: list[Any] = []

    def span(x: object, y: object) -> str:
        return str(x) if x == y else f"{x}-{y}"

    def close() -> None:
        if not run:
            return
        a, z = run[0], run[-1]
        kind = a.torch_device.rpartition(":")[0] or a.torch_device
        rows.append(
            [
                f"{kind}:{span(a.index, z.index)}" if len(run) > 1 else a.torch_device,
                "→",
                span(str(a.physical_index), str(z.physical_index)),
                a.name or "",
                a.arch or "",
                a.pci_bus_id or "" if len(run) == 1 else f"{len(run)} devices",
                _gib(a.memory_bytes),
            ]
        )
        run.clear()

    for d in report.devices:
        if run and (
            d.index != run[-1].index + 1
            or d.physical_index != run[-1].physical_index + 1
            or (d.name, d.arch, d.memory_bytes) != (run[0].name, run[0].arch, run[0].memory_bytes)
        ):
            close()
        run.append(d)
    close()
    return rows


def render_capabilities(
    report: SelectionReport, st: _Style, view: _View | None = None
) -> list[str]:
    from hwbackends._selection.registry import get_from_report

    view = view or _View(verbose=True)
    from hwbackends._base.protocol import Capabilities
    from hwbackends._selection.registry import plugin_call

    backend = get_from_report(report)
    dev = report.devices[0] if report.devices else None
    caps = plugin_call(
        report.chosen,
        "capabilities",
        lambda: backend.capabilities(dev, host=report.host),
        Capabilities,
    )
    attn = ", ".join(dict.fromkeys(a.name for a in caps.attention))
    pad = " " * 14
    lines = [st.bold("Capabilities") + f"  ({caps.arch or caps.device_type})"]
    lines += view.wrap(
        f"{caps.training_precision} for training · dtypes {', '.join(caps.dtypes)}",
        "  precision   ",
        pad,
    )
    lines += view.wrap(attn, "  attention   ", pad)
    lines += view.wrap(
        f"{caps.distributed_backend} · hub kernels {caps.kernel_device or 'no device key'}",
        "  collective  ",
        pad,
    )
    by_status: dict[str, list[str]] = {}
    for q in caps.quantization:
        by_status.setdefault(q.status, []).append(q.method)
    if view.verbose:
        for status in ("supported", "partial", "unsupported", "unknown"):
            if by_status.get(status):
                lines += view.wrap(", ".join(by_status[status]), f"  quant {status:<11} ", " " * 20)
        for q in caps.quantization:
            if q.status == "partial":
                lines += [st.dim(x) for x in view.wrap(f"{q.method}: {q.reason}", "      ")]
    elif caps.quantization:
        # the exceptions by name, the supported methods by count; --verbose names them and the
        # unknown ones (an unknown arch is already a warning)
        parts = [f"supported {len(by_status['supported'])}"] if by_status.get("supported") else []
        parts += [
            f"{status} {', '.join(by_status[status])}"
            for status in ("partial", "unsupported")
            if by_status.get(status)
        ]
        lines += view.wrap_brief(" · ".join(parts), "  quant       ", pad)
    for lim in caps.limitations:
        drop = (
            f" (drop {', '.join(lim.report_to_exclude)} from report_to)"
            if lim.report_to_exclude
            else ""
        )
        lines += view.wrap_brief(f"{lim.text}{drop}", "  limitation  ", pad)
    return lines


def render_env(
    report: SelectionReport,
    st: _Style,
    debug: bool,
    settings: dict[str, Any] | None = None,
    view: _View | None = None,
    install: dict[str, Any] | None = None,
    names: Mapping[str, Device] | None = None,
) -> str:
    view = view or _View()
    lines = []
    if report.warnings:  # first, so a long report's warnings are not missed at its end
        n = len(report.warnings)
        lines.append(st.yellow(f"! {n} warning{'s' if n > 1 else ''}: see Warnings at the end"))
    lines += render_host(report, st, view, names)
    if install is not None:
        lines += render_install(install, st, view)
        if install.get("then"):
            lines += view.wrap(f"then: {install['then']}", " " * 10, " " * 12)
    lines.append("")
    lines += render_backends(report, st, debug, view)
    lines += view.wrap(
        f"{st.green(report.chosen)} (device type {report.device_type!r}): {report.reason} "
        f"[rule: {report.rule}]",
        st.bold("Chosen") + "  ",
        "        ",
    )
    lines.append("")
    lines += render_devices(report, st, view)
    lines += render_hidden(report, st, view)
    lines.append("")
    lines += render_capabilities(report, st, view)
    if settings is not None:
        lines.append("")
        lines += render_settings(settings, st, view)
    if report.warnings:
        lines.append("")
        lines.append(st.yellow(st.bold("Warnings")))
        for w in report.warnings:
            lines += [st.yellow(x) for x in view.wrap(w, "  ! ", "    ")]
    if not view.verbose:
        lines.append(
            st.dim("More: hwbackends env --verbose (sources, every backend), explain, --json")
        )
    return "\n".join(lines)


def render_install(install: Mapping[str, Any], st: _Style, view: _View) -> list[str]:
    """The Install line: the command, whole and shell-quoted, or that nothing is missing."""
    label = st.bold("Install") + "   "
    if not install.get("needed", True):
        have = ", ".join(f"{k} {v}" for k, v in install.get("installed", {}).items())
        index = f"; torch wheel index {install['torch_index']}" if install["torch_index"] else ""
        return view.wrap(f"nothing to install ({have} and the {install['backend']} backend are "
                         f"installed{index})", label, " " * 10)  # fmt: skip
    # a command is never shortened: it must paste and run
    width = view.width + len(label) - len("Install   ")  # the label's colour takes no column
    return command_lines(install["argv"], width, label, " " * 12)


def render_confirmation(conf: Any, st: _Style) -> list[str]:
    if not getattr(conf, "checked", True):  # nothing disagreed: the runtime was not reached
        fix = f" Fix: {conf.fix}" if conf.fix else ""
        return [
            st.bold("Runtime check")
            + f"  {st.red('could not check')}: {conf.message} ({conf.seconds:.2f} s).{fix}"
        ]
    mark = st.green("agrees") if conf.ok else st.red("DISAGREES")
    return [st.bold("Runtime check") + f"  {mark}: {conf.message} ({conf.seconds:.2f} s)"]
