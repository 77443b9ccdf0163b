""":class:`BoundedTables`: the runs and the buffer over a store's rows, and the bounded check
(:mod:`simhash_filter.index.bound`) that reads them; the rows are read only through :class:`RowSource`."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from itertools import accumulate
from typing import Protocol

import numpy as np

from simhash_filter.index.backends.base import Candidate
from simhash_filter.index.backends.memory.runs import Run, build_run
from simhash_filter.index.bound import CheckBound, take
from simhash_filter.index.tables import TableDesign, is_count

#: A bounded check filters a bucket on the page's whole lead in numpy when it is longer than this (a bucket names
#: only a lead's top bits in a small run); a shorter one's few hits within k are filtered after.
_BLOCK_FILTER_MIN = 64
#: A bounded check with at most this many hits within k sorts them into their tables in Python (cheaper than numpy).
_PY_HITS_MAX = 32
#: The most blocks :attr:`BoundedTables.full_blocks` keeps (a block of 512 entries is 8 KB).
_FULL_KEPT = 256
#: A bounded check sorts its hits within k by one int64 key: table, then distance, then row (rows below 2**33).
_TABLE_SHIFT = 40
_DISTANCE_SHIFT = 33
_ROW_MASK = (1 << _DISTANCE_SHIFT) - 1

#: One bucket read for a query: ``(values, rows, table)``: the entries' fingerprints, their rows, and their table
#: (an int), or each entry's table (an array: tables kept on disk).
Part = tuple[np.ndarray, np.ndarray, int | np.ndarray]


class RowSource(Protocol):
    """The contract between :class:`BoundedTables` and a store: what the engines read of the stored rows.

    Rows are numbered from 0 in the order they were stored.  The columns are read on every call (a store may
    grow them into new arrays): row *r*'s fingerprint is ``fingerprints[r]`` and the tables that refused it
    ``refusals[r]`` (bit *t*: table *t*), for every *r* below :attr:`stored`."""

    @property
    def fingerprints(self) -> np.ndarray:
        """The rows' fingerprints (``uint64``, at least :attr:`stored` long)."""
        ...

    @property
    def refusals(self) -> np.ndarray:
        """The tables that refused each row (an unsigned array, at least :attr:`stored` long)."""
        ...

    @property
    def stored(self) -> int:
        """The rows stored (hidden ones too)."""
        ...

    def key(self, row: int) -> str:
        """A row's key."""
        ...

    def sketch_rows(self, rows: np.ndarray) -> np.ndarray:
        """The sketches of *rows* (a two-stage index): an ``(len(rows), sketch_bytes)`` ``uint8`` array, in the
        order of *rows*."""
        ...

    def hides_rows(self) -> bool:
        """Whether some rows must not be returned (then :meth:`hidden` is asked of each hit)."""
        ...

    def hidden(self, row: int) -> bool:
        """Whether a row must not be returned (deleted, or expired)."""
        ...

    def lower_buckets(self, fingerprint: int, leads: list[int]) -> Iterator[Part]:
        """The rows in the query's blocks (the same whole lead: *leads*) of tables kept outside the runs (run
        files on disk), older than every run's, as parts whose table is an array (each row's)."""
        ...

    def spill(self) -> bool:
        """Move the rows to tables kept outside the runs if the store does that now (True: it did, every stored
        row is in the lower buckets, and the runs are dropped); asked when the buffer is full."""
        ...


