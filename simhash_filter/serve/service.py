"""The service's engine, without HTTP: pages fingerprinted off the event loop in worker processes (the crawl's
:class:`~simhash_filter.crawl.executor.FingerprintExecutor`), then decided in the index in one thread of their own,
a request's pages together and in order, counted in the crawl's ``simhash/...`` counters and logged as the crawl
logs a near-duplicate.

A request's pages are decided as ``simhash-filter dedup`` decides the same stream: each page against every page
stored before it, :meth:`NearDuplicateIndex.check_and_add` in input order.  Pages of concurrent requests are
decided one request after the other (never interleaved within a request).  Work in flight is bounded
(:meth:`Service.admit`): a request that would take it past :attr:`Limits.pages_in_flight` pages is refused
(:class:`Busy`), never queued without end.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from simhash_filter.batch.dedup import MALFORMED, MAX_URL_CHARS
from simhash_filter.config import FilterConfig
from simhash_filter.crawl.decision import Decision, SkipReason
from simhash_filter.crawl.executor import FingerprintExecutor, WorkerDied
from simhash_filter.crawl.report import Report
from simhash_filter.crawl.stats import PageWork, stats_keys
from simhash_filter.index.backends import error_message, redact_uri, store_errors
from simhash_filter.index.nearduplicate import NearDuplicateIndex
from simhash_filter.index.tables import Match
from simhash_filter.model.fingerprint import Fingerprint, Status

__all__ = ["Busy", "IndexUnavailable", "Limits", "PageIn", "Service", "Stats", "logger"]

#: The service's logger; a near-duplicate's line is the crawl's (``simhash: flagged URL: near-duplicate of ...``).
logger = logging.getLogger("simhash_filter.serve")
#: Seconds the worker processes get to be ready before the service starts answering without them.
WORKERS_READY_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class Limits:
    """What one request, and the service at once, may ask for (``simhash-filter serve``'s options)."""

    #: Bytes of a request's body, after a ``Content-Encoding`` is undone.
    body_bytes: int = 32 << 20
    #: Pages in one batch request.
    batch_pages: int = 1000
    #: Seconds a request may take to send its body and wait for its turn (a decision under way is finished).
    request_seconds: float = 30.0
    #: Pages being fingerprinted or decided at once, over every request; beyond: 429 with ``Retry-After``.
    pages_in_flight: int = 4000
    #: Requests being read or decided at once; beyond: 429 with ``Retry-After``.
    requests_in_flight: int = 64


@dataclass(frozen=True, slots=True)
class PageIn:
    """One page of a request: its URL and bytes in ``encoding`` (None: sniffed, as the crawl does), or why it is
    no page (``status``: :data:`MALFORMED`, with ``reason``); ``fields``: a WARC record's own output fields."""

    url: str | None
    body: bytes | str = b""
    encoding: str | None = None
    status: str | None = None
    reason: str | None = None
    fields: tuple[tuple[str, Any], ...] = ()


class Busy(Exception):
    """The service holds as much work as it takes: the request is refused, to be sent again later."""


class IndexUnavailable(Exception):
    """The index failed (a Redis server gone, a full disk): the request is refused; the pages of its batch before
    the failure are decided and stored, a retry finds them (each its own entry, ``unchanged``)."""


class Stats:
    """The crawl's counters without a crawl: the part of Scrapy's ``StatsCollector`` that :class:`Report` uses."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}

    def get_value(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def set_value(self, key: str, value: Any) -> None:
        self._values[key] = value

    def inc_value(self, key: str, count: float = 1, start: float = 0) -> None:
        self._values[key] = self._values.get(key, start) + count

    def max_value(self, key: str, value: float) -> None:
        self._values[key] = max(self._values.get(key, value), value)

    def get_stats(self) -> dict[str, Any]:
        return dict(self._values)


#: A page fingerprinted, on its way to the index: the page, its fingerprint (None: not fingerprinted) and why not.
_Prepared = tuple[PageIn, Fingerprint | None, str | None, PageWork | None]


class Service:
    """Decisions on pages in one index (opened by the caller, closed by :meth:`close`).

    ``processes``: worker processes that fingerprint the pages (0: in the event loop's thread, for tests and tiny
    machines).  Call :meth:`start` in the running event loop before the first page.
    """

    def __init__(self, config: FilterConfig, index: NearDuplicateIndex, uri: str, *, processes: int = 1,
                 limits: Limits = Limits()) -> None:  # fmt: skip
        self.config = config
        self.index = index
        self.uri = uri
        self.limits = limits
        self.stats = Stats()
        self.report = Report(self.stats, action="flag", debug=False)  # type: ignore[arg-type]  # a StatsCollector's part
        self.report.count.start(stats_keys())
        self.report.count.index_opened(len(index), None if index.backend.remote else index.backend.rows)
        self.executor = FingerprintExecutor(config.fingerprint, self.report, processes=processes)
        self._index_thread = ThreadPoolExecutor(1, thread_name_prefix="simhash-index")
        self.pages_in_flight = 0
        self.requests_in_flight = 0
        self.started = time.time()

    async def start(self) -> None:
        """Start the worker processes and wait (at most :data:`WORKERS_READY_SECONDS`) until one answers, so that no
        page is fingerprinted in the event loop's thread while they start."""
        self.executor.start()
        deadline = time.monotonic() + WORKERS_READY_SECONDS
        while self.executor.processes and not self.executor.workers_ready and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    @contextmanager
    def admit(self, pages: int = 0) -> Iterator[None]:
        """Hold a request (and its *pages*) for the block's time, or raise :class:`Busy` when the service holds as
        many requests or pages as its limits take (a request alone is always taken, whatever its pages)."""
        limits = self.limits
        if self.requests_in_flight >= limits.requests_in_flight or (
            self.pages_in_flight and self.pages_in_flight + pages > limits.pages_in_flight
        ):
            raise Busy(f"{self.requests_in_flight} requests and {self.pages_in_flight} pages in flight")
        self.requests_in_flight += 1
        self.pages_in_flight += pages
        try:
            yield
        finally:
            self.requests_in_flight -= 1
            self.pages_in_flight -= pages

    @contextmanager
    def holding(self, pages: int) -> Iterator[None]:
        """Count *pages* more in flight for the block's time, for a request already admitted (:meth:`admit`) whose
        pages are known once its body is read; :class:`Busy` beyond the limit (unless they are all there is)."""
        if self.pages_in_flight and self.pages_in_flight + pages > self.limits.pages_in_flight:
            raise Busy(f"{self.pages_in_flight} pages in flight")
        self.pages_in_flight += pages
        try:
            yield
        finally:
            self.pages_in_flight -= pages

    async def decide(self, pages: Sequence[PageIn], *, store: bool = True, timeout: float | None = None
                     ) -> list[dict[str, Any]]:  # fmt: skip
        """The decision on each page, in order: fingerprinted in the workers (within *timeout* seconds, else
        ``asyncio.TimeoutError`` and nothing stored), then checked (and with *store*, stored) in the index in one
        go, which is finished whatever becomes of the request.  Raises :class:`IndexUnavailable` when the index
        fails."""
        fingerprinting = asyncio.gather(*(self._fingerprint(page) for page in pages))
        prepared = await asyncio.wait_for(fingerprinting, timeout)
        # the index's work is not cancelled with the request: a page stored is answered or found again by a retry
        return await asyncio.shield(asyncio.wrap_future(self._index_thread.submit(self._decide_all, prepared, store)))

    async def _fingerprint(self, page: PageIn) -> _Prepared:
        if page.status is not None or page.url is None:
            return page, None, page.status or MALFORMED, None
        if len(page.url) > MAX_URL_CHARS:
            return PageIn(page.url, status=MALFORMED, reason=f"the url is longer than {MAX_URL_CHARS} characters"), \
                None, MALFORMED, None  # fmt: skip
        try:
            fp, work, charset_error = await self.executor.fingerprint(page.body, page.encoding)
        except WorkerDied:
            return page, None, SkipReason.WORKER_DIED.value, None
        except Exception:  # a bug in the fingerprinter: this page is reported, the service goes on
            logger.exception("simhash: %s: fingerprinting failed", page.url)
            return page, None, SkipReason.ERROR.value, None
        if charset_error:
            said = f"bytes invalid in the declared charset {fp.encoding}; decoded with replacements"
            self.report.count_once("simhash/charset_errors", page.url, said)
        if fp.truncated:
            self.report.count.count("simhash/truncated")
        return page, fp, None if fp.ok else str(fp.status), work

    def _decide_all(self, prepared: Sequence[_Prepared], store: bool) -> list[dict[str, Any]]:
        """Every page of one request, in order, in the index's thread."""
        return [self._decide_one(page, fp, status, work, store) for page, fp, status, work in prepared]

    def _decide_one(self, page: PageIn, fp: Fingerprint | None, status: str | None, work: PageWork | None,
                    store: bool) -> dict[str, Any]:  # fmt: skip
        if fp is None or fp.value is None or status is not None or page.url is None:
            why = status or Status.NOT_HTML.value
            if why != MALFORMED:
                self.report.skip(page.url or "", why, work=work)
            return _record(page, fp, why)
        index = self.index
        start = time.perf_counter()
        try:
            if store:
                match = index.check_and_add(fp.value, page.url, fp.sketch or b"")
            else:
                match = index.check(fp.value, fp.sketch or b"", page.url)
        except store_errors() as exc:
            message = error_message(exc, self.uri)
            logger.error("simhash: the index %s failed: %s", redact_uri(self.uri), message)
            raise IndexUnavailable(f"the index failed: {message}") from None
        work = work or PageWork()
        work.index_seconds = time.perf_counter() - start
        decision = _decision(page.url, fp.value, match)
        stored = store and not (match is not None and match.key == page.url and match.fingerprint == fp.value)
        rows = None if index.backend.remote else index.backend.rows
        self.report.count.checked(decision, work, stored=stored, rows=rows, candidates=index.candidates_max)
        if decision.near_duplicate:
            what = "not indexed again (unchanged since it was kept)" if decision.unchanged else "flagged"
            logger.info("simhash: %s %s: near-duplicate of %s (distance %d, fingerprint %s)", what, decision.url,
                        decision.duplicate_of, decision.distance, decision.hex)  # fmt: skip
        return _record(page, fp, None, match, stored)

    async def query(self, fingerprint: int, k: int | None = None) -> list[Match]:
        """The stored pages within *k* (default: the index's k) of *fingerprint*, nearest first."""
        return await asyncio.wrap_future(self._index_thread.submit(self._query, fingerprint, k))

    def _query(self, fingerprint: int, k: int | None) -> list[Match]:
        try:
            return self.index.query(fingerprint, k)
        except store_errors() as exc:
            raise IndexUnavailable(f"the index failed: {error_message(exc, self.uri)}") from None

    async def size(self) -> int:
        """The pages the index holds (a round trip to a remote index)."""
        return await asyncio.wrap_future(self._index_thread.submit(len, self.index))

    def description(self) -> dict[str, Any]:
        """What the service runs: the index (its URI with secrets masked), the model, the limits, where pages are
        fingerprinted."""
        config, limits = self.config, self.limits
        return {
            "index": redact_uri(self.uri),
            "model": config.fingerprint.model_id(),
            "max_distance": config.max_distance,
            "min_similarity": config.min_similarity,
            "fingerprinting": self.executor.where(),
            "limits": {"body_bytes": limits.body_bytes, "batch_pages": limits.batch_pages,
                       "request_seconds": limits.request_seconds, "pages_in_flight": limits.pages_in_flight,
                       "requests_in_flight": limits.requests_in_flight},
        }

    def close(self) -> None:
        """Finish the index's work under way (every page acknowledged is stored), then end the workers and close
        the index (an on-disk index flushes)."""
        if self.executor.closed:
            return
        self._index_thread.shutdown(wait=True)
        self.executor.close()
        self.index.close()


def _decision(url: str, value: int, match: Match | None) -> Decision:
    if match is None:
        return Decision(url, Status.OK.value, value)
    return Decision(url, Status.OK.value, value, match.key, match.distance, match.similarity, dropped=False)


def _record(page: PageIn, fp: Fingerprint | None, status: str | None, match: Match | None = None,
            stored: bool = False) -> dict[str, Any]:  # fmt: skip
    """A page's answer: ``simhash-filter dedup``'s record (``url``, ``fingerprint``, ``duplicate_of``, ``distance``),
    with ``status`` always, ``similarity`` and ``stored``; ``reason`` for a malformed page; a WARC record's
    fields last."""
    value = None if fp is None else fp.value
    out: dict[str, Any] = {
        "url": page.url,
        "status": status or Status.OK.value,
        "fingerprint": None if value is None else f"{value:016x}",
        "duplicate_of": None if match is None else match.key,
        "distance": None if match is None else match.distance,
        "similarity": None if match is None or match.similarity is None else round(match.similarity, 4),
        "stored": stored,
    }
    if status == MALFORMED:
        out["reason"] = page.reason
    out.update(page.fields)
    return out
