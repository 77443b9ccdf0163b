"""Scrapy item pipeline of the near-duplicate filter: :class:`SimhashPipeline` applies the decision of the
response an item came from (or fingerprints its ``SIMHASH_ITEM_FIELDS``) to items of any type, through itemadapter:
``fingerprint``, and with ``SIMHASH_ACTION = "flag"`` ``duplicate_of``, ``distance``, ``similarity`` and
``skipped`` where the item has room for them; with ``"drop"`` a near-duplicate item is dropped (docs/usage.md).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem

from simhash_filter.crawl.crawlfilter import CrawlFilter
from simhash_filter.crawl.decision import Decision

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    # typing.Self requires Python 3.11
    from typing_extensions import Self

__all__ = ["NearDuplicateItem", "SimhashPipeline"]

logger = logging.getLogger(__name__)


class NearDuplicateItem(DropItem):
    """An item dropped as a near-duplicate (counted in ``item_dropped_reasons_count/NearDuplicateItem``)."""

    def __init__(self, decision: Decision) -> None:
        super().__init__(
            f"near-duplicate of {decision.duplicate_of} (distance {decision.distance}, fingerprint {decision.hex})",
            log_level="DEBUG",
        )
        self.url = decision.url
        self.duplicate_of = decision.duplicate_of
        self.distance = decision.distance
        self.fingerprint = decision.hex


class SimhashPipeline:
    """Drops or flags items that are near-duplicates; adds ``fingerprint`` to the others."""

    def __init__(self, crawl_filter: CrawlFilter) -> None:
        self.filter = crawl_filter
        self._warned: set[type] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(CrawlFilter.for_crawler(crawler))

    async def process_item(self, item: Any) -> Any:
        crawl_filter = self.filter
        decision = crawl_filter.items.decision_for(item)
        if (decision is None or decision.fingerprint is None) and crawl_filter.policy.item_fields:
            checked = await crawl_filter.check_item(item)
            if checked is not None:
                decision = checked
        if decision is None:
            crawl_filter.report.count.count("simhash/items/unchecked")
            return item
        if decision.fingerprint is None:
            if crawl_filter.options.action == "flag":  # why it was let through unchecked, where it fits
                adapter = ItemAdapter(item)
                if "skipped" not in adapter:
                    self._set(item, {"skipped": decision.status})
            return item
        if decision.dropped:
            raise NearDuplicateItem(decision)
        values: dict[str, Any] = {"fingerprint": decision.hex}
        if crawl_filter.options.action == "flag":
            values.update(duplicate_of=decision.duplicate_of, distance=decision.distance)
        missing = self._set(item, values)
        if crawl_filter.options.action == "flag":  # where the item has room for it (a declared field is optional)
            similarity = None if decision.similarity is None else round(decision.similarity, 3)
            self._set(item, {"similarity": similarity})
            if not decision.checked and "skipped" not in ItemAdapter(item):  # fingerprinted, the index failed
                self._set(item, {"skipped": decision.status})
        if decision.near_duplicate:
            if "duplicate_of" in missing:
                crawl_filter.report.count.count("simhash/items/unflaggable")
            else:
                crawl_filter.report.count.count("simhash/items/flagged")
        if missing:
            self._warn_missing(item, missing)
        return item

    @staticmethod
    def _set(item: Any, values: dict[str, Any]) -> list[str]:
        """Set fields through itemadapter; the names the item type does not support."""
        adapter = ItemAdapter(item)
        missing = []
        for name, value in values.items():
            try:
                adapter[name] = value
            except (KeyError, AttributeError, TypeError):  # undeclared field, frozen dataclass
                missing.append(name)
        return missing

    def _warn_missing(self, item: Any, missing: list[str]) -> None:
        cls = type(item)
        if cls in self._warned:
            return
        self._warned.add(cls)
        logger.warning(
            "simhash: %s items have no field %s: add %s to the item class to carry the filter's decision%s",
            cls.__name__,
            ", ".join(missing),
            ", ".join(repr(n) for n in missing),
            " (flagged near-duplicates are counted in simhash/items/unflaggable)" if "duplicate_of" in missing else "",
        )
