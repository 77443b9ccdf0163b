"""Tests for simhash_filter.index.tables and .nearduplicate: designs, validation, and exactness against brute force."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_filter.index.backends.memory import MemoryBackend
from simhash_filter.index.nearduplicate import NearDuplicateIndex
from simhash_filter.index.tables import (
    BUCKET_LIMIT,
    SIZED_TABLES,
    Match,
    TableDesign,
    capacity,
    hamming,
    page_limit,
    tables_for,
)

FP = st.integers(0, 2**64 - 1)
#: Balanced designs of k = 0..4 with k+1..k+3 blocks.
NAMED = [TableDesign.balanced(m, k) for k in range(5) for m in range(k + 1, k + 4)]
#: The metadata of the indexes below: an 8-byte sketch beside each fingerprint (the queries read fingerprints only).
META = {"sketch_bytes": 8}
S = bytes(8)


def index_of(k: int, **options: object) -> NearDuplicateIndex:
    """An in-memory index of k (its metadata :data:`META`)."""
    return NearDuplicateIndex(k, metadata=META, **options)  # type: ignore[arg-type]


def brute_force(stored: Sequence[tuple[int, str]], query: int, k: int) -> list[Match]:
    """Reference answer: every stored pair within k, nearest first, ties in insertion order."""
    found = sorted((hamming(fp, query), i, fp, key) for i, (fp, key) in enumerate(stored) if hamming(fp, query) <= k)
    return [Match(key, d, fp) for d, _, fp, key in found]


def flip(fp: int, bits: set[int] | list[int]) -> int:
    for b in bits:
        fp ^= 1 << b
    return fp


@st.composite
def scenarios(draw: st.DrawFn, k: int, max_size: int = 120) -> tuple[list[int], list[int]]:
    """Stored fingerprints clustered around a few centres, and queries near stored ones or random.

    Centres sometimes differ only in their low 20 bits so that many fingerprints share buckets.
    """
    top = draw(FP)
    centres = draw(st.lists(st.one_of(FP, st.integers(0, 2**20).map(lambda x: top ^ x)), min_size=1, max_size=5))
    near = st.builds(flip, st.sampled_from(centres), st.sets(st.integers(0, 63), max_size=k + 1))
    n = draw(st.integers(0, max_size))
    stored = draw(st.lists(st.one_of(near, near, FP), min_size=n, max_size=n))
    pool = stored or centres
    planted = st.builds(flip, st.sampled_from(pool), st.sets(st.integers(0, 63), max_size=k + 1))
    n_queries = draw(st.integers(1, 25))
    queries = draw(st.lists(st.one_of(planted, planted, FP), min_size=n_queries, max_size=n_queries))
    return stored, queries


def small_index(design: TableDesign, k: int, buffer_size: int, merge_factor: int) -> NearDuplicateIndex:
    backend = MemoryBackend(k=k, design=design, metadata=META, buffer_size=buffer_size, merge_factor=merge_factor)
    return NearDuplicateIndex(k, backend=backend)


def check_exact(index: NearDuplicateIndex, stored: list[tuple[int, str]], queries: list[int]) -> None:
    for q in queries:
        for k in range(index.k + 1):
            assert index.query(q, k) == brute_force(stored, q, k)


def fill(index: NearDuplicateIndex, fps: list[int], data: st.DataObject) -> list[tuple[int, str]]:
    """Add *fps* one by one or in batches (as drawn), returning the reference list."""
    stored: list[tuple[int, str]] = []
    i = 0
    while i < len(fps):
        step = data.draw(st.sampled_from([1, 1, 2, 7, 40]))
        chunk = fps[i : i + step]
        keys = [f"k{i + j}" for j in range(len(chunk))]
        if len(chunk) == 1:
            index.add(chunk[0], keys[0], S)
        else:
            index.add_many(chunk, keys, [S] * len(chunk))
        stored.extend(zip(chunk, keys, strict=True))
        i += step
    return stored


@pytest.mark.parametrize("design", NAMED, ids=lambda d: d.name)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_named_designs_match_brute_force(design: TableDesign, data: st.DataObject) -> None:
    """Every named design with k <= 4 returns exactly the brute-force matches, through merges."""
    stored_fps, queries = data.draw(scenarios(design.k))
    buffer_size = data.draw(st.sampled_from([1, 3, 8, 64]))
    index = small_index(design, design.k, buffer_size, data.draw(st.sampled_from([1, 2, 8])))
    stored = fill(index, stored_fps, data)
    assert len(index) == len(stored)
    check_exact(index, stored, queries)


@st.composite
def random_designs(draw: st.DrawFn) -> TableDesign:
    """Any block widths summing to 64 with up to 6 blocks, and any k that leaves a leading block."""
    n_blocks = draw(st.integers(1, 6))
    cuts = sorted(draw(st.sets(st.integers(1, 63), min_size=n_blocks - 1, max_size=n_blocks - 1)))
    edges = [0, *cuts, 64]
    blocks = tuple(b - a for a, b in itertools.pairwise(edges))
    return TableDesign(blocks, draw(st.integers(0, min(4, n_blocks - 1))))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(design=random_designs(), data=st.data())
def test_random_designs_match_brute_force(design: TableDesign, data: st.DataObject) -> None:
    """Any block layout, with any query k up to the design's k, returns exactly the brute-force matches."""
    k = data.draw(st.integers(0, design.k))
    stored_fps, queries = data.draw(scenarios(k, max_size=80))
    index = small_index(design, k, data.draw(st.sampled_from([1, 2, 5, 32])), data.draw(st.sampled_from([1, 4])))
    stored = fill(index, stored_fps, data)
    check_exact(index, stored, queries)


