"""Contract tests every index backend passes, and the backend registry.

A new backend adds a factory to ``BACKENDS`` (a URI, or a callable for backends that need a
server or a temporary directory); every contract test then runs against it.
"""

from __future__ import annotations

import itertools
import random
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bounded_reference import BoundedReference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_filter.index.backends import (
    BACKENDS_BASE,
    Backend,
    Candidate,
    MetadataMismatchError,
    backend_registry,
    check_metadata,
    open_backend,
)
from simhash_filter.index.backends.memory import MemoryBackend
from simhash_filter.index.bound import CheckBound
from simhash_filter.index.nearduplicate import NearDuplicateIndex
from simhash_filter.index.tables import Match, TableDesign, hamming

Factory = Callable[..., Backend]

#: Backends under contract: name -> URI, or a function of a fresh temporary directory that returns one
#: (for backends that need a server or files).  Small buffers make the in-memory tables seal and merge often.
BACKENDS: dict[str, str | Callable[[Path], str]] = {
    "memory": "memory://",
    "memory-small-runs": "memory://?buffer_size=3&merge_factor=2",
    "file": lambda tmp: f"file://{tmp}/index",
    "file-small-runs": lambda tmp: f"file://{tmp}/index?buffer_size=3&merge_factor=2&sync=always",
    # tables on disk, written every 7 rows and merged often
    "file-disk-tables": lambda tmp: f"file://{tmp}/index?tables=disk&spill_rows=7&buffer_size=3&merge_factor=2",
}

#: Redis backends under contract: name -> (the fixture of the server, URI options).  Every backend opened
#: gets a fresh key prefix; tiny buckets make every probe scan, fold-filter and verify many entries.
REDIS_BACKENDS: dict[str, tuple[str, str]] = {
    "redis": ("redis_server", ""),
    "redis-small-buckets": ("redis_server", "&bucket_bits=2"),
    "redis-cluster": ("redis_cluster", "&cluster=1"),
}

DESIGN = TableDesign.parse("4x16/k3")
#: The metadata of the backends the factory opens: a sketch of 8 bytes beside each fingerprint.
SMALL = {"sketch_bytes": 8}
#: A sketch of that size.
S = bytes(8)


@pytest.fixture(scope="module", params=sorted([*BACKENDS, *REDIS_BACKENDS]))
def make_backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Factory]:
    """A factory ``make_backend(k=3, design=DESIGN, metadata=SMALL)`` for one backend; closes them all."""
    opened: list[Backend] = []

    def factory(k: int = 3, design: TableDesign = DESIGN, metadata: dict[str, Any] | None = None) -> Backend:
        if request.param in REDIS_BACKENDS:
            fixture, options = REDIS_BACKENDS[request.param]
            server = request.getfixturevalue(fixture)
            uri: str | Callable[[Path], str] = f"{server.url}?prefix=contract-{uuid.uuid4().hex[:12]}{options}"
        else:
            uri = BACKENDS[request.param]
        if callable(uri):
            uri = uri(tmp_path_factory.mktemp(request.param))
        backend = open_backend(uri, k=k, design=design, metadata=SMALL if metadata is None else metadata)
        opened.append(backend)
        return backend

    yield factory
    for backend in opened:
        backend.close()


def brute_force(stored: Sequence[tuple[int, str]], query: int, k: int) -> list[Match]:
    """Every stored pair within k, nearest first, ties in insertion order."""
    found = sorted((hamming(fp, query), i) for i, (fp, _) in enumerate(stored) if hamming(fp, query) <= k)
    return [Match(stored[i][1], d, stored[i][0]) for d, i in found]


def test_backend_properties(make_backend: Factory) -> None:
    """A backend reports its k, design and a copy of its metadata, and starts empty."""
    backend = make_backend(k=2, metadata={"model": "v1", "sketch_bytes": 8})
    assert isinstance(backend, Backend)
    assert backend.k == 2 and backend.design == DESIGN and len(backend) == 0 and backend.sketch_bytes == 8
    meta = backend.metadata
    assert meta == {"model": "v1", "sketch_bytes": 8}
    meta["model"] = "changed"
    assert backend.metadata["model"] == "v1"


