"""The near-duplicate filter of one Scrapy crawl, shared by the downloader middleware, the spider
middleware and the item pipeline (one :class:`CrawlFilter` per crawler).

A page (a response, or an item's own fields) is fingerprinted, in the reactor thread, in worker
threads (``SIMHASH_THREADS``) or in worker processes (``SIMHASH_PROCESSES``), then checked and added in
the index in the reactor thread (:meth:`NearDuplicateIndex.check_and_add` is atomic), in the order the
pages arrived whatever order the workers finish them in: the outcome is a :class:`Decision`.  Nothing
here raises into the crawl: a page that cannot be fingerprinted or checked is counted under
``simhash/skipped/<reason>``, logged once, and let through.
"""

from __future__ import annotations

import asyncio
import html
import logging
import os
import re
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from weakref import WeakKeyDictionary, WeakSet

import scrapy
from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.exceptions import CloseSpider, NotConfigured
from scrapy.http import HtmlResponse, Request, Response
from scrapy.utils.asyncio import is_asyncio_available
from scrapy.utils.project import data_path
from w3lib.encoding import http_content_type_encoding

from simhash_filter.config import FilterConfig
from simhash_filter.crawl import settings as defaults
from simhash_filter.crawl.workers import (
    WARM_UP,
    FingerprintJob,
    JobResult,
    WorkerError,
    WorkerLost,
    WorkerPool,
    WorkerProcess,
    from_worker,
)
from simhash_filter.dedup import available_cpus
from simhash_filter.index.backends import error_message, open_backend, open_errors, redact_uri, with_uri_option
from simhash_filter.index.backends.file import parse_age
from simhash_filter.index.nearduplicate import NearDuplicateIndex
from simhash_filter.index.tables import Match, resolve_design
from simhash_filter.model.fingerprint import Fingerprinter, Status

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

__all__ = ["ACTIONS", "META_KEY", "CrawlFilter", "Decision", "backend_uri", "filter_config"]

logger = logging.getLogger(__name__)

#: ``request.meta`` / ``response.meta`` key of the decision (a dict, see :meth:`Decision.to_meta`).
META_KEY = "simhash"
#: ``request.meta`` key that exempts a request from the filter (like ``dont_filter``, ``dont_cache``).
DONT_META_KEY = "dont_simhash"
ACTIONS = ("drop", "flag")
#: Content types fingerprinted when a response declares one.
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
#: Reason of a page whose fingerprinting raised (a bug in the fingerprinter: please report it).
ERROR = "error"
#: Reason of a page whose worker process died twice while fingerprinting it (it was replaced in between).
WORKER_DIED = "worker_died"
#: After this many replacements of dead worker processes, pages are fingerprinted in the reactor thread.
MAX_WORKER_RESTARTS = 10
#: Worker processes that are not ready after this many seconds are given up (they take about 0.3 s).
WORKER_START_SECONDS = 60.0
INDEX_ERROR = "index_error"
#: Decisions remembered by URL for items that reach the pipeline without the spider middleware.
RECENT_URLS = 10_000
#: Waits between retries of a failed index check (seconds; doubled each time up to the maximum).
RETRY_FIRST_DELAY, RETRY_MAX_DELAY = 0.5, 10.0
#: Pages let through unchecked while the index failed, remembered to be added when it answers again, at most.
UNINDEXED_LIMIT = 100_000
#: After an index error, pages do not call the index for this many seconds (they wait or go through).
INDEX_BREAK_SECONDS = 5.0
#: Items waiting for the pipeline with their response's decision, at most.
PENDING_LIMIT = 100_000
#: The index is sized for this many pages (it chooses its table design from it).
EXPECTED_SIZE = 1_000_000
#: The close reason of a crawl whose filter could not start (``finish_reason`` in the stats).
START_FAILED = "simhash_start_failed"
#: Scrapy 2.18 closes a spider whose ``spider_opened`` handler raises ``CloseSpider``, before it crawls.
CLOSE_AT_START = scrapy.version_info >= (2, 18)

