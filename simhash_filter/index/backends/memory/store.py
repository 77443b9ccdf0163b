""":class:`TablesBackend`, the base of the memory and the on-disk stores: the lock, the write path and the checks,
over the rows object a store passes in (:class:`RowStore`) and the bounded tables over them."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike

from simhash_filter.index.backends.base import Backend, Candidate
from simhash_filter.index.backends.memory.tables import BoundedTables, RowSource
from simhash_filter.index.bound import DEFAULT_BOUND, CheckBound
from simhash_filter.index.tables import TableDesign


class RowStore(RowSource, Protocol):
    """A :class:`~.tables.RowSource` that rows are appended to (:class:`~.rows.Columns` is one)."""

    @property
    def nbytes(self) -> int: ...

    def append(self, fingerprints: ArrayLike, keys: Sequence[str], sketches: ArrayLike, refused: ArrayLike) -> None: ...

    def clear(self) -> None: ...

    def configure(self, sketch_bytes: int, spare: int) -> None: ...


class TablesBackend(Backend):
    """A store of *rows* (a :class:`RowStore`) with bounded tables over them; thread-safe: one lock serialises
    every call, so :meth:`add_and_candidates` is atomic."""

    def __init__(
        self,
        *,
        k: int,
        design: TableDesign,
        metadata: Mapping[str, Any] | None,
        rows: RowStore,
        buffer_size: int,
        merge_factor: int,
    ) -> None:
        super().__init__(k=k, design=design, metadata=metadata)
        self.tables = BoundedTables(rows, design=design, buffer_size=buffer_size, merge_factor=merge_factor)
        rows.configure(self._sketch_bytes, buffer_size)
        self._rows = rows
        self._all_tables = (1 << design.n_tables) - 1  # a page every table refused is not stored
        self._lock = threading.Lock()
        self._closed = False

    # -- introspection ---------------------------------------------------------------------------

    @property
    def nbytes(self) -> int:
        """Bytes held in numpy arrays (fingerprints, sketches, refusals, tables, offsets); keys are not counted."""
        return self._rows.nbytes + self.tables.nbytes

    @property
    def run_sizes(self) -> list[int]:
        """Sizes of the sorted runs, oldest first, then the unsorted buffer's size."""
        return self.tables.run_sizes

    @property
    def rows(self) -> int:
        """Every row stored, the dead and expired ones too: no scan (the page limit reads it on every add)."""
        return self._rows.stored

    def close(self) -> None:
        """Drop the arrays; later calls raise ``ValueError``."""
        with self._lock:
            self._closed = True
            self._rows.clear()
            self.tables.clear()

    def ensure_open(self) -> None:
        """Raise ``ValueError`` once the store is closed."""
        if self._closed:
            raise ValueError("operation on a closed index backend")

    # -- writes ----------------------------------------------------------------------------------

    def _sketch_rows(self, sketches: Sequence[bytes], m: int) -> np.ndarray:
        """*sketches* checked, as an ``(m, sketch_bytes)`` array."""
        checked = self.checked_sketches(sketches, m)
        return np.frombuffer(b"".join(checked), dtype=np.uint8).reshape(m, self._sketch_bytes)

    def add_many(self, fingerprints: np.ndarray, keys: Sequence[str], sketches: Sequence[bytes]) -> None:
        """Store many fingerprints; a large batch becomes one sorted run directly."""
        rows = self._sketch_rows(sketches, len(fingerprints))
        with self._lock:
            self.ensure_open()
            if len(fingerprints) == 0:
                return
            self._rows.append(fingerprints, keys, rows, 0)
            self.tables.added()

    # -- reads -----------------------------------------------------------------------------------

    def candidates(self, fingerprint: int, k: int, bound: CheckBound = DEFAULT_BOUND) -> list[Candidate]:
        """The candidates within *k* under *bound*, nearest first, ties in insertion order; nothing stored."""
        with self._lock:
            self.ensure_open()
            return self.tables.bounded(fingerprint, None, bytes(self._sketch_bytes), k, bound, self._verify_bytes)[0]

    def add_and_candidates(
        self, fingerprint: int, key: str, sketch: bytes, k: int, bound: CheckBound = DEFAULT_BOUND
    ) -> list[Candidate]:
        """Atomically: the candidates within *k* under *bound*, then this page stored in the tables that take
        it (none: not stored)."""
        row = self._sketch_rows([sketch], 1)
        with self._lock:
            self.ensure_open()
            found, refused = self.tables.bounded(fingerprint, key, sketch, k, bound, self._verify_bytes)
            if refused != self._all_tables:
                self._rows.append([fingerprint], [key], row, [refused])
                self.tables.added(fingerprint, refused)
            return found
