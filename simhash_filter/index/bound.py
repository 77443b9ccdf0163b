"""The bound on the work of one check: a constant, whatever is stored, with the same decisions in every engine
(memory, on disk, the Redis script, Spark).  A *block* is one table's pages that share the page's lead there.

1. A page's candidates are, per table, the :attr:`CheckBound.per_table` nearest stored pages within k in its block
   (ties: the earliest stored); those of all tables, each once, nearest first.
2. A table does not store the page when :attr:`CheckBound.duplicates` of its candidates from that table verify
   (their sketches at least ``min_similarity`` alike), or its block holds this very page (key and fingerprint).
3. A table does not store the page when its block holds :attr:`CheckBound.block_pages` entries.

Whether a table takes a page depends on that table's block alone.  What the bound gives up, and what it costs:
docs/how-it-works.md ("Bounded work per check") and docs/scaling.md ("A block takes no more than C pages")."""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from simhash_filter.index.tables import is_count

__all__ = [
    "DEFAULT_BLOCK_PAGES",
    "DEFAULT_BOUND",
    "DEFAULT_DUPLICATES",
    "DEFAULT_PER_TABLE",
    "EVERY",
    "BlockPage",
    "CheckBound",
    "block_pass",
    "most_differing_bits",
    "refusal_dtype",
    "take",
]

#: Candidates per table, at most (the nearest).
DEFAULT_PER_TABLE = 8
#: A block takes no more pages that this many of its candidates verify.
DEFAULT_DUPLICATES = 4
#: The most pages a block takes, for an index of the default expected size (1,000,000 pages: five tables):
#: :func:`~simhash_filter.index.tables.block_limit` of it.  A bound that names none (a backend called directly).
DEFAULT_BLOCK_PAGES = 512


@dataclass(frozen=True)
class CheckBound:
    """The two constants that bound a check (see the module), ``per_table`` >= ``duplicates`` >= 1, and the
    similarity at which a candidate verifies (the index's ``min_similarity``)."""

    #: Candidates per table, at most: the nearest of the stored pages within k in the page's block.
    per_table: int = DEFAULT_PER_TABLE
    #: A table does not store a page when this many of its candidates from that table are near-duplicates.
    duplicates: int = DEFAULT_DUPLICATES
    #: A candidate verifies when the two sketches are at least this similar.
    min_similarity: float = 0.75
    #: A table does not store a page when its block holds this many entries already (rule 3).
    block_pages: int = DEFAULT_BLOCK_PAGES

    def __post_init__(self) -> None:
        for name in ("per_table", "duplicates", "block_pages"):
            value = getattr(self, name)
            if not is_count(value, 1):
                raise ValueError(f"{_NAMES[name]} must be an int >= 1, got {value!r}")
        if self.duplicates > self.per_table:
            raise ValueError(
                f"block_duplicates ({self.duplicates}) must not exceed candidates_per_table ({self.per_table}): a "
                "block could never count enough near-duplicates among its candidates to stop growing"
            )
        if not 0.0 <= self.min_similarity <= 1.0:
            raise ValueError(f"min_similarity must be in [0, 1], got {self.min_similarity!r}")

    def differing_bits(self, sketch_bytes: int) -> int:
        """:func:`most_differing_bits` at this bound's ``min_similarity``."""
        return most_differing_bits(self.min_similarity, sketch_bytes)


#: The names by which users set the two constants (``FilterConfig``, ``SIMHASH_*`` settings, ``dedup`` options).
_NAMES = {"per_table": "candidates_per_table", "duplicates": "block_duplicates", "block_pages": "block_pages"}

#: The bound of a backend call that names none.
DEFAULT_BOUND = CheckBound()
#: A bound that takes every page of a block (:meth:`~simhash_filter.index.backends.base.Backend.query`).
EVERY = CheckBound(per_table=1 << 30, duplicates=1 << 30)


@functools.cache
def most_differing_bits(min_similarity: float, sketch_bytes: int) -> int:
    """The most bits in which two sketches of *sketch_bytes* may differ and still verify at *min_similarity*
    (-1: none verify), by the same floating-point operations as :func:`simhash_filter.model.sketch.similarity`,
    so that an engine that compares bit counts (the Redis script, Spark SQL) decides as one that compares
    similarities."""
    bits = 8 * sketch_bytes
    if not bits:
        return -1
    best = -1
    for differ in range(bits + 1):  # similarity falls as differ grows
        if max(0.0, 2.0 * (1.0 - differ / bits) - 1.0) >= min_similarity:
            best = differ
        else:
            break
    return best