def test_many_inserts_with_merges_stay_exact() -> None:
    """Thousands of single inserts through many seals and merges still answer exactly."""
    rng = random.Random(7)
    design = TableDesign.parse("4x16/k3")
    index = small_index(design, 3, buffer_size=16, merge_factor=2)
    centres = [rng.getrandbits(64) for _ in range(40)]
    stored = []
    for i in range(3000):
        fp = flip(rng.choice(centres), rng.sample(range(64), rng.randint(0, 4)))
        index.add(fp, str(i), S)
        stored.append((fp, str(i)))
    runs = index.backend.run_sizes
    assert sum(runs) == 3000 and len(runs) <= 2 + math.log2(3000 / 16)
    queries = [flip(rng.choice(stored)[0], rng.sample(range(64), rng.randint(0, 4))) for _ in range(150)]
    check_exact(index, stored, queries + [rng.getrandbits(64) for _ in range(20)])


@pytest.mark.parametrize("design", ["4x16/k3", "2x32/k1", "5/k3", "1x64/k0"])
def test_crowded_buckets_stay_exact(design: str) -> None:
    """Hundreds of fingerprints in the same buckets (all filter and verify paths) answer exactly, twice."""
    rng = random.Random(11)
    index = index_of(TableDesign.parse(design).k, design=design)
    top = rng.getrandbits(64)
    fps = [top ^ rng.getrandbits(12) for _ in range(300)] + [top] * 60
    stored = list(zip(fps, map(str, range(len(fps))), strict=True))
    index.add_many(fps[:200], [key for _, key in stored[:200]], [S] * 200)
    for fp, key in stored[200:]:
        index.add(fp, key, S)
    queries = [top, top ^ 1, top ^ (1 << 63), rng.getrandbits(64), *fps[:20]]
    check_exact(index, stored, queries)
    check_exact(index, stored, queries)


@settings(max_examples=30, deadline=None)
@given(fps=st.lists(FP, max_size=60), data=st.data())
def test_add_many_equals_sequential_adds(fps: list[int], data: st.DataObject) -> None:
    """Bulk insertion gives the same answers as inserting one by one."""
    design = TableDesign.parse("4x16/k3")
    one, bulk = small_index(design, 3, 4, 2), small_index(design, 3, 4, 2)
    keys = [str(i) for i in range(len(fps))]
    for fp, key in zip(fps, keys, strict=True):
        one.add(fp, key, S)
    bulk.add_many(np.array(fps, dtype=np.uint64), keys, [S] * len(fps))
    for q in [*fps[:10], data.draw(FP)]:
        assert one.query(q) == bulk.query(q)


