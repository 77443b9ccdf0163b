"""Cost of two-stage detection in the memory index: bytes per page, and check-and-add latency at scale.

    python benchmarks/bench_two_stage.py --sizes 1000000,10000000 --queries 20000

For each size: an index of that many pages (random 64-bit fingerprints, 10 % of them variants of earlier ones
with 1-12 bits flipped, each with a 64-byte sketch), built with one bulk ``add_many``.  Then
``NearDuplicateIndex.check_and_add`` of ``--queries`` new pages, half variants of stored pages (1-12 bits
flipped, their sketch a few bits off the original's) and half unrelated pages, each stored as it is checked,
as in a crawl.  Reported: the index's numpy bytes per page (fingerprint, sketch, tables; the key strings are
kept beside it and not counted), the median and 99th percentile of one check-and-add (``perf_counter_ns``),
the mean number of candidates per check, and the share of planted variants found.  The defaults are the
model's (``simhash_filter.config``: k = 10, tables 13+13+13+13+12, similarity 0.75).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simhash_filter.config import DEFAULTS
from simhash_filter.index import NearDuplicateIndex

SKETCH = DEFAULTS.fingerprint.sketch_bins // 8


def _flip(rng: np.random.Generator, values: np.ndarray, low: int, high: int) -> np.ndarray:
    """Each value with low..high random bits flipped."""
    out = values.copy()
    counts = rng.integers(low, high + 1, size=len(values))
    for n in range(low, high + 1):
        sel = counts == n
        if not sel.any():
            continue
        masks = np.zeros(int(sel.sum()), dtype=np.uint64)
        for _ in range(n):  # a bit flipped twice cancels: close enough for a benchmark
            masks ^= np.uint64(1) << rng.integers(0, 64, size=len(masks)).astype(np.uint64)
        out[sel] ^= masks
    return out


def _near(rng: np.random.Generator, sketches: np.ndarray, bits: int = 6) -> np.ndarray:
    """Sketches with a few random bits flipped (similarity about 1 - 4 * bits / 512)."""
    out = sketches.copy()
    for _ in range(bits):
        rows = np.arange(len(out))
        out[rows, rng.integers(0, SKETCH, size=len(out))] ^= np.uint8(1) << rng.integers(0, 8, size=len(out)).astype(
            np.uint8
        )
    return out


def run(size: int, queries: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64, size=size, dtype=np.uint64)
    sketches = rng.integers(0, 256, size=(size, SKETCH), dtype=np.uint8)
    planted = rng.choice(size, size // 10, replace=False)
    planted = planted[planted > 0]
    sources = (planted * rng.random(len(planted))).astype(np.int64)  # an earlier page
    fps[planted] = _flip(rng, fps[sources], 1, 12)
    sketches[planted] = _near(rng, sketches[sources])
    index = NearDuplicateIndex(DEFAULTS.max_distance, design=DEFAULTS.tables, metadata=DEFAULTS.index_metadata(),
                               min_similarity=DEFAULTS.min_similarity)  # fmt: skip
    start = time.perf_counter()
    index.add_many(fps, [f"https://example.com/{i}" for i in range(size)], [bytes(row) for row in sketches])
    build = time.perf_counter() - start
    backend = index.backend
    per_page = backend.nbytes / len(backend)  # type: ignore[attr-defined]

    half = queries // 2
    src = rng.integers(0, size, size=half)
    q_fps = np.concatenate([_flip(rng, fps[src], 1, 12), rng.integers(0, 2**64, size=queries - half, dtype=np.uint64)])
    q_sk = np.concatenate([_near(rng, sketches[src]), rng.integers(0, 256, size=(queries - half, SKETCH),
                                                                   dtype=np.uint8)])  # fmt: skip
    times: list[int] = []
    candidates = 0
    found = 0
    for i, (fp, sk) in enumerate(zip(q_fps.tolist(), q_sk, strict=True)):
        sketch = bytes(sk)
        t0 = time.perf_counter_ns()
        match = index.check_and_add(fp, f"https://example.org/{i}", sketch)
        times.append(time.perf_counter_ns() - t0)
        candidates += len(backend.candidates(fp, DEFAULTS.max_distance)) - 1  # this page is stored now
        found += i < half and match is not None
    times.sort()
    return {
        "size": size,
        "build_s": round(build, 2),
        "bytes_per_page": round(per_page, 1),
        "check_and_add_p50_us": round(statistics.median(times) / 1000, 1),
        "check_and_add_p99_us": round(times[int(0.99 * (len(times) - 1))] / 1000, 1),
        "candidates_per_check": round(candidates / queries, 2),
        "variants_found": round(found / half, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000000", help="comma-separated index sizes (default: 1000000)")
    parser.add_argument("--queries", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    results = [run(int(s), args.queries, args.seed) for s in args.sizes.split(",")]
    for r in results:
        print(json.dumps(r))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
