"""Why the on-disk index is an append-only log: the same work on SQLite (the embedded store every
Python has) beside it.

Both store N (fingerprint, URL) pairs and must give them back at open to build the in-memory permuted
tables (a B-tree cannot answer "within k bits" itself: Manku's tables are sorted on permuted bits, one
copy per table).  Measured: bulk load (batches of 100,000), re-reading every fingerprint at open, one
durable add (SQLite: one transaction in WAL mode with ``synchronous=NORMAL``, which like the log
survives a process kill; the log: two ``write`` calls), a key read by row, and bytes on disk.

    python benchmarks/bench_storage_choice.py [--n 10000000] [--adds 5000] [--repeat 3]
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from pathlib import Path

import numpy as np
from benchlib.data import BATCH, random_fingerprints, url_keys
from benchlib.measure import median_of, percentile
from benchlib.report import make_parser

from simhash_filter.index.backends.file import FileBackend
from simhash_filter.index.backends.memory import MemoryBackend
from simhash_filter.index.tables import choose_design


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def p99(times: list[float]) -> float:
    """The 99th percentile in microseconds."""
    return percentile(times, 0.99) * 1e6


def run_log(tmp: Path, n: int, adds: int) -> dict[str, float]:
    fps = random_fingerprints(n, seed=n)
    path = tmp / "log"
    design = choose_design(3, n)
    index = FileBackend(path, k=3, design=design)
    start = time.perf_counter()
    for lo in range(0, n, BATCH):
        index.add_many(fps[lo : lo + BATCH], url_keys(lo, min(n, lo + BATCH)))
    index.close()
    bulk = time.perf_counter() - start
    start = time.perf_counter()
    index = FileBackend(path, k=3, design=design)
    reopen = time.perf_counter() - start
    new = random_fingerprints(adds, seed=n + 1).tolist()
    add_times = []
    for i, fp in enumerate(new):
        t = time.perf_counter()
        index.add(fp, f"https://new.example/{i}")
        add_times.append(time.perf_counter() - t)
    rows = np.random.default_rng(2).integers(0, n, size=adds).tolist()
    start = time.perf_counter()
    for row in rows:
        index._key(row)
    key_us = (time.perf_counter() - start) / adds * 1e6
    index.close()
    return {
        "bulk_s": bulk, "open_s": reopen, "add_p99_us": p99(add_times), "key_us": key_us, "disk_B": disk_bytes(path)
    }  # fmt: skip


def run_sqlite(tmp: Path, n: int, adds: int) -> dict[str, float]:
    fps = random_fingerprints(n, seed=n)
    path = tmp / "index.sqlite"
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE pages (id INTEGER PRIMARY KEY, fp INTEGER NOT NULL, url TEXT NOT NULL)")
    signed = fps.view(np.int64)  # SQLite integers are signed 64-bit
    start = time.perf_counter()
    for lo in range(0, n, BATCH):
        with db:
            db.executemany(
                "INSERT INTO pages (fp, url) VALUES (?, ?)",
                zip(signed[lo : lo + BATCH].tolist(), url_keys(lo, min(n, lo + BATCH)), strict=True),
            )
    db.close()
    bulk = time.perf_counter() - start
    start = time.perf_counter()
    db = sqlite3.connect(path)
    column = np.fromiter((row[0] for row in db.execute("SELECT fp FROM pages ORDER BY id")), dtype=np.int64, count=n)
    MemoryBackend(k=3, design=choose_design(3, n)).add_many(column.view(np.uint64), [""] * n)  # the tables
    reopen = time.perf_counter() - start
    new = random_fingerprints(adds, seed=n + 1).view(np.int64).tolist()
    add_times = []
    for i, fp in enumerate(new):
        t = time.perf_counter()
        with db:
            db.execute("INSERT INTO pages (fp, url) VALUES (?, ?)", (fp, f"https://new.example/{i}"))
        add_times.append(time.perf_counter() - t)
    rows = np.random.default_rng(2).integers(1, n + 1, size=adds).tolist()
    start = time.perf_counter()
    for row in rows:
        db.execute("SELECT url FROM pages WHERE id = ?", (row,)).fetchone()
    key_us = (time.perf_counter() - start) / adds * 1e6
    db.close()
    return {"bulk_s": bulk, "open_s": reopen, "add_p99_us": p99(add_times), "key_us": key_us, "disk_B": disk_bytes(tmp)}


def main(argv: list[str] | None = None) -> None:
    parser = make_parser(__doc__, full=True)
    parser.add_argument("--n", type=int, default=10_000_000, help="stored fingerprints")
    parser.add_argument("--adds", type=int, default=5000, help="single durable adds timed")
    parser.add_argument("--repeat", type=int, default=3, help="runs (medians are reported)")
    args = parser.parse_args(argv)
    results: dict[str, list[dict[str, float]]] = {"append-only log": [], "SQLite (WAL)": []}
    for r in range(args.repeat):
        for name, run in (("append-only log", run_log), ("SQLite (WAL)", run_sqlite)):
            with tempfile.TemporaryDirectory() as tmp:
                row = run(Path(tmp), args.n, args.adds)
            results[name].append(row)
            print(f"  run {r + 1} {name}: " + ", ".join(f"{k} {v:,.2f}" for k, v in row.items()), flush=True)
    print(f"\nn = {args.n:,}, medians of {args.repeat}")
    print(f"{'store':<18}{'bulk load s':>12}{'open s':>8}{'add p99 us':>12}{'key read us':>12}{'disk B/fp':>11}")
    for name, rows in results.items():
        m = median_of(rows)
        print(f"{name:<18}{m['bulk_s']:>12.2f}{m['open_s']:>8.2f}{m['add_p99_us']:>12.1f}{m['key_us']:>12.1f}"
              f"{m['disk_B'] / args.n:>11.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
