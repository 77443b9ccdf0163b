"""A *run*: the permuted tables over a contiguous range of rows.  Each table holds the rows it took, sorted by
bucket (the top bits of the table's lead value), then by row, with a bucket -> offset array; an entry is the row's
whole fingerprint (``uint64``) and its row id, so that a bucket is verified in one pass."""

from __future__ import annotations

import numpy as np

from simhash_filter.index.tables import TableDesign, bucket_bits

#: (bucket offsets, the same as a memoryview (its items are Python ints: faster to index one by one), the
#: entries' fingerprints in bucket order, their row ids in bucket order, lead bits below
#: the bucket)
Table = tuple[np.ndarray, memoryview, np.ndarray, np.ndarray, int]


class Run:
    """Bucketed tables over rows ``start..end-1``."""

    __slots__ = ("end", "start", "tables")

    def __init__(self, start: int, end: int, tables: list[Table]) -> None:
        self.start = start
        self.end = end
        self.tables = tables

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def nbytes(self) -> int:
        return sum(off.nbytes + values.nbytes + rows.nbytes for off, _, values, rows, _ in self.tables)


def build_run(fps: np.ndarray, start: int, design: TableDesign, refused: np.ndarray | None = None) -> Run:
    """Sort the rows ``start..start+len(fps)-1`` into one bucketed table per design table, of their fingerprints,
    with their row ids.  *refused* (one ``uint8`` per row, bit *t* for table
    *t*, an unsigned type) leaves out of each table the rows it refused."""
    size = len(fps)
    end = start + size
    row_dtype = np.uint32 if end <= 2**32 else np.uint64
    off_dtype = np.uint32 if size < 2**32 else np.uint64
    row_bits = max(1, (size - 1).bit_length())
    all_ids = np.arange(size, dtype=np.uint64)
    tables = []
    for t, lead in enumerate(design.lead_bits):
        b = bucket_bits(lead, size)
        drop = lead - b
        ids = all_ids
        if refused is not None and refused.any():
            ids = all_ids[(refused & refused.dtype.type(1 << t)) == 0]
        key = design.lead_array(fps[ids] if ids is not all_ids else fps, t)
        if drop:
            key >>= np.uint64(drop)
        offsets = np.zeros((1 << b) + 1, dtype=off_dtype)
        np.cumsum(np.bincount(key.astype(np.intp), minlength=1 << b), out=offsets[1:])
        if b + row_bits <= 64:  # one sort of (bucket, local row) packed in 64 bits
            key <<= np.uint64(row_bits)
            key |= ids
            key.sort()
            key &= np.uint64((1 << row_bits) - 1)
            local = key
        else:  # pragma: no cover - needs more than 2**38 rows in one run
            local = ids[np.argsort(key, kind="stable")]
        rows = local.astype(row_dtype)
        if start:
            rows += row_dtype(start)
        tables.append((offsets, memoryview(offsets.data), fps[local], rows, drop))
    return Run(start, end, tables)
