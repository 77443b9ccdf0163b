"""Tests of simhash_filter.report.html: the self-contained report page, rendered from hand-made data and
opened as a file in headless Chromium (tests/browser.py), plus checks of the HTML without a browser."""

from __future__ import annotations

import base64
import gzip
import json
import random
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from browser import BrowserPage

from simhash_filter.report.html import CSP, render

HISTOGRAM = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 300 120" width="300" height="120" role="img">'
    "<title>Distances of the compared pairs</title>"
    '<rect x="10" y="40" width="30" height="70" fill="#4a7fc1"/><rect x="50" y="20" width="30" height="90" '
    'fill="#4a7fc1"/><rect x="90" y="80" width="30" height="30" fill="#4a7fc1"/></svg>'
)
SIMILARITY = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 300 120" width="300" height="120" role="img">'
    '<title>Similarities</title><rect x="10" y="60" width="40" height="50" fill="#6aa56a"/></svg>'
)
CHARTS = {"distance": HISTOGRAM, "similarity": SIMILARITY}

FOX = "The quick brown fox jumps over the lazy dog.\nA second line that stays the same in both pages."
CAT = "The quick brown cat jumps over the lazy dog.\nA second line that stays the same in both pages."
TEXT_FEATURES = [["fox", 1.5, 0.0], ["cat", 0.0, 1.5]]
STRUCTURE_FEATURES = [["div>p.entry", 2.0, 1.0], ["aside.sidebar", 0.0, 0.75]]


class Report:
    """Hand-made report data: pages, clusters, near misses and pairs, turned into summary and chunks."""

    def __init__(self, *, pairs_per_chunk: int = 4, explained: bool = True, text_cap: int = 2000) -> None:
        """An empty report with these settings."""
        self.hosts: list[str] = []
        self.pages: list[list[Any]] = []
        self.clusters: list[list[Any]] = []
        self.near_misses: list[list[Any]] = []
        self.pairs: list[dict[str, Any]] = []
        self.texts: dict[int, str] = {}
        self.cut: set[int] = set()
        self.pairs_per_chunk = pairs_per_chunk
        self.explained = explained
        self.text_cap = text_cap
        self.meta: dict[str, Any] = {}
        self._host_ids: dict[str, int] = {}

    def page(self, url: str, size: int = 1000, status: str | None = None, host: str | None = None) -> int:
        """Adds a page (its host taken from the URL unless given) and returns its id."""
        name = host if host is not None else (urlsplit(url).hostname or "")
        if name not in self._host_ids:
            self._host_ids[name] = len(self.hosts)
            self.hosts.append(name)
        self.pages.append([url, self._host_ids[name], size, status])
        return len(self.pages) - 1

    def pair(
        self,
        a: int,
        b: int,
        *,
        distance: int = 3,
        similarity: float | None = 0.91,
        texts: tuple[str, str] | None = (FOX, CAT),
        cut: Sequence[int] = (),
    ) -> int:
        """Adds the details of pair (a, b) and returns its pair id."""
        if texts is not None:
            self.texts[a], self.texts[b] = texts
        self.cut.update(cut)
        self.pairs.append({
            "a": a, "b": b, "distance": distance, "similarity": similarity, "weighted_jaccard": 0.87,
            "text_share": 0.6, "text": TEXT_FEATURES if self.explained else [],
            "structure": STRUCTURE_FEATURES if self.explained else [],
        })  # fmt: skip
        return len(self.pairs) - 1

    def cluster(self, root: int, members: list[tuple[int, int, int, float | None, int]]) -> None:
        """Adds a cluster: its kept page and [(member, target, distance, similarity, pair id)]."""
        self.clusters.append([root, [list(m) for m in members]])

    def near_miss(self, page: int, nearest: int, distance: int, similarity: float | None, pair_id: int) -> None:
        """Adds a kept page that came close to an earlier one."""
        self.near_misses.append([page, nearest, distance, similarity, pair_id])

    def summary(self) -> dict[str, Any]:
        """The summary dict in the report's format, with the counts computed from the pages."""
        duplicates = {m[0] for _, members in self.clusters for m in members}
        skipped = [[i, p[3]] for i, p in enumerate(self.pages) if p[3] is not None]
        stats = [[h, 0, 0, 0, 0, 0] for h in range(len(self.hosts))]
        for i, (_, host, size, status) in enumerate(self.pages):
            row = stats[host]
            row[1] += 1
            if status is not None:
                row[4] += 1
            elif i in duplicates:
                row[3] += 1
                row[5] += size
            else:
                row[2] += 1
        meta = {
            "title": "Test crawl", "source": "crawl.jsonl", "generated": "2024-05-01T12:00:00+00:00",
            "version": "0.1.0", "model": "default", "k": 3, "min_similarity": 0.85, "pages": len(self.pages),
            "kept": sum(r[2] for r in stats), "near_duplicates": len(duplicates), "skipped": len(skipped),
            "malformed": sum(1 for p in self.pages if p[3] == "malformed"),
            "bytes_total": sum(p[2] for p in self.pages), "bytes_saved": sum(r[5] for r in stats),
            "bytes_kind": "HTML", "pairs": len(self.pairs), "pairs_with_detail": len(self.pairs),
            "pairs_per_chunk": self.pairs_per_chunk, "text_cap": self.text_cap, "explained": self.explained,
            "notes": ["Pages are compared in input order."],
        }  # fmt: skip
        meta.update(self.meta)
        return {
            "meta": meta,
            "hosts": self.hosts,
            "pages": self.pages,
            "clusters": self.clusters,
            "near_misses": self.near_misses,
            "host_stats": [r for r in stats if r[1]],
            "skipped": skipped,
        }

    def chunks(self) -> list[dict[str, Any]]:
        """The pairs' details split into chunks of ``pairs_per_chunk``, with the texts each chunk needs."""
        out: list[dict[str, Any]] = []
        for start in range(0, len(self.pairs), self.pairs_per_chunk):
            texts: dict[str, str] = {}
            pairs: dict[str, Any] = {}
            for pair_id in range(start, min(start + self.pairs_per_chunk, len(self.pairs))):
                pair = self.pairs[pair_id]
                pairs[str(pair_id)] = pair
                for page in (pair["a"], pair["b"]):
                    if page in self.texts:
                        texts[str(page)] = self.texts[page]
            cut = sorted(int(p) for p in texts if int(p) in self.cut)
            out.append({"texts": texts, "cut": cut, "pairs": pairs})
        return out

    def write(self, path: Path, *, title: str = "Near-duplicates of the test crawl") -> Path:
        """Renders the report into ``path`` and returns it."""
        path.write_text(render(self.summary(), self.chunks(), CHARTS, title=title), encoding="utf-8")
        return path


