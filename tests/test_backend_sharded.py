"""One two-stage index sharded over a real 3-node Redis Cluster (``shards=3``) and over a list of Redis servers
(``servers=``): the same candidates as one index, the memory spread over the nodes, and no two near-duplicates
kept when four processes race on them."""

from __future__ import annotations

import multiprocessing
import random
import time

import pytest
from redis_server import RedisCluster, RedisServer

from simhash_filter.index.backends import MetadataMismatchError, open_backend
from simhash_filter.index.backends.memory import MemoryBackend
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
    with open_sharded(uri) as again:  # the shard list is kept: another process finds the same shards
        assert len(again) == 1200 and again.info()["shards"] == info["shards"]
    with pytest.raises(MetadataMismatchError, match="has 3 shards, not 4: open it with shards=3"):
        open_sharded(f"{redis_cluster.url}?cluster=1&shards=4&prefix={redis_prefix}")


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


def _race(uri: str, worker: int, groups: int, start: float, out: multiprocessing.Queue) -> None:
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
            found = index.add_and_candidates(fp, f"https://w{worker}.example/{g}", sketch, K, BOUND)
            kept.append(not any(c.distance <= K for c in found))
    out.put((worker, kept))


def test_four_processes_never_both_keep_near_duplicates(redis_cluster: RedisCluster, redis_prefix: str) -> None:
    """Four processes check the four near-duplicates of each of 300 pages at the same moment (each page's twins
    share blocks on different shards): no group has two pages kept, and most keep one."""
    uri = f"{redis_cluster.url}?cluster=1&shards=3&prefix={redis_prefix}"
    groups = 300
    open_sharded(uri).close()  # created once, before the race
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start = time.time() + 3
    workers = [ctx.Process(target=_race, args=(uri, w, groups, start, out)) for w in range(4)]
    for p in workers:
        p.start()
    results = dict(out.get(timeout=120) for _ in workers)
    for p in workers:
        p.join(timeout=30)
    kept = [sum(results[w][g] for w in range(4)) for g in range(groups)]
    print(f"groups: {groups}, one page kept: {kept.count(1)}, none: {kept.count(0)}, more: {sum(k > 1 for k in kept)}")
    assert max(kept) == 1, f"groups with two pages kept: {sum(k > 1 for k in kept)}"
    assert sum(kept) >= 0.9 * groups, f"groups with no page kept: {kept.count(0)}"
