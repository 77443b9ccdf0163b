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
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_filter.backends import (
    BACKENDS_BASE,
    Backend,
    MetadataMismatchError,
    backend_registry,
    check_metadata,
    open_backend,
)
from simhash_filter.backends.memory import MemoryBackend
from simhash_filter.index import Match, TableDesign, hamming

Factory = Callable[..., Backend]

#: Backends under contract: name -> URI, or a function of a fresh temporary directory that returns one
#: (for backends that need a server or files).  Small buffers make the in-memory tables seal and merge often.
BACKENDS: dict[str, str | Callable[[Path], str]] = {
    "memory": "memory://",
    "memory-small-runs": "memory://?buffer_size=3&merge_factor=2",
    "file": lambda tmp: f"file://{tmp}/index",
    "file-small-runs": lambda tmp: f"file://{tmp}/index?buffer_size=3&merge_factor=2&sync=always",
}

#: Redis backends under contract: name -> (the fixture of the server, URI options).  Every backend opened
#: gets a fresh key prefix; tiny buckets make every probe scan, fold-filter and verify many entries.
REDIS_BACKENDS: dict[str, tuple[str, str]] = {
    "redis": ("redis_server", ""),
    "redis-small-buckets": ("redis_server", "&bucket_bits=2"),
    "redis-cluster": ("redis_cluster", "&cluster=1"),
}

DESIGN = TableDesign.parse("4x16/k3")


@pytest.fixture(scope="module", params=sorted([*BACKENDS, *REDIS_BACKENDS]))
def make_backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Factory]:
    """A factory ``make_backend(k=3, design=DESIGN, metadata=None)`` for one backend; closes them all."""
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
        backend = open_backend(uri, k=k, design=design, metadata=metadata)
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
    backend = make_backend(k=2, metadata={"model": "v1", "f": 64})
    assert isinstance(backend, Backend)
    assert backend.k == 2 and backend.design == DESIGN and len(backend) == 0
    meta = backend.metadata
    assert meta == {"model": "v1", "f": 64}
    meta["model"] = "changed"
    assert backend.metadata["model"] == "v1"
    assert make_backend().metadata == {}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_query_is_exact(make_backend: Factory, data: st.DataObject) -> None:
    """query and query_many return exactly the stored pairs within k, nearest first, ties by insertion."""
    backend = make_backend()
    centre = data.draw(st.integers(0, 2**64 - 1))
    near = st.builds(lambda bits: sum(1 << b for b in bits) ^ centre, st.sets(st.integers(0, 63), max_size=4))
    n = data.draw(st.integers(0, 60))
    fps = data.draw(st.lists(st.one_of(near, st.integers(0, 2**64 - 1)), min_size=n, max_size=n))
    stored = [(fp, f"u{i}") for i, fp in enumerate(fps)]
    half = len(stored) // 2
    for fp, key in stored[:half]:
        backend.add(fp, key)
    backend.add_many(np.array(fps[half:], dtype=np.uint64), [key for _, key in stored[half:]])
    assert len(backend) == len(stored)
    queries = [*data.draw(st.lists(near, min_size=1, max_size=10)), *fps[:5]]
    batch = backend.query_many(np.array(queries, dtype=np.uint64), 3)
    for q, got in zip(queries, batch, strict=True):
        assert got == brute_force(stored, q, 3)
        for k in range(4):
            assert backend.query(q, k) == brute_force(stored, q, k)


def test_check_and_add(make_backend: Factory) -> None:
    """check_and_add returns the nearest match (earliest on ties) without storing, else stores."""
    backend = make_backend()
    assert backend.check_and_add(0, "a", 3) is None
    assert backend.check_and_add(0b1111, "b", 3) is None
    assert backend.check_and_add(0b0111, "c", 3) == Match("b", 1, 0b1111)
    assert backend.check_and_add(0b0011, "d", 3) == Match("a", 2, 0)
    assert backend.check_and_add(0b0011, "e", 1) is None  # k=1: nothing close enough, stored
    assert len(backend) == 3
    assert backend.query(0b0011, 0) == [Match("e", 0, 0b0011)]


def test_check_and_add_many_is_sequential(make_backend: Factory) -> None:
    """check_and_add_many equals check_and_add in order, within the batch too."""
    backend = make_backend()
    got = backend.check_and_add_many(np.array([5, 4, 5, 2**64 - 1], dtype=np.uint64), ["a", "b", "c", "d"], 3)
    assert got == [None, Match("a", 1, 5), Match("a", 0, 5), None]
    assert len(backend) == 2


