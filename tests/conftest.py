"""Core test fixtures (the helpers live in coretest.py so test modules can import them)."""

import os

from coretest import isolated, site

__all__ = ["isolated", "site"]

# The selection cache (hwbackends._fast) is tested on its own in test_fast.py; everywhere
# else each test must see a fresh selection, in this process and in the ones it starts.
os.environ["HWBACKENDS_NO_CACHE"] = "1"