_HTML_MARKUP = re.compile(
    r"<\s*(?:!doctype|html|head|body|div|p|br|span|a|article|section|main|h[1-6]|ul|ol|li|table|tr|td)\b", re.I
)
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Decision:
    """What the filter decided about one page.

    ``status`` is ``"ok"`` for a page checked in the index (then ``duplicate_of`` is the URL of the
    kept page it duplicates, or None if it was kept), else why it was let through unchecked
    (``not_html``, ``empty``, ``too_few_features``, ``index_error``, ...).
    """

    url: str
    status: str
    fingerprint: int | None = None
    duplicate_of: str | None = None
    distance: int | None = None
    #: Sketch similarity to the page it duplicates (the verification stage's score).
    similarity: float | None = None

    @property
    def checked(self) -> bool:
        return self.status == Status.OK.value

    @property
    def near_duplicate(self) -> bool:
        return self.duplicate_of is not None

    @property
    def unchanged(self) -> bool:
        """A near-duplicate of itself: the page at this URL was kept before (in an earlier crawl)."""
        return self.duplicate_of is not None and self.duplicate_of == self.url

    @property
    def hex(self) -> str | None:
        return None if self.fingerprint is None else f"{self.fingerprint:016x}"

    def to_meta(self) -> dict[str, Any]:
        """The decision as ``response.meta["simhash"]``: plain values, the dedup command's names."""
        return {
            "status": self.status,
            "fingerprint": self.hex,
            "duplicate_of": self.duplicate_of,
            "distance": self.distance,
            "similarity": None if self.similarity is None else round(self.similarity, 3),
        }

    @classmethod
    def from_meta(cls, url: str, meta: Any) -> Decision | None:
        """The decision stored by :meth:`to_meta`, or None if ``meta`` is not one."""
        if not isinstance(meta, dict) or not isinstance(meta.get("status"), str):
            return None
        fp = meta.get("fingerprint")
        value = int(fp, 16) if isinstance(fp, str) and fp else None
        return cls(url, meta["status"], value, meta.get("duplicate_of"), meta.get("distance"), meta.get("similarity"))


def _own_entry(match: Match | None, value: int, url: str) -> bool:
    """Whether *match* is the entry of this very page: its URL with its fingerprint (distance 0)."""
    return match is not None and match.key == url and match.fingerprint == value and match.distance == 0


def _setting_name(message: str) -> str:
    for name in ("structure_weight", "dom_decay", "max_distance", "min_similarity"):
        message = message.replace(name, f"SIMHASH_{name.upper()}")
    return message


def filter_config(settings: BaseSettings) -> FilterConfig:
    """The :class:`FilterConfig` described by the ``SIMHASH_*`` settings (defaults: ``DEFAULTS``)."""
    try:
        fingerprint = FilterConfig().fingerprint.with_options(
            structure_weight=settings.getfloat("SIMHASH_STRUCTURE_WEIGHT", defaults.SIMHASH_STRUCTURE_WEIGHT),
            dom_decay=settings.getfloat("SIMHASH_DOM_DECAY", defaults.SIMHASH_DOM_DECAY),
        )
        return FilterConfig(
            fingerprint,
            settings.getint("SIMHASH_MAX_DISTANCE", defaults.SIMHASH_MAX_DISTANCE),
            settings.getfloat("SIMHASH_MIN_SIMILARITY", defaults.SIMHASH_MIN_SIMILARITY),
        )
    except ValueError as exc:
        raise ValueError(_setting_name(str(exc))) from None


def _processes_setting(settings: BaseSettings) -> int | None:
    value = settings.get("SIMHASH_PROCESSES", defaults.SIMHASH_PROCESSES)
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "auto")):
        return None
    try:
        return settings.getint("SIMHASH_PROCESSES")
    except ValueError:
        raise ValueError(f"SIMHASH_PROCESSES must be a number of processes or None, got {value!r}") from None


def backend_uri(settings: BaseSettings, spider_name: str | None = None) -> str:
    """The index backend URI of a crawl: ``SIMHASH_BACKEND``, else the on-disk default (``JOBDIR/simhash``,
    or ``.scrapy/simhash/<spider name>`` in the project's data directory), with ``SIMHASH_MAX_AGE`` added
    as the URI's ``max_age`` option."""
    uri = settings.get("SIMHASH_BACKEND", defaults.SIMHASH_BACKEND) or ""
    if not uri:
        jobdir = settings.get("JOBDIR")
        name = f"simhash/{spider_name or 'default'}"
        try:
            path = Path(jobdir, "simhash") if jobdir else Path(data_path(name))
        except NotConfigured:  # SCRAPY_SETTINGS_MODULE set, but no scrapy.cfg to find the project by
            path = Path(".scrapy", name)
        uri = str(path)
    max_age = settings.get("SIMHASH_MAX_AGE", defaults.SIMHASH_MAX_AGE)
    try:
        seconds = parse_age(max_age or 0)
    except ValueError as exc:
        raise ValueError(f"SIMHASH_MAX_AGE: {exc}") from None
    return with_uri_option(uri, "max_age", f"{seconds:g}") if seconds else uri


def worker_processes(processes: int | None, threads: int = 0) -> int:
    """The number of worker processes for ``SIMHASH_PROCESSES``: as given, or for ``None`` one on a POSIX
    machine with two CPUs or more (measured: the crawl goes faster, see docs/speed.md), else none."""
    if processes is not None:
        return processes
    return 1 if os.name == "posix" and available_cpus() >= 2 and not threads else 0


