"""Tests of the downloader middleware (and the per-crawl filter behind it), built through
``scrapy.utils.test.get_crawler`` and fed responses directly."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import signal
import threading
import time
from typing import Any, ClassVar

import pytest
import worker_helpers
from filter_crawler import filter_crawler
from scrapy import Request, Spider, signals
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.utils.test import get_crawler

from devsites import pages as p
from simhash_filter import SimhashDownloaderMiddleware
from simhash_filter.config import FilterConfig, FingerprintConfig
from simhash_filter.crawl import guard, workers
from simhash_filter.crawl import settings as crawl_settings
from simhash_filter.crawl.crawlfilter import CrawlFilter, IndexUnavailable
from simhash_filter.crawl.decision import Decision
from simhash_filter.crawl.middlewares import NearDuplicateResponse
from simhash_filter.crawl.settings import FilterOptions
from simhash_filter.index.backends import Candidate
from simhash_filter.index.backends.memory import MemoryBackend
from simhash_filter.index.bound import DEFAULT_BOUND, CheckBound
from simhash_filter.index.nearduplicate import NearDuplicateIndex
from simhash_filter.model.fingerprint import Fingerprinter

pytestmark = pytest.mark.usefixtures("memory_index")

ARTICLE = p.gazette(p.RAINWATER).encode("utf-8")
COPY = p.ledger(p.RAINWATER).encode("utf-8")  # the same article in another site's template
OTHER = p.gazette(p.LIGHTHOUSE).encode("utf-8")
HTML = {"Content-Type": "text/html; charset=utf-8"}


def middleware(**settings: Any) -> SimhashDownloaderMiddleware:
    crawler = filter_crawler(settings)
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


@pytest.mark.parametrize("action", ["drop", "flag"])
def test_drop_or_flag_is_decided_once_and_said_in_meta(action):
    """Whether a near-duplicate is dropped is decided with its decision: ``meta["simhash"]["dropped"]`` is True
    for a copy in drop mode (and the response is dropped), False in flag mode and for a kept page."""
    mw = middleware(SIMHASH_ACTION=action)
    kept, _ = respond(mw, "http://a.test/rain", ARTICLE)
    copy, response = respond(mw, "http://b.test/copy", COPY)
    assert kept.meta["simhash"]["dropped"] is False
    assert copy.meta["simhash"]["dropped"] is (action == "drop")
    assert isinstance(response, NearDuplicateResponse) is (action == "drop")
    assert Decision.from_meta(copy.url, copy.meta["simhash"]).dropped is (action == "drop")


@pytest.mark.parametrize(("action", "what"), [("drop", "dropped"), ("flag", "flagged")])
def test_a_near_duplicate_is_logged_once_with_its_decision(action, what, caplog):
    """The near-duplicate's log line says what its decision says (dropped or flagged), once: it is written where the
    decision is made, not again by the middleware."""
    mw = middleware(SIMHASH_ACTION=action, SIMHASH_DEBUG=True)
    with caplog.at_level(logging.DEBUG, logger="simhash_filter"):
        respond(mw, "http://a.test/rain", ARTICLE)
        respond(mw, "http://b.test/copy", COPY)
    lines = [r.getMessage() for r in caplog.records if "near-duplicate of" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(f"simhash: {what} http://b.test/copy: near-duplicate of "), lines


def test_a_page_unchanged_since_it_was_kept_is_logged_as_not_indexed_again(caplog):
    """A page fetched again unchanged goes on to the spider, and its log line says only what is true of it there: it
    is not indexed again (its own entry is in the index), not that it was dropped or let through."""
    mw = middleware(SIMHASH_DEBUG=True)
    respond(mw, "http://a.test/rain", ARTICLE)
    with caplog.at_level(logging.DEBUG, logger="simhash_filter"):
        _, response = respond(mw, "http://a.test/rain", ARTICLE)
    assert isinstance(response, HtmlResponse)
    lines = [r.getMessage() for r in caplog.records if "near-duplicate of" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("simhash: not indexed again (unchanged since it was kept) http://a.test/rain: "
                               "near-duplicate of http://a.test/rain (distance 0"), lines  # fmt: skip


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
    def add_and_candidates(
        self, fingerprint: int, key: str, sketch: bytes, k: int, bound: CheckBound = DEFAULT_BOUND
    ) -> list[Candidate]:
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

    def add_and_candidates(
        self, fingerprint: int, key: str, sketch: bytes, k: int, bound: CheckBound = DEFAULT_BOUND
    ) -> list[Candidate]:
        RecoveringRemoteBackend.calls.append(threading.current_thread().name)
        if RecoveringRemoteBackend.failures < 2:
            RecoveringRemoteBackend.failures += 1
            raise ConnectionError("the index server is restarting")
        return super().add_and_candidates(fingerprint, key, sketch, k, bound)


def test_remote_index_is_called_off_the_reactor_thread_and_retried(monkeypatch, caplog):
    """A remote backend's checks run in the filter's index thread; with SIMHASH_INDEX_RETRY_SECONDS a failed
    check is retried (the page waits) until the index answers, logged once as a warning."""
    monkeypatch.setattr(guard, "RETRY_FIRST_DELAY", 0.01)
    monkeypatch.setattr(guard, "INDEX_BREAK_SECONDS", 0.01)
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
    monkeypatch.setattr(guard.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(RecoveringRemoteBackend, "failures", 0)
    monkeypatch.setattr(RecoveringRemoteBackend, "calls", calls := [])
    mw = middleware(SIMHASH_BACKEND="remote://", SIMHASH_BACKENDS={"remote": RecoveringRemoteBackend})
    for path in ("/1", "/2", "/3"):
        request, _ = respond(mw, "http://a.test" + path, ARTICLE)
        assert request.meta["simhash"]["status"] == "index_error"
    assert len(calls) == 1
    clock[0] += guard.INDEX_BREAK_SECONDS + 0.1  # the breaker closes: the index is tried again
    respond(mw, "http://a.test/4", OTHER)
    clock[0] += guard.INDEX_BREAK_SECONDS + 0.1
    request, _ = respond(mw, "http://a.test/5", OTHER)
    # three checks, and the four pages let through meanwhile added late (one idempotent add each)
    assert len(calls) == 3 + 4 and request.meta["simhash"]["status"] == "ok"
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
    mw = SimhashDownloaderMiddleware(CrawlFilter(FilterOptions(config), crawler.stats))
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
    # the reactor thread's own seconds are its index checks' alone: no page was fingerprinted there
    assert stats(threaded).get("simhash/reactor_seconds", 0) == stats(threaded).get("simhash/index_seconds", 0)
    threaded.filter.spider_closed(None, "finished")


async def workers_ready(mw: SimhashDownloaderMiddleware) -> None:
    """Start the filter's worker processes and wait until one is ready (pages then go to the workers)."""
    mw.filter.start_workers()
    deadline = time.monotonic() + 60
    while not mw.filter.executor.workers_ready:
        assert time.monotonic() < deadline, "the worker processes did not start"
        await asyncio.sleep(0.01)


