"""Tests of the downloader middleware (and the per-crawl filter behind it), built through
``scrapy.utils.test.get_crawler`` and fed responses directly."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
from typing import Any, ClassVar

import pages as p
import pytest
from scrapy import Request, Spider
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.utils.test import get_crawler

from simhash_filter import SimhashDownloaderMiddleware, crawlfilter
from simhash_filter.backends.memory import MemoryBackend
from simhash_filter.config import FilterConfig, FingerprintConfig
from simhash_filter.crawlfilter import CrawlFilter
from simhash_filter.index import Match, NearDuplicateIndex
from simhash_filter.middlewares import NearDuplicateResponse

pytestmark = pytest.mark.usefixtures("memory_index")

ARTICLE = p.gazette(p.RAINWATER).encode("utf-8")
COPY = p.ledger(p.RAINWATER).encode("utf-8")  # the same article in another site's template
OTHER = p.gazette(p.LIGHTHOUSE).encode("utf-8")
HTML = {"Content-Type": "text/html; charset=utf-8"}


def middleware(**settings: Any) -> SimhashDownloaderMiddleware:
    crawler = get_crawler(Spider, settings_dict=settings)
    return SimhashDownloaderMiddleware.from_crawler(crawler)


def respond(mw: SimhashDownloaderMiddleware, url: str, body: bytes, headers: dict | None = None, **kw: Any):
    """Run ``process_response``; return ``(request, response or the exception raised)``."""
    request = Request(url, meta=kw.pop("meta", {}))
    cls = kw.pop("cls", HtmlResponse)
    response = cls(url, body=body, headers=HTML if headers is None else headers, request=request, **kw)
    try:
        return request, asyncio.run(mw.process_response(request, response))
    except IgnoreRequest as exc:
        return request, exc


def stats(mw: SimhashDownloaderMiddleware) -> dict[str, Any]:
    return {k: v for k, v in mw.filter.stats.get_stats().items() if k.startswith("simhash/")}


def test_first_page_kept_near_duplicate_dropped():
    """The first page is kept and tagged in meta; a copy of it is dropped with IgnoreRequest naming the kept page."""
    mw = middleware()
    request, response = respond(mw, "http://a.test/rain", ARTICLE)
    assert isinstance(response, HtmlResponse)
    meta = request.meta["simhash"]
    assert meta["status"] == "ok" and meta["duplicate_of"] is None and meta["distance"] is None
    assert len(meta["fingerprint"]) == 16
    _, dropped = respond(mw, "http://b.test/copy", COPY)
    assert isinstance(dropped, NearDuplicateResponse)
    assert dropped.duplicate_of == "http://a.test/rain" and dropped.url == "http://b.test/copy"
    s = stats(mw)
    assert s["simhash/checked"] == 2 and s["simhash/kept"] == 1
    assert s["simhash/near_duplicates"] == 1 and s["simhash/dropped"] == 1
    assert s[f"simhash/distance/{dropped.distance}"] == 1
    assert "simhash/flagged" not in s


def test_different_pages_both_kept():
    """Two different articles in the same template are both kept."""
    mw = middleware()
    respond(mw, "http://a.test/rain", ARTICLE)
    request, response = respond(mw, "http://a.test/light", OTHER)
    assert isinstance(response, HtmlResponse)
    assert request.meta["simhash"]["duplicate_of"] is None
    assert len(mw.filter.index) == 2


def test_flag_action_lets_near_duplicate_through():
    """With SIMHASH_ACTION=flag a near-duplicate reaches the spider with duplicate_of and distance in meta."""
    mw = middleware(SIMHASH_ACTION="flag")
    respond(mw, "http://a.test/rain", ARTICLE)
    request, response = respond(mw, "http://b.test/copy", COPY)
    assert isinstance(response, HtmlResponse)
    meta = request.meta["simhash"]
    assert meta["duplicate_of"] == "http://a.test/rain" and 0 <= meta["distance"] <= 3
    assert stats(mw)["simhash/flagged"] == 1 and "simhash/dropped" not in stats(mw)


@pytest.mark.parametrize(
    ("headers", "cls", "body"),
    [
        ({"Content-Type": "image/png"}, Response, b"\x89PNG\r\n\x1a\n\x00\x00binary"),
        ({"Content-Type": "application/json"}, TextResponse, b'{"html": "<p>not a page</p>"}'),
        ({"Content-Type": "text/plain"}, TextResponse, ARTICLE),
        ({}, Response, b"\x00\x01\x02 no content type and binary"),
    ],
)
def test_non_html_passes_untouched(headers, cls, body):
    """Responses that are not HTML (by Content-Type, or sniffed without one) pass unchanged and are counted."""
    mw = middleware()
    request, response = respond(mw, "http://a.test/file", body, headers, cls=cls)
    assert isinstance(response, cls) and response.body == body
    assert request.meta["simhash"]["status"] == "not_html"
    assert stats(mw)["simhash/skipped/not_html"] == 1
    assert len(mw.filter.index) == 0


def test_html_without_content_type_is_sniffed():
    """An HTML page served without Content-Type (Scrapy sniffs HtmlResponse) is fingerprinted."""
    mw = middleware()
    request, _ = respond(mw, "http://a.test/no-type", ARTICLE, {})
    assert request.meta["simhash"]["status"] == "ok"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "empty"),
        (b"   \n ", "empty"),
        (b'<html><body><img src="/a.png"></body></html>', "too_few_features"),
    ],
)
def test_pages_without_fingerprint_pass_and_are_counted(body, reason, caplog):
    """Empty and image-only pages pass unchecked, counted by reason and logged once."""
    mw = middleware()
    with caplog.at_level(logging.INFO, logger="simhash_filter"):
        for i in range(3):
            request, response = respond(mw, f"http://a.test/{i}", body)
            assert isinstance(response, HtmlResponse)
            assert request.meta["simhash"]["status"] == reason
    assert stats(mw)[f"simhash/skipped/{reason}"] == 3
    assert sum(reason in r.getMessage() for r in caplog.records) == 1


def test_http_error_responses_not_fingerprinted():
    """A 404 page is not fingerprinted (error pages of one site all look alike)."""
    mw = middleware()
    _, response = respond(mw, "http://a.test/missing", ARTICLE, status=404)
    assert isinstance(response, HtmlResponse)
    assert stats(mw)["simhash/skipped/http_status"] == 1
    assert len(mw.filter.index) == 0


def test_dont_simhash_meta_exempts_a_request():
    """A request with meta dont_simhash is neither checked nor added."""
    mw = middleware()
    respond(mw, "http://a.test/rain", ARTICLE)
    request, response = respond(mw, "http://a.test/again", ARTICLE, meta={"dont_simhash": True})
    assert isinstance(response, HtmlResponse) and "simhash" not in request.meta
    assert len(mw.filter.index) == 1


class BrokenBackend(MemoryBackend):
    def check_and_add(self, fingerprint: int, key: str, k: int) -> Match | None:
        raise ConnectionError("the index server went away")


def test_index_error_lets_the_page_through(caplog):
    """When the index fails the page passes with its fingerprint, counted and logged once with a traceback."""
    mw = middleware(SIMHASH_BACKEND="broken://", SIMHASH_BACKENDS={"broken": BrokenBackend})
    with caplog.at_level(logging.INFO, logger="simhash_filter"):
        for url in ("http://a.test/1", "http://a.test/2"):
            request, response = respond(mw, url, ARTICLE)
            assert isinstance(response, HtmlResponse)
            assert request.meta["simhash"]["status"] == "index_error"
            assert request.meta["simhash"]["fingerprint"] is not None
    assert stats(mw)["simhash/skipped/index_error"] == 2
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is not None


class RecoveringRemoteBackend(MemoryBackend):
    """A remote index that fails its first two checks (a server restarting), then answers."""

    remote = True
    failures = 0
    calls: ClassVar[list[str]] = []  # the threads that called check_and_add, in order

    def check_and_add(self, fingerprint: int, key: str, k: int) -> Match | None:
        RecoveringRemoteBackend.calls.append(threading.current_thread().name)
        if RecoveringRemoteBackend.failures < 2:
            RecoveringRemoteBackend.failures += 1
            raise ConnectionError("the index server is restarting")
        return super().check_and_add(fingerprint, key, k)


def test_remote_index_is_called_off_the_reactor_thread_and_retried(monkeypatch, caplog):
    """A remote backend's checks run in the filter's index thread; with SIMHASH_INDEX_RETRY_SECONDS a failed
    check is retried (the page waits) until the index answers, logged once as a warning."""
    monkeypatch.setattr(crawlfilter, "RETRY_FIRST_DELAY", 0.01)
    monkeypatch.setattr(crawlfilter, "INDEX_BREAK_SECONDS", 0.01)
    monkeypatch.setattr(RecoveringRemoteBackend, "failures", 0)
    remote = {"SIMHASH_BACKEND": "remote://", "SIMHASH_BACKENDS": {"remote": RecoveringRemoteBackend}}
    mw = middleware(**remote, SIMHASH_INDEX_RETRY_SECONDS=30)
    with caplog.at_level(logging.INFO, logger="simhash_filter"):
        request, _ = respond(mw, "http://a.test/1", ARTICLE)
        _, dropped = respond(mw, "http://b.test/1", COPY)
    assert request.meta["simhash"]["status"] == "ok" and isinstance(dropped, NearDuplicateResponse)
    assert set(RecoveringRemoteBackend.calls) == {"simhash-index_0"}
    assert stats(mw)["simhash/index_retries"] == 2 and "simhash/skipped/index_error" not in stats(mw)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "retried for up to 30 s" in warnings[0].getMessage()

    RecoveringRemoteBackend.failures = 0  # without retries the page goes through unchecked at once (monkeypatched)
    mw = middleware(**remote)
    request, _ = respond(mw, "http://a.test/2", ARTICLE)
    assert request.meta["simhash"]["status"] == "index_error"


def test_a_failing_remote_index_is_left_alone_for_a_while(monkeypatch):
    """After an error the breaker lets pages through without calling the index (no timeout per page),
    then tries it again."""
    clock = [1000.0]
    monkeypatch.setattr(crawlfilter.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(RecoveringRemoteBackend, "failures", 0)
    monkeypatch.setattr(RecoveringRemoteBackend, "calls", calls := [])
    mw = middleware(SIMHASH_BACKEND="remote://", SIMHASH_BACKENDS={"remote": RecoveringRemoteBackend})
    for path in ("/1", "/2", "/3"):
        request, _ = respond(mw, "http://a.test" + path, ARTICLE)
        assert request.meta["simhash"]["status"] == "index_error"
    assert len(calls) == 1
    clock[0] += crawlfilter.INDEX_BREAK_SECONDS + 0.1  # the breaker closes: the index is tried again
    respond(mw, "http://a.test/4", OTHER)
    clock[0] += crawlfilter.INDEX_BREAK_SECONDS + 0.1
    request, _ = respond(mw, "http://a.test/5", OTHER)
    assert len(calls) == 3 and request.meta["simhash"]["status"] == "ok"
    # the pages let through while the index failed were added once it answered: their copies are caught
    assert stats(mw)["simhash/index_added_late"] == 4
    _, dropped = respond(mw, "http://b.test/copy", COPY)
    assert isinstance(dropped, NearDuplicateResponse) and dropped.duplicate_of == "http://a.test/1"


def test_wrong_charset_and_dataloss_are_counted():
    """Bytes invalid in the declared charset, and a truncated download, are fingerprinted and counted."""
    mw = middleware()
    gbk = p.forum(p.TEA_GARDEN).replace('<meta charset="utf-8">', "").encode("gbk")
    request, _ = respond(mw, "http://a.test/gbk", gbk, {"Content-Type": "text/html; charset=utf-8"})
    assert request.meta["simhash"]["status"] == "ok"
    request, _ = respond(mw, "http://a.test/cut", OTHER[: len(OTHER) // 2], flags=["dataloss"])
    assert request.meta["simhash"]["status"] == "ok"
    s = stats(mw)
    assert s["simhash/charset_errors"] == 1 and s["simhash/dataloss"] == 1


def test_undeclared_gbk_page_matches_its_utf8_original():
    """The page's own encoding sniffing is used (not Scrapy's cp1252 guess): undeclared GBK matches the UTF-8 page."""
    mw = middleware()
    respond(mw, "http://a.test/utf8", p.forum(p.TEA_GARDEN).encode("utf-8"))
    gbk = p.forum(p.TEA_GARDEN).replace('<meta charset="utf-8">', "").encode("gbk")
    _, dropped = respond(mw, "http://a.test/gbk", gbk, {"Content-Type": "text/html"})
    assert isinstance(dropped, NearDuplicateResponse)


def test_huge_page_is_fingerprinted_from_its_beginning():
    """A page larger than the work cap is fingerprinted from its first bytes and counted as truncated."""
    crawler = get_crawler(Spider)
    config = FilterConfig(FingerprintConfig(max_bytes=len(ARTICLE) // 2))
    mw = SimhashDownloaderMiddleware(CrawlFilter(config, stats=crawler.stats))
    request, _ = respond(mw, "http://a.test/huge", ARTICLE)
    assert request.meta["simhash"]["status"] == "ok"
    assert stats(mw)["simhash/truncated"] == 1


def test_worker_threads_decide_the_same():
    """Fingerprinting in worker threads (SIMHASH_THREADS) gives the same fingerprints and decisions."""
    inline, threaded = middleware(SIMHASH_THREADS=0), middleware(SIMHASH_THREADS=2)

    async def run(mw: SimhashDownloaderMiddleware) -> list[Any]:
        out = []
        for url, body in [("http://a.test/1", ARTICLE), ("http://a.test/2", OTHER), ("http://b.test/1", COPY)]:
            request = Request(url)
            response = HtmlResponse(url, body=body, headers=HTML, request=request)
            with contextlib.suppress(NearDuplicateResponse):
                await mw.process_response(request, response)
            out.append(request.meta["simhash"])
        return out

    assert asyncio.run(run(inline)) == asyncio.run(run(threaded))
    assert stats(threaded)["simhash/fingerprint_seconds"] > 0
    assert stats(threaded).get("simhash/reactor_seconds", 0) < stats(threaded)["simhash/fingerprint_seconds"]
    threaded.filter.spider_closed(None, "finished")


def test_disabled_raises_not_configured():
    """SIMHASH_ENABLED=False makes the component raise NotConfigured naming the setting."""
    with pytest.raises(NotConfigured, match="SIMHASH_ENABLED"):
        middleware(SIMHASH_ENABLED=False)


@pytest.mark.parametrize(
    ("settings", "name"),
    [
        ({"SIMHASH_ACTION": "delete"}, "SIMHASH_ACTION"),
        ({"SIMHASH_DOM_DECAY": 0}, "SIMHASH_DOM_DECAY"),
        ({"SIMHASH_STRUCTURE_WEIGHT": 2}, "SIMHASH_STRUCTURE_WEIGHT"),
        ({"SIMHASH_MAX_DISTANCE": 40}, "SIMHASH_MAX_DISTANCE"),
        ({"SIMHASH_THREADS": -1}, "SIMHASH_THREADS"),
        ({"SIMHASH_BACKEND": "nosuch://"}, "nosuch"),
    ],
)
def test_bad_settings_fail_at_start_naming_the_setting(settings, name):
    """A bad SIMHASH_* value fails when the crawl starts, with a message naming the setting."""
    with pytest.raises(ValueError, match=name):
        middleware(**settings)


def test_settings_change_the_model_and_threshold():
    """SIMHASH_MAX_DISTANCE, SIMHASH_DOM_DECAY and SIMHASH_STRUCTURE_WEIGHT reach the filter's config."""
    mw = middleware(SIMHASH_MAX_DISTANCE=5, SIMHASH_DOM_DECAY=0.6, SIMHASH_STRUCTURE_WEIGHT=0.2)
    assert mw.filter.config.max_distance == 5 and mw.filter.index.k == 5
    assert mw.filter.config.fingerprint.dom_decay == 0.6
    assert mw.filter.config.fingerprint.structure_weight == 0.2


