"""The Redis backend (``simhash_filter.index.backends.redis``) against real ``redis-server`` processes: the URI,
the stored metadata, the data layout, batches, atomicity between processes, a server that stops, hangs
or restarts, expiry, a 3-node cluster, and two-stage detection (sketches in the records, atomic
add-and-candidates, an earlier layout refused).  (The query contract is in ``test_backends.py``.)"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import redis
from bounded_reference import BoundedReference

from devsites.redis_server import RedisCluster, RedisServer
from simhash_filter.index.backends import Candidate, MetadataMismatchError, open_backend
from simhash_filter.index.backends.memory import MemoryBackend
from simhash_filter.index.backends.redis import RedisBackend
from simhash_filter.index.backends.redis.layout import BATCH, CHUNK, ENTRY, ENTRY_LOW, RECORD
from simhash_filter.index.bound import DEFAULT_DUPLICATES, CheckBound
from simhash_filter.index.nearduplicate import NearDuplicateIndex
from simhash_filter.index.tables import Match, TableDesign

DESIGN = TableDesign.parse("4x16/k3")
#: An index of DESIGN, queried at k = 3, with a small sketch beside each fingerprint.
META = {"model": "m1", "sketch_bytes": 8}
S = bytes(8)
#: Two-stage detection: the design, metadata and candidate distance used in practice.
TWO_STAGE = TableDesign.parse("13+13+13+13+12/k4")
SKETCH = 64
TWO_STAGE_META = {"model": "m1", "sketch_bytes": SKETCH}
K2 = 10


def open_redis(url: str, prefix: str, options: str = "", **kwargs: object) -> RedisBackend:
    backend = open_backend(f"{url}?prefix={prefix}{options}", k=3, design=DESIGN, metadata=META, **kwargs)  # type: ignore[arg-type]
    assert isinstance(backend, RedisBackend)
    return backend


def open_two_stage(url: str, prefix: str, options: str = "") -> RedisBackend:
    backend = open_backend(f"{url}?prefix={prefix}{options}", k=K2, design=TWO_STAGE, metadata=TWO_STAGE_META)
    assert isinstance(backend, RedisBackend)
    return backend


def sketch(i: int) -> bytes:
    return np.random.default_rng(1000 + i).bytes(SKETCH)


def random_fps(n: int, seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**64, size=n, dtype=np.uint64)


def near(fps: np.ndarray, seed: int = 8, bits: int = 2) -> np.ndarray:
    """Each fingerprint with *bits* random bits flipped."""
    rng = np.random.default_rng(seed)
    out = fps.copy()
    for _ in range(bits):
        out ^= np.uint64(1) << rng.integers(0, 64, size=len(fps), dtype=np.uint64)
    return out


# -- URI and metadata ------------------------------------------------------------------------------


def test_uri_options(redis_server: RedisServer, redis_prefix: str) -> None:
    """The URI carries the prefix, the bucket width, timeouts and retries; unknown options are refused."""
    uri = f"{redis_server.url}?prefix={redis_prefix}&bucket_bits=12&socket_timeout=0.5&retries=0&client_name=crawler"
    with open_backend(uri, k=3, design=DESIGN, metadata=META) as backend:
        assert isinstance(backend, RedisBackend)
        assert backend.prefix == redis_prefix and backend.bucket_bits == 12
        assert backend.client.connection_pool.connection_kwargs["socket_timeout"] == 0.5
        assert backend.info()["location"] == redis_server.url.removesuffix("/0") + "/0"
        assert backend.client.client_getname() in ("crawler", b"crawler")
    for bad, message in [
        ("?colour=red", "unknown Redis backend option 'colour'"),
        ("?bucket_bits=wide", "bucket_bits must be an integer"),
        ("?bucket_bits=40", r"bucket_bits must be an int in \[1, 32\]"),
        ("?prefix=a{b}", "without braces"),
        ("?cluster=maybe", "cluster must be true or false"),
        ("?decode_responses=true", "unknown Redis backend option 'decode_responses'"),
    ]:
        with pytest.raises(ValueError, match=message):
            open_backend(redis_server.url + bad, k=3, design=DESIGN)
    with pytest.raises(ValueError, match="needs a host"):
        open_backend("redis://", k=3, design=DESIGN)


def test_password_and_database(tmp_path_factory: pytest.TempPathFactory, redis_prefix: str) -> None:
    """``redis://:password@host:port/db`` logs in and picks the database; a wrong password is a clear error."""
    with RedisServer(tmp_path_factory.mktemp("auth"), password="s3cret") as server:
        base = f"redis://:s3cret@127.0.0.1:{server.port}"
        with open_redis(f"{base}/2", redis_prefix) as in_db2:
            in_db2.add(1, "a", S)
            assert len(in_db2) == 1
            assert in_db2.client.connection_pool.connection_kwargs["db"] == 2
            assert "s3cret" not in json.dumps(in_db2.info())
        with open_redis(f"{base}/3", redis_prefix) as in_db3:
            assert len(in_db3) == 0
        with pytest.raises(redis.exceptions.AuthenticationError):
            open_redis(f"redis://:wrong@127.0.0.1:{server.port}/0", redis_prefix)


