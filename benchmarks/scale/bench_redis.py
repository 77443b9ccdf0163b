"""The Redis backend (issue 5): memory per fingerprint, check-and-add latency and throughput at a million
stored fingerprints, its CPU cost beside the in-memory backend's, and the crawl rate of two crawler
processes sharing one Redis beside one process's.

A ``redis-server`` (Debian's package; ``devsites/redis_server.py`` starts it on a free port of 127.0.0.1,
persistence off) is filled with ``--size`` random fingerprints with URL-like keys (``add_many``).

1. **Memory.**  ``used_memory`` of ``INFO memory`` after the fill minus before, per fingerprint, with the
   keys (URLs) and without them (their bytes subtracted).  Target: at most 100 bytes per fingerprint.
2. **Latency.**  ``--checks`` add-and-candidates of one page each (k = 10, a sketch of zeros;
   ``time.perf_counter`` around each call) from one process: 80 % new random fingerprints (added), 20 %
   near-duplicates (1-3 bits flipped) of stored ones.  p50 and p99 (target p99 at most 2 ms on loopback at 1M),
   calls/s; the server's time per call (``INFO commandstats``, evalsha ``usec_per_call``); the client's CPU time
   per call (``time.process_time``) beside the in-memory backend's for the same calls on the same million, and
   the same with the fingerprinting of a page added (the filter's CPU time per page: a generated article page of
   ``devsites/sample.py``, fingerprinted in this process).
3. **Two processes.**  Two processes doing the same at the same time against the same index: p50, p99,
   and the calls/s of both together.  Then one process sending batches (``add_many``, pipelined) for
   reference.
4. **Crawl rate.**  The demo site (``devsites.demosite.build_site``: ``--articles`` generated articles with their
   copies, on 127.0.0.1 and 127.0.0.2) crawled with ``scrapy crawl site`` and the Redis backend, by one
   process, then by two processes sharing scrapy-redis's scheduler and dupefilter (the second started
   once the first has queued work).  Pages/s = responses received by all processes / (last
   ``finish_time`` - first ``start_time``).

5. **Two-stage detection.**  A second index (design 13+13+13+13+12/k4, 64-byte sketches, as the crawl's
   two-stage detection uses) filled with the same ``--size`` fingerprints and keys and random sketches:
   memory per page as in 1, and by kind of key (``MEMORY USAGE`` of every key: buckets, records, URLs).
   Then ``--checks`` add-and-candidates at k = 10 (the same mix of new pages and near-duplicates, with
   random sketches), then as many candidates (read only): p50 and p99 of the client's time and of the
   server's time per call (``SLOWLOG`` with every call logged: the time the script blocked Redis), the
   server's mean (``INFO commandstats``) and the candidates returned per call.

6. **A flood.**  ``--flood`` near-identical pages (a crawler trap: fingerprints 0-3 bits from one, sketches
   0-8 bits from one) through add-and-candidates at k = 10 with the default bound
   (:mod:`simhash_filter.index.bound`) into a third index (prefix ``flood``): the server's time of every call
   (``SLOWLOG``, read every 1,000 calls): p50, p99 and max over all of them, and the median of the first and
   of the last 1,000; the pages stored, the largest bucket and the candidates per call.

In parts 2, 5 and 6 the server's time per call comes from ``SLOWLOG`` (p50, p99, max) and ``INFO commandstats``
(mean).  Redis 7 logs the commands a script runs beside the script, so ``SLOWLOG`` is given room for
:data:`SLOWLOG_PER_CALL` entries per call, and its logging is part of the time measured.  Every figure is the
median of ``--repeat`` runs (the fill is done once).  Output: a table on stdout; ``--json PATH`` writes the
numbers.  ``--only shared`` runs parts 1-4, ``--only two-stage`` part 5, ``--only flood`` part 6 (the
others run parts 1-5).

    python -m benchmarks.scale.bench_redis [--size 1000000] [--checks 5000] [--repeat 3] [--articles 150] [--json PATH]
    python -m benchmarks.scale.bench_redis --size 100000 --checks 1000 --repeat 1 --articles 40   # a quick run
    python -m benchmarks.scale.bench_redis --only two-stage --checks 5000 --repeat 3   # two-stage detection at 1M
    python -m benchmarks.scale.bench_redis --only flood --flood 100000   # a crawler trap of 100,000 pages
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from benchmarks.benchlib import ROOT
from benchmarks.benchlib.crawl import crawl_site
from benchmarks.benchlib.data import BATCH, random_fingerprints
from benchmarks.benchlib.measure import median_of, percentile
from benchmarks.benchlib.report import make_parser, write_json
from devsites.redis_server import RedisServer
from simhash_filter.index.backends import open_backend
from simhash_filter.index.backends.memory import MemoryBackend
from simhash_filter.index.tables import TableDesign, tables_for

#: The crawl's index: its design (the one built for ``--expected-pages``, ``SIMHASH_EXPECTED_PAGES``), candidate
#: distance and sketch size.
TWO_STAGE = TableDesign.parse(tables_for(1_000_000))
K2 = 10
SKETCH = 64
META2 = {"model": "bench", "sketch_bytes": SKETCH}
#: Parts 1-3 check pages with a sketch of zeros (the candidates and the bound's verdicts do not change the work).
ZERO = bytes(SKETCH)

# A worker process of part 3: opens the index, waits for "go" on stdin, checks-and-adds, prints JSON.
WORKER = """
import json, sys, time
import numpy as np
from benchmarks.scale.bench_redis import K2, META2, TWO_STAGE, ZERO, queries
from simhash_filter.index.backends import open_backend
uri, checks, seed, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
backend = open_backend(uri, k=K2, design=TWO_STAGE, metadata=META2)
fps = queries(checks, seed, size).tolist()
backend.add_and_candidates(1, "warm-up", ZERO, K2)
print("ready", flush=True)
sys.stdin.readline()
lat = []
start = time.perf_counter()
for i, fp in enumerate(fps):
    t = time.perf_counter()
    backend.add_and_candidates(fp, f"https://w{seed}.example/{i}", ZERO, K2)
    lat.append(time.perf_counter() - t)