def small_report() -> Report:
    """Three clusters of sizes 2, 4 and 3 (given out of order), a near miss, skipped pages on two hosts."""
    r = Report()
    small_root = r.page("https://a.example/small", 2000)
    small_dup = r.page("https://b.example/small-copy", 1500)
    big_root = r.page("https://a.example/big", 4000)
    big = [r.page(f"https://b.example/big-{i}", 1000 + i) for i in range(3)]
    mid_root = r.page("https://c.example/mid", 3000)
    mid = [r.page(f"https://c.example/mid-{i}", 500) for i in range(2)]
    lonely = r.page("https://a.example/lonely", 800)
    r.page("https://c.example/image.jpg", 50_000, "not_html")
    r.page("https://c.example/tiny", 100, "too_few_features")
    r.page("https://c.example/broken", 10, "malformed")
    p0 = r.pair(big[0], big_root, cut=(big[0],))
    p1 = r.pair(big[1], big_root, distance=4, similarity=0.88)
    p2 = r.pair(big[2], big[1], distance=5, similarity=None)
    r.cluster(small_root, [(small_dup, small_root, 2, 0.95, -1)])
    r.cluster(
        big_root, [(big[0], big_root, 3, 0.91, p0), (big[1], big_root, 4, 0.88, p1), (big[2], big[1], 5, None, p2)]
    )
    p3 = r.pair(mid[0], mid_root, distance=1, similarity=0.99)
    r.cluster(mid_root, [(mid[0], mid_root, 1, 0.99, p3), (mid[1], mid_root, 2, 0.97, -1)])
    r.near_miss(lonely, big_root, 9, 0.71, r.pair(lonely, big_root, distance=9, similarity=0.71))
    return r


def many_clusters(n: int) -> Report:
    """``n`` clusters of one near-duplicate each, after a first one of three; one member has a special host."""
    r = Report(pairs_per_chunk=100)
    root = r.page("https://site.example/first", 1000)
    r.cluster(root, [(r.page(f"https://site.example/first-copy-{i}"), root, 1, 0.98, -1) for i in range(3)])
    for i in range(1, n):
        root = r.page(f"https://site.example/page-{i:05d}")
        host = "special.example" if i == 1234 else None
        member = r.page(f"https://mirror.example/page-{i:05d}", host=host)
        r.cluster(root, [(member, root, 2, 0.95, r.pair(member, root, texts=None))])
    return r


def wait_pair(page: BrowserPage, pair_id: int, state: str = "ready") -> None:
    """Waits until the pair view shows pair ``pair_id`` in ``state``."""
    page.page.wait_for_selector(f'#pair[data-pair="{pair_id}"][data-state="{state}"]', state="visible")


def cluster_roots(page: BrowserPage) -> list[str]:
    """The kept pages' URLs of the cluster rows on screen, in order."""
    return page.page.eval_on_selector_all("#clusters-list .cluster .root .url", "els => els.map(e => e.textContent)")