def test_results_nearest_first_ties_in_insertion_order() -> None:
    """Matches come nearest first; equal distances come in insertion order."""
    base = 0xDEADBEEF12345678
    index = index_of(3, backend="memory://?buffer_size=2")
    index.add(base ^ 0b111, "d3", S)
    index.add(base ^ 0b1, "d1-first", S)
    index.add(base, "d0", S)
    index.add(base ^ 0b10, "d1-second", S)
    index.add(base ^ 0b100, "d1-third", S)
    got = [m.key for m in index.query(base)]
    assert got == ["d0", "d1-first", "d1-second", "d1-third", "d3"]
    assert [m.distance for m in index.query(base)] == [0, 1, 1, 1, 3]


def test_same_fingerprint_with_different_keys_is_returned_once_per_key() -> None:
    """A fingerprint stored under several keys is returned once for each, in insertion order."""
    index = index_of(3)
    index.add_many([42, 42, 43], ["a", "b", "c"], [S] * 3)
    index.add(42, "d", S)
    assert index.query(42) == [Match("a", 0, 42), Match("b", 0, 42), Match("d", 0, 42), Match("c", 1, 43)]
    assert len(index) == 4


def test_query_k_limits_distance() -> None:
    """A smaller query k returns only the closer matches; a larger one than the index's is refused."""
    index = index_of(3)
    index.add(0, "zero", S)
    index.add(0b11, "two", S)
    assert [m.key for m in index.query(0, k=1)] == ["zero"]
    assert [m.key for m in index.query(0, k=2)] == ["zero", "two"]
    with pytest.raises(ValueError, match="k must be in"):
        index.query(0, k=4)
    with pytest.raises(ValueError, match="k must be in"):
        index.query(0, k=-1)
    with pytest.raises(TypeError):
        index.query(0, k=True)


@pytest.mark.parametrize(
    ("bad", "error"),
    [(-1, ValueError), (2**64, ValueError), (1.0, TypeError), ("ff", TypeError), (True, TypeError), (None, TypeError)],
)
def test_fingerprints_are_validated(bad: object, error: type[Exception]) -> None:
    """Fingerprints outside [0, 2**64) or not ints are refused with a clear error."""
    index = index_of(3)
    for call in (index.add, index.check_and_add):
        with pytest.raises(error, match="fingerprint"):
            call(bad, "key", S)  # type: ignore[arg-type]
    with pytest.raises(error, match="fingerprint"):
        index.query(bad)  # type: ignore[arg-type]
    with pytest.raises(error, match="fingerprint"):
        hamming(bad, 0)  # type: ignore[arg-type]


def test_numpy_integers_are_accepted() -> None:
    """numpy integer scalars are fingerprints like Python ints."""
    index = index_of(3)
    index.add(np.uint64(2**64 - 1), "max", S)
    assert index.query(np.int64(0)) == []
    assert index.query(2**64 - 1) == [Match("max", 0, 2**64 - 1)]


@pytest.mark.parametrize(
    ("fps", "error"),
    [
        ([-1], ValueError),
        ([2**64], ValueError),
        (np.array([-5], dtype=np.int64), ValueError),
        (np.array([1.5]), TypeError),
        (np.zeros((1, 1), dtype=np.uint64), ValueError),
        ([1, "x"], TypeError),
    ],
)
def test_bulk_fingerprints_are_validated(fps: object, error: type[Exception]) -> None:
    """add_many refuses negative, too large, non-integer or non-1-D fingerprints."""
    index = index_of(3)
    with pytest.raises(error):
        index.add_many(fps, ["k"], [S])  # type: ignore[arg-type]
    assert len(index) == 0


def test_bulk_accepts_lists_generators_and_int_arrays() -> None:
    """add_many takes lists (also of ints >= 2**63), generators and signed or unsigned int arrays."""
    index = index_of(3)
    index.add_many([2**64 - 1, 1], ["a", "b"], [S, S])
    index.add_many((x for x in [2, 3]), ["c", "d"], [S, S])
    index.add_many(np.array([4], dtype=np.int32), ["e"], [S])
    index.add_many(np.array([], dtype=np.float64), [], [])
    index.add_many([], [], [])
    assert len(index) == 5
    assert [m.key for m in index.query(2**64 - 1)] == ["a"]


