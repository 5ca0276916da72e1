"""The PCI helpers plugins use: ``hwbackends.plugin.pci_id`` (how a plugin reads a PCI id from a
host file or sysfs, over the whole 16-bit range), bus addresses, and ``/dev`` node patterns."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwbackends.plugin import match_node, normalise_bus_id, pci_id


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


_PART = st.text(st.characters(blacklist_characters="{}", blacklist_categories=("Cs",)), max_size=8)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, 0), (0xFFFF, 0xFFFF), (0x10000, None), (-1, None),
     ("0x0000", 0), ("0xffff", 0xFFFF), ("0x10000", None)],
)  # fmt: skip
def test_an_id_is_read_over_the_whole_16_bit_range_and_no_further(
    value: int | str, expected: int | None
) -> None:
    """0x0000 and 0xFFFF are ids like any other (a host file may give either as a number or
    as text); one past 16 bits is not a PCI id."""
    assert pci_id(value) == expected


@given(st.integers())
def test_a_number_is_an_id_exactly_when_it_has_16_bits(number: int) -> None:
    assert pci_id(number) == (number if 0 <= number <= 0xFFFF else None)


def test_an_id_padded_with_blanks_to_ten_characters_is_read_and_longer_text_is_not() -> None:
    """The documented cap: ``0x`` and four digits with blanks around them, ten characters in
    all; longer text is refused before it is parsed (a host file may hold anything)."""
    assert pci_id("0x1b06".center(10)) == 0x1B06
    assert pci_id("0x1b06".center(11)) is None
    assert pci_id("0x00001b06") == 0x1B06
    assert pci_id("0x000001b06") is None


@pytest.mark.parametrize(
    ("text", "bus"),
    [("0000:ff:1e.3", "0000:ff:1e.3"),  # Intel's uncore functions live on bus 0xff
     ("0000:FE:00.0", "0000:fe:00.0"), ("0000:100:00.0", None), ("0000:0100:00.0", None),
     ("0000:00:1f.7", "0000:00:1f.7"), ("0000:00:20.0", None)],
)  # fmt: skip
def test_the_last_bus_device_and_function_numbers_are_addresses(text: str, bus: str | None) -> None:
    """A PCI bus number has 8 bits (0x00-0xff), a device 5, a function 3: the highest of each
    is an address, one more is not."""
    assert normalise_bus_id(text) == bus


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [("tenstorrent/{n}", "tenstorrent/0", True), ("tenstorrent/{n}", "tenstorrent/", False),
     ("acme{n}-ctl", "acme0-ctl", True), ("acme{n}-ctl", "acme12-ctl", True),
     ("acme{n}-ctl", "acme0-ctx", False), ("acme{n}-ctl", "acme0", False),
     ("acme{n}-ctl", "acme-ctl", False), ("acme{n}-ctl", "acmex-ctl", False),
     ("acme{n}-ctl", "acme0-ctl-ctl", False), ("acme{n}-ctl", "acme0-ct", False)],
)  # fmt: skip
def test_a_pattern_with_text_after_the_number_matches_only_that_text(
    pattern: str, name: str, matches: bool
) -> None:
    assert match_node(pattern, name) is matches


@given(_PART, _PART, st.integers(0, 10**6), st.text(max_size=4))
def test_a_node_matches_a_pattern_exactly_when_ascii_digits_stand_for_its_number(
    head: str, tail: str, number: int, middle: str
) -> None:
    """``{n}`` is one or more ASCII digits, wherever it stands in the pattern."""
    pattern = head + "{n}" + tail
    assert match_node(pattern, f"{head}{number}{tail}")
    expected = middle != "" and middle.isascii() and middle.isdigit()
    assert match_node(pattern, head + middle + tail) is expected
