"""The crawl filter's own retries of a Redis index that stalls (``SIMHASH_INDEX_RETRY_SECONDS``) and its late
adds of the pages let through unchecked meanwhile, against a real ``redis-server`` frozen with SIGSTOP: a
call that timed out on the client still runs on the server when it wakes up, and neither the retry nor the
late add may then lose the page or store it twice."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from filter_crawler import filter_crawler
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse

from devsites import pages as p
from devsites.redis_server import RedisServer
from simhash_filter import SimhashDownloaderMiddleware
from simhash_filter.crawl import guard
from simhash_filter.crawl.middlewares import NearDuplicateResponse

ARTICLE = p.gazette(p.RAINWATER).encode("utf-8")
COPY = p.ledger(p.RAINWATER).encode("utf-8")  # the same article in another site's template
OTHER = p.gazette(p.LIGHTHOUSE).encode("utf-8")
HTML = {"Content-Type": "text/html; charset=utf-8"}
#: A client that gives up on a frozen server quickly, without retries of its own (yet not so quickly that a call
#: to the woken server, busy with the calls queued meanwhile on a loaded machine, times out too).
QUICK = "&socket_timeout=1.0&retries=0"


@pytest.fixture(autouse=True)
def fast_breaker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard, "RETRY_FIRST_DELAY", 0.05)
    monkeypatch.setattr(guard, "INDEX_BREAK_SECONDS", 0.01)


@contextmanager
def middleware(server: RedisServer, prefix: str, **settings: Any) -> Iterator[SimhashDownloaderMiddleware]:
    """A downloader middleware whose filter uses a quick Redis index; its filter closed on exit."""
    settings = {"SIMHASH_BACKEND": f"{server.url}?prefix={prefix}{QUICK}", "SIMHASH_PROCESSES": 0, **settings}
    mw = SimhashDownloaderMiddleware.from_crawler(filter_crawler(settings))
    try:
        yield mw
    finally:
        mw.filter.spider_closed(None, "finished")


def respond(mw: SimhashDownloaderMiddleware, url: str, body: bytes) -> tuple[Request, Any]:
    """Run ``process_response``; return ``(request, response or the exception raised)``."""
    request = Request(url)
    response = HtmlResponse(url, body=body, headers=HTML, request=request)
    try:
        return request, asyncio.run(mw.process_response(request, response))
    except IgnoreRequest as exc:
        return request, exc


def stored_keys(mw: SimhashDownloaderMiddleware, request: Request) -> list[str]:
    """The keys stored with exactly this request's fingerprint."""
    return [m.key for m in mw.filter.index.query(int(request.meta["simhash"]["fingerprint"], 16), 0)]


def stats(mw: SimhashDownloaderMiddleware) -> dict[str, Any]:
    return {k: v for k, v in mw.filter.stats.get_stats().items() if k.startswith("simhash/")}


@contextmanager
def frozen(server: RedisServer, seconds: float | None = None) -> Iterator[None]:
    """The server stopped (SIGSTOP); resumed after *seconds* by a timer, else on exit (and on exit anyway)."""
    assert server.process is not None
    pid = server.process.pid
    os.kill(pid, signal.SIGSTOP)
    resume = threading.Timer(seconds, os.kill, (pid, signal.SIGCONT)) if seconds is not None else None
    try:
        if resume is not None:
            resume.start()
        yield
        if resume is not None:
            resume.join()
    finally:
        if resume is not None:
            resume.cancel()
        os.kill(pid, signal.SIGCONT)


def test_a_retry_that_finds_the_pages_own_timed_out_write_keeps_the_page(
    own_redis_server: RedisServer, redis_prefix: str
) -> None:
    """A retry that finds the page's own timed-out write keeps it (not a duplicate of itself), stored once."""
    url = "http://a.test/rain"
    with middleware(own_redis_server, redis_prefix, SIMHASH_INDEX_RETRY_SECONDS=10) as mw:
        with frozen(own_redis_server, 3.0):
            request, response = respond(mw, url, ARTICLE)
        meta = request.meta["simhash"]
        assert meta["status"] == "ok"
        assert meta["duplicate_of"] is None and meta["distance"] is None, meta
        assert isinstance(response, HtmlResponse)
        s = stats(mw)
        assert s["simhash/index_retries"] >= 1 and s["simhash/index_retry_own_entry"] == 1
        assert s["simhash/kept"] == 1 and "simhash/unchanged" not in s and "simhash/near_duplicates" not in s
        assert stored_keys(mw, request) == [url]
        _, dropped = respond(mw, "http://b.test/copy", COPY)
        assert isinstance(dropped, NearDuplicateResponse) and dropped.duplicate_of == url


def test_a_late_add_of_a_page_whose_timed_out_check_ran_anyway_stores_it_once(
    own_redis_server: RedisServer, redis_prefix: str
) -> None:
    """A page let through while the server hung, stored when it woke up, is not added again by the late add."""
    url = "http://a.test/rain"
    with middleware(own_redis_server, redis_prefix) as mw:
        with frozen(own_redis_server):
            request, response = respond(mw, url, ARTICLE)
        assert request.meta["simhash"]["status"] == "index_error" and isinstance(response, HtmlResponse)
        deadline = time.monotonic() + 5
        while not stored_keys(mw, request):  # the timed-out call runs when the server wakes up
            assert time.monotonic() < deadline, "the frozen call's script did not run on the server"
            time.sleep(0.02)
        assert stored_keys(mw, request) == [url]
        # The index answers: the late add happens with the next page's check.  (That check may still time out
        # on a loaded machine, the woken server busy; it is then tried again rather than let through.)
        mw.filter.guard.retry_seconds = 10.0
        other, _ = respond(mw, "http://a.test/light", OTHER)
        assert other.meta["simhash"]["status"] == "ok" and other.meta["simhash"]["duplicate_of"] is None
        assert stored_keys(mw, request) == [url]
        assert "simhash/index_added_late" not in stats(mw) and len(mw.filter.index) == 2
        respond(mw, "http://a.test/third", OTHER.replace(b"<p>", b"<p>Third. ", 1))  # nothing is left to add late
        assert "simhash/index_added_late" not in stats(mw)
        _, dropped = respond(mw, "http://b.test/copy", COPY)
        assert isinstance(dropped, NearDuplicateResponse) and dropped.duplicate_of == url
