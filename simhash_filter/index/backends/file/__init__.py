"""On-disk backend (a directory, or ``file:///path?options``): an append-only log of records and keys, the permuted
tables in memory or, with ``tables=disk``, in run files.  The files, their format, durability and what a damaged or
torn file does: docs/stores.md ("The on-disk index")."""

from simhash_filter.errors import CorruptIndexError, IndexLockedError
from simhash_filter.index.backends.file.age import parse_age
from simhash_filter.index.backends.file.backend import FileBackend

__all__ = ["CorruptIndexError", "FileBackend", "IndexLockedError", "parse_age"]
