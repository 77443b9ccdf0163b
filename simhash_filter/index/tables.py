"""Exact near-duplicate index for f = 64-bit simhash fingerprints (Manku, Jain, Das Sarma, WWW 2007).

The 64 bits are split into blocks.  A stored fingerprint within Hamming distance k of a query
differs in at most k blocks (pigeonhole), so it agrees exactly with the query on every choice of
``len(blocks) - k`` blocks taken from the blocks where they agree.  The index keeps one table per
such choice (a *permutation* that brings the chosen blocks to the front; here: the rows sorted by
the table's *lead value*, its leading blocks side by side), probes each table by exact match on
its leading bits, and verifies the Hamming distance of the few candidates.  The answer is exact:
never a false negative, never a false positive.

:mod:`simhash_filter.index.tables` is the bottom layer: the value types (:class:`Match`), the table designs
(:class:`TableDesign`, :func:`choose_design`) and the bit helpers, importing no store.  The facade above it,
:class:`~simhash_filter.index.nearduplicate.NearDuplicateIndex`, keeps the tables in a backend
(:mod:`simhash_filter.index.backends`) chosen by URI, ``memory://`` by default.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import combinations
from typing import NamedTuple

import numpy as np

__all__ = [
    "BLOCK_HEADROOM",
    "BLOCK_PAGES_MIN",
    "BUCKET_LIMIT",
    "DESIGNS",
    "SIZED_TABLES",
    "F",
    "Match",
    "TableDesign",
    "block_limit",
    "capacity",
    "choose_design",
    "hamming",
    "page_limit",
    "tables_for",
]

#: Fingerprint width in bits (the paper's f).
F = 64
_MASK64 = (1 << F) - 1
#: More tables than this is a mistake (memory grows by 6 bytes per fingerprint per table).
_MAX_TABLES = 1024


def check_fingerprint(fingerprint: object) -> int:
    """Return *fingerprint* as an ``int`` in [0, 2**64), or raise ``TypeError``/``ValueError``."""
    if isinstance(fingerprint, bool) or not isinstance(fingerprint, (int, np.integer)):
        raise TypeError(f"a fingerprint must be an int in [0, 2**64), got {type(fingerprint).__name__} {fingerprint!r}")
    value = int(fingerprint)
    if not 0 <= value <= _MASK64:
        raise ValueError(f"a fingerprint must be in [0, 2**64), got {value}")
    return value


def as_fingerprint_array(fingerprints: Iterable[int] | np.ndarray) -> np.ndarray:
    """Return *fingerprints* as a contiguous ``uint64`` array, validating every value."""
    if not isinstance(fingerprints, np.ndarray):
        items = fingerprints if isinstance(fingerprints, Sequence) else list(fingerprints)
        if isinstance(items, (str, bytes)) or not set(map(type, items)) <= {int}:
            for x in items:  # numpy integers are fine; anything else gets a clear error
                check_fingerprint(x)
        try:
            return np.array(items, dtype=np.uint64).reshape(-1)
        except OverflowError:
            bad = next(x for x in items if not 0 <= x <= _MASK64)
            raise ValueError(f"a fingerprint must be in [0, 2**64), got {bad}") from None
    arr = fingerprints
    if arr.ndim != 1:
        raise ValueError(f"fingerprints must be one-dimensional, got shape {arr.shape}")
    if arr.dtype == np.uint64:
        return np.ascontiguousarray(arr)
    if arr.size == 0:
        return np.empty(0, dtype=np.uint64)
    kind = arr.dtype.kind
    if kind == "u":
        return arr.astype(np.uint64)
    if kind == "i":
        if arr.min() < 0:
            raise ValueError(f"a fingerprint must be in [0, 2**64), got {int(arr.min())}")
        return arr.astype(np.uint64)
    if kind == "O":
        return np.fromiter((check_fingerprint(x) for x in arr), dtype=np.uint64, count=arr.size)
    raise TypeError(f"fingerprints must be integers, got an array of {arr.dtype}")


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
    """How the f = 64 bits are cut into blocks, and so which permuted tables the index keeps.

    ``blocks`` are bit widths from the most significant bit down, summing to 64.  Each table
    brings ``len(blocks) - k`` of the blocks to the front (its *leading bits*); there is one table
    per choice, ``C(len(blocks), len(blocks) - k)`` in all.  A design built for k answers every
    query distance up to k.
    """

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
                f"cannot parse table design {name!r}; expected e.g. '4x16/k3', '13+13+13+13+12/k3', "
                f"'5/k3' or one of {sorted(DESIGNS)}"
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
        ``lead_bits``-bit integer; blocks that are adjacent in the fingerprint move together.
        """
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


