"""Tests of ``simhash-filter calibrate`` (simhash_filter.report.calibrate and simhash_filter.cli.calibrate), on
labelled pairs made here with known answers: the fixture pages of ``devsites/pages.py`` (an article in two templates,
with ads, counters and one-word edits: duplicates; different articles: distinct), measured with the model itself
to derive the expected scores, and pairs whose answer is known by construction."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from devsites.pages import (
    BACKUPS,
    LIBRARY,
    LIGHTHOUSE,
    RAINWATER,
    distinct_pairs,
    forum,
    gazette,
    ledger,
    near_duplicate_pairs,
    portal,
)
from simhash_filter import DEFAULTS, FilterConfig, fingerprint, hamming
from simhash_filter.cli.main import main
from simhash_filter.index.nearduplicate import PROSE_SIMILARITY, spots_of
from simhash_filter.index.tables import TableDesign
from simhash_filter.model.sketch import similarity
from simhash_filter.report.calibrate import Metrics, PairResult, analyse, calibrate, language, read_labels, wilson
from simhash_filter.report.calibrate import pages as calibrate_pages

SVG = "{http://www.w3.org/2000/svg}"
DESIGN = TableDesign.parse(DEFAULTS.tables)
#: Near-duplicate pairs that the labeller of the fixture set calls distinct (a stricter notion of "the same page"):
#: flags of them are false positives.
STRICT = {"en-one-word-edit", "zh-ads"}
HOSTS = {"The Riverside Gazette": "gazette.example", "Northwind Ledger": "ledger.example",
         "城东新闻网": "portal.example", "山野论坛": "forum.example"}  # fmt: skip


def write_lines(path: Path, lines: list[str]) -> Path:
    """Write lines (JSON or deliberately not), gzip-compressed when the name ends in .gz."""
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def label(a: str, b: str, duplicate: bool) -> str:
    return json.dumps({"url_a": a, "url_b": b, "duplicate": duplicate})


def page(url: str, html: str) -> str:
    return json.dumps({"url": url, "html": html})


class FixtureSet:
    """The fixture pages as a labelled set: URLs by page (one per distinct HTML, its host by template), the pairs
    with their answers, and the files."""

    def __init__(self, tmp_path: Path) -> None:
        self.urls: dict[str, str] = {}
        self.pairs: list[tuple[str, str, bool]] = []  # html_a, html_b, duplicate
        for name, (a, b) in near_duplicate_pairs().items():
            self.pairs.append((a, b, name not in STRICT))
        self.pairs += [(a, b, False) for a, b in distinct_pairs().values()]
        for a, b, _ in self.pairs:
            for html in (a, b):
                if html not in self.urls:
                    host = next(h for mark, h in HOSTS.items() if mark in html)
                    self.urls[html] = f"https://{host}/page-{len(self.urls)}"
        self.pages = write_lines(tmp_path / "pages.jsonl", [page(u, h) for h, u in self.urls.items()])
        lines = [label(self.urls[a], self.urls[b], dup) for a, b, dup in self.pairs]
        self.labels = write_lines(tmp_path / "labels.jsonl", lines)

    def expected(self, k: int, t: float) -> Metrics:
        """The scores at (k, t), from the model's fingerprints and sketches of each pair's pages."""
        tp = fp = fn = tn = 0
        for a, b, duplicate in self.pairs:
            fa, fb = fingerprint(a), fingerprint(b)
            d = hamming(fa.value, fb.value)
            found = d <= 4 or DESIGN.agree_on_a_lead(fa.value, fb.value)
            words = similarity(fa.word_sketch, fb.word_sketch)
            spots = spots_of(fa.sketch, fb.sketch, len(fa.word_sketch))  # model v6: the spots of article-like pages
            flagged = found and d <= k and (words >= t or spots >= PROSE_SIMILARITY)
            tp += flagged and duplicate
            fp += flagged and not duplicate
            fn += duplicate and not flagged
            tn += not duplicate and not flagged
        return Metrics(tp, fp, fn, tn)


@pytest.fixture
def fixture_set(tmp_path: Path) -> FixtureSet:
    return FixtureSet(tmp_path)


def pair(d: int, s: float, duplicate: bool, *, found: bool = True, lang: str = "en", host: str = "a.example"):
    """A measured pair made up for a test (no pages)."""
    return PairResult("https://a.example/x", "https://a.example/y", duplicate, d, s, found, lang, host)


# --- labels --------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_labels_count_malformed_repeated_conflicting_and_self_pairs(tmp_path, suffix):
    """Malformed, repeated, conflicting and same-URL label lines are counted and left out as documented."""
    lines = [
        label("https://a/1", "https://a/2", True),
        "not json",
        "[1, 2]",
        json.dumps({"url_a": "https://a/1", "duplicate": True}),
        json.dumps({"url_a": "https://a/1", "url_b": "https://a/3", "duplicate": "yes"}),
        label("https://a/2", "https://a/1", True),
        label("https://a/1", "https://a/4", True),
        label("https://a/4", "https://a/1", False),
        label("https://a/5", "https://a/5", True),
        "",
        json.dumps({"url_a": 5, "url_b": "https://a/3", "duplicate": False}),
        label("https://a/6", "https://a/7", False),
    ]
    labels = read_labels(write_lines(tmp_path / f"labels{suffix}", lines))
    assert [(p.url_a, p.url_b, p.duplicate, p.line) for p in labels.pairs] == [
        ("https://a/1", "https://a/2", True, 1),
        ("https://a/6", "https://a/7", False, 12),
    ]
    assert (labels.lines, labels.repeated, labels.conflicting, labels.conflicting_lines) == (11, 1, 1, 2)
    assert labels.same_url == 1
    assert labels.malformed == 5
    assert [n for n, _ in labels.malformed_lines] == [2, 3, 4, 5, 11]
    reasons = [why for _, why in labels.malformed_lines]
    assert reasons[0].startswith("not JSON")
    assert reasons[1:] == [
        "not a JSON object (got list)",
        'missing "url_b"',
        '"duplicate" is not true or false (got "yes")',
        '"url_a" is not a string (got int)',
    ]


def test_labels_from_a_stream():
    """Labels can be read from an open binary stream (standard input)."""
    labels = read_labels(io.BytesIO((label("https://a/1", "https://a/2", False) + "\n").encode()))
    assert [(p.url_a, p.duplicate) for p in labels.pairs] == [("https://a/1", False)]


# --- scores --------------------------------------------------------------------------------------


def test_wilson_interval():
    """The Wilson 95 % interval: [n / (n + z²), 1] for all successes, symmetric around 0.5 for half, None for n = 0."""
    lo, hi = wilson(10, 10)
    assert lo == pytest.approx(10 / (10 + 1.959963984540054**2)) and hi == 1.0
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(0, 10)[0] == 0.0
    assert wilson(0, 0) is None


def test_precision_is_undefined_when_nothing_is_flagged():
    """Nothing flagged: precision None; recall and F1 0 with duplicates, None without."""
    m = Metrics(tp=0, fp=0, fn=5, tn=5)
    assert (m.precision, m.recall, m.f1, m.precision_ci) == (None, 0.0, 0.0, None)
    m = Metrics(tp=0, fp=0, fn=0, tn=5)
    assert (m.precision, m.recall, m.f1) == (None, None, None)
    m = Metrics(tp=3, fp=1, fn=2, tn=4)
    assert (m.precision, m.recall, m.f1) == (0.75, 0.6, 6 / 9)


def test_sweep_matches_the_model_on_the_fixture_pages(fixture_set):
    """Every (k, t) scores the fixture pairs as the model's distances, similarities and tables say."""
    result = calibrate(fixture_set.labels, [str(fixture_set.pages)])
    a = result.analysis
    assert len(a.pairs) == len(fixture_set.pairs) == 24
    assert (a.duplicates, a.distinct) == (10, 14)
    assert a.ks == list(range(17))
    assert a.ts == [0.0, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]
    for k in a.ks:
        for t in a.ts:
            assert a.metrics(k, t) == fixture_set.expected(k, t), (k, t)
    m = a.metrics(10, 0.75)
    assert (m.precision, m.recall) == (m.tp / (m.tp + m.fp), m.tp / (m.tp + m.fn))
    assert m.fp == 2  # the two near-duplicates labelled distinct are flagged
    assert a.metrics(0, 0.0).tp < a.metrics(3, 0.0).tp  # edits and copies lie 1-3 bits apart


