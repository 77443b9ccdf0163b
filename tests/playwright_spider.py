"""A spider that renders every page in Debian's chromium through scrapy-playwright and keeps each page
(``playwright_include_page=True``), as scrapy-playwright's users do; for ``tests/test_playwright_crawl.py``.

It has no errback: a response the filter drops never reaches ``parse``, so only the filter can close its page.
With ``PLAYWRIGHT_MAX_PAGES_PER_CONTEXT = 4`` a crawl whose dropped pages stay open stops fetching after four
of them and never ends.

    python -m scrapy.cmdline runspider tests/playwright_spider.py -a start_url=http://127.0.0.1:PORT/ -O items.jsonl
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

import scrapy
from browser import CHROMIUM, CHROMIUM_ARGS

#: What a crawl of the spider needs: scrapy-playwright's handlers, Debian's chromium (never a downloaded
#: browser), four pages per context, and the filter dropping near-duplicates in an in-memory index.
SETTINGS: dict[str, Any] = {
    "DOWNLOAD_HANDLERS": {
        "http": "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler",
        "https": "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler",
    },
    "TWISTED_REACTOR": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
    "PLAYWRIGHT_BROWSER_TYPE": "chromium",
    "PLAYWRIGHT_LAUNCH_OPTIONS": {"executable_path": CHROMIUM, "args": CHROMIUM_ARGS, "headless": True},
    "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": 4,
    "ADDONS": {"simhash_filter.SimhashAddon": 0},
    "SIMHASH_BACKEND": "memory://",
    "SIMHASH_ACTION": "drop",
    "SIMHASH_PROCESSES": 0,
    "ROBOTSTXT_OBEY": False,
}

#: The meta of every request: rendered by Playwright, the page handed to the callback.
PLAYWRIGHT_META = {"playwright": True, "playwright_include_page": True}


class PlaywrightSpider(scrapy.Spider):
    """Follows the links of the start page; one item per page it reaches, each page closed by the callback."""

    name = "playwright_pages"
    custom_settings: ClassVar[dict[str, Any]] = SETTINGS

    def __init__(self, start_url: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_url = start_url

    async def start(self) -> AsyncIterator[scrapy.Request]:
        yield scrapy.Request(self.start_url, meta=PLAYWRIGHT_META, callback=self.parse_front)

    async def parse_front(self, response: scrapy.http.Response) -> AsyncIterator[scrapy.Request]:
        """The start page: close its page, follow its links."""
        await response.meta["playwright_page"].close()
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, meta=PLAYWRIGHT_META, callback=self.parse)

    async def parse(self, response: scrapy.http.Response, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        """An article: its title read from the live page, then the page closed."""
        page = response.meta["playwright_page"]
        title = await page.title()
        await page.close()
        yield {"url": response.url, "title": title}
