"""What the filter decided about one page (:class:`Decision`), why a page is let through unchecked
(:class:`SkipReason`), and the decisions waiting for the items built from their pages (:class:`ItemDecisions`).
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from itemadapter import ItemAdapter

from simhash_filter.errors import FINGERPRINT_ERROR
from simhash_filter.model.fingerprint import Status

__all__ = ["DONT_META_KEY", "META_KEY", "Decision", "ItemDecisions", "SkipReason"]

#: ``request.meta`` / ``response.meta`` key of the decision (a dict, see :meth:`Decision.to_meta`).
META_KEY = "simhash"
#: ``request.meta`` key that exempts a request from the filter (like ``dont_filter``, ``dont_cache``).
DONT_META_KEY = "dont_simhash"


class SkipReason(str, enum.Enum):
    """Why a page is let through unchecked (``simhash/skipped/<reason>``, a :class:`Decision`'s ``status``): the
    fingerprinter's statuses but ``ok`` (:class:`~simhash_filter.model.fingerprint.Status`), then the crawl's."""

    EMPTY = Status.EMPTY.value
    TOO_FEW_FEATURES = Status.TOO_FEW_FEATURES.value
    NOT_HTML = Status.NOT_HTML.value
    #: Not a 2xx response (Scrapy's HttpErrorMiddleware logs them).
    HTTP_STATUS = "http_status"
    #: The fingerprinter raised (a bug in the fingerprinter: please report it).
    ERROR = FINGERPRINT_ERROR
    #: The page's worker process died twice while fingerprinting it (it was replaced in between).
    WORKER_DIED = "worker_died"
    #: The index check failed (the page is added to the index when it answers again).
    INDEX_ERROR = "index_error"
    #: The check came after a failed one stopped the crawl (``SIMHASH_ON_INDEX_ERROR = "stop"``): no call to the
    #: index, which would only wait out its timeout again (nor a late add).
    AFTER_STOP = "after_stop"
    #: The request is exempt (``meta["dont_simhash"]``): counted, never logged.
    DONT_SIMHASH = DONT_META_KEY

    def __str__(self) -> str:
        return self.value

#: Decisions remembered by URL for items that reach the pipeline without the spider middleware.
RECENT_URLS = 10_000
#: Items waiting for the pipeline with their response's decision, at most.
PENDING_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class Decision:
    """What the filter decided about one page: ``status`` ``"ok"`` for a page checked in the index (then
    ``duplicate_of`` is the kept page it duplicates, or None), else a :class:`SkipReason`; ``dropped``, decided
    where the index answers, is read by the stats, the middleware and the pipeline."""

    url: str
    status: str
    fingerprint: int | None = None
    duplicate_of: str | None = None
    distance: int | None = None
    #: Sketch similarity to the page it duplicates (the verification stage's score).
    similarity: float | None = None
    #: A near-duplicate to drop (``SIMHASH_ACTION = "drop"``), not to flag.
    dropped: bool = False

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
            "dropped": self.dropped,
        }

    @classmethod
    def from_meta(cls, url: str, meta: Any) -> Decision | None:
        """The decision stored by :meth:`to_meta`, or None if ``meta`` is not one."""
        if not isinstance(meta, dict) or not isinstance(meta.get("status"), str):
            return None
        fp = meta.get("fingerprint")
        value = int(fp, 16) if isinstance(fp, str) and fp else None
        return cls(url, meta["status"], value, meta.get("duplicate_of"), meta.get("distance"), meta.get("similarity"),
                   meta.get("dropped") is True)  # fmt: skip


class ItemDecisions:
    """The decisions waiting for the items of their pages: handed over by the spider middleware (by item),
    else remembered by URL for the items that reach the pipeline without it (the most recent pages)."""

    def __init__(self) -> None:
        self._pending: dict[int, tuple[Any, Decision]] = {}
        self._recent: OrderedDict[str, Decision] = OrderedDict()

    def remember(self, decision: Decision) -> Decision:
        """Remember a page's decision by its URL; returns it."""
        self._recent[decision.url] = decision
        self._recent.move_to_end(decision.url)
        if len(self._recent) > RECENT_URLS:
            self._recent.popitem(last=False)
        return decision

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

    def item_done(self, item: Any, **kwargs: Any) -> None:
        """``item_scraped`` / ``item_dropped`` / ``item_error`` handler: the item's decision is not needed any more."""
        entry = self._pending.get(id(item))
        if entry is not None and entry[0] is item:
            del self._pending[id(item)]

    def clear(self) -> None:
        """Forget the items still waiting (the crawl ended)."""
        self._pending.clear()
