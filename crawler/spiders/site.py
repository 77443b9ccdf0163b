"""A generic site spider: follows links within the start URLs' hosts and stores every HTML page.

    scrapy crawl site -a start_urls=https://example.com/,https://mirror.example.com/
    scrapy crawl site -a start_urls=https://example.com/ -a allowed_domains=example.com -a store=both -O pages.jsonl

Near-duplicates never reach the spider (``SIMHASH_ACTION = "drop"``, the default) or arrive flagged
(``"flag"``); the simhash pipeline adds ``fingerprint`` (and the flag fields) to the items.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import HtmlResponse, Response
from scrapy.linkextractors import LinkExtractor
from scrapy.settings import BaseSettings

from crawler.items import PageItem

STORE_CHOICES = ("text", "html", "both")
_SPACE = re.compile(r"\s+")
_VISIBLE_TEXT = "//body//text()[not(ancestor::script or ancestor::style or ancestor::noscript or ancestor::template)]"


def split_list(value: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """``"a, b,,c"`` → ``["a", "b", "c"]``; lists are returned as they are."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return list(value)


class SiteSpider(scrapy.Spider):
    """Crawls the sites of ``-a start_urls=URL[,URL...]``, one item per HTML page.

    Arguments: ``start_urls`` (required), ``allowed_domains`` (default: the start URLs' hosts; a
    domain allows its subdomains), ``store`` (``text``, ``html`` or ``both``; default ``text``).
    """

    name = "site"

    def __init__(
        self,
        start_urls: str | list[str] | None = None,
        allowed_domains: str | list[str] | None = None,
        store: str = "text",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        urls = split_list(start_urls)
        if not urls:
            raise ValueError("the site spider needs start URLs: scrapy crawl site -a start_urls=URL[,URL...]")
        bad = [u for u in urls if urlsplit(u).scheme not in ("http", "https") or not urlsplit(u).hostname]
        if bad:
            raise ValueError(f"start_urls must be http(s) URLs, got {', '.join(bad)}")
        if store not in STORE_CHOICES:
            raise ValueError(f"store must be one of {', '.join(STORE_CHOICES)}, got {store!r}")
        self.start_urls = urls
        self.allowed_domains = split_list(allowed_domains) or sorted({urlsplit(u).hostname or "" for u in urls})
        self.store = store
        # Links to other hosts are dropped by Scrapy's OffsiteMiddleware (allowed_domains, any port).
        self.link_extractor = LinkExtractor()

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        super().update_settings(settings)
        feed = settings.get("SITE_FEED")
        if feed and not settings.getdict("FEEDS"):
            settings.set("FEEDS", {feed: {"format": "jsonlines", "overwrite": True}}, priority="spider")

    async def start(self) -> AsyncIterator[Any]:
        # Not dont_filter (unlike Spider.start): a later link to a start page is a duplicate request.
        for url in self.start_urls:
            yield scrapy.Request(url, callback=self.parse)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        if not isinstance(response, HtmlResponse):
            return  # images, PDFs, JSON: not pages to store
        yield self.page_item(response)
        for link in self.link_extractor.extract_links(response):
            yield response.follow(link, callback=self.parse)

    def page_item(self, response: HtmlResponse) -> PageItem:
        item = PageItem(
            url=response.url,
            title=_SPACE.sub(" ", " ".join(response.xpath("//title//text()").getall())).strip(),
            fetched_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )
        if self.store in ("text", "both"):
            parts = (_SPACE.sub(" ", t).strip() for t in response.xpath(_VISIBLE_TEXT).getall())
            item["text"] = "\n".join(p for p in parts if p)
        if self.store in ("html", "both"):
            item["html"] = response.text
        return item
