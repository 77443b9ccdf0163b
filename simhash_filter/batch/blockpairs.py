"""The Spark job's block stage over Arrow batches (rows sorted by block, then page number; a block may run on
into the next batch): the candidate pairs of every block.  A block that nothing bounds (at most ``block_pages``
pages, none with ``per_table`` earlier pages within k, ``duplicates`` verified or its own URL and fingerprint) takes
every page, and all its pairs are compared at once in numpy; any other goes through
:func:`~simhash_filter.index.bound.block_pass` page by page.  The pairs are the same either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from simhash_filter.index.bound import CheckBound, block_pass

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["PAIRS_SCHEMA", "arrow_block_pairs"]

#: The pairs' columns (a Spark DDL schema).
PAIRS_SCHEMA = "number long, of long, of_url string, distance int, differ int"
#: A block with more pairs than this goes page by page (numpy would hold them all at once).
_MAX_PAIRS = 4_000_000


def _sketches(column: pa.Array) -> np.ndarray:
    """A binary column of equal-length values as an ``(n, width)`` ``uint8`` array."""
    import pyarrow as pa

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int32)[column.offset : column.offset + len(column) + 1]
    width = int(offsets[1] - offsets[0]) if len(column) else 0
    data = np.frombuffer(column.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
    if len(column) and (np.diff(offsets) == width).all():
        return data.reshape(len(column), width)
    return np.array([np.frombuffer(v, dtype=np.uint8) for v in column.to_pylist()])  # pragma: no cover


def _block_pairs(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair ``(i, j)``, i < j, of rows within the same block, for blocks ``[starts[b], ends[b])``, in numpy."""
    sizes = ends - starts
    rows = np.repeat(np.arange(len(sizes)), sizes)  # each row's block
    index = np.arange(int(sizes.sum()), dtype=np.int64) + np.repeat(starts - np.cumsum(sizes) + sizes, sizes)
    after = ends[rows] - index - 1  # the rows after each row in its block
    i = np.repeat(index, after)
    first = np.cumsum(after) - after
    j = i + 1 + (np.arange(int(after.sum()), dtype=np.int64) - np.repeat(first, after))
    return i, j


def _pairs_of(batch: pa.RecordBatch, k: int, bound: CheckBound, bits: int) -> pa.RecordBatch:
    """The candidate pairs of the whole blocks of *batch*: the blocks of at most :data:`_MAX_PAIRS` pairs compared
    together in numpy, those with something bounded in them (and larger ones) page by page."""
    import pyarrow as pa

    t = batch.column("t").to_numpy()
    lead = batch.column("lead").to_numpy()
    number = batch.column("number").to_numpy()
    fp = batch.column("fp").to_numpy().view(np.uint64)
    urls = batch.column("url")
    sketch = _sketches(batch.column("sketch"))
    n = len(t)
    starts = np.flatnonzero(np.r_[True, (t[1:] != t[:-1]) | (lead[1:] != lead[:-1])])
    ends = np.r_[starts[1:], n]
    sizes = ends - starts
    whole = (sizes >= 2) & (sizes * (sizes - 1) // 2 <= _MAX_PAIRS)
    i, j = _block_pairs(starts[whole], ends[whole])
    d = np.bitwise_count(fp[i] ^ fp[j])
    near = d <= k
    i, j, d = i[near], j[near], d[near]
    differ = np.bitwise_count(sketch[i] ^ sketch[j]).sum(axis=1, dtype=np.int64)
    block = np.searchsorted(starts, j, side="right") - 1  # each pair's block
    bad = sizes > bound.block_pages  # a block that reaches block_pages takes no more (rule 3)
    bad[block[np.bincount(j, minlength=n)[j] > bound.per_table]] = True
    bad[block[np.bincount(j[differ <= bits], minlength=n)[j] >= bound.duplicates]] = True
    for x in np.flatnonzero(d == 0).tolist():  # a page seen again: its URL and fingerprint held
        if urls[int(i[x])] == urls[int(j[x])]:
            bad[block[x]] = True
    fast = ~bad[block]
    i, j, d, differ = i[fast], j[fast], d[fast], differ[fast]
    slow: list[tuple[int, int, str, int, int]] = []
    for b in np.flatnonzero(bad | ((sizes >= 2) & ~whole)).tolist():
        s, e = int(starts[b]), int(ends[b])
        pages = [
            (int(number[x]), int(fp[x]), urls[x].as_py(), int.from_bytes(sketch[x].tobytes(), "little"))
            for x in range(s, e)
        ]
        for page, candidates, _ in block_pass(pages, k, bound, bits):
            slow += [(page[0], c[0], c[2], dist, diff) for dist, c, diff in candidates]
    columns = [
        np.concatenate([number[j], np.array([p[0] for p in slow], dtype=np.int64)]),
        np.concatenate([number[i], np.array([p[1] for p in slow], dtype=np.int64)]),
        pa.concat_arrays([urls.take(pa.array(i)).cast(pa.string()), pa.array([p[2] for p in slow], pa.string())]),
        np.concatenate([d.astype(np.int64), np.array([p[3] for p in slow], dtype=np.int64)]).astype(np.int32),
        np.concatenate([differ, np.array([p[4] for p in slow], dtype=np.int64)]).astype(np.int32),
    ]
    return pa.RecordBatch.from_arrays(
        [pa.array(c) if isinstance(c, np.ndarray) else c for c in columns],
        names=["number", "of", "of_url", "distance", "differ"],
    )


def arrow_block_pairs(batches: Iterator[Any], k: int, bound: CheckBound, bits: int) -> Iterator[Any]:
    """The candidate pairs ``(number, of, of_url, distance, differ)`` of block rows ``(t, lead, number, fp, url,
    sketch)`` that come sorted by block, then number, in Arrow record batches: one batch of pairs per batch of
    rows (a block that runs on into the next batch is passed when it ends)."""
    import pyarrow as pa

    held: pa.RecordBatch | None = None
    for batch in batches:
        if held is not None and held.num_rows:
            batch = pa.Table.from_batches([held, batch]).combine_chunks().to_batches()[0]
        if not batch.num_rows:
            continue
        t = batch.column("t").to_numpy()
        lead = batch.column("lead").to_numpy()
        last = np.flatnonzero((t != t[-1]) | (lead != lead[-1]))
        cut = int(last[-1]) + 1 if len(last) else 0  # the last block may go on in the next batch
        held = batch.slice(cut)
        if cut:
            yield _pairs_of(batch.slice(0, cut), k, bound, bits)
    if held is not None and held.num_rows:
        yield _pairs_of(held, k, bound, bits)