def test_an_index_without_sketches_is_refused() -> None:
    """Every index keeps a sketch beside each fingerprint: metadata without one is refused."""
    with pytest.raises(ValueError, match="sketch_bytes > 0"):
        open_backend("memory://", k=3, design=DESIGN, metadata={"model": "m"})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_query_within_the_design_s_k_is_exact(make_backend: Factory, data: st.DataObject) -> None:
    """query returns exactly the stored pairs within k (up to the design's), nearest first, ties by insertion."""
    backend = make_backend()
    centre = data.draw(st.integers(0, 2**64 - 1))
    near = st.builds(lambda bits: sum(1 << b for b in bits) ^ centre, st.sets(st.integers(0, 63), max_size=4))
    n = data.draw(st.integers(0, 60))
    fps = data.draw(st.lists(st.one_of(near, st.integers(0, 2**64 - 1)), min_size=n, max_size=n))
    stored = [(fp, f"u{i}") for i, fp in enumerate(fps)]
    half = len(stored) // 2
    for fp, key in stored[:half]:
        backend.add(fp, key, S)
    backend.add_many(np.array(fps[half:], dtype=np.uint64), [key for _, key in stored[half:]], [S] * (n - half))
    assert len(backend) == len(stored)
    for q in [*data.draw(st.lists(near, min_size=1, max_size=10)), *fps[:5]]:
        for k in range(4):
            assert backend.query(q, k) == brute_force(stored, q, k)


def test_notes_are_counters_added_atomically(make_backend: Factory) -> None:
    """add_notes adds to the counters kept with the index and returns them all; notes() reads them; threads
    adding at once lose no increment."""
    backend = make_backend()
    assert backend.notes() == {}
    assert backend.add_notes({}) == {}
    assert backend.add_notes({"rule|a.test|param:sid|+": 2, "rule|a.test|case|-": 1}) == {
        "rule|a.test|param:sid|+": 2,
        "rule|a.test|case|-": 1,
    }
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: backend.add_notes({"rule|a.test|param:sid|+": 1}), range(20)))
    assert backend.notes() == {"rule|a.test|param:sid|+": 22, "rule|a.test|case|-": 1}


def test_duplicate_fingerprints_keep_every_key(make_backend: Factory) -> None:
    """The same fingerprint stored under several keys comes back once per key, in insertion order."""
    backend = make_backend()
    backend.add_many(np.array([7, 7], dtype=np.uint64), ["x", "y"], [S, S])
    backend.add(7, "z", S)
    assert [m.key for m in backend.query(7, 3)] == ["x", "y", "z"]
    assert backend.query(6, 0) == []


def test_empty_backend_answers_nothing(make_backend: Factory) -> None:
    """An empty backend returns no matches, and an empty batch is fine."""
    backend = make_backend()
    assert backend.query(0, 3) == []
    backend.add_many(np.empty(0, dtype=np.uint64), [], [])
    assert len(backend) == 0


def test_closed_backend_refuses_calls(make_backend: Factory) -> None:
    """After close (also by a with block) every call fails with ValueError; closing twice is fine."""
    with make_backend() as backend:
        backend.add(1, "a", S)
    backend.close()
    for call in (
        lambda: backend.add(1, "b", S),
        lambda: backend.query(1, 3),
        lambda: backend.add_and_candidates(1, "c", S, 3),
    ):
        with pytest.raises(ValueError, match="closed"):
            call()


# -- registry --------------------------------------------------------------------------------------


class ToyBackend(MemoryBackend):
    """A registered user backend."""


def test_open_backend_by_scheme() -> None:
    """open_backend picks the class by URI scheme, case-insensitively, and passes k, design, metadata."""
    backend = open_backend("MEMORY://", k=2, design=DESIGN, metadata=SMALL)
    assert type(backend) is MemoryBackend and backend.k == 2 and backend.metadata == SMALL
    assert BACKENDS_BASE["memory"] == "simhash_filter.index.backends.memory.MemoryBackend"


