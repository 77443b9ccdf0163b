"""Near-duplicate detection of web pages: 64-bit simhash fingerprints of DOM structure and text,
and an exact index of everything kept (Manku et al.'s permuted tables, f = 64, k = 3).

    from simhash_filter import fingerprint, hamming, NearDuplicateIndex
    index = NearDuplicateIndex(k=3)
    match = index.check_and_add(fingerprint(html).value, url)   # None: kept; else the page it duplicates

In a Scrapy project: ``ADDONS = {"simhash_filter.SimhashAddon": 0}``.  The Scrapy components are
imported on first use, so that ``import simhash_filter`` does not import Scrapy.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from simhash_filter.config import DEFAULTS, FilterConfig, FingerprintConfig
from simhash_filter.fingerprint import Fingerprint, Fingerprinter, Status, fingerprint
from simhash_filter.index import Match, NearDuplicateIndex, hamming

try:
    __version__ = version("simhash-filter")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "DEFAULTS",
    "FilterConfig",
    "Fingerprint",
    "FingerprintConfig",
    "Fingerprinter",
    "Match",
    "NearDuplicateIndex",
    "NearDuplicateItem",
    "NearDuplicateResponse",
    "SimhashAddon",
    "SimhashDownloaderMiddleware",
    "SimhashPipeline",
    "SimhashSpiderMiddleware",
    "Status",
    "__version__",
    "fingerprint",
    "hamming",
]

# The Scrapy glue, by module: imported lazily (PEP 562).
_SCRAPY_COMPONENTS = {
    "SimhashAddon": "simhash_filter.addon",
    "SimhashDownloaderMiddleware": "simhash_filter.middlewares",
    "SimhashSpiderMiddleware": "simhash_filter.middlewares",
    "NearDuplicateResponse": "simhash_filter.middlewares",
    "SimhashPipeline": "simhash_filter.pipelines",
    "NearDuplicateItem": "simhash_filter.pipelines",
}


def __getattr__(name: str) -> Any:
    module = _SCRAPY_COMPONENTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module), name)
