"""Duplicate floods (issue 24): the flood generators of devsites/floods.py, dedup over floods in bounded work,
the crawler trap in flag and drop mode, and a smoke run of benchmarks/speed/bench_flood.py."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from conftest import benchmark_module

from simhash_filter import open_index
from simhash_filter.batch.dedup import dedup
from simhash_filter.config import DEFAULTS
from simhash_filter.model.fingerprint import Fingerprinter
from simhash_filter.model.sketch import similarity

ROOT = Path(__file__).resolve().parent.parent
BENCH = "benchmarks.speed.bench_flood"
#: The most candidates one check may verify: one table's nearest ``per_table`` (8) in each of the design's tables.
MOST_CANDIDATES = 5 * 8


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    """benchmarks/speed/bench_flood.py as a module (floods.py as its ``floods``)."""
    with benchmark_module(BENCH) as module:
        yield module


def _pairs(pages: list[dict[str, str]]) -> list[tuple[int, float]]:
    fingerprinter = Fingerprinter(DEFAULTS.fingerprint)
    prints = [fingerprinter.fingerprint(p["html"]) for p in pages]
    assert all(p.ok for p in prints)
    pairs = itertools.combinations(prints, 2)
    return [((a.value ^ b.value).bit_count(), similarity(a.word_sketch, b.word_sketch)) for a, b in pairs]


@pytest.mark.parametrize("kind", ["changing", "bag", "template", "distinct"])
def test_streams_are_deterministic_and_seeded(bench: ModuleType, kind: str) -> None:
    """The same seed gives the same pages, another seed others (but the first changing page's text)."""
    floods = bench.floods
    first = list(floods.pages(kind, 20))
    assert first == list(floods.pages(kind, 20))
    assert first != list(floods.pages(kind, 20, seed=floods.SEED + 1))
    assert len({p["url"] for p in first}) == 20
    assert list(itertools.islice(floods.pages(kind), 20)) == first  # without end, lazily


@pytest.mark.parametrize("kind", ["changing", "bag"])
def test_near_duplicate_floods_are_near_duplicates_of_each_other(bench: ModuleType, kind: str) -> None:
    """Every page of a changing-line or bag-of-words flood is a near-duplicate of every other page of it."""
    pages = list(bench.floods.pages(kind, 40))
    assert len({p["html"] for p in pages}) == 40  # each page differs
    for distance, sim in _pairs(pages):
        assert distance <= DEFAULTS.max_distance and sim >= DEFAULTS.min_similarity


def test_template_flood_pages_are_candidates_but_not_near_duplicates(bench: ModuleType) -> None:
    """A template flood's pages fall within the candidate distance of each other, but none verifies."""
    pairs = _pairs(list(bench.floods.pages("template", 60)))
    assert max(sim for _, sim in pairs) < DEFAULTS.min_similarity
    assert sum(d <= DEFAULTS.max_distance for d, _ in pairs) > 0.2 * len(pairs)


def test_distinct_pages_are_not_near_duplicates(bench: ModuleType) -> None:
    """The baseline's generated articles are distinct: no pair verifies."""
    assert max(sim for _, sim in _pairs(list(bench.floods.pages("distinct", 60)))) < DEFAULTS.min_similarity


def test_writing_a_stream_makes_json_lines(bench: ModuleType, tmp_path: Path) -> None:
    """write() makes one JSON object with url and html per page, as the command line does."""
    path = tmp_path / "bag.jsonl"
    assert bench.floods.main(["bag", "5", str(path)]) == 0
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert rows == list(bench.floods.pages("bag", 5))


FLOOD_PAGES = 10_000
#: CPU seconds a dedup of FLOOD_PAGES may take (the work of a check bounded: about 15 s; O(n²) took over 5 minutes
#: for 10,000 changing pages, 63 s for 4,000).
FLOOD_CPU_SECONDS = 60.0


@pytest.mark.flood
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["memory", "file"])
@pytest.mark.parametrize("kind", ["changing", "bag", "template"])
def test_dedup_of_a_flood_does_bounded_work(bench: ModuleType, kind: str, backend: str, tmp_path: Path) -> None:
    """dedup over 10,000 flood pages finishes in under a minute of CPU time, each check verifying at most
    5 tables x 8 candidates, in memory and on disk."""
    lines = (json.dumps(p).encode() for p in bench.floods.pages(kind, FLOOD_PAGES))
    uri = "memory://" if backend == "memory" else f"file://{tmp_path / 'idx'}"
    start = time.process_time()
    done = 0
    with open_index(DEFAULTS, uri) as index:
        for outcome in dedup(lines, config=DEFAULTS, index=index):
            assert outcome.status is None
            done += 1
            if done % 1000 == 0:
                spent = time.process_time() - start
                assert spent < FLOOD_CPU_SECONDS, f"{done} pages in {spent:.0f} s CPU"
        assert index.candidates_max <= MOST_CANDIDATES
    assert done == FLOOD_PAGES
    assert time.process_time() - start < FLOOD_CPU_SECONDS