def test_metadata_is_stored_then_checked(redis_server: RedisServer, redis_prefix: str) -> None:
    """The first open stores the model, design and bucket width; later opens must agree, or get the way out."""
    with open_redis(redis_server.url, redis_prefix) as first:
        first.add(5, "a", S)
    with open_backend(f"{redis_server.url}?prefix={redis_prefix}", k=3, design=DESIGN) as adopted:
        assert adopted.metadata == META and len(adopted) == 1  # no metadata asked: whatever is stored
    with pytest.raises(MetadataMismatchError, match=r"model: stored 'm1' != requested 'm2'.*another prefix") as info:
        open_backend(f"{redis_server.url}?prefix={redis_prefix}", k=3, design=DESIGN, metadata={**META, "model": "m2"})
    assert "redis-cli --scan --pattern" in str(info.value)
    with pytest.raises(MetadataMismatchError, match=r"table design 4x16/k3, this index asks for 13\+13\+13\+13\+12/k3"):
        open_backend(f"{redis_server.url}?prefix={redis_prefix}", k=3, design=TableDesign.parse("5/k3"))
    with pytest.raises(MetadataMismatchError, match="uses bucket_bits=14, not 12"):
        open_redis(redis_server.url, redis_prefix, "&bucket_bits=12")
    with redis_server.client() as client:
        client.hset(f"{{{redis_prefix}}}:meta", "format", "something else")
    with pytest.raises(MetadataMismatchError, match="not a simhash-filter index of this version"):
        open_redis(redis_server.url, redis_prefix)


def test_prefixes_are_separate_indexes_and_drop_deletes_one(redis_server: RedisServer, redis_prefix: str) -> None:
    """Two prefixes on one server are two indexes; drop() deletes every key of one and nothing else."""
    with (
        open_redis(redis_server.url, redis_prefix + "-a") as a,
        open_redis(redis_server.url, redis_prefix + "-b") as b,
        redis_server.client() as client,
    ):
        a.add_many(random_fps(300), [f"a{i}" for i in range(300)], [S] * 300)
        assert b.add_and_candidates(int(random_fps(1)[0]), "b0", S, 3) == []  # a's fingerprints are not b's
        assert len(a) == 300 and len(b) == 1
        assert a.drop() > 300 and not list(client.scan_iter(match=f"{{{redis_prefix}-a}}:*"))
        assert len(b) == 1
        with pytest.raises(ValueError, match="closed"):
            a.add(1, "x", S)


def test_two_clients_share_one_index(redis_server: RedisServer, redis_prefix: str) -> None:
    """What one process adds, another sees at once (same server and prefix)."""
    with open_redis(redis_server.url, redis_prefix) as one, open_redis(redis_server.url, redis_prefix) as two:
        assert one.add_and_candidates(0xFFFF0000FFFF0000, "https://a.example/x", S, 3) == []
        assert two.add_and_candidates(0xFFFF0000FFFF0001, "https://b.example/x", S, 3) == [
            Candidate("https://a.example/x", 1, 0xFFFF0000FFFF0000, S)
        ]
        assert len(one) == len(two) == 2


# -- layout and batches ----------------------------------------------------------------------------


def fold32(fp: int) -> bytes:
    """The fold a bucket entry keeps: the fingerprint's two 32-bit halves XORed, big-endian."""
    return ((fp >> 32) ^ (fp & 0xFFFFFFFF)).to_bytes(4, "big")