print(json.dumps({"elapsed": time.perf_counter() - start, "latencies": lat}))
"""


def stored(size: int) -> np.ndarray:
    """The fingerprints filled in (seeded)."""
    return random_fingerprints(size, seed=1)


def stored_keys(size: int) -> list[str]:
    """URL-like keys: about 46 bytes."""
    return [f"https://www.site{i % 997}.example/news/2026/{i:07d}.html" for i in range(size)]


def stored_sketches(size: int) -> list[bytes]:
    """Random sketches of the pages filled in (seeded)."""
    raw = np.random.default_rng(2).bytes(SKETCH * size)
    return [raw[SKETCH * i : SKETCH * (i + 1)] for i in range(size)]


def queries(n: int, seed: int, size: int) -> np.ndarray:
    """80 % new random fingerprints, 20 % stored ones with 1-3 bits flipped, shuffled."""
    rng = np.random.default_rng(1000 + seed)
    new = rng.integers(0, 2**64, size=n - n // 5, dtype=np.uint64)
    near = stored(size)[rng.integers(0, size, size=n // 5)]
    for _ in range(3):
        flip = rng.random(len(near)) < 0.8
        near ^= (np.uint64(1) << rng.integers(0, 64, size=len(near), dtype=np.uint64)) * flip.astype(np.uint64)
    out = np.concatenate([new, near])
    rng.shuffle(out)
    return out


def server_cpu(server: RedisServer) -> float:
    with server.client() as client:
        cpu = client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def evalsha_usec(server: RedisServer) -> float:
    with server.client() as client:
        stats = client.info("commandstats").get("cmdstat_evalsha", {})
    return float(stats.get("usec_per_call", 0.0))


#: Room in ``SLOWLOG`` per script call: Redis 7 logs the commands a script runs as well as the script.
SLOWLOG_PER_CALL = 64


class SlowLog:
    """Every script call's server time, from ``SLOWLOG`` (every command logged while inside the ``with``; the
    ``EVALSHA`` entries kept)."""

    def __init__(self, server: RedisServer, calls: int) -> None:
        self.server, self.room = server, SLOWLOG_PER_CALL * calls + 100
        self.durations: list[int] = []

    def __enter__(self) -> SlowLog:
        with self.server.client() as client:
            client.config_set("slowlog-max-len", self.room)
            client.config_set("slowlog-log-slower-than", 0)
            client.slowlog_reset()
        return self

    def __exit__(self, *exc: object) -> None:
        with self.server.client() as client:
            client.config_set("slowlog-log-slower-than", 10_000)  # the defaults
            entries = client.slowlog_get(self.room)
            client.config_set("slowlog-max-len", 128)
            client.slowlog_reset()
        self.durations = [e["duration"] for e in reversed(entries) if e["command"][:7].lower() == b"evalsha"]

    def summary(self) -> dict[str, float]:
        return {
            "server_p50_us": percentile(self.durations, 0.5),
            "server_p99_us": percentile(self.durations, 0.99),
            "server_max_us": float(max(self.durations, default=0)),
        }


def memory_by_kind(server: RedisServer, prefix: str, size: int) -> dict[str, float]:
    """``MEMORY USAGE`` of every key of the index, summed by kind (buckets, records, URLs), per page."""
    out: dict[str, float] = {"buckets": 0, "records": 0, "urls": 0, "meta": 0}
    with server.client() as client:
        keys = list(client.scan_iter(match=f"{{{prefix}}}:*", count=10_000))
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.memory_usage(key, samples=0)
        for key, used in zip(keys, pipe.execute(), strict=True):
            kind = key.decode().split(":", 1)[1]
            name = "buckets" if kind[0].isdigit() else {"f": "records", "u": "urls"}.get(kind[0], "meta")
            out[name] += used
    return {f"{name}_bytes_per_fp": used / size for name, used in out.items()}


class Filled(NamedTuple):
    """What filling an index took: its bucket_bits, seconds, Redis memory (bytes), and the bytes of its URLs."""

    bucket_bits: int
    seconds: float
    used: int
    url_bytes: int


def fill_index(
    server: RedisServer,
    prefix: str,
    size: int,
    bucket_bits: int | None,
    k: int,
    design: TableDesign,
    metadata: dict[str, Any],
    sketches: list[bytes] | None = None,
) -> Filled:
    """Fill the index ``prefix`` with the stored pages (and ``sketches``) by ``add_many``."""
    keys, fps = stored_keys(size), stored(size)
    before = server.used_memory()
    options = f"&bucket_bits={bucket_bits}" if bucket_bits else ""
    start = time.perf_counter()
    with open_backend(f"{server.url}?prefix={prefix}{options}", k=k, design=design, metadata=metadata) as backend:
        for lo in range(0, size, BATCH):
            rows = slice(lo, lo + BATCH)
            backend.add_many(fps[rows], keys[rows], *([] if sketches is None else [sketches[rows]]))
        bits = backend.bucket_bits  # type: ignore[attr-defined]
    seconds = time.perf_counter() - start
    return Filled(bits, seconds, server.used_memory() - before, sum(len(key) for key in keys))


def fill(server: RedisServer, size: int, bucket_bits: int | None) -> dict[str, Any]:
    """Fill the index; the memory it takes."""
    sketches = [ZERO] * size
    bits, seconds, used, url_bytes = fill_index(server, "bench", size, bucket_bits, K2, TWO_STAGE, META2, sketches)
    with server.client() as client:
        n_keys = client.dbsize()
    return {
        "size": size,
        "bucket_bits": bits,
        "fill_seconds": seconds,
        "redis_keys": n_keys,
        "bytes_per_fp": used / size,
        "url_bytes_per_fp": url_bytes / size,
        "bytes_per_fp_without_urls": (used - url_bytes) / size,
    }


def page_fingerprint_cpu() -> float:
    """CPU seconds to fingerprint one generated article page (median over 60 pages)."""
    from devsites.sample import sample
    from simhash_filter.model.fingerprint import Fingerprinter

    pages = [row["html"] for row in sample(60, 5)]
    fingerprinter = Fingerprinter()
    fingerprinter.fingerprint(pages[0])
    times = []
    for page in pages:
        start = time.process_time()
        fingerprinter.fingerprint(page)
        times.append(time.process_time() - start)
    return statistics.median(times)


def one_process(server: RedisServer, memory: MemoryBackend, checks: int, run: int, size: int) -> dict[str, float]:
    fps = queries(checks, run, size).tolist()
    keys = [f"https://new.example/{run}/{i}" for i in range(checks)]
    with open_backend(f"{server.url}?prefix=bench", k=K2, design=TWO_STAGE, metadata=META2) as backend:
        backend.add_and_candidates(1, "warm-up", ZERO, K2)
        with server.client() as client:
            client.config_resetstat()
        cpu_server = server_cpu(server)
        lat = []
        with SlowLog(server, checks) as slowlog:
            cpu = time.process_time()
            start = time.perf_counter()
            for fp, key in zip(fps, keys, strict=True):
                t = time.perf_counter()
                backend.add_and_candidates(fp, key, ZERO, K2)
                lat.append(time.perf_counter() - t)
            elapsed = time.perf_counter() - start
            cpu = time.process_time() - cpu
            cpu_server = server_cpu(server) - cpu_server
            usec = evalsha_usec(server)
        batch = queries(10 * checks, 100 + run, size)
        batch_keys = [f"https://batch.example/{run}/{i}" for i in range(len(batch))]
        start = time.perf_counter()
        backend.add_many(batch, batch_keys, [ZERO] * len(batch))
        batch_rate = len(batch) / (time.perf_counter() - start)
    mem_lat = []
    mem_cpu = time.process_time()
    for fp, key in zip(fps, keys, strict=True):
        t = time.perf_counter()
        memory.add_and_candidates(fp, key, ZERO, K2)
        mem_lat.append(time.perf_counter() - t)
    mem_cpu = time.process_time() - mem_cpu
    return {
        "p50_ms": 1000 * percentile(lat, 0.5),
        "p99_ms": 1000 * percentile(lat, 0.99),
        "calls_per_s": checks / elapsed,
        "server_us_per_call": usec,
        **slowlog.summary(),
        "server_cpu_us_per_call": 1e6 * cpu_server / checks,
        "client_cpu_us_per_call": 1e6 * cpu / checks,
        "memory_cpu_us_per_call": 1e6 * mem_cpu / checks,
        "memory_p50_ms": 1000 * percentile(mem_lat, 0.5),
        "memory_p99_ms": 1000 * percentile(mem_lat, 0.99),
        "batch_calls_per_s": batch_rate,
    }


def fill_two_stage(server: RedisServer, size: int, bucket_bits: int | None) -> dict[str, Any]:
    """Fill the two-stage index (prefix ``bench2``): the same pages with random sketches; the memory it takes."""
    sketches = stored_sketches(size)
    bits, seconds, used, url_bytes = fill_index(server, "bench2", size, bucket_bits, K2, TWO_STAGE, META2, sketches)
    return {
        "size": size,
        "design": TWO_STAGE.name,
        "sketch_bytes": SKETCH,
        "bucket_bits": bits,
        "fill_seconds": seconds,
        "bytes_per_fp": used / size,
        "url_bytes_per_fp": url_bytes / size,
        "bytes_per_fp_without_urls": (used - url_bytes) / size,
        **memory_by_kind(server, "bench2", size),
    }


def two_stage(server: RedisServer, checks: int, run: int, size: int) -> dict[str, float]:
    """add_and_candidates then candidates at k = 10 on the two-stage index: client and server time per call."""
    fps = queries(checks, 200 + run, size).tolist()
    keys = [f"https://new.example/{run}/{i}" for i in range(checks)]
    rng = np.random.default_rng(300 + run)
    sketches = [rng.bytes(SKETCH) for _ in range(checks)]
    out: dict[str, float] = {}
    with open_backend(f"{server.url}?prefix=bench2", k=K2, design=TWO_STAGE, metadata=META2) as backend:
        backend.candidates(1, K2)  # warm-up
        for name in ("add_and_candidates", "candidates"):
            if name == "candidates":
                fps = queries(checks, 400 + run, size).tolist()
            with server.client() as client:
                client.config_resetstat()
            lat, found = [], 0
            with SlowLog(server, checks) as slowlog:
                start = time.perf_counter()
                for fp, key, sketch in zip(fps, keys, sketches, strict=True):
                    t = time.perf_counter()
                    if name == "candidates":
                        found += len(backend.candidates(fp, K2))
                    else:
                        found += len(backend.add_and_candidates(fp, key, sketch, K2))
                    lat.append(time.perf_counter() - t)
                elapsed = time.perf_counter() - start
                usec = evalsha_usec(server)
            out.update(
                {
                    f"{name}_p50_ms": 1000 * percentile(lat, 0.5),
                    f"{name}_p99_ms": 1000 * percentile(lat, 0.99),
                    f"{name}_calls_per_s": checks / elapsed,
                    f"{name}_server_us_per_call": usec,
                    **{f"{name}_{key}": value for key, value in slowlog.summary().items()},
                    f"{name}_found_per_call": found / checks,
                }
            )
    return out


def flood_pages(n: int, seed: int = 17) -> Iterator[tuple[int, bytes]]:
    """*n* near-identical pages (seeded): fingerprints 0-3 bits from one, sketches 0-8 bits from one."""
    rng = random.Random(seed)
    base, base_sketch = rng.getrandbits(64), rng.getrandbits(8 * SKETCH)
    for _ in range(n):
        fp = base ^ sum(1 << b for b in rng.sample(range(64), rng.randint(0, 3)))
        sketch = base_sketch ^ sum(1 << b for b in rng.sample(range(8 * SKETCH), rng.randint(0, 8)))
        yield fp, sketch.to_bytes(SKETCH, "little")


def flood(server: RedisServer, pages: int, window: int = 1000) -> dict[str, float]:
    """add_and_candidates of *pages* near-identical pages (prefix ``flood``): the server time of every call."""
    durations: list[list[int]] = []
    found = 0
    with open_backend(f"{server.url}?prefix=flood", k=K2, design=TWO_STAGE, metadata=META2) as backend:
        start = time.perf_counter()
        with server.client() as client:
            client.config_resetstat()
        pending = flood_pages(pages)
        for lo in range(0, pages, window):
            with SlowLog(server, window) as slowlog:
                for i in range(lo, min(pages, lo + window)):
                    fp, sketch = next(pending)
                    found += len(backend.add_and_candidates(fp, f"https://trap.example/calendar?day={i}", sketch, K2))
            durations.append(slowlog.durations)
        elapsed = time.perf_counter() - start
        usec = evalsha_usec(server)
        stored = len(backend)
    with server.client() as client:
        buckets = [client.strlen(key) for key in client.scan_iter(match="{flood}:[0-9]*", count=10_000)]
    every = [d for window_durations in durations for d in window_durations]
    return {
        "pages": pages,
        "seconds": elapsed,
        "stored": stored,
        "buckets": len(buckets),
        "largest_bucket_bytes": max(buckets, default=0),
        "candidates_per_call": found / pages,
        "server_us_per_call": usec,
        "server_calls_logged": len(every),
        "server_p50_us": percentile(every, 0.5),
        "server_p99_us": percentile(every, 0.99),
        "server_max_us": float(max(every, default=0)),
        "first_1000_p50_us": percentile(durations[0], 0.5),
        "last_1000_p50_us": percentile(durations[-1], 0.5),
    }


def two_processes(server: RedisServer, checks: int, run: int, size: int) -> dict[str, float]:
    uri = f"{server.url}?prefix=bench"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                uri,
                str(checks),
                str(10 * run + w + 1),
                str(size),
            ],
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(2)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        results.append(json.loads(out))
    lat = [x for r in results for x in r["latencies"]]
    return {
        "p50_ms": 1000 * percentile(lat, 0.5),
        "p99_ms": 1000 * percentile(lat, 0.99),
        "calls_per_s": len(lat) / max(r["elapsed"] for r in results),
    }


def crawl_rate(server: RedisServer, articles: int, processes: int, workdir: Path) -> dict[str, float]:
    """Pages/s of *processes* ``scrapy crawl site`` sharing scrapy-redis's frontier and the Redis index."""
    from devsites.demosite import build_site
    from devsites.localsite import LocalSite

    run = f"crawl-{uuid.uuid4().hex[:8]}"
    queue = f"{run}:%(spider)s:requests"
    settings = {
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": "True",
        "SCHEDULER_QUEUE_KEY": queue,
        "SCHEDULER_DUPEFILTER_KEY": f"{run}:%(spider)s:dupefilter",
        "REDIS_URL": server.url,
        "SIMHASH_BACKEND": f"{server.url}?prefix={run}",
        "LOG_LEVEL": "INFO",
    }
    site, _ = build_site(articles, 7)
    with LocalSite(site) as local, ThreadPoolExecutor(processes) as pool, server.client() as client:
        starts = [local.url("/"), local.url("/", host="127.0.0.2")]
        crawls: list[Future[dict[str, Any]]] = []
        for i in range(processes):
            while crawls and not client.zcard(queue % {"spider": "site"}) and not crawls[0].done():
                time.sleep(0.02)  # the next crawl joins once the first has filled the shared frontier
            (workdir / f"{run}-{i}").mkdir(parents=True)
            crawls.append(pool.submit(crawl_site, workdir / f"{run}-{i}", starts, settings))
        stats = [f.result() for f in crawls]
    start = min(datetime.fromisoformat(s["start_time"]) for s in stats)
    finish = max(datetime.fromisoformat(s["finish_time"]) for s in stats)
    pages = sum(s.get("response_received_count", 0) for s in stats)
    return {
        "pages": pages,
        "seconds": (finish - start).total_seconds(),
        "pages_per_s": pages / (finish - start).total_seconds(),
    }