@pytest.mark.slow
def test_crawl_of_the_calendar_trap(bench: ModuleType, tmp_path: Path) -> None:
    """Crawling the infinite calendar (memory index): in flag mode the rate does not fall (last quarter against
    the first); in drop mode the trap closes itself, a dropped page's links not being followed."""
    pages = 2000
    result = bench.crawl_part(pages, tmp_path, window=pages // 4, backend="memory://")
    flag, drop = result["flag"], result["drop"]
    assert flag["finish_reason"] == "closespider_pagecount"
    assert flag["pages"] >= pages and flag["flagged"] >= pages - 10
    assert flag["last_vs_first"] >= 0.5, flag  # loosely: shared cores; O(n²) fell far below
    if flag["candidates_max"] is not None:  # the crawl stat, once the crawl reports it
        assert flag["candidates_max"] <= MOST_CANDIDATES
    assert drop["finish_reason"] == "finished"
    assert drop["days_served"] <= 6 and drop["pages"] <= 10, drop


@pytest.mark.slow
def test_the_trap_crawls_each_have_their_own_on_disk_index(bench: ModuleType, tmp_path: Path) -> None:
    """Without --crawl-backend the drop-mode crawl starts from an empty on-disk index of its own, not the flag
    crawl's (which would make the trap's first day a page unchanged since then): it closes the trap by itself."""
    result = bench.crawl_part(60, tmp_path, window=15)
    assert (tmp_path / "crawl-flag" / "index").is_dir() and (tmp_path / "crawl-drop" / "index").is_dir()
    drop = result["drop"]
    assert drop["finish_reason"] == "finished"
    assert 2 <= drop["days_served"] <= 6 and drop["pages"] <= 10, drop


@pytest.mark.flood
@pytest.mark.slow
def test_smoke_run_writes_the_numbers(tmp_path: Path) -> None:
    """bench_flood.py with tiny sizes runs its dedup parts (in memory, on disk, on Redis) and writes its numbers
    as JSON (tests/test_spark.py runs the Spark job, the trap test above the crawl)."""
    out = tmp_path / "bench.json"
    cmd = [sys.executable, "-m", BENCH, "--pages", "150", "--repeat", "1", "--parts", "dedup,file,redis",
           "--redis-pages", "100", "--no-public", "--json", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "## dedup --workers 1, memory index" in proc.stdout
    result = json.loads(out.read_text(encoding="utf-8"))
    for part in ("dedup", "file"):
        for kind in ("changing", "bag", "template", "distinct"):
            row = result[part][kind]
            assert "error" not in row, (part, kind, row)
            assert row["pages"] == 150 and row["pages_per_cpu_s"] > 0 and row["rss_mb"] > 0
            if kind != "distinct":
                assert row["rss_vs_distinct"] > 0
    for kind in ("changing", "bag", "template", "distinct"):
        row = result["redis"][kind]
        assert "error" not in row, (kind, row)
        assert row["evalsha_calls"] == row["evalsha_logged"] >= 100
        assert 0 < row["server_p50_us"] <= row["server_p99_us"] <= row["server_max_us"]
