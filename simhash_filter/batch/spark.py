"""Batch near-duplicate detection of a corpus on Apache Spark (docs/spark.md): the decisions of ``simhash-filter
dedup`` on the same pages numbered in input order (the files sorted by path, then each file's lines or records),
computed by stages that shuffle fingerprints, never pages: read and fingerprint in the executors, each page's rows
shuffled by table block, one bounded pass per block (:func:`simhash_filter.index.bound.block_pass`), the pairs
verified in Spark SQL by the index's rule, the output in input order.  ``pyspark`` is imported here only.

    python -m simhash_filter.batch.spark INPUT... --output OUT [--master local[2]] [--format jsonl|parquet]
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from simhash_filter.batch.blockpairs import PAIRS_SCHEMA, arrow_block_pairs
from simhash_filter.batch.dedup import MALFORMED, Outcome, Page, _prepare
from simhash_filter.batch.inputs import (
    GZIP_MAGIC,
    JSONL,
    JSONL_SUFFIXES,
    WARC,
    WARC_SUFFIXES,
    is_glob,
    is_input_name,
    kind,
)
from simhash_filter.config import DEFAULTS, FilterConfig
from simhash_filter.index.bound import CheckBound
from simhash_filter.index.nearduplicate import apart, spots_of, spots_verdict, verdict
from simhash_filter.index.tables import TableDesign
from simhash_filter.model.fingerprint import Fingerprinter

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from simhash_filter.batch.warc import Damage

__all__ = [
    "JSONL_SUFFIXES",
    "WARC_SUFFIXES",
    "candidate_pairs",
    "damage_accumulator",
    "damaged",
    "input_files",
    "main",
    "spark_dedup",
    "write_output",
]
#: The damaged WARC places named on stderr (as ``dedup``); the summary counts them all.
DAMAGE_SHOWN = 20
#: A page's number: its file's number shifted by this many bits, plus its place in the file.
FILE_SHIFT = 40


def _signed(value: int) -> int:
    """A 64-bit unsigned value as Spark's signed long (two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _unsigned(value: int) -> int:
    return value + (1 << 64) if value < 0 else value


def input_files(spark: SparkSession, paths: list[str], *, exclude: Sequence[str] = ()) -> list[str]:
    """Every input file under *paths* as Spark names them, by ``dedup``'s rule (:mod:`simhash_filter.batch.inputs`;
    not *exclude*), once each, sorted.  Raises :class:`FileNotFoundError` naming an input that gives no file."""
    jvm, jsc = spark.sparkContext._jvm, spark.sparkContext._jsc
    assert jvm is not None and jsc is not None, "a Spark session without its JVM"
    conf = jsc.hadoopConfiguration()

    def qualified(name: str) -> str:
        path = jvm.org.apache.hadoop.fs.Path(name)
        return path.getFileSystem(conf).makeQualified(path).toString()

    excluded = {qualified(name).rstrip("/") for name in exclude}

    def under(directory: Any, fs: Any) -> list[str]:
        top = directory.toString().rstrip("/")
        names = []
        listing = fs.listFiles(directory, True)
        while listing.hasNext():
            name = listing.next().getPath().toString()
            if is_input_name(name[len(top) + 1 :]) and not any(name == x or name.startswith(x + "/") for x in excluded):
                names.append(name)
        return names

    found: set[str] = set()
    for given in paths:
        path = jvm.org.apache.hadoop.fs.Path(given)
        fs = path.getFileSystem(conf)
        statuses = fs.globStatus(path)
        if statuses is None or len(statuses) == 0:
            raise FileNotFoundError(f"{given}: no such file or directory")
        files: list[str] = []
        for status in statuses:
            name = status.getPath().toString()
            if not status.isDirectory():
                if not is_glob(given) or name not in excluded:
                    files.append(name)
                continue
            files += under(status.getPath(), fs)
        if not files:
            raise FileNotFoundError(f"{given}: no .jsonl or .warc files")
        found.update(files)
    return sorted(found)


class _DamageParam:
    """The damaged places of WARC files as a set of ``(file, offset, reason)`` (a task run twice adds nothing)."""

    def zero(self, value: frozenset[tuple[str, int, str]]) -> frozenset[tuple[str, int, str]]:
        return frozenset()

    def addInPlace(
        self, a: frozenset[tuple[str, int, str]], b: frozenset[tuple[str, int, str]]
    ) -> frozenset[tuple[str, int, str]]:
        return a | b


