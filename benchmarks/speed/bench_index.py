"""Speed and memory of the index's queries within k = 3, side by side with ``simhash.SimhashIndex``.

    python -m benchmarks.speed.bench_index --sizes 1000000,10000000 --queries 20000 --repeat 3 --json out.json

For each size: random 64-bit fingerprints of which 10% are planted near-duplicates (1-3 bits
flipped) of earlier ones, stored with URL-like keys.  Queries are half planted neighbours of
stored fingerprints (0-3 bits flipped: hits) and half random fingerprints (misses).  Reported:
build time (one bulk ``add_many``), memory per fingerprint (numpy ``nbytes`` of the index arrays;
tracemalloc retained and peak during the build; the RSS delta), single-query latency
(``time.perf_counter_ns`` around each call), and ``check_and_add`` latency (half near-duplicates, half new
pages; a sketch of zeros, 8 bytes: the queries read fingerprints only).  Index figures exclude the keys:
the index stores row numbers, and the key strings live in a list beside it, measured separately.
Every figure is the median of ``--repeat`` runs.

``simhash.SimhashIndex`` (PyPI ``simhash``, 2.1.2) is built on the same data at ``--simhash-size``
(default: the smallest size); if its build is projected to take more than five minutes it runs
at a smaller size, which the report states.  Its memory includes its own copy of the keys (it
stores ``"<hex>,<key>"`` strings), so its figure is an upper bound of its index-only cost.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import platform
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.benchlib.measure import median_of, rss_bytes
from benchmarks.benchlib.report import make_parser, write_json
from simhash_filter.index.nearduplicate import NearDuplicateIndex

K = 3
#: The index keeps a sketch beside each fingerprint: a small one here, all zeros.
META = {"sketch_bytes": 8}
ZERO = bytes(8)
SIMHASH_BUILD_LIMIT_S = 300.0


def release_free_memory() -> None:
    """Collect garbage and hand freed heap memory back to the OS (glibc), so RSS deltas mean something."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def flip_bits(rng: np.random.Generator, values: np.ndarray, max_bits: int) -> np.ndarray:
    """Flip 0..max_bits random bits of each value (a new array)."""
    out = values.copy()
    n_flips = rng.integers(0, max_bits + 1, size=len(out))
    for j in range(max_bits):
        sel = n_flips > j
        bits = rng.integers(0, 64, size=int(sel.sum()), dtype=np.uint64)
        out[sel] ^= np.uint64(1) << bits
    return out