def test_keys_are_validated() -> None:
    """Keys must be str, one per fingerprint."""
    index = index_of(3)
    with pytest.raises(TypeError, match="key"):
        index.add(1, b"bytes", S)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key"):
        index.add_many([1, 2], ["a", 2], [S, S])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="keys"):
        index.add_many([1, 2], "ab", [S, S])
    with pytest.raises(ValueError, match="2 fingerprints but 1 keys"):
        index.add_many([1, 2], ["a"], [S, S])
    assert len(index) == 0


def test_hamming() -> None:
    """hamming counts differing bits of two 64-bit fingerprints."""
    assert hamming(0, 0) == 0
    assert hamming(0, 2**64 - 1) == 64
    assert hamming(0b1010, 0b0110) == 2


@given(random_designs(), st.lists(FP, min_size=1, max_size=20))
def test_lead_values_are_the_leading_blocks(design: TableDesign, fps: list[int]) -> None:
    """A table's lead value is its leading blocks' bits side by side, in scalar and array form."""
    lows = [64 - sum(design.blocks[: i + 1]) for i in range(len(design.blocks))]
    arr = np.array(fps, dtype=np.uint64)
    for t, lead in enumerate(design.tables):
        expected = []
        for fp in fps:
            v = 0
            for b in lead:
                v = (v << design.blocks[b]) | ((fp >> lows[b]) & ((1 << design.blocks[b]) - 1))
            expected.append(v)
        assert [design.lead_values(fp)[t] for fp in fps] == expected
        assert design.lead_array(arr, t).tolist() == expected


def test_table_design_properties() -> None:
    """A design has C(m, m-k) tables whose leading bits are the chosen blocks; names parse back."""
    d = TableDesign((11, 11, 11, 11, 10, 10), 3)
    assert d.n_tables == math.comb(6, 3) == len(d.tables) == 20
    assert d.tables[0] == (0, 1, 2) and d.lead_bits[0] == 33 and min(d.lead_bits) == 31
    assert d.name == "11+11+11+11+10+10/k3"
    assert TableDesign.parse(d.name) == d == TableDesign.parse("6/k3") == TableDesign.balanced(6, 3)
    four = TableDesign.parse("4x16/k3")
    assert four == TableDesign((16, 16, 16, 16), 3) and four.name == "4x16/k3" and four.lead_bits == (16,) * 4
    assert TableDesign.parse("1x64/k0").tables == [(0,)]


@pytest.mark.parametrize(
    ("blocks", "k", "error"),
    [
        ((16, 16, 16), 1, ValueError),  # sums to 48
        ((32, 32), 2, ValueError),  # no leading block left
        ((64,), -1, ValueError),
        ((0, 64), 0, ValueError),
        ((32.0, 32.0), 1, TypeError),
        ((1,) * 64, 4, ValueError),  # C(64, 4) tables
    ],
)
def test_invalid_designs_are_refused(blocks: tuple, k: int, error: type[Exception]) -> None:
    """Designs whose blocks do not cover 64 bits, or that leave no leading block, are refused."""
    with pytest.raises(error):
        TableDesign(blocks, k)


def test_design_names_and_lookup() -> None:
    """Parsable names and 'auto' (the tables built for the expected pages) resolve; unknown names are refused."""
    assert index_of(3, design="4x16/k3").design.name == "4x16/k3"
    assert index_of(2, design="5/k3").design.n_tables == 10
    assert index_of(3).design.name == "13+13+13+13+12/k4"
    assert index_of(3, expected_size=10**9).design.name == "11+11+11+11+10+10/k4"
    with pytest.raises(ValueError, match="cannot parse"):
        index_of(3, design="fast")


