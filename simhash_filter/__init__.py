"""Near-duplicate detection of web pages in two stages: a 64-bit simhash of each page's DOM structure and
text finds candidates in an index of permuted tables (Manku et al.), and a sketch of its words verifies them.

    from simhash_filter import DEFAULTS, fingerprint, open_index
    index, fp = open_index(DEFAULTS), fingerprint(html)
    match = index.check_and_add(fp.value, url, fp.sketch)   # None: new; else the page it duplicates

In a Scrapy project: ``ADDONS = {"simhash_filter.SimhashAddon": 0}``.  The Scrapy components are
imported on first use, so that ``import simhash_filter`` does not import Scrapy.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from simhash_filter.config import DEFAULTS, FilterConfig, FingerprintConfig
from simhash_filter.errors import (
    CorruptIndexError,
    DesignMismatchError,
    IndexFullError,
    IndexLockedError,
    MetadataMismatchError,
    StoreError,
    StoreFullError,
)
from simhash_filter.index.nearduplicate import NearDuplicateIndex, open_index
from simhash_filter.index.tables import Match, hamming
from simhash_filter.model.fingerprint import Fingerprint, Fingerprinter, Status, fingerprint

try:
    __version__ = version("simhash-filter")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "DEFAULTS",
    "CorruptIndexError",
    "DesignMismatchError",
    "FilterConfig",
    "Fingerprint",
    "FingerprintConfig",
    "Fingerprinter",
    "IndexFullError",
    "IndexLockedError",
    "Match",
    "MetadataMismatchError",
    "NearDuplicateIndex",
    "NearDuplicateItem",
    "NearDuplicateResponse",
    "SimhashAddon",
    "SimhashDownloaderMiddleware",
    "SimhashExtension",
    "SimhashPipeline",
    "SimhashSpiderMiddleware",
    "Status",
    "StoreError",
    "StoreFullError",
    "__version__",
    "fingerprint",
    "hamming",
    "open_index",
]

# The Scrapy glue, by module: imported lazily (PEP 562).
_SCRAPY_COMPONENTS = {
    "SimhashAddon": "simhash_filter.crawl.addon",
    "SimhashExtension": "simhash_filter.crawl.crawlfilter",
    "SimhashDownloaderMiddleware": "simhash_filter.crawl.middlewares",
    "SimhashSpiderMiddleware": "simhash_filter.crawl.middlewares",
    "NearDuplicateResponse": "simhash_filter.crawl.middlewares",
    "SimhashPipeline": "simhash_filter.crawl.pipelines",
    "NearDuplicateItem": "simhash_filter.crawl.pipelines",
}


def __getattr__(name: str) -> Any:
    module = _SCRAPY_COMPONENTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module), name)
