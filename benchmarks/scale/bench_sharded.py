"""One two-stage index sharded over a local 3-node Redis Cluster (``?cluster=1&shards=3``) beside the same index on
one Redis server: memory per node and Redis server time per check.

Both indexes are filled with the same ``--size`` random pages (sketches of the model's size, 128 bytes since model
v6; 50-byte URLs; the sharded one with its bulk load, the one-server one pipelined), then ``--checks``
add-and-candidates of new pages (half of them near-duplicates of stored ones) are timed: wall time per call, and
Redis server time per call from ``INFO commandstats`` (``evalsha``), summed over the nodes and on the busiest node.
Memory is ``MEMORY USAGE`` of the index's keys on each node.  The table design is the one built for
``--expected-pages`` (default: the size).

    python -m benchmarks.scale.bench_sharded --size 200000 --checks 2000

``--public``: ``simhash-filter dedup --workers 1`` of the public stream (5,054 pages) through ``memory://``, one
Redis server and the 3-node cluster with ``shards=3``, alternated ``--repeat`` times: wall seconds (medians), whether
the decisions (``url``, ``duplicate_of``, ``distance`` of every line) equal ``memory://``'s, and the index's memory
(``MEMORY USAGE`` of its keys) on each node, in all and by kind of key (buckets, records, URLs, the rest), beside
one server's (every element counted), and what a user measures: ``used_memory`` grown by the run on each node, the
keys (``DBSIZE``) and the fields of ``MEMORY STATS`` that say where it went (dataset, main hash table, slot-to-keys,
scripts)
(targets: each node 20-50 % of the index, all nodes <= 1.3x one server, wall <= 1.5x one server's).

    python -m benchmarks.scale.bench_sharded --public [--repeat 3]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.benchlib.report import make_parser, write_json
from devsites.redis_server import RedisCluster, RedisServer
from simhash_filter.config import DEFAULTS, FilterConfig
from simhash_filter.index.backends import open_backend
from simhash_filter.index.bound import CheckBound
from simhash_filter.index.tables import TableDesign, tables_for

K = DEFAULTS.max_distance
META = DEFAULTS.index_metadata()
SKETCH = META["sketch_bytes"]


def _pages(n: int, seed: int, lo: int = 0) -> tuple[list[int], list[str], list[bytes]]:
    """Pages *lo* to *lo* + *n* of the stream *seed*: the same pages whatever the chunks they are made in, when the
    chunks start at multiples of :data:`CHUNK` (a 10M fill holds one chunk at a time)."""
    fps: list[int] = []
    keys: list[str] = []
    sketches: list[bytes] = []
    for start in range(lo, lo + n, CHUNK):
        rng = np.random.default_rng([seed, start // CHUNK])
        count = min(CHUNK, lo + n - start)
        fps += rng.integers(0, 2**64, size=count, dtype=np.uint64).tolist()
        sketches += [bytes(row) for row in rng.integers(0, 256, size=(count, SKETCH), dtype=np.uint8)]
        keys += [f"https://www.example.com/section/page-{seed}-{i:012d}.html" for i in range(start, start + count)]
    return fps, keys, sketches


CHUNK = 10_000


def _evalsha_usec(nodes: list[RedisServer]) -> list[int]:
    out = []
    for node in nodes:
        with node.client() as client:
            stats = client.info("commandstats")
        out.append(int(stats.get("cmdstat_evalsha", {}).get("usec", 0)))
    return out


def _reset(nodes: list[RedisServer]) -> None:
    for node in nodes:
        with node.client() as client:
            client.config_resetstat()


def _memory(nodes: list[RedisServer], pattern: str) -> list[int]:
    out = []
    for node in nodes:
        with node.client() as client:
            keys = list(client.scan_iter(match=pattern, count=10_000))
            pipe = client.pipeline(transaction=False)
            for key in keys:
                pipe.memory_usage(key)
            out.append(sum(v or 0 for v in pipe.execute()))
    return out


def _used(nodes: list[RedisServer]) -> list[int]:
    out = []
    for node in nodes:
        with node.client() as client:
            out.append(int(client.info("memory")["used_memory"]))
    return out


def _slowlog(nodes: list[RedisServer], start: bool, n: int = 0) -> list[list[int]]:
    """Log every command of the nodes (*start*), or read the ``EVALSHA`` durations (µs) logged on each."""
    out = []
    for node in nodes:
        with node.client() as client:
            if start:
                client.config_set("slowlog-max-len", 100_000)
                client.config_set("slowlog-log-slower-than", 0)
                client.slowlog_reset()
            else:
                client.config_set("slowlog-log-slower-than", 10_000)
                entries = client.slowlog_get(100_000)
                out.append([e["duration"] for e in entries if e["command"][:7].lower() == b"evalsha"])
                client.slowlog_reset()
    return out


def measure(
    uri: str,
    nodes: list[RedisServer],
    design: TableDesign,
    size: int,
    checks: int,
    pattern: str,
    bound: CheckBound = DEFAULTS.bound,
    scan: bool = True,
    at: Sequence[int] = (),
) -> list[dict]:
    """Fill the index at *uri* with *size* pages (``add_many``, :data:`CHUNK` at a time), and at each size of *at*
    and at the end time *checks* checks (half of them near-duplicates of stored pages); memory from ``used_memory``
    grown since the start, and from ``MEMORY USAGE`` of its keys at the end (*scan*; slow at tens of millions of
    keys).  Each size's row is printed as it is measured (a long fill that is stopped keeps what it measured)."""
    rows: list[dict] = []
    used_before = _used(nodes)
    with open_backend(uri, k=K, design=design, metadata=META) as backend:
        fill = 0.0
        filled = 0
        for target in sorted({n for n in at if n < size} | {size}):
            start = time.perf_counter()
            for lo in range(filled, target, CHUNK):
                fps, keys, sketches = _pages(min(CHUNK, target - lo), 1, lo)
                backend.add_many(np.array(fps, dtype=np.uint64), keys, sketches)
                if (lo + CHUNK) % 1_000_000 == 0:  # a long fill says how far it got, and what each node holds then
                    grown = [after - before for after, before in zip(_used(nodes), used_before, strict=True)]
                    print(f"  {lo + CHUNK:,} pages in {fill + time.perf_counter() - start:.0f} s, used_memory grown "
                          f"by {grown}", file=sys.stderr, flush=True)  # fmt: skip
            fill += time.perf_counter() - start
            filled = target
            used = [after - before for after, before in zip(_used(nodes), used_before, strict=True)]
            row = _checks(backend, nodes, filled, checks, bound, len(rows))
            memory = _memory(nodes, pattern) if scan and filled == size else used
            row = {"size": filled, "design": design.name, "block_pages": bound.block_pages, "fill_s": round(fill, 1),
                   "used_memory_by_node": used, "used_memory_per_page_by_node": [round(u / filled, 1) for u in used],
                   **row, "bytes_per_page": round(sum(memory) / filled, 1),
                   "memory_share_by_node": [round(m / max(1, sum(memory)), 3) for m in memory]}  # fmt: skip
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
    return rows


