"""Real crawls: ``python -m scrapy.cmdline crawl site`` in a subprocess against the local test site
(``devsites/site_server.py``: near-duplicates across 127.0.0.1 and 127.0.0.2, one port, and bad inputs),
in both actions; and the site spider's arguments."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from crawl_helpers import Crawl, flag_crawl_into_default_feed, scrapy_crawl, start_urls
from scrapy.http import HtmlResponse
from scrapy.settings import Settings

from crawler.spiders.site import SiteSpider
from devsites.site_server import GROUPS, OTHERS, SKIPPED
from simhash_filter.config import DEFAULTS

#: The index fails the index_error page's first check; it is added when the index answers the next page.  That page is
#: a copy of the lighthouse story: one request at a time, so that the crawl's order (a lighthouse page checked before
#: the late add, or not) is the same in every run, however the machine schedules the downloads and the worker.
FLAKY = {
    "SIMHASH_BACKEND": "flaky://",
    "SIMHASH_BACKENDS": json.dumps({"flaky": "crawl_helpers.FlakyBackend"}),
    "CONCURRENT_REQUESTS": 1,
}
NEAR_DUPLICATES = sum(len(keys) - 1 for keys in GROUPS.values())
HEX16 = re.compile(r"[0-9a-f]{16}")


@pytest.fixture(scope="module")
def drop_crawl(site_port: int, tmp_path_factory: pytest.TempPathFactory) -> Crawl:
    """A crawl with the defaults (drop), an index that fails on one page, and truncated downloads allowed."""
    return scrapy_crawl(
        "site",
        tmp_path_factory.mktemp("drop"),
        args={"start_urls": start_urls(site_port)},
        settings={**FLAKY, "DOWNLOAD_FAIL_ON_DATALOSS": "False"},
    )


@pytest.fixture(scope="module")
def flag_crawl(site_port: int, tmp_path_factory: pytest.TempPathFactory) -> tuple[Crawl, Path]:
    """A flag-mode crawl with worker threads and a non-asyncio reactor, run outside the repository so
    that the project's default feed lands in a temporary out/pages.jsonl."""
    settings = {"SIMHASH_THREADS": 2, "TWISTED_REACTOR": "twisted.internet.selectreactor.SelectReactor"}
    return flag_crawl_into_default_feed(site_port, tmp_path_factory.mktemp("flag"), settings)


WHERE = {
    "reactor-thread": {"SIMHASH_PROCESSES": 0},
    "processes-select-reactor": {
        "SIMHASH_PROCESSES": 2,
        "TWISTED_REACTOR": "twisted.internet.selectreactor.SelectReactor",
        # Pages arriving while the workers start are fingerprinted in the reactor thread: no request before a
        # worker is ready (tests/crawl_gate.py), so that every page reaches the workers however slowly they start.
        "DOWNLOADER_MIDDLEWARES": json.dumps({"crawl_gate.WorkersFirst": 950}),
    },
}


@pytest.fixture(scope="module", params=WHERE, ids=list(WHERE))
def where_crawl(request: pytest.FixtureRequest, site_port: int, tmp_path_factory: pytest.TempPathFactory) -> Crawl:
    """``drop_crawl`` again, fingerprinting in the reactor thread, or in two worker processes under a
    Twisted reactor that is not asyncio's (``drop_crawl`` has the default: one worker process, asyncio)."""
    return scrapy_crawl(
        "site",
        tmp_path_factory.mktemp(request.param),
        args={"start_urls": start_urls(site_port)},
        settings={**FLAKY, "DOWNLOAD_FAIL_ON_DATALOSS": "False", **WHERE[request.param]},
    )


@pytest.mark.slow
def test_where_pages_are_fingerprinted_changes_nothing(drop_crawl: Crawl, where_crawl: Crawl):
    """The same pages get the same fingerprints and the same counts of decisions wherever they are fingerprinted:
    in worker processes (the default, and under another reactor) or in the reactor thread."""
    ours, theirs = drop_crawl.by_key(), where_crawl.by_key()
    both = set(ours) & set(theirs)  # which copy of a group is kept (stored) may differ
    assert len(both) >= len(OTHERS) and all(k in both for k in OTHERS)
    assert {k: ours[k].get("fingerprint") for k in both} == {k: theirs[k].get("fingerprint") for k in both}
    for key in ("checked", "kept", "near_duplicates", "dropped", "skipped/index_error", "skipped/empty", "truncated"):
        assert where_crawl.stats[f"simhash/{key}"] == drop_crawl.stats[f"simhash/{key}"], key
    assert where_crawl.stats["simhash/skipped/error"] == where_crawl.stats["simhash/worker_restarts"] == 0
    log = where_crawl.log
    assert "WARNING: simhash" not in log and where_crawl.stats.get("log_count/ERROR") == 1  # the index_error page
    if "SelectReactor" in log:
        assert "fingerprinting in 2 worker process(es)" in log
        assert re.search(r"2 worker process\(es\) fingerprinting, the first ready [\d.]+ s after the start", log)
        assert where_crawl.stats.get("simhash/fingerprinted_in_reactor", 0) == 0
    else:
        assert "fingerprinting in the reactor thread" in log
        assert where_crawl.stats["simhash/fingerprinted_in_reactor"] == 0