def test_the_current_threshold_is_always_in_the_grid(fixture_set):
    """A current t off the grid (0.99) is swept too, and scored as the model says."""
    config = FilterConfig(max_distance=3, min_similarity=0.99)
    a = calibrate(fixture_set.labels, [str(fixture_set.pages)], config=config).analysis
    assert 0.99 in a.ts and a.ts == sorted(a.ts)
    assert a.current.k == 3 and a.current.t == 0.99
    assert a.current.metrics == fixture_set.expected(3, 0.99)


def test_identical_pages_are_flagged_everywhere_and_a_far_duplicate_is_missed_at_every_k(tmp_path):
    """Identical pages are flagged at every (k, t); a duplicate further than 16 bits is missed at every k."""
    same = gazette(RAINWATER)
    a1, b1, a2 = "https://a.example/1", "https://b.example/1", "https://a.example/2"
    pages = write_lines(tmp_path / "pages.jsonl", [page(a1, same), page(b1, same), page(a2, gazette(LIGHTHOUSE))])
    labels = write_lines(tmp_path / "labels.jsonl", [label(a1, b1, True), label(a1, a2, True)])
    a = calibrate(labels, [str(pages)]).analysis
    identical, far = a.pairs
    assert (identical.distance, identical.similarity, identical.found) == (0, 1.0, True)
    assert far.distance > 16
    for k in a.ks:
        for t in a.ts:
            assert a.metrics(k, t) == Metrics(tp=1, fp=0, fn=1, tn=0)
    assert a.current.beyond_k == 1 and a.current.below_t == a.current.no_table == 0
    assert any("only 2 labelled duplicate pairs" in w for w in a.warnings)
    assert any("no labelled distinct pairs" in w for w in a.warnings)


