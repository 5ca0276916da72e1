"""Core test fixtures (the helpers live in coretest.py so test modules can import them)."""

from coretest import isolated, site

__all__ = ["isolated", "site"]
