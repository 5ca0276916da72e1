"""``hwbackends plugins``: every discovered backend, its state and origin; ``--check`` for CI;
``--doc NAME`` for one backend's Markdown page (``_plugin_doc``)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from hwbackends.cli._inputs import _report
from hwbackends.cli._output import JSON_SCHEMA_VERSION, _json, emit
from hwbackends.cli._render import _Style, fit, render_backends

if TYPE_CHECKING:
    import argparse


def cmd_plugins(args: argparse.Namespace) -> int:
    if getattr(args, "hosts", None) and not getattr(args, "doc", None):
        from hwbackends._base.errors import HwBackendsError

        raise HwBackendsError(
            "--hosts was given without --doc",
            "--hosts DIR only with --doc NAME",
            "add --doc NAME, or drop --hosts",
        )
    if getattr(args, "doc", None):
        from hwbackends.cli._plugin_doc import cmd_plugin_doc

        return cmd_plugin_doc(args)
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
        emit(fit("\n".join(render_backends(report, _Style(sys.stdout), report.debug))))
    if args.check:  # the edits plugin calls were seen to make: warnings, not failures
        from hwbackends._base.guard import NOT_UNDONE

        for w in (w for w in report.warnings if NOT_UNDONE in w):
            print(f"hwbackends: warning: {w}", file=sys.stderr)
    if args.check and report.broken:
        names = ", ".join(f"{b.name} ({b.source})" for b in report.broken)
        print(f"hwbackends: broken plugin(s): {names}", file=sys.stderr)
        for why in dict.fromkeys(f"  {b.name}: {b.reason}" for b in report.broken):
            print(why, file=sys.stderr)  # the same reason and fix every report gives
        return 1
    return 0
