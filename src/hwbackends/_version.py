"""Version numbers, importable without anything else."""

__version__ = "0.1.0"
"""This hwbackends release's version."""

API_VERSION = 1
"""Major version of the plugin API this release speaks: a plugin class is loaded only when its
own ``api_version`` equals it; one that declares another version, or none, is refused."""
