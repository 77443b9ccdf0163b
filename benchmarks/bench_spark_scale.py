"""The Spark job's pair finding at scale: synthetic fingerprints straight into its block stage, on ``local[2]``.

Fingerprinting is linear in the pages and measured elsewhere (``bench_spark.py``); what grows with the corpus is
the block stage: every page's row in each table's block, shuffled, sorted, and each block passed through
(``candidate_pairs`` of ``simhash_filter/batch/spark.py``, the same code as ``spark-dedup``).  Here each executor
makes its pages from their numbers (random fingerprints and sketches, 10 % of the pages near-duplicates of an
earlier page: 1-6 bits of the fingerprint and a few bits of the sketch changed; 40-byte URLs), the leads of the
design built for ``--expected-pages`` (default: the size), and the job counts the verified pairs.  Reported per
size: wall seconds of the block stage (rows made, shuffled, passed), the rows, the comparisons made in the block
passes, and the cost model of docs/spark.md fitted to them: seconds = a * rows + b * comparisons.

    python benchmarks/bench_spark_scale.py --sizes 1000000,3000000,10000000 [--expected-pages N] [--master local[2]]
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from benchlib.report import make_parser, write_json

from simhash_filter.config import DEFAULTS
from simhash_filter.index.tables import TableDesign, tables_for

SKETCH = DEFAULTS.fingerprint.sketch_bins // 8


def _pages(numbers: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Fingerprints and sketches of pages by number: a page's values depend on its number alone (every tenth page
    a near-duplicate of the page 7 numbers before it, itself not a near-duplicate)."""
    def base(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rng_fp = np.empty(len(n), dtype=np.uint64)
        sketches = np.empty((len(n), SKETCH), dtype=np.uint8)
        for i, m in enumerate(n.tolist()):
            rng = np.random.default_rng((seed, m))
            rng_fp[i] = rng.integers(0, 2**64, dtype=np.uint64)
            sketches[i] = rng.integers(0, 256, size=SKETCH, dtype=np.uint8)
        return rng_fp, sketches

    near = (numbers % 10 == 9) & (numbers >= 7)
    source = np.where(near, numbers - 7, numbers)
    fps, sketches = base(source)
    for i in np.flatnonzero(near).tolist():
        rng = np.random.default_rng((seed, int(numbers[i]), 1))
        for bit in rng.choice(64, rng.integers(1, 7), replace=False).tolist():
            fps[i] ^= np.uint64(1) << np.uint64(bit)
        sketches[i, rng.integers(0, SKETCH, 3)] ^= np.uint8(1)
    return fps, sketches


def run(spark: Any, size: int, expected: int, partitions: int) -> dict[str, Any]:
    from pyspark.sql import types as T

    from simhash_filter.batch.spark import _signed, candidate_pairs

    design = TableDesign.parse(tables_for(expected))
    bound = DEFAULTS.bound
    k = DEFAULTS.max_distance

    def rows(part: Any) -> Any:
        numbers = np.fromiter((r for r in part), dtype=np.int64)
        if not len(numbers):
            return
        fps, sketches = _pages(numbers, 1)
        leads = [design.lead_array(fps, t).tolist() for t in range(design.n_tables)]
        for i, (number, fp) in enumerate(zip(numbers.tolist(), fps.tolist(), strict=True)):
            url = f"https://www.example.com/p/{number:015d}"
            sk = sketches[i].tobytes()
            for t in range(design.n_tables):
                yield (t, _signed(leads[t][i]), number, _signed(fp), url, sk)

    schema = T.StructType(
        [T.StructField("t", T.IntegerType(), False), T.StructField("lead", T.LongType(), False),
         T.StructField("number", T.LongType(), False), T.StructField("fp", T.LongType(), False),
         T.StructField("url", T.StringType()), T.StructField("sketch", T.BinaryType())]
    )  # fmt: skip
    numbers = spark.sparkContext.range(0, size, numSlices=partitions)
    blocks = spark.createDataFrame(numbers.mapPartitions(rows), schema)
    start = time.perf_counter()
    pairs = candidate_pairs(blocks, k, bound, SKETCH)
    bits = bound.differing_bits(SKETCH)
    found = pairs.where(f"differ <= {bits}").select("number").distinct().count()
    seconds = time.perf_counter() - start
    block = sum(size / 2 ** min(lead, 64) for lead in design.lead_bits) / design.n_tables
    return {
        "size": size,
        "design": design.name,
        "rows": size * design.n_tables,
        "comparisons": round(design.n_tables * size * block / 2),
        "seconds": round(seconds, 1),
        "pages_with_a_verified_pair": found,
        "planted": sum(1 for n in range(size) if n % 10 == 9 and n >= 7),
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
    if len(results) >= 2:  # seconds = a * rows + b * comparisons, least squares through the origin
        a_matrix = np.array([[r["rows"], r["comparisons"]] for r in results], dtype=float)
        (a, b), *_ = np.linalg.lstsq(a_matrix, np.array([r["seconds"] for r in results]), rcond=None)
        model = {"seconds_per_row": a, "seconds_per_comparison": b}
        for size in (10**8, 10**9):
            design = TableDesign.parse(tables_for(size))
            block = sum(size / 2**lead for lead in design.lead_bits) / design.n_tables
            rows, comparisons = size * design.n_tables, design.n_tables * size * block / 2
            model[f"core_hours_{size:.0e}"] = round(2 * (a * rows + b * comparisons) / 3600, 2)
        print(json.dumps(model))
        results.append({"model": model})
    if args.json:
        write_json(args.json, results, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
