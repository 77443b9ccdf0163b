"""What checking a run file's entries a block at a time costs: bytes and the time of a check's bucket reads.

A run file of ``--rows`` random rows and the tables of ``--pages`` (fifteen from 4.2M pages on) is written once
per block size (``--blocks``; ``0``: no block checks, the run-file format 1 of the version before, run with that
version's package on ``PYTHONPATH``), its pages read once (the page cache holds it, as in a long crawl), then the
buckets of ``--checks`` random fingerprints read from it, as a check does (``RunFile.buckets``: one ``pread`` a table,
its blocks checked).  Reported per block size: the file's and the block checks' bytes per row (memory holds the
checks), and the p50 / p99 / mean of one run file's bucket reads (a check reads one per run file: three at 100M pages).

    python -m benchmarks.speed.bench_run_checks --rows 4000000 --blocks 64,256,1024,4096
    PYTHONPATH=/path/to/the/version/before python -m benchmarks.speed.bench_run_checks --rows 4000000 --blocks 0
"""

from __future__ import annotations

import inspect
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.benchlib.report import make_parser, write_json
from simhash_filter.index.backends.file import runfiles
from simhash_filter.index.tables import TableDesign, tables_for

SALT = 12345


def _write_and_open(directory: Path, design: TableDesign, fps: np.ndarray, block: int) -> Any:
    """Write the run file of *fps* with block checks every *block* entries (0: the version's own format) and open it,
    its columns read back into fresh arrays."""
    added = np.zeros(len(fps), dtype=np.uint32)
    refused = np.zeros(len(fps), dtype=np.uint16 if design.n_tables > 8 else np.uint8)
    has_blocks = "block" in inspect.signature(runfiles.write_run).parameters
    if block and not has_blocks:
        raise SystemExit("this version writes no block checks: --blocks 0 only")
    extra = {"block": block} if block else {}
    path = runfiles.write_run(directory, 1, SALT, design, 0, fps, added, refused, 5, **extra)
    columns = (np.empty_like(fps), np.empty_like(added), np.empty_like(refused))
    if has_blocks:
        run = runfiles.RunFile.open(path, SALT, design, columns)
    else:  # the version before: RunFile.open(path, salt, design, refused dtype, columns)
        run = runfiles.RunFile.open(path, SALT, design, refused.dtype, columns)
    with path.open("rb") as f:  # into the page cache
        while f.read(1 << 24):
            pass
    return run


def measure(rows: int, pages: int, block: int, checks: int, seed: int) -> dict[str, Any]:
    design = TableDesign.parse(tables_for(pages))
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64, size=rows, dtype=np.uint64)
    queries = rng.integers(0, 2**64, size=checks, dtype=np.uint64).tolist()
    leads = [design.lead_values(q) for q in queries]
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as tmp:
        directory = Path(tmp)
        run = _write_and_open(directory, design, fps, block)
        size = sum(p.stat().st_size for p in directory.iterdir())
        for lead in leads[:1000]:  # warm up
            run.buckets(lead)
        times = []
        for lead in leads:
            t0 = time.perf_counter_ns()
            run.buckets(lead)
            times.append(time.perf_counter_ns() - t0)
        checks_bytes = sum(t.checks.nbytes for t in run.tables) if block else 0
        run.close()
    times.sort()
    return {
        "rows": rows,
        "tables": design.n_tables,
        "block_entries": block,
        "file_bytes_per_row": round(size / rows, 3),
        "check_bytes_per_row": round(checks_bytes / rows, 3),
        "buckets_p50_us": round(statistics.median(times) / 1000, 2),
        "buckets_p99_us": round(times[int(0.99 * (len(times) - 1))] / 1000, 2),
        "buckets_mean_us": round(statistics.fmean(times) / 1000, 2),
    }


def main() -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--rows", type=int, default=4_000_000, help="rows of the run file")
    parser.add_argument("--pages", type=int, default=100_000_000, help="the pages the tables are built for")
    parser.add_argument("--blocks", default="64,256,1024,4096", help="entries per checked block (0: none)")
    parser.add_argument("--checks", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    rows = []
    for block in (int(b) for b in args.blocks.split(",")):
        row = measure(args.rows, args.pages, block, args.checks, args.seed)
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.json:
        write_json(args.json, rows, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
