"""Vendor and device names from the system's PCI ID database, for hardware nobody claims.

The database is the ``pci.ids`` file of the PCI ID Repository (https://pci-ids.ucw.cz/),
installed by ``hwdata`` (``/usr/share/hwdata/pci.ids``: Fedora, RHEL, Arch) or ``pciutils``
(``/usr/share/misc/pci.ids``: Debian, Ubuntu). Its format, from the file's own header: a
vendor line is ``vvvv  name`` at the start of a line, its devices follow as
``<TAB>dddd  name``, subsystems as ``<TAB><TAB>...``; ``C`` lines at the end start the class
lists. Vendors appear in ascending id order.

Read only when the machine has hardware that no installed backend claims, from the machine's
root, streamed in bounded chunks and stopped at the end of the wanted vendor's block (or at
MAX_BYTES): the file is ~1.5 MB and untrusted like every file under a root.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

#: Where distributions install the database, relative to the root, first found wins.
PCI_IDS_PATHS = ("usr/share/hwdata/pci.ids", "usr/share/misc/pci.ids")
#: The most read from the file (today's database is about 1.5 MB).
MAX_BYTES = 8 << 20
#: The longest name kept (a hostile file cannot put a page of text into a report).
MAX_NAME = 80
_HEX = frozenset("0123456789abcdefABCDEF")


def _clean(name: str) -> str:
    name = "".join(c for c in name.strip() if c.isprintable())
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"


def _lines(root: str) -> Iterator[str]:
    """The database's lines, streamed; nothing when no regular file is installed."""
    from hwbackends._base.files import in_root

    for rel in PCI_IDS_PATHS:
        path = in_root(os.path.join(root, rel))  # an image's pci.ids is often an absolute link
        if path is None:
            continue
        try:
            fd = os.open(
                path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
            )
        except (OSError, ValueError):
            continue
        try:
            import stat

            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            left, rest = MAX_BYTES, b""
            while left > 0:
                chunk = os.read(fd, min(1 << 16, left))
                if not chunk:
                    break
                left -= len(chunk)
                *full, rest = (rest + chunk).split(b"\n")
                for raw in full:
                    yield raw.decode("utf-8", "replace")
            if rest:
                yield rest.decode("utf-8", "replace")
        except OSError:
            pass
        finally:
            os.close(fd)
        return


def _id(text: str) -> int | None:
    return int(text, 16) if len(text) == 4 and all(c in _HEX for c in text) else None


def lookup(root: str, wanted: dict[int, set[int]]) -> dict[tuple[int, int | None], str]:
    """Names of vendors and devices under ``root``: ``(vendor, None)`` -> the vendor's name,
    ``(vendor, device)`` -> the device's name, for the ids in ``wanted`` (vendor -> device
    ids) that the database lists. Empty when there is no database."""
    out: dict[tuple[int, int | None], str] = {}
    if not wanted:
        return out
    todo = set(wanted)
    current: int | None = None
    for line in _lines(root):
        if not line or line[0] == "#":
            continue
        if line[0] != "\t":
            if line.startswith("C "):
                break  # the class lists: no vendor follows
            if current is not None:
                todo.discard(current)
                current = None
                if not todo:
                    break  # every wanted vendor's block is read
            vid = _id(line[:4])
            if vid in todo and line[4:6] == "  ":
                current = vid
                out[(vid, None)] = _clean(line[6:])
            continue
        if current is not None and line[1:2] != "\t":
            did = _id(line[1:5])
            if did is not None and did in wanted[current] and line[5:7] == "  ":
                out[(current, did)] = _clean(line[7:])
    return out
