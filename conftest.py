"""Settings for every test in the repository (core, plugins, docs)."""

import os

# The selection cache (hwbackends._selection.cache) is tested on its own in tests/test_fast.py;
# everywhere else each test must see a fresh selection, in this process and in the ones it
# starts, and must not write to the user's cache directory.
os.environ["HWBACKENDS_NO_CACHE"] = "1"
