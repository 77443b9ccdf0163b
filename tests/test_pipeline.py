"""Tests of the item pipeline and the spider middleware that hands it the responses' decisions."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from typing import Any

import attr
import pytest
import scrapy
from filter_crawler import filter_crawler
from itemadapter import ItemAdapter
from scrapy import Request, signals
from scrapy.exceptions import DropItem
from scrapy.http import HtmlResponse, TextResponse

from devsites import pages as p
from simhash_filter import NearDuplicateItem, SimhashDownloaderMiddleware, SimhashPipeline, SimhashSpiderMiddleware
from simhash_filter.crawl.middlewares import NearDuplicateResponse

pytestmark = pytest.mark.usefixtures("memory_index")

ARTICLE = p.gazette(p.RAINWATER)
COPY = p.ledger(p.RAINWATER)
OTHER = p.gazette(p.LIGHTHOUSE)
HTML = {"Content-Type": "text/html; charset=utf-8"}


class PageItem(scrapy.Item):
    url = scrapy.Field()
    fingerprint = scrapy.Field()
    duplicate_of = scrapy.Field()
    distance = scrapy.Field()


@dataclasses.dataclass
class PageData:
    url: str
    fingerprint: str | None = None
    duplicate_of: str | None = None
    distance: int | None = None


@attr.s(auto_attribs=True)
class PageAttrs:
    url: str
    fingerprint: str | None = None
    duplicate_of: str | None = None
    distance: int | None = None


class BareItem(scrapy.Item):
    url = scrapy.Field()


ITEM_TYPES = {
    "dict": lambda url: {"url": url},
    "Item": lambda url: PageItem(url=url),
    "dataclass": lambda url: PageData(url),
    "attrs": lambda url: PageAttrs(url),
}


class Components:
    """The filter's three components of one crawler, driven like the engine drives them."""

    def __init__(self, **settings: Any) -> None:
        self.crawler = filter_crawler(settings)
        self.downloader = SimhashDownloaderMiddleware.from_crawler(self.crawler)
        self.spider_mw = SimhashSpiderMiddleware.from_crawler(self.crawler)
        self.pipeline = SimhashPipeline.from_crawler(self.crawler)

    def crawl_page(self, url: str, html: str, make_item: Any) -> Any:
        """Download ``url`` through the middleware, let a spider yield one item, run the pipeline.

        Returns the processed item, or the exception that dropped the response or the item.
        """
        request = Request(url)
        response = HtmlResponse(url, body=html.encode("utf-8"), headers=HTML, request=request)
        try:
            response = asyncio.run(self.downloader.process_response(request, response))
        except NearDuplicateResponse as exc:
            return exc
        (item,) = self.spider_mw.process_spider_output(response, [make_item(url)])
        return self.process(item)

    def process(self, item: Any) -> Any:
        try:
            return asyncio.run(self.pipeline.process_item(item))
        except DropItem as exc:
            return exc

    def stat(self, key: str) -> Any:
        return self.crawler.stats.get_value(key)


def field(item: Any, name: str) -> Any:
    return ItemAdapter(item).get(name)


@pytest.mark.parametrize("kind", list(ITEM_TYPES))
def test_flagged_items_of_every_type_carry_the_decision(kind):
    """In flag mode items of any type get fingerprint, duplicate_of and distance from their response."""
    c = Components(SIMHASH_ACTION="flag")
    make = ITEM_TYPES[kind]
    kept = c.crawl_page("http://a.test/rain", ARTICLE, make)
    flagged = c.crawl_page("http://b.test/copy", COPY, make)
    assert len(field(kept, "fingerprint")) == 16
    assert field(kept, "duplicate_of") is None and field(kept, "distance") is None
    assert field(flagged, "duplicate_of") == "http://a.test/rain"
    assert 0 <= field(flagged, "distance") <= 3
    assert int(field(flagged, "fingerprint"), 16) >= 0
    assert c.stat("simhash/items/flagged") == 1


@pytest.mark.parametrize("kind", list(ITEM_TYPES))
def test_kept_items_carry_their_fingerprint_in_drop_mode(kind):
    """In drop mode the near-duplicate response never yields items; kept items carry their fingerprint."""
    c = Components()
    kept = c.crawl_page("http://a.test/rain", ARTICLE, ITEM_TYPES[kind])
    assert len(field(kept, "fingerprint")) == 16
    assert isinstance(c.crawl_page("http://b.test/copy", COPY, ITEM_TYPES[kind]), NearDuplicateResponse)
    assert c.stat("simhash/dropped") == 1


