"""One two-stage index sharded over a real 3-node Redis Cluster (``shards=3``) and over a list of Redis servers
(``servers=``): the same candidates as one index, the memory spread over the nodes, and no two near-duplicates
kept when four processes race on them."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from devsites.redis_server import RedisCluster, RedisServer
from simhash_filter.index.backends import Candidate, MetadataMismatchError, open_backend
from simhash_filter.index.backends.memory import MemoryBackend
from simhash_filter.index.backends.redis import RedisBackend
from simhash_filter.index.backends.redis import sharded as sharded_module
from simhash_filter.index.backends.redis.sharded import ShardedRedisBackend
from simhash_filter.index.bound import CheckBound
from simhash_filter.index.tables import TableDesign

DESIGN = TableDesign.parse("13+13+13+13+12/k4")
META = {"model": "m1", "sketch_bytes": 64}
K = 10
BOUND = CheckBound(8, 4, 0.75)


def open_sharded(uri: str) -> ShardedRedisBackend:
    backend = open_backend(uri, k=K, design=DESIGN, metadata=META)
    assert isinstance(backend, ShardedRedisBackend)
    return backend


def pages(n: int, seed: int) -> list[tuple[int, str, bytes]]:
    """*n* pages: random ones, and every fourth a near-duplicate of an earlier one (1-6 bits, a few sketch bits)."""
    rng = random.Random(seed)
    out: list[tuple[int, str, bytes]] = []
    for i in range(n):
        if i % 4 == 3:
            fp, _, sk = out[rng.randrange(len(out))]
            fp ^= sum(1 << b for b in rng.sample(range(64), rng.randint(1, 6)))
            sk = bytes(b ^ (1 << rng.randrange(8)) if j < 3 else b for j, b in enumerate(sk))
        else:
            fp, sk = rng.getrandbits(64), rng.randbytes(64)
        out.append((fp, f"https://site{i % 7}.example/p{i}", sk))
    return out


def test_a_cluster_sharded_index_finds_what_one_index_finds(redis_cluster: RedisCluster, redis_prefix: str) -> None:
    """Over three masters the shards' hash tags fall on three different nodes; every check gives the candidates
    one in-memory index gives for the same pages in the same order, and the pages spread over the nodes."""
    uri = f"{redis_cluster.url}?cluster=1&shards=3&prefix={redis_prefix}"
    memory = MemoryBackend(k=K, design=DESIGN, metadata=META)
    with open_sharded(uri) as sharded:
        for fp, key, sk in pages(1200, 1):
            got = sharded.add_and_candidates(fp, key, sk, K, BOUND)
            want = memory.add_and_candidates(fp, key, sk, K, BOUND)
            assert sorted(got) == sorted(want)
        assert len(sharded) == len(memory) == 1200
        info = sharded.info()
    assert [len(redis_cluster.nodes)] == [len(info["shards"])]
    used = []
    for node in redis_cluster.nodes:
        with node.client() as client:
            keys = list(client.scan_iter(match=f"{{{redis_prefix}.*", count=1000))
            used.append(sum(client.memory_usage(key) or 0 for key in keys))
    shares = [u / sum(used) for u in used]
    print(f"memory shares of the nodes: {shares}")
    assert all(0.2 < share < 0.45 for share in shares), shares
    keys = []  # each page's URL is kept once, by its home shard; the others keep a hash of it
    for shard in info["shards"]:
        with open_backend(f"{redis_cluster.url}?cluster=1&prefix={shard['prefix']}", k=K, design=DESIGN) as one:
            keys += [entry.key for entry in one.entries()]
    urls = [key for key in keys if not key.startswith("\x00")]
    assert len(set(urls)) == len(urls) > 1100 and len(keys) > 2 * len(urls)
    with open_sharded(uri) as again:
        assert sorted(e.key for e in again.entries()) == sorted(key for _, key, _ in pages(1200, 1))
    with open_sharded(uri) as again:  # the shard list is kept: another process finds the same shards
        assert len(again) == 1200 and again.info()["shards"] == info["shards"]
    with pytest.raises(MetadataMismatchError, match="has 3 shards, not 4: open it with shards=3"):
        open_sharded(f"{redis_cluster.url}?cluster=1&shards=4&prefix={redis_prefix}")


def test_full_blocks_and_floods_decide_and_count_as_one_index(
    redis_cluster: RedisCluster, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crowd of look-alike pages filling blocks of 5 (rule 3) and a flood of verifying near-duplicates (rule 2):
    the sharded index's candidates are the in-memory index's, check after check, and its page count and its
    entries (URLs, fingerprints, sketches) are exact, also for pages whose home shard's tables all refused them and
    another shard stored (the home keeps their URL and counts them after the calls, once)."""
    uri = f"{redis_cluster.url}?cluster=1&shards=3&prefix={redis_prefix}"
    bound = CheckBound(4, 2, 0.75, 5)
    memory = MemoryBackend(k=K, design=DESIGN, metadata=META)
    rng = random.Random(11)
    base = [rng.getrandbits(64) for _ in range(3)]
    flood_sketch = rng.randbytes(64)
    kept_after = []
    keep_key = sharded_module.keep_key
    monkeypatch.setattr(sharded_module, "keep_key", lambda *a: kept_after.append(a) or keep_key(*a))
    with open_sharded(uri) as sharded:
        for i in range(240):
            fp = base[i % 3] ^ sum(1 << b for b in rng.sample(range(64), rng.randint(0, 9)))
            sk = flood_sketch if i % 3 == 0 else rng.randbytes(64)  # base 0 floods, the others crowd
            got = sharded.add_and_candidates(fp, f"https://c.example/{i}", sk, K, bound)
            assert sorted(got) == sorted(memory.add_and_candidates(fp, f"https://c.example/{i}", sk, K, bound)), i
        assert len(sharded) == len(memory) < 240
        entries = sorted((e.key, e.fingerprint, e.sketch) for e in sharded.entries())
        assert entries == sorted((e.key, e.fingerprint, e.sketch) for e in memory.entries())
    assert kept_after  # some pages were kept by their home after the calls