@pytest.mark.slow
def test_drop_crawl_stores_one_page_per_article(drop_crawl: Crawl):
    """Across both hosts, exactly one page of each group of near-duplicates is stored."""
    stored = drop_crawl.by_key()
    for group, keys in GROUPS.items():
        assert len([k for k in keys if k in stored]) == 1, (group, sorted(stored))


@pytest.mark.slow
def test_drop_crawl_keeps_distinct_and_unchecked_pages(drop_crawl: Crawl):
    """Distinct pages and unchecked HTML pages are stored; non-HTML and robots-forbidden ones are not."""
    stored = drop_crawl.by_key()
    for key in OTHERS + SKIPPED["empty"] + SKIPPED["too_few_features"] + SKIPPED["index_error"]:
        assert key in stored, key
    assert not set(SKIPPED["not_html"]) & set(stored)
    assert "127.0.0.1/private/secret" not in stored
    assert drop_crawl.stats["robotstxt/forbidden"] >= 1


@pytest.mark.slow
def test_drop_crawl_items_carry_their_fingerprint(drop_crawl: Crawl):
    """Stored items carry url, title, fetched_at, text and a 16-hex fingerprint, and no flag fields in drop mode."""
    checked = [i for i in drop_crawl.items if "fingerprint" in i]
    # kept pages, and the page whose check failed in the index (fingerprinted, not added)
    assert len(checked) == drop_crawl.stats["simhash/kept"] + drop_crawl.stats["simhash/skipped/index_error"]
    for item in checked:
        assert HEX16.fullmatch(item["fingerprint"])
        assert {"url", "title", "fetched_at", "text"} <= set(item) and "duplicate_of" not in item
    assert len({i["fingerprint"] for i in checked}) == len(checked)


@pytest.mark.slow
def test_drop_crawl_stats(drop_crawl: Crawl):
    """The simhash/ stats count checks, drops, distances, every skip reason and every kind of bad input."""
    s = drop_crawl.stats
    assert s["simhash/near_duplicates"] == s["simhash/dropped"] == NEAR_DUPLICATES
    assert s["simhash/checked"] == s["simhash/kept"] + s["simhash/near_duplicates"]
    # every kept page is stored, and the index_error page once the index answered again; a near-duplicate whose
    # blocks hold enough of its near-duplicates already is not (the bound on a check's work)
    assert s["simhash/kept"] < s["simhash/index_size"] <= s["simhash/checked"] + s["simhash/index_added_late"]
    # the bound on a check's work: a near-duplicate had candidates, and never more than five tables' worth
    assert 1 <= s["simhash/candidates/max"] <= 5 * DEFAULTS.candidates_per_table
    distances = {int(k.rsplit("/", 1)[1]): v for k, v in s.items() if k.startswith("simhash/distance/")}
    assert sum(distances.values()) == NEAR_DUPLICATES and max(distances) <= DEFAULTS.max_distance
    for reason in ("empty", "too_few_features", "index_error"):
        assert s[f"simhash/skipped/{reason}"] == len(SKIPPED[reason]), reason
    assert s["simhash/skipped/not_html"] >= len(SKIPPED["not_html"])  # + robots.txt of each host
    assert s["simhash/skipped/http_status"] >= 1
    assert s["simhash/truncated"] == s["simhash/dataloss"] == s["simhash/charset_errors"] == 1
    assert s["simhash/flagged"] == s["simhash/skipped/error"] == 0  # there from the start, as every key
    assert s["simhash/fingerprint_seconds"] > 0 and s["simhash/reactor_seconds"] > 0
    assert s["dupefilter/filtered"] >= 1  # /moved redirects to a page already requested
    assert s["item_scraped_count"] == len(drop_crawl.items)


@pytest.mark.slow
def test_drop_crawl_log(drop_crawl: Crawl):
    """One summary line; the index failure logged once with its traceback; no warnings, no deprecations."""
    log = drop_crawl.log
    assert len(re.findall(r"INFO: simhash: \d+ pages checked: ", log)) == 1
    assert len(re.findall(r"ERROR: simhash: .*index_error", log)) == 1
    assert log.count("Traceback") == 1 and "ConnectionError: the test backend refuses" in log
    assert "Deprecat" not in log and "WARNING" not in log
    assert drop_crawl.stats.get("log_count/ERROR") == 1