def damage_accumulator(spark: SparkSession) -> Any:
    """An accumulator for :func:`spark_dedup`'s ``damage`` (:func:`damaged` lists what it holds)."""
    return spark.sparkContext.accumulator(frozenset(), _DamageParam())  # type: ignore[arg-type]


def damaged(accumulator: Any) -> list[Damage]:
    """The damaged places an accumulator of :func:`damage_accumulator` holds, by file and offset."""
    from simhash_filter.batch.warc import Damage

    return [Damage(path, offset, reason) for path, offset, reason in sorted(accumulator.value)]


def _items(name: str, data: bytes, damage: Any = None) -> Iterator[bytes | Page]:
    """The input items of one file, as ``dedup`` reads them (the WARC damage met added to ``damage``)."""
    if kind(name) == WARC:
        from simhash_filter.batch.warc import WarcCounts, iter_warc_stream

        counts = WarcCounts()
        yield from iter_warc_stream(io.BytesIO(data), name, counts)
        if damage is not None and counts.damaged:
            damage.add(frozenset((d.path, d.offset, d.reason) for d in counts.damaged))
        return
    if data[:2] == GZIP_MAGIC:
        data = gzip.decompress(data)
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the newline that ends the last line
    yield from lines


def _numbered(
    name: str, data: bytes, numbers: dict[str, int], damage: Any = None
) -> Iterator[tuple[int, bytes | Page]]:
    base = numbers[name] << FILE_SHIFT
    for position, item in enumerate(_items(name, data, damage)):
        yield base + position, item


def _fingerprint_partition(
    items: Iterator[tuple[int, bytes | Page]], config: FilterConfig
) -> Iterator[tuple[Any, ...]]:
    """Rows of numbered input items: ``(number, url, fingerprint, sketch, status, reason, fields JSON, leads)``."""
    fingerprinter = Fingerprinter(config.fingerprint)
    design = TableDesign.parse(config.tables)
    for number, item in items:
        url, value, status, reason, sketch = _prepare(fingerprinter, item)
        fields = json.dumps(dict(item.record_fields())) if isinstance(item, Page) else None
        leads = None if value is None else design.lead_values(value)
        fp = None if value is None else _signed(value)
        yield (number, url, fp, None if value is None else bytes(sketch or b""), status, reason, fields, leads)


def candidate_pairs(blocks: DataFrame, k: int, bound: CheckBound, sketch_bytes: int) -> DataFrame:
    """The candidate pairs of the bounded check (``number``, ``of``, ``of_url``, ``distance``, ``differ``), once per
    table that finds them: *blocks* shuffled by block, sorted, each block passed through on its own."""
    bits = bound.differing_bits(sketch_bytes)
    ordered = blocks.select("t", "lead", "number", "fp", "url", "sketch").repartition("t", "lead")
    rows = ordered.sortWithinPartitions("t", "lead", "number")
    return rows.mapInArrow(lambda batches: arrow_block_pairs(batches, k, bound, bits), PAIRS_SCHEMA)


