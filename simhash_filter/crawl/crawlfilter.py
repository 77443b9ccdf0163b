"""The near-duplicate filter of one Scrapy crawl, shared by the downloader middleware, the spider
middleware and the item pipeline (one :class:`CrawlFilter` per crawler).

A page (a response, or an item's own fields) is fingerprinted, in the reactor thread, in worker
threads (``SIMHASH_THREADS``) or in worker processes (``SIMHASH_PROCESSES``), then checked and added in
the index in the reactor thread (:meth:`NearDuplicateIndex.check_and_add` is atomic), in the order the
pages arrived whatever order the workers finish them in: the outcome is a :class:`Decision`.  Nothing
here raises into the crawl: a page that cannot be fingerprinted or checked is counted under
``simhash/skipped/<reason>``, logged once, and let through.

:class:`CrawlFilter` wires the parts of the filter together, each with one job: the options read from the
settings (:mod:`.options`), which pages are checked and why not (:mod:`.policy`), where they are
fingerprinted (:mod:`.executor`), the index calls and the decisions they make (:mod:`.guard`), the counts
(:mod:`.stats`), the log lines (:mod:`.report`) and the decisions handed to the items (:mod:`.decision`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary, WeakSet

import scrapy
from scrapy import signals
from scrapy.exceptions import CloseSpider, NotConfigured

from simhash_filter.config import FilterConfig
from simhash_filter.crawl import settings as defaults
from simhash_filter.crawl.avoid import Avoider
from simhash_filter.crawl.decision import (
    AFTER_STOP,
    DONT_META_KEY,
    ERROR,
    INDEX_ERROR,
    META_KEY,
    WORKER_DIED,
    Decision,
    ItemDecisions,
)
from simhash_filter.crawl.executor import FingerprintExecutor, WorkerDied
from simhash_filter.crawl.guard import IndexGuard, is_full
from simhash_filter.crawl.inspection import Inspection, inspection, readonly_uri
from simhash_filter.crawl.options import (
    ACTIONS,
    ON_INDEX_ERROR,
    avoid_options,
    backend_uri,
    check_options,
    filter_config,
    processes_setting,
)
from simhash_filter.crawl.policy import Policy
from simhash_filter.crawl.report import Report, logger, report_command
from simhash_filter.crawl.stats import stats_keys
from simhash_filter.crawl.waiting import InOrder
from simhash_filter.index.backends import error_message, open_errors, redact_uri, uri_scheme
from simhash_filter.index.nearduplicate import open_index

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

__all__ = [
    "ACTIONS",
    "AFTER_STOP",
    "DONT_META_KEY",
    "ERROR",
    "INDEX_ERROR",
    "META_KEY",
    "WORKER_DIED",
    "CrawlFilter",
    "Decision",
    "backend_uri",
    "filter_config",
]

#: The close reason of a crawl whose filter could not start (``finish_reason`` in the stats).
START_FAILED = "simhash_start_failed"
#: The close reason of a crawl stopped by a failed index check (``SIMHASH_ON_INDEX_ERROR = "stop"``).
INDEX_ERROR_STOP = "simhash_index_error"
#: The close reasons of a crawl that failed: ``scrapy crawl`` exits with status 1 (:func:`_mark_failed`).
FAILED_REASONS = frozenset({START_FAILED, INDEX_ERROR_STOP})
#: Scrapy 2.18 closes a spider whose ``spider_opened`` handler raises ``CloseSpider``, before it crawls.
CLOSE_AT_START = scrapy.version_info >= (2, 18)

#: One filter per crawler (weak keys: a finished crawler takes its filter with it).
_FILTERS: WeakKeyDictionary[Crawler, CrawlFilter] = WeakKeyDictionary()
#: Crawlers whose filter could not start (reported once; their spider is closed when it opens).
_FAILED: WeakSet[Crawler] = WeakSet()
#: Crawlers of an inspection command that checks no page (said once; the components step aside).
_UNCHECKED: WeakSet[Crawler] = WeakSet()


def _start_error(exc: BaseException) -> str:
    """What stopped the filter, on one line: ``SIMHASH_BACKEND=<uri, secrets masked>: <reason>`` when the
    index could not be opened, else the reason (which names its setting)."""
    uri = getattr(exc, "simhash_backend", None)
    if uri is None:
        return error_message(exc)
    return f"SIMHASH_BACKEND={redact_uri(uri)}: {error_message(exc, uri)}"


def _close_at_start(spider: Any) -> None:
    """``spider_opened`` handler of a crawl whose filter could not start: close the spider before it crawls
    (a crawl must not run unfiltered when a filter was configured)."""
    # Connected now, after every component's own handlers: the last one to run when the spider closes.
    spider.crawler.signals.connect(_mark_failed, signal=signals.spider_closed)
    raise CloseSpider(START_FAILED)


def _mark_failed(spider: Any, reason: str) -> None:
    """``spider_closed`` handler of a crawl whose filter could not start, or that a failed index check stopped
    (:data:`FAILED_REASONS`): the crawl counts as one that failed, so ``scrapy crawl`` (and ``runspider``, and a
    script that reads ``bootstrap_failed``) exits 1.

    Scrapy's crawler runners judge a crawl by its crawler's spider (``bootstrap_failed`` is set when the
    crawler has none once the crawl is over), whatever its close reason; the spider is closed by now and nothing
    after this handler (connected last) uses it."""
    if reason in FAILED_REASONS:
        spider.crawler.spider = None


def _close_spider(crawler: Crawler, reason: str) -> None:
    """Close the crawler's spider with ``reason`` (as Scrapy's CloseSpider extension does), from the reactor."""
    from scrapy.utils.defer import deferred_from_coro

    deferred_from_coro(crawler.engine.close_spider_async(reason=reason))


def _stop_failed(crawler: Crawler, reason: str) -> None:
    """Close the crawler's spider with ``reason``, a failure: ``scrapy crawl`` exits 1 (:func:`_mark_failed`,
    connected now: after every component's own ``spider_closed`` handler)."""
    crawler.signals.connect(_mark_failed, signal=signals.spider_closed)
    _close_spider(crawler, reason)