def test_a_bulk_load_stores_what_checks_would_and_counts_each_page_once(
    redis_cluster: RedisCluster, redis_prefix: str
) -> None:
    """add_many (one script call per shard per batch, each page with its tables' mask there) stores every page in
    all its tables: the candidates of later checks and the entries are those of an in-memory index filled the same
    way, and each page is counted once."""
    uri = f"{redis_cluster.url}?cluster=1&shards=3&prefix={redis_prefix}"
    memory = MemoryBackend(k=K, design=DESIGN, metadata=META)
    stored = pages(500, 4)
    fps = np.array([fp for fp, _, _ in stored], dtype=np.uint64)
    keys, sketches = [key for _, key, _ in stored], [sk for _, _, sk in stored]
    with open_sharded(uri) as sharded:
        for lo in range(0, 500, 150):
            sharded.add_many(fps[lo : lo + 150], keys[lo : lo + 150], sketches[lo : lo + 150])
            memory.add_many(fps[lo : lo + 150], keys[lo : lo + 150], sketches[lo : lo + 150])
        assert len(sharded) == len(memory) == 500
        assert sorted(e[:2] for e in sharded.entries()) == sorted(e[:2] for e in memory.entries())
        for fp, key, sk in pages(200, 5):
            got = sharded.add_and_candidates(fp, key, sk, K, BOUND)
            assert sorted(got) == sorted(memory.add_and_candidates(fp, key, sk, K, BOUND))


def test_a_server_list_shards_one_index(tmp_path_factory: pytest.TempPathFactory, redis_prefix: str) -> None:
    """servers= shards one index over plain servers (the URI's and the listed ones): each holds a part, and a
    page is found again through all of them; entries lists every page once; drop deletes every shard."""
    with RedisServer(tmp_path_factory.mktemp("a")) as a, RedisServer(tmp_path_factory.mktemp("b")) as b:
        uri = f"{a.url}?prefix={redis_prefix}&servers=127.0.0.1:{b.port}"
        batch = pages(400, 2)
        with open_sharded(uri) as sharded:
            for fp, key, sk in batch:
                sharded.add_and_candidates(fp, key, sk, K, BOUND)
            fp, key, sk = batch[0]
            assert [c.key for c in sharded.add_and_candidates(fp, key, sk, K, BOUND)][:1] == [key]
            assert len({e.key for e in sharded.entries()}) == len(sharded) == 400
            assert all(shard["records"] > 100 for shard in sharded.info()["shards"])
            sharded.drop()
        for server in (a, b):
            with server.client() as client:
                assert client.dbsize() == 0
        with pytest.raises(ValueError, match="shards=3, but 2 servers are given"):
            open_backend(f"{uri}&shards=3", k=K, design=DESIGN, metadata=META)


