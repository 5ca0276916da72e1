"""What a bug reporter pastes: the system facts beside the versions (OS release, glibc,
numpy, the torch build's CUDA/cuDNN/NCCL or HIP/RCCL, the Accelerate config in use) and the
Markdown block of ``hwbackends env --issue``, as ``transformers env`` prints one.

Read from files and package metadata only: no torch import, no GPU runtime (``env`` stays
well under a second)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from hwbackends._base.files import _read_text
from hwbackends.cli._render import ROOT_SOURCE, build_name, shown, versions_of

if TYPE_CHECKING:
    from collections.abc import Mapping

    from hwbackends._machine.host import Host
    from hwbackends._selection.report import SelectionReport

#: The most of an Accelerate config file the report shows.
_CONFIG_LIMIT = 8192


def os_release(root: str = "/") -> str | None:
    """``PRETTY_NAME`` of ``etc/os-release`` (else ``usr/lib/os-release``) under ``root``
    (https://www.freedesktop.org/software/systemd/man/latest/os-release.html)."""
    for rel in ("etc/os-release", "usr/lib/os-release"):
        for line in (_read_text(os.path.join(root, rel), 1 << 14) or "").splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "PRETTY_NAME":
                return value.strip().strip("\"'") or None
    return None


def glibc() -> str | None:
    """This process's C library (``confstr(_CS_GNU_LIBC_VERSION)``: ``glibc 2.36``), or None
    where it is another libc (musl) or the platform has no such name."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        return None
    return text or None


def _package(packages: Mapping[str, str], prefix: str) -> str | None:
    """The version of the first installed distribution whose name starts with ``prefix``
    (``nvidia-cudnn-`` matches ``nvidia-cudnn-cu12``)."""
    return next((v for k, v in sorted(packages.items()) if k.startswith(prefix)), None)


def runtime_versions(host: Host) -> dict[str, str | None]:
    """The GPU runtime the installed torch build carries: CUDA and HIP from its
    ``torch/version.py`` (read as text), cuDNN and NCCL from the ``nvidia-cudnn-*`` /
    ``nvidia-nccl-*`` wheels it depends on. RCCL ships inside ROCm wheels without a version
    of its own: None."""
    t = host.torch
    return {
        "cuda": t.cuda if t else None,
        "cudnn": _package(host.packages, "nvidia-cudnn-"),
        "nccl": _package(host.packages, "nvidia-nccl-"),
        "hip": t.hip if t else None,
        "rccl": None,
    }


def accelerate_config(env: Mapping[str, str]) -> dict[str, Any]:
    """The config file ``accelerate launch`` reads by default and its text: the path
    ``accelerate/commands/config/config_args.py`` (Accelerate 1.15) computes,
    ``$HF_HOME/accelerate/default_config.yaml`` (``HF_HOME`` defaults to
    ``$XDG_CACHE_HOME/huggingface``, that to ``~/.cache/huggingface``)."""
    home = env.get("HF_HOME") or os.path.join(
        env.get("XDG_CACHE_HOME") or "~/.cache", "huggingface"
    )
    path = os.path.join(os.path.expanduser(home), "accelerate", "default_config.yaml")
    return {"path": path, "text": _read_text(path, _CONFIG_LIMIT)}


def system_facts(host: Host, env: Mapping[str, str]) -> dict[str, Any]:
    """The facts beyond ``versions_of`` a bug report needs. OS release and glibc are this
    machine's (OS release also a ``--root`` tree's); a simulated host has neither."""
    this = host.source == "system"
    root = host.source.removeprefix(ROOT_SOURCE) if host.source.startswith(ROOT_SOURCE) else None
    return {
        "os_release": os_release() if this else os_release(root) if root else None,
        "glibc": glibc() if this else None,
        "numpy": host.packages.get("numpy"),
        "runtime": runtime_versions(host),
        "accelerate_config": accelerate_config(env) if this else None,
    }


def render_issue(report: SelectionReport, env: Mapping[str, str]) -> str:
    """The Markdown block to paste into an issue (``hwbackends env --issue``)."""
    from hwbackends._version import __version__

    h = report.host
    v, facts = versions_of(h), system_facts(h, env)
    lines = [
        "Copy and paste the text below into your GitHub issue.",
        "",
        f"- `hwbackends` version: {__version__}",
        f"- Platform: {_platform(report, facts)}",
        f"- Python version: {v['python'] or 'unknown'}",
        f"- PyTorch version: {_torch_line(report, facts)}",
        f"- NumPy version: {facts['numpy'] or 'not installed'}",
    ]
    lines += [f"- {k} version: {x or 'not installed'}" for k, x in v["packages"].items()]
    lines += [f"- {k} driver: {x}" for k, x in sorted(v["drivers"].items()) if x]
    return "\n".join(lines + _selection_lines(report) + _config_lines(facts["accelerate_config"]))


def _platform(report: SelectionReport, facts: Mapping[str, Any]) -> str:
    """The OS, its release and glibc, and where a simulated host came from."""
    h = report.host
    parts = (f"{h.system} {h.machine}", facts["os_release"], facts["glibc"])
    platform = shown(", ".join(x for x in parts if x))
    return platform + (f" (simulated from {h.source})" if h.simulated else "")


def _torch_line(report: SelectionReport, facts: Mapping[str, Any]) -> str:
    """The torch build and the runtime versions it was built with."""
    h = report.host
    torch = f"{h.torch.version} ({build_name(h)} build)" if h.torch else "not installed"
    rt = facts["runtime"]
    runtime = ", ".join(f"{k.upper() if k != 'cudnn' else 'cuDNN'} {x}" for k, x in rt.items() if x)
    return torch + (f"; {runtime}" if runtime else "")


def _selection_lines(report: SelectionReport) -> list[str]:
    """The chosen backend, the devices this process sees and the visibility variables read."""
    visible = ", ".join(
        f"{d.torch_device} → physical {d.physical_index}"
        + (f" ({shown(d.name)})" if d.name else "")
        for d in report.devices
    )
    variables = (report.visibility or {}).get("variables") or {}
    named = ", ".join(f"{k}={'unset' if x is None else x!r}" for k, x in variables.items())
    return [
        f"- Chosen backend: {report.chosen} ({shown(report.reason)}) [rule: {report.rule}]",
        f"- Devices this process sees: {visible or 'none'}",
        f"- Visibility variables: {named or 'none read'}",
        f"- Warnings: {len(report.warnings)}"
        + "".join(f"\n  - {shown(w)}" for w in report.warnings),
    ]


def _config_lines(config: Mapping[str, Any] | None) -> list[str]:
    """The Accelerate config file in use, as a YAML block."""
    if config is None:
        return ["- Accelerate config: not read (not this machine)"]
    if config["text"] is None:
        return [f"- Accelerate config: none ({config['path']} does not exist)"]
    body = config["text"].rstrip("\n").replace("```", "'''")
    return [
        f"- Accelerate config ({config['path']}):",
        "",
        "  ```yaml",
        *[f"  {x}" for x in body.splitlines()],
        "  ```",
    ]