def test_backend_instance_must_agree() -> None:
    """An index over a given backend refuses a different design, a larger k or other metadata."""
    backend = MemoryBackend(k=2, design=TableDesign.parse("4x16/k3"), metadata={"model": "m1", **META})
    assert NearDuplicateIndex(2, backend=backend).design.name == "4x16/k3"
    assert NearDuplicateIndex(1, backend=backend, design="4x16/k3", metadata={"model": "m1", **META}).k == 1
    with pytest.raises(ValueError, match="design"):
        NearDuplicateIndex(2, backend=backend, design="5/k3")
    with pytest.raises(ValueError, match="up to 2"):
        NearDuplicateIndex(3, backend=backend)
    with pytest.raises(ValueError, match="metadata"):
        NearDuplicateIndex(2, backend=backend, metadata={"model": "m2"})
    with pytest.raises(TypeError):
        NearDuplicateIndex(2, backend=42)  # type: ignore[arg-type]


def test_context_manager_closes() -> None:
    """Leaving the with block closes the index; later calls fail clearly."""
    with NearDuplicateIndex(3, metadata={"model": "x", **META}) as index:
        index.add(1, "a", S)
        assert index.metadata == {"model": "x", **META}
        assert "size=1" in repr(index)
    with pytest.raises(ValueError, match="closed"):
        index.query(1)


# --- k beyond 3 (two-stage detection queries k = 10) ------------------------------------------------------


