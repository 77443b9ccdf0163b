"""The Spark job (``simhash_filter.batch.spark``) in local mode with a real ``pyspark`` and Java: the same decisions as
``simhash-filter dedup`` on the same input, input files found as Spark names them, and the pair-finding stage."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli import page_line, write_jsonl

from simhash_filter.cli.main import main as cli

pyspark = pytest.importorskip("pyspark", reason="pyspark is installed by the test extra")
pytestmark = pytest.mark.slow

if shutil.which("java") is None:  # make test installs a Java runtime; elsewhere the Spark tests cannot run
    pytest.skip("no Java runtime for Spark", allow_module_level=True)


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (SparkSession.builder.master("local[2]").appName("simhash-filter tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4").getOrCreate())  # fmt: skip
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def corpus(tmp_path: Path, pages: dict[str, str]) -> list[Path]:
    """Two JSON Lines files (one gzipped) of the fixture pages, their near-duplicates, a malformed line and a page
    without text."""
    import gzip

    (tmp_path / "in").mkdir()
    first = write_jsonl(
        tmp_path / "in" / "a.jsonl",
        [
            page_line("https://a.example/garden", pages["en_article"]),
            page_line("https://a.example/library", pages["zh_article"]),
            page_line("https://b.example/garden-copy", pages["en_edited"]),
        ],
    )
    with first.open("a", encoding="utf-8") as out:
        out.write("{not json\n")
        out.write(json.dumps({"url": "https://a.example/empty", "html": "<html></html>"}) + "\n")
    second = tmp_path / "in" / "b.jsonl.gz"
    lines = [page_line("https://c.example/library-copy", pages["zh_edited"]),
             page_line("https://a.example/garden", pages["en_article"])]  # fmt: skip
    second.write_bytes(gzip.compress("".join(line + "\n" for line in lines).encode("utf-8")))
    return [first, second]


def _one_machine(tmp_path: Path, files: list[Path]) -> list[dict]:
    """``simhash-filter dedup`` over the files concatenated in name order."""
    import gzip

    joined = tmp_path / "joined.jsonl"
    with joined.open("wb") as out:
        for path in sorted(files):
            out.write(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
    output = tmp_path / "one.jsonl"
    assert cli(["dedup", str(joined), "--output", str(output), "--no-progress"]) == 2  # 2: a malformed line
    return [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]


def test_the_spark_job_decides_as_one_machine_does(spark, tmp_path: Path, corpus: list[Path]) -> None:
    """Over two files (one gzipped) with near-duplicates across them, a malformed line and an empty page, the Spark
    job's output lines equal ``simhash-filter dedup``'s over the files concatenated in name order."""
    from simhash_filter.batch.spark import spark_dedup, write_output

    output = tmp_path / "spark.jsonl"
    counts = write_output(spark_dedup(spark, [str(tmp_path / "in")]), str(output), "jsonl")
    got = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert got == _one_machine(tmp_path, corpus)
    assert [r["duplicate_of"] for r in got if r["duplicate_of"]] == [
        "https://a.example/garden",
        "https://a.example/library",
        "https://a.example/garden",
    ]
    assert counts == {"pages": 6, "kept": 2, "duplicates": 3, "skipped": 1, "malformed": 1}


def test_part_files_concatenated_in_name_order_are_the_single_file(spark, tmp_path: Path, corpus: list[Path]) -> None:
    """An output directory holds part files whose lines, in name order, are the single-file output's; Parquet
    holds the same decisions."""
    from simhash_filter.batch.spark import spark_dedup, write_output

    result = spark_dedup(spark, [str(p) for p in corpus])
    write_output(result, str(tmp_path / "single.jsonl"), "jsonl")
    write_output(result, str(tmp_path / "parts"), "jsonl")
    parts = sorted((tmp_path / "parts").glob("part-*"))
    assert "".join(p.read_text(encoding="utf-8") for p in parts) == (tmp_path / "single.jsonl").read_text("utf-8")
    write_output(result, str(tmp_path / "parquet"), "parquet")
    table = spark.read.parquet(str(tmp_path / "parquet")).orderBy("number").collect()
    assert [row["duplicate_of"] for row in table] == [
        json.loads(line)["duplicate_of"] for line in (tmp_path / "single.jsonl").read_text("utf-8").splitlines()
    ]


def test_input_files_are_found_as_spark_names_them(spark, tmp_path: Path, corpus: list[Path]) -> None:
    """A directory is searched recursively for JSON Lines and WARC files (not hidden, not under ``_``, not the
    output), a glob is expanded, the files are sorted; a path that matches nothing is a FileNotFoundError naming
    it."""
    from simhash_filter.batch.spark import input_files

    (tmp_path / "in" / "notes.txt").write_text("not an input", encoding="utf-8")
    (tmp_path / "in" / "_temporary").mkdir()
    (tmp_path / "in" / "_temporary" / "part.jsonl").write_text("{not json\n", encoding="utf-8")
    (tmp_path / "in" / ".old.jsonl").write_text("{not json\n", encoding="utf-8")
    (tmp_path / "in" / "out.jsonl").write_text("{not json\n", encoding="utf-8")
    found = input_files(spark, [str(tmp_path / "in")], exclude=[str(tmp_path / "in" / "out.jsonl")])
    assert [Path(name.removeprefix("file:")).name for name in found] == ["a.jsonl", "b.jsonl.gz"]
    assert input_files(spark, [str(tmp_path / "in" / "*.gz")]) == found[1:]
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        input_files(spark, [str(tmp_path / "nothing-here")])


def test_candidate_pairs_are_each_blocks_bounded_pass(spark) -> None:
    """Six copies of one page in a block: the block takes four (``duplicates``), then holds four verified
    near-duplicates of the others, which see those four; a page farther than k or in another block sees none of
    them, a page whose sketch differs in too many bits is a candidate that does not verify."""
    from simhash_filter.batch.spark import candidate_pairs
    from simhash_filter.index.bound import CheckBound

    same, other = bytes(8), b"\xff" * 8
    rows = [(n, 0b1111, f"u{n}", same, 0, 5) for n in range(6)]
    rows += [(6, -1, "far", same, 0, 5), (7, 0b1111, "elsewhere", same, 1, 9), (8, 0b0111, "unlike", other, 1, 9)]
    blocks = spark.createDataFrame(rows, "number long, fp long, url string, sketch binary, t int, lead long")
    found = candidate_pairs(blocks, 10, CheckBound(8, 4, 0.75), 8).collect()
    pairs = sorted((r["number"], r["of"], r["of_url"], r["distance"], r["differ"]) for r in found)
    copies = [(n, a, f"u{a}", 0, 0) for n in range(1, 6) for a in range(min(n, 4))]
    assert pairs == [*copies, (8, 7, "elsewhere", 1, 64)]


def _flood_lines(kind: str, n: int) -> list[str]:
    """*n* pages of one flood: ``counter``, one fixture article whose view counter, date and session id change
    on every page; ``words``, 300 words drawn from 19 (every page a near-duplicate of every other)."""
    import random

    from devsites.pages import RAINWATER, Counter, gazette

    rng = random.Random(7)
    lines = []
    for i in range(n):
        if kind == "counter":
            counter = Counter(1000 + i, f"2024-05-{1 + i % 28:02d} 08:{i % 60:02d}:07", f"{rng.getrandbits(64):016x}")
            lines.append(page_line(f"https://trap.example/story?sid={i}", gazette(RAINWATER, counter=counter)))
        else:
            text = " ".join(rng.choice(FLOOD_WORDS) for _ in range(300))
            lines.append(page_line(f"https://words.example/{i}", f"<html><body><p>{text}</p></body></html>"))
    return lines


#: The 19 words of the ``words`` flood.
FLOOD_WORDS = (
    "river stone lantern copper meadow harbor violet ember cedar falcon orbit quartz willow tundra saddle beacon "
    "marble pepper thistle"
).split()


@pytest.mark.flood
@pytest.mark.parametrize("kind", ["counter", "words"])
def test_a_flood_of_near_duplicates_gives_one_machines_decisions(spark, tmp_path: Path, kind: str) -> None:
    """1,500 near-duplicates of each other (the blocks stop taking them after a few): the Spark job's output is
    ``simhash-filter dedup``'s, byte for byte, and all but the first page are near-duplicates."""
    from simhash_filter.batch.spark import spark_dedup, write_output

    lines = _flood_lines(kind, 1500)
    assert len(FLOOD_WORDS) == 19
    source = write_jsonl(tmp_path / "flood.jsonl", lines)
    output = tmp_path / "spark.jsonl"
    counts = write_output(spark_dedup(spark, [str(source)]), str(output), "jsonl")
    one = tmp_path / "one.jsonl"
    assert cli(["dedup", str(source), "--output", str(one), "--no-progress"]) == 0
    assert output.read_text(encoding="utf-8") == one.read_text(encoding="utf-8")
    assert counts == {"pages": 1500, "kept": 1, "duplicates": 1499, "skipped": 0, "malformed": 0}


