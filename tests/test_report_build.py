"""The report's data: reading a crawl's feed or a dedup output with its input, the clusters, near misses, hosts and
skipped pages, and the pairs' texts and explanations (the HTML and the browser: test_report_html, test_report_e2e)."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pytest
import worker_helpers

from simhash_filter.batch.dedup import dedup
from simhash_filter.cli.main import main
from simhash_filter.config import FilterConfig
from simhash_filter.report import detail
from simhash_filter.report.build import ABSENT, Options, Report, build, read_decisions
from simhash_filter.report.detail import display_text
from simhash_filter.report.source import UNCHECKED, MismatchError, Source


def details(report: Report) -> list[dict]:
    """The report's chunks of pair details, decoded as the browser decodes them."""
    return [json.loads(gzip.decompress(base64.b64decode(chunk))) for chunk in report.chunks]


def write_lines(path: Path, objects: list[object]) -> Path:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as f:  # type: ignore[operator]
        for obj in objects:
            f.write((obj if isinstance(obj, str) else json.dumps(obj)) + "\n")
    return path


def item(url: str, fp: str | None, dup: str | None = None, distance: int | None = None, **more: object) -> dict:
    out: dict = {"url": url, "text": f"text of {url}"}
    if fp is not None:
        out.update(fingerprint=fp, duplicate_of=dup, distance=distance)
    out.update(more)
    return out


FEED = [
    item("https://a.example/1", "0000000000000000"),
    item("https://b.example/1", "0000000000000003", "https://a.example/1", 2),
    item("https://a.example/2", "ffffffffffffffff"),
    item("https://c.example/1", "0000000000000001", "https://a.example/1", 1),
    item("https://a.example/img", None, skipped="too_few_features"),
    "{not json",
    item("https://a.example/old", "1111111111111111", "https://a.example/old", 0),
    item("https://b.example/2", "fffffffffffffff0", "https://gone.example/x", 4),
    item("https://a.example/plain", None),
    item("https://b.example/near", "ffffffffffff0000"),
]


def test_a_feed_gives_each_page_its_decision_and_each_near_duplicate_its_page(tmp_path):
    """Clusters join near-duplicates to the page they name; an unchanged page, a page kept before the feed
    (absent), a skipped item, an item the filter never saw and a malformed line are told apart."""
    d = read_decisions(Source(str(write_lines(tmp_path / "feed.jsonl", FEED))))
    assert len(d) == 11  # ten lines and one absent page
    assert d.targets[1] == 0 and d.targets[3] == 0 and d.distances[3] == 1
    assert d.urls[10] == "https://gone.example/x" and d.statuses[10] == ABSENT and d.targets[7] == 10
    assert d.statuses[4] == "too_few_features" and d.statuses[5] == "malformed" and d.statuses[8] == UNCHECKED
    assert d.unchanged == 1 and d.targets[6] == -1
    assert not d.html
    assert d.host_names[:3] == ["a.example", "b.example", "c.example"]


def test_a_report_counts_pages_hosts_and_what_was_saved(tmp_path):
    """The summary's counts: pages (absent ones left out), kept, near-duplicates, skipped and malformed, bytes of
    text saved, per host; clusters largest first; near misses are kept pages close to an earlier page."""
    report = build(Source(str(write_lines(tmp_path / "feed.jsonl", FEED))), Options())
    meta = report.summary["meta"]
    assert (meta["pages"], meta["near_duplicates"], meta["skipped"], meta["malformed"]) == (10, 3, 2, 1)
    assert meta["kept"] == 4 and meta["bytes_kind"] == "text" and not meta["explained"]
    sizes = {p[0]: p[2] for p in report.summary["pages"]}
    saved = sum(sizes[u] for u in ("https://b.example/1", "https://c.example/1", "https://b.example/2"))
    assert meta["bytes_saved"] == saved
    clusters = report.summary["clusters"]
    assert [c[0] for c in clusters] == [0, 10] and [m[0] for m in clusters[0][1]] == [1, 3]
    hosts = {report.summary["hosts"][r[0]]: r[1:] for r in report.summary["host_stats"]}
    assert hosts["b.example"][:4] == [3, 1, 2, 0]
    assert hosts["a.example"][:4] == [5, 3, 0, 2] and hosts[""][:4] == [1, 0, 0, 1]  # the malformed line
    assert [m[:3] for m in report.summary["near_misses"]] == [[9, 7, 12]]  # within k + 3 of a near-duplicate
    assert {tuple(s) for s in report.summary["skipped"]} == {(4, "too_few_features"), (5, "malformed"),
                                                            (8, UNCHECKED)}  # fmt: skip
    texts = {k: v for chunk in details(report) for k, v in chunk["texts"].items()}
    assert texts["1"] == "text of https://b.example/1"
    assert any("no HTML" in note for note in meta["notes"])


