"""In-process backend: numpy arrays, an LSM of bucketed runs and a small unsorted buffer.

Layout (per stored fingerprint, keys excluded):

* the fingerprints once, in insertion order, as a ``uint64`` array (8 bytes); the row number is the
  key id, and the keys live in a plain list beside it (the sketches, in an index that keeps them, in a
  ``(rows, sketch_bytes)`` array);
* per table and per *run* (a contiguous range of rows): the run's entries sorted by the table's bucket
  (the top bits of its lead value, its leading blocks), and a bucket -> offset array addressed directly
  by the bucket (at most 1/4 as many buckets as rows, and at most 2**lead_bits: under 1 byte, 0.03
  bytes for 4x16 at 10M).  An entry is one of two layouts, chosen by the backend's k
  (:func:`~simhash_filter.index.tables.filters_on_folds`):

  - *folds*, for k <= 3 (the classic index): the row id (``uint32``, 4 bytes) and the row's 16-bit
    fold (:func:`~simhash_filter.index.tables.fold16`, ``uint16``, 2 bytes), rows in order within a bucket;
  - *fingerprints*, for k >= 4 (two-stage detection queries k = 10): the row's whole fingerprint
    (``uint64``, 8 bytes), and in the first table only also its row id (``uint32``, 4 bytes).  The first
    table's lead is the fingerprint's top bits; it is sorted by the top ``64 - row_bits`` bits, then by
    row, so it also finds the rows holding a given fingerprint by binary search.

* the newest rows (fewer than ``buffer_size``) are in no run: queries scan them with one XOR and
  popcount.  A full buffer becomes a run; a run is rebuilt together with the newer run after it
  while it is at most ``merge_factor`` times larger, so there are few runs (about
  log_merge_factor(n / buffer_size)) and each row is rebuilt O(log n) times.  Bulk adds become one
  run directly.  A merge rebuilds its runs from the fingerprints (about 0.12 s per million rows
  here), so the insert that triggers a large merge waits for it.

With 4 tables of folds that is 8 + 4 * 6 = 32 bytes per fingerprint; with 5 tables of fingerprints
8 + 5 * 8 + 4 = 52 (116 with a 64-byte sketch).  A query reads one bucket per table and run.  With
folds it drops the entries whose fold is more than k bits from the query's (the fold distance never
exceeds the true distance), fetches the rest from the fingerprint array and verifies them on the full
64 bits: cheap while few folds pass (1.1 % of random ones at k = 3), but at k = 10 about 90 % pass
(and 2.5 % of 32-bit folds), and each costs a random fetch.  With fingerprints the buckets and the
buffer are verified exactly in one pass (XOR and popcount over contiguous memory), and only the
matches, a few per query, are looked up in their run's first table for their rows.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import numpy as np

from simhash_filter.index.backends.base import Backend, Candidate, Entry
from simhash_filter.index.tables import F, Match, TableDesign, bucket_bits, filters_on_folds, fold16, fold16_array

__all__ = ["MemoryBackend"]

#: With fewer candidates than this, fetch and verify them all instead of filtering on folds first.
_FOLD_FILTER_MIN = 48
#: With at most this many candidates left, verify them in Python (cheaper than numpy calls).
_PY_VERIFY_MAX = 24
#: Queries per step of :meth:`MemoryBackend.query_many` (bounds its temporary memory).
_BATCH = 2048


#: (bucket offsets, the same as a memoryview (its items are Python ints: faster to index one by one),
#: the entries' 16-bit folds or whole fingerprints in bucket order, their row ids in bucket order (None in
#: every table of fingerprints but the first), lead bits below the bucket)
_Table = tuple[np.ndarray, memoryview, np.ndarray, np.ndarray | None, int]


class _Run:
    """Bucketed tables over rows ``start..end-1``.

    In a run of fingerprint tables (``shift`` > 0), ``fps`` and ``rows`` view the first table: its fingerprints,
    sorted by their top ``F - row_bits`` bits (``low`` masks the other bits) and then by row, and their rows;
    ``shift`` brings a fingerprint's top bits down to its bucket in that table.
    """

    __slots__ = ("end", "fps", "low", "rows", "shift", "start", "tables")

    def __init__(self, start: int, end: int, tables: list[_Table], low: int = 0, shift: int = 0) -> None:
        self.start = start
        self.end = end
        self.tables = tables
        self.low = low
        self.shift = shift
        if shift:
            _, _, first, rows, _ = tables[0]
            self.fps = memoryview(first)
            self.rows = memoryview(rows)  # type: ignore[arg-type]

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def nbytes(self) -> int:
        return sum(
            off.nbytes + keys.nbytes + (0 if rows is None else rows.nbytes) for off, _, keys, rows, _ in self.tables
        )

    def rows_of(self, fingerprint: int) -> list[int]:
        """The rows of this run (of fingerprint tables) that hold *fingerprint*."""
        off = self.tables[0][1]
        b = fingerprint >> self.shift
        fps, low = self.fps, self.low
        lo = bisect_left(fps, fingerprint & ~low, off[b], off[b + 1])
        hi = bisect_right(fps, fingerprint | low, lo, off[b + 1])
        rows = self.rows
        return [rows[i] for i in range(lo, hi) if fps[i] == fingerprint]


def _build_run(fps: np.ndarray, start: int, design: TableDesign, folds: bool = True) -> _Run:
    """Sort the rows ``start..start+len(fps)-1`` into one bucketed table per design table, of 16-bit folds and
    row ids (*folds*) or of whole fingerprints (and row ids in the first table)."""
    size = len(fps)
    end = start + size
    row_dtype = np.uint32 if end <= 2**32 else np.uint64
    off_dtype = np.uint32 if size < 2**32 else np.uint64
    row_bits = max(1, (size - 1).bit_length())
    local_ids = np.arange(size, dtype=np.uint64)
    values = fold16_array(fps) if folds else fps
    tables = []
    low = shift = 0
    for t, lead in enumerate(design.lead_bits):
        b = bucket_bits(lead, size)
        drop = lead - b
        key = design.lead_array(fps, t)
        if drop:
            key >>= np.uint64(drop)
        offsets = np.zeros((1 << b) + 1, dtype=off_dtype)
        np.cumsum(np.bincount(key.astype(np.intp), minlength=1 << b), out=offsets[1:])
        if not folds and t == 0:
            # the first table's lead is the fingerprint's top bits: sort by the top F - row_bits bits (so by
            # bucket), then by row, and the table also finds the rows of a fingerprint by binary search
            shift = F - b
            if b + row_bits <= F:
                key = fps >> np.uint64(row_bits)
                key <<= np.uint64(row_bits)
                key |= local_ids
                key.sort()
                key &= np.uint64((1 << row_bits) - 1)
                local = key
                low = (1 << row_bits) - 1
            else:  # pragma: no cover - needs more than 2**32 rows in one run
                local = np.argsort(fps, kind="stable")
        elif b + row_bits <= F:  # one sort of (bucket, local row) packed in 64 bits
            key <<= np.uint64(row_bits)
            key |= local_ids
            key.sort()
            key &= np.uint64((1 << row_bits) - 1)
            local = key
        else:  # pragma: no cover - needs more than 2**38 rows in one run
            local = np.argsort(key, kind="stable")
        rows = None
        if folds or t == 0:
            rows = local.astype(row_dtype)
            if start:
                rows += row_dtype(start)
        tables.append((offsets, memoryview(offsets), values[local], rows, drop))
    return _Run(start, end, tables, low, shift)


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
        self._fps = np.empty(0, dtype=np.uint64)
        self._sketches = np.empty((0, self._sketch_bytes), dtype=np.uint8)  # row -> sketch (two-stage)
        self._n = 0
        self._sealed = 0  # rows below this are in runs, the rest is the buffer
        self._runs: list[_Run] = []
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
        """Bytes held in numpy arrays (fingerprints, sketches, tables, offsets); the key list is not counted."""
        return self._fps.nbytes + self._sketches.nbytes + sum(run.nbytes for run in self._runs)

    @property
    def run_sizes(self) -> list[int]:
        """Sizes of the sorted runs, oldest first, then the unsorted buffer's size."""
        return [run.size for run in self._runs] + [self._n - self._sealed]

    def __len__(self) -> int:
        return self._n - len(self._dead)

    def close(self) -> None:
        """Drop the arrays; later calls raise ``ValueError``."""
        with self._lock:
            self._closed = True
            self._fps = np.empty(0, dtype=np.uint64)
            self._sketches = np.empty((0, self._sketch_bytes), dtype=np.uint8)
            self._runs = []
            self._keys = []
            self._dead = set()
            self._n = self._sealed = 0

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("operation on a closed index backend")

    # -- hooks for a backend that keeps its keys elsewhere or hides rows ------------------------

    def _store_keys(self, fingerprints: np.ndarray, keys: Sequence[str], sketches: np.ndarray) -> None:
        """Keep the *keys* of the rows about to be appended (the on-disk backend writes them, and the rows'
        *sketches*, an ``(m, sketch_bytes)`` array, first)."""
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
            sketches = np.empty((capacity, self._sketch_bytes), dtype=np.uint8)
            sketches[: self._n] = self._sketches[: self._n]
            self._sketches = sketches

    def _seal(self) -> None:
        """Turn the buffer into a run, then merge runs that have become of similar size."""
        runs = self._runs
        runs.append(_build_run(self._fps[self._sealed : self._n], self._sealed, self._design, self._folds))
        self._sealed = self._n
        while len(runs) >= 2 and runs[-2].size <= self._merge_factor * runs[-1].size:
            older, newer = runs[-2:]
            runs[-2:] = [_build_run(self._fps[older.start : newer.end], older.start, self._design, self._folds)]

    def _add_one(self, fingerprint: int, key: str, sketch: np.ndarray | None = None) -> None:
        if sketch is None and self._sketch_bytes:
            raise ValueError("this index keeps a sketch beside each fingerprint: use add_and_candidates")
        n = self._n
        if n == len(self._fps):
            self._reserve(n + 1)
        self._fps[n] = fingerprint
        if sketch is not None:
            self._sketches[n] = sketch
        self._store_keys(self._fps[n : n + 1], [key], self._sketches[n : n + 1])
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
            self._sketches[self._n : self._n + m] = rows
            self._store_keys(fingerprints, keys, rows)
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
                yield Entry(fp, self._key(row), sketch=self._sketches[row].tobytes() if self._sketch_bytes else None)

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

    def _hits_exact(self, fingerprint: int, k: int) -> list[tuple[int, int, int]]:
        """:meth:`_hits` over tables of fingerprints: the buckets and the buffer verified in one pass, then the
        rows of the matches looked up in their run's first table."""
        parts = []
        bounds = []  # (end of a run's entries in the concatenation, the run)
        total = 0
        if self._runs:
            leads = self._leads(fingerprint)
            for run in self._runs:
                for (_, off, values, _, drop), lead in zip(run.tables, leads, strict=True):
                    b = lead >> drop
                    lo = off[b]
                    hi = off[b + 1]
                    if hi != lo:
                        parts.append(values[lo:hi])
                        total += hi - lo
                bounds.append((total, run))
        sealed = self._sealed
        if self._n > sealed:  # the buffer, scanned whole
            parts.append(self._fps[sealed : self._n])
        if not parts:
            return []
        if len(parts) > 1:
            x = np.concatenate(parts)
            x ^= np.uint64(fingerprint)
        else:
            x = parts[0] ^ np.uint64(fingerprint)  # never in place: a view of a table
        dist = np.bitwise_count(x)
        sel = (dist <= k).nonzero()[0]
        if not len(sel):
            return []
        hits: list[tuple[int, int, int]] = []
        seen: set[tuple[int, int]] = set()
        for pos, d, xv in zip(sel.tolist(), dist[sel].tolist(), x[sel].tolist(), strict=True):
            f = xv ^ fingerprint
            if pos >= total:
                hits.append((d, sealed + pos - total, f))
                continue
            i = 0
            while bounds[i][0] <= pos:
                i += 1
            if (i, f) not in seen:  # found through several tables, or stored more than once
                seen.add((i, f))
                hits.extend((d, r, f) for r in bounds[i][1].rows_of(f))
        if self._hides_rows():
            hits = [hit for hit in hits if not self._hidden(hit[1])]
        if len(hits) > 1:
            hits.sort()
        return hits

    def _candidates(self, fingerprint: int, k: int) -> list[tuple[Candidate, int]]:
        """The candidates within *k* (see :class:`Backend`) and their rows."""
        hits = self._hits(fingerprint, k)
        if k > self._design.k:  # found through a bucket, or in the buffer: it must agree on some table's lead
            agree = self._design.agree_on_a_lead
            hits = [hit for hit in hits if agree(hit[2], fingerprint)]
        return [(Candidate(self._key(r), d, f, self._sketches[r].tobytes()), r) for d, r, f in hits]

    def candidates(self, fingerprint: int, k: int) -> list[Candidate]:
        """The candidates within *k*, nearest first, ties in insertion order; nothing stored."""
        if not self._sketch_bytes:
            self._no_sketches()
        with self._lock:
            self._check_open()
            return [c for c, _ in self._candidates(fingerprint, k)]

    def add_and_candidates(self, fingerprint: int, key: str, sketch: bytes, k: int) -> list[Candidate]:
        """Atomically: the candidates within *k*, then this page stored unless its key is stored with this
        fingerprint already."""
        if not self._sketch_bytes:
            self._no_sketches()
        row = self._sketch_rows([sketch], 1)[0]
        with self._lock:
            self._check_open()
            found = self._candidates(fingerprint, k)
            if not any(c.distance == 0 and c.key == key for c, _ in found):
                self._add_one(fingerprint, key, row)
            return [c for c, _ in found]

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
                runs.append(_build_run(self._fps[self._sealed : self._n], self._sealed, self._design, self._folds))
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

    def _probe_batch(self, runs: list[_Run], qs: np.ndarray, k: int) -> tuple[np.ndarray, ...]:
        """(query index, row, distance) of every match of the queries *qs* in *runs*, unsorted (a match found
        through several tables more than once)."""
        fps = self._fps
        design = self._design
        folds = self._folds
        leads = [design.lead_array(qs, t) for t in range(design.n_tables)]
        qkeys = fold16_array(qs) if folds else qs
        found_q, found_r, found_d = [], [], []
        for run in runs:
            run_q, run_v, run_d = [], [], []
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
                keys = values[pos]
                dist = np.bitwise_count(keys ^ np.repeat(qkeys, lens))
                hit = np.flatnonzero(dist <= k)
                qidx = np.searchsorted(ends, hit, side="right")
                if folds:  # fetch and verify the candidates that pass the fold filter
                    cand = rows[pos[hit]]  # type: ignore[index]
                    dist = np.bitwise_count(fps[cand] ^ qs[qidx])
                    sel = dist <= k
                    found_q.append(qidx[sel])
                    found_r.append(cand[sel].astype(np.int64))
                    found_d.append(dist[sel])
                elif len(hit):  # exact already: the rows come from the run's first table
                    run_q.append(qidx)
                    run_v.append(keys[hit])
                    run_d.append(dist[hit])
            if run_q:
                qidx, rows, dist = _rows_of_matches(run, *map(np.concatenate, (run_q, run_v, run_d)))
                found_q.append(qidx)
                found_r.append(rows)
                found_d.append(dist)
        if not found_q:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty, empty
        return np.concatenate(found_q), np.concatenate(found_r), np.concatenate(found_d)


def _rows_of_matches(
    run: _Run, qidx: np.ndarray, values: np.ndarray, dist: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query index, row, distance) of matches given as fingerprint *values* in a run of fingerprint tables, each
    looked up in the run's first table (every row holding that fingerprint)."""
    _, _, first, rows, _ = run.tables[0]
    low = np.uint64(run.low)
    lo = np.searchsorted(first, values & ~low, side="left")  # the entries with the same top bits
    hi = np.searchsorted(first, values | low, side="right")
    lens = hi - lo
    ends = np.cumsum(lens)
    pos = np.repeat(lo - ends + lens, lens)
    pos += np.arange(int(ends[-1]), dtype=pos.dtype)
    same = np.flatnonzero(first[pos] == np.repeat(values, lens))
    owner = np.searchsorted(ends, same, side="right")
    return qidx[owner], rows[pos[same]].astype(np.int64), dist[owner]  # type: ignore[index]
