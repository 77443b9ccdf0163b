"""One machine, 100M pages: the on-disk index with its tables on disk (``file://DIR?tables=disk``), at N pages.

``build``: an index of ``--size`` pages (random fingerprints and sketches, 50-byte URLs) built for that size
(``tables_for``: fifteen tables from 4.2M pages on) through ``add_many`` in batches of a million (the longest call
is reported: it waits for a spill, never for a merge), every verified true pair of the public set planted (its
first page stored as a random fingerprint F with its real sketch; F and the pair's real XOR and second sketch kept
in ``planted.npz`` beside the index).  Reported: build time, peak RSS, the files' sizes.

``check``, in a new process: the open (wall time; ``--cold`` drops the page cache first, as root; ``--warm`` reads
the run files once first, so that the page cache holds them as it would in a long crawl), then every
planted pair's second page checked (check-and-add through ``NearDuplicateIndex``, as a crawl does) alternated with
as many new random pages, all stored.  Reported: open seconds, RSS after opening and its peak while checking
(``VmHWM`` reset after the open: ``/proc/self/clear_refs``), check p50/p99 (``perf_counter_ns``), the share of
planted pairs found (on the first run only: a later one meets the pages the first stored), and bytes of memory
per page.

    python -m benchmarks.scale.bench_disk build --size 100000000 --dir /work/bench-disk
    python -m benchmarks.scale.bench_disk check --dir /work/bench-disk [--cold | --warm]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.benchlib.report import make_parser, write_json
from benchmarks.scale.bench_scale import SKETCH, public_pairs
from simhash_filter.config import DEFAULTS
from simhash_filter.index.backends.file import FileBackend
from simhash_filter.index.nearduplicate import NearDuplicateIndex
from simhash_filter.index.tables import TableDesign, tables_for

STEP = 1_000_000


def _status(field: str) -> int:
    """A ``/proc/self/status`` field in bytes (VmRSS, VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


#: The prose part stored after each word sketch (model v6): none of these made-up pages is article-like.
PROSE = bytes(DEFAULTS.fingerprint.sketch_bytes - SKETCH)


def _uri(directory: Path, spill_rows: int) -> str:
    return f"file://{directory}/index?tables=disk&spill_rows={spill_rows}"


def _planted() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The verified true pairs: their XORs, first and second sketches."""
    pairs = public_pairs()
    sim = 2 * (1 - np.unpackbits(pairs["sa"] ^ pairs["sb"], axis=1).sum(axis=1) / (8 * SKETCH)) - 1
    keep = sim >= DEFAULTS.min_similarity
    return (pairs["a"] ^ pairs["b"])[keep], pairs["sa"][keep], pairs["sb"][keep]


def _key(i: int) -> str:
    return f"https://www.example.com/section/article-{i:012d}.html"


def build(args: Any) -> dict[str, Any]:
    x, sa, sb = _planted()
    size = args.size
    design = TableDesign.parse(tables_for(size))
    rng = np.random.default_rng(args.seed)
    places = np.sort(rng.choice(size, len(x), replace=False))
    args.dir.mkdir(parents=True, exist_ok=True)
    backend = FileBackend.from_uri(
        _uri(args.dir, args.spill_rows), k=DEFAULTS.max_distance, design=design, metadata=DEFAULTS.index_metadata()
    )
    planted_fps = np.empty(len(x), dtype=np.uint64)
    longest = 0.0
    start = time.perf_counter()
    for lo in range(0, size, STEP):
        hi = min(size, lo + STEP)
        fps = rng.integers(0, 2**64, size=hi - lo, dtype=np.uint64)
        sketches = rng.integers(0, 256, size=(hi - lo, SKETCH), dtype=np.uint8)
        here = (places >= lo) & (places < hi)
        sketches[places[here] - lo] = sa[here]
        planted_fps[here] = fps[places[here] - lo]
        keys, rows = [_key(i) for i in range(lo, hi)], [bytes(r) + PROSE for r in sketches]
        t0 = time.perf_counter()
        backend.add_many(fps, keys, rows)
        longest = max(longest, time.perf_counter() - t0)
        if lo // STEP % 10 == 9:
            print(f"{hi:,} pages, {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    backend.disk.wait_for_merges()
    seconds = time.perf_counter() - start
    info = backend.info()
    backend.close()
    np.savez(args.dir / "planted.npz", fps=planted_fps, places=places, x=x, sb=sb, size=np.array(size))
    return {
        "size": size,
        "design": design.name,
        "spill_rows": args.spill_rows,
        "build_s": round(seconds, 1),
        "longest_add_many_s": round(longest, 1),
        "build_peak_rss_gb": round(_status("VmHWM") / 1e9, 2),
        "run_files": info["run_files"],
        "disk_gb": round(sum(p.stat().st_size for p in (args.dir / "index").iterdir()) / 1e9, 2),
        "run_file_gb": round(info["run_file_bytes"] / 1e9, 2),
    }


def check(args: Any) -> dict[str, Any]:
    planted = np.load(args.dir / "planted.npz")
    size = int(planted["size"])
    design = TableDesign.parse(tables_for(size))
    if args.cold:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    elif args.warm:  # the run files read once: the page cache holds them, as in a long crawl with RAM to spare
        for path in sorted((args.dir / "index").glob("tables.*")):
            with path.open("rb") as f:
                while f.read(1 << 24):
                    pass
    rss_before = _status("VmRSS")
    start = time.perf_counter()
    backend = FileBackend.from_uri(
        _uri(args.dir, args.spill_rows), k=DEFAULTS.max_distance, design=design, metadata=DEFAULTS.index_metadata()
    )
    opened = time.perf_counter() - start
    rss_open = _status("VmRSS")
    first = len(backend) == size  # a later run finds the pages an earlier one stored: its recall is not counted
    Path("/proc/self/clear_refs").write_text("5\n")  # VmHWM from here on
    index = NearDuplicateIndex(DEFAULTS.max_distance, backend=backend, min_similarity=DEFAULTS.min_similarity)
    rng = np.random.default_rng(args.seed + 1)
    x, sb, fps, places = planted["x"], planted["sb"], planted["fps"], planted["places"]
    n = len(x) if not args.checks else min(len(x), args.checks // 2)
    queries = np.empty(2 * n, dtype=np.uint64)
    queries[0::2] = fps[:n] ^ x[:n]
    queries[1::2] = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    q_sketches = np.empty((2 * n, SKETCH), dtype=np.uint8)
    q_sketches[0::2] = sb[:n]
    q_sketches[1::2] = rng.integers(0, 256, size=(n, SKETCH), dtype=np.uint8)
    times, found = [], 0
    for i, (fp, sk) in enumerate(zip(queries.tolist(), q_sketches, strict=True)):
        t0 = time.perf_counter_ns()
        match = index.check_and_add(fp, f"https://query.example.org/{size}/{i}", bytes(sk) + PROSE)
        times.append(time.perf_counter_ns() - t0)
        found += i % 2 == 0 and match is not None and match.key == _key(int(places[i // 2]))
    times.sort()
    row = {
        "size": size,
        "design": design.name,
        "page_cache": "dropped" if args.cold else "run files read" if args.warm else "as left",
        "open_s": round(opened, 2),
        "rss_after_open_gb": round(rss_open / 1e9, 2),
        "rss_before_open_gb": round(rss_before / 1e9, 2),
        "peak_rss_checking_gb": round(_status("VmHWM") / 1e9, 2),
        "memory_bytes_per_page": round(backend.nbytes / size, 1),
        "checks": len(times),
        "check_p50_us": round(statistics.median(times) / 1000, 1),
        "check_p99_us": round(times[int(0.99 * (len(times) - 1))] / 1000, 1),
        "planted_pairs": n,
        "planted_found": round(found / n, 4) if first else None,
    }
    backend.close()
    return row


def main() -> int:
    parser = make_parser(__doc__)
    parser.add_argument("what", choices=("build", "check"))
    parser.add_argument("--size", type=int, default=10_000_000)
    parser.add_argument("--dir", type=Path, required=True, help="where the index (and planted.npz) go")
    parser.add_argument("--spill-rows", type=int, default=4 * STEP, help="the index's spill_rows")
    parser.add_argument("--cold", action="store_true", help="drop the page cache before opening (root)")
    parser.add_argument("--warm", action="store_true", help="read the run files once before opening")
    parser.add_argument("--checks", type=int, default=0, help="at most this many checks (default: 2 per pair)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()
    row = build(args) if args.what == "build" else check(args)
    print(json.dumps(row), flush=True)
    if args.json:
        write_json(args.json, row, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
