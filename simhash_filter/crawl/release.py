"""What a dropped response holds, released: a Playwright page (scrapy-playwright's ``meta["playwright_page"]``)
is the spider's to close, and a dropped response never reaches the spider; held, it would count against
``PLAYWRIGHT_MAX_PAGES_PER_CONTEXT`` until the crawl waits for ever.  The page is duck-typed (no Playwright import);
a failure to close it is counted (``simhash/page_close_errors``), the first logged, and the drop goes on.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simhash_filter.crawl.stats import FilterStats

__all__ = ["PAGE_META_KEYS", "HeldPages"]

logger = logging.getLogger(__name__)

#: The ``request.meta`` keys that hold a browser page the spider would have closed.
PAGE_META_KEYS = ("playwright_page",)


class HeldPages:
    """Closes the browser pages a dropped response holds in its meta, so that their slots are given back."""

    def __init__(self, count: FilterStats | None = None) -> None:
        self.count = count
        self._logged_error = False

    async def release(self, meta: dict[str, Any]) -> None:
        """Close every page held in ``meta``; never raises (the response is dropped all the same)."""
        for key in PAGE_META_KEYS:
            page = meta.get(key)
            close = getattr(page, "close", None)
            if page is None or not callable(close):
                continue
            try:
                result = close()
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:  # a page that fails to close must not turn a drop into a spider error
                self._failed(key, exc)
            else:
                self._inc("simhash/pages_closed")

    def _failed(self, key: str, exc: Exception) -> None:
        """Count a failed close; log the first."""
        self._inc("simhash/page_close_errors")
        if not self._logged_error:
            self._logged_error = True
            logger.warning(
                "simhash: the %s of a dropped near-duplicate could not be closed (%s: %s); the drop goes on, "
                "further failures are counted in simhash/page_close_errors",
                key,
                type(exc).__name__,
                exc,
            )

    def _inc(self, key: str) -> None:
        if self.count is not None:
            self.count.count(key)
