"""The near-duplicate filter of one Scrapy crawl (one :class:`CrawlFilter` per crawler, held by
:class:`SimhashExtension`), shared by the middlewares and the pipeline.  Nothing here raises into the crawl: a page
that cannot be fingerprinted or checked is counted under ``simhash/skipped/<reason>``, logged once, and let through.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import scrapy
from scrapy import signals
from scrapy.exceptions import CloseSpider, NotConfigured

from simhash_filter.crawl.avoid import Avoider
from simhash_filter.crawl.decision import Decision, ItemDecisions, SkipReason
from simhash_filter.crawl.executor import FingerprintExecutor, WorkerDied
from simhash_filter.crawl.guard import IndexGuard
from simhash_filter.crawl.inspection import Inspection, inspection, readonly_uri
from simhash_filter.crawl.policy import Policy
from simhash_filter.crawl.report import Report, logger, report_command
from simhash_filter.crawl.settings import SIMHASH_ENABLED, FilterOptions
from simhash_filter.crawl.stats import stats_keys
from simhash_filter.crawl.waiting import InOrder
from simhash_filter.errors import IndexFullError
from simhash_filter.index.backends import error_message, open_errors, redact_uri, uri_scheme
from simhash_filter.index.nearduplicate import open_index

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from scrapy.statscollectors import StatsCollector


__all__ = ["CrawlFilter", "IndexUnavailable", "SimhashExtension"]

#: The close reason of a crawl whose filter could not start (``finish_reason`` in the stats).
START_FAILED = "simhash_start_failed"
#: The close reason of a crawl stopped by a failed index check (``SIMHASH_ON_INDEX_ERROR = "stop"``).
INDEX_ERROR_STOP = "simhash_index_error"
#: The close reasons of a crawl that failed: ``scrapy crawl`` exits with status 1 (:func:`_mark_failed`).
FAILED_REASONS = frozenset({START_FAILED, INDEX_ERROR_STOP})
#: Scrapy 2.18 closes a spider whose ``spider_opened`` handler raises ``CloseSpider``, before it crawls.
CLOSE_AT_START = scrapy.version_info >= (2, 18)


class IndexUnavailable(Exception):
    """The crawl's index cannot be opened: one line names it (``SIMHASH_BACKEND=<uri, secrets masked>``) and says
    why; *error* is the store's own error."""

    def __init__(self, uri: str, error: BaseException) -> None:
        super().__init__(f"SIMHASH_BACKEND={redact_uri(uri)}: {error_message(error, uri)}")
        self.uri = uri
        self.error = error


def _close_at_start(spider: Any) -> None:
    """``spider_opened`` handler of a crawl whose filter could not start: close the spider before it crawls."""
    spider.crawler.signals.connect(_mark_failed, signal=signals.spider_closed)
    raise CloseSpider(START_FAILED)


def _mark_failed(spider: Any, reason: str) -> None:
    """``spider_closed`` handler (connected last) of a crawl closed for one of :data:`FAILED_REASONS`: ``scrapy
    crawl`` exits 1.  Scrapy has no public way to fail a crawl that ran: its runners set ``bootstrap_failed`` when
    the crawler has no spider at the end (tests/test_crawl.py's exit status tests fail if Scrapy changes this)."""
    if reason in FAILED_REASONS:
        spider.crawler.spider = None


def _stop_failed(crawler: Crawler, reason: str) -> None:
    """Close the crawler's spider with ``reason``, a failure: ``scrapy crawl`` exits 1 (:func:`_mark_failed`)."""
    from scrapy.utils.defer import deferred_from_coro

    crawler.signals.connect(_mark_failed, signal=signals.spider_closed)
    assert crawler.engine is not None
    deferred_from_coro(crawler.engine.close_spider_async(reason=reason))


def stop_at_start(crawler: Crawler, exc: BaseException) -> None:
    """A part of the filter cannot start: in a crawl, log why in one line and close the spider as soon as it opens
    (the caller then steps aside with ``NotConfigured``); else (or before Scrapy 2.18) raise *exc*."""
    if not crawler.crawling or not CLOSE_AT_START:
        raise exc
    logger.error("simhash filter cannot start, the crawl stops: %s", error_message(exc), extra={"crawler": crawler})
    crawler.signals.connect(_close_at_start, signal=signals.spider_opened)


