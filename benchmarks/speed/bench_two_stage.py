"""Cost of two-stage detection in the memory index: bytes per page, and check-and-add latency at scale.

    python -m benchmarks.speed.bench_two_stage --sizes 1000000,10000000 --queries 20000

For each size: an index of that many pages (random 64-bit fingerprints, 10 % of them variants of earlier ones
with 1-12 bits flipped, each with a 64-byte sketch), built with one bulk ``add_many``.  Then
``NearDuplicateIndex.check_and_add`` of ``--queries`` new pages, half variants of stored pages (1-12 bits
flipped, their sketch a few bits off the original's) and half unrelated pages, each stored as it is checked,
as in a crawl.  Reported: the index's numpy bytes per page (fingerprint, sketch, tables; the key strings are
kept beside it and not counted), the median and 99th percentile of one check-and-add (``perf_counter_ns``),
the mean number of candidates per check, and the share of planted variants found.  The defaults are the
model's (``simhash_filter.config``: k = 10, tables 13+13+13+13+12, similarity 0.75).

Before and after, side by side: ``--compare OLD.py`` builds a second index on the same pages with the
``MemoryBackend`` of another copy of ``simhash_filter/index/backends/memory/backend.py`` (the same interface,
e.g. the last commit's, when it changed only that module)::

    git show HEAD:simhash_filter/index/backends/memory/backend.py > /tmp/memory_before.py
    python -m benchmarks.speed.bench_two_stage --sizes 1000000,10000000 --queries 20000 --compare /tmp/memory_before.py

and runs each page's check-and-add on both, alternating which goes first, so that both see the same load of
a shared machine; the answers must be the same (else the run stops).  Each line then has a ``backend`` field.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.benchlib.report import make_parser, write_json
from simhash_filter.config import DEFAULTS
from simhash_filter.index.backends.memory import MemoryBackend
from simhash_filter.index.nearduplicate import NearDuplicateIndex
from simhash_filter.index.tables import TableDesign

SKETCH = DEFAULTS.fingerprint.sketch_bytes  # stored: the word sketch, then (model v6) the prose part


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


def load_backend(path: Path) -> type[MemoryBackend]:
    """The ``MemoryBackend`` class of another copy of ``memory.py``."""
    spec = importlib.util.spec_from_file_location(f"_bench_memory_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MemoryBackend  # type: ignore[no-any-return]


def run(size: int, queries: int, seed: int, backends: dict[str, type[MemoryBackend]]) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64, size=size, dtype=np.uint64)
    sketches = rng.integers(0, 256, size=(size, SKETCH), dtype=np.uint8)
    planted = rng.choice(size, size // 10, replace=False)
    planted = planted[planted > 0]
    sources = (planted * rng.random(len(planted))).astype(np.int64)  # an earlier page
    fps[planted] = _flip(rng, fps[sources], 1, 12)
    sketches[planted] = _near(rng, sketches[sources])
    keys = [f"https://example.com/{i}" for i in range(size)]
    sketch_list = [bytes(row) for row in sketches]
    design = TableDesign.parse(DEFAULTS.tables)
    k = DEFAULTS.max_distance
    indexes: dict[str, NearDuplicateIndex] = {}
    out: dict[str, dict[str, Any]] = {}
    for name, cls in backends.items():
        backend = cls(k=k, design=design, metadata=DEFAULTS.index_metadata())
        index = NearDuplicateIndex(k, backend=backend, min_similarity=DEFAULTS.min_similarity)
        start = time.perf_counter()
        index.add_many(fps, keys, sketch_list)
        build = time.perf_counter() - start
        indexes[name] = index
        per_page = backend.nbytes / len(backend)
        out[name] = {"size": size, "build_s": round(build, 2), "bytes_per_page": round(per_page, 1)}
    del sketch_list
    gc.collect()

    half = queries // 2
    src = rng.integers(0, size, size=half)
    q_fps = np.concatenate([_flip(rng, fps[src], 1, 12), rng.integers(0, 2**64, size=queries - half, dtype=np.uint64)])
    q_sk = np.concatenate([_near(rng, sketches[src]), rng.integers(0, 256, size=(queries - half, SKETCH),
                                                                   dtype=np.uint8)])  # fmt: skip
    names = list(indexes)
    times: dict[str, list[int]] = {name: [] for name in names}
    candidates = dict.fromkeys(names, 0)
    found = dict.fromkeys(names, 0)
    for i, (fp, sk) in enumerate(zip(q_fps.tolist(), q_sk, strict=True)):
        sketch = bytes(sk)
        key = f"https://example.org/{i}"
        answers = []
        for name in names if i % 2 == 0 else names[::-1]:  # alternate which goes first
            index = indexes[name]
            t0 = time.perf_counter_ns()
            match = index.check_and_add(fp, key, sketch)
            times[name].append(time.perf_counter_ns() - t0)
            candidates[name] += len(index.backend.candidates(fp, k)) - 1  # this page is stored now
            found[name] += i < half and match is not None
            answers.append(match)
        if any(a != answers[0] for a in answers):
            raise SystemExit(f"the backends disagree on page {i} ({fp:#018x}): {answers}")
    results = []
    for name in names:
        ts = sorted(times[name])
        out[name].update(
            check_and_add_p50_us=round(statistics.median(ts) / 1000, 1),
            check_and_add_p99_us=round(ts[int(0.99 * (len(ts) - 1))] / 1000, 1),
            candidates_per_check=round(candidates[name] / queries, 2),
            variants_found=round(found[name] / half, 3),
        )
        results.append(({"backend": name} if len(names) > 1 else {}) | out[name])
    return results


def main() -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--sizes", default="1000000", help="comma-separated index sizes (default: 1000000)")
    parser.add_argument("--queries", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--compare", type=Path, metavar="OLD.py", help="also run the MemoryBackend of this file")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    backends: dict[str, type[MemoryBackend]] = {"current": MemoryBackend}
    if args.compare:
        backends = {"compared": load_backend(args.compare), **backends}
    results = [r for s in args.sizes.split(",") for r in run(int(s), args.queries, args.seed, backends)]
    for r in results:
        print(json.dumps(r))
    if args.json:
        write_json(args.json, results, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
