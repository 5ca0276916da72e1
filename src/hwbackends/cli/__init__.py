"""The ``hwbackends`` command: ``env``, ``plugins``, ``devices``, ``explain``, ``pin``,
``launch-plan`` and ``smoke``.

Exit codes: 0 the answer was given; 1 the answer is "no": ``plugins --check`` found a broken
plugin, ``launch-plan`` found a problem, ``--confirm`` saw the runtime disagree or could not
ask it (the report then says "could not check", why, and the fix, e.g. installing torch); 2
bad input (one line on stderr naming the problem and the fix); 3 an internal error.
Tracebacks appear only with ``HWBACKENDS_DEBUG=1``.

One module per command (``_env``, ``_plugins``, ``_devices``, ``_explain``, ``_pin``,
``_smoke``, ``_launch_plan``), over ``_inputs`` (what a command works from), ``_render`` (text
output) and ``_output`` (the standard output a command owns); this module parses the command
line and dispatches.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from hwbackends._base.errors import HwBackendsError
from hwbackends.cli._devices import cmd_devices
from hwbackends.cli._env import cmd_env
from hwbackends.cli._explain import cmd_explain
from hwbackends.cli._inputs import _CONFIRMABLE
from hwbackends.cli._launch_plan import cmd_launch_plan
from hwbackends.cli._output import JSON_SCHEMA_VERSION, UsageError, prepare_stdout
from hwbackends.cli._pin import cmd_pin
from hwbackends.cli._plugins import cmd_plugins
from hwbackends.cli._render import _Style as _Style  # the tests' style switch
from hwbackends.cli._smoke import cmd_smoke

if TYPE_CHECKING:
    import argparse

__all__ = ["JSON_SCHEMA_VERSION", "build_parser", "main"]


# -- output ----------------------------------------------------------------------------------


# -- shared inputs -------------------------------------------------------------------------


# -- rendering -----------------------------------------------------------------------------


# -- commands ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    import argparse

    from hwbackends._version import __version__

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
            message += self._option_hint(message)
            super().error(message)

        def _option_hint(self, message: str) -> str:
            """``; did you mean '--json'?`` for a misspelt option (``--jsn``): argparse only
            says it is unrecognized."""
            typed = message.partition("unrecognized arguments: ")[2].split()
            if not typed or not typed[0].startswith("--"):
                return ""
            import difflib

            known = set(self._option_string_actions)
            for action in self._actions:  # the commands' own options
                for sub in (getattr(action, "choices", None) or {}).values():
                    if isinstance(sub, argparse.ArgumentParser):
                        known.update(sub._option_string_actions)
            word = typed[0].partition("=")[0]
            near = difflib.get_close_matches(word, sorted(known), n=1, cutoff=0.6)
            return f"; did you mean {near[0]!r}?" if near else ""

    class Once(argparse.Action):
        """An option given once: a second ``--host`` would silently win over the first."""

        def __call__(
            self,
            parser: argparse.ArgumentParser,
            namespace: argparse.Namespace,
            values: Any,
            option_string: str | None = None,
        ) -> None:
            before = getattr(namespace, self.dest, None)
            if before is not None and before != values:
                parser.error(
                    f"{option_string} was given twice ({before!r}, then {values!r}); give it once"
                )
            setattr(namespace, self.dest, values)

    def common_options(*, confirm: bool = True, host: bool = True) -> Parser:
        """The shared options; one a command refuses is parsed (so the refusal can explain
        itself) but left out of that command's --help."""

        def shown(text: str, where: bool) -> str:
            return text if where else argparse.SUPPRESS

        common = Parser(add_help=False)
        common.add_argument(
            "--host",
            metavar="FILE",
            action=Once,
            help=shown("simulate the host described by FILE", host),
        )
        common.add_argument(
            "--root",
            metavar="DIR",
            action=Once,
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
        common.add_argument(
            "--backend",
            metavar="NAME",
            action=Once,
            help="force a backend by name (or a comma-separated list, first usable wins)",
        )
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
    sp.add_argument(
        "--issue",
        action="store_true",
        help="a Markdown block to paste into a bug report: OS release, glibc, numpy, the torch "
        "build's CUDA/cuDNN/NCCL or HIP, the Accelerate config, the versions and the choice",
    )
    sp.add_argument(
        "--model",
        metavar="MODEL",
        help="plan the settings for this model: a folder save_pretrained wrote, or a hub id "
        "already in the local cache (nothing is downloaded)",
    )
    sp.set_defaults(func=cmd_env)
    sp = sub.add_parser("plugins", parents=[no_confirm], help="every backend plugin and its state")
    sp.add_argument("--check", action="store_true", help="exit 1 when any plugin is broken")
    sp.add_argument(
        "--doc",
        metavar="NAME",
        help="print the Markdown page of the installed backend NAME (declarations, visibility, "
        "capability tables with sources)",
    )
    sp.add_argument(
        "--hosts",
        metavar="DIR",
        help="with --doc: add the devices of the host files DIR/*.json to the page",
    )
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
    sp.add_argument(
        "--model",
        metavar="MODEL",
        help="load this model instead of the tiny Llama: a folder save_pretrained wrote, or a "
        "hub id already in the local cache",
    )
    sp.set_defaults(func=cmd_smoke)
    return p


#: The commands, as build_parser registers them.
COMMANDS = ("env", "plugins", "devices", "explain", "pin", "launch-plan", "smoke")
#: Options of every command that take a value (``--host FILE``): a word after one is its value.
_VALUED = ("--host", "--root", "--env", "--backend")


def _command_first(argv: Sequence[str], commands: Sequence[str]) -> list[str]:
    """The synopsis ``hwbackends [COMMAND] [--host FILE] [--env KEY=VALUE ...]``: options may
    come before the command (``hwbackends --host F devices``), and without a command the
    command is ``env`` (``hwbackends --host F --json``)."""
    args = list(argv)
    if not args or args[0] in ("-h", "--help", "--version") or args[0] in commands:
        return args if args else ["env"]
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in _VALUED else 1
    if i < len(args):  # a command (or a misspelt one, which argparse then names)
        return [args[i], *args[:i], *args[i + 1 :]]
    return ["env", *args]


def _closed_streams() -> None:
    """A closed stdout or stderr (``>&-``) is None in Python: write to the null device
    instead, as if the output had been sent to /dev/null, rather than fail on the first
    write."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115


def main(argv: Sequence[str] | None = None) -> int:
    _closed_streams()
    prepare_stdout()  # help, usage errors and every report survive an ASCII-only terminal
    import warnings

    from hwbackends._base.errors import HwBackendsWarning

    # the report shows these itself (its warnings section); Python's copy would repeat them
    warnings.filterwarnings("ignore", category=HwBackendsWarning)
    parser = build_parser()
    args = parser.parse_args(_command_first(sys.argv[1:] if argv is None else argv, COMMANDS))
    debug = os.environ.get("HWBACKENDS_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")
    try:
        if getattr(args, "confirm", False) and args.command not in _CONFIRMABLE:
            raise UsageError(
                f"--confirm does not apply to `hwbackends {args.command}`",
                f"--confirm with {', '.join(_CONFIRMABLE)}",
                f"run `hwbackends devices --confirm` to check the devices, then {args.command}",
            )
        from hwbackends.cli._stdio import plugin_output_to_stderr

        with plugin_output_to_stderr():  # a plugin that prints cannot corrupt the report
            return int(args.func(args))
    except HwBackendsError as exc:
        if debug:
            raise
        from hwbackends.cli._output import escape_controls

        print(f"hwbackends: error: {escape_controls(str(exc))}", file=sys.stderr)
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
