"""The ``pytest11`` entry point of the core: pytest loads it into every test session of every
project where hwbackends is installed, so it costs nothing there. It imports neither the
conformance kit (:mod:`hwbackends.testing`) nor the machine model; the fixture loads what it
needs when a test asks for it. Only pytest loads this module, so pytest is already imported.
"""

from __future__ import annotations

import pytest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from hwbackends._machine.host import Host

__all__ = ["hwbackends_host"]


@pytest.fixture
def hwbackends_host() -> Callable[..., Host]:
    """Build a simulated host: ``hwbackends_host(devices=[...], torch={...})``."""
    from hwbackends._machine.host import Host

    def make(**fields: Any) -> Host:
        return Host.from_dict(fields)

    return make