def test_layout_is_compact(redis_server: RedisServer, redis_prefix: str) -> None:
    """12 bytes per fingerprint per table in the buckets (id, 32-bit fold, low half), a record of 16 bytes and the
    sketch, the key's bytes; one chunk per 4095."""
    n = CHUNK + 100
    keys = [f"https://example.com/{i}/é" for i in range(n)]
    fps = random_fps(n)
    with open_redis(redis_server.url, redis_prefix, "&bucket_bits=8") as backend, redis_server.client() as client:
        backend.add_many(fps, keys, [S] * n)
        sizes: Counter[str] = Counter()
        for key in client.scan_iter(match=f"{{{redis_prefix}}}:*", count=1000):
            kind = key.decode().split(":", 1)[1]
            kind = "bucket" if kind[0].isdigit() else kind
            sizes[kind] += 0 if kind == "meta" else client.strlen(key)
        entry, record = ENTRY + ENTRY_LOW, RECORD + len(S)
        assert entry == 12 and sizes["bucket"] == entry * DESIGN.n_tables * n
        first = backend._item_keys(int(fps[0]))[0]
        low = (int(fps[0]) & 0xFFFFFFFF).to_bytes(4, "big")
        assert client.getrange(first, 0, entry - 1) == (0).to_bytes(4, "big") + fold32(int(fps[0])) + low  # in order
        assert sizes["f0"] == record * CHUNK and sizes["f1"] == record * 100
        assert sizes["u0"] + sizes["u1"] == sum(len(k.encode()) for k in keys)
        assert client.memory_usage(f"{{{redis_prefix}}}:f0") <= record * CHUNK + 100  # trimmed to size when full
        assert client.hget(f"{{{redis_prefix}}}:meta", "n") == str(n).encode()
        entries = list(backend.entries())
        assert [e.key for e in entries] == keys and [e.fingerprint for e in entries] == random_fps(n).tolist()


def test_batches_match_the_memory_backend(redis_server: RedisServer, redis_prefix: str) -> None:
    """add_many over many script calls, then queries, give the memory backend's answers."""
    n = 10 * BATCH + 7
    base = random_fps(n)
    fps = np.concatenate([base, near(base), near(base, seed=9, bits=4)])
    order = np.random.default_rng(3).permutation(len(fps))
    fps = fps[order]
    keys = [f"u{i}" for i in range(len(fps))]
    memory = MemoryBackend(k=3, design=DESIGN, metadata=META)
    with open_redis(redis_server.url, redis_prefix, "&bucket_bits=6") as backend:
        backend.add_many(fps, keys, [S] * len(fps))
        memory.add_many(fps, keys, [S] * len(fps))
        assert len(backend) == len(memory)
        for q in near(fps, seed=11)[:: 5].tolist():
            assert backend.query(q, 3) == memory.query(q, 3)


def test_fold_filter_never_drops_a_match(redis_server: RedisServer, redis_prefix: str) -> None:
    """The 32-bit fold filter is exact: at any distance, a query finds every stored fingerprint within it that
    shares a table's lead with it, read from big buckets (4 per table), nearest first, then oldest."""
    rng = np.random.default_rng(21)
    bases = random_fps(30, seed=22).tolist()
    stored = random_fps(1500, seed=23).tolist()
    for base in bases:  # one variant at each distance 0 .. 16 (random bits)
        for d in range(17):
            stored.append(base ^ sum(1 << int(b) for b in rng.choice(64, size=d, replace=False)))
    order = rng.permutation(len(stored))
    stored = [stored[i] for i in order]
    keys = [f"k{i}" for i in range(len(stored))]
    with open_redis(redis_server.url, redis_prefix, "&bucket_bits=2") as backend:
        backend.add_many(np.array(stored, dtype=np.uint64), keys, [S] * len(keys))
        for qi, query in enumerate(bases):
            for k in (0, 1, 3, 5, 8, 10, 13, 16):
                expected = sorted(
                    ((fp ^ query).bit_count(), i)
                    for i, fp in enumerate(stored)
                    if (fp ^ query).bit_count() <= k and DESIGN.agree_on_a_lead(fp, query)
                )
                assert backend.query(query, k) == [Match(keys[i], d, stored[i]) for d, i in expected], (qi, k)


def test_probes_read_few_records(redis_server: RedisServer, redis_prefix: str) -> None:
    """A probe reads a record only for a hit (the entries hold the fingerprint's low half): none for random
    queries at k = 10."""
    n = 2000
    with (
        open_two_stage(redis_server.url, redis_prefix, "&bucket_bits=1") as staged,
        redis_server.client() as client,
    ):
        staged.add_many(random_fps(n), [f"k{i}" for i in range(n)], [sketch(i) for i in range(n)])
        queries = random_fps(20, seed=31).tolist()

        def records_read(probe: Callable[[int], object]) -> float:
            client.config_resetstat()
            for query in queries:
                probe(query)
            return client.info("commandstats").get("cmdstat_getrange", {}).get("calls", 0) / len(queries)

        assert records_read(lambda q: staged.query(q, K2)) == 0
        assert records_read(lambda q: staged.candidates(q, K2)) == 0
        assert records_read(lambda q: staged.add_and_candidates(q, f"new{q}", sketch(0), K2)) == 0


