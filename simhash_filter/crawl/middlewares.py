"""Scrapy middlewares of the near-duplicate filter (docs/usage.md): :class:`SimhashDownloaderMiddleware` checks
each HTML response as it arrives, puts the decision in ``response.meta["simhash"]`` and drops a near-duplicate
(:class:`NearDuplicateResponse`) or flags it; :class:`SimhashSpiderMiddleware` hands the decision to the items the
spider builds from the response.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware

from simhash_filter.crawl.avoid import Avoidance
from simhash_filter.crawl.crawlfilter import CrawlFilter, stop_at_start
from simhash_filter.crawl.decision import DONT_META_KEY, META_KEY, Decision
from simhash_filter.crawl.release import HeldPages
from simhash_filter.crawl.warc import WarcOutput

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response

    # typing.Self requires Python 3.11
    from typing_extensions import Self

__all__ = ["AvoidedRequest", "NearDuplicateResponse", "SimhashDownloaderMiddleware", "SimhashSpiderMiddleware"]


class NearDuplicateResponse(IgnoreRequest):
    """A response dropped as a near-duplicate (what a request's errback receives)."""

    def __init__(self, decision: Decision) -> None:
        super().__init__(
            f"near-duplicate of {decision.duplicate_of} (distance {decision.distance}, fingerprint {decision.hex})"
        )
        self.url = decision.url
        self.duplicate_of = decision.duplicate_of
        self.distance = decision.distance
        self.fingerprint = decision.hex


class AvoidedRequest(IgnoreRequest):
    """A request left unsent (``SIMHASH_AVOID``): the learned URL rules say it fetches a page already fetched, or
    an earlier crawl found it a near-duplicate of a page the index holds."""

    def __init__(self, url: str, avoidance: Avoidance) -> None:
        what = {"url_rule": "a URL variant", "known": "a near-duplicate, in an earlier crawl,"}.get(
            avoidance.reason, f"a copy on mirror host of {avoidance.mirror}"
        )
        super().__init__(f"not fetched: {what} of {avoidance.target}")
        self.url = url
        self.reason = avoidance.reason
        self.target = avoidance.target


class SimhashDownloaderMiddleware:
    """Checks each HTML response against the pages kept so far; drops or flags near-duplicates.  Enabled at 540
    by :class:`~simhash_filter.SimhashAddon`, so that only final, decoded responses are checked."""

    def __init__(
        self, crawl_filter: CrawlFilter, crawler: Crawler | None = None, warc: WarcOutput | None = None
    ) -> None:
        self.filter = crawl_filter
        self.crawler = crawler
        #: The crawl's WARC output (``SIMHASH_WARC``; None when off).
        self.warc = warc
        #: Closes the browser page a dropped response holds (scrapy-playwright), which no callback will close.
        self.held_pages = HeldPages(crawl_filter.report.count)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        crawl_filter = CrawlFilter.for_crawler(crawler)
        try:
            warc = WarcOutput.for_crawler(crawler, crawl_filter)
        except ValueError as exc:  # SIMHASH_WARC cannot be written: the crawl stops at start, like a bad index
            stop_at_start(crawler, exc)
            raise NotConfigured from exc
        return cls(crawl_filter, crawler, warc)

    def _received(self, request: Request, response: Response) -> None:
        """Send ``response_received`` for a dropped response, as the engine does for those it passes on (so that
        ``CLOSESPIDER_PAGECOUNT`` counts it)."""
        if self.crawler is not None:
            self.crawler.signals.send_catch_log(
                signal=signals.response_received, response=response, request=request, spider=self.crawler.spider
            )

    def process_request(self, request: Request) -> Request | None:
        """Leave the request unsent when ``SIMHASH_AVOID`` says it fetches a page already fetched."""
        avoider = self.filter.avoider
        if avoider is None or request.meta.get(DONT_META_KEY):
            return None
        found = avoider.check(request)
        if found is None:
            return None
        if avoider.action == "deprioritize":
            return avoider.deprioritized(request)
        raise AvoidedRequest(request.url, found)

    async def process_response(self, request: Request, response: Response) -> Response:
        fetched = datetime.now(timezone.utc) if self.warc is not None else None
        decision = await self.filter.check_response(request, response)
        if self.warc is not None and fetched is not None:
            self.warc.write(response, decision, fetched)  # never raises: failures are counted and logged once
        if decision is None:
            return response
        if self.filter.avoider is not None:
            await self.filter.avoider.observed(decision, request)
        request.meta[META_KEY] = decision.to_meta()
        # a page unchanged since an earlier crawl reaches the spider (its links are followed)
        if decision.dropped and not decision.unchanged:
            self._received(request, response)
            await self.held_pages.release(request.meta)
            raise NearDuplicateResponse(decision)
        return response


class SimhashSpiderMiddleware(BaseSpiderMiddleware):
    """Attaches ``response.meta["simhash"]`` to every item the spider yields from that response."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.filter = CrawlFilter.for_crawler(crawler)

    def get_processed_item(self, item: Any, response: Response | None) -> Any:
        if response is not None and response.request is not None:
            decision = Decision.from_meta(response.url, response.meta.get(META_KEY))
            if decision is not None:
                self.filter.items.remember_item(item, decision)
        return item
