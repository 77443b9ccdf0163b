"""A store's rows in memory: the columns every store keeps (:class:`Columns`) and the memory store's rows
(:class:`MemoryRows`: the keys in a list, deleted rows hidden)."""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence

import numpy as np
from numpy.typing import ArrayLike

from simhash_filter.index.backends.memory.tables import Part


class Columns(abc.ABC):
    """The rows' fingerprints, refusals (bit *t*: table *t* refused the row), sketches and, if *timed*, the times
    they were added, in arrays grown by a quarter (and ``spare`` rows) when full; rows below :attr:`stored` are
    stored.  The sketches of rows below :attr:`sketch_base` are kept elsewhere (a store with tables on disk reads
    them from its records): ``sketches[r - sketch_base]`` is row *r*'s.

    Appending calls :meth:`keep` with the new rows before they count as stored: a store keeps their keys there
    (and writes them first, if it persists them); if it raises, nothing is appended."""

    def __init__(self, refused_dtype: np.dtype, *, timed: bool = False) -> None:
        self.refused_dtype = refused_dtype
        self.timed = timed
        self.sketch_bytes = 0
        self.spare = 1
        self.clear()

    def configure(self, sketch_bytes: int, spare: int) -> None:
        """Keep sketches of *sketch_bytes* (the store's, once known), grow by *spare* rows at least; no row is
        stored yet."""
        self.sketch_bytes = sketch_bytes
        self.spare = spare
        self.sketches = np.empty((0, sketch_bytes), dtype=np.uint8)

    def clear(self) -> None:
        """Forget every row (and free the arrays)."""
        self.fingerprints = np.empty(0, dtype=np.uint64)
        self.sketches = np.empty((0, self.sketch_bytes), dtype=np.uint8)
        self.refusals = np.empty(0, dtype=self.refused_dtype)
        self.times = np.empty(0, dtype=np.uint32)
        self.sketch_base = 0
        self.stored = 0

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays."""
        return self.fingerprints.nbytes + self.sketches.nbytes + self.refusals.nbytes + self.times.nbytes

    def reserve(self, n: int) -> None:
        """Room for *n* rows in every column."""
        stored = self.stored
        if n > len(self.fingerprints):
            capacity = max(n, len(self.fingerprints) + len(self.fingerprints) // 4 + self.spare)
            grown = np.empty(capacity, dtype=np.uint64)
            grown[:stored] = self.fingerprints[:stored]
            self.fingerprints = grown
            refused = np.zeros(capacity, dtype=self.refused_dtype)
            refused[:stored] = self.refusals[:stored]
            self.refusals = refused
            if self.timed:
                times = np.empty(capacity, dtype=np.uint32)
                times[:stored] = self.times[:stored]
                self.times = times
        base = self.sketch_base
        if n - base > len(self.sketches):  # the sketches of rows from the sketch base on
            rows = max(n - base, len(self.sketches) + len(self.sketches) // 4 + self.spare)
            sketches = np.empty((rows, self.sketch_bytes), dtype=np.uint8)
            sketches[: stored - base] = self.sketches[: stored - base]
            self.sketches = sketches

    def rebase_sketches(self, base: int, room: int) -> None:
        """Keep in memory only the sketches of rows from *base* on (none stored yet), with room for *room*."""
        self.sketch_base = base
        self.sketches = np.empty((room, self.sketch_bytes), dtype=np.uint8)

    def sketch_rows(self, rows: np.ndarray) -> np.ndarray:
        """The sketches of *rows*, at or past the sketch base (an ``(len(rows), sketch_bytes)`` array)."""
        return np.asarray(self.sketches[rows - self.sketch_base])

    def append(self, fingerprints: ArrayLike, keys: Sequence[str], sketches: ArrayLike, refused: ArrayLike) -> None:
        """Store a row per key: its fingerprint, its sketch (a row of ``sketch_bytes``) and the tables that refused
        it (bit *t*: table *t*)."""
        n, m = self.stored, len(keys)
        self.reserve(n + m)
        self.fingerprints[n : n + m] = fingerprints
        s = n - self.sketch_base
        self.sketches[s : s + m] = sketches
        self.refusals[n : n + m] = refused
        self.keep(self.fingerprints[n : n + m], keys, self.sketches[s : s + m], self.refusals[n : n + m])
        self.stored = n + m

    @abc.abstractmethod
    def keep(self, fingerprints: np.ndarray, keys: Sequence[str], sketches: np.ndarray, refused: np.ndarray) -> None:
        """Keep the *keys* of the rows about to be appended (with their *fingerprints*, *sketches* and the tables
        that *refused* them): a store's rows define it."""


class MemoryRows(Columns):
    """The memory store's rows: the columns, the keys in a list, deleted rows hidden (still in the tables)."""

    def __init__(self, refused_dtype: np.dtype) -> None:
        super().__init__(refused_dtype)
        self.keys: list[str] = []
        self.dead: set[int] = set()

    def clear(self) -> None:
        super().clear()
        self.keys = []
        self.dead = set()

    def keep(self, fingerprints: np.ndarray, keys: Sequence[str], sketches: np.ndarray, refused: np.ndarray) -> None:
        self.keys.extend(keys)

    def key(self, row: int) -> str:
        return self.keys[row]

    def hides_rows(self) -> bool:
        return bool(self.dead)

    def hidden(self, row: int) -> bool:
        return row in self.dead

    def lower_buckets(self, fingerprint: int, leads: list[int]) -> Iterator[Part]:
        return iter(())

    def spill(self) -> bool:
        return False
