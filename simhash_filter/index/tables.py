"""The permuted tables over f = 64-bit simhash fingerprints (Manku, Jain, Das Sarma, WWW 2007): the value types
(:class:`Match`), the table designs (:class:`TableDesign`, :data:`SIZED_TABLES`) and the bit helpers; it imports no
store.  A fingerprint within k of a query differs in at most k of the design's blocks, so it agrees exactly with
the query on the leading blocks of one table; docs/how-it-works.md explains the scheme."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from itertools import combinations
from typing import NamedTuple, TypeGuard

import numpy as np

__all__ = [
    "BLOCK_HEADROOM",
    "BLOCK_PAGES_MIN",
    "BUCKET_LIMIT",
    "SIZED_TABLES",
    "F",
    "Match",
    "TableDesign",
    "block_limit",
    "capacity",
    "hamming",
    "page_limit",
    "tables_for",
]

#: Fingerprint width in bits (the paper's f).
F = 64
_MASK64 = (1 << F) - 1
#: More tables than this is a mistake (memory grows by 12 bytes per fingerprint per table).
_MAX_TABLES = 1024


def is_count(value: object, low: int = 0, high: int | None = None) -> TypeGuard[int]:
    """Whether *value* is an ``int`` (not a ``bool``) of at least *low* (and at most *high*)."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value and (high is None or value <= high)


def check_fingerprint(fingerprint: object) -> int:
    """Return *fingerprint* as an ``int`` in [0, 2**64), or raise ``TypeError``/``ValueError``."""
    if isinstance(fingerprint, bool) or not isinstance(fingerprint, (int, np.integer)):
        raise TypeError(f"a fingerprint must be an int in [0, 2**64), got {type(fingerprint).__name__} {fingerprint!r}")
    value = int(fingerprint)
    if not 0 <= value <= _MASK64:
        raise ValueError(f"a fingerprint must be in [0, 2**64), got {value}")
    return value


def as_fingerprint_array(fingerprints: Iterable[int] | np.ndarray) -> np.ndarray:
    """*fingerprints* as a contiguous 1-D ``uint64`` array, each value checked (:func:`check_fingerprint`)."""
    if isinstance(fingerprints, np.ndarray):
        if fingerprints.ndim != 1:
            raise ValueError(f"fingerprints must be one-dimensional, got shape {fingerprints.shape}")
        if fingerprints.dtype == np.uint64:
            return np.ascontiguousarray(fingerprints)
    return np.fromiter(map(check_fingerprint, fingerprints), dtype=np.uint64)


def hamming(a: int, b: int) -> int:
    """Number of bits in which the 64-bit fingerprints *a* and *b* differ."""
    return (check_fingerprint(a) ^ check_fingerprint(b)).bit_count()


class Match(NamedTuple):
    """A stored fingerprint within the query distance."""

    #: What the caller stored with the fingerprint (a URL, usually).
    key: str
    #: Hamming distance to the query.
    distance: int
    #: The stored fingerprint.
    fingerprint: int
    #: Estimated similarity of the two pages' sketches (two-stage detection), else None.
    similarity: float | None = None