@st.composite
def wide_designs(draw: st.DrawFn) -> TableDesign:
    """Block widths summing to 64 with 5 to 7 blocks, and k from 4 up (tables of fingerprints)."""
    n_blocks = draw(st.integers(5, 7))
    cuts = sorted(draw(st.sets(st.integers(1, 63), min_size=n_blocks - 1, max_size=n_blocks - 1)))
    edges = [0, *cuts, 64]
    blocks = tuple(b - a for a, b in itertools.pairwise(edges))
    return TableDesign(blocks, draw(st.integers(4, n_blocks - 1)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(design=wide_designs(), data=st.data())
def test_fingerprint_tables_match_brute_force(design: TableDesign, data: st.DataObject) -> None:
    """Any block layout with k >= 4, through seals and merges: query returns exactly the brute-force matches for
    every k up to the backend's."""
    k = data.draw(st.integers(4, design.k))
    stored_fps, queries = data.draw(scenarios(k, max_size=80))
    index = small_index(design, k, data.draw(st.sampled_from([1, 2, 5, 32])), data.draw(st.sampled_from([1, 4])))
    stored = fill(index, stored_fps, data)
    check_exact(index, stored, queries)


@pytest.mark.parametrize("design", ["5/k4", "13+13+13+13+12/k4", "6/k5", "7/k6"])
def test_crowded_buckets_of_fingerprints_stay_exact(design: str) -> None:
    """Hundreds of fingerprints that differ in their low 12 bits only, and duplicates, in tables of whole
    fingerprints: each match is looked up for all its rows (the first table orders equal top bits by row, not by
    value), through a bulk run, small runs and the buffer."""
    rng = random.Random(12)
    k = TableDesign.parse(design).k
    backend = MemoryBackend(k=k, design=TableDesign.parse(design), metadata=META, buffer_size=16, merge_factor=2)
    index = NearDuplicateIndex(k, backend=backend)
    top = rng.getrandbits(64)
    fps = [top ^ rng.getrandbits(12) for _ in range(300)] + [top] * 40 + [top ^ 0xFFF] * 20
    rng.shuffle(fps)
    stored = list(zip(fps, map(str, range(len(fps))), strict=True))
    index.add_many(sorted(fps[:200], reverse=True), [key for _, key in sorted(stored[:200], reverse=True)], [S] * 200)
    stored[:200] = sorted(stored[:200], reverse=True)
    for fp, key in stored[200:]:
        index.add(fp, key, S)
    assert len(backend.run_sizes) > 2
    queries = [top, top ^ 1, top ^ 0xFFF, top ^ (1 << 63), rng.getrandbits(64), *fps[:20]]
    check_exact(index, stored, queries)


def test_fingerprint_tables_hide_deleted_rows() -> None:
    """Deleted rows stay in the tables but are never returned by query."""
    design = TableDesign.parse("6/k5")
    backend = MemoryBackend(k=5, design=design, metadata=META, buffer_size=8)
    rng = random.Random(4)
    centre = rng.getrandbits(64)
    fps = [flip(centre, rng.sample(range(64), rng.randint(0, 5))) for _ in range(50)]
    backend.add_many(np.array(fps[:30], dtype=np.uint64), [f"k{i}" for i in range(30)], [S] * 30)
    for i in range(30, 50):
        backend.add(fps[i], f"k{i}", S)
    assert backend.delete([f"k{i}" for i in range(0, 50, 3)]) == 17
    stored = [(fp, f"k{i}") for i, fp in enumerate(fps) if i % 3]
    for q in [centre, *fps[:10]]:
        assert backend.query(q, 5) == brute_force(stored, q, 5)


# -- the design follows the pages an index is built for (bounded buckets at any size) --------------------------------


def test_the_tables_follow_the_expected_pages() -> None:
    """Five 13-bit tables up to 4,194,304 pages (buckets of at most 1,024 random fingerprints on the 12-bit lead),
    then 15 tables of 20-22 bits up to 2**30, then 56 of 24 bits; a design takes twice what it is built for."""
    assert tables_for(1) == tables_for(4_194_304) == "13+13+13+13+12/k4"
    assert tables_for(4_194_305) == tables_for(2**30) == "11+11+11+11+10+10/k4"
    assert tables_for(2**30 + 1) == tables_for(10**12) == "8x8/k5"
    for name in SIZED_TABLES:
        design = TableDesign.parse(name)
        assert capacity(design) == 2 ** min(design.lead_bits) * BUCKET_LIMIT
        assert page_limit(design) == 2 * capacity(design)
    for bad in (0, -5, 2.5, True, "10"):
        with pytest.raises(ValueError, match="expected number of pages must be an int >= 1"):
            tables_for(bad)  # type: ignore[arg-type]


def test_a_two_stage_index_refuses_pages_past_its_limit() -> None:
    """A two-stage index takes pages up to twice its design's capacity, then refuses them with the ways out."""
    from simhash_filter.index.backends import IndexFullError

    design = TableDesign.parse("60+1+1+1+1/k4")  # 1-bit leads: built for 2,048 pages, takes 4,096
    limit = page_limit(design)
    rng = np.random.default_rng(3)
    fps = rng.integers(0, 2**64, size=limit + 1, dtype=np.uint64)
    sketches = [bytes(rng.integers(0, 256, size=64, dtype=np.uint8)) for _ in range(limit + 1)]
    keys = [f"u{i}" for i in range(limit + 1)]
    with NearDuplicateIndex(10, design=design, metadata={"sketch_bytes": 64}, min_similarity=0.75) as index:
        with pytest.raises(IndexFullError, match=r"holds 0 pages, twice the 2,048 its tables \(60\+1\+1\+1\+1/k4\)"):
            index.add_many(fps, keys, sketches)
        index.add_many(fps[: limit - 1], keys[: limit - 1], sketches[: limit - 1])
        assert index.check_and_add(int(fps[limit - 1]), keys[limit - 1], sketches[limit - 1]) is None
        assert len(index) == limit
        with pytest.raises(IndexFullError, match="index rebuild INDEX --expected-pages N") as info:
            index.check_and_add(int(fps[limit]), keys[limit], sketches[limit])
        assert "SIMHASH_EXPECTED_PAGES" in str(info.value) and len(index) == limit
        with pytest.raises(IndexFullError):
            index.add(int(fps[limit]), keys[limit], sketches[limit])


def test_filter_config_designs_for_its_expected_pages() -> None:
    """``FilterConfig.tables`` follows ``expected_pages`` (1,000,000 by default: today's five tables); a bad value
    is refused when the config is made."""
    from simhash_filter.config import DEFAULTS, FilterConfig

    assert DEFAULTS.expected_pages == 1_000_000 and DEFAULTS.tables == "13+13+13+13+12/k4"
    assert FilterConfig(expected_pages=50_000_000).tables == "11+11+11+11+10+10/k4"
    with pytest.raises(ValueError, match="expected number of pages"):
        FilterConfig(expected_pages=0)
