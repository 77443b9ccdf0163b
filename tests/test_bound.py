"""The bound on a check's work (``simhash_filter.index.bound``): its constants, the bit-count form of the
threshold, and the per-table rule, on its own and through the index facade; the per-block rule (``block_pass``, which
the Spark job runs on each block apart) against the brute-force reference (tests/bounded_reference.py) on random
floods."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest
from bounded_reference import BoundedReference

from simhash_filter.config import DEFAULTS, FilterConfig
from simhash_filter.index.backends.base import Candidate
from simhash_filter.index.bound import DEFAULT_BLOCK_PAGES, CheckBound, block_pass, most_differing_bits, take
from simhash_filter.index.nearduplicate import NearDuplicateIndex
from simhash_filter.index.tables import BLOCK_PAGES_MIN, TableDesign, block_limit, resolve_design, tables_for
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
    assert FilterConfig(candidates_per_table=3, block_duplicates=2).bound == CheckBound(3, 2, 0.75, 512)


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


SKETCH_BYTES = 8
DESIGN = resolve_design(DEFAULTS.tables, 1_000_000)


def _flood(seed: int, n: int) -> list[tuple[int, int, str, bytes]]:
    """*n* pages ``(order, fingerprint, key, sketch)``: a few fingerprints with up to 7 bits flipped (most pages
    within k = 10 of most others, in the same blocks of some tables), sketches near one of two (verified) or
    random, and some pages seen again (the same key and fingerprint)."""
    rng = random.Random(seed)
    bases = [rng.getrandbits(64) for _ in range(rng.randint(1, 3))]
    sketches = [rng.randbytes(SKETCH_BYTES) for _ in range(2)]
    pages: list[tuple[int, int, str, bytes]] = []
    for order in range(n):
        if pages and rng.random() < 0.1:
            _, fp, key, sketch = rng.choice(pages)
            pages.append((order, fp, key, sketch))
            continue
        fp = rng.choice(bases)
        for _ in range(rng.randint(0, 7)):
            fp ^= 1 << rng.randrange(64)
        if rng.random() < 0.7:
            sketch = int.from_bytes(rng.choice(sketches), "little")
            for _ in range(rng.randint(0, 10)):
                sketch ^= 1 << rng.randrange(8 * SKETCH_BYTES)
            sketch_bytes = sketch.to_bytes(SKETCH_BYTES, "little")
        else:
            sketch_bytes = rng.randbytes(SKETCH_BYTES)
        pages.append((order, fp, f"https://flood.example/{order}", sketch_bytes))
    return pages


@pytest.mark.parametrize(
    "bound",
    [
        CheckBound(),
        CheckBound(3, 2, 0.5),
        CheckBound(1, 1, 0.8),
        CheckBound(8, 8, 0.6),
        CheckBound(8, 4, 0.99, 9),
        CheckBound(3, 2, 0.5, 12),
    ],
)
@pytest.mark.parametrize("seed", range(4))
def test_the_blocks_decided_apart_give_the_bounded_checks(seed: int, bound: CheckBound) -> None:
    """Each block (table, lead value) of a random flood run through ``block_pass`` alone, in page order: the union
    of a page's candidates over its blocks (nearest, then earliest, each once) and the blocks that take it are the
    reference's, page by page."""
    k = DEFAULTS.max_distance
    pages = _flood(seed, 160 if seed % 2 else 500)  # 500: blocks large enough for the numpy scan
    reference = BoundedReference(DESIGN, k, bound)
    expected = []
    for _, fp, key, sketch in pages:
        before = len(reference.stored)
        found = reference.add(fp, key, sketch)
        tables = reference.stored[-1][3] if len(reference.stored) > before else frozenset()
        expected.append((found, tables))

    blocks: dict[tuple[int, int], list[tuple[int, int, str, int]]] = defaultdict(list)
    for order, fp, key, sketch in pages:
        for t, lead in enumerate(DESIGN.lead_values(fp)):
            blocks[t, lead].append((order, fp, key, int.from_bytes(sketch, "little")))
    chosen: list[set[tuple[int, int]]] = [set() for _ in pages]
    taken: list[set[int]] = [set() for _ in pages]
    bits = most_differing_bits(bound.min_similarity, SKETCH_BYTES)
    for (t, _), block in blocks.items():
        for page, candidates, took in block_pass(block, k, bound, bits):
            chosen[page[0]].update((d, earlier[0]) for d, earlier, _ in candidates)
            if took:
                taken[page[0]].add(t)
            for _, earlier, differ in candidates:
                assert differ == (page[3] ^ earlier[3]).bit_count()
    got = []
    for order in range(len(pages)):
        found = [Candidate(pages[i][2], d, pages[i][1], pages[i][3]) for d, i in sorted(chosen[order])]
        got.append((found, frozenset(taken[order])))
    assert got == expected
    assert any(len(c) > 1 for c, _ in expected) and any(not t for _, t in expected)  # a flood: blocks fill


def test_full_blocks_refuse_the_page_and_the_limit_follows_the_expected_pages() -> None:
    """A table whose block holds block_pages entries refuses the page (rule 3), whatever its candidates; a block of
    block_pages - 1 pages takes one more, then no more; the limit is twice the mean block of random pages at the
    expected size, a power of two, at least 64: 512 at a million pages (five tables), 2,048 at a billion."""
    chosen, refused = take([[(3, 1)], [], [(2, 2)]], CheckBound(), lambda o: False, lambda o: False, full=0b110)
    assert (chosen, refused) == ([(2, 2), (3, 1)], 0b110)
    assert take([[], [], []], CheckBound(), lambda o: False, lambda o: False, full=0b1) == ([], 0b1)
    bound = CheckBound(8, 4, 0.75, 3)
    pages = [(i, 5 + (1 << i), f"u{i}", i) for i in range(5)]  # within k of each other, sketches far apart
    assert [took for _, _, took in block_pass(pages, 10, bound, 0)] == [True, True, True, False, False]
    assert FilterConfig().bound.block_pages == DEFAULT_BLOCK_PAGES == 512
    assert FilterConfig(expected_pages=1000).bound.block_pages == BLOCK_PAGES_MIN
    assert block_limit(TableDesign.parse(tables_for(10**9)), 10**9) == 2048
    with pytest.raises(ValueError, match="block_pages must be an int >= 1"):
        CheckBound(block_pages=0)


def test_a_block_takes_a_page_seen_again_once() -> None:
    """The same key and fingerprint again is a candidate at distance 0 of itself and is not taken; another key
    with that fingerprint is taken."""
    bound = CheckBound(8, 4, 0.75)
    pages = [(0, 5, "a", 0), (1, 5, "a", 0), (2, 5, "b", 0)]
    out = [(page[0], [(d, e[0], x) for d, e, x in c], took) for page, c, took in block_pass(pages, 10, bound, 16)]
    assert out == [(0, [], True), (1, [(0, 0, 0)], False), (2, [(0, 0, 0)], True)]