def test_missing_and_unfingerprintable_pages_are_counted_skips(tmp_path):
    """A pair with a missing or unfingerprintable page is a skip counted by reason, not an error."""
    pages = write_lines(tmp_path / "pages.jsonl", [
        page("https://a.example/1", gazette(RAINWATER)),
        page("https://a.example/2", gazette(RAINWATER, ads=True)),
        page("https://a.example/img", '<html><body><img src="/a.jpg"></body></html>'),
    ])  # fmt: skip
    labels = write_lines(tmp_path / "labels.jsonl", [
        label("https://a.example/1", "https://a.example/2", True),
        label("https://a.example/1", "https://a.example/gone", True),
        label("https://a.example/img", "https://a.example/2", False),
    ])  # fmt: skip
    result = calibrate(labels, [str(pages)])
    assert dict(result.skipped) == {"missing_page": 1, "page_too_few_features": 1}
    assert (result.pages.wanted, result.pages.found, result.pages.fingerprinted) == (4, 3, 2)
    assert dict(result.pages.failed) == {"too_few_features": 1}
    assert len(result.analysis.pairs) == 1


def test_only_the_pages_of_pairs_are_fingerprinted_and_the_first_of_a_url_wins(tmp_path, monkeypatch):
    """Only pages of pairs are fingerprinted, the first page of a URL wins, malformed page lines are counted."""
    given: list[str] = []
    real = calibrate_pages.fingerprint_items

    def spy(items, **kwargs):
        def seen():
            for item in items:
                given.append(item.url)
                yield item

        return real(seen(), **kwargs)

    monkeypatch.setattr(calibrate_pages, "fingerprint_items", spy)
    pages = write_lines(tmp_path / "pages.jsonl", [
        page("https://a.example/other", gazette(BACKUPS)),
        page("https://a.example/1", gazette(RAINWATER)),
        "{broken",
        page("https://a.example/2", gazette(RAINWATER)),
        page("https://a.example/1", gazette(LIGHTHOUSE)),
    ])  # fmt: skip
    labels = write_lines(tmp_path / "labels.jsonl", [label("https://a.example/1", "https://a.example/2", True)])
    result = calibrate(labels, [str(pages)])
    assert given == ["https://a.example/1", "https://a.example/2"]
    assert result.analysis.pairs[0].distance == 0  # the first page of /1, not the later LIGHTHOUSE one
    assert (result.pages.lines, result.pages.malformed) == (5, 1)
    assert [(n, why[:8]) for _, n, why in result.pages.malformed_lines] == [(3, "not JSON")]