async def check(mw: SimhashDownloaderMiddleware, url: str, body: bytes) -> tuple[Request, Any]:
    """``respond`` in the running event loop (the worker processes' pipes are watched by it)."""
    request = Request(url)
    response = HtmlResponse(url, body=body, headers=HTML, request=request)
    try:
        return request, await mw.process_response(request, response)
    except IgnoreRequest as exc:
        return request, exc


async def check_together(mw: SimhashDownloaderMiddleware, pages: list[tuple[str, bytes]]) -> list[dict[str, Any]]:
    """Every page at once (as concurrent downloads arrive); their decisions in meta, in order."""
    done = await asyncio.gather(*(check(mw, url, body) for url, body in pages))
    return [request.meta["simhash"] for request, _ in done]


PAGES = [
    ("http://a.test/rain", ARTICLE),
    ("http://a.test/light", OTHER),
    ("http://b.test/rain", COPY),
    ("http://a.test/tea", p.forum(p.TEA_GARDEN).encode("utf-8")),
    ("http://b.test/tea", p.portal(p.TEA_GARDEN).encode("utf-8")),
    ("http://a.test/library", p.gazette(p.LIBRARY).encode("utf-8")),
    ("http://a.test/empty", b"<html><body></body></html>"),
    ("http://a.test/image", b'<html><body><img src="/a.png"></body></html>'),
]