def test_components_of_one_crawler_share_one_filter():
    """The middleware, the spider middleware and the pipeline of one crawler share one index."""
    from simhash_filter import SimhashPipeline, SimhashSpiderMiddleware

    crawler = get_crawler(Spider)
    mw = SimhashDownloaderMiddleware.from_crawler(crawler)
    assert SimhashPipeline.from_crawler(crawler).filter is mw.filter
    assert SimhashSpiderMiddleware.from_crawler(crawler).filter is mw.filter
    assert SimhashDownloaderMiddleware.from_crawler(get_crawler(Spider)).filter is not mw.filter


def test_summary_line_on_spider_closed(caplog):
    """On spider_closed one INFO line sums up the filter's work, and the index size is in the stats."""
    mw = middleware()
    respond(mw, "http://a.test/rain", ARTICLE)
    respond(mw, "http://b.test/copy", COPY)
    respond(mw, "http://a.test/logo", b"\x89PNG\x00", {"Content-Type": "image/png"}, cls=Response)
    with caplog.at_level(logging.INFO, logger="simhash_filter"):
        mw.filter.spider_closed(None, "finished")
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("simhash: 2 pages checked")]
    assert len(lines) == 1
    assert "1 kept, 1 near-duplicates (1 dropped, 0 flagged)" in lines[0] and "1 not_html" in lines[0]
    assert stats(mw)["simhash/index_size"] == 1


def test_hooks_use_the_scrapy_2_13_signatures():
    """process_response takes (request, response) — no deprecated spider argument — and is a coroutine."""
    params = list(inspect.signature(SimhashDownloaderMiddleware.process_response).parameters)
    assert params == ["self", "request", "response"]
    assert inspect.iscoroutinefunction(SimhashDownloaderMiddleware.process_response)


def test_index_is_tagged_with_the_model():
    """The index carries the fingerprint model id, so a persistent backend refuses another model."""
    mw = middleware()
    index: NearDuplicateIndex = mw.filter.index
    assert index.metadata == {"model": FingerprintConfig().model_id()}