class BoundedTables:
    """The runs and the buffer over a :class:`RowSource`'s rows, and the engines that read them.

    Rows below :attr:`sealed` are in runs (or, after a spill, in the source's lower buckets), the rest is the
    buffer, scanned whole.  A full buffer (``buffer_size`` rows) becomes a run; a run is rebuilt together with the
    newer run after it while it is at most ``merge_factor`` times larger."""

    def __init__(self, source: RowSource, *, design: TableDesign, buffer_size: int, merge_factor: int) -> None:
        if not is_count(buffer_size, 1):
            raise ValueError(f"buffer_size must be an int >= 1, got {buffer_size!r}")
        if not is_count(merge_factor, 1):
            raise ValueError(f"merge_factor must be an int >= 1, got {merge_factor!r}")
        self.source = source
        self.design = design
        self.buffer_size = buffer_size
        self.merge_factor = merge_factor
        moves = design.lead_moves
        #: (shift, mask) of each table's lead, when every lead is one span of adjacent blocks (else None)
        self._spans = [(s, m) for ((s, m, _),) in moves] if all(len(mv) == 1 for mv in moves) else None
        self._lead_masks = np.array(design.lead_masks, dtype=np.uint64)
        self._table_bits = np.uint64(1) << np.arange(len(design.lead_masks), dtype=np.uint64)  # bit t: table t
        self.runs: list[Run] = []
        #: Blocks a check found full (the bound's rule 3: they take no more pages), read in one piece by the next
        #: checks: ``(table, lead) -> (the entries' fingerprints, their rows)``, while no row joins them.
        self.full_blocks: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._full_rows = 0  # the rows stored when full_blocks was last brought up to date
        #: Rows below this are in runs (or the source's lower buckets), the rest is the buffer.
        self.sealed = 0

    # -- the runs --------------------------------------------------------------------------------

    @property
    def nbytes(self) -> int:
        """Bytes of the runs' arrays."""
        return sum(run.nbytes for run in self.runs)

    @property
    def run_sizes(self) -> list[int]:
        """Sizes of the runs, oldest first, then the buffer's size."""
        return [run.size for run in self.runs] + [self.source.stored - self.sealed]

    def clear(self, sealed: int = 0) -> None:
        """Drop the runs: the rows below *sealed* are in the source's lower buckets, the rest in the buffer."""
        self.runs = []
        self.sealed = sealed
        self.full_blocks = {}

    def added(self, fingerprint: int | None = None, refused: int = 0) -> None:
        """Rows were stored (one, *fingerprint*, that the tables in *refused* did not take; or many): forget the
        full blocks they joined (many: every one), then seal the buffer if it is full (:meth:`seal`)."""
        if fingerprint is None:
            self.full_blocks = {}
        elif self.full_blocks:
            for t, mask in enumerate(self.design.lead_masks):
                if not (refused >> t) & 1:
                    self.full_blocks.pop((t, fingerprint & mask), None)
        self._full_rows = self.source.stored
        if self.source.stored - self.sealed >= self.buffer_size:
            self.seal()

    def seal(self) -> None:
        """Hand the rows to the source's lower tables if it takes them now (:meth:`RowSource.spill`), else turn
        the buffer into a run, then merge runs that have become of similar size."""
        n = self.source.stored
        if self.source.spill():
            self.clear(n)
            return
        runs = self.runs
        runs.append(self._run(self.sealed, n))
        self.sealed = n
        while len(runs) >= 2 and runs[-2].size <= self.merge_factor * runs[-1].size:
            older, newer = runs[-2:]
            runs[-2:] = [self._run(older.start, newer.end)]

    def _run(self, start: int, end: int) -> Run:
        """The tables of rows ``start..end-1``."""
        refused = self.source.refusals[start:end]
        return build_run(self.source.fingerprints[start:end], start, self.design, refused)

    # -- the bounded check -----------------------------------------------------------------------

    def _leads(self, fingerprint: int) -> list[int]:
        """The fingerprint's lead value for every table (:meth:`TableDesign.lead_values`)."""
        if self._spans is None:
            return self.design.lead_values(fingerprint)
        return [(fingerprint >> s) & m for s, m in self._spans]

    def buckets(self, fingerprint: int, skip: int = 0) -> list[Part]:
        """The entries of the page's block in every table of every run (after the source's lower buckets), when
        not empty (a bucket names only a lead's top bits in a small run: a long one's entries of other leads are
        left out, so that a flood in one block never costs a page of another block more than a numpy pass); none
        of the tables in *skip* (bit *t*: table *t*)."""
        parts: list[Part] = []
        masks = self.design.lead_masks
        leads = self._leads(fingerprint)
        for values, rows, table in self.source.lower_buckets(fingerprint, leads):
            if skip and not isinstance(table, int):
                kept = (np.left_shift(1, table) & skip) == 0
                values, rows, table = values[kept], rows[kept], table[kept]
            parts.append((values, rows, table))
        for run in self.runs:
            for t, ((_, off, values, rows, drop), lead) in enumerate(zip(run.tables, leads, strict=True)):
                if (skip >> t) & 1:
                    continue
                b = lead >> drop
                lo = off[b]
                hi = off[b + 1]
                if hi == lo:
                    continue
                part_values, part_rows = values[lo:hi], rows[lo:hi]
                if drop and hi - lo > _BLOCK_FILTER_MIN:  # (a short bucket's hits are checked after)
                    same = ((part_values ^ np.uint64(fingerprint)) & np.uint64(masks[t])) == 0
                    part_values, part_rows = part_values[same], part_rows[same]
                parts.append((part_values, part_rows, t))
        return parts

    def _part_tables(self, parts: list[Part], lengths: list[int]) -> np.ndarray:
        """Each entry's table, the *parts* (of *lengths* entries) side by side."""
        if all(isinstance(t, int) for _, _, t in parts):
            return np.repeat(np.array([t for _, _, t in parts], dtype=np.int64), lengths)
        return np.concatenate([np.full(len(r), t) if isinstance(t, int) else np.asarray(t) for _, r, t in parts])

    def _buffer_blocks(self, xb: np.ndarray, skip: int) -> np.ndarray:
        """For each table and each buffer row (*xb*: their fingerprints XOR the page's): whether the table took the
        row and it shares the page's lead there, False for the tables in *skip* (a ``(tables, len(xb))`` boolean
        array, rows innermost)."""
        refused = self.source.refusals[self.sealed : self.sealed + len(xb)]
        bits = self._table_bits.astype(refused.dtype, copy=False)
        took: np.ndarray = ((bits[:, None] & refused) == 0) & ((self._lead_masks[:, None] & xb) == 0)
        took[[t for t in range(len(took)) if (skip >> t) & 1]] = False
        return took

    def _known_full(self, fingerprint: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """The page's blocks in :attr:`full_blocks`, by table (none when rows were stored without :meth:`added`:
        an index file read again)."""
        if self.source.stored != self._full_rows:
            self.full_blocks, self._full_rows = {}, self.source.stored
        masks = self.design.lead_masks
        return {t: block for t, mask in enumerate(masks) if (block := self.full_blocks.get((t, fingerprint & mask)))}

    def _may_fill(self, parts: list[Part], buffer: int, limit: int) -> bool:
        """Whether a table's buckets and the buffer hold *limit* entries or more in all (else no block is full:
        the usual case)."""
        n_tables = len(self._lead_masks)
        upper = np.zeros(n_tables, dtype=np.int64)
        for values, _, t in parts:
            if isinstance(t, int):
                upper[t] += len(values)
            else:
                upper += np.bincount(t, minlength=n_tables)
        return bool((upper + buffer >= limit).any())

    def block_hits(
        self, fingerprint: int, k: int, per_table: int, limit: int = 0
    ) -> tuple[list[list[tuple[int, int]]], int]:
        """For each table, ``(distance, row)`` of the *per_table* nearest rows (then the earliest) it holds in the
        page's block (the same lead) within *k*, and of every such row at distance 0 (hidden rows left out): the
        blocks and the buffer verified in one numpy pass, the nearest chosen in numpy too, so that a block crowded
        with pages near this one (that do not verify) costs a numpy pass, not a Python loop; and the tables whose
        block holds *limit* entries, hidden rows counted (bit *t*: table *t*; the bound's rule 3; 0: not asked)."""
        source = self.source
        known = self._known_full(fingerprint) if self.full_blocks else {}
        skip = sum(1 << t for t in known)
        parts = self.buckets(fingerprint, skip=skip)
        parts += [(v, r, t) for t, (v, r) in known.items()]
        sealed, n = self.sealed, source.stored
        if len(known) == len(self._lead_masks):  # no table reads the buffer
            n = sealed
        values = [v for v, _, _ in parts]
        if n > sealed:  # the buffer, scanned whole
            values.append(source.fingerprints[sealed:n])
        hits: list[list[tuple[int, int]]] = [[] for _ in self._lead_masks]
        if not values:
            return hits, 0
        x = _xor(values, fingerprint)
        dist = np.bitwise_count(x)
        sel = np.flatnonzero(dist <= k)
        lengths = [len(v) for v, _, _ in parts]
        total = sum(lengths)
        crowded = bool(limit) and self._may_fill(parts, n - sealed, limit)
        if not crowded and len(sel) <= _PY_HITS_MAX:  # the usual case: a few hits, sorted into their tables in Python
            return (self._few_hits(parts, lengths, total, sel, dist, x, hits, skip) if len(sel) else hits), 0
        # every entry's table and whether it is in the page's block (a bucket may be wider), in one pass
        table = self._part_tables(parts, lengths) if total else np.empty(0, dtype=np.int64)
        in_block = (x[:total] & self._lead_masks[table]) == 0
        buffer = self._buffer_blocks(x[total:], skip) if n > sealed else np.zeros((len(hits), 0), dtype=bool)
        all_rows = np.concatenate([r for _, r, _ in parts]) if total else np.empty(0, dtype=np.int64)
        full = 0
        if crowded:  # the entries of each table's block (rule 3)
            counts = np.bincount(table[in_block], minlength=len(hits)) + np.count_nonzero(buffer, axis=1)
            for t in np.flatnonzero(counts >= limit).tolist():
                full |= 1 << t
                if t not in known:  # kept for the next checks in one piece
                    self._keep_full(t, fingerprint, x, all_rows, in_block & (table == t), buffer[t])
        if len(sel) <= _PY_HITS_MAX:
            return (self._few_hits(parts, lengths, total, sel, dist, x, hits, skip) if len(sel) else hits), full
        in_runs = sel[sel < total]
        in_runs = in_runs[in_block[in_runs]]
        row_ids = all_rows[in_runs].astype(np.int64) if total else in_runs
        t_buffer, at = np.nonzero(buffer[:, sel[sel >= total] - total])  # in the tables that took it, in the block
        pos_buffer = sel[sel >= total][at]
        tables = np.concatenate((table[in_runs], t_buffer)).astype(np.int64)
        rows = np.concatenate((row_ids, pos_buffer - total + sealed))
        d = dist[np.concatenate((in_runs, pos_buffer))].astype(np.int64)
        if source.hides_rows():
            shown = np.fromiter((not source.hidden(r) for r in rows.tolist()), dtype=bool, count=len(rows))
            tables, rows, d = tables[shown], rows[shown], d[shown]
        # each table's nearest, then earliest, and those at distance 0 (the first of its table): one sort key
        keys = np.sort((tables << _TABLE_SHIFT) | (d << _DISTANCE_SHIFT) | rows)
        bounds = np.arange(len(hits) + 1, dtype=np.int64) << _TABLE_SHIFT
        starts = np.searchsorted(keys, bounds).tolist()  # each table's first key, then the end
        exact = np.searchsorted(keys, bounds[:-1] | (1 << _DISTANCE_SHIFT)).tolist()  # past its distance-0 keys
        for t, table_hits in enumerate(hits):
            lo = starts[t]
            for key in keys[lo : min(starts[t + 1], max(lo + per_table, exact[t]))].tolist():
                table_hits.append(((key >> _DISTANCE_SHIFT) & 127, key & _ROW_MASK))
        return hits, full

    def _keep_full(
        self, t: int, fingerprint: int, x: np.ndarray, rows: np.ndarray, in_runs: np.ndarray, in_buffer: np.ndarray
    ) -> None:
        """Keep table *t*'s full block in :attr:`full_blocks`: its entries in the runs (*in_runs* of *x*, the
        entries' fingerprints XOR the page's, and their *rows*) and in the buffer (*in_buffer*)."""
        if len(self.full_blocks) >= _FULL_KEPT:
            del self.full_blocks[next(iter(self.full_blocks))]  # the oldest kept
        total = len(rows)
        at = np.flatnonzero(in_buffer)
        values = np.concatenate((x[:total][in_runs], x[total + at])) ^ np.uint64(fingerprint)
        block_rows = np.concatenate((rows[in_runs].astype(np.int64), at + self.sealed))
        self.full_blocks[(t, fingerprint & self.design.lead_masks[t])] = (values, block_rows)

    def _few_hits(
        self,
        parts: list[Part],
        lengths: list[int],
        total: int,
        sel: np.ndarray,
        dist: np.ndarray,
        x: np.ndarray,
        hits: list[list[tuple[int, int]]],
        skip: int,
    ) -> list[list[tuple[int, int]]]:
        """:meth:`block_hits` for a few positions *sel* within k of the buckets (*parts*) and the buffer."""
        source = self.source
        masks = self.design.lead_masks
        ends = list(accumulate(lengths))
        sealed = self.sealed
        all_refused = source.refusals
        for pos, d, xv in zip(sel.tolist(), dist[sel].tolist(), x[sel].tolist(), strict=True):
            if pos < total:
                part = bisect_right(ends, pos)
                _, rows, t = parts[part]
                at = pos - ends[part] + lengths[part]
                if not isinstance(t, int):  # a part of several tables (tables on disk)
                    t = int(t[at])
                if not xv & masks[t]:  # in the page's block (a bucket may be wider)
                    hits[t].append((d, int(rows[at])))
                continue
            row = sealed + pos - total  # in the buffer: in the tables that took it and whose lead it shares
            refused = int(all_refused[row]) | skip
            for t, mask in enumerate(masks):
                if not (refused >> t) & 1 and not xv & mask:
                    hits[t].append((d, row))
        if source.hides_rows():
            hits = [[hit for hit in table if not source.hidden(hit[1])] for table in hits]
        return hits

    def bounded(
        self, fingerprint: int, key: str | None, sketch: bytes, k: int, bound: CheckBound, verify_bytes: int
    ) -> tuple[list[Candidate], int]:
        """The bounded check (:func:`~simhash_filter.index.bound.take`): the candidates, and the tables that
        refuse the page (*key* None: a query that stores nothing, and so refuses nothing); a candidate verifies
        when the first *verify_bytes* of the sketches are at least ``bound.min_similarity`` alike.

        The sketches of every row the tables show are read in one call (:meth:`RowSource.sketch_rows`), each
        verified once by a bit count: a crowd of look-alikes shows a page some forty of them."""
        source = self.source
        fps = source.fingerprints
        limit = bound.block_pages if key is not None else 0  # a query refuses nothing
        hits, full = self.block_hits(fingerprint, k, bound.per_table, limit)
        if not any(hits):
            return [], full
        shown = sorted({r for table in hits for _, r in table})
        at = {r: i for i, r in enumerate(shown)}
        rows = np.array(shown, dtype=np.int64)
        sketches = source.sketch_rows(rows)
        size, raw = sketches.shape[1], sketches.tobytes()
        # the same decision as similarity(...) >= min_similarity (bound.most_differing_bits)
        most = bound.differing_bits(verify_bytes) if verify_bytes else (0 if bound.min_similarity <= 0 else -1)
        page = int.from_bytes(sketch[:verify_bytes], "little")
        ok = (
            [
                (int.from_bytes(raw[start : start + verify_bytes], "little") ^ page).bit_count() <= most
                for start in range(0, len(raw), size)
            ]
            if size
            else [most >= 0] * len(shown)
        )

        def verified(row: int) -> bool:
            return ok[at[row]]

        def own(row: int) -> bool:
            return key is not None and int(fps[row]) == fingerprint and source.key(row) == key

        chosen, refused = take(hits, bound, verified, own, full)
        values = fps[rows].tolist()
        found = []
        for d, r in chosen:
            i = at[r]
            found.append(Candidate(source.key(r), d, values[i], raw[i * size : (i + 1) * size]))
        return found, refused


def _xor(values: list[np.ndarray], fingerprint: int) -> np.ndarray:
    """The *values* side by side, each XOR *fingerprint* (a new array: the values are views of the tables)."""
    if len(values) == 1:
        return np.asarray(values[0] ^ np.uint64(fingerprint))
    x = np.concatenate(values)
    x ^= np.uint64(fingerprint)
    return x