def test_pages_are_read_from_several_inputs_and_warc(tmp_path):
    """Pages may come from several inputs, WARC among them; the results are those of the same pages in JSON Lines."""
    from test_warc import response, write_warc

    urls = ["https://a.example/1", "https://b.example/1", "https://a.example/2"]
    htmls = [gazette(RAINWATER), ledger(RAINWATER), gazette(LIGHTHOUSE)]
    write_warc(tmp_path / "crawl.warc.gz", [response(u, h.encode()) for u, h in zip(urls[:2], htmls[:2], strict=True)])
    write_lines(tmp_path / "rest.jsonl", [page(urls[2], htmls[2])])
    write_lines(tmp_path / "all.jsonl", [page(u, h) for u, h in zip(urls, htmls, strict=True)])
    labels = write_lines(tmp_path / "labels.jsonl", [label(urls[0], urls[1], True), label(urls[0], urls[2], False)])
    mixed = calibrate(labels, [str(tmp_path / "crawl.warc.gz"), str(tmp_path / "rest.jsonl")])
    plain = calibrate(labels, [str(tmp_path / "all.jsonl")])
    assert mixed.analysis.pairs == plain.analysis.pairs
    assert (mixed.pages.warc.files, mixed.pages.warc.pages) == (1, 2)


def test_workers_give_the_same_result(fixture_set):
    """Fingerprinting in two worker processes gives the same pairs as in this process."""
    one = calibrate(fixture_set.labels, [str(fixture_set.pages)], workers=1)
    two = calibrate(fixture_set.labels, [str(fixture_set.pages)], workers=2)
    assert one.analysis.pairs == two.analysis.pairs


def test_language_of_a_page():
    """Language: <html lang> primary subtag, else "zh" for >= 20 % CJK letters, else "und"."""
    assert language(gazette(RAINWATER)) == "en"
    assert language(portal(LIGHTHOUSE)) == "zh"  # lang="zh-CN", whatever the text
    assert language(forum(LIBRARY)) == "zh"  # no lang; Chinese text
    assert language(forum(BACKUPS)) == "und"  # no lang; English text in Chinese chrome: under 20 % CJK
    assert language(ledger(RAINWATER)) == "und"
    assert language('<html lang="EN_gb"><body><p>x</p></body></html>') == "en"
    chinese = "<html><body><p>图书馆延长开放时间 library</p></body></html>"
    assert language(chinese) == "zh"
    assert language(chinese.encode("gb18030")) == "zh"
    assert language(b"\x00\x01binary") == "und"


def test_breakdowns_by_language_and_host(fixture_set):
    """Pairs are broken down by the language of page a and the host of url_a, largest first."""
    a = calibrate(fixture_set.labels, [str(fixture_set.pages)]).analysis
    langs = {g.name: (g.pairs, g.duplicates, g.distinct) for g in a.by_language}
    # near-duplicates: page a in gazette (en) or portal (zh); distinct: gazette, ledger (no lang: und), portal, forum
    assert langs == {"en": (9, 5, 4), "zh": (12, 5, 7), "und": (3, 0, 3)}
    assert [g.name for g in a.by_language] == ["zh", "en", "und"]
    hosts = {g.name: g.pairs for g in a.by_host}
    assert hosts == {"gazette.example": 9, "portal.example": 9, "ledger.example": 3, "forum.example": 3}
    en = next(g for g in a.by_language if g.name == "en")
    assert en.current.fp == 1  # the one-word edit labelled distinct