def refusal_dtype(n_tables: int) -> np.dtype:
    """The smallest unsigned integer type with a bit per table, for a page's refusals (bit *t*: table *t*); a
    design of more than 64 tables is refused (the bounded check keeps one bit a table)."""
    for dtype in (np.uint8, np.uint16, np.uint32, np.uint64):
        if n_tables <= 8 * np.dtype(dtype).itemsize:
            return np.dtype(dtype)
    raise ValueError(f"a design of {n_tables} tables: a bounded check keeps a bit per table, 64 at most")


def take(
    hits: Sequence[Sequence[tuple[int, int]]],
    bound: CheckBound,
    verified: Callable[[int], bool],
    own: Callable[[int], bool],
    full: int = 0,
) -> tuple[list[tuple[int, int]], int]:
    """Apply the bound to one check: ``(candidates, refused)``.

    *hits* has, for each table, the ``(distance, order)`` of every stored page within k in the page's block
    of that table (*order*: when it was stored; any order of the list).  *verified(order)* tells whether that
    page's sketch verifies against the page's, *own(order)* whether it is this very page (its key with its
    fingerprint; asked of pages at distance 0 only).  The candidates are the ``per_table`` nearest of each
    table, each once, nearest first, then earliest; ``refused`` has bit *t* set when table *t* must not store
    the page."""
    chosen: set[tuple[int, int]] = set()
    refused = full
    if not any(hits):  # the common case: no stored page near
        return [], refused
    for t, table_hits in enumerate(hits):
        nearest = sorted(table_hits)[: bound.per_table]
        chosen.update(nearest)
        full = len(nearest) >= bound.duplicates and sum(map(verified, (o for _, o in nearest))) >= bound.duplicates
        if full or any(own(o) for d, o in table_hits if d == 0):
            refused |= 1 << t
    return sorted(chosen), refused


#: One page of a block, for :func:`block_pass`: ``(order, fingerprint, key, sketch)``, the fingerprint and the
#: sketch (its bytes read little-endian) as non-negative ints; more fields may follow, carried along.
BlockPage = TypeVar("BlockPage", bound=tuple[Any, ...])
#: A block holding more pages than this is scanned with numpy, fewer in Python.
_NUMPY_SCAN_MIN = 48


def block_pass(
    pages: Iterable[BlockPage], k: int, bound: CheckBound, differing_bits: int
) -> Iterator[tuple[BlockPage, list[tuple[int, BlockPage, int]], bool]]:
    """One block (one table, one lead value) decided on its own: for each of its *pages*, given in order,
    ``(page, candidates, taken)``; *candidates* are ``(distance, earlier page, differing sketch bits)`` of the
    ``per_table`` nearest pages the block took within *k* (nearest, then earliest, first), *taken* whether the
    block takes the page: it holds fewer than ``block_pages`` pages, fewer than ``duplicates`` candidates differ
    in at most *differing_bits* bits (:func:`most_differing_bits`) and it holds no earlier page with its key and
    fingerprint."""
    taken: list[BlockPage] = []
    fps: list[int] = []
    array = np.empty(0, dtype=np.uint64)  # fps, once the block holds _NUMPY_SCAN_MIN pages
    held: set[tuple[int, str]] = set()
    per_table, duplicates, limit = bound.per_table, bound.duplicates, bound.block_pages
    for page in pages:
        fingerprint, key, sketch = page[1], page[2], page[3]
        n = len(taken)
        if n < _NUMPY_SCAN_MIN:
            near = [(d, i) for i, fp in enumerate(fps) if (d := (fp ^ fingerprint).bit_count()) <= k]
        else:
            dist = np.bitwise_count(array[:n] ^ np.uint64(fingerprint))
            sel = np.flatnonzero(dist <= k)
            near = list(zip(dist[sel].tolist(), sel.tolist(), strict=True))
        if len(near) > per_table:
            near = heapq.nsmallest(per_table, near)
        else:
            near.sort()
        candidates = [(d, taken[i], (sketch ^ taken[i][3]).bit_count()) for d, i in near]
        verified = sum(1 for c in candidates if c[2] <= differing_bits)
        took = n < limit and verified < duplicates and (fingerprint, key) not in held
        yield page, candidates, took
        if took:
            taken.append(page)
            fps.append(fingerprint)
            held.add((fingerprint, key))
            if n + 1 >= _NUMPY_SCAN_MIN:  # numpy scans the next pages: the array holds every page taken
                if n < len(array):
                    array[n] = fingerprint
                else:
                    array = np.empty(max(2 * n, 2 * _NUMPY_SCAN_MIN), dtype=np.uint64)
                    array[: n + 1] = fps