def decode_blocks(html: str) -> dict[str, Any]:
    """The embedded data blocks of a rendered report, decoded, by element id."""
    blocks = re.findall(r'<script type="application/octet-stream" id="([^"]+)">([^<]*)</script>', html)
    return {i: json.loads(gzip.decompress(base64.b64decode(text))) for i, text in blocks}


# ------------------------------------------------------------------ without a browser


def test_render_is_deterministic():
    """The same data renders to the same bytes, twice."""
    r = small_report()
    first = render(r.summary(), r.chunks(), CHARTS, title="T")
    second = render(r.summary(), r.chunks(), CHARTS, title="T")
    assert first.encode() == second.encode()


def test_embedded_data_round_trips_and_never_ends_a_script():
    """Data holding ``</script>`` is embedded as base64 (no ``</script`` inside a block) and decodes unchanged."""
    r = small_report()
    r.pages[0][0] = "https://a.example/</script><script>alert(1)</script>"
    r.texts[r.pairs[0]["a"]] = "text with </SCRIPT> and <!-- a comment"
    summary, chunks = r.summary(), r.chunks()
    html = render(summary, chunks, CHARTS, title="</script>")
    assert html.lower().count("</script") == html.lower().count("<script") == len(chunks) + 2
    for body in re.findall(r'<script type="application/octet-stream" id="[^"]+">(.*?)</script>', html, re.S):
        assert re.fullmatch(r"[A-Za-z0-9+/=]*", body)
    blocks = decode_blocks(html)
    assert blocks["simhash-data"] == summary
    assert [blocks[f"simhash-chunk-{i}"] for i in range(len(chunks))] == chunks
    assert "</script><script>alert(1)" not in html


def test_csp_meta_is_present():
    """The page carries the Content-Security-Policy that forbids every network fetch."""
    html = small_report().write(Path("report.html")).read_text(encoding="utf-8")
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in html
    assert "default-src 'none'" in CSP
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)


def test_charts_are_inlined():
    """The distance chart is inlined in #histogram, the others after it with their own ids."""
    html = render(small_report().summary(), [], CHARTS, title="T")
    assert f'<div id="histogram" class="chart">{HISTOGRAM}</div>' in html
    assert 'id="chart-similarity"' in html and SIMILARITY in html


def test_script_end_in_a_chart_is_refused():
    """A chart holding ``</script`` would break the page: render refuses it."""
    with pytest.raises(ValueError, match="script"):
        render(small_report().summary(), [], {"distance": "<svg></script></svg>"}, title="T")


def test_title_is_escaped():
    """The title reaches the page escaped."""
    html = render(small_report().summary(), [], CHARTS, title="<b>&</b>")
    assert "<title>&lt;b&gt;&amp;&lt;/b&gt;</title>" in html


# ------------------------------------------------------------------ in the browser


def test_overview(browser_page: BrowserPage, tmp_path: Path):
    """The header and overview show the numbers, the notes and the charts; clusters are listed largest first."""
    path = small_report().write(tmp_path / "report.html")
    page = browser_page.open(path)
    assert page.title() == "Near-duplicates of the test crawl"
    meta = page.inner_text("#meta")
    for value in ("crawl.jsonl", "2024-05-01T12:00:00+00:00", "0.1.0", "default", "0.85"):
        assert value in meta
    card = lambda key: page.inner_text(f'#summary .card[data-key="{key}"] .value')  # noqa: E731
    assert (card("pages"), card("kept"), card("near_duplicates"), card("skipped"), card("malformed")) == (
        "13", "4", "6", "3", "1",
    )  # fmt: skip
    # 1500 + 1000 + 1001 + 1002 + 500 + 500 bytes saved of 65,413
    assert card("bytes_saved") == "5.50 kB"
    saved = page.inner_text('#summary .card[data-key="bytes_saved"]')
    assert "saved of HTML" in saved and "8.4%" in saved and "65.4 kB" in saved
    assert page.inner_text("#notes") == "Pages are compared in input order."
    assert page.locator("#histogram svg rect").count() == 3
    assert page.locator("#chart-similarity svg").count() == 1
    assert cluster_roots(browser_page) == ["https://a.example/big", "https://c.example/mid", "https://a.example/small"]
    sizes = page.eval_on_selector_all("#clusters-list .cluster .size", "els => els.map(e => e.textContent)")
    assert sizes == ["4 pages", "3 pages", "2 pages"]
    assert page.inner_text("#clusters-count") == "3 clusters"
    assert page.inner_text("#labels-count").startswith("0 labelled pairs")
    assert page.is_disabled("#labels-export")
    browser_page.screenshot("report-overview")
    browser_page.assert_no_errors()