@pytest.fixture
def dedup_run(corpus, tmp_path) -> tuple[Path, Path]:
    pages = write_lines(tmp_path / "pages.jsonl.gz", [{"url": u, "html": h} for u, h in corpus])
    lines = [json.dumps({"url": u, "html": h}).encode() for u, h in corpus]
    out = write_lines(tmp_path / "out.jsonl", [o.record() for o in dedup(lines, config=FilterConfig())])
    return out, pages


def test_a_dedup_output_with_its_input_explains_each_pair(dedup_run):
    """With the input, each pair has both main texts, the distance and similarity, and the features that set the
    pages apart; the same in one process and in two worker processes."""
    out, pages = dedup_run
    one = build(Source(str(out), str(pages)), Options())
    two = build(Source(str(out), str(pages)), Options(workers=2))
    assert one.chunks == two.chunks and one.summary["clusters"] == two.summary["clusters"]
    meta = one.summary["meta"]
    assert meta["explained"] and meta["bytes_kind"] == "HTML" and meta["near_duplicates"] == 2
    pairs = {int(k): v for chunk in details(one) for k, v in chunk["pairs"].items()}
    texts = {int(k): v for chunk in details(one) for k, v in chunk["texts"].items()}
    for _, members in one.summary["clusters"]:
        for member, target, distance, similarity, pair_id in members:
            pair = pairs[pair_id]
            assert (pair["a"], pair["b"], pair["distance"]) == (member, target, distance)
            assert similarity == pair["similarity"] >= 0.75
            assert pair["text"] and texts[member] and texts[target]
    assert "distance" in one.charts and one.charts["distance"].startswith("<svg")


def test_a_dedup_output_and_an_input_that_do_not_belong_together_are_refused(dedup_run, tmp_path, corpus):
    """Another input (other URLs, fewer or more pages) is a MismatchError naming the line."""
    out, _ = dedup_run
    other = write_lines(tmp_path / "other.jsonl", [{"url": u + "?x", "html": h} for u, h in corpus])
    with pytest.raises(MismatchError, match="line 1 of the output"):
        read_decisions(Source(str(out), str(other)))
    fewer = write_lines(tmp_path / "fewer.jsonl", [{"url": u, "html": h} for u, h in corpus[:-1]])
    with pytest.raises(MismatchError, match="more lines than"):
        read_decisions(Source(str(out), str(fewer)))


def test_max_pairs_limits_the_pairs_with_texts(dedup_run):
    """Beyond --max-pairs a pair is listed with its numbers and no detail (pair id -1)."""
    out, pages = dedup_run
    report = build(Source(str(out), str(pages)), Options(max_pairs=1))
    ids = [m[4] for _, members in report.summary["clusters"] for m in members]
    assert ids.count(-1) == len(ids) - 1 and report.detailed == 1
    assert any("first 1 of" in note for note in report.summary["meta"]["notes"])


def test_display_text_joins_inline_pieces_and_cuts_long_texts():
    """Short pieces that end no sentence join the next line; spaces collapse; a text over the cap is cut."""
    assert display_text("Read the\nguide\n  now.\nNext   line", 100) == ("Read the guide now.\nNext line", False)
    assert display_text("x" * 150, 100) == ("x" * 100, True)


def test_the_command_writes_the_report_beside_the_feed(tmp_path, capsys):
    """``simhash-filter report FEED`` writes FEED's name + .report.html and says what it holds on stderr."""
    feed = write_lines(tmp_path / "pages.jsonl", [line for line in FEED if isinstance(line, dict)])
    assert main(["report", str(feed)]) == 0
    written = tmp_path / "pages.report.html"
    assert written.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert "report: 9 pages, 2 clusters of near-duplicates (3 pairs)" in capsys.readouterr().err


