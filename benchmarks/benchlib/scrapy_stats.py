"""The Scrapy extension of the benchmarks' crawls, loaded in the ``scrapy crawl`` subprocess
(``EXTENSIONS={"benchmarks.benchlib.scrapy_stats.BenchStats": 0}``, see :func:`benchlib.crawl.crawl_site`).

:class:`BenchStats` writes the crawl's stats as JSON to the file the ``BENCH_STATS`` setting names when the
engine stops, with the reactor's worst stall (a 10 ms ``LoopingCall`` measures how late it runs);
:class:`BenchCpu` adds the crawl process's CPU time while it crawls (spider opened to engine stopped) and in all.
:class:`ResponseTimes` adds the time of every response.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from scrapy import signals
from twisted.internet import task

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class BenchStats:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.last = 0.0
        self.worst = 0.0
        self.loop = task.LoopingCall(self.tick)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BenchStats:
        ext = cls(crawler)
        crawler.signals.connect(ext.opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.stopped, signal=signals.engine_stopped)
        return ext

    def opened(self, spider: Any) -> None:
        self.last = time.perf_counter()
        self.loop.start(0.01, now=False)

    def tick(self) -> None:
        now = time.perf_counter()
        self.worst = max(self.worst, now - self.last - 0.01)
        self.last = now

    def stopped(self) -> None:
        if self.loop.running:
            self.loop.stop()
        stats = dict(self.crawler.stats.get_stats())
        stats["bench/worst_stall_seconds"] = self.worst
        with open(self.crawler.settings["BENCH_STATS"], "w") as f:
            json.dump(stats, f, default=str)


class BenchCpu(BenchStats):
    def opened(self, spider: Any) -> None:
        self.cpu = time.process_time()
        super().opened(spider)

    def stopped(self) -> None:
        self.crawler.stats.set_value("bench/crawl_cpu_seconds", time.process_time() - self.cpu)
        self.crawler.stats.set_value("bench/self_cpu_seconds", time.process_time())  # start-up included
        super().stopped()


class ResponseTimes(BenchStats):
    """Also the time of every response received (``time.perf_counter``, seconds) in ``bench/response_times``:
    the rate at the start of a crawl beside its rate at the end."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ResponseTimes:
        ext = cls(crawler)
        ext.times: list[float] = []
        crawler.signals.connect(ext.opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.stopped, signal=signals.engine_stopped)
        crawler.signals.connect(ext.received, signal=signals.response_received)
        return ext

    def received(self, response: Any, request: Any, spider: Any) -> None:
        self.times.append(time.perf_counter())

    def stopped(self) -> None:
        self.crawler.stats.set_value("bench/response_times", self.times)
        super().stopped()
