"""``hwbackends smoke``: prove the recommended settings with a tiny model."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from hwbackends.cli._inputs import _check_backend_option, parse_env_overrides
from hwbackends.cli._output import JSON_SCHEMA_VERSION, UsageError, _json, emit

if TYPE_CHECKING:
    import argparse


def cmd_smoke(args: argparse.Namespace) -> int:
    if args.host or os.environ.get("HWBACKENDS_HOST"):
        given = (
            f"--host {args.host}"
            if args.host
            else f"HWBACKENDS_HOST={os.environ['HWBACKENDS_HOST']} is set"
        )
        raise UsageError(
            f"smoke runs real code on this machine and cannot use a simulated host ({given})",
            "no --host and no HWBACKENDS_HOST",
            ("drop --host" if args.host else "unset HWBACKENDS_HOST")
            + " (use `hwbackends env --host FILE` to inspect a simulated machine)",
        )
    if getattr(args, "root", None) is not None:
        raise UsageError(
            "smoke runs real code on this machine and cannot read another tree "
            f"(--root {args.root})",
            "no --root",
            "drop --root (use `hwbackends env --root DIR` to inspect that tree)",
        )
    if args.backend is not None:
        _check_backend_option(args.backend)
    from hwbackends._integrations.smoke import run_smoke

    env = dict(os.environ)
    env.update(parse_env_overrides(args.env or []))
    log = (lambda line: None) if args.json else emit
    from hwbackends._base.errors import BackendUnavailableError
    from hwbackends._selection.target import DEFAULT_BACKEND_FIX

    try:
        result = run_smoke(backend=args.backend, env=env, log=log, model=args.model)
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