def _stop_at_start(crawler: Crawler, exc: BaseException) -> bool:
    """Log why the filter cannot start, in one line; arrange for the spider to be closed when it opens.

    False when this Scrapy cannot close a spider at start (before 2.18): the caller raises the error, which
    stops the crawl with a traceback.
    """
    logger.error("simhash filter cannot start, the crawl stops: %s", _start_error(exc), extra={"crawler": crawler})
    if not CLOSE_AT_START:
        return False
    _FAILED.add(crawler)
    crawler.signals.connect(_close_at_start, signal=signals.spider_opened)
    return True


class CrawlFilter:
    """The near-duplicate filter of one crawl: its policy, its fingerprinting executor, its index guard, its
    report and its decisions for items, wired together."""

    def __init__(
        self,
        config: FilterConfig,
        *,
        stats: StatsCollector,
        action: str = defaults.SIMHASH_ACTION,
        backend: str = "memory://",
        backends: dict[str, Any] | None = None,
        item_fields: list[str] | None = None,
        threads: int = defaults.SIMHASH_THREADS,
        processes: int | None = defaults.SIMHASH_PROCESSES,
        debug: bool = defaults.SIMHASH_DEBUG,
        index_retry_seconds: float = defaults.SIMHASH_INDEX_RETRY_SECONDS,
        avoid: dict[str, Any] | None = None,
        on_index_error: str = defaults.SIMHASH_ON_INDEX_ERROR,
        readonly: bool = False,
    ) -> None:
        processes = check_options(action, threads, processes, index_retry_seconds)
        #: Read the index, never write it, and flag rather than drop: an inspection command (:mod:`.inspection`).
        self.readonly = readonly
        if readonly:
            action, avoid = "flag", None  # the page asked for reaches the spider; no rule learned nor request avoided
        if on_index_error not in ON_INDEX_ERROR:
            raise ValueError(f"SIMHASH_ON_INDEX_ERROR must be 'pass' or 'stop', got {on_index_error!r}")
        self.on_index_error = on_index_error
        #: Closes the spider with a reason (set by :meth:`for_crawler`; None outside a crawl).
        self.stop_crawl: Callable[[str], None] | None = None
        self.index_retry_seconds = float(index_retry_seconds)
        self.config = config
        self.action = action
        self.threads = threads
        self.processes = processes
        self.debug = debug
        self.stats = stats
        self.policy = Policy(item_fields)
        self.report = Report(stats, action=action, debug=debug)
        self.index = open_index(config, backend, backends)
        self.backend_uri = backend
        self.executor = FingerprintExecutor(config.fingerprint, self.report, threads=threads, processes=processes)
        self.guard = IndexGuard(self.index, self.report, retry_seconds=self.index_retry_seconds, readonly=readonly,
                                drop=action == "drop")  # fmt: skip
        #: The URL rules that leave requests unsent (``SIMHASH_AVOID``; None when off).
        self.avoider: Avoider | None = None
        if avoid is not None:
            self.avoider = Avoider(self.index.backend, stats, same_distance=3, distinct_distance=config.max_distance,
                                   **avoid)  # fmt: skip
            self.avoider.load()
        self.items = ItemDecisions()
        self._order = InOrder()
        self.closed = False
        #: The ``simhash/...`` keys set to 0 when the spider opens (:func:`~.stats.stats_keys`; :meth:`for_crawler`).
        self.stats_keys: list[str] = stats_keys()
        #: The ``simhash-filter report`` command for the crawl's feed, named at the end (set by :meth:`for_crawler`).
        self.report_command: str | None = None

    @property
    def item_fields(self) -> list[str]:
        return self.policy.item_fields

    # --- construction ------------------------------------------------------------------------

    @classmethod
    def from_settings(
        cls,
        settings: BaseSettings,
        stats: StatsCollector,
        spider_name: str | None = None,
        *,
        backend: str | None = None,
        readonly: bool = False,
    ) -> CrawlFilter:
        """The filter the settings describe; *backend*: another URI than the settings' (a read-only one)."""
        return cls(
            filter_config(settings),
            stats=stats,
            action=settings.get("SIMHASH_ACTION", defaults.SIMHASH_ACTION),
            backend=backend_uri(settings, spider_name) if backend is None else backend,
            backends=settings.getdict("SIMHASH_BACKENDS", defaults.SIMHASH_BACKENDS),
            item_fields=settings.getlist("SIMHASH_ITEM_FIELDS", defaults.SIMHASH_ITEM_FIELDS),
            threads=settings.getint("SIMHASH_THREADS", defaults.SIMHASH_THREADS),
            processes=processes_setting(settings),
            debug=settings.getbool("SIMHASH_DEBUG", defaults.SIMHASH_DEBUG),
            index_retry_seconds=settings.getfloat("SIMHASH_INDEX_RETRY_SECONDS", defaults.SIMHASH_INDEX_RETRY_SECONDS),
            avoid=avoid_options(settings),
            on_index_error=settings.get("SIMHASH_ON_INDEX_ERROR", defaults.SIMHASH_ON_INDEX_ERROR),
            readonly=readonly,
        )

    @classmethod
    def _for_inspection(cls, crawler: Crawler, spider_name: str | None, inspecting: Inspection) -> CrawlFilter | None:
        """The filter of an inspection command: reading the crawl's index without a lock, or None when no page is
        checked (``SIMHASH_INSPECT = "skip"``, an index that cannot be opened read-only or read at all), which one
        INFO line says.  A missing index is not created: the pages are checked against an empty one."""
        settings, stats = crawler.settings, crawler.stats
        assert stats is not None
        crawl_uri = backend_uri(settings, spider_name)  # once: the default path may move an index of the old one
        uri = None if inspecting.mode == "skip" else readonly_uri(crawl_uri)
        why: str | None = None
        found: CrawlFilter | None = None
        if uri is None:
            scheme = uri_scheme(crawl_uri)
            why = None if inspecting.mode == "skip" else f"a {scheme}:// index cannot be opened read-only"
        else:
            try:
                try:
                    found = cls.from_settings(settings, stats, spider_name, backend=uri, readonly=True)
                except FileNotFoundError:  # no index there yet: nothing to check against, and none is created
                    found = cls.from_settings(settings, stats, spider_name, backend="memory://", readonly=True)
            except open_errors() as exc:
                if getattr(exc, "simhash_backend", None) is None:
                    raise  # a wrong setting: it stops the command as it stops a crawl
                why = f"the index cannot be read: {_start_error(exc)}"
        logger.info(inspecting.message(why if found is None else None), extra={"crawler": crawler})
        return found

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> CrawlFilter:
        """The crawler's filter, created by the first component that asks for it.

        Raises ``NotConfigured`` when ``SIMHASH_ENABLED`` is False.  A filter that cannot start (a bad
        setting or URI; an index that is locked, damaged, of another model or unreachable) stops the crawl:
        while Scrapy starts a crawl, one ERROR line says why (``SIMHASH_BACKEND``, the URI with its secrets
        masked, the reason), the components step aside with a silent ``NotConfigured`` and the spider is
        closed as soon as it opens, before any request (``finish_reason`` ``simhash_start_failed``).
        Components built outside a crawl get the error itself.
        """
        if not crawler.settings.getbool("SIMHASH_ENABLED", defaults.SIMHASH_ENABLED):
            raise NotConfigured("SIMHASH_ENABLED is False")
        found = _FILTERS.get(crawler)
        if found is None:
            if crawler in _FAILED:
                raise NotConfigured  # reported once; the spider is closed when it opens
            if crawler in _UNCHECKED:
                raise NotConfigured  # an inspection that checks nothing (said once)
            assert crawler.stats is not None
            spider_name = getattr(crawler.spider, "name", None) or getattr(crawler.spidercls, "name", None)
            try:
                found = cls._create(crawler, spider_name)
            except open_errors() as exc:
                if not crawler.crawling or not _stop_at_start(crawler, exc):
                    raise
                raise NotConfigured from exc
            if found is None:
                _UNCHECKED.add(crawler)
                raise NotConfigured
            _FILTERS[crawler] = found
            found.report_command = report_command(crawler.settings.getdict("FEEDS"), spider_name, found.action)
            if found.avoider is not None:
                found.avoider.requeue = lambda request: crawler.engine.crawl(request)
            found.stop_crawl = lambda reason: _stop_failed(crawler, reason)
            crawler.signals.connect(found.spider_opened, signal=signals.spider_opened)
            crawler.signals.connect(found.spider_closed, signal=signals.spider_closed)
            for signal in (signals.item_scraped, signals.item_dropped, signals.item_error):
                crawler.signals.connect(found.items.item_done, signal=signal)
            logger.info(
                "simhash filter: action=%s, k=%d, backend=%s, model %s, %s",
                found.action,
                found.config.max_distance,
                redact_uri(found.backend_uri),
                found.config.fingerprint.model_id(),
                f"fingerprinting {found.executor.where(planned=True)}",
                extra={"crawler": crawler},
            )
            found.report.index_opened(found.index_where, uri_scheme(found.backend_uri), len(found.index),
                                      found.guard.rows())  # fmt: skip
            found.stats_keys = stats_keys(avoid=found.avoider is not None, warc=found.writes_warc(crawler.settings))
        return found

    @classmethod
    def _create(cls, crawler: Crawler, spider_name: str | None) -> CrawlFilter | None:
        """The crawler's filter: a crawl's, or an inspection command's (None: it checks no page)."""
        assert crawler.stats is not None
        inspecting = inspection(crawler.settings)
        if inspecting is not None:
            return cls._for_inspection(crawler, spider_name, inspecting)
        return cls.from_settings(crawler.settings, crawler.stats, spider_name)

    def writes_warc(self, settings: BaseSettings) -> bool:
        """Whether the crawl writes ``SIMHASH_WARC``: never an inspection (the crawl's WARC holds the crawl)."""
        return bool(settings.get("SIMHASH_WARC")) and not self.readonly

    # --- checking pages -----------------------------------------------------------------------

    async def check_response(self, request: Request, response: Response) -> Decision | None:
        """Fingerprint an HTML response and check-and-add it; ``None`` if the request is exempt."""
        url = response.url
        skip = self.policy.skip(request, response)
        if skip is not None:
            if skip.reason == DONT_META_KEY:
                self.report.skip(url, DONT_META_KEY)  # counted, not logged nor remembered
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
                return self._skip(url, WORKER_DIED, exc_info=exc)
            except Exception:
                return self._skip(url, ERROR, exc_info=True)
            if charset_error:
                message = f"bytes invalid in the page's charset ({fp.encoding}); fingerprinted as decoded"
                self.report.count_once("simhash/charset_errors", url, message)
            if not fp.ok or fp.value is None:
                return self._skip(url, str(fp.status), work=work)
            if fp.truncated:
                message = "a huge page; fingerprinted its beginning only (work caps)"
                self.report.count_once("simhash/truncated", url, message)
            await self._order.wait(ticket)
            # Started here (a local index decides at once; a remote one's call is queued in order), awaited
            # below: the next page's turn comes when this one is in the index's queue, not when it has an answer.
            decision = self.guard.check(url, fp.value, fp.sketch, work)
        finally:
            self._order.done(ticket)
        return self._index_checked(await decision)

    def decide(self, url: str, value: int, sketch: bytes | None = None) -> Decision:
        """Check-and-add one fingerprint in the index, once, in this thread; an error lets the page through."""
        return self._index_checked(self.guard.decide(url, value, sketch))

    def _index_checked(self, decision: Decision) -> Decision:
        """Remember a decision of the index; with ``SIMHASH_ON_INDEX_ERROR = "stop"``, a page the index failed to
        check stops the crawl (it goes through unchecked itself, counted), and the index is called no more: the
        pages after it go through at once (``simhash/skipped/after_stop``) while the spider closes."""
        if decision.status == INDEX_ERROR and self.on_index_error == "stop" and self.stop_crawl is not None:
            stop, self.stop_crawl = self.stop_crawl, None  # once
            logger.error("simhash: the index failed and SIMHASH_ON_INDEX_ERROR is 'stop': the crawl stops (%s); "
                         "the pages after it go through without calling the index (simhash/skipped/%s)",
                         INDEX_ERROR_STOP, AFTER_STOP)  # fmt: skip
            self.guard.stop()
            stop(INDEX_ERROR_STOP)
        return self.items.remember(decision)

    def _skip(self, url: str, reason: str, **kwargs: Any) -> Decision:
        """A page let through unchecked: counted, logged once, remembered for its items."""
        return self.items.remember(self.report.skip(url, reason, **kwargs))

    def start_workers(self) -> None:
        """Start the worker processes (``SIMHASH_PROCESSES``) without waiting for them: pages are
        fingerprinted in the reactor thread until one of them is ready (about 0.3 s).  Called when the spider
        opens; a filter used outside a crawl fingerprints in the reactor thread unless this is called."""
        if not self.closed:
            self.executor.start()

    # --- decisions for items, stats and logging -------------------------------------------------

    def remember_item(self, item: Any, decision: Decision) -> None:
        """Attach the decision of the response that produced ``item`` (for the pipeline)."""
        self.items.remember_item(item, decision)

    def decision_for(self, item: Any) -> Decision | None:
        """The decision of the response that produced ``item``, else of a recent page at its ``url``."""
        return self.items.decision_for(item)

    @property
    def index_where(self) -> str:
        """Where the index is, fit to show: its URI with secrets masked, or its directory."""
        uri = self.backend_uri
        return redact_uri(uri) if "://" in uri else os.path.abspath(uri)

    def closing_index_size(self) -> int | str:
        """The index's size at the end of the crawl, or why it is unknown, in words fit for the summary (no
        credentials).  An index whose last call failed (the crawl stopped on it, or Redis went away) is not read:
        each read would wait out the client's timeout and its tries again.  Read once otherwise."""
        error = self.guard.last_error
        if error is not None and not is_full(error):  # a full Redis still answers reads
            return f"{self.index_where} did not answer at the last page ({type(error).__name__}); not read again"
        try:
            return len(self.index)
        except Exception as exc:
            if isinstance(exc, OSError) or type(exc).__name__ in ("ConnectionError", "TimeoutError"):
                return f"{self.index_where} did not answer ({type(exc).__name__})"
            return error_message(exc, self.backend_uri)[:300]

    def summary(self, index_size: int | str | None = None) -> str:
        """One line: what the filter did in this crawl (*index_size*: read now if not given)."""
        size = self.closing_index_size() if index_size is None else index_size
        return self.report.summary(size, self.executor.where())

    # --- the crawl's signals ------------------------------------------------------------------

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
