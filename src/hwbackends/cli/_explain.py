"""``hwbackends explain``: why this backend, candidate by candidate."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from hwbackends.cli._inputs import _confirmation, _report_env
from hwbackends.cli._output import JSON_SCHEMA_VERSION, _json, emit
from hwbackends.cli._render import (
    _MARK,
    _Style,
    _View,
    fit,
    hidden_warning,
    render_confirmation,
    render_hidden,
)

if TYPE_CHECKING:
    import argparse

    from hwbackends._selection.report import BackendStatus, SelectionReport


def cmd_explain(args: argparse.Namespace) -> int:
    report, env = _report_env(args)
    conf = _confirmation(args, report, env)
    if args.json:
        d = {"schema_version": JSON_SCHEMA_VERSION, "command": "explain", **report.to_dict()}
        d["confirmation"] = conf.to_dict() if conf is not None else None
        emit(_json(d))
        return 0 if conf is None or conf.ok else 1
    st = _Style(sys.stdout)
    view = _View(verbose=True)
    named = (env.get("HWBACKENDS_BACKEND") or "").strip().lower()
    lines = view.wrap(
        f"{report.chosen} — {report.reason} [rule: {report.rule}]", st.bold("Chosen") + "  ", "  "
    )
    lines += ["", st.bold("Candidates")]
    for c in report.candidates:
        lines += _candidate_lines(c, named, view)
    lines += _rest_lines(report, st, view)
    if conf is not None:
        lines += ["", *render_confirmation(conf, st)]
    emit(fit("\n".join(lines), view.width))
    return 0 if conf is None or conf.ok else 1


def _candidate_lines(c: BackendStatus, named: str, view: _View) -> list[str]:
    """Decides what is shown of one candidate: its state, probe answer, evidence, reason and
    (where the hardware is, or for the backend asked for) its fix."""
    w = "      "
    lines = view.wrap(
        f"{_MARK[c.state]} {c.name} [{c.state}] priority={c.priority} "
        f"from {c.origin} {c.version} ({c.target}) {c.probe_ms:.2f} ms",
        "  ",
        w,
    )
    if c.probe:
        lines.append(
            f"{w}hardware present: {c.probe.hardware_present}; "
            f"software ready: {c.probe.software_ready}"
        )
        lines += [x for e in c.probe.evidence for x in view.wrap(f"evidence: {e}", w, w + "  ")]
    lines += view.wrap(c.reason, w, w)
    # a fix is worth reading only where the hardware is, or for the backend asked for:
    # installing nine absent vendors' stacks fixes nothing
    if c.probe and c.fix and (c.probe.hardware_present or c.name == named):
        lines += view.wrap(f"fix: {c.fix}", w, w + "  ")
    return lines


def _rest_lines(report: SelectionReport, st: _Style, view: _View) -> list[str]:
    """Decides the sections after the candidates: hidden devices, the environment read,
    timings and the warnings not already shown with the hidden devices."""
    lines: list[str] = []
    if report.hidden:
        lines += ["", st.bold("Hidden by the visibility variables")]
        lines += ["  " + x for x in render_hidden(report, st, view)]
    lines += ["", st.bold("Environment read")]
    lines += [f"  {k}={'(unset)' if v is None else repr(v)}" for k, v in report.env_read.items()]
    lines += ["", st.bold("Timings")]
    lines += [f"  {k}: {v:.3f} ms" for k, v in report.timings_ms.items()]
    lines.append(f"  discovery method: {report.discovery}")
    shown = [x for x in report.warnings if not hidden_warning(report, x)]
    if shown:
        lines += ["", st.bold("Warnings")]
        lines += [y for x in shown for y in view.wrap(x, "  ! ", "    ")]
    return lines