def test_a_page_s_sketch_is_kept_once_and_a_shard_waits_for_those_on_other_homes(
    redis_cluster: RedisCluster, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a page's home shard keeps its sketch (the others' records keep fingerprint, key hash and time); a
    shard whose verdict needs the sketch of a page it stored for another home stores nothing and is called again
    with it (found on that home): a flood of verifying near-duplicates (rule 2 at 2) gets the candidates, the
    count and the entries of one in-memory index."""
    uri = f"{redis_cluster.url}?cluster=1&shards=3&prefix={redis_prefix}"
    bound = CheckBound(4, 2, 0.75)
    memory = MemoryBackend(k=K, design=DESIGN, metadata=META)
    states = []
    shard_call = RedisBackend.add_and_candidates_in

    def spied(*args: Any, **kwargs: Any) -> tuple[list[Candidate], bool | None]:
        reply = shard_call(*args, **kwargs)
        states.append(reply[1])
        return reply

    monkeypatch.setattr(RedisBackend, "add_and_candidates_in", spied)
    rng = random.Random(5)
    centres = [(rng.getrandbits(64), rng.randbytes(64)) for _ in range(4)]
    with open_sharded(uri) as sharded:
        for i in range(200):
            fp, sk = centres[i % 4]
            fp ^= sum(1 << b for b in rng.sample(range(64), rng.randint(0, 6)))
            sk = bytes(b ^ 1 if j == i % 64 else b for j, b in enumerate(sk))
            got = sharded.add_and_candidates(fp, f"https://f.example/{i}", sk, K, bound)
            assert sorted(got) == sorted(memory.add_and_candidates(fp, f"https://f.example/{i}", sk, K, bound)), i
        assert None in states  # some shard waited for sketches
        assert len(sharded) == len(memory)
        entries = sorted((e.key, e.fingerprint, e.sketch) for e in sharded.entries())
        assert entries == sorted((e.key, e.fingerprint, e.sketch) for e in memory.entries())
        shards = [shard["prefix"] for shard in sharded.info()["shards"]]
    kept = []
    for prefix in shards:
        with open_backend(f"{redis_cluster.url}?cluster=1&prefix={prefix}", k=K, design=DESIGN) as one:
            kept += [(entry.key.startswith("\x00"), entry.sketch is None) for entry in one.entries()]
    assert all(hashed == no_sketch for hashed, no_sketch in kept) and any(hashed for hashed, _ in kept)


def test_a_sharded_index_of_an_earlier_version_is_refused_with_how_to_refill_it(
    tmp_path_factory: pytest.TempPathFactory, redis_prefix: str
) -> None:
    """A shard list written by an earlier version (a plain list, or the URL once and the sketch on every storing
    shard: ``"keys": "home"``) is refused with one line that says how to delete the index and refill it."""
    with RedisServer(tmp_path_factory.mktemp("a")) as a, RedisServer(tmp_path_factory.mktemp("b")) as b:
        for n in range(2):
            prefix = f"{redis_prefix}{n}"
            names = [f"{prefix}.s.0", f"{prefix}.s.1"]
            with a.client() as client:
                client.set(f"{{{prefix}}}:shards", json.dumps({"shards": names, "keys": "home"} if n else names))
            with pytest.raises(MetadataMismatchError) as refused:
                open_sharded(f"{a.url}?prefix={prefix}&servers=127.0.0.1:{b.port}")
            message = str(refused.value)
            assert "\n" not in message and "earlier version" in message and "refill" in message
            assert all(f"'{{{name}}}:*'" in message for name in [prefix, *names])


def _race(uri: str, worker: int, groups: int, start: float, out: multiprocessing.Queue, duplicates: int) -> None:
    """Check page *worker* of every group, all workers at once: the groups' pages race."""
    rng = random.Random(7)
    kept = []
    with open_sharded(uri) as index:
        while time.time() < start:
            time.sleep(0.001)
        for g in range(groups):
            centre, sketch = rng.getrandbits(64), rng.randbytes(64)
            bits = random.Random(g * 10 + worker).sample(range(64), 2)
            fp = centre ^ sum(1 << b for b in bits)
            bound = CheckBound(8, duplicates, 0.75)
            found = index.add_and_candidates(fp, f"https://w{worker}.example/{g}", sketch, K, bound)
            kept.append(not any(c.distance <= K for c in found))
    out.put((worker, kept))


