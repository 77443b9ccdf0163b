"""The Scrapy add-on, ``ADDONS = {"simhash_filter.SimhashAddon": 0}``: every ``SIMHASH_*`` default at add-on
priority, and the filter's extension, middlewares and pipeline unless the project lists them already.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured

from simhash_filter.crawl.crawlfilter import SimhashExtension
from simhash_filter.crawl.middlewares import SimhashDownloaderMiddleware, SimhashSpiderMiddleware
from simhash_filter.crawl.pipelines import SimhashPipeline
from simhash_filter.crawl.settings import default_settings

if TYPE_CHECKING:
    from scrapy.settings import Settings

__all__ = [
    "DOWNLOADER_MIDDLEWARE_PRIORITY",
    "EXTENSION_PRIORITY",
    "PIPELINE_PRIORITY",
    "SPIDER_MIDDLEWARE_PRIORITY",
    "SimhashAddon",
]

#: After retries (550), meta refresh (580), decompression (590) and redirects (600).
DOWNLOADER_MIDDLEWARE_PRIORITY = 540
#: Next to the engine, so that it sees the item objects that the pipelines will get.
SPIDER_MIDDLEWARE_PRIORITY = 40
#: Early, so that later pipelines (storage) never see a dropped near-duplicate.
PIPELINE_PRIORITY = 100
#: The filter the components share (:class:`~simhash_filter.crawl.crawlfilter.SimhashExtension`).
EXTENSION_PRIORITY = 0


class SimhashAddon:
    """Enables the near-duplicate filter with the ``SIMHASH_*`` defaults."""

    def update_settings(self, settings: Settings) -> None:
        for name, value in default_settings().items():
            settings.set(name, value, priority="addon")
        if not settings.getbool("SIMHASH_ENABLED"):
            raise NotConfigured  # silently: the project turned the filter off
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", SimhashDownloaderMiddleware, DOWNLOADER_MIDDLEWARE_PRIORITY
        )
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", SimhashSpiderMiddleware, SPIDER_MIDDLEWARE_PRIORITY
        )
        settings.setdefault_in_component_priority_dict("ITEM_PIPELINES", SimhashPipeline, PIPELINE_PRIORITY)
        settings.setdefault_in_component_priority_dict("EXTENSIONS", SimhashExtension, EXTENSION_PRIORITY)
