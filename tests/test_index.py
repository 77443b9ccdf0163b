"""Tests for simhash_filter.index.tables and .nearduplicate: designs, validation, and exactness against brute force."""

from __future__ import annotations

import itertools
import math
import random
import threading
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_filter.index.backends.memory import MemoryBackend
from simhash_filter.index.nearduplicate import NearDuplicateIndex
from simhash_filter.index.tables import (
    BUCKET_LIMIT,
    DESIGNS,
    SIZED_TABLES,
    Match,
    TableDesign,
    capacity,
    choose_design,
    estimated_bytes_per_fingerprint,
    fold16,
    fold16_array,
    hamming,
    page_limit,
    tables_for,
)

FP = st.integers(0, 2**64 - 1)
NAMED = sorted((d for d in DESIGNS.values() if isinstance(d, TableDesign) and d.k <= 4), key=lambda d: (d.k, d.name))


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
    backend = MemoryBackend(k=k, design=design, buffer_size=buffer_size, merge_factor=merge_factor)
    return NearDuplicateIndex(k, backend=backend)


def check_exact(index: NearDuplicateIndex, stored: list[tuple[int, str]], queries: list[int]) -> None:
    batch = index.query_many(np.array(queries, dtype=np.uint64))
    for q, from_batch in zip(queries, batch, strict=True):
        for k in range(index.k + 1):
            assert index.query(q, k) == brute_force(stored, q, k)
        assert from_batch == brute_force(stored, q, index.k)
        assert index.nearest(q) == next(iter(brute_force(stored, q, index.k)), None)


def fill(index: NearDuplicateIndex, fps: list[int], data: st.DataObject) -> list[tuple[int, str]]:
    """Add *fps* one by one or in batches (as drawn), returning the reference list."""
    stored: list[tuple[int, str]] = []
    i = 0
    while i < len(fps):
        step = data.draw(st.sampled_from([1, 1, 2, 7, 40]))
        chunk = fps[i : i + step]
        keys = [f"k{i + j}" for j in range(len(chunk))]
        if len(chunk) == 1:
            index.add(chunk[0], keys[0])
        else:
            index.add_many(chunk, keys)
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
        index.add(fp, str(i))
        stored.append((fp, str(i)))
    runs = index.backend.run_sizes
    assert sum(runs) == 3000 and len(runs) <= 2 + math.log2(3000 / 16)
    queries = [flip(rng.choice(stored)[0], rng.sample(range(64), rng.randint(0, 4))) for _ in range(150)]
    check_exact(index, stored, queries + [rng.getrandbits(64) for _ in range(20)])


@pytest.mark.parametrize("design", ["4x16/k3", "2x32/k1", "5/k3", "1x64/k0"])
def test_crowded_buckets_stay_exact(design: str) -> None:
    """Hundreds of fingerprints in the same buckets (all filter and verify paths) answer exactly, twice."""
    rng = random.Random(11)
    index = NearDuplicateIndex(TableDesign.parse(design).k, design=design)
    top = rng.getrandbits(64)
    fps = [top ^ rng.getrandbits(12) for _ in range(300)] + [top] * 60
    stored = list(zip(fps, map(str, range(len(fps))), strict=True))
    index.add_many(fps[:200], [key for _, key in stored[:200]])
    for fp, key in stored[200:]:
        index.add(fp, key)
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
        one.add(fp, key)
    bulk.add_many(np.array(fps, dtype=np.uint64), keys)
    for q in [*fps[:10], data.draw(FP)]:
        assert one.query(q) == bulk.query(q)


def test_results_nearest_first_ties_in_insertion_order() -> None:
    """Matches come nearest first; equal distances come in insertion order."""
    base = 0xDEADBEEF12345678
    index = NearDuplicateIndex(3, backend="memory://?buffer_size=2")
    index.add(base ^ 0b111, "d3")
    index.add(base ^ 0b1, "d1-first")
    index.add(base, "d0")
    index.add(base ^ 0b10, "d1-second")
    index.add(base ^ 0b100, "d1-third")
    got = [m.key for m in index.query(base)]
    assert got == ["d0", "d1-first", "d1-second", "d1-third", "d3"]
    assert [m.distance for m in index.query(base)] == [0, 1, 1, 1, 3]


