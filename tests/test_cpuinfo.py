"""The CPU of a ``--root`` tree (``hwbackends._machine.cpuinfo``): the tree's own architecture
and core count, never this machine's; unknown where the tree does not show them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwbackends import Host
from hwbackends._machine.cpuinfo import MAX_CPUS, _cpu_list, _fields, tree_cores, tree_machine

# /proc/cpuinfo as each architecture's show_cpuinfo writes it (the first block).
X86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel Xeon\nflags\t\t: fpu lm\n"
I686 = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu sse\n"
# Linux Documentation/arch/powerpc/dawr-power9.rst quotes this block of a POWER9's cpuinfo.
POWER9 = (
    "processor       : 0\ncpu             : POWER9, altivec supported\n"
    "clock           : 3800.000000MHz\nrevision        : 2.3 (pvr 004e 1203)\n"
)
POWER8 = "processor\t: 0\ncpu\t\t: POWER8E (raw), altivec supported\n"
ARM64 = (
    "processor\t: 0\nBogoMIPS\t: 38.40\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32\n"
    "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: 0xd07\n"
)
ARM32 = "processor\t: 0\nmodel name\t: ARMv7 Processor rev 3 (v7l)\nCPU architecture: 7\n"
S390 = "vendor_id       : IBM/S390\n# processors    : 4\n"
RISCV = "processor\t: 0\nhart\t\t: 0\nisa\t\t: rv64imafdc\nmmu\t\t: sv39\n"


def _tree(tmp: Path, cpuinfo: str | None, **files: str) -> Path:
    root = tmp / "root"
    root.mkdir(parents=True, exist_ok=True)
    if cpuinfo is not None:
        (root / "proc").mkdir(exist_ok=True)
        (root / "proc/cpuinfo").write_text(cpuinfo)
    for rel, text in files.items():
        path = root / rel.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.parametrize(
    ("text", "machine"),
    [(X86, "x86_64"), (I686, "i686"), (POWER9, "ppc64le"), (POWER8, "ppc64"),
     (ARM64, "aarch64"), (ARM32, "armv7l"), (S390, "s390x"), (RISCV, "riscv64"), ("", ""),
     ("processor\t: 0\nBogoMIPS\t: 1\n", "")],
)  # fmt: skip
def test_the_tree_names_its_architecture(tmp_path: Path, text: str, machine: str) -> None:
    assert tree_machine(str(_tree(tmp_path, text))) == machine


def test_the_little_endian_loader_says_ppc64le(tmp_path: Path) -> None:
    """POWER8 runs either byte order; ELFv2's ld64.so.2 in the tree says little-endian."""
    root = _tree(tmp_path, POWER8)
    assert tree_machine(str(root)) == "ppc64"
    (root / "lib64").mkdir()
    (root / "lib64/ld64.so.2").symlink_to("/no/such/file")  # a link: only its name counts
    assert tree_machine(str(root)) == "ppc64le"


@pytest.mark.parametrize(
    ("online", "possible", "cores"),
    [("0-127\n", None, 128), ("0-3,8-11\n", "0-15", 8), (None, "0-47", 48), ("junk", "0-1", 2),
     ("5-2", None, None), ("0-99999999", None, None)],
)  # fmt: skip
def test_the_tree_counts_its_cores(
    tmp_path: Path, online: str | None, possible: str | None, cores: int | None
) -> None:
    files = {}
    if online is not None:
        files["sys__devices__system__cpu__online"] = online
    if possible is not None:
        files["sys__devices__system__cpu__possible"] = possible
    assert tree_cores(str(_tree(tmp_path, None, **files))) == cores


def test_processor_entries_count_where_sysfs_is_missing(tmp_path: Path) -> None:
    assert tree_cores(str(_tree(tmp_path, ARM64 + "\n" + ARM64.replace(": 0", ": 1", 1)))) == 2


def test_a_fifo_where_cpuinfo_should_be_is_not_opened(tmp_path: Path) -> None:
    root = _tree(tmp_path, None)
    (root / "proc").mkdir()
    os.mkfifo(root / "proc/cpuinfo")
    os.makedirs(root / "sys/devices/system/cpu")
    os.mkfifo(root / "sys/devices/system/cpu/online")
    assert (tree_machine(str(root)), tree_cores(str(root))) == ("", None)


