"""The crawl's report of the filter: every ``simhash/...`` stats key it counts, the log lines written once
(further cases only counted), the decisions' counts, and the summary line at the end of the crawl.
"""

from __future__ import annotations

import logging
import shlex
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import numpy as np
import xxhash

from simhash_filter.crawl.decision import AFTER_STOP, DONT_META_KEY, ERROR, INDEX_ERROR, WORKER_DIED, Decision
from simhash_filter.index.backends import IndexFullError, error_message
from simhash_filter.model.fingerprint import Status
from simhash_filter.report import report_path

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from simhash_filter.index.tables import Match

__all__ = ["SKIP_REASONS", "Report", "logger", "report_command", "stats_keys"]

#: The filter's logger, shared by its parts: its log lines keep the name they had when the filter was one
#: module (a project may set its level by that name).
logger = logging.getLogger("simhash_filter.crawl.crawlfilter")


#: Every reason a page is let through unchecked (``simhash/skipped/<reason>``).
SKIP_REASONS = (*(str(s) for s in Status if s is not Status.OK), "http_status", ERROR, WORKER_DIED, INDEX_ERROR,
                AFTER_STOP, DONT_META_KEY)  # fmt: skip
#: Why a request is left unsent or sent later (``SIMHASH_AVOID``: ``simhash/avoided/<reason>``).
AVOID_REASONS = ("url_rule", "mirror", "known")
#: The keys that hold seconds (0.0 rather than 0 before anything is timed).
SECONDS_KEYS = frozenset({"simhash/fingerprint_seconds", "simhash/fingerprint_max_seconds", "simhash/reactor_seconds",
                          "simhash/index_seconds"})  # fmt: skip


def stats_keys(*, avoid: bool = False, warc: bool = False) -> list[str]:
    """The keys a monitor reads: every ``simhash/...`` key the crawl's stats hold from the start (0 until counted;
    docs/settings.md, Stats), those of ``SIMHASH_AVOID`` and ``SIMHASH_WARC`` when they are on.  Only the distance
    histogram (``simhash/distance/<d>``) is left out: its keys are the distances met."""
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


class SeenUrls:
    """The URLs checked in this crawl, approximately, in a fixed 16 MiB (allocated as pages are touched): a Bloom
    filter of 2**27 bits and three hashes (false positives: about 0.001 % at a million URLs, 0.8 % at ten
    million).  It only tells a page fetched twice in one crawl from a page unchanged since an earlier crawl, for
    their counts."""

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