def test_unknown_scheme_lists_known_ones() -> None:
    """An unknown scheme is a ValueError naming the known schemes."""
    with pytest.raises(ValueError, match=r"unknown index backend scheme 'rdis'.*known schemes: .*memory://"):
        open_backend("rdis://localhost", k=3, design=DESIGN)
    with pytest.raises(ValueError, match="no scheme"):
        open_backend("://memory", k=3, design=DESIGN)


def test_user_backends_merge_over_base() -> None:
    """User entries add schemes (dotted paths or classes) and None disables a built-in one."""
    registry = backend_registry({"toy": f"{__name__}.ToyBackend", "memory": None})
    assert registry == {**{s: v for s, v in BACKENDS_BASE.items() if s != "memory"}, "toy": f"{__name__}.ToyBackend"}
    backend = open_backend("toy://", k=3, design=DESIGN, backends={"toy": ToyBackend})
    assert isinstance(backend, ToyBackend)
    assert isinstance(open_backend("toy://", k=3, design=DESIGN, backends=registry), ToyBackend)
    with pytest.raises(ValueError, match=r"known schemes: toy://$"):
        only_toy = {**dict.fromkeys(BACKENDS_BASE), "toy": ToyBackend}
        open_backend("memory://", k=3, design=DESIGN, backends=only_toy)


def test_registry_refuses_non_backends() -> None:
    """A registry entry that is not a Backend subclass is a TypeError; a bad path an import error."""
    with pytest.raises(TypeError, match="not a subclass"):
        open_backend("x://", k=3, design=DESIGN, backends={"x": "collections.OrderedDict"})
    with pytest.raises(ValueError, match="dotted path"):
        open_backend("x://", k=3, design=DESIGN, backends={"x": "OrderedDict"})
    with pytest.raises(ModuleNotFoundError):
        open_backend("x://", k=3, design=DESIGN, backends={"x": "no_such_module.Backend"})


def test_check_metadata() -> None:
    """check_metadata accepts equal or unspecified metadata and names the differing keys otherwise."""
    check_metadata({"model": "a"}, None)
    check_metadata({"model": "a"}, {"model": "a"})
    with pytest.raises(MetadataMismatchError, match=r"model: stored 'a' != requested 'b'") as info:
        check_metadata({"model": "a", "k": 3}, {"model": "b", "k": 3})
    assert isinstance(info.value, ValueError)
    with pytest.raises(MetadataMismatchError, match="<missing>"):
        check_metadata({}, {"model": "b"})


# -- memory backend specifics ---------------------------------------------------------------------


def test_memory_uri_options() -> None:
    """memory:// takes buffer_size and merge_factor options and refuses anything else."""
    backend = open_backend("memory://?buffer_size=4&merge_factor=2", k=3, design=DESIGN, metadata=SMALL)
    assert isinstance(backend, MemoryBackend)
    for i in range(40):
        backend.add(i << 20, str(i), S)
    sizes = backend.run_sizes
    assert sum(sizes) == 40 and sizes[-1] < 4
    assert all(a > 2 * b for a, b in itertools.pairwise(sizes[:-1]))  # geometric runs
    for uri in ("memory://somewhere", "memory://?colour=red", "memory://?buffer_size=big", "memory://?buffer_size=0"):
        with pytest.raises(ValueError):
            open_backend(uri, k=3, design=DESIGN, metadata=SMALL)


# --- two-stage detection: sketches beside the fingerprints, candidates beyond the design's k ---------------

TWO_STAGE = TableDesign.parse("13+13+13+13+12/k4")
SKETCH = 64
META = {"model": "contract", "sketch_bytes": SKETCH}
K = 10


def a_sketch(i: int) -> bytes:
    return random.Random(i).randbytes(SKETCH)


