"""In-process backend: numpy arrays, an LSM of bucketed runs and a small unsorted buffer.

Layout (per stored fingerprint, keys excluded):

* the fingerprints once, in insertion order, as a ``uint64`` array (8 bytes); the row number is the
  key id, and the keys live in a plain list beside it (the sketches, in an index that keeps them, in a
  ``(rows, sketch_bytes)`` array, and the tables that refused the row, one byte);
* per table and per *run* (a contiguous range of rows): the run's entries in bucket order
  (:mod:`~simhash_filter.index.backends.memory.runs`): 16-bit folds and row ids for k <= 3 (the classic
  index), whole fingerprints and row ids for k >= 4 (two-stage detection queries k = 10);
* the newest rows (fewer than ``buffer_size``) are in no run: queries scan them with one XOR and
  popcount.  A full buffer becomes a run; a run is rebuilt together with the newer run after it
  while it is at most ``merge_factor`` times larger, so there are few runs (about
  log_merge_factor(n / buffer_size)) and each row is rebuilt O(log n) times.  Bulk adds become one
  run directly.  A merge rebuilds its runs from the fingerprints (about 0.12 s per million rows
  here), so the insert that triggers a large merge waits for it.

With 4 tables of folds that is 8 + 4 * 6 = 32 bytes per fingerprint; with 5 tables of fingerprints
8 + 5 * 12 + 1 = 69 (133 with a 64-byte sketch).  A query reads one bucket per table and run.  With
folds it drops the entries whose fold is more than k bits from the query's (the fold distance never
exceeds the true distance), fetches the rest from the fingerprint array and verifies them on the full
64 bits: cheap while few folds pass (1.1 % of random ones at k = 3), but at k = 10 about 90 % pass
(and 2.5 % of 32-bit folds), and each costs a random fetch.  With fingerprints the buckets and the
buffer are verified exactly in one pass (XOR and popcount over contiguous memory).

A two-stage check (:meth:`MemoryBackend.add_and_candidates`) is bounded (:mod:`simhash_filter.index.bound`):
the hits of each table are its block's (the same whole lead), the nearest ``per_table`` of them are the
candidates, and a table whose block holds ``duplicates`` verified near-duplicates of the page does not take it.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import accumulate
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import numpy as np

from simhash_filter.index.backends.base import Backend, Candidate, Entry
from simhash_filter.index.backends.memory.runs import Run, build_run
from simhash_filter.index.bound import DEFAULT_BOUND, CheckBound, refusal_dtype, take
from simhash_filter.index.tables import Match, TableDesign, filters_on_folds, fold16, fold16_array
from simhash_filter.model.sketch import similarity

__all__ = ["MemoryBackend"]

#: With fewer candidates than this, fetch and verify them all instead of filtering on folds first.
_FOLD_FILTER_MIN = 48
#: With at most this many candidates left, verify them in Python (cheaper than numpy calls).
_PY_VERIFY_MAX = 24
#: A bounded check filters a bucket on the page's whole lead in numpy when it is longer than this (a bucket names
#: only a lead's top bits in a small run); a shorter one's few hits within k are filtered after.
_BLOCK_FILTER_MIN = 64
#: A bounded check with at most this many hits within k sorts them into their tables in Python (cheaper than numpy).
_PY_HITS_MAX = 32
#: Queries per step of :meth:`MemoryBackend.query_many` (bounds its temporary memory).
_BATCH = 2048


class MemoryBackend(Backend):
    """Everything in process memory; lost on exit.  ``memory://?buffer_size=2048&merge_factor=8``.

    Thread-safe: one lock serialises every call, so :meth:`check_and_add` is atomic.
    """

    def __init__(
        self,
        *,
        k: int,
        design: TableDesign,
        metadata: Mapping[str, Any] | None = None,
        buffer_size: int = 2048,
        merge_factor: int = 8,
    ) -> None:
        super().__init__(k=k, design=design, metadata=metadata)
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 1:
            raise ValueError(f"buffer_size must be an int >= 1, got {buffer_size!r}")
        if isinstance(merge_factor, bool) or not isinstance(merge_factor, int) or merge_factor < 1:
            raise ValueError(f"merge_factor must be an int >= 1, got {merge_factor!r}")
        self._buffer_size = buffer_size
        self._merge_factor = merge_factor
        self._folds = filters_on_folds(k)  # tables of 16-bit folds and row ids, else of whole fingerprints
        moves = design.lead_moves
        #: (shift, mask) of each table's lead, when every lead is one span of adjacent blocks (else None)
        self._spans = [(s, m) for ((s, m, _),) in moves] if all(len(mv) == 1 for mv in moves) else None
        self._all_tables = (1 << design.n_tables) - 1  # a page every table refused is not stored
        self._lead_masks = np.array(design.lead_masks, dtype=np.uint64)
        self._fps = np.empty(0, dtype=np.uint64)
        self._sketches = np.empty((0, self._sketch_bytes), dtype=np.uint8)  # row - sketch base -> sketch (two-stage)
        self._sketch_base = 0  # the rows below have their sketches elsewhere (:meth:`_sketch_of`)
        # row -> the tables that refused it (bit t: table t), in the smallest unsigned type that has a bit a table
        self._refused_dtype = refusal_dtype(design.n_tables)
        self._refused = np.empty(0, dtype=self._refused_dtype)
        self._n = 0
        self._sealed = 0  # rows below this are in runs, the rest is the buffer
        self._runs: list[Run] = []
        self._keys: list[str] = []
        self._dead: set[int] = set()  # deleted rows: still in the tables, never returned
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def from_uri(
        cls, uri: str, *, k: int, design: TableDesign, metadata: Mapping[str, Any] | None = None
    ) -> MemoryBackend:
        """``memory://`` with optional ``?buffer_size=N&merge_factor=N``."""
        parts = urlsplit(uri)
        if parts.netloc or parts.path:
            raise ValueError(f"a memory backend takes no location: {uri!r} (use 'memory://')")
        options: dict[str, int] = {}
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            if name not in ("buffer_size", "merge_factor"):
                raise ValueError(f"unknown memory backend option {name!r} in {uri!r}")
            try:
                options[name] = int(value)
            except ValueError:
                raise ValueError(f"option {name} must be an integer, got {value!r} in {uri!r}") from None
        return cls(k=k, design=design, metadata=metadata, **options)

    # -- introspection ---------------------------------------------------------------------------

    @property
    def nbytes(self) -> int:
        """Bytes held in numpy arrays (fingerprints, sketches, refusals, tables, offsets); the key list is not
        counted."""
        arrays = self._fps.nbytes + self._sketches.nbytes + self._refused.nbytes
        return arrays + sum(run.nbytes for run in self._runs)

    @property
    def run_sizes(self) -> list[int]:
        """Sizes of the sorted runs, oldest first, then the unsorted buffer's size."""
        return [run.size for run in self._runs] + [self._n - self._sealed]

    def __len__(self) -> int:
        return self._n - len(self._dead)

    @property
    def rows(self) -> int:
        """Every row stored, the dead and expired ones too: no scan (the page limit reads it on every add)."""
        return self._n

    def close(self) -> None:
        """Drop the arrays; later calls raise ``ValueError``."""
        with self._lock:
            self._closed = True
            self._fps = np.empty(0, dtype=np.uint64)
            self._sketches = np.empty((0, self._sketch_bytes), dtype=np.uint8)
            self._refused = np.empty(0, dtype=self._refused_dtype)
            self._runs = []
            self._keys = []
            self._dead = set()
            self._n = self._sealed = 0

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("operation on a closed index backend")

    # -- hooks for a backend that keeps its keys elsewhere or hides rows ------------------------

    def _store_keys(
        self, fingerprints: np.ndarray, keys: Sequence[str], sketches: np.ndarray, refused: np.ndarray
    ) -> None:
        """Keep the *keys* of the rows about to be appended (the on-disk backend writes them, and the rows'
        *sketches*, an ``(m, sketch_bytes)`` array, and the tables that *refused* them, first)."""
        self._keys.extend(keys)

    def _sketch_rows(self, sketches: Sequence[bytes] | None, m: int) -> np.ndarray:
        """*sketches* as an ``(m, sketch_bytes)`` array, checked: required exactly when the index keeps them."""
        size = self._sketch_bytes
        if not size:
            if sketches is not None:
                raise ValueError("this index keeps no sketches: store fingerprints and keys only")
            return np.empty((m, 0), dtype=np.uint8)
        if sketches is None or len(sketches) != m:
            raise ValueError(f"this index keeps a {size}-byte sketch beside each fingerprint: give one per key")
        for sketch in sketches:
            if not isinstance(sketch, bytes) or len(sketch) != size:
                raise ValueError(f"a sketch must be {size} bytes, got {type(sketch).__name__} of {len(sketch)}")
        return np.frombuffer(b"".join(sketches), dtype=np.uint8).reshape(m, size)

    def _key(self, row: int) -> str:
        """The key of a stored row."""
        return self._keys[row]

    def _sketch_of(self, row: int) -> bytes:
        """The sketch of a stored row (the on-disk backend reads those below the sketch base from its records)."""
        return self._sketches[row - self._sketch_base].tobytes()

    def _lower_buckets(self, fingerprint: int, leads: list[int]) -> Iterator[tuple[np.ndarray, np.ndarray, Any]]:
        """``(values, rows, tables)`` of the rows in the query's blocks (the same whole lead: *leads*) in tables kept
        elsewhere (the on-disk backend's tables on disk), before the runs': *tables* an array, each row's table.
        None here."""
        return iter(())

    def _hides_rows(self) -> bool:
        """Whether some stored rows must not be returned (then :meth:`_hidden` is asked per hit)."""
        return bool(self._dead)

    def _hidden(self, row: int) -> bool:
        """Whether a stored row is deleted (the on-disk backend also hides expired rows)."""
        return row in self._dead

    # -- writes ----------------------------------------------------------------------------------

    def _reserve(self, n: int) -> None:
        if n > len(self._fps):
            capacity = max(n, len(self._fps) + len(self._fps) // 4 + self._buffer_size)
            grown = np.empty(capacity, dtype=np.uint64)
            grown[: self._n] = self._fps[: self._n]
            self._fps = grown
            refused = np.zeros(capacity, dtype=self._refused_dtype)
            refused[: self._n] = self._refused[: self._n]
            self._refused = refused
        base = self._sketch_base
        if n - base > len(self._sketches):  # the sketches of rows from the sketch base on
            rows = max(n - base, len(self._sketches) + len(self._sketches) // 4 + self._buffer_size)
            sketches = np.empty((rows, self._sketch_bytes), dtype=np.uint8)
            sketches[: self._n - base] = self._sketches[: self._n - base]
            self._sketches = sketches

    def _seal(self) -> None:
        """Turn the buffer into a run, then merge runs that have become of similar size."""
        runs = self._runs
        runs.append(self._run(self._sealed, self._n))
        self._sealed = self._n
        while len(runs) >= 2 and runs[-2].size <= self._merge_factor * runs[-1].size:
            older, newer = runs[-2:]
            runs[-2:] = [self._run(older.start, newer.end)]

    def _run(self, start: int, end: int) -> Run:
        """The tables of rows ``start..end-1``."""
        refused = self._refused[start:end]
        return build_run(self._fps[start:end], start, self._design, self._folds, refused)

    def _add_one(self, fingerprint: int, key: str, sketch: np.ndarray | None = None, refused: int = 0) -> None:
        if sketch is None and self._sketch_bytes:
            raise ValueError("this index keeps a sketch beside each fingerprint: use add_and_candidates")
        n = self._n
        if n == len(self._fps) or n - self._sketch_base == len(self._sketches):
            self._reserve(n + 1)
        self._fps[n] = fingerprint
        s = n - self._sketch_base
        if sketch is not None:
            self._sketches[s] = sketch
        self._refused[n] = refused
        self._store_keys(self._fps[n : n + 1], [key], self._sketches[s : s + 1], self._refused[n : n + 1])
        self._n = n + 1
        if self._n - self._sealed >= self._buffer_size:
            self._seal()

    def add(self, fingerprint: int, key: str, sketch: bytes | None = None) -> None:
        """Store one fingerprint (and its sketch, in an index that keeps sketches)."""
        rows = self._sketch_rows(None if sketch is None else [sketch], 1)
        with self._lock:
            self._check_open()
            self._add_one(fingerprint, key, rows[0] if self._sketch_bytes else None)

    def add_many(self, fingerprints: np.ndarray, keys: Sequence[str], sketches: Sequence[bytes] | None = None) -> None:
        """Store many fingerprints; a large batch becomes one sorted run directly."""
        rows = self._sketch_rows(sketches, len(fingerprints))
        with self._lock:
            self._check_open()
            m = len(fingerprints)
            if m == 0:
                return
            self._reserve(self._n + m)
            self._fps[self._n : self._n + m] = fingerprints
            self._sketches[self._n - self._sketch_base : self._n - self._sketch_base + m] = rows
            self._refused[self._n : self._n + m] = 0
            self._store_keys(fingerprints, keys, rows, self._refused[self._n : self._n + m])
            self._n += m
            if self._n - self._sealed >= self._buffer_size:
                self._seal()

    def delete(self, keys: Iterable[str]) -> int:
        """Forget every stored fingerprint whose key is in *keys* (they stay in the tables, hidden)."""
        wanted = set(keys)
        with self._lock:
            self._check_open()
            rows = [r for r in range(self._n) if r not in self._dead and self._key(r) in wanted]
            self._dead.update(rows)
            return len(rows)

    # -- reads -----------------------------------------------------------------------------------

    def entries(self) -> Iterator[Entry]:
        """Every stored fingerprint, oldest first (a snapshot taken when called)."""
        with self._lock:
            self._check_open()
            n = self._n
            fps = self._fps[:n].tolist()
        for row, fp in enumerate(fps):
            if not self._hidden(row):
                yield Entry(fp, self._key(row), sketch=self._sketch_of(row) if self._sketch_bytes else None)

    def _query(self, fingerprint: int, k: int) -> list[Match]:
        return [Match(self._key(r), d, f) for d, r, f in self._hits(fingerprint, k)]

    def _leads(self, fingerprint: int) -> list[int]:
        """The fingerprint's lead value for every table (:meth:`TableDesign.lead_values`)."""
        if self._spans is None:
            return self._design.lead_values(fingerprint)
        return [(fingerprint >> s) & m for s, m in self._spans]

    def _hits(self, fingerprint: int, k: int) -> list[tuple[int, int, int]]:
        """(distance, row, fingerprint) of the stored fingerprints within *k* found through the tables (all of
        them up to the design's k), nearest first, ties in insertion order."""
        if not self._folds:
            return self._hits_exact(fingerprint, k)
        fps = self._fps
        hits: list[tuple[int, int, int]] = []  # (distance, row, fingerprint)
        if self._runs:
            leads = self._leads(fingerprint)
            row_parts = []
            fold_parts = []
            for run in self._runs:
                for (_, off, folds, rows, drop), lead in zip(run.tables, leads, strict=True):
                    b = lead >> drop
                    lo = off[b]
                    hi = off[b + 1]
                    if hi != lo:
                        row_parts.append(rows[lo:hi])
                        fold_parts.append(folds[lo:hi])
            if row_parts:
                cand = np.concatenate(row_parts) if len(row_parts) > 1 else row_parts[0]
                if len(cand) > _FOLD_FILTER_MIN:
                    qfold = np.uint16(fold16(fingerprint))
                    if len(fold_parts) > 1:
                        folds = np.concatenate(fold_parts)
                        folds ^= qfold
                    else:
                        folds = fold_parts[0] ^ qfold  # never in place: a view of the table
                    cand = cand[np.bitwise_count(folds) <= k]
                if len(cand) <= _PY_VERIFY_MAX:
                    for r, f in zip(cand.tolist(), fps[cand].tolist(), strict=True):
                        d = (f ^ fingerprint).bit_count()
                        if d <= k:
                            hits.append((d, r, f))
                else:
                    self._verify(fps[cand], fingerprint, k, hits, cand)
        if self._n > self._sealed:  # scan the buffer
            self._verify(fps[self._sealed : self._n], fingerprint, k, hits, self._sealed)
        if hits and self._hides_rows():
            hits = [hit for hit in hits if not self._hidden(hit[1])]
        if len(hits) > 1:
            hits = sorted(set(hits))  # a match can be found through several tables
        return hits

    def _buckets(self, fingerprint: int, blocks: bool = False) -> list[tuple[np.ndarray, np.ndarray, Any]]:
        """The query's bucket in every table of every run, when not empty: ``(values, rows, table)``; with
        *blocks*, only the entries of the page's block (a bucket names only a lead's top bits in a small run:
        there the entries of other leads are left out, so that a flood in one block never costs a page of
        another block more than a numpy pass)."""
        parts = []
        masks = self._design.lead_masks
        leads = self._leads(fingerprint)
        parts.extend(self._lower_buckets(fingerprint, leads))
        if self._runs:
            folds = self._folds
            for run in self._runs:
                for t, ((_, off, values, rows, drop), lead) in enumerate(zip(run.tables, leads, strict=True)):
                    b = lead >> drop
                    lo = off[b]
                    hi = off[b + 1]
                    if hi == lo:
                        continue
                    part_values, part_rows = values[lo:hi], rows[lo:hi]
                    if blocks and (drop or folds):
                        if folds:  # tables of 16-bit folds (k <= 3): the rows' whole fingerprints
                            part_values = self._fps[part_rows]
                        if drop and hi - lo > _BLOCK_FILTER_MIN:  # (a short bucket's hits are checked after)
                            same = ((part_values ^ np.uint64(fingerprint)) & np.uint64(masks[t])) == 0
                            part_values, part_rows = part_values[same], part_rows[same]
                    parts.append((part_values, part_rows, t))
        return parts

    def _hits_exact(self, fingerprint: int, k: int) -> list[tuple[int, int, int]]:
        """:meth:`_hits` over tables of fingerprints: the buckets and the buffer verified in one pass."""
        parts = self._buckets(fingerprint)
        sealed = self._sealed
        values = [v for v, _, _ in parts]
        if self._n > sealed:  # the buffer, scanned whole
            values.append(self._fps[sealed : self._n])
        if not values:
            return []
        x = _xor(values, fingerprint)
        dist = np.bitwise_count(x)
        sel = np.flatnonzero(dist <= k)
        if not len(sel):
            return []
        rows = np.concatenate([r for _, r, _ in parts]) if parts else np.empty(0, dtype=np.uint32)
        total = len(rows)
        hits = {
            (d, int(rows[pos]) if pos < total else sealed + pos - total, xv ^ fingerprint)
            for pos, d, xv in zip(sel.tolist(), dist[sel].tolist(), x[sel].tolist(), strict=True)
        }  # a match is found through several tables
        if self._hides_rows():
            return sorted(hit for hit in hits if not self._hidden(hit[1]))
        return sorted(hits)

    def _full_blocks(self, parts: list[tuple[np.ndarray, np.ndarray, Any]], x: np.ndarray, limit: int) -> int:
        """The tables whose block of the page holds *limit* entries or more (bit *t*: table *t*; the bound's rule
        3), hidden rows counted: *parts* are the page's buckets, *x* their values then the buffer's XOR the page's
        fingerprint.  A table whose buckets and buffer hold fewer entries in all is not counted (the usual case)."""
        n_tables = len(self._lead_masks)
        upper = np.zeros(n_tables, dtype=np.int64)
        for values, _, t in parts:
            if isinstance(t, int):
                upper[t] += len(values)
            else:
                upper += np.bincount(t, minlength=n_tables)
        buffer = self._n - self._sealed
        if not (upper + buffer >= limit).any():
            return 0
        counts = np.zeros(n_tables, dtype=np.int64)
        at = 0
        for values, _, t in parts:
            part = x[at : at + len(values)]
            at += len(values)
            if isinstance(t, int):
                counts[t] += int(np.count_nonzero((part & self._lead_masks[t]) == 0))
            else:
                same = (part & self._lead_masks[t]) == 0
                counts += np.bincount(np.asarray(t)[same], minlength=n_tables)
        if buffer:
            xb = x[at:]
            refused = self._refused[self._sealed : self._n]
            for t in np.flatnonzero(upper + buffer >= limit).tolist():
                taken = ((refused >> refused.dtype.type(t)) & 1) == 0
                counts[t] += int(np.count_nonzero(((xb & self._lead_masks[t]) == 0) & taken))
        full = 0
        for t in np.flatnonzero(counts >= limit).tolist():
            full |= 1 << t
        return full

    def _block_hits(
        self, fingerprint: int, k: int, per_table: int, limit: int = 0
    ) -> tuple[list[list[tuple[int, int]]], int]:
        """For each table, ``(distance, row)`` of the *per_table* nearest rows (then the earliest) it holds in the
        page's block (the same lead) within *k*, and of every such row at distance 0 (hidden rows left out): the
        blocks and the buffer verified in one numpy pass, the nearest chosen in numpy too, so that a block crowded
        with pages near this one (that do not verify) costs a numpy pass, not a Python loop; and the tables whose
        block holds *limit* entries (:meth:`_full_blocks`; 0: not asked)."""
        masks = self._design.lead_masks
        parts = self._buckets(fingerprint, blocks=True)
        sealed, n = self._sealed, self._n
        values = [v for v, _, _ in parts]
        if n > sealed:  # the buffer, scanned whole
            values.append(self._fps[sealed:n])
        hits: list[list[tuple[int, int]]] = [[] for _ in masks]
        if not values:
            return hits, 0
        x = _xor(values, fingerprint)
        full = self._full_blocks(parts, x, limit) if limit else 0
        dist = np.bitwise_count(x)
        sel = np.flatnonzero(dist <= k)
        if not len(sel):
            return hits, full
        lengths = [len(v) for v, _, _ in parts]
        total = sum(lengths)
        if len(sel) <= _PY_HITS_MAX:  # the usual case: a few hits, sorted into their tables in Python
            return self._few_hits(parts, lengths, total, sel, dist, x, hits), full
        in_runs = sel[sel < total]
        tables, rows, dists = [], [], []
        if len(in_runs):
            table = np.concatenate([np.full(len(r), t) if isinstance(t, int) else t for _, r, t in parts])[in_runs]
            same = (x[in_runs] & self._lead_masks[table]) == 0  # in the page's block (a bucket may be wider)
            tables.append(table[same])
            rows.append(np.concatenate([r for _, r, _ in parts])[in_runs[same]].astype(np.int64))
            dists.append(dist[in_runs[same]])
        in_buffer = sel[sel >= total]
        if len(in_buffer):  # in the tables that took the row and whose whole lead it shares
            xb = x[in_buffer]
            refused = self._refused[in_buffer - total + sealed]
            for t, mask in enumerate(masks):
                ok = in_buffer[((xb & np.uint64(mask)) == 0) & ((refused >> t) & 1 == 0)]
                tables.append(np.full(len(ok), t))
                rows.append((ok - total + sealed).astype(np.int64))
                dists.append(dist[ok])
        table, row, d = (np.concatenate(a) for a in (tables, rows, dists))
        if self._hides_rows():
            shown = np.fromiter((not self._hidden(r) for r in row.tolist()), dtype=bool, count=len(row))
            table, row, d = table[shown], row[shown], d[shown]
        if len(row) > per_table:  # each table's nearest, then earliest, and those at distance 0
            order = np.lexsort((row, d, table))
            table, row, d = table[order], row[order], d[order]
            first = np.searchsorted(table, table, side="left")
            keep = (np.arange(len(table)) - first < per_table) | (d == 0)
            table, row, d = table[keep], row[keep], d[keep]
        for t, r, dd in zip(table.tolist(), row.tolist(), d.tolist(), strict=True):
            hits[t].append((dd, r))
        return hits, full

    def _few_hits(
        self,
        parts: list[tuple[np.ndarray, np.ndarray, int]],
        lengths: list[int],
        total: int,
        sel: np.ndarray,
        dist: np.ndarray,
        x: np.ndarray,
        hits: list[list[tuple[int, int]]],
    ) -> list[list[tuple[int, int]]]:
        """:meth:`_block_hits` for a few positions *sel* within k of the buckets (*parts*) and the buffer."""
        masks = self._design.lead_masks
        ends = list(accumulate(lengths))
        sealed = self._sealed
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
            refused = int(self._refused[row])
            for t, mask in enumerate(masks):
                if not (refused >> t) & 1 and not xv & mask:
                    hits[t].append((d, row))
        if self._hides_rows():
            hits = [[hit for hit in table if not self._hidden(hit[1])] for table in hits]
        return hits

    def _bounded(
        self, fingerprint: int, key: str | None, sketch: bytes, k: int, bound: CheckBound
    ) -> tuple[list[Candidate], int]:
        """The bounded check (:func:`~simhash_filter.index.bound.take`): the candidates, and the tables that
        refuse the page (*key* None: a query that stores nothing, and so refuses nothing)."""
        verdicts: dict[int, bool] = {}
        fps, t, part = self._fps, bound.min_similarity, self._verify_bytes
        read: dict[int, bytes] = {}

        def sketch_of(row: int) -> bytes:
            if row not in read:
                read[row] = self._sketch_of(row)
            return read[row]

        def verified(row: int) -> bool:
            if row not in verdicts:
                verdicts[row] = similarity(sketch[:part], sketch_of(row)[:part]) >= t
            return verdicts[row]

        def own(row: int) -> bool:
            return key is not None and int(fps[row]) == fingerprint and self._key(row) == key

        limit = bound.block_pages if key is not None else 0  # a query refuses nothing
        hits, full = self._block_hits(fingerprint, k, bound.per_table, limit)
        chosen, refused = take(hits, bound, verified, own, full)
        found = [Candidate(self._key(r), d, int(fps[r]), sketch_of(r)) for d, r in chosen]
        return found, refused

    def candidates(self, fingerprint: int, k: int, bound: CheckBound = DEFAULT_BOUND) -> list[Candidate]:
        """The candidates within *k* under *bound*, nearest first, ties in insertion order; nothing stored."""
        if not self._sketch_bytes:
            self._no_sketches()
        with self._lock:
            self._check_open()
            return self._bounded(fingerprint, None, bytes(self._sketch_bytes), k, bound)[0]

    def add_and_candidates(
        self, fingerprint: int, key: str, sketch: bytes, k: int, bound: CheckBound = DEFAULT_BOUND
    ) -> list[Candidate]:
        """Atomically: the candidates within *k* under *bound*, then this page stored in the tables that take
        it (none: not stored)."""
        if not self._sketch_bytes:
            self._no_sketches()
        row = self._sketch_rows([sketch], 1)[0]
        with self._lock:
            self._check_open()
            found, refused = self._bounded(fingerprint, key, sketch, k, bound)
            if refused != self._all_tables:
                self._add_one(fingerprint, key, row, refused)
            return found

    def _no_sketches(self) -> None:
        raise NotImplementedError("this index keeps no sketches (its metadata has no sketch_bytes)")

    @staticmethod
    def _verify(
        values: np.ndarray,
        fingerprint: int,
        k: int,
        hits: list[tuple[int, int, int]],
        rows: np.ndarray | int,
    ) -> None:
        """Append (distance, row, fingerprint) of the *values* within *k* to *hits*.

        *rows* are the values' rows, or the row of the first value when they are consecutive.
        """
        dist = np.bitwise_count(values ^ np.uint64(fingerprint))
        sel = np.flatnonzero(dist <= k)
        if len(sel):
            found = sel + rows if isinstance(rows, int) else rows[sel]
            hits.extend(zip(dist[sel].tolist(), found.tolist(), values[sel].tolist(), strict=True))

    def query(self, fingerprint: int, k: int) -> list[Match]:
        """Every stored fingerprint within *k*, nearest first, ties in insertion order."""
        with self._lock:
            self._check_open()
            return self._query(fingerprint, k)

    def check_and_add(self, fingerprint: int, key: str, k: int) -> Match | None:
        """Atomically: the nearest stored fingerprint within *k*, or add this one and return None."""
        with self._lock:
            self._check_open()
            found = self._query(fingerprint, k)
            if found:
                return found[0]
            self._add_one(fingerprint, key)
            return None

    def check_and_add_many(self, fingerprints: np.ndarray, keys: Sequence[str], k: int) -> list[Match | None]:
        """:meth:`check_and_add` for each pair in order, under one lock."""
        with self._lock:
            self._check_open()
            out: list[Match | None] = []
            for fp, key in zip(fingerprints.tolist(), keys, strict=True):
                found = self._query(fp, k)
                if found:
                    out.append(found[0])
                else:
                    self._add_one(fp, key)
                    out.append(None)
            return out

    def query_many(self, fingerprints: np.ndarray, k: int) -> list[list[Match]]:
        """Every stored fingerprint within *k* of each query, vectorised over the batch."""
        with self._lock:
            self._check_open()
            out: list[list[Match]] = [[] for _ in range(len(fingerprints))]
            if self._n == 0 or len(fingerprints) == 0:
                return out
            runs = list(self._runs)
            if self._n > self._sealed:  # a throwaway run over the buffer
                runs.append(self._run(self._sealed, self._n))
            fps = self._fps
            hiding = self._hides_rows()
            for lo in range(0, len(fingerprints), _BATCH):
                qs = fingerprints[lo : lo + _BATCH]
                qidx, rows, dist = self._probe_batch(runs, qs, k)
                if not len(qidx):
                    continue
                order = np.lexsort((rows, dist, qidx))
                qidx, rows, dist = qidx[order], rows[order], dist[order]
                keep = np.ones(len(qidx), dtype=bool)
                keep[1:] = (qidx[1:] != qidx[:-1]) | (rows[1:] != rows[:-1])
                qidx, rows, dist = qidx[keep], rows[keep], dist[keep]
                for qi, r, d, f in zip(
                    (qidx + lo).tolist(), rows.tolist(), dist.tolist(), fps[rows].tolist(), strict=True
                ):
                    if not (hiding and self._hidden(r)):
                        out[qi].append(Match(self._key(r), d, f))
            return out

    def _probe_batch(self, runs: list[Run], qs: np.ndarray, k: int) -> tuple[np.ndarray, ...]:
        """(query index, row, distance) of every match of the queries *qs* in *runs*, unsorted (a match found
        through several tables more than once)."""
        fps = self._fps
        design = self._design
        folds = self._folds
        leads = [design.lead_array(qs, t) for t in range(design.n_tables)]
        qkeys = fold16_array(qs) if folds else qs
        found_q, found_r, found_d = [], [], []
        for run in runs:
            for (off, _, values, rows, drop), lead in zip(run.tables, leads, strict=True):
                b = (lead >> np.uint64(drop) if drop else lead).astype(np.intp)
                start = off[b].astype(np.intp)
                lens = off[b + 1].astype(np.intp)
                lens -= start
                ends = np.cumsum(lens)
                total = int(ends[-1])
                if total == 0:
                    continue
                # candidate j of query i sits at start[i] + j: one arange shifted per query
                pos = np.repeat(start - ends + lens, lens)
                pos += np.arange(total, dtype=np.intp)
                dist = np.bitwise_count(values[pos] ^ np.repeat(qkeys, lens))
                hit = np.flatnonzero(dist <= k)
                qidx = np.searchsorted(ends, hit, side="right")
                cand = rows[pos[hit]].astype(np.int64)
                if folds:  # fetch and verify the candidates that pass the fold filter
                    dist = np.bitwise_count(fps[cand] ^ qs[qidx])
                    sel = dist <= k
                    qidx, cand, dist = qidx[sel], cand[sel], dist[sel]
                else:  # exact already
                    dist = dist[hit]
                found_q.append(qidx)
                found_r.append(cand)
                found_d.append(dist)
        if not found_q:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty, empty
        return np.concatenate(found_q), np.concatenate(found_r), np.concatenate(found_d)


def _xor(values: list[np.ndarray], fingerprint: int) -> np.ndarray:
    """The *values* side by side, each XOR *fingerprint* (a new array: the values are views of the tables)."""
    if len(values) == 1:
        return values[0] ^ np.uint64(fingerprint)
    x = np.concatenate(values)
    x ^= np.uint64(fingerprint)
    return x
