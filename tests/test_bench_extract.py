"""The main-text extraction benchmark (benchmarks/accuracy/bench_extract.py): its metric on hand-made texts,
and a run on two tiny pages laid out as its two page sets (no peers)."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from conftest import benchmark_module

BENCH = "benchmarks.accuracy.bench_extract"


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    with benchmark_module(BENCH) as module:
        yield module


def test_tokens_are_nfkc_lower_case_words_and_single_cjk_characters(bench: ModuleType) -> None:
    assert bench.tokens("The Ｆｅｒｒｙ leaves at 9:15, don't_wait!") == ["the", "ferry", "leaves", "at", "9", "15",
                                                                        "don", "t", "wait"]  # fmt: skip
    assert bench.tokens("茶园的春茶 tea") == ["茶", "园", "的", "春", "茶", "tea"]
    assert bench.tokens("ひらがな") == ["ひ", "ら", "が", "な"]


def test_score_on_bags_of_tokens(bench: ModuleType) -> None:
    ref = bench.bag("the river floods the valley every spring")  # 7 tokens, "the" twice
    exact = bench.score(bench.bag("The river floods the valley every spring."), ref)
    assert (exact.p, exact.r, exact.f1) == (1.0, 1.0, 1.0)
    # 4 predicted, 3 right ("the" once, "river", "valley"): P 3/4, R 3/7
    s = bench.score(bench.bag("the river valley cookies"), ref)
    assert s.p == pytest.approx(3 / 4)
    assert s.r == pytest.approx(3 / 7)
    assert s.f1 == pytest.approx(2 * (3 / 4) * (3 / 7) / (3 / 4 + 3 / 7))
    # a token repeated beyond its count in the reference counts once per occurrence in the reference
    twice = bench.score(bench.bag("spring spring"), ref)
    assert (twice.p, twice.r) == (pytest.approx(1 / 2), pytest.approx(1 / 7))
    # nothing predicted: 0; nothing on either side: 1
    assert bench.score(Counter(), ref).f1 == 0.0
    assert bench.score(Counter(), Counter()).f1 == 1.0


def test_weighted_score_counts_each_token_with_its_weight(bench: ModuleType) -> None:
    ref = bench.bag("harbour boat ferry")
    pred = bench.weighted_bag([(1.0, "harbour boat"), (0.5, "ferry menu"), (0.01, "login")])
    assert pred == pytest.approx({"harbour": 1.0, "boat": 1.0, "ferry": 0.5, "menu": 0.5, "login": 0.01})
    s = bench.score(pred, ref)
    assert s.p == pytest.approx(2.5 / 3.01)
    assert s.r == pytest.approx(2.5 / 3)


def test_block_text_breaks_words_at_blocks_only(bench: ModuleType) -> None:
    """The reference text (benchlib.text.block_text) breaks words at block elements and <br>, not inside a word."""
    html = "<div><h1>Title</h1><p>One <b>bo</b>ld line<br>two</p><script>x()</script><p>three</p></div>"
    assert bench.block_text(html) == "Title One bold line two three"


SOURCE = """<html><head><title>Tea</title></head><body>
<nav><a href="/">Home</a> <a href="/news">News</a> <a href="/about">About us</a></nav>
<article><h1>Spring tea in the hills</h1>
<p>The first picking of spring tea starts when the mist lifts from the slopes above the village.</p>
<p>Farmers carry baskets up the terraces at dawn and come back before the heat of the afternoon.</p>
<p>The leaves are dried in the cooperative's sheds and sold at the market in the valley town.</p>
</article>
<footer>Copyright the village paper. Cookies help us deliver our services.</footer>
</body></html>"""
EXPECTED = """<div id="readability-page-1" class="page"><article>
<p>The first picking of spring tea starts when the mist lifts from the slopes above the village.</p>
<p>Farmers carry baskets up the terraces at dawn and come back before the heat of the afternoon.</p>
<p>The leaves are dried in the cooperative's sheds and sold at the market in the valley town.</p>
</article></div>"""
ARTICLE = """<html><body><div class="menu"><a href="/a">Sports</a> <a href="/b">Weather</a></div>
<div class="story"><p>The ferry to the island runs twice a day in winter and every hour in summer.</p>
<p>Passengers are asked to buy tickets online because the harbour office closes at noon.</p></div>
</body></html>"""
ARTICLE_BODY = (
    "The ferry to the island runs twice a day in winter and every hour in summer. "
    "Passengers are asked to buy tickets online because the harbour office closes at noon."
)


def _sets(tmp_path: Path) -> tuple[Path, Path]:
    pages = tmp_path / "test-pages" / "tea"
    pages.mkdir(parents=True)
    (pages / "source.html").write_text(SOURCE, encoding="utf-8")
    (pages / "expected.html").write_text(EXPECTED, encoding="utf-8")
    aeb = tmp_path / "aeb"
    (aeb / "html").mkdir(parents=True)
    with gzip.open(aeb / "html" / "ferry.html.gz", "wt", encoding="utf-8") as f:
        f.write(ARTICLE)
    (aeb / "ground-truth.json").write_text(json.dumps({"ferry": {"articleBody": ARTICLE_BODY, "url": "http://x/"}}))
    return tmp_path / "test-pages", aeb


def test_runs_end_to_end_on_two_pages_and_compares(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readability_dir, aeb_dir = _sets(tmp_path)
    out = tmp_path / "run.json"
    args = ["--readability-dir", str(readability_dir), "--aeb-dir", str(aeb_dir), "--json", str(out)]
    assert bench.main(args) == 0
    printed = capsys.readouterr().out
    assert "| readability | **ours main** |" in printed
    assert "| aeb | **ours weighted** |" in printed
    assert "| all | **ours main** |" in printed
    assert "Our worst 15 pages" in printed
    data = json.loads(out.read_text(encoding="utf-8"))
    assert set(data["pages"]) == {"readability/tea", "aeb/ferry"}
    for page in data["pages"].values():  # the model's own quality is the benchmark's to measure, not this test's
        assert set(page["scores"]) == {"ours main", "ours weighted"}
        assert all(0.0 <= v <= 1.0 for s in page["scores"].values() for v in s.values())
        assert page["status"] in {"ok", "too_few_features"} and page["diagnosis"]
    assert data["pages"]["readability/tea"]["scores"]["ours weighted"]["r"] > 0.5
    assert data["summary"]["all"]["ours main"]["pages"] == 2

    # --compare: a page made worse in the old file shows as better now
    data["pages"]["aeb/ferry"]["scores"]["ours main"]["f1"] -= 0.5
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data), encoding="utf-8")
    assert bench.main([*args, "--sets", "aeb", "--compare", str(old)]) == 0
    printed = capsys.readouterr().out
    assert "1 pages better, 0 worse" in printed
    assert "aeb/ferry" in printed.split("Compared")[1]


def test_a_missing_page_set_is_a_one_line_error(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--aeb-dir", str(tmp_path / "nowhere"), "--sets", "aeb"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--aeb-dir" in err and "ground-truth.json" in err
