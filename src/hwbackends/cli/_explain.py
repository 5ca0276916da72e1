"""``hwbackends explain``: why this backend, candidate by candidate."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from hwbackends.cli._inputs import _confirmation, _report_env
from hwbackends.cli._output import JSON_SCHEMA_VERSION, _json, emit
from hwbackends.cli._render import _MARK, _Style, render_confirmation

if TYPE_CHECKING:
    import argparse


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
