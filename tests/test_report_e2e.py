"""The report as a person uses it: a real flag-mode crawl of the local test site names the report command at its
end; ``simhash-filter report`` on its feed writes the file; headless Chromium opens it and shows the clusters,
the histogram, the skipped pages and a pair's differences, without a console error (screenshots kept in
``out/artifacts/``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from browser import BrowserPage
from crawl_helpers import Crawl, flag_crawl_into_default_feed

from devsites.site_server import GROUPS
from simhash_filter.cli.main import main

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def crawled(site_port: int, tmp_path_factory: pytest.TempPathFactory) -> tuple[Crawl, Path]:
    """A flag-mode crawl storing text and HTML into the project's default feed, out/pages.jsonl."""
    return flag_crawl_into_default_feed(site_port, tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def report(crawled: tuple[Crawl, Path]) -> Path:
    """``simhash-filter report`` of the crawl's feed, at the path the crawl named."""
    crawl, feed = crawled
    named = re.search(r"simhash: to see what the filter did: simhash-filter report (\S+) --output (\S+)", crawl.log)
    assert named is not None, "the end of the crawl names the report command"
    assert named.group(1) == "out/pages.jsonl"
    output = feed.parent.parent / named.group(2)
    assert main(["report", str(feed), "--output", str(output)]) == 0
    return output


def test_the_crawl_items_carry_why_a_page_was_skipped(crawled):
    """In flag mode the item of a page let through unchecked says why (``skipped``)."""
    crawl, _ = crawled
    gallery = next(i for i in crawl.items if i["url"].endswith("/gallery"))
    assert gallery["skipped"] == "too_few_features" and "fingerprint" not in gallery


def test_the_report_of_a_crawl_shows_its_clusters_histogram_and_skipped_pages(
    report: Path, crawled: tuple[Crawl, Path], browser_page: BrowserPage
):
    """The overview counts the crawl's near-duplicates; one cluster per group of the test site, largest first; the
    histogram is drawn; the skipped page is listed with its reason."""
    crawl, _ = crawled
    page = browser_page.open(report)
    assert browser_page.wait_ready() == "1"
    numbers = page.inner_text("#summary-numbers")
    assert re.search(rf"\b{crawl.stats['simhash/flagged']}\s+near-duplicates", numbers), numbers
    rows = page.locator("#clusters-list .cluster")
    assert rows.count() >= len(GROUPS)
    assert "rainwater" in rows.first.inner_text()  # the largest group of the site
    assert page.locator("#histogram svg rect").count() > 0
    assert "too_few_features" in page.inner_text("#skipped")
    browser_page.screenshot("report-crawl-overview", full_page=True)


def test_a_pair_of_the_crawl_shows_both_texts_and_their_differences(report: Path, browser_page: BrowserPage):
    """From the largest cluster, "compare" opens the pair view: both pages' main texts side by side, the edited
    copy's changed words marked, and the features that set them apart."""
    page = browser_page.open(report)
    page.locator("#clusters-list .cluster").first.click()
    edited = page.locator("#clusters-list .cluster").first.locator("tr, li, .member", has_text="rainwater-edited")
    edited.get_by_role("button", name=re.compile("compare", re.I)).first.click()
    pair = page.locator("#pair")
    pair.wait_for(state="visible")
    assert "rainwater-edited" in pair.locator(".side-a").inner_text()
    assert pair.locator(".side-a del, .side-b ins").count() > 0
    assert pair.locator("table").count() >= 2  # text and structure features
    browser_page.screenshot("report-crawl-pair")


def test_pairs_labelled_in_the_report_calibrate_the_filter(
    report: Path, crawled: tuple[Crawl, Path], browser_page: BrowserPage, tmp_path: Path, capsys
):
    """The user's loop: label pairs in the report (keys 1 and 2), export labels.jsonl, and ``calibrate`` it against
    the crawl's feed: every label is used and a recommendation is printed."""
    _, feed = crawled
    page = browser_page.open(report, fragment="pair-0")
    page.wait_for_selector("#pair .side-a")
    answers = ["1", "1", "2"]  # the first two pairs are near-duplicates of the rainwater group; a third said distinct
    for n, key in enumerate(answers):
        page.keyboard.press(key)
        if n + 1 < len(answers):
            page.click("#pair-next")
            page.wait_for_function(f"() => location.hash === '#pair-{n + 1}'")
    with page.expect_download() as info:
        page.click("#pair-labels-export")  # the pair view's own export button
    labels = tmp_path / "labels.jsonl"
    labels.write_bytes(Path(info.value.path()).read_bytes())
    assert [json.loads(line)["duplicate"] for line in labels.read_text().splitlines()] == [True, True, False]
    assert main(["calibrate", str(labels), "--pages", str(feed)]) == 0
    out = capsys.readouterr().out
    assert "pairs: 3 used (2 duplicates, 1 distinct)" in out and "Recommendation" in out