@pytest.mark.parametrize("duplicates", [4, 2])
def test_four_processes_never_both_keep_near_duplicates(
    redis_cluster: RedisCluster, redis_prefix: str, duplicates: int
) -> None:
    """Four processes check the four near-duplicates of each of 300 pages at the same moment (each page's twins
    share blocks on different shards): no group has two pages kept, and most keep one; also with rule 2 at 2
    verified near-duplicates, where a shard waits for sketches kept on other shards."""
    uri = f"{redis_cluster.url}?cluster=1&shards=3&prefix={redis_prefix}"
    groups = 300
    open_sharded(uri).close()  # created once, before the race
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start = time.time() + 3
    workers = [ctx.Process(target=_race, args=(uri, w, groups, start, out, duplicates)) for w in range(4)]
    for p in workers:
        p.start()
    results = dict(out.get(timeout=120) for _ in workers)
    for p in workers:
        p.join(timeout=30)
    kept = [sum(results[w][g] for w in range(4)) for g in range(groups)]
    print(f"groups: {groups}, one page kept: {kept.count(1)}, none: {kept.count(0)}, more: {sum(k > 1 for k in kept)}")
    assert max(kept) == 1, f"groups with two pages kept: {sum(k > 1 for k in kept)}"
    assert sum(kept) >= 0.9 * groups, f"groups with no page kept: {kept.count(0)}"


#: A client that gives up on a frozen node after 1 s and tries again for longer than the node stays frozen.
PATIENT = "&socket_timeout=1.0&retries=6&retry_backoff=0.1"


@contextmanager
def two_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RedisServer, RedisServer]]:
    with RedisServer(tmp_path_factory.mktemp("a")) as a, RedisServer(tmp_path_factory.mktemp("b")) as b:
        yield a, b


@contextmanager
def frozen_for(server: RedisServer, seconds: float) -> Iterator[None]:
    """The server stopped (SIGSTOP) and resumed after *seconds* (and on exit anyway): calls sent meanwhile time out
    on the client and still run on the server when it wakes up."""
    assert server.process is not None
    pid = server.process.pid
    os.kill(pid, signal.SIGSTOP)
    resume = threading.Timer(seconds, os.kill, (pid, signal.SIGCONT))
    resume.start()
    try:
        yield
    finally:
        resume.cancel()
        os.kill(pid, signal.SIGCONT)


def second_shard_only(index: ShardedRedisBackend, n: int, seed: int) -> list[tuple[int, str, bytes]]:
    """*n* random pages whose every bucket belongs to the second shard (a check of one calls no other server)."""
    rng = random.Random(seed)
    out: list[tuple[int, str, bytes]] = []
    while len(out) < n:
        fp = rng.getrandbits(64)
        if [shard for shard, _ in index._groups(fp)] == [index._shards[1]]:
            out.append((fp, f"https://only-b.example/{len(out)}", rng.randbytes(64)))
    return out


def test_a_paused_first_node_delays_the_sharded_index_and_fails_nothing(
    tmp_path_factory: pytest.TempPathFactory, redis_prefix: str
) -> None:
    """The first server (which holds the shard list and, before, the page counter) frozen for 3 s: a check of a page
    that the second server stores, and len(), wait for it or need it not, and answer; the page is counted once.
    (The counter's INCR was never tried again: the check failed after the client's timeout, its page stored.)"""
    with two_servers(tmp_path_factory) as (a, b):
        uri = f"{a.url}?prefix={redis_prefix}&servers=127.0.0.1:{b.port}{PATIENT}"
        with open_sharded(uri) as index:
            batch = pages(20, 3)
            for fp, key, sk in batch:
                index.add_and_candidates(fp, key, sk, K, BOUND)
            (page,) = second_shard_only(index, 1, 4)
            with frozen_for(a, 3.0):
                index.add_and_candidates(*page, K, BOUND)
            with frozen_for(a, 3.0):
                assert len(index) == len(batch) + 1
            fp, key, sk = page
            assert [c.key for c in index.add_and_candidates(fp, key, sk, K, BOUND)][:1] == [key]
            assert len(index) == len(batch) + 1


