"""The on-disk index at scale: bulk insert, cold open, resident memory, single check-and-add latency, disk.

For each size N: a fresh index directory gets N random fingerprints with URL keys (about 45 bytes) by
``add_many`` in batches of 100,000 (a bulk load, like ``dedup --index`` or a crawl's first hour); then
a *new process* opens it (the cold start: read and verify the log, build the permuted tables) and
reports its open time and the growth of its resident memory (RSS) over an interpreter that has
imported the same modules; then it times ``add_and_candidates`` (k = 10, the crawl's two-stage check; sketches
of zeros) one call at a time for ``--queries`` fingerprints, half of them planted within 3 bits of stored ones and
half new (each added: one write of the key and one of the record).  Disk bytes per fingerprint are given without
the keys and with them.  ``--drop-caches`` empties the OS page cache before each open (root only), so the open
reads from the disk itself.

    python -m benchmarks.speed.bench_file_index [--sizes 1000000,10000000] [--queries 20000] [--repeat 3]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.benchlib import ROOT
from benchmarks.benchlib.data import BATCH, random_fingerprints, url_keys
from benchmarks.benchlib.measure import median_of
from benchmarks.benchlib.report import make_parser, write_json
from simhash_filter.index.backends.file import FileBackend
from simhash_filter.index.backends.file.records import HEADER_SIZE
from simhash_filter.index.tables import TableDesign, tables_for

K = 10
META = {"model": "bench", "sketch_bytes": 64}
ZERO = bytes(64)


def design_for(n: int) -> TableDesign:
    return TableDesign.parse(tables_for(n))


def build(path: Path, n: int) -> dict[str, float]:
    """Bulk-load n fingerprints; seconds and rate, disk bytes per fingerprint."""
    fps = random_fingerprints(n, seed=n)
    index = FileBackend(path, k=K, design=design_for(n), metadata=META)
    start = time.perf_counter()
    for lo in range(0, n, BATCH):
        keys = url_keys(lo, min(n, lo + BATCH))
        index.add_many(fps[lo : lo + BATCH], keys, [ZERO] * len(keys))
    index.close()  # fsync
    seconds = time.perf_counter() - start
    sizes = {p.name.split(".")[0]: p.stat().st_size for p in path.iterdir() if "." in p.name}
    key_bytes = sizes["urls"] - HEADER_SIZE
    return {
        "bulk_seconds": seconds,
        "bulk_per_second": n / seconds,
        "disk_bytes_per_fp": (sum(sizes.values()) - key_bytes) / n,
        "disk_bytes_per_fp_with_urls": sum(sizes.values()) / n,
        "url_bytes_per_fp": key_bytes / n,
    }


PROBE = r"""
import json, sys, time
import numpy as np
from simhash_filter.index.backends.file import FileBackend
from benchmarks.benchlib.data import random_fingerprints
from benchmarks.benchlib.measure import percentile, rss_bytes
from benchmarks.speed.bench_file_index import K, META, ZERO, design_for
path, n, queries = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
base = rss_bytes()
start = time.perf_counter()
index = FileBackend(path, k=K, design=design_for(n), metadata=META)
open_seconds = time.perf_counter() - start
rss = rss_bytes() - base
stored = random_fingerprints(n, seed=n)
rng = np.random.default_rng(1)
planted = stored[rng.integers(0, n, size=queries // 2)].copy()
flips = rng.integers(0, 64, size=(len(planted), 3))
for j in range(3):
    planted ^= np.uint64(1) << flips[:, j].astype(np.uint64)
fresh = random_fingerprints(queries - len(planted), seed=n + 1)
mix = np.concatenate([planted, fresh])
rng.shuffle(mix)
times = []
found = 0
for i, fp in enumerate(mix.tolist()):
    t = time.perf_counter_ns()
    found += bool(index.add_and_candidates(fp, f"https://new.example/{i}", ZERO, K))
    times.append(time.perf_counter_ns() - t)
index.close()
print(json.dumps({
    "open_seconds": open_seconds,
    "rss_bytes_per_fp": rss / n,
    "check_and_add_p50_us": percentile(times, 0.5) / 1000,
    "check_and_add_p99_us": percentile(times, 0.99) / 1000,
    "found": found,
    "planted": int(len(planted)),
}))
"""


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w", encoding="ascii") as f:
        f.write("3\n")


def probe(path: Path, n: int, queries: int, cold: bool) -> dict[str, float]:
    """Open in a new process (after a copy, so the adds of earlier runs do not accumulate)."""
    run = path.with_name(path.name + "-run")
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(path, run)
    if cold:
        drop_caches()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(run), str(n), str(queries)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    shutil.rmtree(run)
    return json.loads(out)


def main(argv: list[str] | None = None) -> None:
    parser = make_parser(__doc__, full=True)
    parser.add_argument("--sizes", default="1000000,10000000", help="comma-separated index sizes")
    parser.add_argument("--queries", type=int, default=20_000, help="single check-and-add calls timed per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per size (medians are reported)")
    parser.add_argument("--dir", type=Path, help="where to build the indexes (default: a temporary directory)")
    parser.add_argument("--drop-caches", action="store_true", help="empty the page cache before each open (root)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            runs = []
            for r in range(args.repeat):
                path = Path(tmp) / f"index-{n}"
                shutil.rmtree(path, ignore_errors=True)
                row = build(path, n)
                row.update(probe(path, n, args.queries, args.drop_caches))
                runs.append(row)
                print(f"  n={n:,} run {r + 1}: " + ", ".join(f"{k} {v:,.2f}" for k, v in row.items()), flush=True)
                shutil.rmtree(path)
            median = median_of(runs)
            results.append({"n": n, "design": design_for(n).name, **median})
    print()
    print(f"{'n':>12} {'design':>8} {'bulk/s':>10} {'open s':>7} {'RSS B/fp':>9} {'p50 us':>7} {'p99 us':>7}"
          f" {'disk B/fp':>10} {'+urls':>7}")  # fmt: skip
    for r in results:
        print(f"{r['n']:>12,} {r['design']:>8} {r['bulk_per_second']:>10,.0f} {r['open_seconds']:>7.2f} "
              f"{r['rss_bytes_per_fp']:>9.1f} {r['check_and_add_p50_us']:>7.1f} {r['check_and_add_p99_us']:>7.1f} "
              f"{r['disk_bytes_per_fp']:>10.1f} {r['disk_bytes_per_fp_with_urls']:>7.1f}")  # fmt: skip
    if args.json:
        write_json(args.json, results, indent=2)


if __name__ == "__main__":
    main()