def test_cluster_expands_to_its_members(browser_page: BrowserPage, tmp_path: Path):
    """A click on a cluster lists its members, with the page each duplicates when it is not the kept page."""
    page = browser_page.open(small_report().write(tmp_path / "report.html"))
    first = page.locator("#clusters-list .cluster").first
    first.locator(".cluster-head .host").click()
    rows = first.locator("tr.member")
    assert rows.count() == 3
    assert rows.nth(0).locator("td").nth(0).inner_text() == "https://b.example/big-0"
    assert rows.nth(0).locator("td").nth(4).inner_text() == "the kept page"
    assert rows.nth(2).locator("td").nth(4).inner_text() == "https://b.example/big-1"
    assert rows.nth(2).locator("td").nth(3).inner_text() == "—"
    assert first.locator("button.compare").count() == 3
    page.locator("#clusters-list .cluster").nth(2).locator(".toggle").click()
    assert page.locator("#clusters-list .cluster").nth(2).locator(".no-detail").count() == 1
    first.locator(".toggle").click()
    assert page.locator("#clusters-list .cluster").first.locator("tr.member").count() == 0
    browser_page.assert_no_errors()


def test_clusters_are_paged(browser_page: BrowserPage, tmp_path: Path):
    """2,000 clusters show 50 at a time; the next page starts with the 51st; only one page is in the DOM."""
    page = browser_page.open(many_clusters(2000).write(tmp_path / "report.html"))
    assert page.locator("#clusters-list .cluster").count() == 50
    assert cluster_roots(browser_page)[0] == "https://site.example/first"
    assert page.inner_text("#clusters-pager .page-info") == "page 1 of 40"
    page.click("#clusters-pager .next")
    assert cluster_roots(browser_page)[0] == "https://site.example/page-00050"
    assert page.inner_text("#clusters-pager .page-info") == "page 2 of 40"
    assert page.locator("#clusters-list .cluster").count() == 50
    page.click("#clusters-pager .last")
    assert cluster_roots(browser_page)[-1] == "https://site.example/page-01999"
    assert page.is_disabled("#clusters-pager .next")
    browser_page.assert_no_errors()


def test_filter_narrows_the_clusters(browser_page: BrowserPage, tmp_path: Path):
    """The filter keeps the clusters with a page whose URL or host holds the text, and re-pages them."""
    page = browser_page.open(many_clusters(2000).write(tmp_path / "report.html"))
    page.fill("#clusters-filter", "SPECIAL.example")
    page.wait_for_function("() => document.querySelectorAll('#clusters-list .cluster').length === 1")
    assert cluster_roots(browser_page) == ["https://site.example/page-01234"]
    assert page.inner_text("#clusters-count") == "1 of 2,000 clusters match"
    assert page.locator("#clusters-pager").is_hidden()
    page.click("#clusters-list .cluster .toggle")
    assert page.locator("#clusters-list tr.member.match").count() == 1
    page.fill("#clusters-filter", "page-001")  # page-00100 ... page-00199
    page.wait_for_function("() => document.getElementById('clusters-count').textContent.startsWith('100 of')")
    assert page.inner_text("#clusters-pager .page-info") == "page 1 of 2"
    page.fill("#clusters-filter", "nothing-like-this")
    page.wait_for_selector("#clusters-list .empty")
    page.fill("#clusters-filter", "")
    page.wait_for_function("() => document.querySelectorAll('#clusters-list .cluster').length === 50")
    browser_page.assert_no_errors()


def test_compare_opens_the_pair_view(browser_page: BrowserPage, tmp_path: Path):
    """The compare control opens both pages side by side with the word differences and the feature tables."""
    page = browser_page.open(small_report().write(tmp_path / "report.html"))
    page.locator("#clusters-list .cluster").first.locator(".toggle").click()
    page.locator("#clusters-list .cluster").first.locator("button.compare").first.click()
    wait_pair(browser_page, 0)
    assert page.evaluate("location.hash") == "#pair-0"
    side_a, side_b = page.locator("#pair .side-a"), page.locator("#pair .side-b")
    link = side_a.locator(".page-url a")
    assert link.get_attribute("href") == "https://b.example/big-0"
    assert link.get_attribute("rel") == "noopener noreferrer" and link.get_attribute("target") == "_blank"
    assert side_b.locator(".page-url a").get_attribute("href") == "https://a.example/big"
    assert side_a.locator("del").all_inner_texts() == ["fox"]
    assert side_b.locator("ins").all_inner_texts() == ["cat"]
    assert side_a.locator("ins").count() == 0 and side_b.locator("del").count() == 0
    assert side_a.locator(".text").inner_text() == FOX
    stats = page.inner_text("#pair .stats")
    assert "3" in stats and "0.910" in stats and "0.870" in stats and "60.0%" in stats
    text_rows = page.locator("#pair .features-text tbody tr")
    assert text_rows.count() == 2
    assert text_rows.nth(0).locator("td").all_inner_texts() == ["fox", "1.5", "0"]
    assert page.locator("#pair .features-structure tbody tr").count() == 2
    assert side_a.locator(".cut-note").inner_text().startswith("This text was cut at 2,000 characters")
    assert side_b.locator(".cut-note").count() == 0
    browser_page.screenshot("report-pair")
    page.click("#pair-close")
    page.wait_for_selector("#pair", state="hidden")
    assert page.evaluate("location.hash") == ""
    browser_page.assert_no_errors()


