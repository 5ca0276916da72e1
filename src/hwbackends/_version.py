"""Version numbers, importable without anything else."""

__version__ = "0.1.0"

#: Major version of the plugin API. A plugin declaring another major is refused at load.
API_VERSION = 1