def test_same_fingerprint_with_different_keys_is_returned_once_per_key() -> None:
    """A fingerprint stored under several keys is returned once for each, in insertion order."""
    index = NearDuplicateIndex(3)
    index.add_many([42, 42, 43], ["a", "b", "c"])
    index.add(42, "d")
    assert index.query(42) == [Match("a", 0, 42), Match("b", 0, 42), Match("d", 0, 42), Match("c", 1, 43)]
    assert len(index) == 4


def test_query_k_limits_distance() -> None:
    """A smaller query k returns only the closer matches; a larger one than the index's is refused."""
    index = NearDuplicateIndex(3)
    index.add(0, "zero")
    index.add(0b11, "two")
    assert [m.key for m in index.query(0, k=1)] == ["zero"]
    assert [m.key for m in index.query(0, k=2)] == ["zero", "two"]
    with pytest.raises(ValueError, match="k must be in"):
        index.query(0, k=4)
    with pytest.raises(ValueError, match="k must be in"):
        index.query(0, k=-1)
    with pytest.raises(TypeError):
        index.query(0, k=True)


def test_check_and_add_semantics() -> None:
    """A near-duplicate is reported (nearest, earliest on ties) and not stored; a new page is stored."""
    index = NearDuplicateIndex(3)
    assert index.check_and_add(0, "a") is None
    assert index.check_and_add(0b1111, "b") is None  # 4 bits away: new
    assert index.check_and_add(0b0111, "c") == Match("b", 1, 0b1111)  # 3 bits from a, 1 from b
    assert index.check_and_add(0b0011, "d") == Match("a", 2, 0)  # 2 from a and from b: a is older
    assert len(index) == 2


def test_nearest_on_empty_and_missing() -> None:
    """nearest returns None when nothing is within k."""
    index = NearDuplicateIndex(3)
    assert index.nearest(123) is None
    index.add(0, "a")
    assert index.nearest(0b1111) is None
    assert index.nearest(0b111) == Match("a", 3, 0)


def test_check_and_add_many_sees_earlier_pages_of_the_batch() -> None:
    """check_and_add_many is check_and_add in order: later pages see pages kept earlier in the batch."""
    index = NearDuplicateIndex(3)
    old = 0xFFFF << 48
    index.add(old, "old")
    got = index.check_and_add_many([0, 1, old | 1, 0xFFFF], ["a", "b", "c", "d"])
    assert got == [None, Match("a", 1, 0), Match("old", 1, old), None]
    assert len(index) == 3