def print_shared(report: dict[str, Any], args: argparse.Namespace) -> None:
    version, single, pair = report["redis_version"], report["one_process"], report["two_processes"]
    fp_cpu = report["fingerprint_cpu_ms_per_page"] / 1000
    m = report["memory"]
    print(f"Redis {version}, design {TWO_STAGE.name}, bucket_bits {m['bucket_bits']}, {m['size']:,} pages stored")
    print(f"  fill (add_many): {m['fill_seconds']:.1f} s, {m['redis_keys']:,} Redis keys")
    print(
        f"  memory: {m['bytes_per_fp']:.1f} B/fingerprint with the URLs ({m['url_bytes_per_fp']:.1f} B each), "
        f"{m['bytes_per_fp_without_urls']:.1f} B without them   (target <= 100)"
    )
    print(f"check-and-add, median of {args.repeat} runs of {args.checks} calls:")
    print(f"  {'':<30}{'p50 ms':>9}{'p99 ms':>9}{'calls/s':>10}")
    print(f"  {'one process':<30}{single['p50_ms']:>9.3f}{single['p99_ms']:>9.3f}{single['calls_per_s']:>10.0f}")
    print(f"  {'two processes (together)':<30}{pair['p50_ms']:>9.3f}{pair['p99_ms']:>9.3f}{pair['calls_per_s']:>10.0f}")
    print(f"  {'in-memory backend':<30}{single['memory_p50_ms']:>9.3f}{single['memory_p99_ms']:>9.3f}")
    print(f"  batches (add_many): {single['batch_calls_per_s']:.0f} pages/s")
    print(
        f"  server time per call: p50 {single['server_p50_us']:.0f} us, p99 {single['server_p99_us']:.0f} us, "
        f"mean {single['server_us_per_call']:.0f} us (Redis CPU {single['server_cpu_us_per_call']:.0f} us); "
        f"client CPU per call {single['client_cpu_us_per_call']:.0f} us vs in-memory "
        f"{single['memory_cpu_us_per_call']:.0f} us"
    )
    print(
        f"  filter CPU per page (fingerprint {1000 * fp_cpu:.2f} ms + check): Redis / in-memory = "
        f"{single['page_cpu_ratio']:.3f}   (target <= 1.5)"
    )
    if "crawl" in report:
        c1, c2 = report["crawl"]["one_process"], report["crawl"]["two_processes"]
        print(f"crawl of the demo site ({args.articles} articles), median of {args.repeat}:")
        print(
            f"  one process:   {c1['pages']:.0f} responses in {c1['seconds']:.2f} s = {c1['pages_per_s']:.0f} pages/s"
        )
        print(
            f"  two processes: {c2['pages']:.0f} responses in {c2['seconds']:.2f} s = {c2['pages_per_s']:.0f} pages/s"
        )