def spark_dedup(
    spark: SparkSession,
    paths: list[str],
    config: FilterConfig = DEFAULTS,
    *,
    exclude: Sequence[str] = (),
    damage: Any = None,
) -> DataFrame:
    """One row per input line or WARC page, in input order (``number``): ``url``, ``fp``, ``duplicate_of``,
    ``distance``, ``status`` and ``fields`` (JSON).  ``exclude``: paths left out (the output); ``damage``: an
    accumulator of :func:`damage_accumulator`."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    files = input_files(spark, paths, exclude=exclude)
    numbers = {name: i for i, name in enumerate(files)}
    words = config.fingerprint.word_sketch_bytes  # the verified part of the stored sketch
    bound = config.bound  # the bound of dedup's index (open_index)
    sc = spark.sparkContext
    # uncompressed JSON Lines files split into line ranges, the others read whole, one task a file
    plain = [name for name in files if kind(name) == JSONL and not name.lower().endswith(".gz")]
    whole = [name for name in files if name not in plain]
    items = sc.emptyRDD()
    if whole:
        read = sc.binaryFiles(",".join(whole), minPartitions=len(whole))
        items = read.flatMap(lambda pair: _numbered(pair[0], pair[1], numbers, damage))
    for name in plain:
        base = numbers[name] << FILE_SHIFT
        lines = sc.textFile(name, minPartitions=sc.defaultParallelism, use_unicode=False).zipWithIndex()

        def numbered(pair: tuple[Any, int], base: int = base) -> tuple[int, bytes]:  # bytes: use_unicode=False
            return base + pair[1], pair[0]

        items = items.union(lines.map(numbered))

    def fingerprinted(part: Iterable[tuple[int, bytes | Page]]) -> Iterator[tuple[Any, ...]]:
        return _fingerprint_partition(iter(part), config)

    rows = items.mapPartitions(fingerprinted)
    schema = T.StructType(
        [T.StructField("number", T.LongType(), False), T.StructField("url", T.StringType()),
         T.StructField("fp", T.LongType()), T.StructField("sketch", T.BinaryType()),
         T.StructField("status", T.StringType()), T.StructField("reason", T.StringType()),
         T.StructField("fields", T.StringType()), T.StructField("leads", T.ArrayType(T.LongType()))]
    )  # fmt: skip
    pages = spark.createDataFrame(rows, schema).persist()

    blocks = pages.where("fp IS NOT NULL").select(
        "number", "fp", "url", F.expr(f"substring(sketch, 1, {words})").alias("sketch"),
        F.posexplode("leads").alias("t", "lead"),
    )  # fmt: skip
    pairs = candidate_pairs(blocks, config.max_distance, bound, words)
    # sketch.similarity: agree = 1.0 - differing bits / bits; max(0.0, 2.0 * agree - 1.0)
    bits = float(8 * words)
    pairs = pairs.withColumn("similarity", F.expr(f"greatest(0.0D, 2.0D * (1.0D - differ / {bits}D) - 1.0D)"))
    # Each pair was found by a table's block within k (stage one); the rule decides it as everywhere else.
    words_ok = verdict(F.col("distance"), F.lit(True), F.col("similarity"), config)
    if config.fingerprint.prose:
        verified = _prose_verified(pages, pairs, words, words_ok, config)
    else:
        verified = pairs.where(words_ok).withColumn("tier", F.lit(1))
    order = Window.partitionBy("number").orderBy(F.col("tier").desc(), F.col("similarity").desc(), "distance", "of")
    decided = (
        verified.withColumn("rank", F.row_number().over(order)).where("rank = 1")
        .select("number", F.col("of_url").alias("duplicate_of"), "distance")
    )  # fmt: skip
    return pages.join(decided, "number", "left").select(
        "number", "url", "fp", "duplicate_of", "distance", "status", "fields"
    )


def _prose_verified(
    pages: DataFrame, pairs: DataFrame, words: int, words_ok: Column, config: FilterConfig
) -> DataFrame:
    """The pairs that verify under the rule of :meth:`NearDuplicateIndex.best`, with their ``tier`` (2: the word
    sketch verifies, 1: only the spots do), not those :func:`apart`; by the rule's own functions, in Python."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    spots = F.udf(lambda a, b: spots_of(bytes(a), bytes(b), 0), T.DoubleType())
    distinct = F.udf(lambda u, v, a, b: apart(u or "", v or "", bytes(a), bytes(b), 0), T.BooleanType())
    parts = pages.select(
        "number", "url", F.expr(f"substring(sketch, {words + 1}, length(sketch) - {words})").alias("part")
    )
    pairs = pairs.join(parts, "number").join(
        parts.select(F.col("number").alias("of"), F.col("part").alias("of_part")), "of"
    )
    spots_ok = spots_verdict(F.col("distance"), F.lit(True), spots("part", "of_part"), config)
    tier = F.when(words_ok, F.lit(2)).when(spots_ok, F.lit(1)).otherwise(F.lit(0))
    pairs = pairs.withColumn("tier", tier).where("tier > 0")
    return pairs.where(~distinct("url", "of_url", "part", "of_part")).drop("url", "part", "of_part")


def _record(row: Any, line: int) -> dict[str, Any]:
    """The output object of one row: the same as ``simhash-filter dedup`` writes."""
    fields = tuple(json.loads(row["fields"]).items()) if row["fields"] else ()
    value = None if row["fp"] is None else _unsigned(row["fp"])
    outcome = Outcome(line, row["url"], value, row["duplicate_of"], row["distance"], row["status"], fields=fields)
    return outcome.record()