class SimhashExtension:
    """The crawl's filter, held by its crawler as an extension (``crawler.get_extension``), made before the
    components that share it (:meth:`CrawlFilter.for_crawler`).  Enabled by :class:`~simhash_filter.SimhashAddon`."""

    def __init__(self, crawler: Crawler) -> None:
        #: None when it could not start or an inspection command checks no page (said once).
        self.filter: CrawlFilter | None = None
        start_errors: tuple[type[BaseException], ...] = (IndexUnavailable, *open_errors())
        try:
            self.filter = CrawlFilter.start(crawler)
        except start_errors as exc:  # a bad setting, an index that cannot be opened
            stop_at_start(crawler, exc)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SimhashExtension:
        if not crawler.settings.getbool("SIMHASH_ENABLED", SIMHASH_ENABLED):
            raise NotConfigured
        return cls(crawler)


class CrawlFilter:
    """The near-duplicate filter of one crawl: its policy, executor, index guard, report and item decisions."""

    def __init__(self, options: FilterOptions, stats: StatsCollector) -> None:
        self.options = options
        #: Closes the spider with a reason (set by :meth:`start`; None outside a crawl).
        self.stop_crawl: Callable[[str], None] | None = None
        self.stats = stats
        self.policy = Policy(options.item_fields)
        self.report = Report(stats, action=options.action, debug=options.debug)
        try:
            self.index = open_index(options.config, options.backend, options.backends)
        except open_errors() as exc:
            raise IndexUnavailable(options.backend, exc) from exc
        self.executor = FingerprintExecutor(options.config.fingerprint, self.report, threads=options.threads,
                                            processes=options.worker_processes)  # fmt: skip
        self.guard = IndexGuard(self.index, self.report, retry_seconds=options.index_retry_seconds,
                                readonly=options.readonly, drop=options.action == "drop")  # fmt: skip
        #: The URL rules that leave requests unsent (``SIMHASH_AVOID``; None when off).
        self.avoider: Avoider | None = None
        if options.avoid is not None:
            self.avoider = Avoider(self.index.backend, self.report.count, options.avoid, same_distance=3,
                                   distinct_distance=options.config.max_distance)  # fmt: skip
            self.avoider.load()
        self.items = ItemDecisions()
        self._order = InOrder()
        self.closed = False
        #: The ``simhash/...`` keys set to 0 when the spider opens (:func:`~.stats.stats_keys`; :meth:`start`).
        self.stats_keys: list[str] = stats_keys()
        #: The ``simhash-filter report`` command for the crawl's feed, named at the end (set by :meth:`start`).
        self.report_command: str | None = None

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> CrawlFilter:
        """The crawler's filter, held by its :class:`SimhashExtension`, for a component that shares it.  Raises
        ``NotConfigured`` when it is disabled, not enabled, could not start or checks no page (inspection)."""
        if not crawler.settings.getbool("SIMHASH_ENABLED", SIMHASH_ENABLED):
            raise NotConfigured("SIMHASH_ENABLED is False")
        held = crawler.get_extension(SimhashExtension)
        if held is None:
            raise NotConfigured(
                "the simhash filter's extension is not enabled: add ADDONS = {'simhash_filter.SimhashAddon': 0}, or "
                "EXTENSIONS = {'simhash_filter.SimhashExtension': 0} beside the components listed by hand"
            )
        if held.filter is None:
            raise NotConfigured
        return held.filter

    @classmethod
    def start(cls, crawler: Crawler) -> CrawlFilter | None:
        """The crawler's filter, connected to its signals and logged (None: an inspection command checks no page).
        Raises what stops it (a bad setting, :class:`IndexUnavailable`)."""
        assert crawler.stats is not None
        spider_name = getattr(crawler.spider, "name", None) or getattr(crawler.spidercls, "name", None)
        options = FilterOptions.from_settings(crawler.settings, spider_name)
        inspecting = inspection(crawler.settings)
        if inspecting is None:
            found: CrawlFilter | None = cls(options, crawler.stats)
        else:
            found = cls._for_inspection(crawler, options, inspecting)
        if found is None:
            return None
        found.report_command = report_command(crawler.settings.getdict("FEEDS"), spider_name, options.action)
        if found.avoider is not None:
            found.avoider.requeue = lambda request: _engine(crawler).crawl(request)
        found.stop_crawl = lambda reason: _stop_failed(crawler, reason)
        crawler.signals.connect(found.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(found.spider_closed, signal=signals.spider_closed)
        for signal in (signals.item_scraped, signals.item_dropped, signals.item_error):
            crawler.signals.connect(found.items.item_done, signal=signal)
        logger.info(
            "simhash filter: action=%s, k=%d, backend=%s, model %s, %s",
            options.action,
            options.config.max_distance,
            redact_uri(options.backend),
            options.config.fingerprint.model_id(),
            f"fingerprinting {found.executor.where(planned=True)}",
            extra={"crawler": crawler},
        )
        found.report.index_opened(found.index_where, uri_scheme(options.backend), len(found.index),
                                  found.guard.rows())  # fmt: skip
        # an inspection command writes no SIMHASH_WARC (the crawl's WARC holds the crawl)
        warc = bool(crawler.settings.get("SIMHASH_WARC")) and not found.options.readonly
        found.stats_keys = stats_keys(avoid=found.avoider is not None, warc=warc)
        return found

    @classmethod
    def _for_inspection(cls, crawler: Crawler, options: FilterOptions, inspecting: Inspection) -> CrawlFilter | None:
        """The filter of an inspection command, reading the crawl's index without a lock (a missing one is not
        created: an empty one instead), or None when no page is checked (said in one INFO line)."""
        assert crawler.stats is not None
        uri = None if inspecting.mode == "skip" else readonly_uri(options.backend)
        why: str | None = None
        found: CrawlFilter | None = None
        if uri is None:
            scheme = uri_scheme(options.backend)
            why = None if inspecting.mode == "skip" else f"a {scheme}:// index cannot be opened read-only"
        else:
            try:
                try:
                    found = cls(options.read_only(uri), crawler.stats)
                except IndexUnavailable as exc:
                    if not isinstance(exc.error, FileNotFoundError):
                        raise
                    found = cls(options.read_only("memory://"), crawler.stats)
            except IndexUnavailable as exc:
                why = f"the index cannot be read: {exc}"
        logger.info(inspecting.message(why if found is None else None), extra={"crawler": crawler})
        return found

    async def check_response(self, request: Request, response: Response) -> Decision | None:
        """Fingerprint an HTML response and check-and-add it; ``None`` if the request is exempt."""
        url = response.url
        skip = self.policy.skip(request, response)
        if skip is not None:
            if skip.reason is SkipReason.DONT_SIMHASH:
                self.report.skip(url, skip.reason)  # counted, not logged nor remembered
                return None
            return self._skip(url, skip.reason, level=skip.level)
        if "dataloss" in response.flags:
            message = "download cut short (dataloss); fingerprinting what arrived"
            self.report.count_once("simhash/dataloss", url, message)
        return await self._check(url, response.body, self.policy.encoding(response))

    async def check_item(self, item: Any) -> Decision | None:
        """Fingerprint an item's ``SIMHASH_ITEM_FIELDS`` and check-and-add it; ``None`` if it has none."""
        page = self.policy.item_page(item)
        if page is None:
            return None
        url, document = page
        return await self._check(url, document, None)

    async def _check(self, url: str, body: bytes | str, encoding: str | None) -> Decision:
        ticket = self._order.ticket()
        try:
            try:
                fp, work, charset_error = await self.executor.fingerprint(body, encoding)
            except WorkerDied as exc:
                return self._skip(url, SkipReason.WORKER_DIED, exc_info=exc)
            except Exception:
                return self._skip(url, SkipReason.ERROR, exc_info=True)
            if charset_error:
                message = f"bytes invalid in the page's charset ({fp.encoding}); fingerprinted as decoded"
                self.report.count_once("simhash/charset_errors", url, message)
            if not fp.ok or fp.value is None:
                return self._skip(url, SkipReason(fp.status.value), work=work)
            if fp.truncated:
                message = "a huge page; fingerprinted its beginning only (work caps)"
                self.report.count_once("simhash/truncated", url, message)
            await self._order.wait(ticket)
            # started in order, awaited below: the next page's turn comes when this one's call is queued
            decision = self.guard.check(url, fp.value, fp.sketch, work)
        finally:
            self._order.done(ticket)
        return self._index_checked(await decision)

    def decide(self, url: str, value: int, sketch: bytes | None = None) -> Decision:
        """Check-and-add one fingerprint in the index, once, in this thread; an error lets the page through."""
        return self._index_checked(self.guard.decide(url, value, sketch))

    def _index_checked(self, decision: Decision) -> Decision:
        """Remember a decision of the index; with ``SIMHASH_ON_INDEX_ERROR = "stop"``, a failed check stops the
        crawl and the index is called no more (``simhash/skipped/after_stop``)."""
        stop = self.stop_crawl if self.options.on_index_error == "stop" else None
        if decision.status == SkipReason.INDEX_ERROR and stop is not None:
            self.stop_crawl = None  # once
            logger.error("simhash: the index failed and SIMHASH_ON_INDEX_ERROR is 'stop': the crawl stops (%s); "
                         "the pages after it go through without calling the index (simhash/skipped/%s)",
                         INDEX_ERROR_STOP, SkipReason.AFTER_STOP)  # fmt: skip
            self.guard.stop()
            stop(INDEX_ERROR_STOP)
        return self.items.remember(decision)

    def _skip(self, url: str, reason: SkipReason, **kwargs: Any) -> Decision:
        """A page let through unchecked: counted, logged once, remembered for its items."""
        return self.items.remember(self.report.skip(url, reason, **kwargs))

    def start_workers(self) -> None:
        """Start the worker processes (``SIMHASH_PROCESSES``) without waiting for them (called when the spider
        opens; a filter used outside a crawl fingerprints in the reactor thread unless this is called)."""
        if not self.closed:
            self.executor.start()

    @property
    def index_where(self) -> str:
        """Where the index is, fit to show: its URI with secrets masked, or its directory."""
        uri = self.options.backend
        return redact_uri(uri) if "://" in uri else os.path.abspath(uri)

    def closing_index_size(self) -> int | str:
        """The index's size at the end of the crawl, or why it is unknown (no credentials); an index whose last
        call failed is not read (each read would wait out the client's timeout again)."""
        error = self.guard.last_error
        if error is not None and not isinstance(error, IndexFullError):  # a full Redis still answers reads
            return f"{self.index_where} did not answer at the last page ({type(error).__name__}); not read again"
        try:
            return len(self.index)
        except Exception as exc:  # the summary is written all the same: it is the crawl's record
            why = f"{type(exc).__name__}: {error_message(exc, self.options.backend)}"
            return f"{self.index_where} did not answer ({why})"[:300]

    def summary(self, index_size: int | str | None = None) -> str:
        """One line: what the filter did in this crawl (*index_size*: read now if not given)."""
        size = self.closing_index_size() if index_size is None else index_size
        return self.report.summary(size, self.executor.where())

    def spider_opened(self, spider: Any) -> None:
        self.report.count.start(self.stats_keys)  # every key a monitor reads is there from now on
        self.start_workers()

    def spider_closed(self, spider: Any, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        size = self.closing_index_size()  # kept current all along (a close monitor read it); read once more now
        if isinstance(size, int):
            self.report.count.index_size(size)
        logger.info(self.summary(size), extra={"spider": spider})
        if self.report_command is not None:
            logger.info("simhash: to see what the filter did: %s", self.report_command, extra={"spider": spider})
        if self.avoider is not None:
            self.avoider.close_sync()
        self.executor.close()
        self.guard.close()
        self.items.clear()


def _engine(crawler: Crawler) -> Any:
    """The crawler's engine (there once the crawl runs)."""
    assert crawler.engine is not None
    return crawler.engine