@dataclass(frozen=True)
class TableDesign:
    """How the f = 64 bits are cut into ``blocks`` (bit widths from the most significant bit down), and so which
    tables the index keeps: one per choice of ``len(blocks) - k`` leading blocks, ``C(len(blocks), k)`` in all; a
    design built for k finds every fingerprint within k."""

    blocks: tuple[int, ...]
    k: int

    def __post_init__(self) -> None:
        blocks = tuple(self.blocks)
        if not blocks or not all(isinstance(w, int) and not isinstance(w, bool) for w in blocks):
            raise TypeError(f"blocks must be a non-empty tuple of ints, got {self.blocks!r}")
        if min(blocks) < 1 or sum(blocks) != F:
            raise ValueError(f"block widths must be >= 1 and sum to {F}, got {blocks}")
        if isinstance(self.k, bool) or not isinstance(self.k, int):
            raise TypeError(f"k must be an int, got {self.k!r}")
        if not 0 <= self.k < len(blocks):
            raise ValueError(
                f"k must be in [0, {len(blocks) - 1}] for {len(blocks)} blocks (at least one block "
                f"must lead each table), got {self.k}"
            )
        if math.comb(len(blocks), self.k) > _MAX_TABLES:
            raise ValueError(
                f"{len(blocks)} blocks with k={self.k} would need {math.comb(len(blocks), self.k)} tables "
                f"(at most {_MAX_TABLES}); use fewer blocks"
            )
        object.__setattr__(self, "blocks", blocks)

    @classmethod
    def balanced(cls, n_blocks: int, k: int) -> TableDesign:
        """Blocks as equal as possible, wider ones first: ``balanced(5, 3)`` is (13, 13, 13, 13, 12)."""
        if not 1 <= n_blocks <= F:
            raise ValueError(f"n_blocks must be in [1, {F}], got {n_blocks}")
        q, r = divmod(F, n_blocks)
        return cls(tuple(q + 1 if i < r else q for i in range(n_blocks)), k)

    @classmethod
    def parse(cls, name: str) -> TableDesign:
        """Parse a design name: ``"4x16/k3"``, ``"13+13+13+13+12/k3"`` or ``"5/k3"`` (5 balanced blocks)."""
        m = re.fullmatch(r"\s*(?:(\d+)x(\d+)|(\d+(?:\+\d+)+)|(\d+))\s*/\s*k(\d+)\s*", name)
        if m is None:
            raise ValueError(
                f"cannot parse table design {name!r}; expected e.g. '4x16/k3', '13+13+13+13+12/k4' or '5/k3'"
            )
        k = int(m[5])
        if m[1]:
            return cls((int(m[2]),) * int(m[1]), k)
        if m[3]:
            return cls(tuple(int(w) for w in m[3].split("+")), k)
        return cls.balanced(int(m[4]), k)

    @property
    def name(self) -> str:
        """``"4x16/k3"`` for equal blocks, ``"13+13+13+13+12/k3"`` otherwise."""
        if len(set(self.blocks)) == 1:
            return f"{len(self.blocks)}x{self.blocks[0]}/k{self.k}"
        return "+".join(map(str, self.blocks)) + f"/k{self.k}"

    @cached_property
    def tables(self) -> list[tuple[int, ...]]:
        """For each table, the indexes of its leading blocks."""
        m = len(self.blocks)
        return list(combinations(range(m), m - self.k))

    @property
    def n_tables(self) -> int:
        """Number of permuted tables, ``C(len(blocks), len(blocks) - k)``."""
        return len(self.tables)

    @cached_property
    def lead_bits(self) -> tuple[int, ...]:
        """For each table, the number of leading bits a match agrees on exactly."""
        return tuple(sum(self.blocks[i] for i in lead) for lead in self.tables)

    @cached_property
    def lead_moves(self) -> tuple[tuple[tuple[int, int, int], ...], ...]:
        """For each table, ``(source_shift, mask, target_shift)`` moves that gather its leading bits.

        A table's *lead value* is its leading blocks side by side, in block order, as a
        ``lead_bits``-bit integer; blocks that are adjacent in the fingerprint move together."""
        m = len(self.blocks)
        lows = [F - sum(self.blocks[: i + 1]) for i in range(m)]  # shift of each block's lowest bit
        out = []
        for lead, width in zip(self.tables, self.lead_bits, strict=True):
            spans: list[list[int]] = []  # [source_shift, width, target_shift]
            top = width
            for b in lead:
                w = self.blocks[b]
                top -= w
                if spans and spans[-1][0] == lows[b] + w:  # adjacent to the previous block
                    spans[-1][0] = lows[b]
                    spans[-1][1] += w
                    spans[-1][2] = top
                else:
                    spans.append([lows[b], w, top])
            out.append(tuple((s, (1 << w) - 1, t) for s, w, t in spans))
        return tuple(out)

    @cached_property
    def lead_masks(self) -> tuple[int, ...]:
        """For each table, the 64-bit mask of its leading bits: two fingerprints agree on a table's lead
        when their XOR has none of these bits."""
        out = []
        for moves in self.lead_moves:
            mask = 0
            for s, m, _ in moves:
                mask |= m << s
            out.append(mask)
        return tuple(out)

    def agree_on_a_lead(self, a: int, b: int) -> bool:
        """Whether fingerprints *a* and *b* agree on the leading bits of at least one table (always true
        within distance k, by the pigeonhole; sometimes beyond)."""
        x = a ^ b
        return any(not x & mask for mask in self.lead_masks)

    def lead_values(self, fingerprint: int) -> list[int]:
        """The lead value of one fingerprint for every table (the key a table is sorted by)."""
        out = []
        for moves in self.lead_moves:
            v = 0
            for s, mask, t in moves:
                v |= ((fingerprint >> s) & mask) << t
            out.append(v)
        return out

    def lead_array(self, fingerprints: np.ndarray, table: int) -> np.ndarray:
        """The lead values of a ``uint64`` array for one table (a new ``uint64`` array)."""
        out: np.ndarray | None = None
        for s, mask, t in self.lead_moves[table]:
            part = fingerprints >> np.uint64(s) if s else fingerprints.copy()
            if s + mask.bit_length() < F:
                part &= np.uint64(mask)
            if t:
                part <<= np.uint64(t)
            if out is None:
                out = part
            else:
                out |= part
        if out is None:  # pragma: no cover - every table has at least one leading block
            raise RuntimeError("a table without leading blocks")
        return out