def test_hash_opens_a_pair(browser_page: BrowserPage, tmp_path: Path):
    """``#pair-N`` opens that pair on load and when the hash changes; close and Escape leave the view."""
    page = browser_page.open(small_report().write(tmp_path / "report.html"), fragment="pair-2")
    wait_pair(browser_page, 2)
    assert page.locator("#pair .side-a .page-url").inner_text() == "https://b.example/big-2"
    assert page.locator("#pair .side-b .page-url").inner_text() == "https://b.example/big-1"
    assert page.locator("#pair .side-a .cut-note").count() == 0
    page.evaluate("location.hash = '#pair-4'")  # the near miss, in another chunk
    wait_pair(browser_page, 4)
    assert "kept" in page.inner_text("#pair .side-a h3")
    assert page.is_disabled("#pair-next") and not page.is_disabled("#pair-prev")
    page.click("#pair-prev")
    wait_pair(browser_page, 3)
    page.keyboard.press("Escape")
    page.wait_for_selector("#pair", state="hidden")
    assert page.evaluate("location.hash") == ""
    page.evaluate("location.hash = '#pair-99'")
    wait_pair(browser_page, 99, "error")
    assert "could not be read" in page.inner_text("#pair-body")
    browser_page.assert_no_errors()


def test_pair_without_feature_lists(browser_page: BrowserPage, tmp_path: Path):
    """A report of text-only input shows a note instead of the feature tables."""
    r = Report(explained=False)
    a, b = r.page("https://x.example/1"), r.page("https://x.example/2")
    r.cluster(a, [(b, a, 2, 0.9, r.pair(b, a))])
    page = browser_page.open(r.write(tmp_path / "report.html"), fragment="pair-0")
    wait_pair(browser_page, 0)
    assert page.locator("#pair .not-explained").is_visible()
    assert page.locator("#pair .features table").count() == 0
    assert page.locator("#pair .side-a del").count() == 1
    browser_page.assert_no_errors()


def test_labels_are_exported(browser_page: BrowserPage, tmp_path: Path):
    """Two labelled pairs show in the rows and download as labels.jsonl, one JSON object a line."""
    page = browser_page.open(small_report().write(tmp_path / "report.html"))
    page.locator("#clusters-list .cluster").first.locator(".toggle").click()
    page.locator("#clusters-list .cluster").first.locator("button.compare").nth(1).click()
    wait_pair(browser_page, 1)
    page.click("#label-duplicate")
    assert page.inner_text("#pair-label-state") == "labelled near-duplicate"
    page.click("#pair-next")
    wait_pair(browser_page, 2)
    page.click("#label-distinct")
    page.click("#pair-next")
    wait_pair(browser_page, 3)
    page.keyboard.press("1")
    page.keyboard.press("0")  # and cleared again
    assert page.inner_text("#pair-label-state") == "not labelled"
    page.click("#pair-close")
    page.wait_for_selector("#pair", state="hidden")
    assert page.inner_text("#labels-count").startswith("2 labelled pairs (1 near-duplicate, 1 distinct)")
    badges = page.locator("#clusters-list .cluster").first.locator("tr.member .badge").all_inner_texts()
    assert badges == ["✓ near-duplicate", "≠ distinct"]
    with page.expect_download() as info:
        page.click("#labels-export")
    download = info.value
    assert download.suggested_filename == "labels.jsonl"
    text = Path(download.path()).read_text(encoding="utf-8")
    assert text.endswith("\n") and text.count("\n") == 2
    assert [json.loads(line) for line in text.splitlines()] == [
        {"url_a": "https://b.example/big-1", "url_b": "https://a.example/big", "duplicate": True},
        {"url_a": "https://b.example/big-2", "url_b": "https://b.example/big-1", "duplicate": False},
    ]
    assert list(json.loads(text.splitlines()[0])) == ["url_a", "url_b", "duplicate"]
    page.reload()
    browser_page.wait_ready()
    assert page.inner_text("#labels-count").startswith("2 labelled pairs")
    browser_page.assert_no_errors()


def test_labels_of_another_report_are_not_shown(browser_page: BrowserPage, tmp_path: Path):
    """A report with the same source and time but other pages ignores the saved labels, and keeps them."""
    first = small_report().write(tmp_path / "first.html")
    other = many_clusters(10).write(tmp_path / "other.html")
    page = browser_page.open(first, fragment="pair-1")
    wait_pair(browser_page, 1)
    page.click("#label-duplicate")
    browser_page.open(other)
    assert page.inner_text("#labels-count").startswith("0 labelled pairs")
    browser_page.open(other, fragment="pair-2")
    wait_pair(browser_page, 2)
    page.click("#label-distinct")
    browser_page.open(first)
    assert page.inner_text("#labels-count").startswith("1 labelled pair (1 near-duplicate, 0 distinct)")
    browser_page.assert_no_errors()