def _checks(backend: Any, nodes: list[RedisServer], filled: int, checks: int, bound: CheckBound, run: int) -> dict:
    """Time *checks* add-and-candidates of new pages into the index of *filled* pages, every other one a near-duplicate
    of a stored page (of 20 chunks drawn at random)."""
    rng = np.random.default_rng([2, run])
    q_fps, q_keys, q_sketches = _pages(checks, 3 + run)
    near = list(range(0, checks, 2))
    for part, lo in zip(np.array_split(near, 20), rng.integers(0, max(1, filled // CHUNK), size=20), strict=True):
        fps, _, sketches = _pages(min(CHUNK, filled - lo * CHUNK), 1, int(lo) * CHUNK)
        for i in part:
            j = int(rng.integers(0, len(fps)))
            q_fps[i] = fps[j] ^ (1 << int(rng.integers(0, 64)))
            q_sketches[i] = sketches[j]
    _reset(nodes)
    _slowlog(nodes, True)
    times = []
    for fp, key, sketch in zip(q_fps, q_keys, q_sketches, strict=True):
        t0 = time.perf_counter_ns()
        backend.add_and_candidates(fp, key, sketch, K, bound)
        times.append(time.perf_counter_ns() - t0)
    usec = _evalsha_usec(nodes)
    calls = _slowlog(nodes, False)
    times.sort()
    every = sorted(d for node in calls for d in node)
    return {
        "server_us_per_call_p50_p99": [every[len(every) // 2], every[int(0.99 * (len(every) - 1))]] if every else None,
        "server_us_per_call_p99_by_node": [sorted(c)[int(0.99 * (len(c) - 1))] if c else None for c in calls],
        "calls_per_check_by_node": [round(len(c) / checks, 2) for c in calls],
        "checks_per_s_per_node_capacity": [round(checks * 1e6 / u) if u else None for u in usec],
        "check_p50_ms": round(statistics.median(times) / 1e6, 3),
        "check_p99_ms": round(times[int(0.99 * (len(times) - 1))] / 1e6, 3),
        "server_us_per_check": round(sum(usec) / checks, 1),
        "server_us_per_check_busiest_node": round(max(usec) / checks, 1),
    }


def _memory_by_kind(nodes: list[RedisServer], pattern: str) -> list[dict[str, int]]:
    """``MEMORY USAGE`` of the index's keys on each node, by kind: ``buckets`` (``{p}:<t>:<hex>``), ``records``
    (``{p}:f<c>``), ``urls`` (``{p}:u<c>``), ``other``."""
    out = []
    for node in nodes:
        kinds = {"buckets": 0, "records": 0, "urls": 0, "other": 0}
        with node.client() as client:
            keys = list(client.scan_iter(match=pattern, count=10_000))
            pipe = client.pipeline(transaction=False)
            for key in keys:
                pipe.memory_usage(key, samples=0)  # every element counted, not 5 sampled
            for key, size in zip(keys, pipe.execute(), strict=True):
                tail = key.decode().rpartition("}:")[2]
                kind = "buckets" if ":" in tail else {"f": "records", "u": "urls"}.get(tail[:1], "other")
                if tail[:1] in "fu" and not tail[1:].isdigit():
                    kind = "other"
                kinds[kind] += size or 0
        out.append(kinds)
    return out


#: The fields of ``MEMORY STATS`` that ``--public`` reports, grown by the run on each node.
_STATS = ("total.allocated", "dataset.bytes", "overhead.total", "overhead.hashtable.main",
          "overhead.hashtable.slot-to-keys", "lua.caches", "functions.caches", "clients.normal", "cluster.links",
          "keys.count")  # fmt: skip


def _stats(nodes: list[RedisServer]) -> list[dict[str, int]]:
    out = []
    for node in nodes:
        with node.client() as client:
            fields = dict(client.execute_command("MEMORY STATS"))  # redis-py parses it (str keys)
        fields.update(fields.pop("db.0", {}))
        out.append({name: int(fields.get(name, 0)) for name in _STATS})
    return out


def _decisions(path: Path) -> list[tuple]:
    with path.open(encoding="utf-8") as f:
        return [(r["url"], r["duplicate_of"], r["distance"]) for r in map(json.loads, f) if r]


def public(repeat: int, tmp: Path) -> dict:
    """The public stream through ``dedup`` with ``memory://``, one server and three shards (see the module)."""
    import gzip
    import shutil
    import subprocess

    from benchmarks.benchlib import ROOT
    from benchmarks.benchlib.data import PUBLIC_PAGES

    source = tmp / "public.jsonl"
    with gzip.open(PUBLIC_PAGES, "rb") as src, source.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    walls: dict[str, list[float]] = {"memory": [], "one server": [], "3 shards": []}
    same: dict[str, bool] = {}
    memory: dict[str, list[dict[str, int]]] = {}
    used: dict[str, list[int]] = {}  # used_memory grown by the run, each node
    keys: dict[str, list[int]] = {}
    stats: dict[str, list[dict[str, int]]] = {}  # MEMORY STATS grown by the run, each node
    with RedisServer(tmp / "one") as one, RedisCluster(tmp / "cluster") as cluster:
        uris = {
            "memory": ("memory://", []),
            "one server": (f"{one.url}?prefix=pub", [one]),
            "3 shards": (f"{cluster.url}?cluster=1&shards=3&prefix=pub", cluster.nodes),
        }
        for r in range(repeat):
            for name, (uri, nodes) in uris.items():
                for node in nodes:
                    with node.client() as client:
                        client.flushall()
                before = _used(nodes)
                stats_before = _stats(nodes)
                out = tmp / f"{name.replace(' ', '_')}.jsonl"
                cmd = [sys.executable, "-m", "simhash_filter", "dedup", str(source), "--workers", "1",
                       "--no-progress", "--output", str(out), "--index", uri]  # fmt: skip
                start = time.perf_counter()
                subprocess.run(cmd, check=True, cwd=ROOT, stderr=subprocess.DEVNULL)
                walls[name].append(time.perf_counter() - start)
                if r == 0 and nodes:
                    memory[name] = _memory_by_kind(nodes, "{pub*")
                    used[name] = [after - b for after, b in zip(_used(nodes), before, strict=True)]
                    stats[name] = [{f: a[f] - b[f] for f in _STATS}
                                   for a, b in zip(_stats(nodes), stats_before, strict=True)]  # fmt: skip
                    keys[name] = []
                    for node in nodes:
                        with node.client() as client:
                            keys[name].append(int(client.dbsize()))
                print(f"  {name}: {walls[name][-1]:.1f} s", file=sys.stderr, flush=True)
            reference = _decisions(tmp / "memory.jsonl")
            for name in ("one server", "3 shards"):
                same[name] = same.get(name, True) and _decisions(tmp / f"{name.replace(' ', '_')}.jsonl") == reference
    one_total = sum(sum(k.values()) for k in memory["one server"])
    shard_totals = [sum(k.values()) for k in memory["3 shards"]]
    wall = {name: statistics.median(w) for name, w in walls.items()}
    return {
        "pages": sum(1 for _ in source.open("rb")),
        "wall_s": wall,
        "wall_3_shards_over_one_server": round(wall["3 shards"] / wall["one server"], 3),
        "decisions_equal_memory": same,
        "memory_one_server": memory["one server"][0],
        "memory_3_shards_by_node": memory["3 shards"],
        "share_by_node": [round(m / sum(shard_totals), 3) for m in shard_totals],
        "node_over_one_server": [round(m / one_total, 3) for m in shard_totals],
        "all_nodes_over_one_server": round(sum(shard_totals) / one_total, 3),
        "used_memory_one_server": used["one server"][0],
        "used_memory_3_shards_by_node": used["3 shards"],
        "used_memory_all_nodes_over_one_server": round(sum(used["3 shards"]) / used["one server"][0], 3),
        "keys_one_server": keys["one server"][0],
        "keys_3_shards_by_node": keys["3 shards"],
        "memory_stats_grown_one_server": stats["one server"][0],
        "memory_stats_grown_3_shards": {f: sum(node[f] for node in stats["3 shards"]) for f in _STATS},
    }


def main() -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--public", action="store_true", help="the public stream through dedup (see above)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--size", type=int, default=200_000)
    parser.add_argument("--checks", type=int, default=2000)
    parser.add_argument("--expected-pages", type=int, default=0)
    parser.add_argument("--no-scan", action="store_true", help="memory from used_memory only (large sizes)")
    parser.add_argument("--at", default="", help="sizes to time checks at on the way (1000000,3000000)")
    parser.add_argument("--only", choices=("one", "cluster"), help="measure one of the two only")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.public:
        with tempfile.TemporaryDirectory() as tmp:
            result = public(args.repeat, Path(tmp))
        print(json.dumps(result, indent=1))
        if args.json:
            write_json(args.json, result, indent=2)
        return 0
    expected = args.expected_pages or args.size
    design = TableDesign.parse(tables_for(expected))
    bound = FilterConfig(expected_pages=expected).bound
    results = []
    scan = not args.no_scan
    at = [int(n) for n in args.at.split(",") if n]
    with tempfile.TemporaryDirectory() as tmp:
        if args.only != "cluster":
            with RedisServer(Path(tmp) / "one") as one:
                uri = f"{one.url}?prefix=one"
                rows = measure(uri, [one], design, args.size, args.checks, "{one}:*", bound, scan, at)
                results += [{"index": "one server", **row} for row in rows]
        if args.only != "one":
            with RedisCluster(Path(tmp) / "cluster") as cluster:
                uri = f"{cluster.url}?cluster=1&shards=3&prefix=big"
                rows = measure(uri, cluster.nodes, design, args.size, args.checks, "{big*", bound, scan, at)
                results += [{"index": "3 shards, 3-node cluster", **row} for row in rows]
    print(json.dumps(results, indent=1))
    if args.json:
        write_json(args.json, results, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
