"""The Spark job's block stage over Arrow batches (``simhash_filter.batch.blockpairs``): the same pairs as the
per-block bounded pass (``block_pass``), whether a block is compared whole in numpy (nothing bounded in it) or page
by page (a flood, a crowded block, a page seen twice), and whatever batches the rows come in."""

from __future__ import annotations

import random
from itertools import groupby

import pytest

pa = pytest.importorskip("pyarrow", reason="pyarrow is installed by the spark and test extras")

from simhash_filter.batch.blockpairs import arrow_block_pairs  # noqa: E402
from simhash_filter.index.bound import CheckBound, block_pass  # noqa: E402

BOUND = CheckBound(8, 4, 0.75)
BITS = BOUND.differing_bits(8)


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def blocks(seed: int) -> list[tuple[int, int, int, int, str, bytes]]:
    """Rows ``(t, lead, number, fp, url, sketch)`` sorted by block then number: quiet blocks of random pages with a
    few near-duplicates, a flood (30 near-identical pages), a crowded block (20 pages within k that do not verify)
    and a page seen twice (its URL and fingerprint again)."""
    rng = random.Random(seed)
    rows = []
    number = 0
    for block in range(12):
        base, sketch = rng.getrandbits(64), rng.randbytes(8)
        kind = block % 4
        for i in range({0: rng.randint(1, 12), 1: 30, 2: 20, 3: 6}[kind]):
            number += 1
            flip = sum(1 << b for b in rng.sample(range(64), rng.randint(0, 3)))
            if kind == 0 and (i > 4 or rng.random() < 0.5):
                fp, sk = rng.getrandbits(64), rng.randbytes(8)
            elif kind == 2:
                fp, sk = base ^ flip, rng.randbytes(8)  # within k, not verifying
            else:
                fp, sk = base ^ flip, bytes(b ^ (1 << rng.randrange(8)) if j == 0 else b for j, b in enumerate(sketch))
            url = f"https://x.example/{block}/{i}"
            if kind == 3 and i == 5:
                fp, url = rows[-1][3], rows[-1][4]  # the page before, seen again
                fp = fp if fp >= 0 else fp + (1 << 64)
            rows.append((block % 3, block, number, _signed(fp), url, sk))
    return rows


def reference(
    rows: list[tuple[int, int, int, int, str, bytes]], bound: CheckBound = BOUND
) -> list[tuple[int, int, str, int, int]]:
    out = []
    for _, block in groupby(rows, lambda r: (r[0], r[1])):
        pages = [(r[2], r[3] % (1 << 64), r[4], int.from_bytes(r[5], "little")) for r in block]
        for page, candidates, _ in block_pass(pages, 10, bound, BITS):
            out += [(page[0], c[0], c[2], d, differ) for d, c, differ in candidates]
    return sorted(out)


@pytest.mark.parametrize("bound", [BOUND, CheckBound(8, 4, 0.75, 10)])
@pytest.mark.parametrize("seed", range(6))
def test_arrow_batches_give_the_bounded_pass_pairs(
    seed: int, bound: CheckBound, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ways through a block are taken (the quiet blocks whole, the others page by page); with block_pages 10,
    a block of more pages (the flood's, the crowd's, a quiet one of 11 or 12) goes page by page and stops taking
    pages at 10."""
    import simhash_filter.batch.blockpairs as module

    passed = []
    monkeypatch.setattr(module, "block_pass", lambda pages, *a: passed.append(1) or block_pass(pages, *a))
    rows = sorted(blocks(seed), key=lambda r: (r[0], r[1], r[2]))
    names = ["t", "lead", "number", "fp", "url", "sketch"]
    types = [pa.int32(), pa.int64(), pa.int64(), pa.int64(), pa.string(), pa.binary()]
    table = pa.table({n: pa.array([r[i] for r in rows], t) for i, (n, t) in enumerate(zip(names, types, strict=True))})
    size = random.Random(seed).randint(3, 40)
    batches = table.to_batches(max_chunksize=size)
    pairs = arrow_block_pairs(iter(batches), 10, bound, BITS)
    got = [p for batch in pairs for p in zip(*batch.to_pydict().values(), strict=True)]
    assert sorted(got) == reference(rows, bound)
    assert 9 <= len(passed) <= 12, "the three kinds of bounded blocks page by page, some quiet ones whole"