def test_the_module_runs_as_a_command(tmp_path: Path, corpus: list[Path]) -> None:
    """``python -m simhash_filter.batch.spark INPUT --output OUT --master local[1]`` writes the output and a summary
    line, exit status 2 for a malformed line (as ``dedup``); an input that matches nothing is one line on stderr
    and exit status 1."""
    import subprocess

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    out = tmp_path / "cmd.jsonl"
    cmd = [sys.executable, "-m", "simhash_filter.batch.spark", str(tmp_path / "in"), "--output", str(out), "--master",
           "local[1]"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]  # 2: a malformed line, as dedup
    assert "spark-dedup: 6 pages and 1 malformed lines: 2 kept, 3 near-duplicates, 1 skipped" in proc.stderr
    assert len(out.read_text(encoding="utf-8").splitlines()) == 7
    cmd[3] = str(tmp_path / "missing")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1 and "missing: no such file or directory" in proc.stderr


def test_a_directory_of_warc_files_gives_one_machines_decisions(spark, tmp_path: Path, pages: dict[str, str]) -> None:
    """Two gzipped WARC files (responses among request records) through the Spark job and through ``simhash-filter
    dedup`` of the same directory: the same output lines, WARC-Date and WARC-Record-ID included."""
    from test_warc import request, response, write_warc

    from simhash_filter.batch.spark import spark_dedup, write_output

    files = {
        "a.warc.gz": [("https://a.example/garden", "en_article"), ("https://a.example/library", "zh_article")],
        "b.warc.gz": [("https://b.example/garden-copy", "en_edited"), ("https://b.example/library", "zh_edited")],
    }
    (tmp_path / "warcs").mkdir()
    for name, entries in files.items():
        records = [r for url, page in entries for r in (request(url), response(url, pages[page].encode("utf-8")))]
        write_warc(tmp_path / "warcs" / name, records)
    output = tmp_path / "spark.jsonl"
    write_output(spark_dedup(spark, [str(tmp_path / "warcs")]), str(output), "jsonl")
    one = tmp_path / "one.jsonl"
    assert cli(["dedup", str(tmp_path / "warcs"), "--output", str(one), "--no-progress"]) == 0
    got = output.read_text(encoding="utf-8")
    assert got == one.read_text(encoding="utf-8")
    records = [json.loads(line) for line in got.splitlines()]
    assert [r["duplicate_of"] for r in records] == [None, None, "https://a.example/garden", "https://a.example/library"]
    assert all(r["warc_record_id"].startswith("<urn:uuid:") and r["warc_date"] for r in records)


