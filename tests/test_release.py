"""A dropped near-duplicate's browser page (scrapy-playwright's ``meta["playwright_page"]``) is closed by the
downloader middleware, since no callback will; a flagged one reaches the spider, which closes it.  Fake pages
here; ``tests/test_playwright_crawl.py`` crawls with the real scrapy-playwright and chromium."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from filter_crawler import filter_crawler
from scrapy import Request
from scrapy.http import HtmlResponse

from devsites import pages as p
from simhash_filter import SimhashDownloaderMiddleware
from simhash_filter.crawl.middlewares import NearDuplicateResponse
from simhash_filter.crawl.release import HeldPages

pytestmark = pytest.mark.usefixtures("memory_index")

ARTICLE = p.gazette(p.RAINWATER).encode("utf-8")
COPY = p.ledger(p.RAINWATER).encode("utf-8")


class FakePage:
    """A Playwright page as the filter sees it: an async ``close()``, which may fail."""

    def __init__(self, error: Exception | None = None) -> None:
        self.closed = 0
        self.error = error

    async def close(self) -> None:
        self.closed += 1
        if self.error is not None:
            raise self.error


class SyncPage:
    """A page whose ``close()`` returns nothing to await."""

    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def middleware(**settings: Any) -> SimhashDownloaderMiddleware:
    return SimhashDownloaderMiddleware.from_crawler(
        filter_crawler({"SIMHASH_PROCESSES": 0, **settings})
    )


def respond(mw: SimhashDownloaderMiddleware, url: str, body: bytes, page: object = None) -> object:
    """``process_response`` of a rendered response holding ``page``: the response, or the exception raised."""
    meta = {"playwright": True, "playwright_include_page": True, "playwright_page": page} if page else {}
    request = Request(url, meta=meta)
    response = HtmlResponse(url, body=body, headers={"Content-Type": "text/html"}, request=request)
    try:
        return asyncio.run(mw.process_response(request, response))
    except NearDuplicateResponse as exc:
        return exc


def stats(mw: SimhashDownloaderMiddleware) -> dict[str, Any]:
    return {k: v for k, v in mw.filter.stats.get_stats().items() if k.startswith("simhash/page")}


def test_a_dropped_near_duplicate_has_its_page_closed() -> None:
    """The kept page's page is the spider's to close; the dropped copy's is closed by the filter, and left in meta
    (an errback that closes it again, as scrapy-playwright's docs show, finds it)."""
    mw, kept, copy = middleware(), FakePage(), FakePage()
    assert isinstance(respond(mw, "http://a.test/rain", ARTICLE, kept), HtmlResponse)
    assert isinstance(respond(mw, "http://b.test/copy", COPY, copy), NearDuplicateResponse)
    assert (kept.closed, copy.closed) == (0, 1)
    assert stats(mw) == {"simhash/pages_closed": 1}


def test_a_flagged_near_duplicate_keeps_its_page_for_the_spider() -> None:
    mw, copy = middleware(SIMHASH_ACTION="flag"), FakePage()
    respond(mw, "http://a.test/rain", ARTICLE, FakePage())
    assert isinstance(respond(mw, "http://b.test/copy", COPY, copy), HtmlResponse)
    assert copy.closed == 0 and stats(mw) == {}


def test_a_page_that_fails_to_close_is_counted_logged_once_and_the_drop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mw = middleware()
    respond(mw, "http://a.test/rain", ARTICLE)
    with caplog.at_level(logging.WARNING, logger="simhash_filter.crawl.release"):
        for i in range(2):
            dropped = respond(mw, f"http://b.test/copy{i}", COPY, FakePage(RuntimeError("Target page closed")))
            assert isinstance(dropped, NearDuplicateResponse)
    assert stats(mw) == {"simhash/page_close_errors": 2}
    warnings = [r for r in caplog.records if "could not be closed" in r.getMessage()]
    assert len(warnings) == 1 and "RuntimeError: Target page closed" in warnings[0].getMessage()


def test_pages_are_duck_typed() -> None:
    """A ``close()`` that returns nothing is called; a value without ``close`` is left alone."""
    held, page = HeldPages(), SyncPage()
    asyncio.run(held.release({"playwright_page": page}))
    asyncio.run(held.release({"playwright_page": "not a page"}))
    assert page.closed == 1