def print_two_stage(report: dict[str, Any], args: argparse.Namespace) -> None:
    version = report["redis_version"]
    m, r = report["two_stage_memory"], report["two_stage"]
    print(
        f"two-stage detection: Redis {version}, design {m['design']}, {m['sketch_bytes']}-byte sketches, "
        f"bucket_bits {m['bucket_bits']}, {m['size']:,} pages stored (fill {m['fill_seconds']:.1f} s)"
    )
    print(
        f"  memory: {m['bytes_per_fp']:.1f} B/page with the URLs, {m['bytes_per_fp_without_urls']:.1f} B without; "
        f"MEMORY USAGE per page: buckets {m['buckets_bytes_per_fp']:.1f}, records {m['records_bytes_per_fp']:.1f}, "
        f"URLs {m['urls_bytes_per_fp']:.1f}"
    )
    print(f"  k = {K2}, median of {args.repeat} runs of {args.checks} calls:")
    head = f"{'p50 ms':>9}{'p99 ms':>9}{'calls/s':>10}{'server p50 us':>15}{'p99 us':>9}{'mean us':>9}{'found':>7}"
    print(f"  {'':<22}{head}")
    for name in ("add_and_candidates", "candidates"):
        print(
            f"  {name:<22}{r[name + '_p50_ms']:>9.3f}{r[name + '_p99_ms']:>9.3f}{r[name + '_calls_per_s']:>10.0f}"
            f"{r[name + '_server_p50_us']:>15.0f}{r[name + '_server_p99_us']:>9.0f}"
            f"{r[name + '_server_us_per_call']:>9.0f}{r[name + '_found_per_call']:>7.2f}"
        )