class Report:
    """Counts what the filter does in the crawl's stats (``simhash/...``) and logs it, each kind once."""

    def __init__(self, stats: StatsCollector, *, action: str, debug: bool) -> None:
        self.stats = stats
        self.action = action
        self.debug = debug
        self._logged: set[str] = set()
        self._counts: Counter[str] = Counter()
        self._fingerprinted = 0
        self._checked_urls = SeenUrls()
        #: The index's size and rows when it was opened, which ``simhash/index_size`` is kept current from.
        self._size, self._rows = 0, 0

    def start(self, keys: list[str]) -> None:
        """Set every key of :func:`stats_keys` that is not counted yet to 0, so that a monitor reads
        ``stats["simhash/kept"]`` whatever the crawl met."""
        for key in keys:
            if self.stats.get_value(key) is None:
                self.stats.set_value(key, 0.0 if key in SECONDS_KEYS else 0)

    # --- decisions ----------------------------------------------------------------------------

    def skip(
        self,
        url: str,
        reason: str,
        *,
        level: int = logging.INFO,
        exc_info: bool | BaseException = False,
        fingerprint: int | None = None,
        logged: bool = False,
    ) -> Decision:
        """The decision for a page let through unchecked, counted in ``simhash/skipped/<reason>``; the first
        page of each reason is logged (unless ``logged``: the caller said why)."""
        self.stats.inc_value(f"simhash/skipped/{reason}")
        self._counts[reason] += 1
        decision = Decision(url, reason, fingerprint)
        if reason == DONT_META_KEY:
            return decision
        if logged:
            self._logged.add(reason)
        if reason not in self._logged:
            self._logged.add(reason)
            level = logging.ERROR if exc_info else level
            what = {
                INDEX_ERROR: "the index failed; letting the page through",
                ERROR: "fingerprinting failed; letting the page through",
                AFTER_STOP: "the crawl stops after an index error; letting the page through without calling the index",
            }.get(reason, "not fingerprinted, let through")
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

    def decided(
        self, url: str, value: int, match: Match | None, added_late: int = 0, *, rows: int | None = None
    ) -> Decision:
        """The decision for a checked page, counted in the stats; ``simhash/index_size`` follows the index's *rows*
        (a local index), else the pages this one and the late ones add."""
        if added_late:
            self.stats.inc_value("simhash/index_added_late", added_late)
        self.stats.inc_value("simhash/checked")
        fetched_before = self._checked_urls.add(url)
        own_entry = match is not None and match.key == url and match.fingerprint == value  # not stored twice
        self._grown(rows, added_late + (not own_entry))
        if match is None:
            decision = Decision(url, Status.OK.value, value)
            self.stats.inc_value("simhash/kept")
            if self.debug:
                logger.debug("simhash: kept %s (fingerprint %s)", url, decision.hex)
        else:
            decision = Decision(url, Status.OK.value, value, match.key, match.distance, match.similarity)
            self.stats.inc_value("simhash/near_duplicates")
            if decision.unchanged:  # its own entry: from an earlier crawl, or this page fetched again in this one
                self.stats.inc_value("simhash/refetched" if fetched_before else "simhash/unchanged")
            self.stats.inc_value(f"simhash/distance/{match.distance}")
            self.stats.inc_value("simhash/dropped" if self.action == "drop" else "simhash/flagged")
        return decision

    def log_near_duplicate(self, decision: Decision, what: str) -> None:
        """Log a near-duplicate: every one with ``SIMHASH_DEBUG``, else the first one only."""
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

    # --- events -------------------------------------------------------------------------------

    def count_once(self, key: str, url: str, message: str, level: int = logging.INFO) -> None:
        """Count an event in ``key``; the first one is logged with its page and ``message``."""
        self.stats.inc_value(key)
        if key not in self._logged:
            self._logged.add(key)
            logger.log(level, "simhash: %s: %s (further cases are only counted in %s)", url, message, key)

    def fingerprinted(self, seconds: float) -> None:
        """A page was fingerprinted in ``seconds`` (wherever it was)."""
        self._fingerprinted += 1
        self.stats.inc_value("simhash/fingerprint_seconds", seconds)
        self.stats.max_value("simhash/fingerprint_max_seconds", seconds)

    def in_reactor(self) -> None:
        """A page is fingerprinted in the reactor thread although worker processes were asked for."""
        self.stats.inc_value("simhash/fingerprinted_in_reactor")

    def reactor_time(self, seconds: float) -> None:
        """Seconds the reactor thread spent on the filter's work."""
        self.stats.inc_value("simhash/reactor_seconds", seconds)

    def index_time(self, seconds: float) -> None:
        """Seconds of an index check in the reactor thread."""
        self.stats.inc_value("simhash/reactor_seconds", seconds)
        self.stats.inc_value("simhash/index_seconds", seconds)

    def index_full(self, url: str, exc: BaseException) -> None:
        """A page goes through unchecked because the index is full (counted in ``simhash/index_full``): its Redis,
        or the pages its tables take; the first one is one ERROR line, without a traceback, that says what to do."""
        self.stats.inc_value("simhash/index_full")
        if "simhash/index_full" in self._logged:
            return
        self._logged.add("simhash/index_full")
        if isinstance(exc, IndexFullError):
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

    def candidates(self, most: int) -> None:
        """The most candidates one check has verified so far (``simhash/candidates/max``: the bound on a check's
        work, at most five times ``SIMHASH_CANDIDATES_PER_TABLE``)."""
        self.stats.max_value("simhash/candidates/max", most)

    def own_entry_found(self) -> None:
        """A retried index check found the page's own entry (its timed-out write landed)."""
        self.stats.inc_value("simhash/index_retry_own_entry")

    def worker_restarted(self, lost: str | None) -> None:
        """A dead worker process (``lost`` says how it ended) is replaced; the first case is logged."""
        self.stats.inc_value("simhash/worker_restarts")
        if "simhash/worker_restarts" not in self._logged:
            self._logged.add("simhash/worker_restarts")
            logger.error(
                "simhash: %s; starting another, the pages it held are tried once more (further cases are only "
                "counted in simhash/worker_restarts)",
                lost,
            )

    def _grown(self, rows: int | None, added: int) -> None:
        """Keep ``simhash/index_size`` current after a check: from the local index's *rows* (exact, no call), else
        by the pages *added* (a remote index: its own entry is not stored twice; the read at the end corrects the
        count for other crawl processes' pages and for copies of a flood it did not store)."""
        if rows is not None:
            self.stats.set_value("simhash/index_size", self._size + rows - self._rows)
        elif added:
            self.stats.inc_value("simhash/index_size", added)

    def index_opened(self, where: str, scheme: str, size: int, rows: int | None = None) -> None:
        """Log where the index is, what earlier crawls left in it, and how to start empty (one INFO line)."""
        self.index_size(size)
        self._size, self._rows = size, size if rows is None else rows
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

    def index_size(self, size: int) -> None:
        """The number of pages in the index, read from it (when the crawl starts and when it ends)."""
        self.stats.set_value("simhash/index_size", size)

    # --- the end ------------------------------------------------------------------------------

    def summary(self, index_size: int | str, where: str) -> str:
        """One line: what the filter did in this crawl (``where``: where pages were fingerprinted).  *index_size* is
        the index's size, or why it is unknown (the line is written all the same: it is the crawl's record)."""
        get = self.stats.get_value
        checked = get("simhash/checked", 0)
        skipped = sum(self._counts.values())
        reasons = ", ".join(f"{n} {r}" for r, n in sorted(self._counts.items()))
        seconds = get("simhash/fingerprint_seconds", 0.0)
        n = self._fingerprinted
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
        return (
            f"simhash: {checked} pages checked: {get('simhash/kept', 0)} kept, "
            f"{get('simhash/near_duplicates', 0)} near-duplicates ({get('simhash/dropped', 0)} dropped, "
            f"{get('simhash/flagged', 0)} flagged{unchanged}); {skipped} skipped{f' ({reasons})' if reasons else ''}; "
            f"{_size_part(index_size)}; fingerprinting {per_page} {where} ({seconds:.2f} s in all{inline})"
            f"{self._full()}"
        )

    def _full(self) -> str:
        """The summary's words on a full Redis ('' when it was not)."""
        full = self.stats.get_value("simhash/index_full", 0)
        if not full:
            return ""
        return (
            f"; Redis is full: {full} pages went unchecked; raise maxmemory or give the index a Redis of its own "
            "(or SIMHASH_ON_INDEX_ERROR = 'stop')"
        )


def _size_part(index_size: int | str) -> str:
    """The summary's words on the index's size: ``index size N``, or ``index size unknown: <why>``."""
    if isinstance(index_size, int):
        return f"index size {index_size}"
    return f"index size unknown: {index_size}"


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
