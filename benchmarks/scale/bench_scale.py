"""Bounded buckets at any size: which table designs keep the public set's real near-duplicate pairs, and what a
check costs in memory at 1M-100M pages with those pairs planted at their real distances and similarities.

``designs``: every true pair of the public set (``truth.json.gz``) fingerprinted by the model; of the pairs that
today's design finds (within k = 10, agreeing on a 13-bit lead, sketches verifying), the share each candidate
generator keeps, and the entries a check scans per table at 1M, 100M and 1B pages (random fingerprints):
:data:`~simhash_filter.index.tables.SIZED_TABLES`, other partitions of the 64 bits, tables of random bit
positions, and LSH bands of the sketch (``r`` bits a band).

    python -m benchmarks.scale.bench_scale designs

``memory``: an index of ``--sizes`` pages (random fingerprints and sketches, 50-byte URLs) built for the size
(``--expected-pages``, default the size: ``SIMHASH_EXPECTED_PAGES``), in which every verified true pair of the
public set is planted: its first page stored as a random fingerprint F with its real sketch, its second page
checked as F XOR (the pair's real XOR) with its real sketch, as in a crawl (check-and-add), alternated with as
many new random pages.  Reported: bytes per page (numpy arrays, and the URL strings as Python holds them), the
p50/p99 of one check-and-add (``perf_counter_ns``), and the share of planted pairs found.

    python -m benchmarks.scale.bench_scale memory --sizes 1000000,10000000 [--expected-pages N]
"""

from __future__ import annotations

import gc
import gzip
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.benchlib import ROOT
from benchmarks.benchlib.data import PUBLIC_PAGES, read_jsonl
from benchmarks.benchlib.report import make_parser, write_json
from simhash_filter.config import DEFAULTS
from simhash_filter.index.backends.memory import MemoryBackend
from simhash_filter.index.nearduplicate import NearDuplicateIndex
from simhash_filter.index.tables import SIZED_TABLES, TableDesign, tables_for
from simhash_filter.model.fingerprint import Fingerprinter

SKETCH = DEFAULTS.fingerprint.word_sketch_bytes
CACHE = ROOT / "out" / "bench_scale_pairs.npz"


def public_pairs() -> dict[str, np.ndarray]:
    """The public set's true pairs: both pages' fingerprints and sketches (pages without one left out); cached in
    ``out/`` under the model's id."""
    model = DEFAULTS.fingerprint.model_id()
    if CACHE.exists():
        cached = dict(np.load(CACHE))
        if str(cached.pop("model")) == model:
            return cached
    fingerprinter = Fingerprinter(DEFAULTS.fingerprint)
    fps, sketches = [], []
    for row in read_jsonl(PUBLIC_PAGES):
        fp = fingerprinter.fingerprint(row["html"])
        fps.append(fp.value if fp.ok else None)
        sketches.append(fp.word_sketch if fp.ok else None)  # the bound verifies the word sketch alone
    truth = json.loads(gzip.decompress(PUBLIC_PAGES.with_name("truth.json.gz").read_bytes()))
    place = {page["id"]: n for n, page in enumerate(truth["pages"])}
    pairs = [(place[a], place[b]) for a, b, *_ in truth["true_pairs"]]
    pairs = [(a, b) for a, b in pairs if fps[a] is not None and fps[b] is not None]
    out = {
        "a": np.array([fps[a] for a, _ in pairs], dtype=np.uint64),
        "b": np.array([fps[b] for _, b in pairs], dtype=np.uint64),
        "sa": np.frombuffer(b"".join(sketches[a] for a, _ in pairs), dtype=np.uint8).reshape(-1, SKETCH),
        "sb": np.frombuffer(b"".join(sketches[b] for _, b in pairs), dtype=np.uint8).reshape(-1, SKETCH),
    }
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    np.savez(CACHE, model=np.array(model), **out)
    return out


def _popcount(x: np.ndarray) -> np.ndarray:
    return np.unpackbits(x.view(np.uint8).reshape(len(x), -1), axis=1).sum(axis=1)


def _agree(x: np.ndarray, masks: list[int]) -> np.ndarray:
    found = np.zeros(len(x), dtype=bool)
    for mask in masks:
        found |= (x & np.uint64(mask)) == 0
    return found


def _random_masks(bits: int, tables: int, rng: np.random.Generator) -> list[int]:
    return [sum(1 << int(p) for p in rng.choice(64, bits, replace=False)) for _ in range(tables)]


