"""The ``hwbackends`` command: ``env``, ``plugins``, ``devices``, ``explain``, ``pin``,
``launch-plan`` and ``smoke``.

Exit codes: 0 the answer was given; 1 the answer is "no": ``plugins --check`` found a broken
plugin, ``launch-plan`` found a problem, ``--confirm`` saw the runtime disagree; 2 bad input
(one line on stderr naming the problem and the fix); 3 an internal error. Tracebacks appear
only with ``HWBACKENDS_DEBUG=1``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
    host_file = args.host or os.environ.get("HWBACKENDS_HOST") or None
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
    if host_file:
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
        base["HWBACKENDS_BACKEND"] = args.backend
    return base, host


def _report(args: argparse.Namespace) -> SelectionReport:
    return _report_env(args)[0]


def _report_env(args: argparse.Namespace) -> tuple[SelectionReport, dict[str, str]]:
    from ._registry import explain

    env, host = _inputs(args)
    return explain(env=env, host=host), env


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


def render_settings(settings: dict[str, Any], st: _Style) -> list[str]:
    pre, train = settings["from_pretrained"], settings["training_arguments"]
    lines = [st.bold("Recommended settings")]
    lines.append("  " + _call("from_pretrained", pre["kwargs"]))
    for k, why in pre["reasons"].items():
        lines.append(st.dim(f"      {k}: {why}"))
    lines.append("  " + _call("TrainingArguments", train["kwargs"]))
    for k, why in train["reasons"].items():
        lines.append(st.dim(f"      {k}: {why}"))
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


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in rows
    ]


def render_host(report: SelectionReport, st: _Style) -> list[str]:
    h = report.host
    torch = (
        f"torch {h.torch.version} ({h.torch.flavour} build)" if h.torch else "torch not installed"
    )
    src = "this machine" if h.source == "system" else f"simulated from {h.source}"
    lines = [
        st.bold("Host") + f"  {h.system} {h.machine} · {h.cpu.model or 'CPU'} "
        f"({h.cpu.count} cores) · {torch} · {src}"
    ]
    if h.devices:
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
        lines += _table(rows)
    else:
        lines.append(st.bold("Devices of accelerator vendors") + "  none")
    return lines


def render_backends(report: SelectionReport, st: _Style, debug: bool = False) -> list[str]:
    rows = []
    for c in report.candidates:
        mark = _MARK[c.state]
        state = {"selected": st.green, "broken": st.red, "available": st.green}.get(
            c.state, lambda s: s
        )(c.state)
        rows.append([mark, c.name, state, f"{c.origin} {c.version}", c.reason])
    lines = [st.bold("Backends")]
    lines += _table(rows)
    for c in report.candidates:
        if c.probe and c.probe.hint and c.probe.hardware_present and not c.probe.available:
            lines.append(f"    {c.name}: fix: {c.probe.hint}")
        if debug and c.traceback:
            lines.append(st.dim("    " + c.traceback.replace("\n", "\n    ").rstrip()))
    return lines


def render_devices(report: SelectionReport, st: _Style) -> list[str]:
    lines = [st.bold("Devices this process sees") + "  (logical → physical)"]
    rows = [
        [
            d.torch_device,
            "→",
            str(d.physical_index),
            d.label or "",
            d.name or "",
            d.arch or "",
            d.pci_bus_id or "",
            _gib(d.memory_bytes),
        ]
        for d in report.devices
    ]
    lines += _table(rows) if rows else ["  none"]
    vis = report.visibility or {}
    read = {k: v for k, v in (vis.get("variables") or {}).items()}
    if read:
        shown = ", ".join(f"{k}={'unset' if v is None else repr(v)}" for k, v in read.items())
        lines.append(st.dim(f"  variables: {shown}"))
    elif "note" in vis:
        lines.append(st.dim(f"  {vis['note']}"))
    return lines


def render_capabilities(report: SelectionReport, st: _Style) -> list[str]:
    from ._registry import get_from_report

    backend = get_from_report(report)
    dev = report.devices[0] if report.devices else None
    caps = backend.capabilities(dev, host=report.host)
    attn = ", ".join(dict.fromkeys(a.name for a in caps.attention))
    lines = [
        st.bold("Capabilities") + f"  ({caps.arch or caps.device_type})",
        f"  precision   {caps.training_precision} for training · dtypes {', '.join(caps.dtypes)}",
        f"  attention   {attn}",
        f"  collective  {caps.distributed_backend}",
        f"  hub kernels {caps.kernel_device or 'no device key'}",
    ]
    by_status: dict[str, list[str]] = {}
    for q in caps.quantization:
        by_status.setdefault(q.status, []).append(q.method)
    for status in ("supported", "partial", "unsupported"):
        if by_status.get(status):
            lines.append(f"  quant {status:<11} {', '.join(by_status[status])}")
    for q in caps.quantization:
        if q.status == "partial":
            lines.append(st.dim(f"      {q.method}: {q.reason}"))
    for lim in caps.limitations:
        drop = (
            f" (drop {', '.join(lim.report_to_exclude)} from report_to)"
            if lim.report_to_exclude
            else ""
        )
        lines.append(f"  limitation  {lim.text}{drop}")
    return lines


def render_env(
    report: SelectionReport, st: _Style, debug: bool, settings: dict[str, Any] | None = None
) -> str:
    lines = render_host(report, st)
    lines.append("")
    lines += render_backends(report, st, debug)
    lines.append("")
    lines.append(
        st.bold("Chosen") + f"  {st.green(report.chosen)} (device type {report.device_type!r}) — "
        f"{report.reason} [rule: {report.rule}]"
    )
    lines.append("")
    lines += render_devices(report, st)
    lines.append("")
    lines += render_capabilities(report, st)
    if settings is not None:
        lines.append("")
        lines += render_settings(settings, st)
    if report.warnings:
        lines.append("")
        lines.append(st.yellow(st.bold("Warnings")))
        lines += [st.yellow(f"  ! {w}") for w in report.warnings]
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
    mark = st.green("agrees") if conf.ok else st.red("DISAGREES")
    return [st.bold("Runtime check") + f"  {mark}: {conf.message} ({conf.seconds:.2f} s)"]


def cmd_env(args: argparse.Namespace) -> int:
    report, env = _report_env(args)
    settings = settings_for(report, env)
    conf = _confirmation(args, report, env)
    if args.json:
        from ._registry import get_from_report

        d = {"schema_version": JSON_SCHEMA_VERSION, "command": "env", **report.to_dict()}
        backend = get_from_report(report)
        dev = report.devices[0] if report.devices else None
        d["capabilities"] = backend.capabilities(dev, host=report.host).to_dict()
        d["settings"] = settings
        d["confirmation"] = conf.to_dict() if conf is not None else None
        print(_json(d))
    else:
        st = _Style(sys.stdout)
        print(render_env(report, st, report.debug, settings))
        if conf is not None:
            print("\n" + "\n".join(render_confirmation(conf, st)))
    return 0 if conf is None or conf.ok else 1


def cmd_plugins(args: argparse.Namespace) -> int:
    report = _report(args)
    if args.json:
        print(
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
        print("\n".join(render_backends(report, _Style(sys.stdout), report.debug)))
    if args.check and report.broken:
        names = ", ".join(f"{b.name} ({b.origin})" for b in report.broken)
        print(f"hwbackends: broken plugin(s): {names}", file=sys.stderr)
        return 1
    return 0


def cmd_devices(args: argparse.Namespace) -> int:
    report, env = _report_env(args)
    conf = _confirmation(args, report, env)
    if args.json:
        print(
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
    print("\n".join(lines))
    return 0 if conf is None or conf.ok else 1


def cmd_explain(args: argparse.Namespace) -> int:
    report, env = _report_env(args)
    conf = _confirmation(args, report, env)
    if args.json:
        d = {"schema_version": JSON_SCHEMA_VERSION, "command": "explain", **report.to_dict()}
        d["confirmation"] = conf.to_dict() if conf is not None else None
        print(_json(d))
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
    print("\n".join(lines))
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
    assignment = backend.visibility_env(indices, host=report.host, env=env)
    from .visibility import visibility_unset

    unset = [k for k in visibility_unset(backend) if k not in assignment]
    if args.json:
        print(
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
    print(prefix + " ".join(words))
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
    log = (lambda line: None) if args.json else print
    result = run_smoke(backend=args.backend, env=env, log=log)
    if args.json:
        print(
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
        print(f"smoke ok on {result.backend} in {total:.2f} s")
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
    )
    if args.json:
        print(
            _json(
                {"schema_version": JSON_SCHEMA_VERSION, "command": "launch-plan", **plan.to_dict()}
            )
        )
        return 0
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

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--host", metavar="FILE", help="simulate the host described by FILE")
    common.add_argument(
        "--root",
        metavar="DIR",
        help="read the machine's sys/, proc/ and dev/ under DIR instead of / (a container "
        "image, or a copied tree)",
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
        help="also ask the real runtime, in a child process, and compare (starts the runtime)",
    )

    p = argparse.ArgumentParser(
        prog="hwbackends",
        description="Which accelerator this process will use, which devices it sees, and why.",
    )
    p.add_argument("--version", action="version", version=f"hwbackends {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sp = sub.add_parser("env", parents=[common], help="the full report (the main job)")
    sp.set_defaults(func=cmd_env)
    sp = sub.add_parser("plugins", parents=[common], help="every backend plugin and its state")
    sp.add_argument("--check", action="store_true", help="exit 1 when any plugin is broken")
    sp.set_defaults(func=cmd_plugins)
    sp = sub.add_parser("devices", parents=[common], help="visible devices, logical → physical")
    sp.set_defaults(func=cmd_devices)
    sp = sub.add_parser("explain", parents=[common], help="why this backend was chosen")
    sp.set_defaults(func=cmd_explain)
    sp = sub.add_parser(
        "pin", parents=[common], help="print the environment that selects these physical devices"
    )
    sp.add_argument("indices", help="physical device indices in the wanted order, e.g. 2,0")
    sp.set_defaults(func=cmd_pin)
    sp = sub.add_parser(
        "launch-plan",
        parents=[common],
        help="per-rank devices and the torchrun / accelerate launch commands",
    )
    sp.add_argument(
        "--nproc-per-node",
        type=int,
        default=None,
        help="processes on this node (default: one per visible device)",
    )
    sp.add_argument("--nnodes", type=int, default=1)
    sp.add_argument("--node-rank", type=int, default=0)
    sp.add_argument("--rdzv-endpoint", metavar="HOST:PORT", default=None)
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
        parents=[common],
        help="load, generate and train a tiny model with the recommended settings",
    )
    sp.set_defaults(func=cmd_smoke)
    return p


def main(argv: Sequence[str] | None = None) -> int:
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
        return int(args.func(args))
    except HwBackendsError as exc:
        if debug:
            raise
        print(f"hwbackends: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
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
