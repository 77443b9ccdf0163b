"""Items of the crawler project."""

from __future__ import annotations

import scrapy


class PageItem(scrapy.Item):
    """One stored page.  Only the fields that are set are exported."""

    #: The final URL (after redirects).
    url = scrapy.Field()
    #: The page's ``<title>``, whitespace collapsed.
    title = scrapy.Field()
    #: When the page was fetched: UTC, ISO 8601.
    fetched_at = scrapy.Field()
    #: Visible text of the body (``-a store=text`` or ``both``).
    text = scrapy.Field()
    #: The HTML as served (``-a store=html`` or ``both``).
    html = scrapy.Field()
    #: The page's 64-bit simhash, 16 hex digits (set by the simhash pipeline).
    fingerprint = scrapy.Field()
    #: With ``SIMHASH_ACTION = "flag"``: the URL of the kept page this one duplicates, or None.
    duplicate_of = scrapy.Field()
    #: With ``SIMHASH_ACTION = "flag"``: the Hamming distance to that page, or None.
    distance = scrapy.Field()
    #: With ``SIMHASH_ACTION = "flag"``: the sketch similarity to that page (0..1, 3 decimals), or None.
    similarity = scrapy.Field()
    #: With ``SIMHASH_ACTION = "flag"``: why the filter let the page through unchecked (``too_few_features``, ...).
    skipped = scrapy.Field()
