"""The crawl's counts: every ``simhash/...`` stats key the filter keeps (docs/settings.md, Stats), and
:class:`FilterStats`, the only writer of them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import xxhash

from simhash_filter.crawl.decision import Decision, SkipReason

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

__all__ = ["AVOID_REASONS", "SECONDS_KEYS", "SKIP_REASONS", "FilterStats", "PageWork", "stats_keys"]


#: Every reason a page is let through unchecked (``simhash/skipped/<reason>``).
SKIP_REASONS = tuple(str(reason) for reason in SkipReason)
#: Why a request is left unsent or sent later (``SIMHASH_AVOID``: ``simhash/avoided/<reason>``).
AVOID_REASONS = ("url_rule", "mirror", "known")
#: The keys that hold seconds (0.0 rather than 0 before anything is timed).
SECONDS_KEYS = frozenset({"simhash/fingerprint_seconds", "simhash/fingerprint_max_seconds", "simhash/reactor_seconds",
                          "simhash/index_seconds"})  # fmt: skip


def stats_keys(*, avoid: bool = False, warc: bool = False) -> list[str]:
    """Every ``simhash/...`` key the crawl's stats hold from the start (0 until counted), those of ``SIMHASH_AVOID``
    and ``SIMHASH_WARC`` when they are on; not the distance histogram (``simhash/distance/<d>``)."""
    keys = ["simhash/checked", "simhash/kept", "simhash/near_duplicates", "simhash/dropped", "simhash/flagged",
            "simhash/unchanged", "simhash/refetched", *(f"simhash/skipped/{reason}" for reason in SKIP_REASONS),
            "simhash/truncated", "simhash/dataloss", "simhash/charset_errors", "simhash/items/flagged",
            "simhash/items/unflaggable", "simhash/items/unchecked", "simhash/index_size", "simhash/index_full",
            "simhash/candidates/max", "simhash/index_retries", "simhash/index_added_late",
            "simhash/index_retry_own_entry", *sorted(SECONDS_KEYS), "simhash/fingerprinted_in_reactor",
            "simhash/worker_restarts", "simhash/pages_closed", "simhash/page_close_errors"]  # fmt: skip
    if avoid:
        keys += [*(f"simhash/avoided/{reason}" for reason in AVOID_REASONS),
                 *(f"simhash/deprioritized/{reason}" for reason in AVOID_REASONS),
                 "simhash/avoid/validations", "simhash/avoid/rules_learned", "simhash/avoid/mirrors_learned",
                 "simhash/avoid/rules_withdrawn", "simhash/avoid/mirrors_withdrawn", "simhash/avoid/requeued",
                 "simhash/avoid/rules_active", "simhash/avoid/mirrors_active",
                 "simhash/avoid/notes_errors"]  # fmt: skip
    if warc:
        keys += ["simhash/warc/responses", "simhash/warc/revisits", "simhash/warc/errors"]
    return keys


@dataclass(slots=True)
class PageWork:
    """What one page's check measured (None: not), counted with its decision or its skip in one call."""

    fingerprint_seconds: float | None = None
    #: Fingerprinted in the reactor thread although worker processes were asked for.
    in_reactor: bool = False
    reactor_seconds: float | None = None
    #: Seconds of the index check in the reactor thread.
    index_seconds: float | None = None