@pytest.mark.slow
def test_flag_crawl_stores_every_page_flagged(flag_crawl: tuple[Crawl, Path]):
    """In flag mode every page is stored; one per group unflagged, each other one flagged as a near-duplicate
    of the most similar page of its group met before it."""
    crawl, _ = flag_crawl
    stored = crawl.by_key()
    for group, keys in GROUPS.items():
        assert set(keys) <= set(stored), group
        originals = [k for k in keys if stored[k]["duplicate_of"] is None]
        assert len(originals) == 1, group
        urls = {stored[k]["url"] for k in keys}
        for key in keys:
            item = stored[key]
            assert HEX16.fullmatch(item["fingerprint"])
            if key != originals[0]:
                assert item["duplicate_of"] in urls - {item["url"]}, (group, key)
                assert 0 <= item["distance"] <= DEFAULTS.max_distance
    # and the page that made the test index fail in the drop crawl: a copy of an article too
    flagged = [i for i in crawl.items if i.get("duplicate_of")]
    assert len(flagged) == NEAR_DUPLICATES + len(SKIPPED["index_error"])
    assert crawl.stats["simhash/flagged"] == crawl.stats["simhash/items/flagged"] == len(flagged)
    assert crawl.stats["simhash/dropped"] == 0


@pytest.mark.slow
def test_flag_crawl_uses_the_default_feed_and_store_option(flag_crawl: tuple[Crawl, Path]):
    """Without -o/-O the crawler writes out/pages.jsonl; -a store=both keeps text and HTML."""
    crawl, feed = flag_crawl
    assert feed.exists() and crawl.items
    page = next(i for i in crawl.items if i["url"].endswith("/zh/library"))
    assert "<html" in page["html"] and "图书馆" in page["text"] and page["title"]
    assert "worker thread" in crawl.log and "SelectReactor" in crawl.log


def test_site_spider_arguments():
    """start_urls and allowed_domains are comma-separated lists; allowed domains default to the start hosts."""
    spider = SiteSpider(start_urls="http://127.0.0.1:8000/, http://127.0.0.2:8000/a")
    assert spider.start_urls == ["http://127.0.0.1:8000/", "http://127.0.0.2:8000/a"]
    assert spider.allowed_domains == ["127.0.0.1", "127.0.0.2"]
    assert SiteSpider(start_urls="https://a.example/", allowed_domains="example").allowed_domains == ["example"]
    for bad in ({}, {"start_urls": ""}, {"start_urls": "ftp://x/"}, {"start_urls": "http://a/", "store": "pdf"}):
        with pytest.raises(ValueError):
            SiteSpider(**bad)


@pytest.mark.parametrize(("store", "fields"), [("text", {"text"}), ("html", {"html"}), ("both", {"text", "html"})])
def test_site_spider_store_option(store, fields):
    """-a store=text|html|both chooses what a page item holds besides url, title and fetched_at."""
    spider = SiteSpider(start_urls="http://a.test/", store=store)
    body = b"<html><head><title> A \n page </title><script>x=1</script></head><body><p>Hello</p></body></html>"
    item = spider.page_item(HtmlResponse("http://a.test/", body=body))
    assert set(item) == {"url", "title", "fetched_at"} | fields
    assert item["title"] == "A page"
    if "text" in fields:
        assert item["text"] == "Hello"


def test_site_spider_default_feed_gives_way_to_o():
    """The SITE_FEED default applies only when no feed is configured (-o/-O or FEEDS)."""
    empty = Settings({"SITE_FEED": "out/pages.jsonl"})
    SiteSpider.update_settings(empty)
    assert list(empty.getdict("FEEDS")) == ["out/pages.jsonl"]
    given = Settings({"SITE_FEED": "out/pages.jsonl", "FEEDS": {"mine.jsonl": {"format": "jsonlines"}}})
    SiteSpider.update_settings(given)
    assert list(given.getdict("FEEDS")) == ["mine.jsonl"]


@pytest.mark.slow
def test_demo_crawls_its_generated_site(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """`python -m crawler.demo` serves a generated site on both hosts, crawls it and reports kept and dropped pages."""
    from crawler import demo

    assert demo.main(["--articles", "16", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"simhash: \d+ pages checked: \d+ kept, [1-9]\d* near-duplicates", out)
    assert "variant" in out and "Wrongly dropped (false positives):" in out
    assert (tmp_path / "pages.jsonl").exists()


@pytest.mark.slow
def test_closespider_pagecount_holds_in_drop_mode(site_port: int, tmp_path: Path):
    """``CLOSESPIDER_PAGECOUNT`` counts the near-duplicates the filter dropped too (they were downloaded): the
    crawl stops at its limit instead of running on through every dropped page."""
    limit = 12
    crawl = scrapy_crawl("site", tmp_path, args={"start_urls": start_urls(site_port)},
                         settings={"CLOSESPIDER_PAGECOUNT": limit, **FLAKY})  # fmt: skip
    s = crawl.stats
    assert s["finish_reason"] == "closespider_pagecount"
    assert s["simhash/dropped"] >= 1
    assert s["response_received_count"] == s["downloader/response_count"] <= limit + 1