def designs(args: Any) -> list[dict[str, Any]]:
    pairs = public_pairs()
    x = pairs["a"] ^ pairs["b"]
    distance = _popcount(x)
    sketch_x = np.unpackbits(pairs["sa"] ^ pairs["sb"], axis=1, bitorder="little")
    verified = 2 * (1 - sketch_x.sum(axis=1) / (8 * SKETCH)) - 1 >= DEFAULTS.min_similarity
    k = DEFAULTS.max_distance
    today = verified & (distance <= k) & _agree(x, list(TableDesign.parse(DEFAULTS.tables).lead_masks))
    base = int(today.sum())
    rng = np.random.default_rng(args.seed)
    generators: list[tuple[str, int, int, np.ndarray]] = []  # name, tables, bits a lead, found (before verifying)
    names = [*SIZED_TABLES, "4x16/k3", "22+21+21/k2", "13+13+13+13+12/k3", "10+9+9+9+9+9+9/k5"]
    for name in names:
        design = TableDesign.parse(name)
        found = (distance <= k) & _agree(x, list(design.lead_masks))
        generators.append((name, design.n_tables, min(design.lead_bits), found))
    for bits in (20, 23):
        for tables in (5, 8, 16, 32):
            found = (distance <= k) & _agree(x, _random_masks(bits, tables, rng))
            generators.append((f"{tables} tables of {bits} random bits", tables, bits, found))
    for bits in (20, 23, 26):
        for tables in (5, 8, 10, 16):
            found = np.zeros(len(x), dtype=bool)
            for t in range(tables):
                found |= sketch_x[:, t * bits : (t + 1) * bits].sum(axis=1) == 0
            generators.append((f"{tables} sketch bands of {bits} bits", tables, bits, found))
    out = []
    for name, tables, bits, found in generators:
        kept = int((found & verified).sum())
        row: dict[str, Any] = {"design": name, "tables": tables, "lead_bits": bits, "pairs": kept,
                               "of_today": round(kept / base, 4)}  # fmt: skip
        for size in (10**6, 10**8, 10**9):
            row[f"scan_{size:.0e}"] = round(tables * size / 2**bits)
        out.append(row)
    print(f"{len(x)} true pairs with fingerprints, {int(verified.sum())} verify, today's design finds {base}",
          file=sys.stderr)  # fmt: skip
    return out


def _url_bytes(keys: list[str]) -> float:
    """Bytes a page's URL takes as Python holds it: the str object and the list's pointer."""
    sample = keys[:: max(1, len(keys) // 10000)]
    return sum(sys.getsizeof(k) for k in sample) / len(sample) + 8


def memory(args: Any) -> list[dict[str, Any]]:
    pairs = public_pairs()
    x = pairs["a"] ^ pairs["b"]
    sim = 2 * (1 - np.unpackbits(pairs["sa"] ^ pairs["sb"], axis=1).sum(axis=1) / (8 * SKETCH)) - 1
    keep = sim >= DEFAULTS.min_similarity
    x, sa, sb = x[keep], pairs["sa"][keep], pairs["sb"][keep]
    k = DEFAULTS.max_distance
    out = []
    for size in (int(s) for s in args.sizes.split(",")):
        rng = np.random.default_rng(args.seed)
        expected = args.expected_pages or size
        design = TableDesign.parse(tables_for(expected))
        fps = rng.integers(0, 2**64, size=size, dtype=np.uint64)
        sketches = rng.integers(0, 256, size=(size, SKETCH), dtype=np.uint8)
        places = rng.choice(size, len(x), replace=False)  # where the pairs' first pages are stored
        sketches[places] = sa
        keys = [f"https://www.example.com/section/article-{i:012d}.html" for i in range(size)]
        backend = MemoryBackend(k=k, design=design, metadata=DEFAULTS.index_metadata())
        index = NearDuplicateIndex(k, backend=backend, min_similarity=DEFAULTS.min_similarity)
        start = time.perf_counter()
        step = 1_000_000
        for lo in range(0, size, step):
            index.add_many(fps[lo : lo + step], keys[lo : lo + step], [bytes(r) for r in sketches[lo : lo + step]])
        build = time.perf_counter() - start
        gc.collect()
        queries = np.empty(2 * len(x), dtype=np.uint64)
        queries[0::2] = fps[places] ^ x
        queries[1::2] = rng.integers(0, 2**64, size=len(x), dtype=np.uint64)
        q_sketches = np.empty((2 * len(x), SKETCH), dtype=np.uint8)
        q_sketches[0::2] = sb
        q_sketches[1::2] = rng.integers(0, 256, size=(len(x), SKETCH), dtype=np.uint8)
        times, found = [], 0
        for i, (fp, sk) in enumerate(zip(queries.tolist(), q_sketches, strict=True)):
            t0 = time.perf_counter_ns()
            match = index.check_and_add(fp, f"https://query.example.org/{i}", bytes(sk))
            times.append(time.perf_counter_ns() - t0)
            found += i % 2 == 0 and match is not None and match.key == keys[places[i // 2]]
        times.sort()
        row = {
            "size": size,
            "expected_pages": expected,
            "design": design.name,
            "build_s": round(build, 1),
            "index_bytes_per_page": round(backend.nbytes / len(backend), 1),
            "url_bytes_per_page": round(_url_bytes(keys), 1),
            "check_p50_us": round(statistics.median(times) / 1000, 1),
            "check_p99_us": round(times[int(0.99 * (len(times) - 1))] / 1000, 1),
            "planted_pairs": len(x),
            "planted_found": round(found / len(x), 4),
        }
        print(json.dumps(row), flush=True)
        out.append(row)
        del index, backend, fps, sketches, keys
        gc.collect()
    return out


def main() -> int:
    parser = make_parser(__doc__)
    parser.add_argument("what", choices=("designs", "memory"))
    parser.add_argument("--sizes", default="1000000")
    parser.add_argument("--expected-pages", type=int, default=0, help="the index's design size (default: its size)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    results = designs(args) if args.what == "designs" else memory(args)
    if args.what == "designs":
        for row in results:
            print(json.dumps(row))
    if args.json:
        write_json(args.json, results, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