def test_any_unicode_key_round_trips(redis_server: RedisServer, redis_prefix: str) -> None:
    """Keys are any str: non-ASCII, empty, long, even lone surrogates."""
    keys = ["https://例子.测试/路径?q=值", "", "x" * 100_000, "bad \udcff surrogate"]
    with open_redis(redis_server.url, redis_prefix) as backend:
        backend.add_many(np.array([1, 2**20, 2**40, 2**60], dtype=np.uint64), keys, [S] * 4)
        assert [backend.query(fp, 0)[0].key for fp in (1, 2**20, 2**40, 2**60)] == keys


# -- failures --------------------------------------------------------------------------------------


def test_server_down_then_back(own_redis_server: RedisServer, redis_prefix: str) -> None:
    """A stopped server makes calls fail within the timeouts; once it is back (same data), calls work again."""
    with open_redis(own_redis_server.url, redis_prefix, "&socket_timeout=0.5&retries=1&retry_backoff=0.05") as backend:
        fps = random_fps(200)
        backend.add_many(fps, [f"k{i}" for i in range(200)], [S] * 200)
        own_redis_server.stop()
        start = time.monotonic()
        with pytest.raises(redis.exceptions.ConnectionError, match=f"Redis index '{redis_prefix}'.*tried 2 times"):
            backend.add_and_candidates(1, "x", S, 3)
        assert time.monotonic() - start < 15  # fails fast, never hangs (a bound far above any load)
        own_redis_server.start()  # the append-only file brings the index back; the script cache is empty
        assert backend.add_and_candidates(int(near(fps[:1])[0]), "y", S, 3) == [Candidate("k0", 2, int(fps[0]), S)]
        assert backend.add_and_candidates(1, "x", S, 3) == [] and len(backend) == 202


