"""The Spark job (``simhash_filter.batch.spark``) in local mode: its scaling from one core to two, beside one machine's
``dedup``, and its pair-finding stage alone on synthetic fingerprints with planted neighbours.

``scaling``: the public stream (``--copies`` copies of it, each copy's URLs suffixed ``#copy-N``, so that the
corpus is larger; a copy's pages are near-duplicates of the first copy's) through ``spark-dedup`` with
``local[1]`` and ``local[2]``, alternated ``--repeat`` times, and through ``simhash-filter dedup --workers 1``; wall
seconds (the Spark session's start included) and pages/s; the outputs must be identical.

``pairs``: ``--fingerprints`` random fingerprints (``xxhash64`` of a row number, made in the executors) and
``--planted`` pairs planted among them at distances 1 to 4 (which the index's tables must find: the pigeonhole
over five 13-bit leads) and 5 to 10 (found when they share a lead, as on one machine); the candidate pairs found
by :func:`simhash_filter.batch.spark.candidate_pairs` (the block keys joined on themselves, filtered to k = 10); time,
the pairs compared, every planted pair within 4 found or not.

    python benchmarks/bench_spark.py scaling [--copies 4] [--repeat 3]
    python benchmarks/bench_spark.py pairs [--fingerprints 1000000] [--planted 10000] [--master local[2]]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import ROOT
from benchlib.data import PUBLIC_PAGES, read_jsonl
from benchlib.report import make_parser, write_json

from simhash_filter.config import DEFAULTS
from simhash_filter.index.tables import resolve_design


def _corpus(path: Path, copies: int) -> int:
    rows = list(read_jsonl(PUBLIC_PAGES))
    with path.open("w", encoding="utf-8") as out:
        for copy in range(copies):
            for row in rows:
                url = row["url"] if copy == 0 else f"{row['url']}#copy-{copy}"
                out.write(json.dumps({"url": url, "html": row["html"]}, ensure_ascii=False) + "\n")
    return copies * len(rows)


def _run(cmd: list[str]) -> float:
    start = time.perf_counter()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def scaling(copies: int, repeat: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        pages = _corpus(corpus, copies)
        runs: dict[str, list[float]] = {"local[1]": [], "local[2]": [], "dedup --workers 1": []}
        outputs: dict[str, Path] = {name: Path(tmp) / f"{i}.jsonl" for i, name in enumerate(runs)}
        for r in range(repeat):
            names = list(runs)[r % 3 :] + list(runs)[: r % 3]
            for name in names:
                out = outputs[name]
                out.unlink(missing_ok=True)
                if name.startswith("local"):
                    cmd = [sys.executable, "-m", "simhash_filter.batch.spark", str(corpus), "--output", str(out),
                           "--master", name]  # fmt: skip
                else:
                    cmd = [sys.executable, "-m", "simhash_filter", "dedup", str(corpus), "--output", str(out),
                           "--workers", "1", "--no-progress"]  # fmt: skip
                runs[name].append(_run(cmd))
                print(f"  {name}: {runs[name][-1]:.1f} s", file=sys.stderr, flush=True)
        texts = {name: path.read_bytes() for name, path in outputs.items()}
        identical = len(set(texts.values())) == 1
    med = {name: statistics.median(v) for name, v in runs.items()}
    print(f"# spark-dedup scaling: {pages} pages ({copies} copies of the public stream), median of {repeat}")
    print("| run | wall s | pages/s |")
    print("| --- | ---: | ---: |")
    for name, seconds in med.items():
        print(f"| {name} | {seconds:.1f} | {pages / seconds:.0f} |")
    print(f"\nlocal[1] -> local[2]: {med['local[1]'] / med['local[2]']:.2f}x; outputs identical: {identical}")
    return {"pages": pages, "median_s": med, "runs_s": runs, "identical": identical}


def pairs(fingerprints: int, planted: int, master: str) -> dict:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from simhash_filter.batch.spark import candidate_pairs

    k = DEFAULTS.max_distance
    design = resolve_design(DEFAULTS.tables, k, 1_000_000, candidates=True)
    spark = (SparkSession.builder.master(master).config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "8g").getOrCreate())  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    try:
        start = time.perf_counter()
        base = spark.range(fingerprints).select(F.col("id").alias("number"), F.xxhash64("id").alias("fp"))
        # a planted neighbour of row i (i < planted): its fingerprint with d = 1 + i % 10 bits flipped
        flips = " | ".join(f"IF({d} <= 1 + pmod(number, 10), shiftleft(1L, pmod(number * {7 + 6 * d}, 64)), 0L)"
                           for d in range(1, 11))  # fmt: skip
        twin = [(F.col("number") + fingerprints).alias("number"), F.expr(f"fp ^ ({flips})").alias("fp")]
        twins = base.where(F.col("number") < planted).select(*twin)
        pages = base.unionByName(twins)
        leads = []
        for moves in design.lead_moves:
            parts = [f"shiftleft(shiftrightunsigned(fp, {s}) & {mask}L, {t})" for s, mask, t in moves]
            leads.append(" | ".join(parts))
        blocks = pages.select("number", "fp", F.posexplode(F.array(*(F.expr(x) for x in leads))).alias("t", "lead"))
        found = candidate_pairs(blocks, k).select("a_number", "b_number", "distance").persist()
        total = found.count()
        mine = found.where(F.col("a_number") == F.col("b_number") - fingerprints)
        counted = mine.groupBy("distance").agg(F.count("*").alias("n")).collect()
        by_distance = {int(r["distance"]): int(r["n"]) for r in counted}
        within4 = mine.where("1 + pmod(a_number, 10) <= 4").count()  # planted at 1 to 4 bits (or fewer)
        seconds = time.perf_counter() - start
    finally:
        spark.stop()
    planted_by_distance = {d: sum(1 for i in range(planted) if 1 + i % 10 == d) for d in range(1, 11)}
    # flipped bits may coincide (a shift repeats): then a pair is nearer than planted, never farther
    planted4 = sum(n for d, n in planted_by_distance.items() if d <= 4)
    print(f"# pair finding: {fingerprints:,} fingerprints + {planted:,} planted neighbours, {master}, {seconds:.1f} s")
    print(f"candidate pairs within k={k} found: {total:,}")
    print(f"planted pairs found by distance: {dict(sorted(by_distance.items()))}")
    print(f"planted within 4 bits: {within4:,} found of {planted4:,} planted (the tables guarantee them)")
    return {
        "fingerprints": fingerprints,
        "planted": planted,
        "master": master,
        "seconds": seconds,
        "pairs": total,
        "found_by_distance": by_distance,
        "within4_found": within4,
        "within4_planted": planted4,
    }


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("what", choices=("scaling", "pairs"))
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--fingerprints", type=int, default=1_000_000)
    parser.add_argument("--planted", type=int, default=10_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.what == "scaling":
        result = scaling(args.copies, args.repeat)
    else:
        result = pairs(args.fingerprints, args.planted, args.master)
    if args.json:
        write_json(args.json, result, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