class SeenUrls:
    """The URLs checked in this crawl, approximately: a Bloom filter of 2**27 bits (16 MiB) and three hashes,
    that tells a page fetched twice in one crawl from one unchanged since an earlier crawl, for their counts."""

    BITS = 1 << 27

    def __init__(self) -> None:
        self._bits = np.zeros(self.BITS // 8, dtype=np.uint8)

    def _positions(self, url: str) -> tuple[int, ...]:
        digest = xxhash.xxh3_128_intdigest(url.encode("utf-8", "surrogatepass"))
        return tuple((digest >> (40 * i)) % self.BITS for i in range(3))

    def add(self, url: str) -> bool:
        """Record *url*; whether it was (probably) recorded before."""
        seen = True
        for bit in self._positions(url):
            byte, mask = bit >> 3, 1 << (bit & 7)
            if not self._bits[byte] & mask:
                seen = False
                self._bits[byte] |= mask
        return seen


class FilterStats:
    """Counts what the filter does in the crawl's stats (``simhash/...``)."""

    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats
        #: Pages let through unchecked in this crawl, by reason (the summary's).
        self.skipped: Counter[str] = Counter()
        #: Pages fingerprinted in this crawl (wherever).
        self.fingerprinted_pages = 0
        self._checked_urls = SeenUrls()
        #: The index's size and rows when it was opened, which ``simhash/index_size`` is kept current from.
        self._size, self._rows = 0, 0

    def start(self, keys: list[str]) -> None:
        """Set every key of *keys* that is not counted yet to 0 (a monitor reads them whatever the crawl met)."""
        for key in keys:
            if self.stats.get_value(key) is None:
                self.stats.set_value(key, 0.0 if key in SECONDS_KEYS else 0)

    def count(self, key: str, n: int = 1) -> None:
        """An event counted in *key*."""
        self.stats.inc_value(key, n)

    def set(self, key: str, value: int) -> None:
        """*key* set to *value* (a number read at the end of the crawl)."""
        self.stats.set_value(key, value)

    def get(self, key: str) -> int:
        """What *key* counts so far (0: nothing)."""
        return int(self.stats.get_value(key, 0))

    def skip(self, reason: str, work: PageWork | None = None) -> None:
        """A page let through unchecked (``simhash/skipped/<reason>``), with the *work* done on it."""
        self.stats.inc_value(f"simhash/skipped/{reason}")
        self.skipped[reason] += 1
        if work is not None:
            self._worked(work)

    def checked(
        self,
        decision: Decision,
        work: PageWork | None = None,
        *,
        stored: bool,
        added_late: int = 0,
        rows: int | None = None,
        candidates: int = 0,
    ) -> None:
        """A page checked in the index (*stored*: it added an entry), with its *work*, the late adds that went with
        it, the index's *rows* (a local index) and the *candidates* its check verified."""
        if work is not None:
            self._worked(work)
        self.stats.max_value("simhash/candidates/max", candidates)
        if added_late:
            self.stats.inc_value("simhash/index_added_late", added_late)
        self.stats.inc_value("simhash/checked")
        fetched_before = self._checked_urls.add(decision.url)
        self._grown(rows, added_late + stored)
        if not decision.near_duplicate:
            self.stats.inc_value("simhash/kept")
            return
        self.stats.inc_value("simhash/near_duplicates")
        if decision.unchanged:  # its own entry: from an earlier crawl, or this page fetched again in this one
            self.stats.inc_value("simhash/refetched" if fetched_before else "simhash/unchanged")
        self.stats.inc_value(f"simhash/distance/{decision.distance}")
        self.stats.inc_value("simhash/dropped" if decision.dropped else "simhash/flagged")

    def _worked(self, work: PageWork) -> None:
        """What a page's check measured."""
        if work.fingerprint_seconds is not None:
            self.fingerprinted_pages += 1
            self._add_seconds("simhash/fingerprint_seconds", work.fingerprint_seconds)
            self.stats.max_value("simhash/fingerprint_max_seconds", work.fingerprint_seconds)
        if work.in_reactor:
            self.in_reactor()
        if work.reactor_seconds is not None:
            self.reactor_time(work.reactor_seconds)
        if work.index_seconds is not None:
            self.index_time(work.index_seconds)

    def _add_seconds(self, key: str, seconds: float) -> None:
        self.stats.set_value(key, self.stats.get_value(key, 0.0) + seconds)

    def in_reactor(self) -> None:
        """A page fingerprinted in the reactor thread although worker processes were asked for."""
        self.stats.inc_value("simhash/fingerprinted_in_reactor")

    def reactor_time(self, seconds: float) -> None:
        """Seconds the reactor thread spent on the filter's work."""
        self._add_seconds("simhash/reactor_seconds", seconds)

    def index_time(self, seconds: float) -> None:
        """Seconds of an index check in the reactor thread (counted with its page's :class:`PageWork`)."""
        self._add_seconds("simhash/reactor_seconds", seconds)
        self._add_seconds("simhash/index_seconds", seconds)

    def own_entry_found(self) -> None:
        """A retried index check found the page's own entry (its timed-out write landed)."""
        self.stats.inc_value("simhash/index_retry_own_entry")

    def index_opened(self, size: int, rows: int | None = None) -> None:
        """The index's size (and rows) when the crawl opened it."""
        self.index_size(size)
        self._size, self._rows = size, size if rows is None else rows

    def index_size(self, size: int) -> None:
        """The number of pages in the index, read from it (when the crawl starts and when it ends)."""
        self.stats.set_value("simhash/index_size", size)

    def _grown(self, rows: int | None, added: int) -> None:
        """Keep ``simhash/index_size`` current: from a local index's *rows*, else by the pages *added* (a remote
        index's size is read again at the end)."""
        if rows is not None:
            self.stats.set_value("simhash/index_size", self._size + rows - self._rows)
        elif added:
            self.stats.inc_value("simhash/index_size", added)
