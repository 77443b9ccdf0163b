"""The errors of an index's store, raised where they happen and exported from :mod:`simhash_filter`: what a caller
of :func:`~simhash_filter.open_index` and of the index's calls catches (besides ``ValueError`` for a bad URI or
option and ``OSError``), all of them :class:`StoreError`.
"""

from __future__ import annotations

__all__ = [
    "FINGERPRINT_ERROR",
    "CorruptIndexError",
    "DesignMismatchError",
    "IndexFullError",
    "IndexLockedError",
    "MetadataMismatchError",
    "StoreError",
    "StoreFullError",
]

#: The status of a page whose fingerprinter raised (a bug: please report it), in ``dedup``'s output and a crawl's
#: skips (``simhash/skipped/error``).
FINGERPRINT_ERROR = "error"


class StoreError(Exception):
    """An index's store cannot serve (not a bug): locked, damaged, of another model, or full."""


class IndexLockedError(StoreError, RuntimeError):
    """Another process has the on-disk index open for writing."""


class CorruptIndexError(StoreError, ValueError):
    """An index file is damaged or is not an index file."""


class MetadataMismatchError(StoreError, ValueError):
    """A stored index was built with different metadata (another fingerprint model, say)."""


class DesignMismatchError(MetadataMismatchError):
    """A stored index was built with another table design (``simhash-filter index`` then tries the others)."""


class IndexFullError(StoreError, RuntimeError):
    """A two-stage index refuses a page: it holds twice the pages its tables are built for
    (:func:`~simhash_filter.index.tables.page_limit`), and a check would scan ever longer buckets."""


class StoreFullError(IndexFullError):
    """The store refuses a write for want of memory: Redis at its ``maxmemory`` under the ``noeviction`` policy."""