def test_a_check_tried_again_after_its_first_attempt_ran_counts_its_page_once(
    tmp_path_factory: pytest.TempPathFactory, redis_prefix: str
) -> None:
    """A page of the second shard only, that shard frozen 2.5 s: the first attempt of its check times out on the
    client and runs when the node wakes up; the attempts after it find the page stored.  The page is counted
    once (the retry's "stored" answer and the count are the script's: len() was one short, the page uncounted)."""
    with two_servers(tmp_path_factory) as (a, b):
        uri = f"{a.url}?prefix={redis_prefix}&servers=127.0.0.1:{b.port}{PATIENT}"
        with open_sharded(uri) as index:
            batch = pages(20, 5)
            for fp, key, sk in batch:
                index.add_and_candidates(fp, key, sk, K, BOUND)
            (page, later) = second_shard_only(index, 2, 6)
            with frozen_for(b, 2.5):
                found = index.add_and_candidates(*page, K, BOUND)
            assert page[1] not in [c.key for c in found]
            assert len(index) == len(batch) + 1
            index.add_and_candidates(*later, K, BOUND)
            assert len(index) == len(batch) + 2
            assert sorted(e.key for e in index.entries() if "only-b" in e.key) == sorted([page[1], later[1]])


def shared_away_from_home(index: ShardedRedisBackend, seed: int) -> list[tuple[int, str, bytes]]:
    """Two near-duplicates A and B (the same sketch, a few bits apart) whose only shared blocks are on shards other
    than A's home: B meets A there only with A's hashed key, and finds its URL and sketch on A's home."""
    rng = random.Random(seed)
    sketch = rng.randbytes(64)
    while True:
        a = rng.getrandbits(64)
        b = a ^ sum(1 << bit for bit in rng.sample(range(64), 4))
        a_home = index._groups(a)[0][0]
        leads = zip(DESIGN.lead_values(a), DESIGN.lead_values(b), strict=True)
        shared = [t for t, (x, y) in enumerate(leads) if x == y]
        owners = {id(shard) for shard, tables in index._groups(a) for t in tables if t in shared}
        if shared and id(a_home) not in owners and id(index._groups(b)[0][0]) != id(a_home):
            return [(a, "https://a.example/page", sketch), (b, "https://b.example/page", sketch)]


def test_a_page_met_before_its_home_stored_it_still_meets_the_page_that_met_it(
    redis_cluster: RedisCluster, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interleaving that kept two near-duplicates (found by benchmarks/checks/sharded_race_model.py): A's call
    to a shard that is not its home stores A there (with its hashed key); B's check meets A there and asks A's home
    for A's URL and sketch before A's call to its home has run; then A's home stores A.  B cannot verify A (its
    sketch is nowhere yet), so its home keeps B's claim and A's home call answers it: A meets B, and the two are
    not both kept.  Hooks between the calls force the order."""
    uri = f"{redis_cluster.url}?cluster=1&shards=3&prefix={redis_prefix}"
    a_elsewhere, b_done = threading.Event(), threading.Event()
    shard_call = RedisBackend.add_and_candidates_in

    def hooked(shard: RedisBackend, *args: Any, **kwargs: Any) -> tuple[list[Candidate], bool | None]:
        key = args[2]
        if key == page_a[1] and kwargs.get("count"):  # A's home: after B's whole check
            assert b_done.wait(30)
        reply = shard_call(shard, *args, **kwargs)
        if key == sharded_module.hashed_key(page_a[1]):
            a_elsewhere.set()  # A stored away from its home
        return reply

    with open_sharded(uri) as a_index, open_sharded(uri) as b_index:
        page_a, page_b = shared_away_from_home(a_index, 3)
        monkeypatch.setattr(RedisBackend, "add_and_candidates_in", hooked)
        found: dict[str, list[Candidate]] = {}

        def check_a() -> None:
            found["a"] = a_index.add_and_candidates(*page_a, K, BOUND)

        thread = threading.Thread(target=check_a)
        thread.start()
        assert a_elsewhere.wait(30)
        found["b"] = b_index.add_and_candidates(*page_b, K, BOUND)
        b_done.set()
        thread.join(30)
    kept = [name for name in ("a", "b") if not found[name]]
    assert len(kept) == 1, f"kept: {kept}, candidates: {found}"
