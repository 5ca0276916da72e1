"""``python -m hwbackends``: the same as the ``hwbackends`` command."""

from __future__ import annotations

import sys

from hwbackends.cli import main

if __name__ == "__main__":
    sys.exit(main())
