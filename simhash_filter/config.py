"""The filter's settings (:class:`FilterConfig`: the fingerprint model's and the index's decision), the one
source of defaults for the command line and the crawler, and the CPUs this process may use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from simhash_filter.index.bound import DEFAULT_DUPLICATES, DEFAULT_PER_TABLE, CheckBound
from simhash_filter.index.tables import TableDesign, block_limit, tables_for
from simhash_filter.model.config import MODEL_VERSION, FingerprintConfig

__all__ = [
    "DEFAULTS",
    "DEFAULT_EXPECTED_PAGES",
    "DEFAULT_MAX_DISTANCE",
    "DEFAULT_MIN_SIMILARITY",
    "MODEL_VERSION",
    "TABLES",
    "FilterConfig",
    "FingerprintConfig",
    "available_cpus",
]

#: Candidates of a page: kept fingerprints within this Hamming distance (k) that share a table's lead with it.
DEFAULT_MAX_DISTANCE = 10
#: A candidate is a near-duplicate when the two pages' sketches are at least this similar.
DEFAULT_MIN_SIMILARITY = 0.75
#: The index's permuted tables up to 4 million pages: five blocks of 13 bits (12 for the last), one table per block.
TABLES = "13+13+13+13+12/k4"
#: The pages an index is built for: its tables follow (:func:`~simhash_filter.index.tables.tables_for`); it takes
#: at most twice that.
DEFAULT_EXPECTED_PAGES = 1_000_000


@dataclass(frozen=True)
class FilterConfig:
    """The filter's decision settings, shared by ``dedup`` and the Scrapy components."""

    fingerprint: FingerprintConfig = field(default_factory=FingerprintConfig)
    #: Stored pages within this Hamming distance (k) that agree on a table's lead are candidates.
    max_distance: int = DEFAULT_MAX_DISTANCE
    #: A candidate whose sketch is at least this similar is a near-duplicate; the most similar one wins.
    min_similarity: float = DEFAULT_MIN_SIMILARITY
    #: The bound on a check's work (:mod:`simhash_filter.index.bound`): candidates per table, the nearest ...
    candidates_per_table: int = DEFAULT_PER_TABLE
    #: ... and a table's block takes no more pages that this many of its candidates verify.
    block_duplicates: int = DEFAULT_DUPLICATES
    #: The pages the index is built for: its table design follows (:attr:`tables`).
    expected_pages: int = DEFAULT_EXPECTED_PAGES

    @property
    def bound(self) -> CheckBound:
        """The bound on the work of a check (its blocks' size from :attr:`expected_pages`: :func:`block_limit`)."""
        pages = block_limit(TableDesign.parse(self.tables), self.expected_pages)
        return CheckBound(self.candidates_per_table, self.block_duplicates, self.min_similarity, pages)

    @property
    def tables(self) -> str:
        """The index's table design, for :attr:`expected_pages` (:data:`TABLES` up to 4,194,304)."""
        return tables_for(self.expected_pages)

    def index_metadata(self) -> dict[str, Any]:
        """What an index built for this config is tagged with (a stored index must match it)."""
        fp = self.fingerprint
        tags = {"model": fp.model_id(), "sketch_bytes": fp.sketch_bytes}
        if fp.sketch_bytes != fp.word_sketch_bytes:
            tags["verify_bytes"] = fp.word_sketch_bytes
        return tags

    def __post_init__(self) -> None:
        if not 0 <= self.max_distance <= 16:
            raise ValueError(f"max_distance must be in [0, 16], got {self.max_distance!r}")
        if not 0.0 <= self.min_similarity <= 1.0:
            raise ValueError(f"min_similarity must be in [0, 1], got {self.min_similarity!r}")
        self.bound  # noqa: B018 - checks candidates_per_table and block_duplicates
        self.tables  # noqa: B018 - checks expected_pages


DEFAULTS = FilterConfig()


def available_cpus() -> int:
    """CPUs this process may use: ``os.process_cpu_count()`` (Python 3.13+), else its affinity mask, else
    ``os.cpu_count()``."""
    process_cpu_count = getattr(os, "process_cpu_count", None)
    if process_cpu_count is not None:
        n = process_cpu_count()
    elif hasattr(os, "sched_getaffinity"):
        n = len(os.sched_getaffinity(0))
    else:
        n = os.cpu_count()
    return max(1, n or 1)
