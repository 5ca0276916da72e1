"""``hwbackends env``: the one-screen report of this machine."""

from __future__ import annotations

import sys
from functools import partial
from typing import TYPE_CHECKING, Any

from hwbackends.cli._inputs import (
    _confirmation,
    _report_env,
    cut_short,
    install_line,
    misspelled_variables,
    settings_for,
    unknown_archs,
)
from hwbackends.cli._output import JSON_SCHEMA_VERSION, _json, emit
from hwbackends.cli._render import (
    ROOT_SOURCE,
    _Style,
    _View,
    fit,
    render_confirmation,
    render_env,
    versions_of,
)

if TYPE_CHECKING:
    import argparse


def cmd_env(args: argparse.Namespace) -> int:
    report, env = _report_env(args)
    extra = [
        w
        for w in (*cut_short(report), *misspelled_variables(env), *unknown_archs(report))
        if w not in report.warnings
    ]
    settings = settings_for(report, env, model=getattr(args, "model", None))
    if settings.get("problem"):  # a rank without a device: the one answer that matters
        extra.insert(0, settings["problem"])
    if extra:
        from hwbackends._base.record import replace

        report = replace(report, warnings=(*report.warnings, *extra))
    conf = _confirmation(args, report, env)
    if getattr(args, "issue", False):
        from hwbackends.cli._issue import render_issue

        emit(render_issue(report, env))
        return 0
    if args.json:
        from hwbackends._selection.registry import get_from_report

        d = {"schema_version": JSON_SCHEMA_VERSION, "command": "env", **report.to_dict()}
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
        d["capabilities"] = caps.to_dict()
        d["settings"] = settings
        d["install"] = install_line(report)
        d["versions"] = versions_of(report.host)
        from hwbackends.cli._issue import system_facts

        d["system"] = system_facts(report.host, env)
        d["confirmation"] = conf.to_dict() if conf is not None else None
        d["evidence_sources"] = evidence_read(report)
        emit(_json(d))
    else:
        from hwbackends._base.settings import Settings
        from hwbackends._selection.order import device_names
        from hwbackends._selection.registry import get_from_report

        st = _Style(sys.stdout)
        view = _View(verbose=getattr(args, "verbose", False))
        names = device_names(
            report, env, partial(get_from_report, report), Settings.from_env(env).timeout
        )
        text = render_env(report, st, report.debug, settings, view, install_line(report), names)
        emit(fit(text, view.width))
        read = evidence_read(report) if view.verbose else None
        if read:
            text = " · ".join(f"{name}: {', '.join(srcs)}" for name, srcs in read.items())
            emit("\n".join(view.wrap(text, st.bold("Evidence read") + "  ", " " * 15)))
        if conf is not None:
            emit("\n" + "\n".join(render_confirmation(conf, st)))
    return 0 if conf is None or conf.ok else 1


def evidence_read(report: Any) -> dict[str, list[str]] | None:
    """Backend name -> the sources of evidence the machine reader consulted for it (a real
    machine only; a host file names none)."""
    # a real machine: this one, or a tree read under --root
    if report.host is None or not (
        report.host.source == "system" or report.host.source.startswith(ROOT_SOURCE)
    ):
        return None
    from hwbackends._base.guard import PluginFault
    from hwbackends._discovery.loading import installed_backends, meta_of
    from hwbackends._machine.evidence import sources_of

    out = {}
    for b in installed_backends():
        try:
            meta = meta_of(b)  # the declarations read once, under the guard, at load
        except PluginFault:
            continue
        srcs = sources_of(meta)
        if srcs:
            out[meta.name] = srcs
    return out