def test_hosts_beyond_the_top_20_are_one_row():
    """The 20 hosts with the most pairs are shown one by one; the rest are one row, "other", last."""
    pairs = [pair(0, 1.0, True, host=f"h{i:02d}.example") for i in range(25) for _ in range(30 - i)]
    a = analyse(pairs)
    names = [g.name for g in a.by_host]
    assert names == [f"h{i:02d}.example" for i in range(20)] + ["other"]
    assert a.by_host[-1].pairs == sum(30 - i for i in range(20, 25))


def test_recommendation_is_the_best_f1_nearest_to_the_current_setting():
    """The best F1 wins; among equal F1 the setting nearest to the current one (steps of k and of 0.05 of t)."""
    pairs = [pair(6, 0.9, True)] * 60 + [pair(3, 0.6, False)] * 60 + [pair(30, 0.1, False)] * 10
    a = analyse(pairs, config=FilterConfig(max_distance=3, min_similarity=0.5))
    assert (a.best_f1.k, a.best_f1.t) == (6, 0.65)
    assert a.best_f1.metrics == Metrics(tp=60, fp=0, fn=0, tn=70)
    assert a.best_f1.metrics.f1 == max(m.f1 for m in a.cells.values() if m.f1 is not None)
    assert a.best_f1.scrapy == "SIMHASH_MAX_DISTANCE = 6\nSIMHASH_MIN_SIMILARITY = 0.65"
    assert a.best_f1.command_line == "-k 6 -t 0.65"
    assert a.current.metrics == Metrics(tp=0, fp=60, fn=60, tn=10)
    assert a.current.beyond_k == 60
    assert not a.warnings
    perfect = analyse([pair(0, 1.0, True)] * 60 + [pair(40, 0.0, False)] * 60)
    assert (perfect.best_f1.k, perfect.best_f1.t) == (DEFAULTS.max_distance, DEFAULTS.min_similarity)


def test_high_precision_choice_is_the_best_recall_at_precision_099():
    """The high-precision choice has the best recall at precision >= 0.99, or is None."""
    pairs = ([pair(2, 0.95, True)] * 50 + [pair(8, 0.9, True)] * 10 + [pair(8, 0.9, False)]
             + [pair(30, 0.1, False)] * 100)  # fmt: skip
    a = analyse(pairs)
    assert (a.best_f1.k, a.best_f1.t) == (10, 0.75)
    assert a.best_f1.metrics.precision == 60 / 61 < 0.99
    assert (a.high_precision.k, a.high_precision.t) == (7, 0.75)
    assert a.high_precision.metrics == Metrics(tp=50, fp=0, fn=10, tn=101)
    assert a.high_precision.beyond_k == 10
    a = analyse([pair(0, 1.0, True)] * 5 + [pair(0, 1.0, False)] * 5)
    assert a.high_precision is None


def test_calibration_is_json_serialisable(fixture_set):
    """as_dict() holds the settings, counts, sweep, recommendation, breakdowns and note, and is JSON."""
    result = calibrate(fixture_set.labels, [str(fixture_set.pages)])
    d = json.loads(json.dumps(result.as_dict()))
    assert d["settings"] == {"k": 10, "t": 0.75, "tables": DEFAULTS.tables}
    assert d["pairs"] == {"used": 24, "duplicates": 10, "distinct": 14, "skipped": {}}
    assert len(d["sweep"]) == 17 * 11
    assert set(d["recommendation"]) == {"best_f1", "high_precision", "high_precision_rule", "current"}
    assert d["recommendation"]["current"]["scrapy"] == {"SIMHASH_MAX_DISTANCE": 10, "SIMHASH_MIN_SIMILARITY": 0.75}
    assert d["labels"]["pairs"] == 24 and d["pages"]["fingerprinted"] == len(fixture_set.urls)
    assert "judges each labelled pair alone" in d["note"]


# --- the command line ----------------------------------------------------------------------------


