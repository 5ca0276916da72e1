"""The host-file tables of the Concepts page name every field a host file accepts
(``python`` and ``memory_bytes`` were once missing)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hwbackends import Host, HostFileError

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "concepts.md").read_text(encoding="utf-8")


def accepted(data: dict[str, object]) -> set[str]:
    """The fields the reader accepts, as its own error message lists them."""
    with pytest.raises(HostFileError) as info:
        Host.from_dict(data, source="probe")
    expected = re.search(r"only (.*?)\. Fix:", str(info.value))
    assert expected is not None, str(info.value)
    return {name.strip().strip("'") for name in expected.group(1).split(",")}


def documented(after: str) -> set[str]:
    table = PAGE.split(after, 1)[1].split("\n\n", 2)[1]
    names: set[str] = set()
    for line in table.splitlines()[2:]:
        names |= set(re.findall(r"`(\w+)`", line.split(" | ")[0]))
    return names


def test_every_top_level_field_is_documented() -> None:
    fields = accepted({"no_such_field": 1})
    assert {"python", "memory_bytes", "devices"} <= fields
    assert fields == documented("Any other top-level field is an error that names it.")


def test_every_device_field_is_documented() -> None:
    from hwbackends._machine.host import _DEVICE_KEYS  # the fields read (others are extras)

    assert {"vendor", "memory_bytes", "pci_device_id"} <= _DEVICE_KEYS
    assert documented("Each device is an object:") == set(_DEVICE_KEYS)
