"""Downloader middlewares that make a test crawl wait on events, never on a clock.

:class:`TakeTurns`: two crawl processes that share one Redis frontier take turns, so that both take part however the
machine schedules them: each holds the requests its pages led to until the other has received a response, and
neither closes while idle before it has received one of its own (the other may still be fetching the pages that will
fill the queue). Start requests pass: whichever process takes them opens the other's gate. A request waits on an
event in Redis, never on a clock.

The other process can always take a turn: a process holds at most ``CONCURRENT_REQUESTS`` requests, and the test
site's front pages lead to more pages than that.

Enabled in a test crawl with ``DOWNLOADER_MIDDLEWARES={"crawl_gate.TakeTurns": 950}`` (nearest the downloader, so
that a response the filter drops counts too), ``REDIS_URL``, ``TURNS_MINE`` (the key this process sets when it
has received a response) and ``TURNS_OTHER`` (the key it waits for).  ``TURNS_GIVE_UP`` seconds (default 120) only
keeps a broken test from hanging: the process then logs ``take-turns: gave up waiting`` (an error) and goes on.

:class:`WorkersFirst`: a crawl with ``SIMHASH_PROCESSES`` sends no request before a worker process is ready, so
that every page is fingerprinted in the workers (not in the reactor thread while they start), however slowly they
start.
"""

from __future__ import annotations

import logging
import time

import redis
from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider
from scrapy.http import Response
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import task

from simhash_filter.crawl.executor import FingerprintExecutor
from simhash_filter.crawl.middlewares import SimhashDownloaderMiddleware

#: The error a process logs when it went on without its turn, or without the worker processes.
GAVE_UP = "take-turns: gave up waiting"
#: How long a crawl waits for an event before it goes on and fails its test.
GIVE_UP_SECONDS = 120.0
logger = logging.getLogger(__name__)


class TakeTurns:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.client = redis.Redis.from_url(settings["REDIS_URL"])
        self.mine = settings["TURNS_MINE"]
        self.other = settings["TURNS_OTHER"]
        self.deadline = time.monotonic() + settings.getfloat("TURNS_GIVE_UP", GIVE_UP_SECONDS)
        self.gate_open = False
        crawler.signals.connect(self.spider_idle, signal=signals.spider_idle)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> TakeTurns:
        return cls(crawler)

    def _gave_up(self) -> bool:
        if time.monotonic() < self.deadline:
            return False
        logger.error(GAVE_UP)
        return True

    async def process_request(self, request: Request) -> None:
        if self.gate_open or not request.meta.get("depth", 0):
            return
        while not self.client.exists(self.other) and not self._gave_up():
            await _a_moment()
        self.gate_open = True

    def process_response(self, request: Request, response: Response) -> Response:
        if not request.url.endswith("/robots.txt"):
            self.client.set(self.mine, 1)
        return response

    def spider_idle(self) -> None:
        if not self.client.exists(self.mine) and not self._gave_up():
            raise DontCloseSpider


class WorkersFirst:
    """Holds every request until the filter's worker processes are ready (``DOWNLOADER_MIDDLEWARES`` priority
    950, ``SIMHASH_PROCESSES`` > 0)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.deadline = time.monotonic() + GIVE_UP_SECONDS
        self.gate_open = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> WorkersFirst:
        return cls(crawler)

    def _executor(self) -> FingerprintExecutor:
        assert self.crawler.engine is not None
        for middleware in self.crawler.engine.downloader.middleware.middlewares:
            if isinstance(middleware, SimhashDownloaderMiddleware):
                return middleware.filter.executor
        raise LookupError("the simhash downloader middleware is not enabled")

    async def process_request(self, request: Request) -> None:
        if self.gate_open:
            return
        executor = self._executor()
        while not executor.workers_ready:
            if time.monotonic() > self.deadline:
                logger.error(GAVE_UP)
                break
            await _a_moment()
        self.gate_open = True


async def _a_moment() -> None:
    from twisted.internet import reactor  # the crawl's reactor: importing it at the top would install the default

    await maybe_deferred_to_future(task.deferLater(reactor, 0.05, lambda: None))
