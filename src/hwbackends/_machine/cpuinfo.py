"""The CPU of a machine's tree (``--root``): its architecture and logical core count.

A tree copied from another machine says what CPU it had; this machine's ``os.uname()`` and
``os.cpu_count()`` say nothing about it (issue 34: a POWER9 tree got x86_64 wheel advice).
What the kernel writes, every read bounded and non-blocking (``_base.files``):

- ``/proc/cpuinfo``: each architecture's own ``show_cpuinfo`` writes its own keys (Linux
  ``arch/x86/kernel/cpu/proc.c``: ``vendor_id`` and ``flags``, with ``lm`` for 64-bit long
  mode; ``arch/arm64/kernel/cpuinfo.c``: ``CPU architecture: 8``; ``arch/arm/kernel/setup.c``:
  ``CPU architecture: 7`` on 32-bit ARM; ``arch/powerpc/kernel/setup-common.c``: ``cpu``
  naming the POWER generation; ``arch/s390/kernel/processor.c``: ``vendor_id: IBM/S390``;
  ``arch/riscv/kernel/cpu.c``: ``isa: rv64...``);
- ``/sys/devices/system/cpu/online``, else ``possible``: the CPU list the kernel brings up
  (Documentation/ABI/testing/sysfs-devices-system-cpu; the format is ``cpulist_parse``'s,
  ``0-3,8-11``); else the number of ``processor`` lines of ``/proc/cpuinfo``.

POWER's ``/proc/cpuinfo`` does not say the byte order. The ELFv2 dynamic loader of little-endian
64-bit PowerPC is ``ld64.so.2`` (glibc ``sysdeps/powerpc/powerpc64/le``; big-endian ELFv1 keeps
``ld64.so.1``), so its presence in the tree says ppc64le; without it POWER9 and later read as
ppc64le, the byte order every Linux distribution for them ships (RHEL, SLES, Ubuntu on POWER9
are little-endian only). Whatever the tree does not show stays unknown: an empty architecture
(``platform.machine()``'s own "cannot be determined") and no core count.
"""

from __future__ import annotations

import os

from hwbackends._base.files import _read_text, in_root

__all__ = ["tree_cores", "tree_machine"]

#: The most CPUs a list may name: above any machine Linux runs on (CONFIG_NR_CPUS <= 8192 on
#: the largest distributions' kernels); a hostile list cannot make the reader count more.
MAX_CPUS = 1 << 16
_CPUINFO_LIMIT = 1 << 16


def _fields(text: str) -> dict[str, str]:
    """The first value of each key of ``/proc/cpuinfo`` (keys lower-cased)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        key = k.strip().lower()
        if sep and key and len(key) < 40:
            out.setdefault(key, v.strip())
    return out


def _power(cpu: str, root: str) -> str:
    """ppc64le or ppc64 for a POWER CPU (see the module's note on byte order)."""
    for lib in ("lib64/ld64.so.2", "lib/powerpc64le-linux-gnu/ld64.so.2"):
        path = in_root(os.path.join(root, lib))
        if path is not None and os.path.lexists(path):
            return "ppc64le"
    gen = cpu.upper().removeprefix("POWER")
    digits = gen[: len(gen) - len(gen.lstrip("0123456789"))]
    return "ppc64le" if digits and int(digits[:4]) >= 9 else "ppc64"


def tree_machine(root: str) -> str:
    """The CPU architecture as ``platform.machine()`` names it on that machine (``x86_64``,
    ``aarch64``, ``ppc64le``, ...), from the tree's ``/proc/cpuinfo``; "" when it cannot tell.

    :param root: the tree's root folder.
    """
    text = _read_text(os.path.join(root, "proc/cpuinfo"), _CPUINFO_LIMIT) or ""
    f = _fields(text)
    vendor = f.get("vendor_id", "")
    if vendor.startswith("IBM/S390"):
        return "s390x"
    if vendor:
        return "x86_64" if "lm" in f.get("flags", "").split() else "i686"
    arm = f.get("cpu architecture", "")
    if arm.isdigit() and len(arm) < 4:
        return "aarch64" if int(arm) >= 8 and "asimd" in f.get("features", "").split() else (
            "armv7l" if int(arm) == 7 else "")  # fmt: skip
    cpu = f.get("cpu", "")
    if cpu.upper().startswith("POWER"):
        return _power(cpu, root)
    isa = f.get("isa", "")
    if isa.startswith(("rv64", "rv32")):
        return "riscv64" if isa.startswith("rv64") else "riscv32"
    return ""


def _cpu_list(text: str) -> int | None:
    """The number of CPUs a kernel CPU list names (``0-3,8-11`` -> 8); None when malformed."""
    total = 0
    for part in text.strip().split(","):
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()) or len(lo) > 6 or len(hi) > 6:
            return None
        n = int(hi) - int(lo) + 1 if dash else 1
        if n < 1:
            return None
        total += n
        if total > MAX_CPUS:
            return None
    return total or None


def tree_cores(root: str) -> int | None:
    """The logical cores of the tree's machine: its online CPUs, else its possible CPUs, else
    the ``processor`` entries of its ``/proc/cpuinfo``; None when the tree shows none.

    :param root: the tree's root folder.
    """
    base = os.path.join(root, "sys/devices/system/cpu")
    for name in ("online", "possible"):
        text = _read_text(os.path.join(base, name), 4096)
        n = _cpu_list(text) if text else None
        if n is not None:
            return n
    # one block per CPU, about 1.5 KiB each on x86: a larger cap than the first block needs
    text = _read_text(os.path.join(root, "proc/cpuinfo"), 1 << 20) or ""
    n = sum(1 for line in text.splitlines() if line.partition(":")[0].strip() == "processor")
    return n or None
