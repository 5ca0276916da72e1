"""Version arithmetic and torch builds: what probes need, without the Transformers readers.

Split from ``_facts`` so that selection imports only this: PEP 440 ordering of release
numbers (``packaging`` only for pre-, post- and dev-releases), the PyTorch wheel index of each
torch build, and why an installed torch cannot drive a device.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from hwbackends._machine.host import Host

__all__ = [
    "TORCH_INDEXES",
    "describes_drivers",
    "is_version",
    "release",
    "torch_build_problem",
    "torch_install_hint",
    "version_in_range",
]


# -- versions ------------------------------------------------------------------------------


def release(version: str | None) -> tuple[int, ...]:
    """The leading release numbers of a version (``"2.8.0+cu128"`` -> ``(2, 8, 0)``).

    :param version: a version string; a pre-release tail ends the numbers (``"0.18.0rc1"`` ->
        ``(0, 18, 0)``), and None or text without a leading number gives ``()``.
    """
    out: list[int] = []
    for part in (version or "").split("+")[0].split("."):
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        out.append(int(digits))
        if len(digits) != len(part):
            break  # "0rc1": a pre-release tail ends the release numbers
    return tuple(out)


def _release_key(text: str) -> tuple[int, ...] | None:
    parts = text.split(".")
    if not all(p.isascii() and p.isdigit() for p in parts):
        return None
    key = [int(p) for p in parts]
    while len(key) > 1 and key[-1] == 0:
        key.pop()  # 1.0 == 1.0.0 in PEP 440
    return tuple(key)


def _plain_order(version: str | None, low: str, high: str | None) -> bool | None:
    """The PEP 440 answer for plain release numbers (and a local label such as ``+cu128``)
    without importing ``packaging``; None when anything else needs it (pre, post, dev)."""
    public, plus, _local = (version or "").strip().partition("+")
    v = _release_key(public)
    lo = _release_key(low)
    hi = _release_key(high) if high is not None else ()
    if v is None or lo is None or hi is None or (plus and not _local):
        return None
    # a local label sorts after its public version: 2.8.0+cu128 > 2.8.0
    above_low = v > lo or (v == lo)
    below_high = high is None or v < hi
    return above_low and below_high


def version_in_range(version: str | None, low: str, high: str | None = None) -> bool | None:
    """``low <= version < high`` ordered as PEP 440 orders versions; None when unreadable.

    Pre-releases and dev releases sort before their release (``0.18.0rc1 < 0.18.0``), as in
    ``packaging.version``, which is what Transformers' own version checks use.

    :param version: the version to check (an installed package's); None gives None.
    :param low: the lowest version in the range (included).
    :param high: the first version above the range (excluded); None: no upper bound.
    """
    plain = _plain_order(version, low, high)
    if plain is not None:
        return plain
    from packaging.version import InvalidVersion, Version

    try:
        v, lo = Version(version or ""), Version(low)
        hi = Version(high) if high is not None else None
    except InvalidVersion:
        return None
    return lo <= v and (hi is None or v < hi)


#: A PEP 440 version, local part included: ``packaging.version.VERSION_PATTERN``
#: (https://packaging.python.org/en/latest/specifications/version-specifiers/#appendix-parsing-version-strings-with-regular-expressions).
_PEP440 = r"""
    v?(?:(?:[0-9]+)!)?[0-9]+(?:\.[0-9]+)*
    (?:[-_\.]?(?:alpha|a|beta|b|preview|pre|c|rc)[-_\.]?[0-9]*)?
    (?:-[0-9]+|[-_\.]?(?:post|rev|r)[-_\.]?[0-9]*)?
    (?:[-_\.]?dev[-_\.]?[0-9]*)?
    (?:\+[a-z0-9]+(?:[-_\.][a-z0-9]+)*)?
"""


def is_version(text: str) -> bool:
    """Whether ``text`` is a PEP 440 version (``2.8.0+cu128``, ``2.9.0.dev20250101``)."""
    import re

    return re.fullmatch(_PEP440, text.strip(), re.VERBOSE | re.IGNORECASE) is not None


# -- torch wheels --------------------------------------------------------------------------

_WHEEL_SOURCE = "https://pytorch.org/get-started/locally/ (install selector: pip + index URL)"
TORCH_INDEXES: Mapping[str, str] = {
    "cuda": "https://download.pytorch.org/whl/cu128",
    "rocm": "https://download.pytorch.org/whl/rocm6.4",
    "xpu": "https://download.pytorch.org/whl/xpu",
    "cpu": "https://download.pytorch.org/whl/cpu",
}
"""Torch build flavour -> the PyTorch wheel index that serves it (``pip install torch
--index-url URL``), as PyTorch's install selector gives it."""


def torch_install_hint(flavour: str) -> str:
    """The pip command that installs a torch build of ``flavour`` (cuda, rocm, xpu, cpu).

    Source: the PyTorch install selector (https://pytorch.org/get-started/locally/); the CUDA
    and ROCm index names are the ones current for torch 2.8 and later (cu128, rocm6.4).

    :param flavour: a key of ``TORCH_INDEXES``.
    :raises ValueError: when no wheel index is known for ``flavour``.
    """
    index = TORCH_INDEXES.get(flavour)
    if index is None:
        raise ValueError(f"no torch wheel index is known for {flavour!r}")
    return f"pip install torch --index-url {index}"


def torch_build_problem(host: Host, flavour: str) -> tuple[str, str] | None:
    """Why the host's torch cannot drive a ``flavour`` device, and the command that fixes it.

    :param host: the machine whose torch build (``Host.torch``) is checked.
    :param flavour: the build the device needs, a key of ``TORCH_INDEXES`` (``"rocm"``).
    :returns: ``(problem, fix)``, or None when the installed torch is such a build.
    :raises ValueError: when no wheel index is known for ``flavour``.
    """
    fix = torch_install_hint(flavour)
    if host.torch is None:
        return "torch is not installed", fix
    if host.torch.flavour != flavour:
        return (
            f"the installed torch {host.torch.version} is a {host.torch.flavour} build, not a "
            f"{flavour} build",
            f"{fix} (replaces the {host.torch.flavour} build)",
        )
    return None


def describes_drivers(host: Host) -> bool:
    """Whether the host says anything about kernel drivers and ``/dev`` nodes.

    The real machine always does, and so does a machine's tree read under another root
    (``Host.from_system(root=...)``, ``--root``: its ``/sys`` and ``/dev`` are what that
    machine shows). A host file that lists neither ``drivers`` nor ``device_nodes`` leaves
    them unknown: plugins should then assume the driver is loaded rather than report a
    missing driver the file never described.

    :param host: the machine, real or simulated.
    """
    tree = not host.simulated or host.source.startswith(ROOT_SOURCE)
    return tree or bool(host.drivers) or bool(host.device_nodes)


#: The ``Host.source`` of a machine read under another root than ``/``: that tree, not the
#: machine running this (``Host.from_system(root=...)``, ``hwbackends env --root``).
ROOT_SOURCE = "root "