def fold16(fingerprint: int) -> int:
    """XOR of the four 16-bit quarters of a fingerprint.

    ``hamming(fold16(a), fold16(b)) <= hamming(a, b)``: each bit of the fold is the XOR of four
    bits, and flipping bits can change it at most once per flip.  Backends use it as a cheap
    filter before fetching a candidate's fingerprint.
    """
    return (fingerprint ^ (fingerprint >> 16) ^ (fingerprint >> 32) ^ (fingerprint >> 48)) & 0xFFFF


def fold16_array(fingerprints: np.ndarray) -> np.ndarray:
    """:func:`fold16` of a ``uint64`` array, as ``uint16``."""
    out = fingerprints >> np.uint64(32)
    out ^= fingerprints
    out ^= out >> np.uint64(16)
    return out.astype(np.uint16)


#: Up to this k the memory backend's tables hold 16-bit folds and row ids (6 bytes per entry); beyond it the
#: whole fingerprints (8 bytes per entry, and a 4-byte row id in the first table).  A 16-bit fold passes 1.1 %
#: of random entries at k = 3, but 3.8 % at k = 4, 10.5 % at k = 5 and 90 % at k = 10, and each entry that
#: passes costs a random fetch from the fingerprint array; a bucket of whole fingerprints is verified exactly
#: in one pass over contiguous memory.  Measured (10M random fingerprints, query time, bytes per
#: fingerprint, folds -> fingerprints): 4x16/k3 15.5 -> 12.6 µs, 32 -> 44 B; 5/k4 36.5 -> 21.7 µs,
#: 38 -> 52 B; 6/k5 196 -> 56 µs, 44 -> 60 B; 5/k4 at k = 10 (two-stage) 139 -> 22 µs, 39 -> 53 B.  The
#: product of the two, which :func:`choose_design` minimises, favours folds up to k = 3 only.
FOLD_MAX_K = 3


def filters_on_folds(k: int) -> bool:
    """Whether the memory backend for queries up to distance *k* keeps 16-bit folds (not whole fingerprints)
    in its tables."""
    return k <= FOLD_MAX_K


def _sub_filter_pass(k: int, bits: int = 16) -> float:
    """Share of random ``bits``-bit values within Hamming distance k of a given one."""
    return sum(math.comb(bits, i) for i in range(min(k, bits) + 1)) / 2**bits


# Cost model of one query of the memory backend, in microseconds, fitted to measurements on a
# 2-core EPYC (100k to 30M random fingerprints, designs 4x16/k3, 5/k3 and 6/k3): a fixed cost, a cost
# per table probed (Python + numpy slicing + cache misses), a cost per candidate whose 16-bit fold is
# compared, and a cost per candidate that passes that filter and is fetched from a random place.  With
# tables of whole fingerprints (k > FOLD_MAX_K) a candidate costs one 8-byte read, XOR and popcount, and
# nothing is fetched (fitted on 5/k4 at k = 4 and 10, 6/k5 and 7/k6, 1M and 10M fingerprints).
_COST_BASE = 4.0
_COST_PER_TABLE = 1.4
_COST_PER_CANDIDATE = 0.002
_COST_PER_FETCH = 0.08
_COST_PER_CANDIDATE_EXACT = 0.0016
#: Buckets address at most this many leading bits (and there are at most 1/4 as many as rows).
MAX_BUCKET_BITS = 32


