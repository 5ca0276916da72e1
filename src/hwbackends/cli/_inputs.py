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
    from hwbackends._selection.report import BackendStatus, SelectionReport
    from hwbackends._selection.verdict import Verdict


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
    from hwbackends._selection.snapshot import environ_snapshot

    live = environ_snapshot()  # the command reads the environment once
    overrides = parse_env_overrides(args.env or [])
    # --host '' is a mistake to report, not a request for the real machine; the variable
    # counts from --env too (it was ignored there)
    from_env = overrides.get("HWBACKENDS_HOST", live.get("HWBACKENDS_HOST")) or None
    host_file = args.host if args.host is not None else from_env
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
    if root is not None and not any(os.path.isdir(os.path.join(root, d)) for d in _TREE):
        raise UsageError(  # else an empty folder reads as a confident CPU-only machine
            f"--root {root!r} holds none of sys/, proc/ and dev/",
            "the root of a machine's file tree, holding sys/, proc/ and dev/",
            "pass the folder above them (a container image's root, or a copied tree)",
        )
    if host_file is not None:
        host = Host.from_file(host_file)
    else:
        from hwbackends._selection.registry import installed_backends

        host = Host.from_system(root or "/", backends=installed_backends({**live, **overrides}))
    from hwbackends._base.versions import ROOT_SOURCE

    base: dict[str, str] = dict(host.env) if host.simulated and host.env is not None else {}
    if not host.simulated or host.source.startswith(ROOT_SOURCE):  # a tree: this process's env
        base = live
    else:
        # The library's own switches still come from the real environment.
        base.update({k: v for k, v in live.items() if k.startswith("HWBACKENDS_")})
        base.pop("HWBACKENDS_HOST", None)
    base.update(overrides)
    if args.backend is not None:
        _check_backend_option(args.backend)
        base["HWBACKENDS_BACKEND"] = args.backend
    return base, host


