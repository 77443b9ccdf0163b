"""The bound on a check's work (``simhash_filter.index.bound``): its constants, the bit-count form of the
threshold, and the per-table rule, on its own and through the index facade."""

from __future__ import annotations

import random

import pytest

from simhash_filter.config import FilterConfig
from simhash_filter.index.bound import CheckBound, most_differing_bits, take
from simhash_filter.index.nearduplicate import NearDuplicateIndex
from simhash_filter.model.sketch import similarity


def test_most_differing_bits_decides_as_the_similarity_does() -> None:
    """Two sketches verify exactly when they differ in at most most_differing_bits() bits, for every count of
    differing bits and thresholds on and between the steps of the estimate."""
    rng = random.Random(5)
    for t in (0.0, 0.5, 0.75, 0.7500001, 0.80078125, 0.9, 1.0, *(rng.random() for _ in range(50))):
        limit = most_differing_bits(t, 64)
        base = rng.randbytes(64)
        for differ in range(0, 513, 7):
            other = (int.from_bytes(base, "little") ^ ((1 << differ) - 1)).to_bytes(64, "little")
            assert (similarity(base, other) >= t) == (differ <= limit), (t, differ)
    assert most_differing_bits(0.75, 64) == 64
    assert most_differing_bits(0.75, 0) == -1


def test_bad_constants_are_one_line_errors_naming_the_setting() -> None:
    """Zero, a bool or block_duplicates above candidates_per_table are refused with the user's names."""
    with pytest.raises(ValueError, match="candidates_per_table must be an int >= 1"):
        CheckBound(per_table=0)
    with pytest.raises(ValueError, match="block_duplicates must be an int >= 1"):
        FilterConfig(block_duplicates=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"block_duplicates \(9\) must not exceed candidates_per_table \(8\)"):
        FilterConfig(block_duplicates=9)
    assert FilterConfig(candidates_per_table=3, block_duplicates=2).bound == CheckBound(3, 2, 0.75)


def test_take_keeps_the_nearest_per_table_and_refuses_full_blocks() -> None:
    """Each table gives its per_table nearest (then earliest); a table whose candidates hold `duplicates`
    verified pages, or this very page, refuses it; the others take it."""
    bound = CheckBound(per_table=2, duplicates=2)
    hits = [
        [(3, 7), (1, 9), (1, 4)],  # nearest two: (1, 4), (1, 9), both verified: refused
        [(0, 4), (5, 8)],  # (0, 4) verified, (5, 8) not: taken
        [(0, 2)],  # one candidate, the page itself: refused
        [],
    ]
    chosen, refused = take(hits, bound, verified=lambda o: o in (4, 9), own=lambda o: o == 2)
    assert chosen == [(0, 2), (0, 4), (1, 4), (1, 9), (5, 8)]
    assert refused == 0b0101


def test_a_flood_stops_filling_the_index_and_its_checks_stay_small() -> None:
    """6,000 near-identical pages: each is still found a near-duplicate, but the index stops growing after the
    first few hundred (each block holds 4 of them) and no check verifies more than five tables' worth of
    candidates."""
    config = FilterConfig()
    index = NearDuplicateIndex(10, design=config.tables, metadata={"model": "m", "sketch_bytes": 64},
                               min_similarity=0.75)  # fmt: skip
    rng = random.Random(1)
    base, sketch = rng.getrandbits(64), rng.randbytes(64)
    assert index.check_and_add(base, "page-0", sketch) is None
    sizes = []
    for i in range(1, 6_000):
        fp = base ^ (1 << rng.randrange(64)) if i % 2 else base
        near = (int.from_bytes(sketch, "little") ^ (1 << rng.randrange(512))).to_bytes(64, "little")
        assert index.check_and_add(fp, f"page-{i}", near) is not None
        if i % 2000 == 0:
            sizes.append(len(index))
    assert sizes[1] == sizes[-1] < 500
    assert index.candidates_max <= 5 * index.bound.per_table
