"""The plugin instances made in this process, by entry-point value: one per plugin, whoever
asked first (the selection cache on a hit, or a load).

A module of its own with no imports: the selection cache's fast path reads it without
loading the rest of discovery."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hwbackends._base.protocol import Backend

INSTANCES: dict[str, Backend] = {}
