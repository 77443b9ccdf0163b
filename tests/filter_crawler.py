"""A crawler for tests that build the filter's components themselves: ``scrapy.utils.test.get_crawler`` with the
extension that holds the filter enabled, as the add-on enables it."""

from __future__ import annotations

from typing import Any

from scrapy import Spider
from scrapy.crawler import Crawler
from scrapy.utils.test import get_crawler

from simhash_filter.crawl.crawlfilter import SimhashExtension


def filter_crawler(settings: dict[str, Any] | None = None, spidercls: type[Spider] = Spider) -> Crawler:
    """A crawler whose settings are *settings* and the filter's extension (its filter is made now)."""
    return get_crawler(spidercls, {"EXTENSIONS": {SimhashExtension: 0}, **(settings or {})})
