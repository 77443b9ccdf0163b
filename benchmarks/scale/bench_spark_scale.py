"""The Spark job's pair finding at scale: synthetic fingerprints straight into its block stage, on ``local[2]``.

Fingerprinting is linear in the pages and measured elsewhere (``bench_spark.py``); what grows with the corpus is
the block stage: every page's row in each table's block, shuffled, sorted, and each block passed through
(``candidate_pairs`` of ``simhash_filter/batch/spark.py``, the same code as ``spark-dedup``).  Here each executor
makes its pages from their numbers (random fingerprints and sketches, 10 % of the pages near-duplicates of an
earlier page: 1-6 bits of the fingerprint and a few bits of the sketch changed; 40-byte URLs), the leads of the
design built for ``--expected-pages`` (default: the size), and the job counts the verified pairs.  Reported per
size: wall seconds of the block stage (rows made, shuffled, passed), the rows, the comparisons made in the block
passes, and a line fitted to them, seconds = fixed + a * rows, extrapolated to 10^8 and 10^9 pages in the tables
built for them (core-hours: two cores busy).

    python -m benchmarks.scale.bench_spark_scale --sizes 1000000,3000000,10000000 \
        [--expected-pages N] [--master local[2]]
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.benchlib.report import make_parser, write_json
from simhash_filter.config import DEFAULTS
from simhash_filter.index.tables import TableDesign, tables_for

SKETCH = DEFAULTS.fingerprint.word_sketch_bytes


def blocks_frame(spark: Any, size: int, design: TableDesign, partitions: int) -> Any:
    """The block rows ``(t, lead, number, fp, url, sketch)`` of *size* synthetic pages, made in the JVM: page *n*'s
    fingerprint and sketch are xxhash64s of *n*; every tenth page (n % 10 == 9) is a near-duplicate of page n - 7,
    with 1 or 2 fingerprint bits flipped and the same sketch."""
    from pyspark.sql import functions as F

    ids = spark.range(0, size, numPartitions=partitions)
    near = (F.col("id") % 10 == 9) & (F.col("id") >= 7)
    source = F.when(near, F.col("id") - 7).otherwise(F.col("id"))
    bit = "shiftleft(1L, cast(pmod(xxhash64(id, {}), 64) as int))"
    flips = F.expr(f"{bit.format(3)} | {bit.format(4)}")
    fp = F.xxhash64(source, F.lit(1))
    fp = F.when(near, fp.bitwiseXOR(flips)).otherwise(fp)
    words = [F.lpad(F.hex(F.xxhash64(source, F.lit(10 + i))), 16, "0") for i in range(SKETCH // 8)]
    pages = ids.select(
        F.col("id").alias("number"),
        fp.alias("fp"),
        F.concat(F.lit("https://www.example.com/p/"), F.col("id").cast("string")).alias("url"),
        F.unhex(F.concat(*words)).alias("sketch"),
    )
    leads = []
    for moves in design.lead_moves:
        lead = None
        for shift, mask, target in moves:
            part = F.shiftleft(F.shiftrightunsigned(F.col("fp"), shift).bitwiseAND(F.lit(mask).cast("long")), target)
            lead = part if lead is None else lead.bitwiseOR(part)
        leads.append(lead)
    return pages.select("number", "fp", "url", "sketch", F.posexplode(F.array(*leads)).alias("t", "lead"))


def run(spark: Any, size: int, expected: int, partitions: int) -> dict[str, Any]:
    from simhash_filter.batch.spark import candidate_pairs

    design = TableDesign.parse(tables_for(expected))
    bound = DEFAULTS.bound
    blocks = blocks_frame(spark, size, design, partitions)
    start = time.perf_counter()
    pairs = candidate_pairs(blocks, DEFAULTS.max_distance, bound, SKETCH)
    found = pairs.where(f"differ <= {bound.differing_bits(SKETCH)}").select("number").distinct().count()
    seconds = time.perf_counter() - start
    block = sum(size / 2**lead for lead in design.lead_bits) / design.n_tables
    return {
        "size": size,
        "design": design.name,
        "rows": size * design.n_tables,
        "comparisons": round(design.n_tables * size * block / 2),
        "seconds": round(seconds, 1),
        "pages_with_a_verified_pair": found,
        "planted": max(0, (size - 9) // 10 + 1) if size > 9 else 0,
    }


def main() -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--sizes", default="1000000")
    parser.add_argument("--expected-pages", type=int, default=0)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(args.master).appName("bench_spark_scale")
        .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "6g")
        .config("spark.sql.shuffle.partitions", "64").getOrCreate()
    )  # fmt: skip
    results = []
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            row = run(spark, size, args.expected_pages or size, max(8, size // 250_000))
            print(json.dumps(row), flush=True)
            results.append(row)
    finally:
        spark.stop()
    if len(results) >= 2:  # seconds = fixed + a * rows (the comparisons, in numpy, were negligible here)
        a, fixed = np.polyfit([r["rows"] for r in results], [r["seconds"] for r in results], 1)
        model: dict[str, Any] = {"seconds_per_row": a, "fixed_seconds": fixed}
        for size in (10**8, 10**9):
            rows = size * TableDesign.parse(tables_for(size)).n_tables
            model[f"core_hours_{size:.0e}"] = round(2 * (fixed + a * rows) / 3600, 2)  # local[2]: two cores busy
        print(json.dumps(model))
        results.append({"model": model})
    if args.json:
        write_json(args.json, results, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
