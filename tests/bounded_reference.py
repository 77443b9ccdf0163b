"""A brute-force reference of the bounded two-stage check (:mod:`simhash_filter.index.bound`), written apart from
the engines: every engine's candidates and storage are compared with it."""

from __future__ import annotations

from dataclasses import dataclass, field

from simhash_filter.index.backends.base import Candidate
from simhash_filter.index.bound import CheckBound
from simhash_filter.index.tables import TableDesign
from simhash_filter.model.sketch import similarity


@dataclass
class BoundedReference:
    """The pages stored so far, in order, with the tables that took each; :meth:`add` is one check."""

    design: TableDesign
    k: int
    bound: CheckBound
    #: (fingerprint, key, sketch, tables that took it as a set)
    stored: list[tuple[int, str, bytes, frozenset[int]]] = field(default_factory=list)

    def _block(self, t: int, fingerprint: int, k: int) -> list[tuple[int, int]]:
        mask = self.design.lead_masks[t]
        return sorted(
            ((fp ^ fingerprint).bit_count(), i)
            for i, (fp, _, _, tables) in enumerate(self.stored)
            if t in tables and not (fp ^ fingerprint) & mask and (fp ^ fingerprint).bit_count() <= k
        )

    def _size(self, t: int, fingerprint: int) -> int:
        """The pages table *t*'s block of *fingerprint* holds (the same lead, at any distance)."""
        mask = self.design.lead_masks[t]
        return sum(1 for fp, _, _, tables in self.stored if t in tables and not (fp ^ fingerprint) & mask)

    def candidates(self, fingerprint: int, k: int | None = None) -> list[Candidate]:
        """The candidates of a query that stores nothing."""
        return self._check(fingerprint, None, b"", self.k if k is None else k)[0]

    def add(self, fingerprint: int, key: str, sketch: bytes) -> list[Candidate]:
        """The candidates of a page, then the page stored in the tables that take it."""
        found, taken = self._check(fingerprint, key, sketch, self.k)
        if taken:
            self.stored.append((fingerprint, key, sketch, frozenset(taken)))
        return found

    def _check(self, fingerprint: int, key: str | None, sketch: bytes, k: int) -> tuple[list[Candidate], set[int]]:
        chosen: set[tuple[int, int]] = set()
        taken = set()
        for t in range(self.design.n_tables):
            block = self._block(t, fingerprint, k)
            nearest = block[: self.bound.per_table]
            chosen.update(nearest)
            if key is None:
                continue
            verified = sum(similarity(sketch, self.stored[i][2]) >= self.bound.min_similarity for _, i in nearest)
            own = any(d == 0 and self.stored[i][1] == key for d, i in block)
            room = self._size(t, fingerprint) < self.bound.block_pages
            if verified < self.bound.duplicates and not own and room:
                taken.add(t)
        found = [Candidate(self.stored[i][1], d, self.stored[i][0], self.stored[i][2]) for d, i in sorted(chosen)]
        return found, taken

    def __len__(self) -> int:
        return len(self.stored)