#: Buckets address at most this many leading bits (and there are at most 1/4 as many as rows).
MAX_BUCKET_BITS = 32


def bucket_bits(lead_bits: int, size: int) -> int:
    """Leading bits used to address buckets for a table of *size* fingerprints."""
    return max(1, min(lead_bits, MAX_BUCKET_BITS, size.bit_length() - 3))


#: The entries a bucket holds at a design's :func:`capacity`, at most (on its shortest lead): the work of a check
#: of a two-stage index scans at most this many per table, whatever it stores.
BUCKET_LIMIT = 1024
#: The designs of a two-stage index, by the pages they are built for (:func:`tables_for`; docs/scaling.md).
SIZED_TABLES = ("13+13+13+13+12/k4", "11+11+11+11+10+10/k4", "8x8/k5")


def capacity(design: TableDesign) -> int:
    """The pages *design* is built for: as many as make its shortest lead's buckets hold :data:`BUCKET_LIMIT`
    random fingerprints each."""
    return int(2 ** min(design.lead_bits)) * BUCKET_LIMIT


def page_limit(design: TableDesign) -> int:
    """The most pages a two-stage index of *design* takes: twice its :func:`capacity` (past it, a check would scan
    buckets twice as long as the design allows; the index refuses pages and says how to rebuild it)."""
    return 2 * capacity(design)


#: A block takes at most this many times the pages its table's shortest-lead block holds on average, at random, when
#: the index holds the pages it is expected to (:func:`block_limit`).
BLOCK_HEADROOM = 2
#: ... and never fewer than this many.
BLOCK_PAGES_MIN = 64


def block_limit(design: TableDesign, expected_pages: int) -> int:
    """The most pages a block of *design* takes in an index expected to hold *expected_pages* (rule 3 of
    :mod:`simhash_filter.index.bound`): :data:`BLOCK_HEADROOM` times the mean size of a shortest-lead block of random
    pages at that size, rounded up to a power of two, at least :data:`BLOCK_PAGES_MIN`."""
    if not is_count(expected_pages, 1):
        raise ValueError(f"the expected number of pages must be an int >= 1, got {expected_pages!r}")
    mean = expected_pages / 2 ** min(design.lead_bits)
    return max(BLOCK_PAGES_MIN, 1 << math.ceil(math.log2(max(1.0, BLOCK_HEADROOM * mean))))


def tables_for(expected_pages: int) -> str:
    """The first of :data:`SIZED_TABLES` whose :func:`capacity` is at least *expected_pages* (the last beyond)."""
    if not is_count(expected_pages, 1):
        raise ValueError(f"the expected number of pages must be an int >= 1, got {expected_pages!r}")
    for name in SIZED_TABLES:
        if capacity(TableDesign.parse(name)) >= expected_pages:
            return name
    return SIZED_TABLES[-1]


def resolve_design(design: TableDesign | str, expected_size: int) -> TableDesign:
    """Turn a design argument (an instance, a name :meth:`TableDesign.parse` understands, or ``"auto"``: the
    :func:`tables_for` *expected_size* pages) into a :class:`TableDesign`."""
    if isinstance(design, TableDesign):
        return design
    if not isinstance(design, str):
        raise TypeError(f"design must be a TableDesign or a name, got {type(design).__name__}")
    return TableDesign.parse(tables_for(expected_size) if design == "auto" else design)
