"""``hwbackends pin``: the environment that selects the given physical devices."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwbackends.cli._inputs import _report_env, parse_indices
from hwbackends.cli._output import JSON_SCHEMA_VERSION, UsageError, _json, emit

if TYPE_CHECKING:
    import argparse


def cmd_pin(args: argparse.Namespace) -> int:
    import shlex

    from hwbackends._selection.registry import get_from_report

    indices = parse_indices(args.indices)
    report, env = _report_env(args)
    backend = get_from_report(report)
    name = report.chosen
    if name == "cpu" and report.hidden and not args.backend:
        # the devices to pin are the hidden backend's: its variables are what needs setting
        from hwbackends._selection.registry import get

        name = str(report.hidden[0]["backend"])
        backend = get(name)
    elif name == "cpu":
        return _pin_cpu(args, indices)
    # the indices are the ones `hwbackends devices` shows under this environment
    from hwbackends._base.errors import VisibilityError
    from hwbackends._selection.registry import plugin_call
    from hwbackends._visibility.base import UNKNOWN_INDEX_FIX

    try:
        assignment = plugin_call(
            name,
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
    from hwbackends._integrations.launch_steps import bad_variable_names
    from hwbackends.visibility import visibility_unset

    unset = [k for k in visibility_unset(backend) if k not in assignment]
    bad = bad_variable_names([*assignment, *unset])
    if bad:  # printed as NAME=value and `env -u NAME`: a bad name would be shell code
        from hwbackends._base.errors import PluginError

        raise PluginError(
            f"the {report.chosen} backend declares invalid environment variable names: "
            f"{', '.join(bad)}",
            "names of letters, digits and _ that do not start with a digit",
            "update the plugin or report this to its authors; nothing was printed",
        )
    if args.json:
        emit(
            _json(
                {
                    "schema_version": JSON_SCHEMA_VERSION,
                    "command": "pin",
                    "backend": name,
                    "physical": indices,
                    "set": assignment,
                    "unset": unset,
                }
            )
        )
        return 0
    words = [f"{k}={shlex.quote(v)}" for k, v in assignment.items()]
    prefix = f"env {' '.join('-u ' + shlex.quote(k) for k in unset)} " if unset else ""
    emit(prefix + " ".join(words))
    return 0


def _pin_cpu(args: argparse.Namespace, indices: list[int]) -> int:
    """The cpu backend's one device, ``cpu → 0`` in ``hwbackends devices``, needs no variable."""
    if indices != [0]:
        raise UsageError(
            f"pin {args.indices!r} names a device the cpu backend does not have",
            "0, the one cpu device (`hwbackends devices` lists it as cpu → 0)",
            "run `hwbackends pin 0`, or use a host with accelerators",
        )
    if args.json:
        emit(
            _json(
                {
                    "schema_version": JSON_SCHEMA_VERSION,
                    "command": "pin",
                    "backend": "cpu",
                    "physical": indices,
                    "set": {},
                    "unset": [],
                }
            )
        )
        return 0
    emit("# the cpu backend reads no visibility variable: its device 0 is always visible")
    return 0
