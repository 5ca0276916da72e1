"""Core test fixtures (the helpers live in coretest.py so test modules can import them)."""

from coretest import alone, isolated, site

__all__ = ["alone", "isolated", "site"]
