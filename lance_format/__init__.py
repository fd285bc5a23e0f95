"""A pure-Python implementation of the Lance table and file formats, byte-compatible with pylance."""

__version__ = "0.1.0"