def test_cli_text_report(fixture_set, capsys):
    """The text report has the counts, tables, breakdowns, recommendation, warnings and note; exit 0."""
    assert main(["calibrate", str(fixture_set.labels), "--pages", str(fixture_set.pages)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "pairs: 24 used (10 duplicates, 14 distinct)" in out
    assert "settings now: k = 10, t = 0.75" in out
    for heading in ("Against k, at t = 0.75", "Against t, at k = 10", "By language of page a", "By host of url_a"):
        assert heading in out
    assert "Recommendation\n  best F1: k = " in out
    assert "SIMHASH_MAX_DISTANCE = " in out and "command line: -k " in out
    assert "highest recall at precision >= 0.99 (the point estimate" in out
    assert "warning: only 10 labelled duplicate pairs" in out
    assert "note: Calibration judges each labelled pair alone" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("10 ") and "current" in line)
    m = fixture_set.expected(10, 0.75)
    scores = [f"{m.precision:.3f}", f"{m.recall:.3f}", f"{m.f1:.3f}"]
    assert row.split()[1:8] == [*scores, str(m.tp), str(m.fp), str(m.fn), str(m.tn)]


def test_cli_json(fixture_set, capsys):
    """``--json`` prints one JSON object (the calibration's as_dict) instead of the text."""
    args = ["calibrate", str(fixture_set.labels), "--pages", str(fixture_set.pages), "--json", "-k", "4", "-t", "0.8"]
    assert main(args) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["settings"]["k"] == 4 and d["settings"]["t"] == 0.8
    assert d["recommendation"]["current"]["k"] == 4


def test_cli_writes_an_svg_plot(fixture_set, tmp_path, capsys):
    """--plot FILE.svg writes the three charts stacked in one SVG that parses as XML."""
    out = tmp_path / "calibration.svg"
    assert main(["calibrate", str(fixture_set.labels), "--pages", str(fixture_set.pages), "--plot", str(out)]) == 0
    root = ET.fromstring(out.read_text(encoding="utf-8"))
    assert root.tag == f"{SVG}svg" and root.get("role") == "img"
    charts = root.findall(f"{SVG}svg")
    titles = [c.find(f"{SVG}title").text for c in charts]
    assert titles[0].startswith("Precision, recall and F1 against k") and titles[1].startswith("Precision, recall")
    assert titles[2].startswith("Labelled duplicates by Hamming distance")
    assert any(line.get("stroke-dasharray") for line in charts[0].iter(f"{SVG}line"))
    assert "Recommendation" in capsys.readouterr().out


def test_cli_writes_an_html_page(fixture_set, tmp_path):
    """``--plot FILE.html`` writes a self-contained page (well-formed XML too) with the charts inline and the tables."""
    out = tmp_path / "calibration.html"
    assert main(["calibrate", str(fixture_set.labels), "--pages", str(fixture_set.pages), "--plot", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    root = ET.fromstring(text)
    assert len(root.findall(f".//{SVG}svg")) == 3
    assert len(root.findall(".//table")) == 4
    assert "SIMHASH_MIN_SIMILARITY" in text
    assert "src=" not in text and "href=" not in text  # nothing to fetch


def test_cli_png_needs_matplotlib(fixture_set, tmp_path, capsys, monkeypatch):
    """Without matplotlib, --plot FILE.png is one line naming the extra, exit 2, before any work."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    out = tmp_path / "c.png"
    assert main(["calibrate", str(fixture_set.labels), "--pages", str(fixture_set.pages), "--plot", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"simhash-filter: --plot {out} needs matplotlib: pip install 'simhash-filter[plot]' (or write .svg)\n"
    )
    assert not out.exists()


def test_cli_png_with_matplotlib(fixture_set, tmp_path):
    """With matplotlib, ``--plot FILE.png`` writes a PNG image."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "c.png"
    assert main(["calibrate", str(fixture_set.labels), "--pages", str(fixture_set.pages), "--plot", str(out)]) == 0
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_cli_other_plot_suffixes_are_usage_errors(fixture_set, capsys):
    """``--plot`` of another kind of file is a usage error (exit status 2)."""
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", str(fixture_set.labels), "--pages", str(fixture_set.pages), "--plot", "c.pdf"])
    assert exc.value.code == 2
    assert "--plot c.pdf: write a .svg, .html or .png file" in capsys.readouterr().err


def test_cli_malformed_labels_are_shown_and_end_with_status_2(fixture_set, tmp_path, capsys):
    """The first 20 malformed label lines are named, the rest counted; the report is printed; exit 2."""
    good = fixture_set.labels.read_text(encoding="utf-8").splitlines()
    labels = write_lines(tmp_path / "bad.jsonl", good + ["oops"] * 25)
    assert main(["calibrate", str(labels), "--pages", str(fixture_set.pages)]) == 2
    out, err = capsys.readouterr()
    shown = [line for line in err.splitlines() if "malformed label" in line]
    assert len(shown) == 20
    assert shown[0].startswith(f"simhash-filter: {labels}:{len(good) + 1}: malformed label: not JSON")
    assert f"simhash-filter: {labels}: 5 more malformed lines: counted, not shown" in err
    assert "25 malformed" in out.splitlines()[0]


def test_cli_no_usable_pairs_is_one_line_and_status_1(fixture_set, tmp_path, capsys):
    """Labels whose pages are all missing: one line saying why, exit status 1; a labels file without any pair too."""
    labels = write_lines(tmp_path / "labels.jsonl", [label("https://x.example/1", "https://x.example/2", True)])
    assert main(["calibrate", str(labels), "--pages", str(fixture_set.pages)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "simhash-filter: no usable labelled pairs: all 1 pairs skipped (missing_page 1)\n"
    empty = write_lines(tmp_path / "empty.jsonl", [label("https://x.example/1", "https://x.example/1", True)])
    assert main(["calibrate", str(empty), "--pages", str(fixture_set.pages)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"simhash-filter: no usable labelled pairs in {empty}: 1 lines: 0 pairs")
    assert err.count("\n") == 1


def test_cli_inputs_that_cannot_be_read_are_one_line_and_status_1(fixture_set, tmp_path, capsys):
    """A labels file or a pages input that does not exist, or a .gz cut short: one line naming it, exit status 1."""
    none = tmp_path / "none.jsonl"
    assert main(["calibrate", str(none), "--pages", str(fixture_set.pages)]) == 1
    assert capsys.readouterr().err == f"simhash-filter: cannot read {none}: No such file or directory\n"
    missing = tmp_path / "missing.jsonl"
    assert main(["calibrate", str(fixture_set.labels), "--pages", str(fixture_set.pages), str(missing)]) == 1
    assert capsys.readouterr().err == f"simhash-filter: cannot open {missing}: No such file or directory\n"
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(fixture_set.pages.read_bytes())[:2000])
    assert main(["calibrate", str(fixture_set.labels), "--pages", str(cut)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"simhash-filter: {cut}: read error: ") and err.count("\n") == 1


def test_cli_usage_errors(fixture_set, capsys):
    """-k beyond 16, t beyond 1, --workers 0 and '-' as pages are usage errors (exit status 2)."""
    base = ["calibrate", str(fixture_set.labels), "--pages", str(fixture_set.pages)]
    for extra in (["-k", "17"], ["-t", "1.5"], ["--workers", "0"]):
        with pytest.raises(SystemExit) as exc:
            main(base + extra)
        assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", "-", "--pages", "-"])
    assert exc.value.code == 2
    assert "only the labels can be read from standard input" in capsys.readouterr().err


def test_cli_labels_from_standard_input(fixture_set, capsys, monkeypatch):
    """LABELS '-' reads the labels from standard input."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(fixture_set.labels.read_bytes())))
    assert main(["calibrate", "-", "--pages", str(fixture_set.pages), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pairs"]["used"] == 24


def test_the_command_line_does_not_import_the_calibration_until_it_runs():
    """Building the parser (every command's start) imports the calibrate command's parser only, not its work."""
    code = (
        "import sys; from simhash_filter.cli.main import build_parser; build_parser();"
        "print('simhash_filter.cli.calibrate' in sys.modules, 'simhash_filter.report.calibrate' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False"]