def test_malformed_lines_make_the_command_exit_2_as_dedup_does(tmp_path, capsys):
    """A feed with a malformed line: the report is written, one line counts them, exit status 2 (as ``dedup``);
    a file with no feed line at all (an HTML page): one line, no report, exit status 2."""
    feed = write_lines(tmp_path / "pages.jsonl", FEED)
    assert main(["report", str(feed)]) == 2
    err = capsys.readouterr().err
    assert "1 malformed lines" in err and "report: 9 pages" in err and (tmp_path / "pages.report.html").exists()
    page = tmp_path / "page.html"
    page.write_text("<html>\n<body><p>Not a feed.</p>\n</body></html>\n", encoding="utf-8")
    assert main(["report", str(page)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "3 malformed lines" in err and "not a crawl's JSON Lines feed" in err
    assert not (tmp_path / "page.report.html").exists()


def test_the_command_refuses_bad_inputs_with_one_line(tmp_path, capsys, dedup_run):
    """A missing file, a mismatched input, standard input and an output that is the input: one line each."""
    out, _ = dedup_run
    assert main(["report", str(tmp_path / "missing.jsonl")]) == 1
    assert capsys.readouterr().err.strip().count("\n") == 0
    other = write_lines(tmp_path / "other.jsonl", [{"url": "https://x.example/", "html": "<p>x</p>"}])
    assert main(["report", str(out), "--pages", str(other), "-o", str(tmp_path / "r.html")]) == 1
    err = capsys.readouterr().err
    assert "do not belong together" in err and err.strip().count("\n") == 0 and not (tmp_path / "r.html").exists()
    for argv in (["report", "-"], ["report", str(out), "-o", str(out)]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert capsys.readouterr().err.strip().splitlines()[-1].startswith("simhash-filter report: error:")


def test_workers_that_die_end_the_command_with_one_line(dedup_run, tmp_path, capsys, monkeypatch):
    """A worker process that dies while the pairs are worked out: one line, exit status 1, no report written."""
    out, pages = dedup_run
    monkeypatch.setattr(detail, "init", worker_helpers.fail_to_start)
    report = tmp_path / "r.html"
    assert main(["report", str(out), "--pages", str(pages), "-o", str(report), "--workers", "2"]) == 1
    err = capsys.readouterr().err
    assert "a worker process died" in err and err.strip().count("\n") == 0 and not report.exists()


def test_a_text_feed_gives_the_similarity_its_items_carry(tmp_path):
    """A flag-mode feed of text whose near-duplicates carry ``similarity``: the report's cluster rows show it
    (no HTML to recompute it from)."""
    feed = [item("https://a.example/1", "0000000000000000"),
            item("https://b.example/1", "0000000000000003", "https://a.example/1", 2, similarity=0.912),
            item("https://c.example/1", "0000000000000001", "https://a.example/1", 1)]  # fmt: skip
    report = build(Source(str(write_lines(tmp_path / "feed.jsonl", feed))), Options())
    rows = {m[0]: m for _, members in report.summary["clusters"] for m in members}
    assert rows[1][3] == 0.912 and rows[2][3] is None


def test_a_feed_without_texts_shows_the_numbers_it_carries(tmp_path):
    """A feed stored without ``text`` or ``html``: no pair counts as having texts, each pair shows the distance
    and similarity its item carries, and the note says the input holds neither."""
    feed = [{"url": "https://a.example/1", "fingerprint": "0000000000000000", "duplicate_of": None},
            {"url": "https://b.example/1", "fingerprint": "0000000000000003", "duplicate_of": "https://a.example/1",
             "distance": 2, "similarity": 0.875}]  # fmt: skip
    report = build(Source(str(write_lines(tmp_path / "feed.jsonl", feed))), Options())
    meta = report.summary["meta"]
    assert report.detailed == 0 and meta["pairs_with_detail"] == 0 and meta["content"] == "none"
    pair = details(report)[0]["pairs"]["0"]
    assert (pair["distance"], pair["similarity"]) == (2, 0.875)
    assert any("neither HTML nor text" in note for note in meta["notes"])
    assert not any("no HTML: the pairs show the stored text" in note for note in meta["notes"])
