"""What the filter says in a crawl: the log lines written once (further cases only counted, by :mod:`.stats`),
the summary line at the end of the crawl and the ``simhash-filter report`` command for its feed.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from simhash_filter.crawl.decision import Decision, SkipReason
from simhash_filter.crawl.stats import FilterStats, PageWork
from simhash_filter.errors import IndexFullError, StoreFullError
from simhash_filter.index.backends import error_message
from simhash_filter.report import report_path

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

__all__ = ["Report", "logger", "report_command"]

#: The filter's logger, shared by its parts (a project may set its level by this name).
logger = logging.getLogger("simhash_filter.crawl.crawlfilter")


#: What the first page let through for a reason says (else: not fingerprinted).
_SKIPPED_WHY: dict[str, str] = {
    SkipReason.INDEX_ERROR: "the index failed; letting the page through",
    SkipReason.ERROR: "fingerprinting failed; letting the page through",
    SkipReason.AFTER_STOP: "the crawl stops after an index error; letting the page through without calling the index",
}


class Report:
    """Logs what the filter does, each kind once, beside its counts (:attr:`count`, the crawl's ``simhash/...``
    stats)."""

    def __init__(self, stats: StatsCollector, *, action: str, debug: bool) -> None:
        self.stats = stats
        self.action = action
        self.debug = debug
        #: The counts (the only writer of the ``simhash/...`` stats).
        self.count = FilterStats(stats)
        self._logged: set[str] = set()

    def skip(
        self,
        url: str,
        reason: str,
        *,
        level: int = logging.INFO,
        exc_info: bool | BaseException = False,
        fingerprint: int | None = None,
        logged: bool = False,
        work: PageWork | None = None,
    ) -> Decision:
        """The decision for a page let through unchecked, counted with its *work*; the first page of each reason
        is logged (unless ``logged``: the caller said why)."""
        self.count.skip(reason, work)
        decision = Decision(url, str(reason), fingerprint)
        if reason == SkipReason.DONT_SIMHASH:
            return decision
        if logged:
            self._logged.add(reason)
        if reason not in self._logged:
            self._logged.add(reason)
            level = logging.ERROR if exc_info else level
            what = _SKIPPED_WHY.get(reason, "not fingerprinted, let through")
            logger.log(
                level,
                "simhash: %s: %s (%s; further cases are only counted in simhash/skipped/%s)",
                url,
                reason,
                what,
                reason,
                exc_info=exc_info,
            )
        elif self.debug:
            logger.debug("simhash: skipped %s: %s", url, reason)
        return decision

    def log_decision(self, decision: Decision) -> Decision:
        """Log a checked page's *decision*: a near-duplicate and what becomes of it, the first only unless
        ``SIMHASH_DEBUG``; a kept page with ``SIMHASH_DEBUG``."""
        if not decision.near_duplicate:
            if self.debug:
                logger.debug("simhash: kept %s (fingerprint %s)", decision.url, decision.hex)
            return decision
        if decision.unchanged:
            what = "not indexed again (unchanged since it was kept)"
        else:
            what = "dropped" if decision.dropped else "flagged"
        if self.debug or "near_duplicate" not in self._logged:
            hint = "" if self.debug else " - no more near-duplicates will be shown (see SIMHASH_DEBUG to show all)"
            self._logged.add("near_duplicate")
            logger.debug(
                "simhash: %s %s: near-duplicate of %s (distance %d, fingerprint %s)%s",
                what,
                decision.url,
                decision.duplicate_of,
                decision.distance,
                decision.hex,
                hint,
            )
        return decision

    def count_once(self, key: str, url: str, message: str, level: int = logging.INFO) -> None:
        """Count an event in ``key``; the first one is logged with its page and ``message``."""
        self.count.count(key)
        if key not in self._logged:
            self._logged.add(key)
            logger.log(level, "simhash: %s: %s (further cases are only counted in %s)", url, message, key)

    def index_full(self, url: str, exc: IndexFullError) -> None:
        """A page goes through unchecked because the index is full (``simhash/index_full``); the first is one ERROR
        line that says what to do."""
        self.count.count("simhash/index_full")
        if "simhash/index_full" in self._logged:
            return
        self._logged.add("simhash/index_full")
        if not isinstance(exc, StoreFullError):
            logger.error(
                "simhash: %s; %s and the pages after it go through unchecked, or set SIMHASH_ON_INDEX_ERROR = 'stop' "
                "to stop the crawl instead (further pages are only counted in simhash/index_full)",
                error_message(exc)[:400],
                url,
            )
            return
        logger.error(
            "simhash: Redis is full (%s): %s and the pages after it go through unchecked; raise maxmemory "
            "(redis-cli info memory shows used_memory and maxmemory) or give the index a Redis of its own, or set "
            "SIMHASH_ON_INDEX_ERROR = 'stop' to stop the crawl instead (further pages are only counted in "
            "simhash/index_full)",
            error_message(exc)[:200],
            url,
        )

    def worker_restarted(self, lost: str | None) -> None:
        """A dead worker process (``lost`` says how it ended) is replaced; the first case is logged."""
        self.count.count("simhash/worker_restarts")
        if "simhash/worker_restarts" not in self._logged:
            self._logged.add("simhash/worker_restarts")
            logger.error(
                "simhash: %s; starting another, the pages it held are tried once more (further cases are only "
                "counted in simhash/worker_restarts)",
                lost,
            )

    def index_opened(self, where: str, scheme: str, size: int, rows: int | None = None) -> None:
        """Log where the index is, what earlier crawls left in it, and how to start empty (one INFO line)."""
        self.count.index_opened(size, rows)
        if scheme == "memory":
            logger.info("simhash: the index is in memory (%s): empty at the start, forgotten at the end", where)
            return
        if not size:
            logger.info("simhash: the index at %s holds no pages yet", where)
            return
        redis = scheme.startswith("redis")
        fresh = "another prefix= in SIMHASH_BACKEND" if redis else "delete it or set SIMHASH_BACKEND"
        items = "its items are dropped" if self.action == "drop" else "its items are flagged"
        logger.info(
            "simhash: the index at %s holds %d pages from earlier crawls: a page unchanged since then is let through "
            "but %s (to start empty: %s)",
            where,
            size,
            items,
            fresh,
        )

    def summary(self, index_size: int | str, where: str) -> str:
        """One line: what the filter did in this crawl (*index_size*: or why it is unknown; ``where``: where pages
        were fingerprinted)."""
        get = self.stats.get_value
        checked = get("simhash/checked", 0)
        skipped = sum(self.count.skipped.values())
        reasons = ", ".join(f"{n} {r}" for r, n in sorted(self.count.skipped.items()))
        seconds = get("simhash/fingerprint_seconds", 0.0)
        n = self.count.fingerprinted_pages
        per_page = f"{1000 * seconds / n:.2f} ms/page" if n else "no pages"
        in_reactor = get("simhash/fingerprinted_in_reactor")
        inline = ""
        if in_reactor:
            inline = f"; {in_reactor} pages in the reactor thread while workers started or after they failed"
        unchanged = ""
        if get("simhash/unchanged"):
            items = "their items dropped" if self.action == "drop" else "their items flagged as their own duplicates"
            unchanged = f", {get('simhash/unchanged')} unchanged since an earlier crawl ({items})"
        if get("simhash/refetched"):
            unchanged += f", {get('simhash/refetched')} fetched again in this crawl"
        size = f"index size {index_size}" if isinstance(index_size, int) else f"index size unknown: {index_size}"
        full = ""
        if get("simhash/index_full", 0):
            full = (f"; Redis is full: {get('simhash/index_full')} pages went unchecked; raise maxmemory or give the "
                    "index a Redis of its own (or SIMHASH_ON_INDEX_ERROR = 'stop')")  # fmt: skip
        return (
            f"simhash: {checked} pages checked: {get('simhash/kept', 0)} kept, "
            f"{get('simhash/near_duplicates', 0)} near-duplicates ({get('simhash/dropped', 0)} dropped, "
            f"{get('simhash/flagged', 0)} flagged{unchanged}); {skipped} skipped{f' ({reasons})' if reasons else ''}; "
            f"{size}; fingerprinting {per_page} {where} ({seconds:.2f} s in all{inline}){full}"
        )


#: Scrapy's names of the JSON Lines feed format, which ``simhash-filter report`` reads.
JSON_LINES_FORMATS = frozenset({"jsonlines", "jsonl", "jl"})


def _local_feed(uri: str, spider_name: str | None) -> str | None:
    """The path of a feed URI written to a local file (``%(name)s`` filled in), or None."""
    if spider_name is not None:
        uri = uri.replace("%(name)s", spider_name)
    if "%(" in uri:  # a time or a batch number, known to the feed exporter only
        return None
    parts = urlsplit(uri)
    if parts.scheme == "file":
        return unquote(parts.path)
    return uri if len(parts.scheme) <= 1 else None  # no scheme (or a drive letter)


def report_command(feeds: Mapping[Any, Mapping[str, Any] | None], spider_name: str | None, action: str) -> str | None:
    """The ``simhash-filter report`` command for the first local JSON Lines feed in ``FEEDS``, or None."""
    for uri, options in feeds.items():
        if (options or {}).get("format") not in JSON_LINES_FORMATS:
            continue
        path = _local_feed(str(uri), spider_name)
        if path is None:
            continue
        command = f"simhash-filter report {shlex.quote(path)} --output {shlex.quote(report_path(path))}"
        if action != "flag":
            command += " (near-duplicates were dropped, not stored: crawl with -s SIMHASH_ACTION=flag to see them)"
        return command
    return None