def flip(value: int, bits: list[int]) -> int:
    for b in bits:
        value ^= 1 << b
    return value


def test_two_stage_add_and_candidates_matches_brute_force(make_backend: Factory) -> None:
    """Candidates are the stored pages within k in the page's block of each table, at most per_table of each
    table, the nearest (oldest first on ties), with their sketches; tables whose block holds `duplicates`
    verified near-duplicates do not store the page: exactly as a brute-force reference, whatever the runs and
    buffers, through floods of verifying pages and crowds of unrelated ones."""
    backend = make_backend(k=K, design=TWO_STAGE, metadata=META)
    bound = CheckBound(per_table=5, duplicates=3, min_similarity=0.75)
    reference = BoundedReference(TWO_STAGE, K, bound)
    rng = random.Random(3)
    base = [rng.getrandbits(64) for _ in range(6)]
    for i in range(400):
        b = i % len(base)
        fp = flip(base[b], rng.sample(range(64), rng.randint(0, 14)))
        # pages of the first bases are floods (sketches within a few bits of their base's); the others unrelated
        sk = near_sketch(a_sketch(b), rng.randint(0, 40)) if b < 3 else a_sketch(1000 + i)
        key = f"p{i % 350}"  # some keys come again
        assert backend.add_and_candidates(fp, key, sk, K, bound) == reference.add(fp, key, sk), i
    assert len(backend) == len(reference) < 400
    for i in range(40):
        q = flip(base[i % len(base)], rng.sample(range(64), rng.randint(0, 12)))
        assert backend.candidates(q, K, bound) == reference.candidates(q)
        assert backend.candidates(q, 3, bound) == reference.candidates(q, 3)


def test_two_stage_blocks_take_no_more_than_block_pages(make_backend: Factory) -> None:
    """A crowd of look-alike pages (within k of each other in a few blocks, sketches unrelated: no page verifies)
    fills each block up to block_pages and no further (rule 3), the other tables taking the page while their
    blocks have room; a page whose every block is full is decided but not stored; candidates and storage exactly
    as the brute-force reference's, whatever the runs, buffers and buckets (several blocks a bucket too)."""
    backend = make_backend(k=K, design=TWO_STAGE, metadata=META)
    bound = CheckBound(per_table=4, duplicates=2, min_similarity=0.75, block_pages=6)
    reference = BoundedReference(TWO_STAGE, K, bound)
    rng = random.Random(7)
    base = [rng.getrandbits(64) for _ in range(3)]
    for i in range(150):
        # a crowd around three pages, 0 to 12 bits away, some bits in the leads: blocks fill at different times
        fp = flip(base[i % 3], rng.sample(range(64), rng.randint(0, 12)))
        sk = a_sketch(5000 + i) if i % 10 else near_sketch(a_sketch(5000 + i - 1), 3)  # now and then a twin
        key = f"c{i % 140}"
        assert backend.add_and_candidates(fp, key, sk, K, bound) == reference.add(fp, key, sk), i
    assert len(backend) == len(reference) < 150
    for t in range(TWO_STAGE.n_tables):
        assert all(reference._size(t, fp) <= bound.block_pages for fp, _, _, _ in reference.stored)
    assert any(reference._size(0, fp) == bound.block_pages for fp, _, _, _ in reference.stored)
    for i in range(30):
        q = flip(base[i % 3], rng.sample(range(64), rng.randint(0, 12)))
        assert backend.candidates(q, K, bound) == reference.candidates(q)
    # a bulk add stores pages in full blocks too (no check): the next checks see them
    bulk = [flip(base[i % 3], rng.sample(range(64), rng.randint(0, 4))) for i in range(12)]
    backend.add_many(
        np.array(bulk, dtype=np.uint64), [f"b{i}" for i in range(12)], [a_sketch(9000 + i) for i in range(12)]
    )
    reference.stored += [
        (fp, f"b{i}", a_sketch(9000 + i), frozenset(range(TWO_STAGE.n_tables))) for i, fp in enumerate(bulk)
    ]
    for i in range(30):
        fp = flip(base[i % 3], rng.sample(range(64), rng.randint(0, 12)))
        assert backend.add_and_candidates(fp, f"d{i}", a_sketch(7000 + i), K, bound) == reference.add(
            fp, f"d{i}", a_sketch(7000 + i)
        ), i