def test_labels_without_storage(browser_page: BrowserPage, tmp_path: Path):
    """When the browser refuses localStorage the labels are kept in memory and still export."""
    browser_page.page.add_init_script(
        "Object.defineProperty(window, 'localStorage', {get() { throw new DOMException('no', 'SecurityError'); }});"
    )
    page = browser_page.open(small_report().write(tmp_path / "report.html"), fragment="pair-0")
    wait_pair(browser_page, 0)
    page.click("#label-distinct")
    assert page.inner_text("#pair-labels-count") == "1 labelled"
    page.click("#pair-close")
    assert "kept in memory only" in page.inner_text("#labels-count")
    with page.expect_download() as info:
        page.click("#labels-export")
    lines = Path(info.value.path()).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [
        {"url_a": "https://b.example/big-0", "url_b": "https://a.example/big", "duplicate": False}
    ]
    browser_page.assert_no_errors()


def test_near_misses_hosts_and_skipped(browser_page: BrowserPage, tmp_path: Path):
    """Near misses list with compare; hosts sort by a clicked column; skipped pages count and filter by reason."""
    page = browser_page.open(small_report().write(tmp_path / "report.html"))
    rows = page.locator("#near-misses-table tbody tr")
    assert rows.count() == 1
    assert rows.first.locator("td").nth(0).inner_text() == "https://a.example/lonely"
    assert rows.first.locator("td").nth(2).inner_text() == "https://a.example/big"
    rows.first.locator("button.compare").click()
    wait_pair(browser_page, 4)
    page.click("#pair-close")
    page.wait_for_selector("#pair", state="hidden")

    def hosts() -> list[str]:
        return page.eval_on_selector_all(
            "#hosts-table tbody tr td:first-child", "els => els.map(e => e.firstChild.data)"
        )

    assert hosts() == ["b.example", "c.example", "a.example"]  # by near-duplicates, most first
    share = page.locator("#hosts-table tbody tr").first.locator("td").nth(4).inner_text()
    assert share == "100.0%"
    page.click("#hosts-table th button:text('Pages')")
    assert hosts() == ["c.example", "b.example", "a.example"]
    page.click("#hosts-table th button:text('Pages')")
    assert hosts() == ["a.example", "b.example", "c.example"]
    assert page.get_attribute("#hosts-table th:nth-child(2)", "aria-sort") == "ascending"
    page.click("#hosts-table th button:text('Host')")
    assert hosts() == ["a.example", "b.example", "c.example"]

    reasons = page.eval_on_selector_all(
        "#skipped-reasons tbody tr", "rows => rows.map(r => Array.from(r.cells, c => c.textContent))"
    )
    assert sorted(reasons) == [
        ["malformed", "1", "33.3%"],
        ["not_html", "1", "33.3%"],
        ["too_few_features", "1", "33.3%"],
    ]
    assert page.locator("#skipped-table tbody tr").count() == 3
    page.select_option("#skipped-reason", "not_html")
    assert page.locator("#skipped-table tbody tr").all_inner_texts() == [
        "https://c.example/image.jpg\tc.example\tnot_html"
    ]
    browser_page.assert_no_errors()


def test_empty_sections_are_hidden(browser_page: BrowserPage, tmp_path: Path):
    """Without near misses or skipped pages those sections are hidden; no clusters says so."""
    r = Report()
    r.page("https://x.example/only")
    page = browser_page.open(r.write(tmp_path / "report.html"))
    assert page.locator("#near-misses").is_hidden() and page.locator("#skipped").is_hidden()
    assert page.inner_text("#clusters-list") == "No near-duplicates were found."
    browser_page.assert_no_errors()


