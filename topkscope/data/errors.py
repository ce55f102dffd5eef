"""The two ways a dataset can be unusable: its files are missing, or they are wrong.

Both carry a one-line message naming the file(s) and what to do about it.
"""

from __future__ import annotations


class DataError(Exception):
    """Base class: a dataset could not be loaded or obtained."""


class MissingDataError(DataError, FileNotFoundError):
    """Standard files are not under the data root and could not be obtained."""


class CorruptDataError(DataError, ValueError):
    """A file is present but truncated, malformed or fails its checksum."""