def near_sketch(sketch: bytes, bits: int) -> bytes:
    """*sketch* with its first *bits* bits flipped."""
    value = int.from_bytes(sketch, "little") ^ ((1 << bits) - 1)
    return value.to_bytes(len(sketch), "little")


def test_two_stage_adding_the_same_page_again_stores_it_once(make_backend: Factory) -> None:
    """A key stored with its fingerprint is not stored again (a page seen again, a retried call); the same key
    with another fingerprint (a changed page) is."""
    backend = make_backend(k=K, design=TWO_STAGE, metadata=META)
    fp = 0x0123456789ABCDEF
    assert backend.add_and_candidates(fp, "u", a_sketch(1), K) == []
    again = backend.add_and_candidates(fp, "u", a_sketch(1), K)
    assert again == [Candidate("u", 0, fp, a_sketch(1))]
    assert len(backend) == 1
    assert backend.add_and_candidates(fp ^ 1, "u", a_sketch(2), K) == [Candidate("u", 1, fp, a_sketch(1))]
    assert len(backend) == 2


def test_two_stage_sketches_round_trip_through_add_many_and_entries(make_backend: Factory) -> None:
    """Pages added in bulk keep their sketches: entries() and candidates() return them."""
    backend = make_backend(k=K, design=TWO_STAGE, metadata=META)
    fps = np.array([1 << 40, (1 << 40) | 3, 7 << 20], dtype=np.uint64)
    backend.add_many(fps, ["a", "b", "c"], [a_sketch(1), a_sketch(2), a_sketch(3)])
    assert [(e.key, e.sketch) for e in backend.entries()] == [(key, a_sketch(i)) for i, key in enumerate("abc", 1)]
    assert backend.candidates(1 << 40, K)[:2] == [Candidate("a", 0, 1 << 40, a_sketch(1)),
                                                  Candidate("b", 2, (1 << 40) | 3, a_sketch(2))]  # fmt: skip


def test_two_stage_bad_sketches_are_refused(make_backend: Factory) -> None:
    """A missing or wrong-sized sketch is a ValueError that says what is expected; nothing is stored."""
    backend = make_backend(k=K, design=TWO_STAGE, metadata=META)
    with pytest.raises(ValueError, match="64"):
        backend.add_and_candidates(5, "x", b"short", K)
    with pytest.raises(ValueError, match="sketch"):
        backend.add_many(np.array([5], dtype=np.uint64), ["x"], [])
    assert len(backend) == 0


def test_two_stage_racing_variants_are_all_stored_and_each_sees_the_ones_before(make_backend: Factory) -> None:
    """Threads adding near-identical pages at once: every page is stored once, and each page's candidates are
    the pages stored before it (the first one stored sees none)."""
    backend = make_backend(k=K, design=TWO_STAGE, metadata=META)
    base = 0x5555AAAA5555AAAA
    seen: dict[str, int] = {}

    def add(i: int) -> None:
        seen[f"v{i}"] = len(backend.add_and_candidates(base ^ (1 << i), f"v{i}", a_sketch(i), K))

    threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(backend) == 8
    assert sorted(seen.values()) == list(range(8))