def test_host_from_a_tree_is_the_trees_cpu_not_this_machines(tmp_path: Path) -> None:
    """A POWER9 tree read on any machine is a ppc64le with the tree's 128 cores; a tree that
    shows no CPU is unknown (no architecture, 0 cores), never this machine's."""
    root = _tree(tmp_path, POWER9, sys__devices__system__cpu__online="0-127\n")
    host = Host.from_system(str(root), path=[])
    assert (host.machine, host.cpu.count, host.cpu.model) == (
        "ppc64le",
        128,
        "POWER9, altivec supported",
    )
    blank = Host.from_system(str(_tree(tmp_path / "b", None)), path=[])
    assert (blank.machine, blank.cpu.count) == ("", 0)
    assert Host.from_dict(blank.to_dict()).cpu.count == 0  # the host file keeps "not known"
    here = Host.from_system("/", path=[])
    assert here.machine == os.uname().machine and here.cpu.count == (os.cpu_count() or 1)


# The kernel's CPU-list format (Documentation/admin-guide/cputopology.rst: "0-3,8-11"):
# comma-separated single CPUs or inclusive ranges.
_ranges = st.lists(st.tuples(st.integers(0, 99_999), st.integers(0, 50)), min_size=1, max_size=8)


@given(_ranges)
def test_a_cpu_list_counts_what_it_names(parts: list[tuple[int, int]]) -> None:
    text = ",".join(f"{lo}-{lo + span}" if span else str(lo) for lo, span in parts)
    total = sum(span + 1 for _, span in parts)
    assert _cpu_list(text + "\n") == (total if total <= MAX_CPUS else None)


@given(st.integers(0, 999_999), st.integers(0, 999_999))
def test_a_range_backwards_or_over_six_digits_is_malformed(lo: int, hi: int) -> None:
    expected = hi - lo + 1 if lo <= hi and hi - lo < MAX_CPUS else None
    assert _cpu_list(f"{lo}-{hi}") == expected
    assert _cpu_list(f"{lo:06d}-{hi:06d}") == expected  # six digits are read as they are
    # no kernel numbers CPUs past six digits: a longer number is malformed, whatever its value
    assert _cpu_list(f"{lo:07d}-{hi}") is None
    assert _cpu_list(f"{lo}-{hi:07d}") is None
    assert _cpu_list(f"{lo:07d}") is None


def test_a_list_naming_more_cpus_than_any_kernel_is_malformed() -> None:
    assert _cpu_list(f"0-{MAX_CPUS - 1}") == MAX_CPUS
    assert _cpu_list(f"0-{MAX_CPUS}") is None
    assert _cpu_list(f"0-{MAX_CPUS - 1},{MAX_CPUS + 5}") is None


def test_cpuinfo_keys_are_short_and_the_first_value_wins() -> None:
    text = f"Flags\t: lm\nflags : sse\n{'k' * 39}: kept\n{'k' * 40}: dropped\n: nameless\n"
    assert _fields(text) == {"flags": "lm", "k" * 39: "kept"}


def test_an_empty_range_spoils_the_whole_list() -> None:
    assert _cpu_list("0-3,5-4") is None  # "5-4" names no CPU: the list is malformed


@pytest.mark.parametrize(
    ("arch", "features", "machine"),
    [("8", "fp asimd", "aarch64"), ("8", "half thumb fastmult vfp edsp neon", ""),
     ("7", "fp asimd", "armv7l"), ("8000", "fp asimd", "")],
)  # fmt: skip
def test_an_arm_cpu_is_aarch64_only_with_its_64_bit_features(
    tmp_path: Path, arch: str, features: str, machine: str
) -> None:
    # a 32-bit process on a 64-bit ARM kernel reads architecture 8 with the AArch32 (compat)
    # features (arch/arm64/kernel/cpuinfo.c c_show): its userland is not aarch64, so unknown
    text = f"processor\t: 0\nFeatures\t: {features}\nCPU architecture: {arch}\n"
    assert tree_machine(str(_tree(tmp_path, text))) == machine