def test_worker_processes_decide_the_same():
    """Fingerprinting in worker processes (SIMHASH_PROCESSES) gives the same fingerprints and decisions as in
    the reactor thread, for pages arriving together; the reactor thread only checks the index (its seconds are the
    index checks' seconds: counts and sums, never two measured times compared)."""
    expected = asyncio.run(check_together(middleware(), PAGES))
    assert [m["status"] for m in expected].count("ok") == 6 and expected[2]["duplicate_of"] == "http://a.test/rain"
    mw = middleware(SIMHASH_PROCESSES=2)

    async def run() -> list[dict[str, Any]]:
        await workers_ready(mw)
        try:
            return await check_together(mw, PAGES)
        finally:
            mw.filter.spider_closed(None, "finished")

    assert asyncio.run(run()) == expected
    s = stats(mw)
    assert s["simhash/checked"] == 6 and "simhash/fingerprinted_in_reactor" not in s
    assert s.get("simhash/reactor_seconds", 0) == s.get("simhash/index_seconds", 0)  # the index checks alone
    assert not mw.filter.executor.workers


def test_pages_arriving_before_the_workers_are_ready_are_fingerprinted_in_the_reactor_thread(caplog):
    """Until a worker process is ready, pages do not wait for it: the reactor thread fingerprints them,
    and the summary line says how many.  Without spider_opened (a filter used outside a crawl) no worker
    is started at all."""
    mw = middleware(SIMHASH_PROCESSES=1)
    asyncio.run(check_together(mw, PAGES[:1]))
    assert not mw.filter.executor.workers and "simhash/fingerprinted_in_reactor" not in stats(mw)

    async def run() -> list[dict[str, Any]]:
        mw.filter.spider_opened(None)  # starts the workers, does not wait for them
        try:
            return await check_together(mw, PAGES[1:3])
        finally:
            mw.filter.spider_closed(None, "finished")

    with caplog.at_level(logging.INFO, logger="simhash_filter"):
        metas = asyncio.run(run())
    assert metas[1]["duplicate_of"] == "http://a.test/rain"
    assert stats(mw)["simhash/fingerprinted_in_reactor"] == 2
    assert any(
        "s in all; 2 pages in the reactor thread while workers started" in r.getMessage() for r in caplog.records
    )


def test_default_processes_follow_the_machine(monkeypatch):
    """SIMHASH_PROCESSES=None (the default) means one worker process with two CPUs or more, none with one
    CPU or with SIMHASH_THREADS; a number is taken as it is."""
    assert middleware(SIMHASH_PROCESSES=3).filter.options.worker_processes == 3
    assert middleware(SIMHASH_PROCESSES="0").filter.options.worker_processes == 0
    monkeypatch.setattr(crawl_settings, "available_cpus", lambda: 2)
    assert middleware().filter.options.worker_processes == 1
    assert middleware(SIMHASH_THREADS=2).filter.options.worker_processes == 0
    monkeypatch.setattr(crawl_settings, "available_cpus", lambda: 1)
    assert middleware().filter.options.worker_processes == 0


@pytest.mark.parametrize("where", ["threads", "processes"])
def test_pages_enter_the_index_in_the_order_they_arrived(where, monkeypatch):
    """A page that takes longer to fingerprint is still checked before the pages that arrived after it: its
    copy, fingerprinted first, is the near-duplicate (as in the reactor thread), not the original."""
    original = ARTICLE + worker_helpers.SLOW  # a comment after the page: the same fingerprint
    if where == "threads":
        fingerprint = Fingerprinter.fingerprint

        def slow_original(self: Fingerprinter, body: bytes | str, encoding: str | None = None) -> Any:
            if body == original:
                time.sleep(0.5)
            return fingerprint(self, body, encoding)

        monkeypatch.setattr(Fingerprinter, "fingerprint", slow_original)
        mw = middleware(SIMHASH_THREADS=2)
    else:
        monkeypatch.setattr(workers, "WORKER_MODULE", "worker_helpers")  # takes 0.5 s over SLOW pages
        mw = middleware(SIMHASH_PROCESSES=2)

    async def run() -> list[dict[str, Any]]:
        if where == "processes":
            await workers_ready(mw)
            while not all(w.ready for w in mw.filter.executor.workers):  # the copy must not wait for a worker
                await asyncio.sleep(0.01)
        try:
            return await check_together(mw, [("http://a.test/rain", original), ("http://b.test/rain", COPY)])
        finally:
            mw.filter.spider_closed(None, "finished")

    first, copy = asyncio.run(run())
    assert first["duplicate_of"] is None
    assert copy["duplicate_of"] == "http://a.test/rain"