def make_data(n: int, n_queries: int, seed: int) -> dict[str, Any]:
    """Stored fingerprints with planted near-duplicates, queries, and check_and_add inputs."""
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    planted = rng.choice(np.arange(1, n), size=n // 10, replace=False)
    sources = (rng.random(len(planted)) * planted).astype(np.int64)  # an earlier row
    one_bit = np.uint64(1) << rng.integers(0, 64, size=len(planted), dtype=np.uint64)
    fps[planted] = flip_bits(rng, fps[sources], K - 1) ^ one_bit  # 1..K bits from an earlier row
    half = n_queries // 2

    def mixed() -> np.ndarray:
        hits = flip_bits(rng, fps[rng.integers(0, n, size=half)], K)
        misses = rng.integers(0, 2**64, size=n_queries - half, dtype=np.uint64)
        out = np.concatenate([hits, misses])
        rng.shuffle(out)
        return out

    return {"fps": fps, "queries": mixed(), "check_and_add": mixed()}


def percentiles(ns: np.ndarray) -> tuple[float, float]:
    """p50 and p99 in microseconds of nanosecond timings."""
    p50, p99 = np.percentile(ns, [50, 99])
    return float(p50) / 1000, float(p99) / 1000


def bench_index(data: dict[str, Any], keys: list[str], measure_memory: bool) -> dict[str, Any]:
    """One build + measurements of NearDuplicateIndex."""
    fps: np.ndarray = data["fps"]
    n = len(fps)
    out: dict[str, Any] = {}
    release_free_memory()
    rss0 = rss_bytes()
    t0 = time.perf_counter()
    index = NearDuplicateIndex(K, expected_size=n, metadata=META)
    index.add_many(fps, keys, [ZERO] * n)
    out["build_s"] = time.perf_counter() - t0
    release_free_memory()  # the build's temporaries are freed: keep only what the index holds
    out["rss_delta_b_per_fp"] = (rss_bytes() - rss0) / n
    out["design"] = index.design.name
    out["nbytes_b_per_fp"] = index.backend.nbytes / n

    queries = data["queries"].tolist()
    timings = np.empty(len(queries), dtype=np.int64)
    query = index.query
    clock = time.perf_counter_ns
    hits = 0
    for i, q in enumerate(queries):
        t = clock()
        found = query(q)
        timings[i] = clock() - t
        hits += bool(found)
    out["query_p50_us"], out["query_p99_us"] = percentiles(timings)
    out["queries_per_s"] = len(timings) / (timings.sum() / 1e9)
    out["query_hit_share"] = hits / len(queries)

    adds = data["check_and_add"].tolist()
    timings = np.empty(len(adds), dtype=np.int64)
    check_and_add = index.check_and_add
    for i, q in enumerate(adds):
        t = clock()
        check_and_add(q, "https://example.com/new", ZERO)
        timings[i] = clock() - t
    out["check_and_add_p50_us"], out["check_and_add_p99_us"] = percentiles(timings)
    index.close()
    del index
    gc.collect()

    if measure_memory:  # a second build under tracemalloc (slower, so not timed)
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        index = NearDuplicateIndex(K, expected_size=n, metadata=META)
        index.add_many(fps, keys, [ZERO] * n)
        current, peak = tracemalloc.get_traced_memory()
        snapshot = tracemalloc.take_snapshot()
        tracemalloc.stop()
        numpy_only = tracemalloc.DomainFilter(inclusive=True, domain=np.lib.tracemalloc_domain)
        arrays = sum(stat.size for stat in snapshot.filter_traces([numpy_only]).statistics("filename"))
        out["tracemalloc_b_per_fp"] = arrays / n  # numpy arrays alive after the build
        out["tracemalloc_other_b_per_fp"] = (current - base - arrays) / n  # the list of key references
        out["tracemalloc_peak_b_per_fp"] = (peak - base) / n
        index.close()
        del index
        gc.collect()
    return out


def bench_simhash(
    data: dict[str, Any], keys: list[str], n_queries: int, measure_memory: bool
) -> tuple[dict[str, Any], Any]:
    """One build + measurements of simhash.SimhashIndex (k = 3, its k+1 = 4 blocks)."""
    import logging

    from simhash import Simhash, SimhashIndex

    logging.getLogger("simhash").setLevel(logging.ERROR)  # it warns about big buckets
    fps: np.ndarray = data["fps"]
    n = len(fps)
    objs = [(key, Simhash(fp)) for key, fp in zip(keys, fps.tolist(), strict=True)]
    out: dict[str, Any] = {"design": "4 blocks of 16 (k+1)"}
    gc.collect()
    t0 = time.perf_counter()
    index = SimhashIndex(objs, f=64, k=K)
    out["build_s"] = time.perf_counter() - t0
    query_objs = [Simhash(q) for q in data["queries"][:n_queries].tolist()]
    timings = np.empty(len(query_objs), dtype=np.int64)
    clock = time.perf_counter_ns
    for i, q in enumerate(query_objs):
        t = clock()
        index.get_near_dups(q)
        timings[i] = clock() - t
    out["query_p50_us"], out["query_p99_us"] = percentiles(timings)
    out["queries_per_s"] = len(timings) / (timings.sum() / 1e9)
    if measure_memory:
        del index
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        index = SimhashIndex(objs, f=64, k=K)
        out["tracemalloc_b_per_fp"] = (tracemalloc.get_traced_memory()[0] - base) / n
        tracemalloc.stop()
    return out, index


def simhash_size_for(requested: int, data: dict[str, Any], keys: list[str]) -> tuple[int, str]:
    """The SimhashIndex size to use: *requested*, or smaller if its build would exceed the limit."""
    from simhash import Simhash, SimhashIndex

    probe = min(requested, 50_000)
    objs = [(k, Simhash(fp)) for k, fp in zip(keys[:probe], data["fps"][:probe].tolist(), strict=True)]
    t0 = time.perf_counter()
    SimhashIndex(objs, f=64, k=K)
    per_item = (time.perf_counter() - t0) / probe
    projected = per_item * requested
    if projected <= SIMHASH_BUILD_LIMIT_S:
        return requested, ""
    size = max(probe, int(SIMHASH_BUILD_LIMIT_S / per_item) // 100_000 * 100_000)
    return size, f"SimhashIndex at {requested:,} was projected to build in {projected:.0f} s; ran at {size:,}"


def make_keys(n: int) -> tuple[list[str], float]:
    """URL-like keys and their memory (list + strings) per key, by tracemalloc."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    keys = [f"https://example.com/articles/{i:09d}.html" for i in range(n)]
    per_key = (tracemalloc.get_traced_memory()[0] - base) / n
    tracemalloc.stop()
    return keys, per_key


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        if value >= 10_000:
            return f"{value:,.0f}"
        return f"{value:.{digits}f}"
    return str(value)


def table(results: dict[str, Any]) -> str:
    """The report as a markdown table: one column per index and size."""
    cols: list[tuple[str, dict[str, Any]]] = [
        (f"NearDuplicateIndex {int(size):,}", r) for size, r in results["index"].items()
    ]
    sim = results.get("simhash")
    if sim:
        cols.append((f"simhash.SimhashIndex {sim['size']:,}", sim["median"]))
    rows = [
        ("design", "design", 0),
        ("build, bulk add (s)", "build_s", 2),
        ("index bytes / fp: numpy nbytes", "nbytes_b_per_fp", 1),
        ("index bytes / fp: tracemalloc, retained", "tracemalloc_b_per_fp", 1),
        ("key references list, bytes / fp (tracemalloc; separate)", "tracemalloc_other_b_per_fp", 1),
        ("bytes / fp: tracemalloc peak during build (index + temporaries + key list)", "tracemalloc_peak_b_per_fp", 1),
        ("bytes / fp: RSS delta of the build (includes the 8 B/fp key list)", "rss_delta_b_per_fp", 1),
        ("key strings + caller's list, bytes / key (separate)", "key_b_per_fp", 1),
        ("single query p50 (µs)", "query_p50_us", 1),
        ("single query p99 (µs)", "query_p99_us", 1),
        ("single queries / s (sequential)", "queries_per_s", 0),
        ("check_and_add p50 (µs)", "check_and_add_p50_us", 1),
        ("check_and_add p99 (µs)", "check_and_add_p99_us", 1),
        ("share of queries with a match", "query_hit_share", 2),
    ]
    lines = ["| | " + " | ".join(name for name, _ in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for label, key, digits in rows:
        if not any(key in r for _, r in cols):
            continue
        lines.append(f"| {label} | " + " | ".join(fmt(r.get(key), digits) for _, r in cols) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--sizes", default="1000000,10000000", help="comma-separated index sizes")
    parser.add_argument("--queries", type=int, default=20_000, help="queries (and check_and_adds) per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per size; figures are medians")
    parser.add_argument("--simhash-size", type=int, default=None, help="SimhashIndex size (default: smallest size)")
    parser.add_argument("--simhash-queries", type=int, default=5_000, help="queries timed on SimhashIndex")
    parser.add_argument("--no-simhash", action="store_true", help="skip simhash.SimhashIndex")
    parser.add_argument("--seed", type=int, default=20070508)
    parser.add_argument("--json", metavar="FILE", help="also write all figures as JSON")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if not sizes or min(sizes) < 10 or args.queries < 2 or args.repeat < 1:
        parser.error("sizes must be >= 10, --queries >= 2, --repeat >= 1")

    results: dict[str, Any] = {
        "command": " ".join([Path(sys.argv[0]).as_posix(), *(argv if argv is not None else sys.argv[1:])]),
        "machine": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "index": {},
    }
    notes: list[str] = []
    all_keys, key_bytes = make_keys(max([*sizes, args.simhash_size or 0]))
    for size in sizes:
        data = make_data(size, args.queries, args.seed)
        keys = all_keys[:size]
        runs = []
        for r in range(args.repeat):
            print(f"NearDuplicateIndex {size:,}: run {r + 1}/{args.repeat}", file=sys.stderr, flush=True)
            runs.append(bench_index(data, keys, measure_memory=(r == 0)))
        med = median_of(runs)
        med["key_b_per_fp"] = key_bytes
        results["index"][str(size)] = med | {"runs": runs}

    if not args.no_simhash:
        requested = args.simhash_size or min(sizes)
        data = make_data(requested, args.queries, args.seed)
        size, note = simhash_size_for(requested, data, all_keys)
        if note:
            notes.append(note)
            data = make_data(size, args.queries, args.seed)
        runs = []
        theirs = None
        for r in range(args.repeat):
            print(f"SimhashIndex {size:,}: run {r + 1}/{args.repeat}", file=sys.stderr, flush=True)
            run, built = bench_simhash(data, all_keys[:size], args.simhash_queries, measure_memory=(r == 0))
            runs.append(run)
            theirs = theirs or built
            del built
            gc.collect()
        # cross-check: both indexes find the same keys for the timed queries
        ours = NearDuplicateIndex(K, expected_size=size, metadata=META)
        ours.add_many(data["fps"], all_keys[:size], [ZERO] * size)
        from simhash import Simhash

        sample = data["queries"][:2000].tolist()
        agree = sum({m.key for m in ours.query(q)} == set(theirs.get_near_dups(Simhash(q))) for q in sample) / len(
            sample
        )
        med = median_of(runs) | {"same_answers_share": agree}
        results["simhash"] = {"size": size, "median": med, "runs": runs, "note": note}
        ours_med = results["index"].get(str(size))
        if ours_med:
            results["ratios_vs_simhash"] = {
                "build_speedup": med["build_s"] / ours_med["build_s"],
                "query_p50_speedup": med["query_p50_us"] / ours_med["query_p50_us"],
                "memory_ratio": med["tracemalloc_b_per_fp"] / ours_med["tracemalloc_b_per_fp"],
            }
        del ours, theirs

    print()
    print(
        f"`{results['command']}` — medians of {args.repeat} run(s); {results['machine']['cpus']} CPUs, "
        f"Python {results['machine']['python']}, numpy {results['machine']['numpy']}"
    )
    print()
    print(table(results))
    if "simhash" in results:
        sim = results["simhash"]
        print()
        print(
            f"SimhashIndex and NearDuplicateIndex return the same keys for "
            f"{sim['median']['same_answers_share']:.1%} of {min(2000, args.queries)} queries."
        )
        if "ratios_vs_simhash" in results:
            r = results["ratios_vs_simhash"]
            print(
                f"At {sim['size']:,}: NearDuplicateIndex builds {r['build_speedup']:.0f}x faster, answers a single "
                f"query {r['query_p50_speedup']:.0f}x faster (p50) in {r['memory_ratio']:.0f}x less memory."
            )
    for note in notes:
        print(f"Note: {note}.")
    if args.json:
        write_json(Path(args.json), results, indent=2, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
