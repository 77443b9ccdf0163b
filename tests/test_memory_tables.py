"""The bounded tables (:mod:`simhash_filter.index.backends.memory.tables`) over a row source written here from the
protocol alone: what the engines need of a store is :class:`RowSource`, nothing more."""

from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np
from bounded_reference import BoundedReference

from simhash_filter.index.backends.memory.tables import BoundedTables, Part
from simhash_filter.index.bound import EVERY, CheckBound, refusal_dtype
from simhash_filter.index.tables import TableDesign

TWO_STAGE = TableDesign.parse("13+13+13+13+12/k4")


class ListRows:
    """The least a store keeps: growing arrays, keys and sketches in lists, some rows hidden."""

    def __init__(self, n_tables: int) -> None:
        self.fingerprints = np.empty(0, dtype=np.uint64)
        self.refusals = np.empty(0, dtype=refusal_dtype(n_tables))
        self.stored = 0
        self.keys: list[str] = []
        self.sketches: list[bytes] = []
        self.gone: set[int] = set()

    def append(self, fingerprint: int, key: str, sketch: bytes = b"", refused: int = 0) -> None:
        self.fingerprints = np.append(self.fingerprints, np.uint64(fingerprint))
        self.refusals = np.append(self.refusals, self.refusals.dtype.type(refused))
        self.keys.append(key)
        self.sketches.append(sketch)
        self.stored += 1

    def key(self, row: int) -> str:
        return self.keys[row]

    def sketch_rows(self, rows: np.ndarray) -> np.ndarray:
        return np.array([np.frombuffer(self.sketches[r], dtype=np.uint8) for r in rows.tolist()], dtype=np.uint8)

    def hides_rows(self) -> bool:
        return bool(self.gone)

    def hidden(self, row: int) -> bool:
        return row in self.gone

    def lower_buckets(self, fingerprint: int, leads: list[int]) -> Iterator[Part]:
        return iter(())

    def spill(self) -> bool:
        return False


def test_the_tables_find_every_row_within_k_through_the_protocol() -> None:
    """Over runs, merges and the buffer, hidden rows left out, a bound that takes every page shows the rows within k
    that share a table's lead with the page (a brute-force scan's), nearest first, then in insertion order."""
    rng = np.random.default_rng(5)
    for k, design in ((3, TableDesign.parse("4x16/k3")), (10, TWO_STAGE)):
        rows = ListRows(design.n_tables)
        tables = BoundedTables(rows, design=design, buffer_size=16, merge_factor=2)
        base = rng.integers(0, 2**64, size=20, dtype=np.uint64)
        for i in range(600):
            flips = rng.integers(0, 64, size=int(rng.integers(0, 6)))
            fp = int(base[i % 20]) ^ sum(1 << int(b) for b in set(flips.tolist()))
            rows.append(fp, f"r{i}")
            tables.added()
            if i % 7 == 0:
                rows.gone.add(i // 2)
        assert len(tables.runs) > 1
        for q in base.tolist():
            expected = sorted(
                ((int(f) ^ q).bit_count(), r, int(f))
                for r, f in enumerate(rows.fingerprints.tolist())
                if (int(f) ^ q).bit_count() <= k and design.agree_on_a_lead(q, int(f)) and r not in rows.gone
            )
            found, _ = tables.bounded(q, None, b"", k, EVERY, 0)
            assert [(c.key, c.distance, c.fingerprint) for c in found] == [(f"r{r}", d, f) for d, r, f in expected]


def test_the_bounded_check_decides_as_the_reference_through_the_protocol() -> None:
    """The bounded check over the protocol's rows gives the brute-force reference's candidates and refusals."""
    bound = CheckBound(per_table=4, duplicates=2, min_similarity=0.75)
    reference = BoundedReference(TWO_STAGE, 10, bound)
    rows = ListRows(TWO_STAGE.n_tables)
    tables = BoundedTables(rows, design=TWO_STAGE, buffer_size=32, merge_factor=4)
    every = (1 << TWO_STAGE.n_tables) - 1
    rng = random.Random(8)
    base = [rng.getrandbits(64) for _ in range(4)]
    sketches = [rng.randbytes(64) for _ in range(4)]
    for i in range(300):
        b = i % 4
        fp = base[b] ^ sum(1 << x for x in rng.sample(range(64), rng.randint(0, 10)))
        sketch = sketches[b] if b < 2 else rng.randbytes(64)  # floods of two pages, and unrelated pages
        key = f"p{i}"
        found, refused = tables.bounded(fp, key, sketch, 10, bound, 64)
        assert found == reference.add(fp, key, sketch), i
        if refused != every:
            rows.append(fp, key, sketch, refused)
            tables.added()
    assert rows.stored == len(reference) < 300