def test_duplicate_fingerprints_keep_every_key(make_backend: Factory) -> None:
    """The same fingerprint stored under several keys comes back once per key, in insertion order."""
    backend = make_backend()
    backend.add_many(np.array([7, 7], dtype=np.uint64), ["x", "y"])
    backend.add(7, "z")
    assert [m.key for m in backend.query(7, 3)] == ["x", "y", "z"]
    assert [[m.key for m in ms] for ms in backend.query_many(np.array([7, 6], dtype=np.uint64), 0)] == [
        ["x", "y", "z"],
        [],
    ]


def test_concurrent_check_and_add_keeps_one_per_cluster(make_backend: Factory) -> None:
    """check_and_add from several threads never keeps two near-identical fingerprints."""
    backend = make_backend()
    rng = random.Random(5)
    centres = [rng.getrandbits(64) for _ in range(40)]
    kept = []
    barrier = threading.Barrier(4)

    def worker(t: int) -> None:
        barrier.wait()
        for i, c in enumerate(centres):
            if backend.check_and_add(c ^ (1 << (t * 7)), f"{i}/{t}", 3) is None:
                kept.append(i)  # list.append is atomic

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(kept) == list(range(len(centres)))
    assert len(backend) == len(centres)


def test_empty_backend_answers_nothing(make_backend: Factory) -> None:
    """An empty backend returns no matches, also for a batch, and an empty batch is fine."""
    backend = make_backend()
    assert backend.query(0, 3) == []
    assert backend.query_many(np.array([0, 1], dtype=np.uint64), 3) == [[], []]
    backend.add_many(np.empty(0, dtype=np.uint64), [])
    assert backend.query_many(np.empty(0, dtype=np.uint64), 3) == []
    assert len(backend) == 0


def test_closed_backend_refuses_calls(make_backend: Factory) -> None:
    """After close (also by a with block) every call fails with ValueError; closing twice is fine."""
    with make_backend() as backend:
        backend.add(1, "a")
    backend.close()
    for call in (lambda: backend.add(1, "b"), lambda: backend.query(1, 3), lambda: backend.check_and_add(1, "c", 3)):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_design_must_cover_k(make_backend: Factory) -> None:
    """A backend refuses a design built for a smaller k than it must answer."""
    with pytest.raises(ValueError, match="up to 1"):
        make_backend(k=3, design=TableDesign.parse("2x32/k1"))


# -- registry --------------------------------------------------------------------------------------


class ToyBackend(MemoryBackend):
    """A registered user backend."""


def test_open_backend_by_scheme() -> None:
    """open_backend picks the class by URI scheme, case-insensitively, and passes k, design, metadata."""
    backend = open_backend("MEMORY://", k=2, design=DESIGN, metadata={"m": 1})
    assert type(backend) is MemoryBackend and backend.k == 2 and backend.metadata == {"m": 1}
    assert BACKENDS_BASE["memory"] == "simhash_filter.backends.memory.MemoryBackend"


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
    backend = open_backend("memory://?buffer_size=4&merge_factor=2", k=3, design=DESIGN)
    assert isinstance(backend, MemoryBackend)
    for i in range(40):
        backend.add(i << 20, str(i))
    sizes = backend.run_sizes
    assert sum(sizes) == 40 and sizes[-1] < 4
    assert all(a > 2 * b for a, b in itertools.pairwise(sizes[:-1]))  # geometric runs
    for uri in ("memory://somewhere", "memory://?colour=red", "memory://?buffer_size=big", "memory://?buffer_size=0"):
        with pytest.raises(ValueError):
            open_backend(uri, k=3, design=DESIGN)


def test_memory_footprint_is_32_bytes_per_fingerprint_with_four_tables() -> None:
    """With 4 tables the memory backend holds 8 + 4 * 6 bytes per fingerprint, plus at most 4 of offsets."""
    backend = MemoryBackend(k=3, design=DESIGN)
    n = 200_000
    backend.add_many(np.random.default_rng(0).integers(0, 2**64, size=n, dtype=np.uint64), [""] * n)
    assert 32 * n <= backend.nbytes <= 36 * n
