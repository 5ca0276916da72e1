"""What a command works from: --host/--root/--env, the backend option, the selection report, and
the checks that turn a report into problem lines.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hwbackends.cli._output import UsageError

if TYPE_CHECKING:
    import argparse

    from hwbackends._machine.host import Host
    from hwbackends._selection.report import SelectionReport


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
    from hwbackends._machine.host import Host

    overrides = parse_env_overrides(args.env or [])
    # --host '' is a mistake to report, not a request for the real machine
    host_file = args.host if args.host is not None else os.environ.get("HWBACKENDS_HOST") or None
    from_env = os.environ.get("HWBACKENDS_HOST") or None
    if args.host is not None and from_env is not None and from_env != args.host:
        import sys

        print(
            f"hwbackends: note: --host {args.host} is used; HWBACKENDS_HOST={from_env} is "
            "ignored (the option wins over the variable)",
            file=sys.stderr,
        )
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
    if host_file is not None:
        host = Host.from_file(host_file)
    else:
        from hwbackends._selection.registry import installed_backends

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
    if root is not None and os.path.realpath(root) != os.path.realpath("/"):
        from hwbackends._base.record import replace
        from hwbackends.cli._render import ROOT_SOURCE

        # another tree, not this machine: reports say so, and --confirm cannot check it
        host = replace(host, source=ROOT_SOURCE + root)
    if args.backend is not None:
        _check_backend_option(args.backend)
        base["HWBACKENDS_BACKEND"] = args.backend
    return base, host


def _check_backend_option(name: str) -> None:
    """--backend names the option the user typed, not the variable it is carried in."""
    import difflib

    from hwbackends._selection.registry import installed_names

    names = installed_names()
    if not name.strip():
        raise UsageError(
            f"--backend {name!r} is empty",
            f"one of {', '.join(names)}",
            "name a backend, or leave --backend out to use the selected one",
        )
    if name.strip().lower() in names:
        return
    near = difflib.get_close_matches(name.strip().lower(), names, n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(map(repr, near))}?)" if near else ""
    raise UsageError(
        f"--backend {name!r} names no installed backend{hint}",
        f"one of {', '.join(names)}",
        "pick an installed name (`hwbackends plugins` lists them) or install that plugin",
    )


def cut_short(report: SelectionReport) -> list[str]:
    """Visibility lists that end early, as warnings naming the entry: the process then sees
    fewer devices than the variable lists, and only `devices` used to say why."""
    import re

    vis = report.visibility or {}
    steps = [str(x) for x in vis.get("steps") or ()]
    out = []
    read = ""  # the variable whose entries the following steps walk through
    for step in steps:
        m = re.match(r"([A-Z][A-Z0-9_]*=\S.*?)\.?$", step)
        if m:
            read = m.group(1) + ": "
        if re.search(r"(the list ends|ends the list)\b.*; \d+ kept\.$", step):
            out.append(
                f"{read}{step} The process sees only the devices before that entry "
                f"({', '.join(d.torch_device for d in report.devices) or 'none'}). Fix: correct "
                "or remove the entry; `hwbackends devices` shows each step"
            )
    return out


def misspelled_variables(env: Mapping[str, str]) -> list[str]:
    """A set variable one letter away from a visibility variable the installed backends read
    (``CUDA_VISIBLE_DEVICE``) is otherwise ignored by every runtime without a word."""
    import difflib

    from hwbackends._selection.registry import watch_lists

    known = watch_lists()[0]
    out = []
    for key in sorted(env):
        if key in known or key.startswith("HWBACKENDS_"):
            continue
        near = difflib.get_close_matches(key, known, n=1, cutoff=0.9)
        if near:
            out.append(
                f"{key} is set, but no runtime reads it (did you mean {near[0]}?). Fix: rename "
                f"it to {near[0]}, or unset it"
            )
    return out


def unknown_archs(report: SelectionReport) -> list[str]:
    """Visible devices whose arch the chosen backend's tables do not describe (``sm_999`` in
    a host file): its capability answers for them are guesses, which must not pass unsaid."""
    from hwbackends._selection.registry import get_from_report, plugin_call

    backend = get_from_report(report)
    method = getattr(backend, "known_archs", None)
    if method is None:  # a backend written to the protocol alone keeps no such list
        return []
    known = plugin_call(report.chosen, "known_archs", method)
    if not known:
        return []
    if not isinstance(known, (tuple, list)) or not all(isinstance(a, str) for a in known):
        from hwbackends._base.errors import PluginError

        raise PluginError(
            f"the {report.chosen} backend is broken: known_archs() returned {type(known).__name__}",
            "a tuple of architecture names, or None",
            "update or uninstall the plugin",
        )
    by_arch: dict[str, list[str]] = {}
    for d in report.devices:
        if d.arch and d.arch not in known:
            by_arch.setdefault(d.arch, []).append(
                f"{d.torch_device} ({d.name})" if d.name else d.torch_device
            )
    origin = next((c.origin for c in report.candidates if c.name == report.chosen), "")
    return [
        f"{', '.join(devs)}: arch {arch!r} is not one the {report.chosen} backend knows "
        f"(known: {', '.join(known)}); its answers about dtypes, attention and quantization on "
        f"{'this device' if len(devs) == 1 else 'these devices'} are uncertain. Fix: correct "
        f"the arch (in the host file, or the driver's report), or update {origin or 'the plugin'}"
        for arch, devs in by_arch.items()
    ]


def _report(args: argparse.Namespace) -> SelectionReport:
    return _report_env(args)[0]


def _report_env(args: argparse.Namespace) -> tuple[SelectionReport, dict[str, str]]:
    from hwbackends._base.errors import BackendUnavailableError
    from hwbackends._selection.registry import explain

    env, host = _inputs(args)
    try:
        return explain(env=env, host=host), env
    except BackendUnavailableError as exc:
        if not args.backend:
            raise
        # --backend travels as HWBACKENDS_BACKEND; the message names what the user typed
        var = f"HWBACKENDS_BACKEND={args.backend.strip().lower()}"
        opt = f"--backend {args.backend} was given"
        raise BackendUnavailableError(
            exc.what.replace(var, opt),
            exc.expected,
            (exc.fix or "").replace("unset HWBACKENDS_BACKEND", "drop --backend") or None,
        ) from None


def settings_for(
    report: SelectionReport, env: dict[str, str], model: str | None = None
) -> dict[str, Any]:
    """The recommended from_pretrained / TrainingArguments settings, without importing torch
    (Transformers only for ``model``: the folder or cached hub id ``--model`` names)."""
    from hwbackends._integrations.rank import process_rank
    from hwbackends._selection.target import RankError, resolve_target
    from hwbackends.accelerate import plan_training
    from hwbackends.transformers import plan_for_target

    try:
        target = resolve_target(report.chosen, env=env, host=report.host, rank_of=process_rank)
    except RankError as exc:  # no settings are right for this process: say why instead
        return {
            "from_pretrained": None,
            "training_arguments": None,
            "error": {"what": exc.what, "expected": exc.expected, "fix": exc.fix},
            "problem": str(exc),
        }
    pre = plan_for_target(target, torch_objects=False, model=model)
    train = plan_training(backend=report.chosen, env=env, host=report.host)
    return {"from_pretrained": pre.to_dict(), "training_arguments": train.to_dict()}


def install_line(report: SelectionReport) -> dict[str, Any]:
    """The one command that adds Transformers, Accelerate and kernels with the torch build for
    this machine: the core's ``[transformers]`` extra, the plugin of the hardware found, and
    the torch wheel index of that hardware (``--extra-index-url``, so PyPI still serves the
    rest and pip takes the index's build, the higher local version).

    The hardware is the chosen backend's, else that of a backend whose hardware is present
    but not ready (a cuda machine with a CPU torch wants the CUDA build), else the CPU."""
    import shlex

    from hwbackends._base.versions import TORCH_INDEXES
    from hwbackends._discovery.catalog import core_checkout, install_command
    from hwbackends._selection.registry import get

    target = next(
        (c for c in report.candidates if c.name == report.chosen and c.name != "cpu"),
        next(
            (
                c
                for c in report.candidates
                if c.probe is not None and c.probe.hardware_present and c.name != "cpu"
                and c.state in ("unavailable", "available")
            ),
            None,
        ),
    )  # fmt: skip
    checkout = core_checkout()
    if checkout is not None and os.path.realpath(checkout) == os.path.realpath(os.getcwd()):
        checkout = "."  # run from the checkout: the short form the README gives
    core = f"{checkout}/[transformers]" if checkout else "hwbackends[transformers]"
    words = ["pip", "install", shlex.quote(core)]
    flavour: str | None = "cpu"
    name = "cpu"
    hint = ""
    if target is not None:
        name = target.name
        words += install_command(target.origin, checkout)[0].split()[2:]
        try:
            b = get(target.name)
            flavour = getattr(b, "torch_flavour", None)
            hint = str(getattr(b, "install_hint", "") or "")
        except Exception:  # a broken plugin: its own line in the report says so
            flavour = None
    index = TORCH_INDEXES.get(flavour or "")
    if index:
        words += ["--extra-index-url", index]
    return {
        "backend": name,
        "command": " ".join(words),
        "torch_index": index,
        # a vendor stack without a PyTorch wheel index (Neuron, Gaudi, Ascend...): its own
        # install step, from the plugin
        "then": None if index else (hint or None),
    }


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
    from hwbackends._selection.confirm import confirm
    from hwbackends._selection.registry import get_from_report

    return confirm(get_from_report(report), report.host, env)


#: Commands whose answer a runtime check can confirm; the others refuse --confirm.
_CONFIRMABLE = ("env", "devices", "explain")


def parse_indices(text: str) -> list[int]:
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or not all(
        p.isdigit() and p.isascii() and len(p.lstrip("0")) <= 9 for p in parts
    ):  # bounded before int(): a 5,000-digit index is a usage error, not a crash
        raise UsageError(
            f"pin {text[:80]!r} is not a list of physical device indices",
            "comma-separated non-negative integers such as 2,0",
            "see `hwbackends devices` for the physical indices",
        )
    return [int(p.lstrip("0") or "0") for p in parts]