def bucket_bits(lead_bits: int, size: int) -> int:
    """Leading bits used to address buckets for a table of *size* fingerprints."""
    return max(1, min(lead_bits, MAX_BUCKET_BITS, size.bit_length() - 3))


def _fold_pass(k: int) -> float:
    """Share of random 16-bit folds within Hamming distance k of a given one."""
    return sum(math.comb(16, i) for i in range(min(k, 16) + 1)) / 2**16


def estimated_query_cost(design: TableDesign, size: int, k: int | None = None) -> float:
    """Predicted time (µs) of one query of the memory backend holding *size* fingerprints (built for queries up
    to distance *k*, default the design's)."""
    k = design.k if k is None else k
    if filters_on_folds(k):
        per_candidate = _COST_PER_CANDIDATE + _fold_pass(k) * _COST_PER_FETCH
    else:
        per_candidate = _COST_PER_CANDIDATE_EXACT
    candidates = sum(size / 2 ** bucket_bits(lead, max(size, 1)) for lead in design.lead_bits)
    return _COST_BASE + _COST_PER_TABLE * design.n_tables + per_candidate * candidates


def estimated_bytes_per_fingerprint(design: TableDesign, k: int | None = None) -> int:
    """Memory of the memory backend per fingerprint (built for queries up to distance *k*, default the
    design's; a sketch kept beside each fingerprint not counted): 8 bytes, plus 4 (row id) + 2 (fold) per
    table up to k = 3 (:data:`FOLD_MAX_K`), else 12 per table (the fingerprint and the row id) + 1 (the tables that
    refused the row: :mod:`simhash_filter.index.bound`)."""
    k = design.k if k is None else k
    if filters_on_folds(k):
        return 8 + 6 * design.n_tables
    return 8 + 12 * design.n_tables + 1


def choose_design(k: int, expected_size: int) -> TableDesign:
    """The balanced design with the best time-space trade-off at *expected_size* fingerprints.

    Rule: among the balanced designs with k+1, k+2 and k+3 blocks (at most 1024 tables), take the
    one with the lowest product of :func:`estimated_query_cost` (a model fitted to the memory
    backend: 4 µs + 1.4 µs per table + 0.002 µs per candidate + 0.08 µs per candidate fetched, or
    0.0016 µs per candidate and nothing fetched for k > 3) and :func:`estimated_bytes_per_fingerprint`
    (8 + 6 per table, or 9 + 12 per table for k > 3); ties go to fewer tables.
    More blocks mean longer leading bits, so fewer candidates, but more tables to probe and
    store.  For k = 3: 4 tables of 16 bits (32 B/fp) up to about 180 million fingerprints, then
    10 tables (13+13+13+13+12, 68 B/fp), then 20 tables (11+11+11+11+10+10, 128 B/fp) from about
    80 billion.  Measured at 10M: 4x16/k3 11 µs and 32 B/fp,
    13+13+13+13+12/k3 17 µs and 76 B/fp, 11+11+11+11+10+10/k3 38 µs and 145 B/fp.
    """
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int, got {k!r}")
    if not 0 <= k < F:
        raise ValueError(f"k must be in [0, {F - 1}], got {k}")
    if isinstance(expected_size, bool) or not isinstance(expected_size, int) or expected_size < 0:
        raise ValueError(f"expected_size must be an int >= 0, got {expected_size!r}")
    best: tuple[float, int, TableDesign] | None = None
    for m in range(k + 1, min(k + 3, F) + 1):
        if math.comb(m, k) > _MAX_TABLES:
            break
        design = TableDesign.balanced(m, k)
        score = estimated_query_cost(design, max(expected_size, 1)) * estimated_bytes_per_fingerprint(design)
        if best is None or (score, design.n_tables) < best[:2]:
            best = (score, design.n_tables, design)
    if best is None:  # pragma: no cover - m = k + 1 always has k + 1 <= 64 tables
        raise ValueError(f"no design with at most {_MAX_TABLES} tables exists for k={k}")
    return best[2]


