"""Discovery: entry points, installed distributions, the catalog of known plugins, and loading a
plugin under the guard.
"""