def test_a_dead_worker_is_replaced_and_its_page_tried_again(caplog):
    """A worker process that dies (killed) is replaced; the page it was sent goes to the new one and is
    checked; counted in simhash/worker_restarts and logged once."""
    mw = middleware(SIMHASH_PROCESSES=1)

    async def run() -> tuple[Any, Any]:
        await workers_ready(mw)
        worker = mw.filter.executor.workers[0]
        os.kill(worker.pid, signal.SIGKILL)
        worker.popen.wait()
        try:
            _, kept = await check(mw, "http://a.test/rain", ARTICLE)
            _, dropped = await check(mw, "http://b.test/rain", COPY)
            return kept, dropped
        finally:
            mw.filter.spider_closed(None, "finished")

    with caplog.at_level(logging.INFO, logger="simhash_filter"):
        kept, dropped = asyncio.run(run())
    assert isinstance(kept, HtmlResponse) and isinstance(dropped, NearDuplicateResponse)
    assert stats(mw)["simhash/worker_restarts"] == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "exit status -9" in errors[0]


def test_a_page_that_kills_its_worker_twice_is_let_through(monkeypatch, caplog):
    """A page whose worker dies on it, and whose second worker dies on it too, is let through unchecked
    (simhash/skipped/worker_died); each dead worker is replaced and the crawl goes on with the next pages."""
    monkeypatch.setattr(workers, "WORKER_MODULE", "worker_helpers")  # dies on POISON pages
    mw = middleware(SIMHASH_PROCESSES=1)

    async def run() -> tuple[Request, Any, Request]:
        await workers_ready(mw)
        try:
            poisoned, response = await check(mw, "http://a.test/poison", ARTICLE + worker_helpers.POISON)
            await workers_ready(mw)
            after, _ = await check(mw, "http://a.test/light", OTHER)
            return poisoned, response, after
        finally:
            mw.filter.spider_closed(None, "finished")

    with caplog.at_level(logging.INFO, logger="simhash_filter"):
        poisoned, response, after = asyncio.run(run())
    assert isinstance(response, HtmlResponse) and poisoned.meta["simhash"]["status"] == "worker_died"
    assert after.meta["simhash"]["status"] == "ok"
    s = stats(mw)
    assert s["simhash/worker_restarts"] == 2 and s["simhash/skipped/worker_died"] == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2 and "exit status 70" in errors[0] and "worker_died" in errors[1]


