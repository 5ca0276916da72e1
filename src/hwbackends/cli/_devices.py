"""``hwbackends devices``: logical → physical devices under the visibility variables."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from hwbackends.cli._inputs import _confirmation, _report_env
from hwbackends.cli._output import JSON_SCHEMA_VERSION, _json, emit
from hwbackends.cli._render import _Style, render_confirmation, render_devices

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