def test_check_and_add_is_atomic_between_threads() -> None:
    """Threads racing check_and_add on near-identical fingerprints keep exactly one per cluster."""
    rng = random.Random(3)
    centres = [rng.getrandbits(64) for _ in range(60)]
    index = NearDuplicateIndex(3, backend="memory://?buffer_size=8&merge_factor=2")
    kept: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(6)

    def worker(t: int) -> None:
        order = list(range(len(centres)))
        random.Random(t).shuffle(order)
        barrier.wait()
        for i in order:
            if index.check_and_add(centres[i] ^ (1 << t), f"{i}/{t}") is None:
                with lock:
                    kept.append(f"{i}/{t}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(int(key.split("/")[0]) for key in kept) == list(range(len(centres)))
    assert len(index) == len(centres)


@pytest.mark.parametrize(
    ("bad", "error"),
    [(-1, ValueError), (2**64, ValueError), (1.0, TypeError), ("ff", TypeError), (True, TypeError), (None, TypeError)],
)
def test_fingerprints_are_validated(bad: object, error: type[Exception]) -> None:
    """Fingerprints outside [0, 2**64) or not ints are refused with a clear error."""
    index = NearDuplicateIndex(3)
    for call in (index.add, index.check_and_add):
        with pytest.raises(error, match="fingerprint"):
            call(bad, "key")  # type: ignore[arg-type]
    with pytest.raises(error, match="fingerprint"):
        index.query(bad)  # type: ignore[arg-type]
    with pytest.raises(error, match="fingerprint"):
        hamming(bad, 0)  # type: ignore[arg-type]


def test_numpy_integers_are_accepted() -> None:
    """numpy integer scalars are fingerprints like Python ints."""
    index = NearDuplicateIndex(3)
    index.add(np.uint64(2**64 - 1), "max")
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
    """add_many and query_many refuse negative, too large, non-integer or non-1-D fingerprints."""
    index = NearDuplicateIndex(3)
    with pytest.raises(error):
        index.add_many(fps, ["k"])  # type: ignore[arg-type]
    with pytest.raises(error):
        index.query_many(fps)  # type: ignore[arg-type]
    assert len(index) == 0


def test_bulk_accepts_lists_generators_and_int_arrays() -> None:
    """add_many takes lists (also of ints >= 2**63), generators and signed or unsigned int arrays."""
    index = NearDuplicateIndex(3)
    index.add_many([2**64 - 1, 1], ["a", "b"])
    index.add_many((x for x in [2, 3]), ["c", "d"])
    index.add_many(np.array([4], dtype=np.int32), ["e"])
    index.add_many(np.array([], dtype=np.float64), [])
    index.add_many([], [])
    assert len(index) == 5
    assert [m.key for m in index.query(2**64 - 1)] == ["a"]


def test_keys_are_validated() -> None:
    """Keys must be str, one per fingerprint."""
    index = NearDuplicateIndex(3)
    with pytest.raises(TypeError, match="key"):
        index.add(1, b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key"):
        index.add_many([1, 2], ["a", 2])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="keys"):
        index.add_many([1, 2], "ab")
    with pytest.raises(ValueError, match="2 fingerprints but 1 keys"):
        index.add_many([1, 2], ["a"])
    assert len(index) == 0


def test_hamming() -> None:
    """hamming counts differing bits of two 64-bit fingerprints."""
    assert hamming(0, 0) == 0
    assert hamming(0, 2**64 - 1) == 64
    assert hamming(0b1010, 0b0110) == 2


@given(FP, FP)
def test_fold_distance_never_exceeds_hamming(a: int, b: int) -> None:
    """The 16-bit fold filter is a lower bound of the Hamming distance, and the array form agrees."""
    assert hamming(fold16(a), fold16(b)) <= hamming(a, b)
    assert fold16_array(np.array([a, b], dtype=np.uint64)).tolist() == [fold16(a), fold16(b)]


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
    """Named designs, parsable names and 'auto' resolve; unknown names and too-small k are refused."""
    assert callable(DESIGNS["auto"])
    assert NearDuplicateIndex(3, design="4x16/k3").design.name == "4x16/k3"
    assert NearDuplicateIndex(2, design="5/k3").design.n_tables == 10
    assert NearDuplicateIndex(3, expected_size=10**9).design.n_tables == 10
    with pytest.raises(ValueError, match="cannot parse"):
        NearDuplicateIndex(3, design="fast")
    with pytest.raises(ValueError, match="up to 2"):
        NearDuplicateIndex(3, design="3/k2")


def test_choose_design_grows_tables_with_size() -> None:
    """choose_design answers distances up to k and never picks fewer tables for a larger index."""
    for k in range(7):
        tables = [choose_design(k, 10**e).n_tables for e in range(3, 12)]
        assert tables == sorted(tables)
        assert all(choose_design(k, 10**e).k == k for e in range(3, 12))
    assert choose_design(3, 10_000_000).name == "4x16/k3"
    assert choose_design(3, 10**9).name == "13+13+13+13+12/k3"
    assert estimated_bytes_per_fingerprint(choose_design(3, 10**7)) == 32
    with pytest.raises(ValueError):
        choose_design(64, 10)


def test_backend_instance_must_agree() -> None:
    """An index over a given backend refuses a different design, a larger k or other metadata."""
    backend = MemoryBackend(k=2, design=TableDesign.parse("4x16/k3"), metadata={"model": "m1"})
    assert NearDuplicateIndex(2, backend=backend).design.name == "4x16/k3"
    assert NearDuplicateIndex(1, backend=backend, design="4x16/k3", metadata={"model": "m1"}).k == 1
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
    with NearDuplicateIndex(3, metadata={"model": "x"}) as index:
        index.add(1, "a")
        assert index.metadata == {"model": "x"}
        assert "size=1" in repr(index)
    with pytest.raises(ValueError, match="closed"):
        index.query(1)


# --- tables of whole fingerprints (k > 3: two-stage detection queries k = 10) ------------------------------


def test_tables_hold_folds_up_to_k3_and_fingerprints_beyond() -> None:
    """The memory layout follows k: folds and row ids (6 bytes per table) up to k = 3, whole fingerprints
    (8 bytes per table, and a row id in the first table) beyond; the models say the same."""
    from simhash_filter.index.tables import estimated_query_cost, filters_on_folds

    assert [filters_on_folds(k) for k in range(6)] == [True] * 4 + [False] * 2
    two_stage = TableDesign.parse("13+13+13+13+12/k4")
    assert estimated_bytes_per_fingerprint(two_stage, 3) == 8 + 5 * 6
    assert estimated_bytes_per_fingerprint(two_stage) == estimated_bytes_per_fingerprint(two_stage, 10)
    assert estimated_bytes_per_fingerprint(two_stage, 10) == 8 + 5 * 12 + 1
    # no fold filter to pass: the cost of a candidate does not grow with k
    assert estimated_query_cost(two_stage, 10**7, 10) == estimated_query_cost(two_stage, 10**7, 5)
    assert estimated_query_cost(two_stage, 10**7, 10) < estimated_query_cost(two_stage, 10**7, 3)
    rng = np.random.default_rng(2)
    n = 100_000
    fps = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    for k, per_fp in ((3, 8 + 5 * 6 + 1), (4, 8 + 5 * 12 + 1)):  # and a byte of refusals
        backend = MemoryBackend(k=k, design=two_stage)
        backend.add_many(fps, [""] * n)
        assert per_fp * n <= backend.nbytes <= (per_fp + 2) * n  # and the bucket offsets


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
    """Tables of whole fingerprints (k >= 4), any block layout, through seals and merges: query, query_many
    and nearest return exactly the brute-force matches for every k up to the backend's."""
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
    backend = MemoryBackend(k=k, design=TableDesign.parse(design), buffer_size=16, merge_factor=2)
    index = NearDuplicateIndex(k, backend=backend)
    top = rng.getrandbits(64)
    fps = [top ^ rng.getrandbits(12) for _ in range(300)] + [top] * 40 + [top ^ 0xFFF] * 20
    rng.shuffle(fps)
    stored = list(zip(fps, map(str, range(len(fps))), strict=True))
    index.add_many(sorted(fps[:200], reverse=True), [key for _, key in sorted(stored[:200], reverse=True)])
    stored[:200] = sorted(stored[:200], reverse=True)
    for fp, key in stored[200:]:
        index.add(fp, key)
    assert len(backend.run_sizes) > 2
    queries = [top, top ^ 1, top ^ 0xFFF, top ^ (1 << 63), rng.getrandbits(64), *fps[:20]]
    check_exact(index, stored, queries)


def test_fingerprint_tables_hide_deleted_rows() -> None:
    """Deleted rows stay in the tables of fingerprints but are never returned, by query or query_many."""
    design = TableDesign.parse("6/k5")
    backend = MemoryBackend(k=5, design=design, buffer_size=8)
    rng = random.Random(4)
    centre = rng.getrandbits(64)
    fps = [flip(centre, rng.sample(range(64), rng.randint(0, 5))) for _ in range(50)]
    backend.add_many(np.array(fps[:30], dtype=np.uint64), [f"k{i}" for i in range(30)])
    for i in range(30, 50):
        backend.add(fps[i], f"k{i}")
    assert backend.delete([f"k{i}" for i in range(0, 50, 3)]) == 17
    stored = [(fp, f"k{i}") for i, fp in enumerate(fps) if i % 3]
    for q in [centre, *fps[:10]]:
        assert backend.query(q, 5) == brute_force(stored, q, 5)
        assert backend.query_many(np.array([q], dtype=np.uint64), 5) == [brute_force(stored, q, 5)]


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
    """A two-stage index takes pages up to twice its design's capacity, then refuses them with the ways out; an
    index without sketches is not limited."""
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
    with NearDuplicateIndex(3, design="60+1+1+1+1/k4") as exact:
        exact.add_many(fps, keys)
        assert len(exact) == limit + 1


def test_filter_config_designs_for_its_expected_pages() -> None:
    """``FilterConfig.tables`` follows ``expected_pages`` (1,000,000 by default: today's five tables); a bad value
    is refused when the config is made."""
    from simhash_filter.config import DEFAULTS, FilterConfig

    assert DEFAULTS.expected_pages == 1_000_000 and DEFAULTS.tables == "13+13+13+13+12/k4"
    assert FilterConfig(expected_pages=50_000_000).tables == "11+11+11+11+10+10/k4"
    with pytest.raises(ValueError, match="expected number of pages"):
        FilterConfig(expected_pages=0)