def is_html(response: Response) -> bool:
    """HTML by the declared Content-Type; without one, by Scrapy's sniffing (URL and body)."""
    content_type = response.headers.get(b"Content-Type")
    if content_type:
        mime = content_type.split(b";", 1)[0].strip().lower().decode("latin-1")
        return mime in HTML_TYPES
    return isinstance(response, HtmlResponse)


def item_document(values: list[Any]) -> bytes | str | None:
    """One page to fingerprint from item field values: HTML as is, plain text as paragraphs."""
    parts: list[str] = []
    for value in values:
        if isinstance(value, (list, tuple)):
            value = "\n\n".join(str(v) for v in value if isinstance(v, (str, bytes)))
        if isinstance(value, bytes):
            if len(values) == 1:
                return value
            value = value.decode("utf-8", "replace")
        if not isinstance(value, str) or not value.strip():
            continue
        if _HTML_MARKUP.search(value[:4096]):
            parts.append(value)
        else:
            parts.extend(f"<p>{html.escape(p.strip())}</p>" for p in re.split(r"\n\s*\n", value) if p.strip())
    if not parts:
        return None
    if len(parts) == 1 and _HTML_MARKUP.match(parts[0].lstrip()) and "<p>" not in parts[0][:3]:
        return parts[0]
    return "<html><body><article>\n" + "\n".join(parts) + "\n</article></body></html>"


def _future_to_deferred(future: Future[_T]) -> Any:
    from twisted.internet import reactor
    from twisted.internet.defer import Deferred

    d: Deferred[_T] = Deferred()

    def fire(f: Future[_T]) -> None:
        if f.cancelled():  # the executor was shut down (the crawl ended) before it ran
            d.cancel()
            return
        exc = f.exception()
        if exc is None:
            d.callback(f.result())
        else:
            d.errback(exc)

    future.add_done_callback(lambda f: reactor.callFromThread(fire, f))
    return d


async def _in_executor(executor: Executor, func: Callable[..., _T], *args: Any) -> _T:
    """Run ``func(*args)`` in *executor* (worker threads) and wait for it without blocking the reactor."""
    future = executor.submit(func, *args)
    if is_asyncio_available():
        return await asyncio.wrap_future(future)
    return await _future_to_deferred(future)


async def _sleep(seconds: float) -> None:
    """Wait without blocking the reactor."""
    if is_asyncio_available():
        await asyncio.sleep(seconds)
        return
    from twisted.internet import reactor
    from twisted.internet.defer import Deferred

    d: Deferred[None] = Deferred()
    reactor.callLater(seconds, d.callback, None)
    await d


def _waiter() -> tuple[Awaitable[None], Callable[[], None]]:
    """Something to wait on, and a function that wakes its waiter on the reactor's next turn (not at once:
    the caller goes on first)."""
    if is_asyncio_available():
        future = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)  # the waiting coroutine resumes on the loop's next turn

        return future, wake
    from twisted.internet import reactor
    from twisted.internet.defer import Deferred

    d: Deferred[None] = Deferred()

    def fire() -> None:
        if not d.called:
            d.callback(None)

    return d, lambda: reactor.callLater(0, fire)


class _InOrder:
    """Lets pages into the index one by one in the order they arrived (their tickets), whatever order their
    fingerprints come back in from worker threads or processes: the same pages arriving in the same order
    get the same decisions wherever they were fingerprinted.

    A page takes a ticket when it arrives, waits for its turn once it has its fingerprint, starts its index
    check and calls :meth:`done` (also when it is skipped, fails or is cancelled, so that nobody waits for it).
    """

    def __init__(self) -> None:
        self._issued = 0
        self._turn = 0  # the ticket whose turn it is
        self._done: set[int] = set()  # tickets done before their turn
        self._waiting: dict[int, Callable[[], None]] = {}

    def ticket(self) -> int:
        self._issued += 1
        return self._issued - 1

    async def wait(self, ticket: int) -> None:
        """Return when every page that arrived before ``ticket`` is done."""
        if ticket == self._turn:
            return
        waiter, wake = _waiter()
        self._waiting[ticket] = wake
        await waiter

    def done(self, ticket: int) -> None:
        self._waiting.pop(ticket, None)
        self._done.add(ticket)
        while self._turn in self._done:
            self._done.discard(self._turn)
            self._turn += 1
        wake = self._waiting.pop(self._turn, None)
        if wake is not None:
            wake()


class _WorkerDied(Exception):
    """The worker process fingerprinting a page died, twice (it was replaced in between)."""


#: A page let through unchecked while the index failed: (fingerprint, url, sketch).
_Page = tuple[int, str, bytes | None]