def test_two_stage_the_index_picks_the_most_similar_verified_candidate(make_backend: Factory) -> None:
    """Through NearDuplicateIndex: the page is a near-duplicate of its most similar candidate above the
    threshold, not of the nearest or the first stored; none above it: not a near-duplicate (but stored).  The
    read-only check answers the same and stores nothing."""
    backend = make_backend(k=K, design=TWO_STAGE, metadata=META)
    index = NearDuplicateIndex(K, backend=backend, min_similarity=0.75)
    page = a_sketch(9)
    close = bytes(b ^ (1 if i < 2 else 0) for i, b in enumerate(page))  # 2 bits differ: similarity ~0.99
    closer = bytes(b ^ (1 if i < 1 else 0) for i, b in enumerate(page))
    fp = 0xF0F0F0F0F0F0F0F0
    assert index.check_and_add(fp, "first", a_sketch(100)) is None  # distance 0, unrelated sketch
    assert index.check_and_add(fp ^ 0b11, "second", close) is None  # unlike the first
    assert index.check_and_add(fp ^ 0b111, "third", closer).key == "second"  # type: ignore[union-attr]
    before = index.check(fp ^ 1, page)  # read only: what check_and_add answers, nothing stored
    assert len(index) == 3
    match = index.check_and_add(fp ^ 1, "page", page)  # distance 1 to the first and second, 2 to the third
    assert match is not None and match.key == "third" and match.distance == 2 and match.similarity > 0.99
    assert match == before
    assert index.check_and_add(fp ^ (1 << 63), "other", a_sketch(55)) is None
    assert len(index) == 5


def test_two_stage_the_bound_verifies_the_leading_verify_bytes_alone(make_backend: Factory) -> None:
    """With ``verify_bytes`` in the metadata (model v6: the word sketch, then the prose part), a block's verified
    near-duplicates are judged on the sketch's leading bytes alone: pages whose word sketches agree and whose
    trailing bytes do not (similarity 0.5 over the whole) still fill a block as a flood does; candidates carry the
    whole stored sketch."""
    backend = make_backend(k=K, design=TWO_STAGE, metadata={**META, "sketch_bytes": 2 * SKETCH, "verify_bytes": SKETCH})
    assert backend.verify_bytes == SKETCH
    bound = CheckBound(per_table=8, duplicates=2, min_similarity=0.75)
    rng = random.Random(5)
    pages = [a_sketch(1) + rng.randbytes(SKETCH) for _ in range(5)]
    fp = 0x0F1E2D3C4B5A6978
    found = [backend.add_and_candidates(fp, f"p{i}", sk, K, bound) for i, sk in enumerate(pages)]
    assert len(backend) == 2  # the third page on: every table's block holds 2 verified near-duplicates
    assert found[4] == [Candidate("p0", 0, fp, pages[0]), Candidate("p1", 0, fp, pages[1])]
    with pytest.raises(ValueError, match="verify_bytes"):
        make_backend(k=K, design=TWO_STAGE, metadata={**META, "verify_bytes": SKETCH + 1})


def test_memory_footprint_of_two_stage_pages_is_133_bytes() -> None:
    """With sketches and k = 10 the tables hold whole fingerprints and row ids: per page 8 (fingerprint) + 64
    (sketch) + 5 * 12 (tables) + 1 (refusals) bytes, plus at most 2 of offsets; and candidates stay exact
    against brute force in a run of 100,000 pages (each block holds at most two pages near a query)."""
    backend = MemoryBackend(k=K, design=TWO_STAGE, metadata=META)
    n = 100_000
    rng = np.random.default_rng(1)
    fps = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    fps[1::2] = fps[::2] ^ (np.uint64(1) << rng.integers(0, 64, size=n // 2).astype(np.uint64))
    backend.add_many(fps, [str(i) for i in range(n)], [bytes(SKETCH)] * n)
    assert 133 * n <= backend.nbytes <= 135 * n
    stored = fps.tolist()
    for q in [*stored[:8], *rng.integers(0, 2**64, size=4, dtype=np.uint64).tolist()]:
        q ^= 1 << 5
        expected = sorted(
            ((fp ^ q).bit_count(), i)
            for i, fp in enumerate(stored)
            if (fp ^ q).bit_count() <= K and TWO_STAGE.agree_on_a_lead(fp, q)
        )
        assert [(c.distance, int(c.key)) for c in backend.candidates(q, K)] == expected
