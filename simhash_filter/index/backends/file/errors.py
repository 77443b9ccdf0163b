"""The errors of the on-disk backend: a damaged index, a locked one."""

from __future__ import annotations

from pathlib import Path

from simhash_filter.errors import CorruptIndexError, IndexLockedError

__all__ = ["CorruptIndexError", "IndexLockedError", "damaged_key"]


def damaged_key(path: Path, row: int, offset: int, length: int) -> CorruptIndexError:
    """The error for the key of record *row* (*length* bytes at *offset* of the keys file *path*) that does not
    match its key check."""
    return CorruptIndexError(
        f"{path}: the key of record {row} at offset {offset} ({length} bytes) is damaged (it does not match its "
        "check) - the file was changed or damaged; it cannot be trusted (restore a copy, or start a new index)"
    )