def test_hostile_data_stays_text(browser_page: BrowserPage, tmp_path: Path):
    """Markup and script in URLs, hosts, texts, features and notes show as text and never run."""
    r = Report()
    evil_text = 'Hello <script>window.pwned=1</script> and <img src=x onerror="window.pwned=2"> world'
    root = r.page("javascript:alert(1)", host='<img src=x onerror="window.pwned=3">')
    dup = r.page('https://e.example/"><script>window.pwned=4</script>')
    pair_id = r.pair(dup, root, texts=(evil_text, evil_text + " <b>bold</b>"))
    r.pairs[pair_id]["text"] = [['<img src=x onerror="window.pwned=5">', 1.0, 0.0]]
    r.cluster(root, [(dup, root, 2, 0.9, pair_id)])
    r.meta["notes"] = ['<img src=x onerror="window.pwned=6">']
    r.meta["source"] = "<script>window.pwned=7</script>"
    path = r.write(tmp_path / "report.html", title="</title><script>window.pwned=8</script>")
    page = browser_page.open(path)
    page.click("#clusters-list .cluster .toggle")
    assert page.locator("#clusters-list .cluster .root .url").inner_text() == "javascript:alert(1)"
    assert page.locator("#clusters-list .cluster .root a").count() == 0
    page.click("#clusters-list button.compare")
    wait_pair(browser_page, pair_id)
    assert page.locator("#pair .side-b .page-url a").count() == 0
    assert "<script>window.pwned=1</script>" in page.inner_text("#pair .side-a .text")
    assert '<img src=x onerror="window.pwned=5">' in page.inner_text("#pair .features-text")
    assert "<script>window.pwned=7</script>" in page.inner_text("#meta")
    assert page.title() == "</title><script>window.pwned=8</script>"
    assert page.evaluate("window.pwned") is None
    assert page.locator("img").count() == 0
    hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
    assert all(re.match(r"(https?://|#)", h) for h in hrefs), hrefs
    assert page.locator("script").count() == 1 + 1 + len(r.chunks())
    browser_page.assert_no_errors()


def test_corrupt_data_shows_an_error(browser_page: BrowserPage, tmp_path: Path):
    """Data that does not decode gives a visible message and ``data-ready="error"``."""
    path = small_report().write(tmp_path / "report.html")
    html = path.read_text(encoding="utf-8")
    html = re.sub(r'(id="simhash-data">)[^<]{40}', r"\1" + "A" * 40, html)
    path.write_text(html, encoding="utf-8")
    browser_page.open(path, wait_ready=False)
    assert browser_page.wait_ready() == "error"
    assert browser_page.page.locator("#error").is_visible()
    assert "could not be shown" in browser_page.page.inner_text("#error")
    browser_page.assert_no_errors()


def test_diff_marks_single_changes(browser_page: BrowserPage, tmp_path: Path):
    """The word diff marks one changed word, one changed Chinese character, and rebuilds both texts."""
    page = browser_page.open(small_report().write(tmp_path / "report.html"))
    cases = [
        (FOX, CAT, ["fox"], ["cat"]),
        ("晚上八点推迟到十点。", "晚上八点推迟到十点半。", [], ["半"]),
        ("one two three", "one two three four", [], [" four"]),
        ("", "new text", [], ["new text"]),
        ("a\nb\nc\n", "a\nc\n", ["b\n"], []),
    ]
    for a, b, removed, added in cases:
        out = page.evaluate("([a, b]) => window.simhashReport.diffTexts(a, b)", [a, b])
        assert "".join(t for t, kind in out["a"] if kind != 2) == a
        assert "".join(t for t, kind in out["b"] if kind != 1) == b
        assert [t for t, kind in out["a"] if kind == 1] == removed
        assert [t for t, kind in out["b"] if kind == 2] == added
    browser_page.assert_no_errors()


def test_diff_properties_on_random_texts(browser_page: BrowserPage, tmp_path: Path):
    """On random texts the diff rebuilds both sides, and the unmarked text is the same on both sides."""
    rng = random.Random(11)
    pieces = ["alpha", "beta", "gamma", "delta", "猫", "狗", " ", " ", "\n", ". ", "!", "，", "。"]
    cases = []
    for _ in range(400):
        a = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 60)))
        b = list(a)
        for _ in range(rng.randrange(0, 6)):
            b.insert(rng.randrange(0, len(b) + 1), rng.choice(pieces))
        cases.append((a, "".join(b[: rng.randrange(0, len(b) + 1)]) if rng.random() < 0.1 else "".join(b)))
    page = browser_page.open(small_report().write(tmp_path / "report.html"))
    results = page.evaluate("cases => cases.map(([a, b]) => window.simhashReport.diffTexts(a, b))", cases)
    for (a, b), out in zip(cases, results, strict=True):
        assert "".join(t for t, kind in out["a"] if kind != 1) == "".join(t for t, kind in out["b"] if kind != 2)
        assert "".join(t for t, _ in out["a"]) == a and "".join(t for t, _ in out["b"]) == b
        assert {kind for _, kind in out["a"]} <= {0, 1} and {kind for _, kind in out["b"]} <= {0, 2}
        if a == b:
            assert all(kind == 0 for _, kind in out["a"] + out["b"])
    browser_page.assert_no_errors()


