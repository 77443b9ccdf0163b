"""The crawl benchmark (benchmarks/speed/bench_crawl.py): its smoke run, and its ground truth on small pages."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from conftest import benchmark_module

ROOT = Path(__file__).resolve().parent.parent
BENCH = "benchmarks.speed.bench_crawl"


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    """benchmarks/speed/bench_crawl.py as a module."""
    with benchmark_module(BENCH) as module:
        yield module


def test_visible_text_drops_scripts_and_keeps_tails(bench: ModuleType) -> None:
    page = "<html><head><title>T</title></head><body><p>One <script>x()</script>two</p><style>p{}</style>Three</body>"
    assert bench.visible_text(page) == "one two three"


def test_jaccard_of_english_and_chinese_shingles(bench: ModuleType) -> None:
    a = bench.shingles("the quick brown fox jumps", "en")
    assert a == {"the quick brown", "quick brown fox", "brown fox jumps"}
    assert bench.jaccard(a, bench.shingles("the quick brown fox sleeps", "en")) == pytest.approx(2 / 4)
    assert bench.shingles("命名管道，先进", "zh") == {"命名管道", "名管道先", "管道先进"}


def test_relink_points_links_to_missing_pages_of_the_site_at_the_page(bench: ModuleType) -> None:
    links = '<a href="b/here.html">x</a><a href="b/gone.html">y</a><a href="https://other.example/">z</a>'
    out = bench.relink(f'<base href="../">{links}', "/h/a/doc.html", {"/h/b/here.html", "/h/a/doc.html"})
    assert out == f'<base href="../">{links.replace("b/gone.html", "/h/a/doc.html")}'


@pytest.mark.slow
def test_smoke_run_writes_the_numbers(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    cmd = [sys.executable, "-m", BENCH, "--pages", "40", "--repeat", "1", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "on / off:" in proc.stdout
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["pages"] == 40
    rate = result["rate"]
    for name in ("off", "on"):
        assert rate[name]["pages"] >= 40  # every page, and the index pages, were found by following links
        assert rate[name]["pages_per_s"] > 0
        assert rate[name]["crawl_cpu_ms_per_page"] > 0
    assert rate["on"]["pages"] == rate["off"]["pages"]
    assert 0.2 < rate["ratio"] < 5
    assert rate["filter_ms_per_page"]["fingerprint"] > 0
    assert rate["filter_ms_per_page"]["index"] >= 0
    mirror = result["mirror"]
    assert mirror["pairs"] == mirror["pairs_crawled"] == 40
    assert mirror["flags"] > 0
    assert 0 <= mirror["distinct_share"] <= mirror["wrong_share"] <= mirror["strict_wrong_share"] <= 1
    if mirror["near_identical"]:
        assert 0 <= mirror["flagged_share"] <= 1
    assert set(result["targets"]) == {"ratio", "twins_flagged", "wrong_flags"}