@pytest.mark.parametrize("dropped", [True, False])
def test_the_pipeline_drops_what_the_decision_in_meta_says(dropped):
    """The pipeline drops an item when its response's ``meta["simhash"]["dropped"]`` says so, and only then: it
    reads the decision made once, not the action again."""
    c = Components()
    url, kept = "http://b.test/copy", "http://a.test/rain"
    meta = {"status": "ok", "fingerprint": "00000000000000ff", "duplicate_of": kept, "distance": 2,
            "similarity": 0.9, "dropped": dropped}  # fmt: skip
    request = Request(url, meta={"simhash": meta})
    response = HtmlResponse(url, body=COPY.encode("utf-8"), headers=HTML, request=request)
    (item,) = c.spider_mw.process_spider_output(response, [{"url": url}])
    out = c.process(item)
    assert isinstance(out, NearDuplicateItem) is dropped
    if not dropped:
        assert field(out, "fingerprint") == "00000000000000ff" and c.stat("simhash/items/flagged") == 1


def test_item_without_flag_fields_passes_with_one_warning(caplog):
    """An item type without the flag fields passes unchanged; it is counted and warned about once."""
    c = Components(SIMHASH_ACTION="flag")
    with caplog.at_level(logging.WARNING, logger="simhash_filter"):
        c.crawl_page("http://a.test/rain", ARTICLE, lambda url: BareItem(url=url))
        first = c.crawl_page("http://b.test/copy", COPY, lambda url: BareItem(url=url))
        c.crawl_page("http://c.test/copy", COPY, lambda url: BareItem(url=url))
    assert dict(first) == {"url": "http://b.test/copy"}
    assert c.stat("simhash/items/unflaggable") == 2
    assert len([r for r in caplog.records if "BareItem" in r.getMessage()]) == 1


def test_decision_found_by_item_url_without_spider_middleware():
    """Without the spider middleware the pipeline finds a response's decision by the item's url field."""
    c = Components(SIMHASH_ACTION="flag")
    for url, html in (("http://a.test/rain", ARTICLE), ("http://b.test/copy", COPY)):
        request = Request(url)
        asyncio.run(c.downloader.process_response(request, HtmlResponse(url, body=html.encode(), request=request)))
    item = c.process({"url": "http://b.test/copy"})
    assert item["duplicate_of"] == "http://a.test/rain"


def test_item_fields_fingerprinted_without_response():
    """Items without a response are fingerprinted from SIMHASH_ITEM_FIELDS; a near-duplicate is dropped quietly."""
    c = Components(SIMHASH_ITEM_FIELDS=["title", "body"])
    kept = c.process({"url": "api:1", "title": "Rain", "body": ARTICLE})
    dropped = c.process({"url": "api:2", "title": "Rain", "body": COPY})
    other = c.process({"url": "api:3", "title": "Light", "body": OTHER})
    assert len(kept["fingerprint"]) == 16 and len(other["fingerprint"]) == 16
    assert isinstance(dropped, NearDuplicateItem) and dropped.log_level == "DEBUG"
    assert dropped.duplicate_of == "api:1"
    assert c.stat("simhash/dropped") == 1 and c.stat("simhash/kept") == 2


