"""The bound on the work of one check (two-stage detection): a constant, whatever is stored.

Without a bound a check costs O(near-duplicates already stored): every page is stored, and a page's candidates
are every stored page within k that shares a table's block with it (a *block*: one table's lead value).  A
flood of near-duplicates (a crawler trap, a syndicated story on hundreds of hosts) makes that O(n²).  Two
rules bound it, in every engine (memory, on disk, the Redis script, Spark), with the same decisions:

1. **At most** :attr:`CheckBound.per_table` **candidates per table**: of the stored pages in the page's block of
   a table that are within k, the nearest (ties: the earliest stored).  A page's candidates are those of all
   its tables, each once, nearest first; the most similar verified one is the page it duplicates, as before.
2. **A block takes a page unless it holds enough of its near-duplicates already**: table *t* stores the page
   unless :attr:`CheckBound.duplicates` of its candidates from table *t* verify (their sketches are at least
   ``min_similarity`` similar), or the block holds this very page (its key with its fingerprint: a page seen
   again, a call tried again).  A page no table takes is still decided; it only serves no later page as a
   candidate, for a block that holds that many of its near-duplicates can stand in for it.

So a flood's blocks stop growing after a few pages, and a check reads at most ``per_table`` candidates per
table, with their sketches.  Whether a table takes a page depends on that table's block alone, never on the
other tables or on the page's decision: Spark decides each block on its own, in parallel, and gets one
machine's decisions.

What the bound gives up: a page whose only near-duplicate is a page no table took (it stood in a full block),
and that verifies against none of the pages the block kept, is kept where an unbounded index would have found
it; and a block with more than ``per_table`` candidates within k of a page shows it only the nearest.  Both
need ``duplicates`` verified near-duplicates of one page in one block first: ordinary inputs never get there
(docs/speed.md measures it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DEFAULT_BOUND",
    "DEFAULT_DUPLICATES",
    "DEFAULT_PER_TABLE",
    "CheckBound",
    "most_differing_bits",
    "refusal_dtype",
    "take",
]

#: Candidates per table, at most (the nearest).
DEFAULT_PER_TABLE = 8
#: A block takes no more pages that this many of its candidates verify.
DEFAULT_DUPLICATES = 4


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

    def __post_init__(self) -> None:
        for name in ("per_table", "duplicates"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
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
_NAMES = {"per_table": "candidates_per_table", "duplicates": "block_duplicates"}

#: The bound of a backend call that names none.
DEFAULT_BOUND = CheckBound()


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
) -> tuple[list[tuple[int, int]], int]:
    """Apply the bound to one check: ``(candidates, refused)``.

    *hits* has, for each table, the ``(distance, order)`` of every stored page within k in the page's block
    of that table (*order*: when it was stored; any order of the list).  *verified(order)* tells whether that
    page's sketch verifies against the page's, *own(order)* whether it is this very page (its key with its
    fingerprint; asked of pages at distance 0 only).  The candidates are the ``per_table`` nearest of each
    table, each once, nearest first, then earliest; ``refused`` has bit *t* set when table *t* must not store
    the page."""
    chosen: set[tuple[int, int]] = set()
    refused = 0
    if not any(hits):  # the common case: no stored page near
        return [], 0
    for t, table_hits in enumerate(hits):
        nearest = sorted(table_hits)[: bound.per_table]
        chosen.update(nearest)
        full = len(nearest) >= bound.duplicates and sum(map(verified, (o for _, o in nearest))) >= bound.duplicates
        if full or any(own(o) for d, o in table_hits if d == 0):
            refused |= 1 << t
    return sorted(chosen), refused
