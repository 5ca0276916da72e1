"""The ``hwbackends`` command: ``env``, ``plugins``, ``devices``, ``explain``, ``pin``,
``launch-plan`` and ``smoke``.

Exit codes: 0 the answer was given; 1 the answer is "no": ``plugins --check`` found a broken
plugin, ``launch-plan`` found a problem, ``--confirm`` saw the runtime disagree or could not
ask it (the report then says "could not check", why, and the fix, e.g. installing torch); 2
bad input (one line on stderr naming the problem and the fix); 3 an internal error.
Tracebacks appear only with ``HWBACKENDS_DEBUG=1``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from ._errors import HwBackendsError

if TYPE_CHECKING:
    import argparse

    from ._host import Host
    from ._registry import SelectionReport

__all__ = ["main"]

#: Version of the ``--json`` schema of every command; bumped on incompatible changes.
JSON_SCHEMA_VERSION = 1


class UsageError(HwBackendsError):
    """Bad command-line input (exit code 2)."""


class OutputError(HwBackendsError):
    """Standard output refused the report (a full disk, a closed file): exit code 2."""


# -- output ----------------------------------------------------------------------------------

#: ASCII stand-ins for the report's few non-ASCII characters, used only where the terminal's
#: encoding (PYTHONIOENCODING=ascii, a cp1252 console) cannot show them.
_ASCII = {
    "·": "-",
    "●": "*",
    "○": "o",
    "✗": "x",
    "→": "->",
    "—": "-",
    "–": "-",
    "×": "x",
    "…": "...",
    "§": "S",
    "≥": ">=",
    "≤": "<=",
    "²": "2",
}


def _ascii_fallback(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start : exc.end]
    return "".join(_ASCII.get(ch, "?") for ch in bad), exc.end


def prepare_stdout() -> None:
    """Let every write to stdout degrade to ASCII stand-ins instead of raising
    UnicodeEncodeError on a terminal that cannot show a character."""
    import codecs

    try:
        codecs.lookup_error("hwbackends-ascii")
    except LookupError:
        codecs.register_error("hwbackends-ascii", _ascii_fallback)
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None and getattr(sys.stdout, "errors", "strict") == "strict":
        reconfigure(errors="hwbackends-ascii")


def emit(text: str) -> None:
    """Write one report to stdout, whatever the terminal's encoding; a stdout that refuses the
    bytes (``> /dev/full``, a closed pipe) is the user's setup, not an internal error."""
    out = sys.stdout
    encoding = getattr(out, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        text = "".join(_safe_char(ch, encoding) for ch in text)
    try:
        out.write(text + "\n")
        out.flush()
    except BrokenPipeError:
        _silence_stdout()
        raise
    except OSError as exc:
        _silence_stdout()
        raise OutputError(
            f"could not write the report to standard output: {exc.strerror or exc}",
            "a standard output that accepts the report (a terminal, a file, a pipe)",
            "free space on the target device or redirect the output elsewhere",
        ) from None


def _safe_char(ch: str, encoding: str) -> str:
    try:
        ch.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return _ASCII.get(ch, "?")
    return ch


def _silence_stdout() -> None:
    # What stays buffered would fail again when the interpreter flushes stdout at exit.
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


# -- shared inputs -------------------------------------------------------------------------


def parse_env_overrides(items: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not key.replace("_", "a").isalnum() or key[0].isdigit():
            raise UsageError(
                f"--env {item!r} is not an assignment",
                "KEY=VALUE with KEY made of letters, digits and underscores (VALUE may be empty)",
                "write it as --env CUDA_VISIBLE_DEVICES=0,1",
            )
        out[key] = value
    return out


def _inputs(args: argparse.Namespace) -> tuple[dict[str, str], Host]:
    from ._host import Host

    overrides = parse_env_overrides(args.env or [])
    # --host '' is a mistake to report, not a request for the real machine
    host_file = args.host if args.host is not None else os.environ.get("HWBACKENDS_HOST") or None
    root = getattr(args, "root", None)
    if root is not None and host_file:
        raise UsageError(
            "--root and a host file were both given",
            "either a machine's root folder (--root) or a simulated host (--host)",
            "drop one of them (unset HWBACKENDS_HOST for --root)",
        )
    if root is not None and not os.path.isdir(root):
        raise UsageError(
            f"--root {root!r} is not a folder",
            "the root of a machine's file tree, holding sys/, proc/ and dev/",
            "pass an existing folder, or leave --root out to read this machine",
        )
    if host_file is not None:
        host = Host.from_file(host_file)
    else:
        from ._registry import installed_backends

        host = Host.from_system(
            root or "/", backends=installed_backends({**os.environ, **overrides})
        )
    base: dict[str, str] = dict(host.env) if host.simulated and host.env is not None else {}
    if not host.simulated:
        base = dict(os.environ)
    else:
        # The library's own switches still come from the real environment.
        base.update({k: v for k, v in os.environ.items() if k.startswith("HWBACKENDS_")})
        base.pop("HWBACKENDS_HOST", None)
    base.update(overrides)
    if args.backend:
        _check_backend_option(args.backend)
        base["HWBACKENDS_BACKEND"] = args.backend
    return base, host


def _check_backend_option(name: str) -> None:
    """--backend names the option the user typed, not the variable it is carried in."""
    import difflib

    from ._registry import installed_names

    names = installed_names()
    if name.strip().lower() in names:
        return
    near = difflib.get_close_matches(name.strip().lower(), names, n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(map(repr, near))}?)" if near else ""
    raise UsageError(
        f"--backend {name!r} names no installed backend{hint}",
        f"one of {', '.join(names)}",
        "pick an installed name (`hwbackends plugins` lists them) or install that plugin",
    )


def cut_short(report: SelectionReport) -> list[str]:
    """Visibility lists that end early, as warnings naming the entry: the process then sees
    fewer devices than the variable lists, and only `devices` used to say why."""
    import re

    vis = report.visibility or {}
    steps = [str(x) for x in vis.get("steps") or ()]
    out = []
    read = ""  # the variable whose entries the following steps walk through
    for step in steps:
        m = re.match(r"([A-Z][A-Z0-9_]*=\S.*?)\.?$", step)
        if m:
            read = m.group(1) + ": "
        if re.search(r"(the list ends|ends the list)\b.*; \d+ kept\.$", step):
            out.append(
                f"{read}{step} The process sees only the devices before that entry "
                f"({', '.join(d.torch_device for d in report.devices) or 'none'}). Fix: correct "
                "or remove the entry; `hwbackends devices` shows each step"
            )
    return out


def misspelled_variables(env: Mapping[str, str]) -> list[str]:
    """A set variable one letter away from a visibility variable the installed backends read
    (``CUDA_VISIBLE_DEVICE``) is otherwise ignored by every runtime without a word."""
    import difflib

    from ._registry import watch_lists

    known = watch_lists()[0]
    out = []
    for key in sorted(env):
        if key in known or key.startswith("HWBACKENDS_"):
            continue
        near = difflib.get_close_matches(key, known, n=1, cutoff=0.9)
        if near:
            out.append(
                f"{key} is set, but no runtime reads it (did you mean {near[0]}?). Fix: rename "
                f"it to {near[0]}, or unset it"
            )
    return out


def unknown_archs(report: SelectionReport) -> list[str]:
    """Visible devices whose arch the chosen backend's tables do not describe (``sm_999`` in
    a host file): its capability answers for them are guesses, which must not pass unsaid."""
    from ._registry import get_from_report, plugin_call

    backend = get_from_report(report)
    method = getattr(backend, "known_archs", None)
    if method is None:  # a backend written to the protocol alone keeps no such list
        return []
    known = plugin_call(report.chosen, "known_archs", method)
    if not known:
        return []
    if not isinstance(known, (tuple, list)) or not all(isinstance(a, str) for a in known):
        from ._errors import PluginError

        raise PluginError(
            f"the {report.chosen} backend is broken: known_archs() returned {type(known).__name__}",
            "a tuple of architecture names, or None",
            "update or uninstall the plugin",
        )
    by_arch: dict[str, list[str]] = {}
    for d in report.devices:
        if d.arch and d.arch not in known:
            by_arch.setdefault(d.arch, []).append(
                f"{d.torch_device} ({d.name})" if d.name else d.torch_device
            )
    origin = next((c.origin for c in report.candidates if c.name == report.chosen), "")
    return [
        f"{', '.join(devs)}: arch {arch!r} is not one the {report.chosen} backend knows "
        f"(known: {', '.join(known)}); its answers about dtypes, attention and quantization on "
        f"{'this device' if len(devs) == 1 else 'these devices'} are uncertain. Fix: correct "
        f"the arch (in the host file, or the driver's report), or update {origin or 'the plugin'}"
        for arch, devs in by_arch.items()
    ]


def _report(args: argparse.Namespace) -> SelectionReport:
    return _report_env(args)[0]


def _report_env(args: argparse.Namespace) -> tuple[SelectionReport, dict[str, str]]:
    from ._errors import BackendUnavailableError
    from ._registry import explain

    env, host = _inputs(args)
    try:
        return explain(env=env, host=host), env
    except BackendUnavailableError as exc:
        if not args.backend:
            raise
        # --backend travels as HWBACKENDS_BACKEND; the message names what the user typed
        var = f"HWBACKENDS_BACKEND={args.backend.strip().lower()}"
        opt = f"--backend {args.backend} was given"
        raise BackendUnavailableError(
            exc.what.replace(var, opt),
            exc.expected,
            (exc.fix or "").replace("unset HWBACKENDS_BACKEND", "drop --backend") or None,
        ) from None


def settings_for(report: SelectionReport, env: dict[str, str]) -> dict[str, Any]:
    """The recommended from_pretrained / TrainingArguments settings, without importing torch."""
    from ._target import resolve_target
    from .accelerate import plan_training
    from .transformers import plan_for_target

    target = resolve_target(report.chosen, env=env, host=report.host)
    pre = plan_for_target(target, torch_objects=False)
    train = plan_training(backend=report.chosen, env=env, host=report.host)
    return {"from_pretrained": pre.to_dict(), "training_arguments": train.to_dict()}


def _call(name: str, kwargs: dict[str, Any]) -> str:
    def show(k: str, v: Any) -> str:
        if k == "dtype":
            return f"torch.{v}"
        return repr(v)

    return f"{name}(" + ", ".join(f"{k}={show(k, v)}" for k, v in kwargs.items()) + ")"


def render_settings(settings: dict[str, Any], st: _Style, view: _View) -> list[str]:
    pre, train = settings["from_pretrained"], settings["training_arguments"]
    lines = [st.bold("Recommended settings")]
    for call, plan in (("from_pretrained", pre), ("TrainingArguments", train)):
        lines += view.wrap(_call(call, plan["kwargs"]), "  ", "      ")
        for k, why in plan["reasons"].items():
            lines += [st.dim(x) for x in view.wrap_brief(f"{k}: {why}", "      ", "        ")]
    return lines


# -- rendering -----------------------------------------------------------------------------


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
        # COLUMNS wins, then the terminal; a pipe or file gets 100 columns
        self.width = max(40, width or shutil.get_terminal_size((100, 24)).columns)

    def wrap(self, text: str, first: str = "", rest: str | None = None) -> list[str]:
        import textwrap

        return textwrap.wrap(
            text,
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


def _table(rows: list[list[str]], indent: str = "  ", view: _View | None = None) -> list[str]:
    """Aligned columns; the last column wraps under itself when the line is too wide."""
    if not rows:
        return []
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
    from ._host import normalize_dist_name

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


def render_host(report: SelectionReport, st: _Style, view: _View) -> list[str]:
    h = report.host
    v = versions_of(h)
    src = "this machine" if h.source == "system" else f"simulated from {h.source}"
    machine = [f"{h.system} {h.machine}", f"{h.cpu.model or 'CPU'} ({h.cpu.count} cores)"]
    if v["memory_bytes"]:
        machine.append(f"{_memory(v['memory_bytes'])} RAM")
    machine.append(src)
    lines = view.wrap(" · ".join(machine), st.bold("Host") + "      ", " " * 10)
    soft = [f"Python {v['python'] or 'unknown'}"]
    soft.append(f"torch {h.torch.version} ({h.torch.flavour} build)" if h.torch else "no torch")
    soft += [f"{name} driver {ver}" for name, ver in sorted(v["drivers"].items()) if ver]
    present = [f"{k} {ver}" for k, ver in v["packages"].items() if ver]
    # DeepSpeed is optional everywhere: named only when present, as the peers do
    absent = [k for k, ver in v["packages"].items() if not ver and k != "deepspeed"]
    if absent:
        present.append("not installed: " + ", ".join(absent))
    lines += view.wrap(" · ".join(soft + present), st.bold("Software") + "  ", " " * 10)
    if not h.devices:
        lines.append(st.bold("Hardware") + "  no device of an accelerator vendor")
        return lines
    if not view.verbose:
        # Identical devices on one line each kind; the per-device table is in --verbose and
        # the devices this process sees are listed below.
        groups: dict[tuple[str, str, str, str], int] = {}
        for d in h.devices:
            name = d.name or (f"PCI device {d.pci_device_id}" if d.pci_device_id else "unnamed")
            key = (name, d.vendor, d.arch or "", _gib(d.memory_bytes))
            groups[key] = groups.get(key, 0) + 1
        label = st.bold("Hardware") + "  "
        for (name, vendor, arch, mem), n in groups.items():
            detail = ", ".join(x for x in (vendor, arch, mem) if x)
            lines += view.wrap(f"{n} × {name} ({detail})", label, " " * 10)
            label = " " * 10
        return lines
    rows = [
        [
            str(i),
            d.vendor,
            d.name or (f"PCI device {d.pci_device_id}" if d.pci_device_id else "unnamed"),
            d.arch or "",
            d.pci_bus_id or "",
            _gib(d.memory_bytes),
        ]
        for i, d in enumerate(h.devices)
    ]
    # Every PCI function of an accelerator vendor: the backends below decide which of
    # them are accelerators (a cloud VM's VGA function is listed here, not used there).
    lines.append(st.bold("Devices of accelerator vendors"))
    lines += _table(rows, view=view)
    return lines


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
        state = {"selected": st.green, "broken": st.red, "available": st.green}.get(
            c.state, lambda s: s
        )(c.state)
        origin = [f"{c.origin} {c.version}"] if view.verbose else []
        rows.append([mark, c.name, state, *origin, c.reason])
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
    from ._registry import get_from_report

    view = view or _View(verbose=True)
    from ._protocol import Capabilities
    from ._registry import plugin_call

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
) -> str:
    view = view or _View()
    lines = render_host(report, st, view)
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


def _json(obj: Any) -> str:
    import json

    return json.dumps(obj, indent=2, sort_keys=False)


# -- commands ------------------------------------------------------------------------------


def _confirmation(args: argparse.Namespace, report: SelectionReport, env: dict[str, str]) -> Any:
    """The opt-in runtime check, or None when --confirm was not given."""
    if not getattr(args, "confirm", False):
        return None
    if report.host.simulated:
        raise UsageError(
            "--confirm asks the real runtime of this machine and cannot check a simulated host",
            "--confirm without --host",
            "drop one of the two flags",
        )
    from ._confirm import confirm
    from ._registry import get_from_report

    return confirm(get_from_report(report), report.host, env)


def render_confirmation(conf: Any, st: _Style) -> list[str]:
    if not getattr(conf, "checked", True):  # nothing disagreed: the runtime was not reached
        fix = f" Fix: {conf.fix}" if conf.fix else ""
        return [
            st.bold("Runtime check")
            + f"  {st.red('could not check')}: {conf.message} ({conf.seconds:.2f} s).{fix}"
        ]
    mark = st.green("agrees") if conf.ok else st.red("DISAGREES")
    return [st.bold("Runtime check") + f"  {mark}: {conf.message} ({conf.seconds:.2f} s)"]


def cmd_env(args: argparse.Namespace) -> int:
    report, env = _report_env(args)
    extra = [
        w
        for w in (*cut_short(report), *misspelled_variables(env), *unknown_archs(report))
        if w not in report.warnings
    ]
    if extra:
        from ._record import replace

        report = replace(report, warnings=(*report.warnings, *extra))
    settings = settings_for(report, env)
    conf = _confirmation(args, report, env)
    if args.json:
        from ._registry import get_from_report

        d = {"schema_version": JSON_SCHEMA_VERSION, "command": "env", **report.to_dict()}
        from ._protocol import Capabilities
        from ._registry import plugin_call

        backend = get_from_report(report)
        dev = report.devices[0] if report.devices else None
        caps = plugin_call(
            report.chosen,
            "capabilities",
            lambda: backend.capabilities(dev, host=report.host),
            Capabilities,
        )
        d["capabilities"] = caps.to_dict()
        d["settings"] = settings
        d["versions"] = versions_of(report.host)
        d["confirmation"] = conf.to_dict() if conf is not None else None
        emit(_json(d))
    else:
        st = _Style(sys.stdout)
        view = _View(verbose=getattr(args, "verbose", False))
        emit(render_env(report, st, report.debug, settings, view))
        if conf is not None:
            emit("\n" + "\n".join(render_confirmation(conf, st)))
    return 0 if conf is None or conf.ok else 1


def cmd_plugins(args: argparse.Namespace) -> int:
    report = _report(args)
    if args.json:
        emit(
            _json(
                {
                    "schema_version": JSON_SCHEMA_VERSION,
                    "command": "plugins",
                    "discovery": report.discovery,
                    "plugins": [c.to_dict(debug=report.debug) for c in report.candidates],
                }
            )
        )
    else:
        emit("\n".join(render_backends(report, _Style(sys.stdout), report.debug)))
    if args.check and report.broken:
        names = ", ".join(f"{b.name} ({b.origin})" for b in report.broken)
        print(f"hwbackends: broken plugin(s): {names}", file=sys.stderr)
        return 1
    return 0


def cmd_devices(args: argparse.Namespace) -> int:
    report, env = _report_env(args)
    conf = _confirmation(args, report, env)
    if args.json:
        emit(
            _json(
                {
                    "schema_version": JSON_SCHEMA_VERSION,
                    "command": "devices",
                    "backend": report.chosen,
                    "devices": [d.to_dict() for d in report.devices],
                    "visibility": report.visibility,
                    "warnings": list(report.warnings),
                    "confirmation": conf.to_dict() if conf is not None else None,
                }
            )
        )
        return 0 if conf is None or conf.ok else 1
    st = _Style(sys.stdout)
    lines = [f"backend {report.chosen}", *render_devices(report, st)]
    steps = (report.visibility or {}).get("steps") or []
    if steps:
        lines.append(st.bold("How it was resolved"))
        lines += [f"  {s}" for s in steps]
    if report.warnings:
        lines += [st.yellow(f"! {w}") for w in report.warnings]
    if conf is not None:
        lines += render_confirmation(conf, st)
    emit("\n".join(lines))
    return 0 if conf is None or conf.ok else 1


def cmd_explain(args: argparse.Namespace) -> int:
    report, env = _report_env(args)
    conf = _confirmation(args, report, env)
    if args.json:
        d = {"schema_version": JSON_SCHEMA_VERSION, "command": "explain", **report.to_dict()}
        d["confirmation"] = conf.to_dict() if conf is not None else None
        emit(_json(d))
        return 0 if conf is None or conf.ok else 1
    st = _Style(sys.stdout)
    lines = [
        st.bold("Chosen") + f"  {report.chosen} — {report.reason} [rule: {report.rule}]",
        "",
        st.bold("Candidates"),
    ]
    for c in report.candidates:
        lines.append(
            f"  {_MARK[c.state]} {c.name} [{c.state}] priority={c.priority} "
            f"from {c.origin} {c.version} ({c.target}) {c.probe_ms:.2f} ms"
        )
        if c.probe:
            lines.append(
                f"      hardware present: {c.probe.hardware_present}; "
                f"software ready: {c.probe.software_ready}"
            )
            lines += [f"      evidence: {e}" for e in c.probe.evidence]
        lines.append(f"      {c.reason}")
        if c.probe and c.probe.hint:
            lines.append(f"      fix: {c.probe.hint}")
    lines += ["", st.bold("Environment read")]
    lines += [f"  {k}={'(unset)' if v is None else repr(v)}" for k, v in report.env_read.items()]
    lines += ["", st.bold("Timings")]
    lines += [f"  {k}: {v:.3f} ms" for k, v in report.timings_ms.items()]
    lines.append(f"  discovery method: {report.discovery}")
    if report.warnings:
        lines += ["", st.bold("Warnings"), *[f"  ! {w}" for w in report.warnings]]
    if conf is not None:
        lines += ["", *render_confirmation(conf, st)]
    emit("\n".join(lines))
    return 0 if conf is None or conf.ok else 1


#: Commands whose answer a runtime check can confirm; the others refuse --confirm.
_CONFIRMABLE = ("env", "devices", "explain")


def parse_indices(text: str) -> list[int]:
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or not all(p.isdigit() and p.isascii() for p in parts):
        raise UsageError(
            f"pin {text!r} is not a list of physical device indices",
            "comma-separated non-negative integers such as 2,0",
            "see `hwbackends devices` for the physical indices",
        )
    return [int(p) for p in parts]


def cmd_pin(args: argparse.Namespace) -> int:
    import shlex

    from ._registry import get_from_report

    indices = parse_indices(args.indices)
    report, env = _report_env(args)
    backend = get_from_report(report)
    # the indices are the ones `hwbackends devices` shows under this environment
    from ._errors import VisibilityError
    from ._registry import plugin_call
    from .visibility._common import UNKNOWN_INDEX_FIX

    try:
        assignment = plugin_call(
            report.chosen,
            "visibility_env",
            lambda: backend.visibility_env(indices, host=report.host, env=env),
            dict,
            passthrough=(VisibilityError,),  # a selection the runtime cannot express: the user's
        )
    except VisibilityError as exc:
        if exc.fix != UNKNOWN_INDEX_FIX:
            raise
        # the library's fix is Python advice; a command-line user lists indices with a command
        same = " ".join(
            [
                *(["--host", shlex.quote(args.host)] if args.host else []),
                *(f"--env {shlex.quote(e)}" for e in args.env or []),
            ]
        )
        raise UsageError(
            exc.what,
            exc.expected,
            f"run `hwbackends devices{' ' + same if same else ''}` to list the physical indices "
            "and pick from them",
        ) from None
    from .visibility import visibility_unset

    unset = [k for k in visibility_unset(backend) if k not in assignment]
    if args.json:
        emit(
            _json(
                {
                    "schema_version": JSON_SCHEMA_VERSION,
                    "command": "pin",
                    "backend": backend.name,
                    "physical": indices,
                    "set": assignment,
                    "unset": unset,
                }
            )
        )
        return 0
    words = [f"{k}={shlex.quote(v)}" for k, v in assignment.items()]
    prefix = f"env {' '.join('-u ' + k for k in unset)} " if unset else ""
    emit(prefix + " ".join(words))
    return 0


def cmd_smoke(args: argparse.Namespace) -> int:
    if args.host or os.environ.get("HWBACKENDS_HOST"):
        raise UsageError(
            "smoke runs real code on this machine and cannot use a simulated host",
            "no --host and no HWBACKENDS_HOST",
            "drop --host (use `hwbackends env --host FILE` to inspect a simulated machine)",
        )
    from ._smoke import run_smoke

    env = dict(os.environ)
    env.update(parse_env_overrides(args.env or []))
    log = (lambda line: None) if args.json else emit
    if args.backend:
        _check_backend_option(args.backend)
    from ._errors import BackendUnavailableError
    from ._target import DEFAULT_BACKEND_FIX

    try:
        result = run_smoke(backend=args.backend, env=env, log=log)
    except BackendUnavailableError as exc:
        if not args.backend:
            raise
        # the library's own fix names its Python argument; here the choice is an option
        hint = "" if exc.fix in (None, DEFAULT_BACKEND_FIX) else f"{exc.fix.rstrip('.')}, or "
        raise BackendUnavailableError(
            f"--backend {args.backend}: {exc.what}",
            exc.expected,
            f"{hint}drop --backend to smoke-test the backend `hwbackends env` selects"
            + ("" if hint else ", or remove that reason first"),
        ) from None
    if args.json:
        emit(
            _json(
                {
                    "schema_version": JSON_SCHEMA_VERSION,
                    "command": "smoke",
                    "ok": True,
                    **result.to_dict(),
                }
            )
        )
    else:
        total = sum(result.timings_s.values())
        emit(f"smoke ok on {result.backend} in {total:.2f} s")
    return 0


def cmd_launch_plan(args: argparse.Namespace) -> int:
    from .distributed import launch_plan

    script = list(args.script)
    if script[:1] == ["--"]:  # an explicit separator is allowed, not needed
        script = script[1:]
    env, host = _inputs(args)
    plan = launch_plan(
        args.nproc_per_node,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        rdzv_endpoint=args.rdzv_endpoint,
        script=script or ["train.py"],
        tp_size=args.tp_size,
        fsdp_size=args.fsdp_size,
        backend=args.backend,
        env=env,
        host=host,
        scheduler="slurm" if args.scheduler else None,
    )
    if args.json:
        print(
            _json(
                {"schema_version": JSON_SCHEMA_VERSION, "command": "launch-plan", **plan.to_dict()}
            )
        )
        return 0
    if args.scheduler is not None:  # the script alone on stdout, so it can be redirected
        print(plan.sbatch if args.scheduler == "slurm" else plan.sbatch_torchrun, end="")
        for p in plan.problems:
            print(f"hwbackends: problem: {p}", file=sys.stderr)
        return 1 if plan.problems else 0
    st = _Style(sys.stdout)
    lines = [
        st.bold("Launch plan") + f"  {plan.backend} · collective {plan.collective} · "
        f"{plan.nnodes} node(s) × {plan.nproc_per_node} process(es) = world size "
        f"{plan.world_size} · this is node {plan.node_rank}",
        "",
        st.bold("Per local rank"),
    ]
    rows = [
        [
            f"LOCAL_RANK={r.local_rank}",
            f"RANK={r.rank}",
            r.torch_device,
            "→ physical " + (",".join(map(str, r.physical)) or "-"),
        ]
        for r in plan.ranks
    ]
    lines += _table(rows)
    if plan.node_env or plan.node_unset:
        shown = " ".join(f"{k}={v}" for k, v in plan.node_env.items())
        lines.append(
            f"  node environment: {shown}"
            + (f" (unset {', '.join(plan.node_unset)})" if plan.node_unset else "")
        )
    lines += [
        "",
        st.bold("torchrun"),
        f"  {plan.torchrun}",
        "",
        st.bold("accelerate launch"),
        f"  {plan.accelerate}",
    ]
    if plan.problems:
        lines += ["", st.yellow(st.bold("Problems"))]
        lines += [st.yellow(f"  ! {p}") for p in plan.problems]
    print("\n".join(lines))
    return 1 if plan.problems else 0


def build_parser() -> argparse.ArgumentParser:
    import argparse

    from . import __version__

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            # argparse names the valid commands but not the one meant (Python < 3.14)
            rest = message.partition("invalid choice: ")[2]
            if rest:
                import difflib

                typed = rest.split("'")[1] if rest.count("'") >= 2 else ""
                choices = rest.partition("choose from")[2].replace("'", " ").split(", ")
                near = difflib.get_close_matches(typed, [c.strip() for c in choices], n=1)
                if near:
                    message += f"; did you mean {near[0]!r}?"
            super().error(message)

    def common_options(*, confirm: bool = True, host: bool = True) -> Parser:
        """The shared options; one a command refuses is parsed (so the refusal can explain
        itself) but left out of that command's --help."""

        def shown(text: str, where: bool) -> str:
            return text if where else argparse.SUPPRESS

        common = Parser(add_help=False)
        common.add_argument(
            "--host", metavar="FILE", help=shown("simulate the host described by FILE", host)
        )
        common.add_argument(
            "--root",
            metavar="DIR",
            help=shown(
                "read the machine's sys/, proc/ and dev/ under DIR instead of / (a container "
                "image, or a copied tree)",
                host,
            ),
        )
        common.add_argument(
            "--env",
            metavar="KEY=VALUE",
            action="append",
            help="simulate an environment variable (repeatable)",
        )
        common.add_argument("--backend", metavar="NAME", help="force a backend by name")
        common.add_argument("--json", action="store_true", help="print JSON (schema_version 1)")
        common.add_argument(
            "--confirm",
            action="store_true",
            help=shown(
                "also ask the real runtime, in a child process, and compare (starts the runtime)",
                confirm,
            ),
        )
        return common

    common = common_options()
    no_confirm = common_options(confirm=False)

    p = Parser(
        prog="hwbackends",
        description="Which accelerator this process will use, which devices it sees, and why.",
    )
    p.add_argument("--version", action="version", version=f"hwbackends {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sp = sub.add_parser("env", parents=[common], help="the full report (the main job)")
    sp.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="everything: each backend's row, device UUIDs, full reasons with their sources",
    )
    sp.set_defaults(func=cmd_env)
    sp = sub.add_parser("plugins", parents=[no_confirm], help="every backend plugin and its state")
    sp.add_argument("--check", action="store_true", help="exit 1 when any plugin is broken")
    sp.set_defaults(func=cmd_plugins)
    sp = sub.add_parser("devices", parents=[common], help="visible devices, logical → physical")
    sp.set_defaults(func=cmd_devices)
    sp = sub.add_parser("explain", parents=[common], help="why this backend was chosen")
    sp.set_defaults(func=cmd_explain)
    sp = sub.add_parser(
        "pin",
        parents=[no_confirm],
        help="print the environment that selects these physical devices",
    )
    sp.add_argument("indices", help="physical device indices in the wanted order, e.g. 2,0")
    sp.set_defaults(func=cmd_pin)
    sp = sub.add_parser(
        "launch-plan",
        parents=[no_confirm],
        help="per-rank devices and the torchrun / accelerate launch commands",
    )
    sp.add_argument(
        "--nproc-per-node",
        type=int,
        default=None,
        help="processes on this node (default: one per visible device)",
    )
    sp.add_argument("--nnodes", type=int, default=1, help="number of nodes (default: 1)")
    sp.add_argument(
        "--node-rank", type=int, default=0, help="this node's index, 0 to nnodes-1 (default: 0)"
    )
    sp.add_argument(
        "--rdzv-endpoint",
        metavar="HOST:PORT",
        default=None,
        help="rank 0's address, reachable from every node (required with --nnodes > 1; on one "
        "node it sets the master address and port)",
    )
    sp.add_argument(
        "--scheduler",
        choices=("slurm", "slurm-torchrun"),
        default=None,
        help="print only an sbatch script: 'slurm' has srun start one task per device (the "
        "script calls hwbackends.distributed.init_process_group), 'slurm-torchrun' has srun "
        "start torchrun once per node; Slurm supplies the rendezvous address",
    )
    sp.add_argument("--tp-size", type=int, default=None, help="DistributedConfig tp_size to check")
    sp.add_argument("--fsdp-size", type=int, default=None, help="DistributedConfig fsdp_size")
    sp.add_argument(
        "script",
        nargs=argparse.REMAINDER,
        help="the training command and its arguments, last (default: train.py)",
    )
    sp.set_defaults(func=cmd_launch_plan)
    sp = sub.add_parser(
        "smoke",
        parents=[common_options(confirm=False, host=False)],
        help="load, generate and train a tiny model with the recommended settings",
    )
    sp.set_defaults(func=cmd_smoke)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    prepare_stdout()  # help, usage errors and every report survive an ASCII-only terminal
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["env", *(argv or [])])
    debug = os.environ.get("HWBACKENDS_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")
    try:
        if getattr(args, "confirm", False) and args.command not in _CONFIRMABLE:
            raise UsageError(
                f"--confirm does not apply to `hwbackends {args.command}`",
                f"--confirm with {', '.join(_CONFIRMABLE)}",
                f"run `hwbackends devices --confirm` to check the devices, then {args.command}",
            )
        from ._stdio import plugin_output_to_stderr

        with plugin_output_to_stderr():  # a plugin that prints cannot corrupt the report
            return int(args.func(args))
    except HwBackendsError as exc:
        if debug:
            raise
        print(f"hwbackends: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # a real Ctrl-C: a plugin's own is reported as its fault
        print("hwbackends: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # pragma: no cover - last resort, still one line
        if debug:
            raise
        print(
            f"hwbackends: internal error: {type(exc).__name__}: {exc} "
            "(rerun with HWBACKENDS_DEBUG=1 for the traceback and report it)",
            file=sys.stderr,
        )
        return 3