def test_workers_that_cannot_start_leave_the_pages_to_the_reactor_thread(monkeypatch, caplog):
    """Worker processes that cannot start (here: their module is missing) are given up, logged once at ERROR;
    pages are fingerprinted in the reactor thread, and the crawl goes on."""
    monkeypatch.setattr(workers, "WORKER_MODULE", "simhash_filter_no_such_module")
    mw = middleware(SIMHASH_PROCESSES=2)

    async def run() -> tuple[Request, Any]:
        mw.filter.start_workers()
        deadline = time.monotonic() + 60
        while mw.filter.executor.where() != "in the reactor thread":  # the workers are given up
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        request, _ = await check(mw, "http://a.test/rain", ARTICLE)
        _, dropped = await check(mw, "http://b.test/rain", COPY)
        mw.filter.spider_closed(None, "finished")
        return request, dropped

    with caplog.at_level(logging.INFO, logger="simhash_filter"):
        request, dropped = asyncio.run(run())
    assert request.meta["simhash"]["status"] == "ok" and isinstance(dropped, NearDuplicateResponse)
    # both pages were fingerprinted in the reactor thread after the workers were given up, and counted so
    assert stats(mw)["simhash/fingerprinted_in_reactor"] == 2 and stats(mw)["simhash/reactor_seconds"] > 0
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "did not start" in errors[0]
    summary = [r.getMessage() for r in caplog.records if r.getMessage().startswith("simhash: 2 pages checked")]
    assert summary and "in the reactor thread (" in summary[0] and "2 pages in the reactor thread" in summary[0]


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
        ({"SIMHASH_PROCESSES": -1}, "SIMHASH_PROCESSES"),
        ({"SIMHASH_THREADS": 1, "SIMHASH_PROCESSES": 1}, "SIMHASH_PROCESSES"),
        ({"SIMHASH_PROCESSES": "many"}, "SIMHASH_PROCESSES"),
        ({"SIMHASH_BACKEND": "nosuch://"}, "nosuch"),
    ],
)
def test_bad_settings_fail_at_start_naming_the_setting(settings, name):
    """A bad SIMHASH_* value fails when the crawl starts, with a message naming the setting (an index that cannot
    be opened: ``IndexUnavailable``, ``SIMHASH_BACKEND=<uri>: why``)."""
    with pytest.raises((ValueError, IndexUnavailable), match=name):
        middleware(**settings)


def test_settings_change_the_model_and_threshold():
    """SIMHASH_MAX_DISTANCE, SIMHASH_DOM_DECAY and SIMHASH_STRUCTURE_WEIGHT reach the filter's config."""
    mw = middleware(SIMHASH_MAX_DISTANCE=5, SIMHASH_DOM_DECAY=0.6, SIMHASH_STRUCTURE_WEIGHT=0.2)
    assert mw.filter.options.config.max_distance == 5 and mw.filter.index.k == 5
    assert mw.filter.options.config.fingerprint.dom_decay == 0.6
    assert mw.filter.options.config.fingerprint.structure_weight == 0.2


def test_components_of_one_crawler_share_one_filter():
    """The middleware, the spider middleware and the pipeline of one crawler share one index."""
    from simhash_filter import SimhashPipeline, SimhashSpiderMiddleware

    crawler = filter_crawler()
    mw = SimhashDownloaderMiddleware.from_crawler(crawler)
    assert SimhashPipeline.from_crawler(crawler).filter is mw.filter
    assert SimhashSpiderMiddleware.from_crawler(crawler).filter is mw.filter
    assert SimhashDownloaderMiddleware.from_crawler(filter_crawler()).filter is not mw.filter


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
    assert stats(mw)["simhash/index_size"] == 2  # every checked page is stored, near-duplicate or not


def test_hooks_use_the_scrapy_2_13_signatures():
    """process_response takes (request, response) — no deprecated spider argument — and is a coroutine."""
    params = list(inspect.signature(SimhashDownloaderMiddleware.process_response).parameters)
    assert params == ["self", "request", "response"]
    assert inspect.iscoroutinefunction(SimhashDownloaderMiddleware.process_response)


def test_index_is_tagged_with_the_model():
    """The index carries the fingerprint model id, so a persistent backend refuses another model."""
    mw = middleware()
    index: NearDuplicateIndex = mw.filter.index
    # the word sketch (64 bytes) and the prose part after it (64): the engines verify the first 64 alone
    assert index.metadata == {"model": FingerprintConfig().model_id(), "sketch_bytes": 164, "verify_bytes": 64}


def test_a_dropped_response_still_counts_as_received():
    """A near-duplicate dropped before the spider was downloaded all the same: ``response_received`` is sent for
    it, so ``response_received_count`` and ``CLOSESPIDER_PAGECOUNT`` count it (they did not: a crawl of
    near-identical pages ran far past its page limit)."""
    crawler = filter_crawler()
    mw = SimhashDownloaderMiddleware.from_crawler(crawler)
    received: list[str] = []

    def on_received(response: Response, **kwargs: Any) -> None:
        received.append(response.url)

    crawler.signals.connect(on_received, signal=signals.response_received)  # a weak reference: kept alive here
    respond(mw, "http://a.test/rain", ARTICLE)
    _, dropped = respond(mw, "http://b.test/copy", COPY)
    assert isinstance(dropped, NearDuplicateResponse)
    assert received == ["http://b.test/copy"]  # the kept one is signalled by the engine, not by the filter


