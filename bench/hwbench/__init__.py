"""hwbackends benchmarks: start-up, discovery scaling, device resolution, memory, profile.

Run everything with ``.venv/bin/python bench/run.py`` (see bench/README.md). Nothing here is a
test: no timing is ever asserted, the numbers are only reported.
"""