#: The entries a bucket holds at a design's :func:`capacity`, at most (on its shortest lead): the work of a check
#: of a two-stage index scans at most this many per table, whatever it stores.
BUCKET_LIMIT = 1024
#: The designs of a two-stage index (candidates at k = 10), by the pages they are built for (:func:`tables_for`):
#: five tables of 13-bit leads (one block each), then 15 tables of 20-22-bit leads (one per pair of six blocks),
#: then 56 of 24-bit leads (one per triple of eight).  Each keeps at least 99 % of the first's candidates among the
#: public set's near-duplicate pairs (``python -m benchmarks.scale.bench_scale designs``; docs/scaling.md).
SIZED_TABLES = ("13+13+13+13+12/k4", "11+11+11+11+10+10/k4", "8x8/k5")


def capacity(design: TableDesign) -> int:
    """The pages *design* is built for: as many as make its shortest lead's buckets hold :data:`BUCKET_LIMIT`
    random fingerprints each."""
    return 2 ** min(design.lead_bits) * BUCKET_LIMIT


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
    """The most pages a block of *design* takes in an index expected to hold *expected_pages* (the bound's rule 3,
    :mod:`simhash_filter.index.bound`): :data:`BLOCK_HEADROOM` times the mean size of a shortest-lead block at that
    size (random fingerprints spread evenly over its 2^lead blocks), rounded up to a power of two, at least
    :data:`BLOCK_PAGES_MIN`.  At the expected size a block of random pages holds the mean give or take its square
    root, so ordinary blocks never reach it (at 1,000,000 pages and five tables: a mean of 244, a limit of 512); a
    crowd of look-alike pages fills its blocks up to it, and a check reads at most that many entries a table."""
    if isinstance(expected_pages, bool) or not isinstance(expected_pages, int) or expected_pages < 1:
        raise ValueError(f"the expected number of pages must be an int >= 1, got {expected_pages!r}")
    mean = expected_pages / 2 ** min(design.lead_bits)
    return max(BLOCK_PAGES_MIN, 1 << math.ceil(math.log2(max(1.0, BLOCK_HEADROOM * mean))))


def tables_for(expected_pages: int) -> str:
    """The first of :data:`SIZED_TABLES` whose :func:`capacity` is at least *expected_pages* (the last beyond)."""
    if isinstance(expected_pages, bool) or not isinstance(expected_pages, int) or expected_pages < 1:
        raise ValueError(f"the expected number of pages must be an int >= 1, got {expected_pages!r}")
    for name in SIZED_TABLES:
        if capacity(TableDesign.parse(name)) >= expected_pages:
            return name
    return SIZED_TABLES[-1]


def _named_designs() -> dict[str, TableDesign | Callable[[int, int], TableDesign]]:
    designs: dict[str, TableDesign | Callable[[int, int], TableDesign]] = {"auto": choose_design}
    for k in range(0, 7):
        for m in range(k + 1, k + 4):
            d = TableDesign.balanced(m, k)
            designs[d.name] = d
    return designs


#: Named designs: ``"auto"`` calls :func:`choose_design`; the others are balanced designs with
#: k+1..k+3 blocks for k = 0..6, by :attr:`TableDesign.name` (``"4x16/k3"``, ``"13+13+13+13+12/k3"``...).
#: Any name :meth:`TableDesign.parse` understands works too.
DESIGNS: dict[str, TableDesign | Callable[[int, int], TableDesign]] = _named_designs()


def resolve_design(design: TableDesign | str, k: int, expected_size: int, candidates: bool = False) -> TableDesign:
    """Turn a design argument (an instance, ``"auto"``, a name) into a :class:`TableDesign` for k."""
    if isinstance(design, TableDesign):
        resolved = design
    elif isinstance(design, str):
        entry = DESIGNS.get(design)
        if entry is None:
            resolved = TableDesign.parse(design)
        elif isinstance(entry, TableDesign):
            resolved = entry
        else:
            resolved = entry(k, expected_size)
    else:
        raise TypeError(f"design must be a TableDesign or a name, got {type(design).__name__}")
    if resolved.k < k and not candidates:
        raise ValueError(f"design {resolved.name} answers distances up to {resolved.k}, but k={k}")
    return resolved