def test_every_stats_key_is_there_from_spider_open():
    """When the spider opens, every key of ``stats_keys()`` is set to 0 (0.0 for seconds), so that a monitor reads
    ``stats["simhash/kept"]`` whatever the crawl met; a key counted before keeps its count."""
    from simhash_filter.crawl.stats import stats_keys

    mw = middleware(SIMHASH_PROCESSES=0)
    mw.filter.stats.inc_value("simhash/checked", 3)
    mw.filter.spider_opened(spider=None)
    s = stats(mw)
    assert set(stats_keys()) <= set(s) and s["simhash/checked"] == 3
    assert s["simhash/kept"] == 0 and s["simhash/flagged"] == 0 and s["simhash/skipped/index_error"] == 0
    assert s["simhash/fingerprint_seconds"] == 0.0 and isinstance(s["simhash/fingerprint_seconds"], float)
    assert "simhash/avoided/url_rule" not in s and "simhash/warc/errors" not in s  # SIMHASH_AVOID, SIMHASH_WARC off


def test_index_size_is_current_while_the_crawl_runs():
    """``simhash/index_size`` follows the pages stored, page by page, without waiting for the spider to close."""
    mw = middleware(SIMHASH_PROCESSES=0)
    assert stats(mw)["simhash/index_size"] == 0
    for n, (url, body) in enumerate([("http://a.test/rain", ARTICLE), ("http://a.test/light", OTHER)], 1):
        respond(mw, url, body)
        assert stats(mw)["simhash/index_size"] == len(mw.filter.index) == n
    respond(mw, "http://b.test/copy", COPY)  # a near-duplicate is stored too
    assert stats(mw)["simhash/index_size"] == len(mw.filter.index) == 3
    respond(mw, "http://a.test/rain", ARTICLE)  # its own entry: not stored twice
    assert stats(mw)["simhash/index_size"] == len(mw.filter.index) == 3
    assert mw.filter.index.rows_written == 3  # noted by the check itself: the guard does not ask the index again


def test_what_a_page_s_check_measured_is_counted_with_its_decision_or_its_skip():
    """A page's measures go along with it and are counted with its decision: checked in the reactor thread, its
    fingerprinting and its index check both count in the reactor's seconds; a page fingerprinted and then let
    through (too few features) counts its fingerprinting with its skip."""
    mw = middleware(SIMHASH_PROCESSES=0)
    respond(mw, "http://a.test/rain", ARTICLE)
    s = stats(mw)
    assert s["simhash/checked"] == 1 and mw.filter.report.count.fingerprinted_pages == 1
    assert s["simhash/fingerprint_seconds"] > 0 and s["simhash/index_seconds"] > 0
    assert s["simhash/fingerprint_seconds"] + s["simhash/index_seconds"] <= s["simhash/reactor_seconds"]
    respond(mw, "http://a.test/image", b'<html><body><img src="/a.png"></body></html>')
    s2 = stats(mw)
    assert s2["simhash/skipped/too_few_features"] == 1 and mw.filter.report.count.fingerprinted_pages == 2
    assert s2["simhash/fingerprint_seconds"] > s["simhash/fingerprint_seconds"]
    assert s2["simhash/index_seconds"] == s["simhash/index_seconds"]  # the index was not called


def test_index_size_of_a_remote_index_counts_the_pages_stored():
    """A remote index is not called for its size: the decisions tell it (a page's own entry is not stored twice)."""
    mw = middleware(SIMHASH_PROCESSES=0)
    report, value = mw.filter.report, 0x1234
    report.index_opened("redis://r/0", "redis", 10)
    report.count.checked(Decision("http://a.test/1", "ok", value), stored=True)
    report.count.checked(Decision("http://a.test/2", "ok", value), stored=True, added_late=2)
    own = Decision("http://a.test/1", "ok", value, "http://a.test/1", 0, 1.0)  # its own entry, found again
    report.count.checked(own, stored=False)
    assert stats(mw)["simhash/index_size"] == 10 + 1 + 3