#: One filter per crawler (weak keys: a finished crawler takes its filter with it).
_FILTERS: WeakKeyDictionary[Crawler, CrawlFilter] = WeakKeyDictionary()
#: Crawlers whose filter could not start (reported once; their spider is closed when it opens).
_FAILED: WeakSet[Crawler] = WeakSet()


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
    raise CloseSpider(START_FAILED)


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
    """The index, the fingerprinter, the stats and the logging of one crawl's near-duplicate filter."""

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
    ) -> None:
        if action not in ACTIONS:
            raise ValueError(f"SIMHASH_ACTION must be 'drop' or 'flag', got {action!r}")
        if threads < 0:
            raise ValueError(f"SIMHASH_THREADS must be >= 0, got {threads!r}")
        processes = worker_processes(processes, threads)
        if processes < 0:
            raise ValueError(f"SIMHASH_PROCESSES must be >= 0, got {processes!r}")
        if threads and processes:
            raise ValueError(
                f"SIMHASH_THREADS={threads} and SIMHASH_PROCESSES={processes}: fingerprint in threads or in "
                "processes, not both (set one of them to 0)"
            )
        if not index_retry_seconds >= 0:
            raise ValueError(f"SIMHASH_INDEX_RETRY_SECONDS must be >= 0, got {index_retry_seconds!r}")
        self.index_retry_seconds = float(index_retry_seconds)
        self.config = config
        self.action = action
        self.item_fields = list(item_fields or [])
        self.threads = threads
        self.processes = processes
        self.debug = debug
        self.stats = stats
        k = config.max_distance
        metadata = config.index_metadata()
        # A wrong URI or an unreachable server fails here, when the crawl starts.
        try:
            store = open_backend(
                backend,
                k=k,
                design=resolve_design(config.tables, k, EXPECTED_SIZE, candidates=True),
                metadata=metadata,
                backends=backends,
            )
        except Exception as exc:
            exc.simhash_backend = backend  # type: ignore[attr-defined] - for the start error line (_start_error)
            raise
        self.index = NearDuplicateIndex(k, backend=store, metadata=metadata, min_similarity=config.min_similarity)
        self.backend_uri = backend
        # The reactor thread's fingerprinter: every page when SIMHASH_THREADS and SIMHASH_PROCESSES are 0, and
        # with SIMHASH_PROCESSES the pages that arrive while the worker processes start.
        self._job = FingerprintJob(Fingerprinter(config.fingerprint))
        self._job(WARM_UP, None)
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="simhash") if threads else None
        self._pool: WorkerPool | None = None  # SIMHASH_PROCESSES: started by start_workers()
        self._pool_ready = False  # a worker has answered (logged once per pool)
        self._processes_failed = False  # the workers could not start, or died too often: the reactor thread
        self._worker_restarts = 0
        self._workers_started = False
        self._order = _InOrder()
        # A remote index (Redis) waits on the network: its checks run in one thread of their own, in order.
        remote = getattr(store, "remote", False)
        self._index_executor = ThreadPoolExecutor(1, thread_name_prefix="simhash-index") if remote else None
        self._index_down_until = 0.0  # the breaker: monotonic time before which the index is not called
        self._unindexed: list[_Page] = []  # pages let through while the index failed
        self._pending: dict[int, tuple[Any, Decision]] = {}
        self._recent: OrderedDict[str, Decision] = OrderedDict()
        self._logged: set[str] = set()
        self._counts: Counter[str] = Counter()
        self._item_number = 0
        self._fingerprinted = 0
        self.closed = False

    # --- construction ------------------------------------------------------------------------

    @classmethod
    def from_settings(
        cls, settings: BaseSettings, stats: StatsCollector, spider_name: str | None = None
    ) -> CrawlFilter:
        return cls(
            filter_config(settings),
            stats=stats,
            action=settings.get("SIMHASH_ACTION", defaults.SIMHASH_ACTION),
            backend=backend_uri(settings, spider_name),
            backends=settings.getdict("SIMHASH_BACKENDS", defaults.SIMHASH_BACKENDS),
            item_fields=settings.getlist("SIMHASH_ITEM_FIELDS", defaults.SIMHASH_ITEM_FIELDS),
            threads=settings.getint("SIMHASH_THREADS", defaults.SIMHASH_THREADS),
            processes=_processes_setting(settings),
            debug=settings.getbool("SIMHASH_DEBUG", defaults.SIMHASH_DEBUG),
            index_retry_seconds=settings.getfloat("SIMHASH_INDEX_RETRY_SECONDS", defaults.SIMHASH_INDEX_RETRY_SECONDS),
        )

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
            assert crawler.stats is not None
            spider_name = getattr(crawler.spider, "name", None) or getattr(crawler.spidercls, "name", None)
            try:
                found = _FILTERS[crawler] = cls.from_settings(crawler.settings, crawler.stats, spider_name)
            except open_errors() as exc:
                if not crawler.crawling or not _stop_at_start(crawler, exc):
                    raise
                raise NotConfigured from exc
            crawler.signals.connect(found.spider_opened, signal=signals.spider_opened)
            crawler.signals.connect(found.spider_closed, signal=signals.spider_closed)
            for signal in (signals.item_scraped, signals.item_dropped, signals.item_error):
                crawler.signals.connect(found._item_done, signal=signal)
            found.stats.set_value("simhash/index_size", len(found.index))
            logger.info(
                "simhash filter: action=%s, k=%d, backend=%s, model %s, %s",
                found.action,
                found.config.max_distance,
                redact_uri(found.backend_uri),
                found.config.fingerprint.model_id(),
                f"fingerprinting {found._where(planned=True)}",
                extra={"crawler": crawler},
            )
        return found

    # --- checking pages -----------------------------------------------------------------------

    async def check_response(self, request: Request, response: Response) -> Decision | None:
        """Fingerprint an HTML response and check-and-add it; ``None`` if the request is exempt."""
        if request.meta.get(DONT_META_KEY):
            self._skip(response.url, DONT_META_KEY)
            return None
        url = response.url
        if not 200 <= response.status < 300:
            return self._skip(url, "http_status", level=logging.DEBUG)  # HttpErrorMiddleware logs them
        if not is_html(response):
            return self._skip(url, Status.NOT_HTML.value, level=logging.DEBUG)
        if len(response.body) < 65536 and not response.body.strip():  # larger blank pages: the fingerprinter
            return self._skip(url, Status.EMPTY.value)
        if "dataloss" in response.flags:
            self._count_once("simhash/dataloss", url, "download cut short (dataloss); fingerprinting what arrived")
        encoding = http_content_type_encoding(response.headers.get(b"Content-Type", b"").decode("latin-1"))
        return await self._check(url, response.body, encoding)

    async def check_item(self, item: Any) -> Decision | None:
        """Fingerprint an item's ``SIMHASH_ITEM_FIELDS`` and check-and-add it; ``None`` if it has none."""
        adapter = ItemAdapter(item)
        values = [adapter.get(name) for name in self.item_fields if adapter.get(name) is not None]
        document = item_document(values)
        if document is None:
            return None
        url = adapter.get("url")
        if not isinstance(url, str) or not url:
            self._item_number += 1
            url = f"item:{self._item_number}"
        return await self._check(url, document, None)

    async def _check(self, url: str, body: bytes | str, encoding: str | None) -> Decision:
        ticket = self._order.ticket()
        try:
            try:
                fp, seconds, charset_error = await self._fingerprint(body, encoding)
            except _WorkerDied as exc:
                return self._skip(url, WORKER_DIED, exc_info=exc)
            except Exception:
                return self._skip(url, ERROR, exc_info=True)
            self._fingerprinted += 1
            self.stats.inc_value("simhash/fingerprint_seconds", seconds)
            self.stats.max_value("simhash/fingerprint_max_seconds", seconds)
            if charset_error:
                message = f"bytes invalid in the page's charset ({fp.encoding}); fingerprinted as decoded"
                self._count_once("simhash/charset_errors", url, message)
            if not fp.ok or fp.value is None:
                return self._skip(url, str(fp.status))
            if fp.truncated:
                self._count_once("simhash/truncated", url, "a huge page; fingerprinted its beginning only (work caps)")
            await self._order.wait(ticket)
            # Started here (a local index decides at once; a remote one's call is queued in order), awaited
            # below: the next page's turn comes when this one is in the index's queue, not when it has an answer.
            decision = self._decide(url, fp.value, fp.sketch)
        finally:
            self._order.done(ticket)
        return await decision

    async def _fingerprint(self, body: bytes | str, encoding: str | None) -> JobResult:
        if self._executor is not None:
            return await _in_executor(self._executor, self._job, body, encoding)
        pool = self._pool
        if pool is not None:
            # a pool started in another event loop cannot hear its workers here (a filter used outside a crawl)
            if pool.usable and self._is_ready(pool):
                return await self._in_processes(body, encoding)
            self.stats.inc_value("simhash/fingerprinted_in_reactor")  # while the workers start
        elif self._processes_failed:
            self.stats.inc_value("simhash/fingerprinted_in_reactor")  # after the workers were given up
        return self._in_reactor(body, encoding)

    def _in_reactor(self, body: bytes | str, encoding: str | None) -> JobResult:
        start = time.perf_counter()
        try:
            return self._job(body, encoding)
        finally:
            self.stats.inc_value("simhash/reactor_seconds", time.perf_counter() - start)

    # --- worker processes (SIMHASH_PROCESSES) -------------------------------------------------------

    def start_workers(self) -> None:
        """Start the worker processes (``SIMHASH_PROCESSES``) without waiting for them: pages are
        fingerprinted in the reactor thread until one of them is ready (about 0.3 s).  Called when the spider
        opens; a filter used outside a crawl fingerprints in the reactor thread unless this is called."""
        if not self.processes or self._pool is not None or self._processes_failed or self.closed:
            return
        try:
            self._pool = WorkerPool(self.config.fingerprint, self.processes, on_lost=self._worker_lost)
            self._workers_started = True
        except Exception:
            self._give_up_processes("could not start the worker processes", exc_info=True)
        self._pool_ready = False

    def _is_ready(self, pool: WorkerPool) -> bool:
        """Whether a worker is ready now (checked without waiting); gives up on workers that never start."""
        if pool.ready:
            if not self._pool_ready:
                self._pool_ready = True
                logger.info(
                    "simhash: %d worker process(es) fingerprinting, the first ready %.2f s after the start",
                    self.processes,
                    time.monotonic() - pool.started,
                )
            return True
        if not self._pool_ready and time.monotonic() - pool.started > WORKER_START_SECONDS:
            self._give_up_processes(f"the worker processes were not ready within {WORKER_START_SECONDS:g} s")
        return False

    async def _in_processes(self, body: bytes | str, encoding: str | None) -> JobResult:
        """Fingerprint a page in the least busy worker process; if it dies, once more in another (or its
        replacement, waiting for it to start): the page may have killed it, a second death skips it."""
        body = self._job.for_worker(body)
        for attempt in range(2):
            worker = self._pool.pick(ready_only=attempt == 0) if self._pool is not None else None
            if worker is None:  # the workers are gone for good: the reactor thread
                self.stats.inc_value("simhash/fingerprinted_in_reactor")
                return self._in_reactor(body, encoding)
            try:
                return from_worker(await worker.fingerprint(body, encoding))
            except WorkerLost:
                continue
            except WorkerError as exc:  # the fingerprinter raised in the worker: reported like in this thread
                raise RuntimeError(f"in worker process {worker.pid}:\n{exc}") from None
        raise _WorkerDied("the worker process died while fingerprinting this page, twice")

    def _worker_lost(self, worker: WorkerProcess) -> None:
        """A worker process died: start another in its place, or give up on workers that cannot start."""
        pool = self._pool
        if pool is None or self.closed:
            return
        if not worker.ready and not self._pool_ready:
            self._give_up_processes(f"the worker processes did not start ({worker.lost})")
            return
        if self._worker_restarts >= MAX_WORKER_RESTARTS:
            self._give_up_processes(f"worker processes died {self._worker_restarts + 1} times ({worker.lost})")
            return
        self._worker_restarts += 1
        self.stats.inc_value("simhash/worker_restarts")
        if "simhash/worker_restarts" not in self._logged:
            self._logged.add("simhash/worker_restarts")
            logger.error(
                "simhash: %s; starting another, the pages it held are tried once more (further cases are only "
                "counted in simhash/worker_restarts)",
                worker.lost,
            )
        try:
            pool.replace(worker)
        except Exception:
            self._give_up_processes("could not start a worker process", exc_info=True)

    def _give_up_processes(self, why: str, exc_info: bool | BaseException = False) -> None:
        self._processes_failed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        logger.error("simhash: %s; fingerprinting in the reactor thread from now on", why, exc_info=exc_info)

    def _where(self, planned: bool = False) -> str:
        """Where pages are fingerprinted (``planned``: before the spider opens)."""
        if self.threads:
            return f"in {self.threads} worker thread(s)"
        if self.processes and (planned or self._workers_started) and not self._processes_failed:
            return f"in {self.processes} worker process(es)"
        return "in the reactor thread"

    def decide(self, url: str, value: int, sketch: bytes | None = None) -> Decision:
        """Check-and-add one fingerprint in the index, once, in this thread; an error lets the page through."""
        start = time.perf_counter()
        try:
            match, added_late = self._check_and_add(value, url, sketch)
        except Exception:
            self._index_time(time.perf_counter() - start)
            return self._unchecked(url, value, sketch, True)
        self._index_time(time.perf_counter() - start)
        return self._decided(url, value, match, added_late)

    def _index_time(self, seconds: float) -> None:
        self.stats.inc_value("simhash/reactor_seconds", seconds)
        self.stats.inc_value("simhash/index_seconds", seconds)

    async def _decide(self, url: str, value: int, sketch: bytes | None = None) -> Decision:
        """:meth:`decide` for the crawl: off the reactor thread for a remote index, and with a breaker.

        After an index error the index is left alone for ``INDEX_BREAK_SECONDS`` (pages do not each wait
        out a timeout) and then tried again.  Meanwhile a page waits and retries for up to
        ``SIMHASH_INDEX_RETRY_SECONDS``, then goes through unchecked (``simhash/skipped/index_error``).

        A failed attempt may still have run on the server (a timeout: the reply was lost, not the write), so
        a retry that finds this page's own entry (its URL, its fingerprint) is taken as that write having
        landed: the page is kept, counted in ``simhash/index_retry_own_entry``, not called a near-duplicate
        of itself.  (A page kept by an earlier crawl, unchanged, that is found by a retry is counted so too.)
        """
        if self._index_executor is None and not self.index_retry_seconds and not self._index_down_until:
            return self.decide(url, value, sketch)  # the common case: a local index that works
        deadline = time.monotonic() + self.index_retry_seconds
        delay = RETRY_FIRST_DELAY
        error: BaseException | None = None
        while True:
            if time.monotonic() >= self._index_down_until:
                try:
                    if self._index_executor is None:
                        match, added_late = self._check_and_add(value, url, sketch)
                    else:
                        match, added_late = await _in_executor(
                            self._index_executor, self._check_and_add, value, url, sketch
                        )
                except Exception as exc:
                    error = exc
                    self._index_down_until = time.monotonic() + INDEX_BREAK_SECONDS
                else:
                    if self._index_down_until:
                        logger.info("simhash: the index answers again")
                        self._index_down_until = 0.0
                    if error is not None and _own_entry(match, value, url):
                        self.stats.inc_value("simhash/index_retry_own_entry")
                        match = None  # this page's timed-out write landed: kept
                    return self._decided(url, value, match, added_late)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return self._unchecked(url, value, sketch, error or False)
            self._count_once(
                "simhash/index_retries",
                url,
                f"the index failed ({type(error).__name__}: {error}); pages wait and their checks are retried "
                f"for up to {self.index_retry_seconds:g} s (SIMHASH_INDEX_RETRY_SECONDS)",
                level=logging.WARNING,
            )
            await _sleep(min(delay, remaining))
            delay = min(delay * 2, RETRY_MAX_DELAY)

    def _check_and_add(self, value: int, url: str, sketch: bytes | None) -> tuple[Match | None, int]:
        """Check-and-add one page; then add the pages let through unchecked while the index failed (so
        that their copies are caught from now on).  Returns the match and how many were added late."""
        match = self.index.check_and_add(value, url, sketch if self.index.sketch_bytes else None)
        pending, self._unindexed = self._unindexed, []
        if not pending:
            return match, 0
        try:
            added = self._add_late(list(dict.fromkeys(pending)))
        except Exception:
            self._unindexed = pending + self._unindexed
            return match, 0
        return match, added

    def _add_late(self, pages: list[_Page]) -> int:
        """Store the pages not in the index yet; how many were.  A page whose check timed out may have been
        stored by it all the same (the call ran on the server, its reply was lost), and so may a late add
        that timed out: a page is never stored twice."""
        if self.index.sketch_bytes:  # adding is idempotent: a page stored already is among its candidates
            backend, k = self.index.backend, self.index.k
            return sum(
                not any(c.key == url and c.distance == 0 for c in backend.add_and_candidates(value, url, sketch, k))
                for value, url, sketch in pages
                if sketch is not None
            )
        found = self.index.query_many([v for v, _, _ in pages], 0)
        missing = [(v, u) for (v, u, _), matches in zip(pages, found, strict=True)
                   if not any(_own_entry(m, v, u) for m in matches)]  # fmt: skip
        if missing:
            self.index.add_many([v for v, _ in missing], [u for _, u in missing])
        return len(missing)

    def _unchecked(self, url: str, value: int, sketch: bytes | None, exc_info: bool | BaseException) -> Decision:
        """A page whose index check failed: let through, and remembered to be added when the index answers."""
        if len(self._unindexed) < UNINDEXED_LIMIT:
            self._unindexed.append((value, url, sketch))
        return self._skip(url, INDEX_ERROR, exc_info=exc_info, fingerprint=value)

    def _decided(self, url: str, value: int, match: Match | None, added_late: int = 0) -> Decision:
        """The decision for a checked page, counted in the stats."""
        if added_late:
            self.stats.inc_value("simhash/index_added_late", added_late)
        self.stats.inc_value("simhash/checked")
        if match is None:
            decision = Decision(url, Status.OK.value, value)
            self.stats.inc_value("simhash/kept")
            if self.debug:
                logger.debug("simhash: kept %s (fingerprint %s)", url, decision.hex)
        else:
            decision = Decision(url, Status.OK.value, value, match.key, match.distance, match.similarity)
            self.stats.inc_value("simhash/near_duplicates")
            if decision.unchanged:
                self.stats.inc_value("simhash/unchanged")
            self.stats.inc_value(f"simhash/distance/{match.distance}")
            self.stats.inc_value("simhash/dropped" if self.action == "drop" else "simhash/flagged")
        self._remember(decision)
        return decision

    # --- decisions for items ------------------------------------------------------------------

    def remember_item(self, item: Any, decision: Decision) -> None:
        """Attach the decision of the response that produced ``item`` (for the pipeline)."""
        self._pending[id(item)] = (item, decision)
        if len(self._pending) > PENDING_LIMIT:  # items that never reached the pipelines (filtered out)
            del self._pending[next(iter(self._pending))]

    def decision_for(self, item: Any) -> Decision | None:
        """The decision of the response that produced ``item``, else of a recent page at its ``url``."""
        entry = self._pending.pop(id(item), None)
        if entry is not None and entry[0] is item:
            return entry[1]
        try:
            url = ItemAdapter(item).get("url")
        except TypeError:
            return None
        return self._recent.get(url) if isinstance(url, str) else None

    def _item_done(self, item: Any, **kwargs: Any) -> None:
        entry = self._pending.get(id(item))
        if entry is not None and entry[0] is item:
            del self._pending[id(item)]

    def _remember(self, decision: Decision) -> None:
        self._recent[decision.url] = decision
        self._recent.move_to_end(decision.url)
        if len(self._recent) > RECENT_URLS:
            self._recent.popitem(last=False)

    # --- stats and logging --------------------------------------------------------------------

    def _skip(
        self,
        url: str,
        reason: str,
        *,
        level: int = logging.INFO,
        exc_info: bool | BaseException = False,
        fingerprint: int | None = None,
    ) -> Decision:
        self.stats.inc_value(f"simhash/skipped/{reason}")
        self._counts[reason] += 1
        decision = Decision(url, reason, fingerprint)
        if reason == DONT_META_KEY:
            return decision
        self._remember(decision)
        if reason not in self._logged:
            self._logged.add(reason)
            level = logging.ERROR if exc_info else level
            what = {
                INDEX_ERROR: "the index failed; letting the page through",
                ERROR: "fingerprinting failed; letting the page through",
            }.get(reason, "not fingerprinted, let through")
            logger.log(
                level,
                "simhash: %s: %s (%s; further cases are only counted in simhash/skipped/%s)",
                url,
                reason,
                what,
                reason,
                exc_info=exc_info,
            )
        elif self.debug:
            logger.debug("simhash: skipped %s: %s", url, reason)
        return decision

    def _count_once(self, key: str, url: str, message: str, level: int = logging.INFO) -> None:
        self.stats.inc_value(key)
        if key not in self._logged:
            self._logged.add(key)
            logger.log(level, "simhash: %s: %s (further cases are only counted in %s)", url, message, key)

    def log_near_duplicate(self, decision: Decision, what: str) -> None:
        """Log a near-duplicate: every one with ``SIMHASH_DEBUG``, else the first one only."""
        if self.debug or "near_duplicate" not in self._logged:
            hint = "" if self.debug else " - no more near-duplicates will be shown (see SIMHASH_DEBUG to show all)"
            self._logged.add("near_duplicate")
            logger.debug(
                "simhash: %s %s: near-duplicate of %s (distance %d, fingerprint %s)%s",
                what,
                decision.url,
                decision.duplicate_of,
                decision.distance,
                decision.hex,
                hint,
            )

    def summary(self) -> str:
        """One line: what the filter did in this crawl."""
        get = self.stats.get_value
        checked = get("simhash/checked", 0)
        skipped = sum(self._counts.values())
        reasons = ", ".join(f"{n} {r}" for r, n in sorted(self._counts.items()))
        seconds = get("simhash/fingerprint_seconds", 0.0)
        n = self._fingerprinted
        per_page = f"{1000 * seconds / n:.2f} ms/page" if n else "no pages"
        in_reactor = get("simhash/fingerprinted_in_reactor")
        inline = ""
        if in_reactor:
            inline = f"; {in_reactor} pages in the reactor thread while workers started or after they failed"
        unchanged = f", {get('simhash/unchanged')} unchanged since an earlier crawl" if get("simhash/unchanged") else ""
        return (
            f"simhash: {checked} pages checked: {get('simhash/kept', 0)} kept, "
            f"{get('simhash/near_duplicates', 0)} near-duplicates ({get('simhash/dropped', 0)} dropped, "
            f"{get('simhash/flagged', 0)} flagged{unchanged}); {skipped} skipped{f' ({reasons})' if reasons else ''}; "
            f"index size {len(self.index)}; fingerprinting {per_page} {self._where()} ({seconds:.2f} s in all{inline})"
        )

    def spider_opened(self, spider: Any) -> None:
        self.start_workers()

    def spider_closed(self, spider: Any, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.stats.set_value("simhash/index_size", len(self.index))
        except Exception:
            logger.error("simhash: cannot read the index size", exc_info=True)
        logger.info(self.summary(), extra={"spider": spider})
        for executor in (self._executor, self._index_executor):
            if executor is not None:
                executor.shutdown(wait=executor is self._index_executor, cancel_futures=True)
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        try:
            self.index.close()
        except Exception:
            logger.error("simhash: closing the index failed", exc_info=True)
        self._pending.clear()
