"""``hwbackends devices``: logical → physical devices under the visibility variables."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from hwbackends.cli._inputs import _confirmation, _report_env
from hwbackends.cli._output import JSON_SCHEMA_VERSION, _json, emit
from hwbackends.cli._render import (
    _Style,
    _View,
    fit,
    hidden_warning,
    render_confirmation,
    render_devices,
    render_hidden,
)

if TYPE_CHECKING:
    import argparse


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
                    "hidden": [dict(h) for h in report.hidden],
                    "warnings": list(report.warnings),
                    "confirmation": conf.to_dict() if conf is not None else None,
                }
            )
        )
        return 0 if conf is None or conf.ok else 1
    st = _Style(sys.stdout)
    view = _View(verbose=True)
    lines = [f"backend {report.chosen}", *render_devices(report, st, view)]
    lines += render_hidden(report, st, view)
    steps = (report.visibility or {}).get("steps") or []
    if steps:
        lines.append(st.bold("How it was resolved"))
        lines += [x for s in steps for x in view.wrap(s, "  ", "    ")]
    for h in report.hidden:
        lines.append(st.bold(f"How {h['backend']}'s devices were read"))
        lines += [x for s in h["steps"] for x in view.wrap(s, "  ", "    ")]
    for w in report.warnings:
        if not hidden_warning(report, w):
            lines += [st.yellow(x) for x in view.wrap(w, "! ", "  ")]
    if conf is not None:
        lines += render_confirmation(conf, st)
    emit(fit("\n".join(lines), view.width))
    return 0 if conf is None or conf.ok else 1