def test_server_restarted_without_its_data(
    own_redis_server: RedisServer, redis_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """If the index is gone (a restart without persistence), it starts again, empty, with a warning."""
    with open_redis(own_redis_server.url, redis_prefix) as backend:
        backend.add_many(random_fps(50), [f"k{i}" for i in range(50)], [S] * 50)
        own_redis_server.stop()
        shutil.rmtree(own_redis_server.directory / "appendonlydir")  # as if it had no persistence
        own_redis_server.start()
        with caplog.at_level(logging.WARNING, logger="simhash_filter.index.backends.redis"):
            assert backend.add_and_candidates(int(random_fps(1)[0]), "again", S, 3) == []
        assert "is gone" in caplog.text and "starting it again, empty" in caplog.text
        assert len(backend) == 1 and backend.metadata == META


def test_keys_lost_without_metadata_are_refused(redis_server: RedisServer, redis_prefix: str) -> None:
    """An index whose meta hash vanished but whose data did not (evicted keys) is refused, not reused."""
    with open_redis(redis_server.url, redis_prefix) as backend, redis_server.client() as client:
        backend.add_many(random_fps(10), [str(i) for i in range(10)], [S] * 10)
        client.delete(f"{{{redis_prefix}}}:meta")
        with pytest.raises(MetadataMismatchError, match=r"has data but no metadata.*noeviction"):
            backend.add(1, "x", S)


def test_script_cache_flushed(redis_server: RedisServer, redis_prefix: str) -> None:
    """A server that lost the script (SCRIPT FLUSH, a failover) gets it again, batches included."""
    with open_redis(redis_server.url, redis_prefix) as backend, redis_server.client() as client:
        backend.add(3, "a", S)
        client.script_flush()
        assert backend.query(3, 0) == [Match("a", 0, 3)]
        client.script_flush()
        fps = random_fps(3 * BATCH)
        backend.add_many(fps, [str(i) for i in range(len(fps))], [S] * len(fps))
        assert len(backend) == 1 + len(fps)


# -- expiry ----------------------------------------------------------------------------------------


def test_max_age_hides_old_fingerprints(redis_server: RedisServer, redis_prefix: str) -> None:
    """With max_age, fingerprints stored longer ago are neither returned nor counted; a recrawl keeps them again."""
    fps = random_fps(20)
    with open_redis(redis_server.url, redis_prefix, "&max_age=3600") as backend, redis_server.client() as client:
        backend.add_many(fps, [f"k{i}" for i in range(20)], [S] * 20)
        two_hours_ago = int(time.time()) - 7200
        for i in range(5):  # make the first five two hours old
            client.setrange(f"{{{redis_prefix}}}:f0", i * (RECORD + len(S)) + 12, two_hours_ago.to_bytes(4, "big"))
        assert len(backend) == 15
        assert backend.query(int(fps[0]), 0) == []
        assert backend.add_and_candidates(int(fps[0]), "k0-again", S, 3) == []
        assert backend.add_and_candidates(int(fps[5]), "k5-again", S, 3) == [Candidate("k5", 0, int(fps[5]), S)]
        assert [e.key for e in backend.entries()][:2] == ["k5", "k6"]
    with open_redis(redis_server.url, redis_prefix) as forever:
        assert len(forever) == 22


# -- cluster ---------------------------------------------------------------------------------------


def test_cluster_keeps_one_index_in_one_slot(redis_cluster: RedisCluster, redis_prefix: str) -> None:
    """In a cluster every key of an index hashes to one slot (so its script is legal); indexes spread."""
    prefixes = [f"{redis_prefix}-{i}" for i in range(6)]
    for prefix in prefixes:
        with open_redis(redis_cluster.url, prefix, "&cluster=1") as backend:
            backend.add_many(random_fps(CHUNK + 10), [f"k{i}" for i in range(CHUNK + 10)], [S] * (CHUNK + 10))
            assert len(backend) == CHUNK + 10
    nodes_used = set()
    for prefix in prefixes:
        slots = set()
        for i, node in enumerate(redis_cluster.nodes):
            with node.client() as client:
                keys = list(client.scan_iter(match=f"{{{prefix}}}:*", count=1000))
                slots.update(client.execute_command("CLUSTER", "KEYSLOT", key) for key in keys[:50])
            if keys:
                nodes_used.add(i)
        assert len(slots) == 1
    assert len(nodes_used) >= 2


# -- two-stage detection ---------------------------------------------------------------------------


def test_two_stage_records_carry_the_sketch(redis_server: RedisServer, redis_prefix: str) -> None:
    """A two-stage index's record is 16 + 64 bytes, sketch last, and its bucket entries hold the fingerprint's low
    half after the fold (12 bytes); entries, probes and max_age work on it."""
    n = CHUNK + 10
    fps = random_fps(n)
    keys = [f"https://example.com/{i}" for i in range(n)]
    sketches = [sketch(i) for i in range(n)]
    f0, f1 = f"{{{redis_prefix}}}:f0", f"{{{redis_prefix}}}:f1"
    with open_two_stage(redis_server.url, redis_prefix, "&max_age=3600") as backend, redis_server.client() as client:
        backend.add_many(fps, keys, sketches)
        width = RECORD + SKETCH
        assert client.strlen(f0) == width * CHUNK and client.strlen(f1) == width * 10
        assert client.memory_usage(f0) <= width * CHUNK + 200  # trimmed to size when full
        assert client.getrange(f0, 5 * width + RECORD, 6 * width - 1) == sketches[5]
        assert client.hget(f"{{{redis_prefix}}}:meta", "format") == b"simhash-filter redis 3"
        bucket_bytes = sum(
            client.strlen(key) for key in client.scan_iter(match=f"{{{redis_prefix}}}:[0-9]*", count=1000)
        )
        assert bucket_bytes == (ENTRY + ENTRY_LOW) * TWO_STAGE.n_tables * n
        first = backend._item_keys(int(fps[0]))[0]
        entry = (0).to_bytes(4, "big") + fold32(int(fps[0])) + (int(fps[0]) & 0xFFFFFFFF).to_bytes(4, "big")
        assert client.getrange(first, 0, ENTRY + ENTRY_LOW - 1) == entry
        stored = [(e.fingerprint, e.key, e.sketch) for e in backend.entries()]
        assert stored == list(zip(fps.tolist(), keys, sketches, strict=True))
        assert backend.candidates(int(fps[5]), K2) == [Candidate(keys[5], 0, int(fps[5]), sketches[5])]
        two_hours_ago = int(time.time()) - 7200
        for i in range(5):  # make the first five two hours old
            client.setrange(f0, i * width + 12, two_hours_ago.to_bytes(4, "big"))
        assert len(backend) == n - 5
        assert backend.candidates(int(fps[0]), K2) == []
        assert backend.add_and_candidates(int(fps[0]), keys[0], sketches[0], K2) == []  # hidden: stored again
        assert backend.add_and_candidates(int(fps[5]), keys[5], sketches[5], K2) == [
            Candidate(keys[5], 0, int(fps[5]), sketches[5])
        ]
        assert len(backend) == n - 4
    with open_backend(f"{redis_server.url}?prefix={redis_prefix}", k=4, design=TWO_STAGE) as adopted:
        assert adopted.sketch_bytes == SKETCH  # no metadata asked: the stored sketch size, and so the record size
        assert adopted.candidates(int(fps[7]), K2) == [Candidate(keys[7], 0, int(fps[7]), sketches[7])]


def test_an_index_of_an_earlier_layout_is_refused_with_how_to_refill_it(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    """An index whose meta names an earlier layout is refused, whatever is asked, with one line that says how to
    delete it and refill it, and left as it is."""
    meta = f"{{{redis_prefix}}}:meta"
    with redis_server.client() as client:
        client.hset(meta, mapping={"format": "simhash-filter redis 2", "design": TWO_STAGE.name, "bucket_bits": "14",
                                   "metadata": json.dumps(TWO_STAGE_META), "created": "0", "n": "1"})  # fmt: skip
        client.set(f"{{{redis_prefix}}}:u0", b"a")
        for opening in (
            lambda: open_two_stage(redis_server.url, redis_prefix),
            lambda: open_backend(f"{redis_server.url}?prefix={redis_prefix}", k=4, design=TWO_STAGE),
        ):
            with pytest.raises(MetadataMismatchError, match="written by an earlier version") as info:
                opening()
            message = str(info.value)
            assert "\n" not in message and "refill" in message
            assert f"redis-cli --scan --pattern '{{{redis_prefix}}}:*'" in message
        assert client.hget(meta, "format") == b"simhash-filter redis 2" and client.get(f"{{{redis_prefix}}}:u0") == b"a"


_HAMMER_TWO_STAGE = """
import json, sys
import numpy as np
from simhash_filter.index.backends import open_backend
from simhash_filter.index.tables import TableDesign

uri, worker, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
centres = np.random.default_rng(42).integers(0, 2**64, size=count, dtype=np.uint64)
fps = centres ^ np.uint64(1 << (worker * 9 + 1))  # one bit per worker: any two variants are 2 bits apart
design = TableDesign.parse("13+13+13+13+12/k4")
backend = open_backend(uri, k=10, design=design, metadata={"model": "m1", "sketch_bytes": 64})
print("ready", flush=True)
sys.stdin.readline()
seen = []
for i, fp in enumerate(fps.tolist()):
    found = backend.add_and_candidates(fp, f"{i}/{worker}", bytes([worker]) * 64, 10)
    assert all(c.sketch == bytes([int(c.key.split("/")[1])]) * 64 and c.distance == 2 for c in found), found
    seen.append([c.key for c in found])
print(json.dumps(seen))
"""


def test_processes_racing_add_and_candidates_see_exactly_the_pages_before(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    """Four processes add near-identical pages at once: each is stored once and sees exactly those stored before."""
    count, workers = 300, 4
    uri = f"{redis_server.url}?prefix={redis_prefix}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _HAMMER_TWO_STAGE, uri, str(w), str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:  # go (as close together as the pipes allow)
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    seen = []
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        seen.append(json.loads(out))
    with open_two_stage(redis_server.url, redis_prefix) as backend:
        order = {entry.key: position for position, entry in enumerate(backend.entries())}
        assert len(order) == len(backend) == count * workers  # every page stored, once
    firsts = 0
    for w in range(workers):
        for i, keys in enumerate(seen[w]):
            group = [f"{i}/{v}" for v in range(workers)]
            before = sorted((key for key in group if order[key] < order[f"{i}/{w}"]), key=order.__getitem__)
            assert keys == before, (f"{i}/{w}", keys, before)  # all at distance 2: oldest first
            firsts += not keys
    assert firsts == count  # one page of each group saw none


def test_two_stage_hung_server_times_out_and_a_retry_stores_the_page_once(
    own_redis_server: RedisServer, redis_prefix: str
) -> None:
    """A frozen server (SIGSTOP) makes add_and_candidates time out; tried again, the page is stored once and
    the answer is the pages stored before it, not the page itself."""
    assert own_redis_server.process is not None
    pid = own_redis_server.process.pid
    fp = 0xABCDEF0123456789
    url, patience = own_redis_server.url, "&socket_timeout=0.3&retries=3&retry_backoff=0.2"
    with (
        open_two_stage(url, redis_prefix, "&socket_timeout=0.3&retries=0") as quick,
        open_two_stage(url, redis_prefix, patience) as patient,
    ):
        assert patient.add_and_candidates(fp ^ 0b11, "before", sketch(1), K2) == []
        os.kill(pid, signal.SIGSTOP)
        try:
            start = time.monotonic()
            with pytest.raises(redis.exceptions.TimeoutError):
                quick.add_and_candidates(1 << 40, "frozen", sketch(2), K2)
            assert time.monotonic() - start < 10  # timed out: frozen, it would wait until resumed
            resume = threading.Timer(0.5, os.kill, (pid, signal.SIGCONT))
            resume.start()
            found = patient.add_and_candidates(fp, "retried", sketch(3), K2)
            resume.join()
        finally:
            os.kill(pid, signal.SIGCONT)
        assert found == [Candidate("before", 2, fp ^ 0b11, sketch(1))]
        assert patient.candidates(fp, K2) == [
            Candidate("retried", 0, fp, sketch(3)),
            Candidate("before", 2, fp ^ 0b11, sketch(1)),
        ]
        assert len(patient) in (2, 3)  # "frozen" is stored if its timed-out call ran when the server woke up


def test_two_stage_retry_after_a_lost_reply_answers_as_the_first_attempt(
    redis_server: RedisServer, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call whose script ran but whose reply was lost is tried again: stored once, the first attempt's answer."""
    fp = 0x0F0F0F0F0F0F0F0F
    with (
        open_two_stage(redis_server.url, redis_prefix, "&retry_backoff=0") as backend,
        open_two_stage(redis_server.url, redis_prefix) as other,
    ):
        backend.add_and_candidates(fp ^ 0b11, "before", sketch(1), K2)
        send = backend._send
        lost: list[object] = []

        def send_then_lose_the_reply(header: list, calls: list) -> list:
            replies = send(header, calls)
            if not lost:
                lost.append(replies)
                other.add_and_candidates(fp ^ 0b1100, "meanwhile", sketch(3), K2)  # stored between the attempts
                raise redis.exceptions.TimeoutError("the reply was lost")
            return replies

        monkeypatch.setattr(backend, "_send", send_then_lose_the_reply)
        assert backend.add_and_candidates(fp, "page", sketch(2), K2) == [Candidate("before", 2, fp ^ 0b11, sketch(1))]
        assert lost and len(backend) == 3
        assert [c.key for c in backend.candidates(fp, K2)] == ["page", "before", "meanwhile"]
        assert backend.add_and_candidates(fp, "page", sketch(2), K2)[0] == Candidate("page", 0, fp, sketch(2))
        assert len(backend) == 3  # seen again (not a retry): itself among the candidates, not stored twice


# -- the bound on the work of a check (simhash_filter/index/bound.py) --------------------------------------------


def test_bounded_check_stores_a_page_only_in_the_tables_that_take_it(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    """A table whose block holds `duplicates` verified near-duplicates of a page gets no bucket entry for it, and a
    page every table refuses gets no record and no id; the layout and its format stay those of layout 3."""
    bound = CheckBound(per_table=2, duplicates=2, min_similarity=0.75)
    fp = 0x0123456789ABCDEF
    moved = fp ^ (1 << 51)  # a bit of table 0's lead only (13+13+13+13+12/k4: each table leads with one block)
    width = ENTRY + ENTRY_LOW
    with open_two_stage(redis_server.url, redis_prefix) as backend, redis_server.client() as client:
        assert backend.add_and_candidates(fp, "a", sketch(1), K2, bound) == []
        assert backend.add_and_candidates(fp, "b", sketch(1), K2, bound) == [Candidate("a", 0, fp, sketch(1))]
        both = [Candidate("a", 0, fp, sketch(1)), Candidate("b", 0, fp, sketch(1))]
        assert backend.add_and_candidates(fp, "c", sketch(1), K2, bound) == both  # every table refuses: no record
        assert len(backend) == 2 and client.strlen(f"{{{redis_prefix}}}:f0") == 2 * (RECORD + SKETCH)
        assert backend.add_and_candidates(moved, "d", sketch(1), K2, bound) == [
            Candidate("a", 1, fp, sketch(1)),
            Candidate("b", 1, fp, sketch(1)),
        ]  # from tables 1-4, which refuse it; table 0 (another block) takes it
        assert len(backend) == 3 and [e.key for e in backend.entries()] == ["a", "b", "d"]
        sizes = [client.strlen(key) for key in backend._item_keys(moved)]
        assert sizes == [width, 2 * width, 2 * width, 2 * width, 2 * width]
        assert client.getrange(backend._item_keys(moved)[0], 0, 3) == (2).to_bytes(4, "big")
        assert client.hget(f"{{{redis_prefix}}}:meta", "format") == b"simhash-filter redis 3"
        assert backend.candidates(fp, K2, bound) == both  # d is in no block of fp's
        assert backend.candidates(moved, K2, bound) == [
            Candidate("d", 0, moved, sketch(1)),
            Candidate("a", 1, fp, sketch(1)),
            Candidate("b", 1, fp, sketch(1)),
        ]


@pytest.mark.parametrize("sketch_bytes", [12, 64])
def test_bounded_check_verifies_at_the_threshold_bit(
    redis_server: RedisServer, redis_prefix: str, sketch_bytes: int
) -> None:
    """A candidate verifies when its sketch differs in at most ``bound.differing_bits`` bits (the similarity
    threshold as an integer, the bytes after the last whole 8 included): the script's candidates and storage are
    the brute-force reference's, for sketches on both sides of the threshold."""
    bound = CheckBound(per_table=3, duplicates=2, min_similarity=0.75)
    limit = bound.differing_bits(sketch_bytes)
    reference = BoundedReference(TWO_STAGE, K2, bound)
    rng = random.Random(sketch_bytes)
    base, base_sketch = rng.getrandbits(64), rng.getrandbits(8 * sketch_bytes)
    uri = f"{redis_server.url}?prefix={redis_prefix}"
    with open_backend(uri, k=K2, design=TWO_STAGE, metadata={"model": "m1", "sketch_bytes": sketch_bytes}) as backend:
        for i in range(160):
            fp = base
            for b in rng.sample(range(64), rng.randint(0, 4)):
                fp ^= 1 << b
            flipped = base_sketch if i % 3 == 0 else base_sketch ^ (1 << (8 * sketch_bytes - 1))
            for b in rng.sample(range(8 * sketch_bytes), rng.choice([0, limit - 1, limit, limit + 1]) if i % 3 else 0):
                flipped ^= 1 << b
            page_sketch = flipped.to_bytes(sketch_bytes, "little")
            assert backend.add_and_candidates(fp, f"p{i}", page_sketch, K2, bound) == reference.add(
                fp, f"p{i}", page_sketch
            ), i
        assert len(backend) == len(reference) < 160


def flood(n: int, seed: int = 17) -> tuple[list[int], list[bytes]]:
    """*n* near-identical pages (a crawler trap): fingerprints 0-3 bits from one, sketches 0-8 bits from one."""
    rng = random.Random(seed)
    base, base_sketch = rng.getrandbits(64), rng.getrandbits(8 * SKETCH)
    fps, sketches = [], []
    for _ in range(n):
        fps.append(base ^ sum(1 << b for b in rng.sample(range(64), rng.randint(0, 3))))
        flipped = base_sketch ^ sum(1 << b for b in rng.sample(range(8 * SKETCH), rng.randint(0, 8)))
        sketches.append(flipped.to_bytes(SKETCH, "little"))
    return fps, sketches


@pytest.mark.flood
@pytest.mark.slow
def test_flood_of_near_duplicates_keeps_every_check_small(tmp_path: Path) -> None:
    """20,000 near-identical pages through check_and_add: each after the first few is a near-duplicate, every block
    holds at most `duplicates` pages (so a check reads a bounded number of entries, however many pages came: the
    server time that gives is measured by benchmarks/speed/bench_flood.py, not here) and few are stored."""
    n = 20_000
    fps, sketches = flood(n)
    with RedisServer(tmp_path / "redis") as server, server.client() as client:
        index = NearDuplicateIndex(
            K2, design=TWO_STAGE, backend=f"{server.url}?prefix=trap", metadata=TWO_STAGE_META, min_similarity=0.75
        )
        found = 0
        for i, (fp, page_sketch) in enumerate(zip(fps, sketches, strict=True)):
            found += index.check_and_add(fp, f"https://trap.example/calendar?day={i}", page_sketch) is not None
        buckets = [client.strlen(key) for key in client.scan_iter(match="{trap}:[0-9]*", count=1000)]
        stored = len(index)
        index.close()
    assert found >= n - 20
    assert max(buckets) <= DEFAULT_DUPLICATES * (ENTRY + ENTRY_LOW)  # one block per bucket here: 13 bits of lead
    assert stored < n // 10 and index.candidates_max <= DEFAULT_DUPLICATES * TWO_STAGE.n_tables


def test_the_script_refuses_pages_past_the_designs_limit(redis_server: RedisServer, redis_prefix: str) -> None:
    """A two-stage Redis index takes at most twice what its design is built for: the script refuses the page that
    would go past it, atomically (nothing of the batch stored), with the ways out."""
    from simhash_filter.index.backends import IndexFullError
    from simhash_filter.index.tables import page_limit

    design = TableDesign.parse("60+1+1+1+1/k4")  # 1-bit leads: takes 4,096 pages
    limit = page_limit(design)
    rng = np.random.default_rng(5)
    fps = rng.integers(0, 2**64, size=limit + 1, dtype=np.uint64)
    sketches = [bytes(rng.integers(0, 256, size=64, dtype=np.uint8)) for _ in range(limit + 1)]
    uri = f"{redis_server.url}?prefix={redis_prefix}"
    with open_backend(uri, k=K2, design=design, metadata=TWO_STAGE_META) as backend:
        index = NearDuplicateIndex(K2, backend=backend, min_similarity=0.75)
        backend.add_many(fps[:limit], [f"u{i}" for i in range(limit)], sketches[:limit])
        assert len(backend) == limit
        with pytest.raises(IndexFullError, match=r"holds 4,096 pages, twice the 2,048 its tables") as info:
            index.check_and_add(int(fps[limit]), "late", sketches[limit])
        assert redis_prefix in str(info.value) and "index rebuild" in str(info.value)
        assert len(backend) == limit