#: The folders of a machine's tree the reader looks in; a --root without any is no tree.
_TREE = ("sys", "proc", "dev")


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
    # a list, as HWBACKENDS_BACKEND takes one: the first usable wins
    wanted = [w.strip().lower() for w in name.split(",")]
    missing = [w for w in wanted if w not in names]
    if not missing:
        return
    near = difflib.get_close_matches(missing[0], names, n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(map(repr, near))}?)" if near else ""
    raise UsageError(
        f"--backend {name!r} names no installed backend{hint}"
        if len(wanted) == 1
        else f"--backend {name!r}: {missing[0]!r} is no installed backend{hint}",
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
    from hwbackends._integrations.launch import LaunchError
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
    try:
        train = plan_training(backend=report.chosen, env=env, host=report.host)
    except LaunchError as exc:  # TrainingArguments would fail here: the load still works
        return {
            "from_pretrained": pre.to_dict(),
            "training_arguments": None,
            "error": {"what": exc.what, "expected": exc.expected, "fix": exc.fix},
            "problem": str(exc),
        }
    return {"from_pretrained": pre.to_dict(), "training_arguments": train.to_dict()}


def install_line(report: SelectionReport) -> dict[str, Any]:
    """The one command that adds Transformers, Accelerate and kernels with the torch build for
    this machine: the core's ``[transformers]`` extra, the plugin of the hardware found, and
    the torch wheel index of that hardware (``--extra-index-url``, so PyPI still serves the
    rest and pip takes the index's build, the higher local version).

    The hardware and the index are the devices' verdicts' (``SelectionReport.verdicts``): the
    chosen backend's when it serves a device here, else those of a backend that can serve one
    once installed (a cuda machine with a CPU torch wants the CUDA build), with the wheel
    index that backend names for them; else the CPU (no device any installed backend can
    serve, such as a GPU no PyTorch wheel has kernels for). The pip is this interpreter's
    (``python -m pip``: a bare ``pip`` may be another Python's); ``argv`` is the command as
    words, ``command`` the same quoted for a POSIX shell, and ``needed`` False when all of it
    is installed already."""
    import shlex
    import sys

    from hwbackends._base.files import normalize_dist_name
    from hwbackends._base.versions import TORCH_INDEXES
    from hwbackends._discovery.catalog import install_spec

    target, verdict = _install_target(report)
    checkout, core = _core_spec()
    argv = [sys.executable, "-m", "pip", "install", core]
    flavour: str | None = "cpu"
    name = "cpu"
    hint = ""
    if target is not None:
        name = target.name
        argv.append(install_spec(target.origin, checkout)[0])
        flavour, hint = _flavour_and_hint(target.name, report)
    own = flavour if "://" in (flavour or "") else TORCH_INDEXES.get(flavour or "")
    # the verdict's index for these devices (cu126 for a Pascal GPU), unless the backend's
    # torch is a vendor's own (no index at all: one would replace it)
    index = ((verdict.torch_index if verdict is not None else None) or own) if own else None
    if (
        verdict is not None
        and not verdict.torch_index
        and verdict.fix
        and verdict.state == "install"
    ):
        # its fix installs torch from no PyTorch index (a Jetson's JetPack wheel, a build from
        # source on ppc64le): the fix is the step after this line, never the stock index
        index, hint = None, verdict.fix
    if index and verdict is not None and verdict.torch_pin:  # the newest has no kernels for it
        argv.append(f"torch=={verdict.torch_pin}.*")
    if index:
        argv += ["--extra-index-url", index]
    packages = report.host.packages if report.host is not None else {}
    have = [n for n in ("torch", "transformers", "accelerate", "kernels") if packages.get(n)]
    return {
        "backend": name,
        "command": shlex.join(argv),
        "argv": argv,
        "torch_index": index,
        "needed": not (_ready(report, name) and len(have) == 4),
        "installed": {normalize_dist_name(n): packages.get(n) for n in have},
        # a vendor stack without a PyTorch wheel index (Neuron, Gaudi, Ascend...): its own
        # install step, from the plugin
        "then": None if index else (hint or None),
    }


def _install_target(report: SelectionReport) -> tuple[BackendStatus | None, Verdict | None]:
    """Decides whose hardware the Install line is for, from the devices' verdicts: the
    backend's status and the verdict whose build it installs, or ``(None, None)`` (the CPU)."""
    from hwbackends._selection.verdict import install_choice

    name, verdict = install_choice(report.verdicts, report.chosen)
    for c in report.candidates:
        if name is not None and c.name == name:
            return c, verdict
    return None, None


def _core_spec() -> tuple[str | None, str]:
    """The checkout the core runs from (``.`` when it is the working directory; None when
    installed) and the core's requirement with its ``[transformers]`` extra."""
    from hwbackends._discovery.catalog import core_checkout

    checkout = core_checkout()
    if checkout is not None and os.path.realpath(checkout) == os.path.realpath(os.getcwd()):
        checkout = "."  # run from the checkout: the short form the README gives
    return checkout, (f"{checkout}/[transformers]" if checkout else "hwbackends[transformers]")


def _flavour_and_hint(name: str, report: SelectionReport) -> tuple[str | None, str]:
    """A backend's torch source for the Install line, and the step it shows after it: the
    flavour of PyTorch's index (a ``TORCH_INDEXES`` key) or the wheel index URL the plugin
    declares (``torch_source``), with its own install hint; no index where its torch is the
    vendor's (``TORCH_PREINSTALLED``: nothing to install once ready; instructions text: that
    text), nor for a backend that steps aside because another claims the installed torch (a
    CUDA index there would replace the vendor's torch)."""
    from hwbackends._base.protocol import torch_source
    from hwbackends._selection.registry import get

    status = next((c for c in report.candidates if c.name == name), None)
    if status is not None and status.replaced_by and status.state != "disabled":
        return None, ""  # it steps aside on this torch: nothing of its own to install
    try:
        b = get(name)
        flavour = getattr(b, "torch_flavour", None)
        hint = str(getattr(b, "install_hint", "") or "")
        kind, text = torch_source(getattr(b, "torch_source", None), flavour)
    except Exception:  # a broken plugin: its own line in the report says so
        return None, ""
    if kind == "stock":
        return flavour, hint
    if kind == "index":
        return text, hint
    if kind == "vendor":
        return None, text
    return None, "" if _ready(report, name) else hint


def _ready(report: SelectionReport, name: str) -> bool:
    """Whether the Install line's backend is the one already serving this process (and, for
    the CPU, no device waits for another torch build)."""
    if name != report.chosen:
        return False
    return name != "cpu" or not any(v.state == "install" for v in report.verdicts)


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