def test_an_item_unchanged_since_it_was_kept_is_dropped_and_logged_as_not_indexed_again(tmp_path, caplog):
    """An item checked by its own fields, unchanged since an earlier crawl kept it, is dropped in drop mode; its log
    line says it is not indexed again, not that it was let through."""
    settings = {"SIMHASH_ITEM_FIELDS": ["title", "body"], "SIMHASH_DEBUG": True, "SIMHASH_BACKEND": str(tmp_path)}
    first = Components(**settings)
    first.process({"url": "api:1", "title": "Rain", "body": ARTICLE})
    first.pipeline.filter.spider_closed(None, "finished")
    c = Components(**settings)
    with caplog.at_level(logging.DEBUG, logger="simhash_filter"):
        again = c.process({"url": "api:1", "title": "Rain", "body": ARTICLE})
    assert isinstance(again, NearDuplicateItem) and again.duplicate_of == "api:1"
    lines = [r.getMessage() for r in caplog.records if "near-duplicate of" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("simhash: not indexed again (unchanged since it was kept) api:1: near-duplicate of "
                               "api:1 (distance 0"), lines  # fmt: skip
    assert "let through" not in lines[0]


def test_plain_text_item_fields():
    """Plain-text item fields are fingerprinted as paragraphs: the same text twice is a near-duplicate."""
    c = Components(SIMHASH_ITEM_FIELDS=["text"], SIMHASH_ACTION="flag")
    text = "\n\n".join(p.RAINWATER.paragraphs)
    first = c.process({"url": "http://a.test/1", "text": text})
    second = c.process({"url": "http://a.test/2", "text": text + "\n\nShared 12 times."})
    assert first["duplicate_of"] is None and second["duplicate_of"] == "http://a.test/1"


def test_items_from_non_html_responses_use_item_fields():
    """Items built from a JSON response (not fingerprinted) are checked by their SIMHASH_ITEM_FIELDS."""
    c = Components(SIMHASH_ITEM_FIELDS=["html"], SIMHASH_ACTION="flag")
    request = Request("http://api.test/articles")
    response = TextResponse(request.url, body=b"{}", headers={"Content-Type": "application/json"}, request=request)
    response = asyncio.run(c.downloader.process_response(request, response))
    assert request.meta["simhash"]["status"] == "not_html"
    items = list(
        c.spider_mw.process_spider_output(
            response, [{"url": "http://a.test/1", "html": ARTICLE}, {"url": "http://b.test/1", "html": COPY}]
        )
    )
    first, second = (c.process(i) for i in items)
    assert first["duplicate_of"] is None and second["duplicate_of"] == "http://a.test/1"


def test_items_without_decision_or_fields_pass_and_are_counted():
    """An item with neither a response decision nor item fields passes unchanged and is counted."""
    c = Components()
    assert c.process({"url": "http://x.test/"}) == {"url": "http://x.test/"}
    assert c.stat("simhash/items/unchecked") == 1


def test_decisions_of_items_dropped_earlier_are_forgotten():
    """A decision waiting for an item that another pipeline dropped is released (no leak)."""
    c = Components()
    request = Request("http://a.test/rain")
    response = HtmlResponse(request.url, body=ARTICLE.encode(), headers=HTML, request=request)
    response = asyncio.run(c.downloader.process_response(request, response))
    item = {"url": "elsewhere"}
    list(c.spider_mw.process_spider_output(response, [item]))
    assert c.pipeline.filter.items._pending
    c.crawler.signals.send_catch_log(
        signals.item_dropped, item=item, response=response, exception=DropItem("x"), spider=None
    )
    assert not c.pipeline.filter.items._pending


def test_process_item_takes_no_spider_argument():
    """process_item(self, item): the Scrapy 2.13+ signature."""
    assert list(inspect.signature(SimhashPipeline.process_item).parameters) == ["self", "item"]


def test_the_summary_says_what_became_of_unchanged_pages_items_in_each_mode():
    """The summary's clause on pages unchanged since an earlier crawl says their items were dropped (drop mode) or
    flagged (flag mode: they are exported, flagged as their own duplicates), never "not stored again"."""
    from simhash_filter.crawl.report import Report

    for action, words in (("drop", "(their items dropped)"), ("flag", "(their items flagged as their own duplicates)")):
        crawler = filter_crawler()
        crawler.stats.set_value("simhash/unchanged", 3)
        line = Report(crawler.stats, action=action, debug=False).summary(3, "in the reactor thread")
        assert f"3 unchanged since an earlier crawl {words}" in line and "not stored again" not in line, line


def test_a_wrong_on_index_error_value_names_the_setting():
    """SIMHASH_ON_INDEX_ERROR other than 'pass' or 'stop' is a ValueError naming the setting."""
    with pytest.raises(ValueError, match="SIMHASH_ON_INDEX_ERROR must be one of 'pass', 'stop', got 'halt'"):
        filter_crawler({"SIMHASH_ON_INDEX_ERROR": "halt"})


def test_flagged_items_carry_the_similarity_that_verified_them():
    """In flag mode a near-duplicate item carries ``similarity`` (0..1, 3 decimals) beside duplicate_of and
    distance, a kept one None; an item type without the field passes without a warning about it."""
    c = Components(SIMHASH_ACTION="flag")
    kept = c.crawl_page("http://a.test/rain", ARTICLE, ITEM_TYPES["dict"])
    flagged = c.crawl_page("http://b.test/copy", COPY, ITEM_TYPES["dict"])
    assert field(kept, "similarity") is None
    assert 0.75 <= field(flagged, "similarity") <= 1 and round(field(flagged, "similarity"), 3) == field(
        flagged, "similarity"
    )
    item = c.crawl_page("http://c.test/copy", COPY, ITEM_TYPES["Item"])
    assert field(item, "duplicate_of") is not None and "similarity" not in ItemAdapter(item)


def test_a_flagged_crawl_s_item_says_when_the_index_did_not_check_it():
    """A page the index failed to check is let through with its fingerprint; in flag mode its item says
    ``skipped: index_error`` (so it is not taken for a page checked and kept)."""
    c = Components(SIMHASH_ACTION="flag", SIMHASH_BACKEND="memory://")
    backend = c.downloader.filter.index.backend

    def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionRefusedError("the index is down")

    backend.add_and_candidates = unreachable
    item = c.crawl_page("http://a.test/rain", ARTICLE, ITEM_TYPES["dict"])
    assert item["skipped"] == "index_error" and item["fingerprint"] and item["duplicate_of"] is None
    assert c.stat("simhash/skipped/index_error") == 1