def write_output(result: DataFrame, output: str, fmt: str) -> dict[str, int]:
    """Write *result* to *output*: one JSON Lines file (``.jsonl``: the lines streamed to the driver in order),
    a directory of JSON Lines part files in order, or Parquet; the counts of the summary line."""
    from pyspark.sql import functions as F

    result = result.persist()  # counted, then written: computed once
    ordered = result.orderBy("number")
    counts = {"pages": 0, "kept": 0, "duplicates": 0, "skipped": 0, "malformed": 0}
    summary = result.agg(
        F.count("*").alias("lines"),
        F.sum(F.when(F.col("status") == MALFORMED, 1).otherwise(0)).alias("malformed"),
        F.sum(F.when(F.col("status").isNotNull() & (F.col("status") != MALFORMED), 1).otherwise(0)).alias("skipped"),
        F.sum(F.when(F.col("duplicate_of").isNotNull(), 1).otherwise(0)).alias("duplicates"),
    ).first()
    assert summary is not None  # an aggregate has one row
    counts.update({k: int(summary[k] or 0) for k in ("malformed", "skipped", "duplicates")})
    counts["pages"] = int(summary["lines"]) - counts["malformed"]
    counts["kept"] = counts["pages"] - counts["skipped"] - counts["duplicates"]
    if fmt == "parquet":
        ordered.write.mode("error").parquet(output)
    elif output.endswith(".jsonl") and "://" not in output:
        with open(output, "w", encoding="utf-8") as out:
            for line, row in enumerate(ordered.toLocalIterator(), 1):
                out.write(json.dumps(_record(row, line), ensure_ascii=False) + "\n")
    else:
        numbered = ordered.rdd.zipWithIndex()
        numbered.map(lambda pair: json.dumps(_record(pair[0], pair[1] + 1), ensure_ascii=False)).saveAsTextFile(output)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="simhash-filter spark-dedup",
        description="Near-duplicate detection of a corpus on Apache Spark: the decisions of simhash-filter dedup.",
    )
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="JSON Lines or WARC files, directories, globs")
    parser.add_argument("--output", required=True, metavar="OUT",
                        help="OUT.jsonl: one file; another path: a directory of part files (or Parquet)")  # fmt: skip
    parser.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    parser.add_argument("--expected-pages", type=int, default=DEFAULTS.expected_pages, metavar="N",
                        help="the pages the tables are built for, as dedup's option (default: "
                        f"{DEFAULTS.expected_pages:,})")  # fmt: skip
    args = parser.parse_args(argv)
    try:
        config = replace(DEFAULTS, expected_pages=args.expected_pages)
    except ValueError as exc:
        parser.error(str(exc))
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # local executors run this Python, with this package
    builder = SparkSession.builder.appName("simhash-filter spark-dedup").config("spark.ui.showConsoleProgress", "false")
    if args.master:
        builder = builder.master(args.master)
        if args.master.startswith("local"):  # 200 shuffle partitions (Spark's default) are a cluster's number
            cores = args.master.partition("[")[2].rstrip("]")
            n = (os.cpu_count() or 1) if cores in ("", "*") else int(cores.split(",")[0])
            builder = builder.config("spark.sql.shuffle.partitions", str(max(2, 2 * n)))
    spark = builder.getOrCreate()
    try:
        damage = damage_accumulator(spark)
        result = spark_dedup(spark, args.inputs, config, exclude=[args.output], damage=damage)
        counts = write_output(result, args.output, args.format)
        places = damaged(damage)
    except FileNotFoundError as exc:
        print(f"simhash-filter spark-dedup: {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    for n, place in enumerate(places):
        if n == DAMAGE_SHOWN:
            print("simhash-filter spark-dedup: more damaged WARC files: counted in the summary, not shown",
                  file=sys.stderr)  # fmt: skip
            break
        print(f"simhash-filter spark-dedup: {place}", file=sys.stderr)
    print(
        f"spark-dedup: {counts['pages']} pages and {counts['malformed']} malformed lines: {counts['kept']} kept, "
        f"{counts['duplicates']} near-duplicates, {counts['skipped']} skipped; {len(places)} damaged WARC records",
        file=sys.stderr,
    )
    return 2 if counts["malformed"] or places else 0


if __name__ == "__main__":
    raise SystemExit(main())