def test_long_texts_diff_quickly(browser_page: BrowserPage, tmp_path: Path):
    """10,000-word texts, with scattered edits or with nothing in common, diff in bounded time and rebuild."""
    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(3000)]
    words = [rng.choice(vocabulary) for _ in range(10_000)]
    edited = [rng.choice(vocabulary) if i % 37 == 0 else w for i, w in enumerate(words)]
    other = [rng.choice(vocabulary) for _ in range(10_000)]
    lines = lambda ws: "\n".join(" ".join(ws[i : i + 120]) + "." for i in range(0, len(ws), 120))  # noqa: E731
    one_line = lambda ws: " ".join(ws)  # noqa: E731
    page = browser_page.open(small_report().write(tmp_path / "report.html"))
    for a, b in [
        (lines(words), lines(edited)),
        (one_line(words), one_line(edited)),
        (lines(words), lines(other)),
        (one_line(words), one_line(other)),
    ]:
        result = page.evaluate(
            """([a, b]) => {
                const t0 = performance.now();
                const out = window.simhashReport.diffTexts(a, b);
                return {ms: performance.now() - t0, a: out.a, b: out.b};
            }""",
            [a, b],
        )
        assert result["ms"] < 5000, result["ms"]
        assert "".join(t for t, kind in result["a"] if kind != 2) == a
        assert "".join(t for t, kind in result["b"] if kind != 1) == b
        print(
            f"diff of {len(a.split())} words: {result['ms']:.0f} ms, {len(result['a'])} + {len(result['b'])} segments"
        )
    r = Report()
    x, y = r.page("https://big.example/a"), r.page("https://big.example/b")
    r.cluster(x, [(y, x, 3, 0.9, r.pair(y, x, texts=(lines(words), lines(edited))))])
    page = browser_page.open(r.write(tmp_path / "big.html"), fragment="pair-0")
    wait_pair(browser_page, 0)
    assert page.locator("#pair .side-a del").count() > 100
    browser_page.assert_no_errors()


def scale_report() -> Report:
    """100,000 pages: 30,000 clusters (one of 1,000 members, nine of 100), 8,000 near misses, 5,000 skipped."""
    r = Report(pairs_per_chunk=500)
    r.hosts = [f"host-{h}.example" for h in range(1000)]
    for i in range(100_000):
        r.pages.append(
            [f"https://host-{i % 1000}.example/section/{i // 1000}/page-{i}.html", i % 1000, 2000 + i % 500, None]
        )
    r._host_ids = {h: i for i, h in enumerate(r.hosts)}
    next_page = 0

    def take() -> int:
        nonlocal next_page
        next_page += 1
        return next_page - 1

    def add_pair(a: int, b: int) -> int:
        r.pairs.append({"a": a, "b": b, "distance": 3, "similarity": 0.9, "weighted_jaccard": 0.85, "text_share": 0.5,
                        "text": [["word", 1.0, 0.0]], "structure": []})  # fmt: skip
        r.texts[a], r.texts[b] = f"page {a} text, shared words", f"page {b} text, shared words"
        return len(r.pairs) - 1

    for c in range(30_000):
        root = take()
        size = 1000 if c == 0 else 100 if c < 10 else 1
        members = [take() for _ in range(size)]
        r.cluster(root, [(m, root, 2, 0.93, add_pair(m, root)) for m in members])
    for _ in range(8_000):
        page, nearest = take(), take()
        r.near_miss(page, nearest, 8, 0.7, add_pair(page, nearest))
    for _ in range(5_000):
        r.pages[take()][3] = "too_few_features"
    return r


@pytest.mark.slow
def test_scale(browser_page: BrowserPage, tmp_path: Path):
    """100,000 pages and 30,000 clusters render, open and get ready in a generous bound; a late pair opens."""
    r = scale_report()
    started = time.perf_counter()
    path = r.write(tmp_path / "report.html")
    rendered = time.perf_counter() - started
    started = time.perf_counter()
    page = browser_page.open(path, timeout_ms=20_000)
    ready = time.perf_counter() - started
    print(f"scale report: {path.stat().st_size / 1e6:.1f} MB, {len(r.pairs)} pairs, rendered in {rendered:.1f} s, "
          f"ready in the browser in {ready:.1f} s")  # fmt: skip
    assert page.get_attribute("body", "data-ready") == "1"
    assert page.inner_text("#clusters-count") == "30,000 clusters"
    assert page.locator("#clusters-list .cluster").count() == 50
    assert page.locator("#clusters-list .cluster .size").first.inner_text() == "1,001 pages"
    page.locator("#clusters-list .cluster .toggle").first.click()
    assert page.locator("#clusters-list tr.member").count() == 200
    page.click("#clusters-list button.more")
    assert page.locator("#clusters-list tr.member").count() == 400
    page.fill("#clusters-filter", "page-99")
    page.wait_for_function("() => document.getElementById('clusters-count').textContent.includes(' of 30,000')")
    last = len(r.pairs) - 1
    page.evaluate(f"location.hash = '#pair-{last}'")
    wait_pair(browser_page, last)
    assert page.locator("#pair .side-a .page-url").inner_text() == r.pages[r.pairs[last]["a"]][0]
    browser_page.assert_no_errors()