def test_a_directory_of_both_kinds_gives_dedups_output(
    spark, tmp_path: Path, corpus: list[Path], pages: dict[str, str]
) -> None:
    """A directory of JSON Lines and WARC files, with hidden files and an earlier output in it: the Spark job and
    ``simhash-filter dedup`` read the same files (one discovery) and write the same lines."""
    from test_warc import page_responses, write_warc

    from simhash_filter.batch.spark import spark_dedup, write_output

    (tmp_path / "in" / "sub").mkdir()
    copy = [("https://d.example/garden", pages["en_edited"])]
    write_warc(tmp_path / "in" / "sub" / "c.warc.gz", page_responses(copy))
    (tmp_path / "in" / ".hidden.jsonl").write_text("{not json\n", encoding="utf-8")
    one = tmp_path / "in" / "result.jsonl"
    assert cli(["dedup", str(tmp_path / "in"), "--output", str(one), "--no-progress"]) == 2  # a malformed line
    first = one.read_text(encoding="utf-8")
    assert cli(["dedup", str(tmp_path / "in"), "--output", str(one), "--no-progress"]) == 2
    assert one.read_text(encoding="utf-8") == first  # the earlier output is not read
    output = tmp_path / "spark.jsonl"
    write_output(spark_dedup(spark, [str(tmp_path / "in")], exclude=[str(one)]), str(output), "jsonl")
    assert output.read_text(encoding="utf-8") == first
    assert json.loads(first.splitlines()[-1])["duplicate_of"] == "https://b.example/garden-copy"  # its twin


def test_damaged_warc_records_are_reported_as_dedup_reports_them(tmp_path: Path, pages: dict[str, str]) -> None:
    """A WARC file cut short in its last record: the Spark command names the damage on stderr, counts it in the
    summary and exits with status 2, as ``simhash-filter dedup`` does; the pages before it are kept."""
    import subprocess

    from test_warc import page_responses, write_warc

    (tmp_path / "warcs").mkdir()
    damaged = tmp_path / "warcs" / "a.warc"
    two = [("https://a.example/1", pages["en_article"]), ("https://a.example/2", pages["zh_article"])]
    offsets = write_warc(damaged, page_responses(two), compress=False)
    damaged.write_bytes(damaged.read_bytes()[: offsets[1] + 200])
    write_warc(tmp_path / "warcs" / "b.warc.gz", page_responses([("https://b.example/1", pages["en_edited"])]))
    one = tmp_path / "one.jsonl"
    assert cli(["dedup", str(tmp_path / "warcs"), "--output", str(one), "--no-progress"]) == 2
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    out = tmp_path / "spark.jsonl"
    cmd = [sys.executable, "-m", "simhash_filter.batch.spark", str(tmp_path / "warcs"), "--output", str(out),
           "--master", "local[1]"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"simhash-filter spark-dedup: file:{damaged}: damaged at offset {offsets[1]}" in proc.stderr, proc.stderr
    assert "; 1 damaged WARC records" in proc.stderr
    assert out.read_text(encoding="utf-8") == one.read_text(encoding="utf-8")
