"""The in-process backend (``memory://``): :class:`MemoryBackend`, the bounded tables of :mod:`.tables` over the
rows of :mod:`.rows`; its layout and costs: docs/stores.md ("The memory index")."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from simhash_filter.index.backends.base import Entry
from simhash_filter.index.backends.memory.rows import MemoryRows
from simhash_filter.index.backends.memory.store import TablesBackend
from simhash_filter.index.backends.uri import no_other_options, uri_options
from simhash_filter.index.bound import refusal_dtype
from simhash_filter.index.tables import TableDesign


class MemoryBackend(TablesBackend):
    """Everything in process memory; lost on exit.  ``memory://?buffer_size=2048&merge_factor=8``.

    Thread-safe: one lock serialises every call, so :meth:`add_and_candidates` is atomic."""

    def __init__(
        self,
        *,
        k: int,
        design: TableDesign,
        metadata: Mapping[str, Any] | None = None,
        buffer_size: int = 2048,
        merge_factor: int = 8,
    ) -> None:
        self._store = MemoryRows(refusal_dtype(design.n_tables))
        super().__init__(
            k=k, design=design, metadata=metadata, rows=self._store, buffer_size=buffer_size, merge_factor=merge_factor
        )

    @classmethod
    def from_uri(
        cls, uri: str, *, k: int, design: TableDesign, metadata: Mapping[str, Any] | None = None
    ) -> MemoryBackend:
        """``memory://`` with optional ``?buffer_size=N&merge_factor=N``."""
        parts = urlsplit(uri)
        if parts.netloc or parts.path:
            raise ValueError(f"a memory backend takes no location: {uri!r} (use 'memory://')")
        options, others = uri_options(uri, parts.query, {"buffer_size": int, "merge_factor": int})
        no_other_options(uri, others, "memory")
        return cls(k=k, design=design, metadata=metadata, **options)

    def __len__(self) -> int:
        return self._store.stored - len(self._store.dead)

    def delete(self, keys: Iterable[str]) -> int:
        """Forget every stored fingerprint whose key is in *keys* (they stay in the tables, hidden)."""
        wanted = set(keys)
        with self._lock:
            self.ensure_open()
            rows = self._store
            found = [r for r in range(rows.stored) if r not in rows.dead and rows.key(r) in wanted]
            rows.dead.update(found)
            return len(found)

    def entries(self) -> Iterator[Entry]:
        """Every stored fingerprint, oldest first (a snapshot taken when called)."""
        rows = self._store
        with self._lock:
            self.ensure_open()
            fps = rows.fingerprints[: rows.stored].tolist()
        for row, fp in enumerate(fps):
            if not rows.hidden(row):
                yield Entry(fp, rows.key(row), sketch=bytes(rows.sketches[row]))
