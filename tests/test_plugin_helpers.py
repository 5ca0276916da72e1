"""hwbackends.plugin.pci_id: how a plugin reads a PCI id from a host file or sysfs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwbackends.plugin import pci_id


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0x1b06", 0x1B06),
        (" 0x1B06\n", 0x1B06),
        ("1b06", 0x1B06),
        (0x1B06, 0x1B06),
        (None, None),
        (True, None),
        ("", None),
        ("0x", None),
        ("0xzz", None),
        ("0x10000", None),
        (-1, None),
        ("0x" + "0" * 20 + "1", None),  # over-long: refused before int() reads it
        (1.5, None),
    ],
)
def test_pci_ids_as_sysfs_and_host_files_write_them(value: object, expected: int | None) -> None:
    assert pci_id(value) == expected  # type: ignore[arg-type]


@given(st.integers(0, 0xFFFF), st.sampled_from(["0x{:04x}", "0x{:04X}", " 0x{:x} ", "{:x}"]))
def test_every_spelling_of_an_id_reads_back(number: int, spelling: str) -> None:
    assert pci_id(spelling.format(number)) == number


@given(st.text(max_size=40))
def test_no_text_makes_it_raise(text: str) -> None:
    got = pci_id(text)
    assert got is None or 0 <= got <= 0xFFFF