def print_flood(report: dict[str, Any]) -> None:
    f = report["flood"]
    print(
        f"flood: Redis {report['redis_version']}, design {TWO_STAGE.name}, k = {K2}, {f['pages']:,} near-identical "
        f"pages in {f['seconds']:.1f} s; {f['stored']:,} stored, {f['buckets']:,} buckets (largest "
        f"{f['largest_bucket_bytes']:.0f} B), {f['candidates_per_call']:.1f} candidates per call"
    )
    print(
        f"  server time per add-and-candidates ({f['server_calls_logged']:,} calls logged): p50 "
        f"{f['server_p50_us']:.0f} us, p99 {f['server_p99_us']:.0f} us, max {f['server_max_us']:.0f} us "
        f"(target p99 <= 1000, max <= 5000); mean {f['server_us_per_call']:.0f} us (INFO commandstats); p50 of "
        f"the first 1,000 {f['first_1000_p50_us']:.0f} us, of the last 1,000 {f['last_1000_p50_us']:.0f} us"
    )


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--size", type=int, default=1_000_000, help="fingerprints stored before measuring")
    parser.add_argument("--checks", type=int, default=5000, help="check-and-adds per process and run")
    parser.add_argument("--repeat", type=int, default=3, help="runs; medians are reported")
    parser.add_argument("--articles", type=int, default=150, help="articles of the crawled demo site (0: no crawl)")
    parser.add_argument("--bucket-bits", type=int, default=None, help="the backend's bucket_bits (default: its own)")
    parser.add_argument("--flood", type=int, default=100_000, help="near-identical pages of part 6")
    parser.add_argument(
        "--only", choices=("shared", "two-stage", "flood"), help="run parts 1-4 only, part 5 only, or part 6 only"
    )
    parser.add_argument("--expected-pages", type=int, default=0,
                        help="the two-stage tables are built for this many pages (default: --size)")  # fmt: skip
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args(argv)
    global TWO_STAGE
    TWO_STAGE = TableDesign.parse(tables_for(args.expected_pages or args.size))
    shared, staged = args.only in (None, "shared"), args.only in (None, "two-stage")
    flooded = args.only == "flood"

    report: dict[str, Any] = {"runs": {}}
    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp) / "redis") as server:
        with server.client() as client:
            version = client.info("server")["redis_version"]
        report["redis_version"] = version
        if shared:
            report["memory"] = fill(server, args.size, args.bucket_bits)
            memory = MemoryBackend(k=K2, design=TWO_STAGE, metadata=META2)
            memory.add_many(stored(args.size), stored_keys(args.size), [ZERO] * args.size)
            fp_cpu = page_fingerprint_cpu()
            singles, pairs, crawls1, crawls2 = [], [], [], []
            for run in range(args.repeat):
                singles.append(one_process(server, memory, args.checks, run, args.size))
                pairs.append(two_processes(server, args.checks, run, args.size))
                if args.articles:
                    crawls1.append(crawl_rate(server, args.articles, 1, Path(tmp) / "crawls"))
                    crawls2.append(crawl_rate(server, args.articles, 2, Path(tmp) / "crawls"))
            with contextlib.suppress(Exception):
                memory.close()
        if staged:
            report["two_stage_memory"] = fill_two_stage(server, args.size, args.bucket_bits)
            staged_runs = [two_stage(server, args.checks, run, args.size) for run in range(args.repeat)]
            report["two_stage"] = median_of(staged_runs)
            report["runs"]["two_stage"] = staged_runs
        if flooded:
            report["flood"] = flood(server, args.flood)
    if shared:
        single, pair = median_of(singles), median_of(pairs)
        single["page_cpu_ratio"] = (fp_cpu + single["client_cpu_us_per_call"] / 1e6) / (
            fp_cpu + single["memory_cpu_us_per_call"] / 1e6
        )
        report.update(
            design=TWO_STAGE.name,
            one_process=single,
            two_processes=pair,
            fingerprint_cpu_ms_per_page=1000 * fp_cpu,
        )
        report["runs"].update(one_process=singles, two_processes=pairs)
        if crawls1:
            report["crawl"] = {"one_process": median_of(crawls1), "two_processes": median_of(crawls2)}
            report["runs"]["crawl"] = {"one_process": crawls1, "two_processes": crawls2}

        print_shared(report, args)
    if staged:
        print_two_stage(report, args)
    if flooded:
        print_flood(report)
    if args.json:
        write_json(args.json, report, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
