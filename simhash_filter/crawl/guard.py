"""The index guard: every check-and-add of a crawl's page made so that a failing index never raises into the
crawl (a remote index called off the reactor thread, retries behind a circuit breaker, the pages let through
meanwhile added late, once, when the index answers again).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor

from simhash_filter.crawl.decision import Decision, SkipReason
from simhash_filter.crawl.report import Report, logger
from simhash_filter.crawl.stats import PageWork
from simhash_filter.crawl.waiting import in_executor, sleep
from simhash_filter.errors import IndexFullError
from simhash_filter.index.nearduplicate import NearDuplicateIndex
from simhash_filter.index.tables import Match
from simhash_filter.model.fingerprint import Status

__all__ = ["IndexGuard"]

#: Waits between retries of a failed index check (seconds; doubled each time up to the maximum).
RETRY_FIRST_DELAY, RETRY_MAX_DELAY = 0.5, 10.0
#: Pages let through unchecked while the index failed, remembered to be added when it answers again, at most.
UNINDEXED_LIMIT = 100_000
#: After an index error, pages do not call the index for this many seconds (they wait or go through).
INDEX_BREAK_SECONDS = 5.0

#: A page let through unchecked while the index failed: (fingerprint, url, sketch).
_Page = tuple[int, str, bytes | None]


class _Stopped(Exception):
    """A check due after the crawl was stopped: not made (:meth:`IndexGuard.stop`)."""


def _own_entry(match: Match | None, value: int, url: str) -> bool:
    """Whether *match* is the entry of this very page: its URL with its fingerprint (distance 0)."""
    return match is not None and match.key == url and match.fingerprint == value and match.distance == 0


class IndexGuard:
    """Checks-and-adds pages in ``index``; an index error lets the page through (``index_error``)."""

    def __init__(
        self,
        index: NearDuplicateIndex,
        report: Report,
        *,
        retry_seconds: float = 0.0,
        readonly: bool = False,
        drop: bool = True,
    ) -> None:
        self.index = index
        self.report = report
        self.retry_seconds = retry_seconds
        #: Check pages without storing them (an inspection command).
        self.readonly = readonly
        #: Near-duplicates are dropped (``SIMHASH_ACTION = "drop"``), else flagged: :attr:`Decision.dropped`.
        self.drop = drop
        # a remote index's checks run in one thread of their own, in order
        remote = self._remote = getattr(index.backend, "remote", False)
        self._index_executor = ThreadPoolExecutor(1, thread_name_prefix="simhash-index") if remote else None
        self._index_down_until = 0.0  # the breaker: monotonic time before which the index is not called
        self._unindexed: list[_Page] = []  # pages let through while the index failed
        self._last_error: BaseException | None = None  # why the index failed last (None: it answers)
        self._stopped = False  # the crawl stops: no more calls to the index (stop)

    @property
    def last_error(self) -> BaseException | None:
        """Why the index failed at its last call (None: it answered)."""
        return self._last_error

    def stop(self) -> None:
        """Call the index no more (``SIMHASH_ON_INDEX_ERROR = "stop"``): the checks due from now on go through at
        once (``simhash/skipped/after_stop``); the one under way ends as it ends."""
        self._stopped = True

    def _after_stop(self, url: str, value: int, work: PageWork | None) -> Decision:
        """A page let through after the stop, counted; not remembered for a late add."""
        return self.report.skip(url, SkipReason.AFTER_STOP, fingerprint=value, work=work)

    def _check_and_add_unless_stopped(self, value: int, url: str, sketch: bytes | None) -> tuple[Match | None, int]:
        """:meth:`_check_and_add` in the index's thread, unless the crawl stopped meanwhile (:class:`_Stopped`)."""
        if self._stopped:
            raise _Stopped
        return self._check_and_add(value, url, sketch)

    def decide(self, url: str, value: int, sketch: bytes | None = None, work: PageWork | None = None) -> Decision:
        """Check-and-add one fingerprint in the index, once, in this thread; an error lets the page through.  The
        check's seconds join the page's *work*."""
        if self._stopped:
            return self._after_stop(url, value, work)
        work = PageWork() if work is None else work
        start = time.perf_counter()
        try:
            match, added_late = self._check_and_add(value, url, sketch)
        except Exception as exc:
            work.index_seconds = time.perf_counter() - start
            return self._unchecked(url, value, sketch, exc, work)
        work.index_seconds = time.perf_counter() - start
        return self._decided(url, value, match, added_late, work)

    async def check(self, url: str, value: int, sketch: bytes | None = None, work: PageWork | None = None) -> Decision:
        """:meth:`decide` for the crawl: off the reactor thread for a remote index, and with a breaker (after an
        error the index is left alone for ``INDEX_BREAK_SECONDS``); a page retries for up to
        ``SIMHASH_INDEX_RETRY_SECONDS``, then goes through unchecked.  A retry that finds the page's own entry
        (a timed-out write that landed) keeps it (``simhash/index_retry_own_entry``)."""
        if self._index_executor is None and not self.retry_seconds and not self._index_down_until:
            return self.decide(url, value, sketch, work)  # the common case: a local index that works
        deadline = time.monotonic() + self.retry_seconds
        delay = RETRY_FIRST_DELAY
        error: BaseException | None = None
        while True:
            if self._stopped:
                return self._after_stop(url, value, work)
            if time.monotonic() >= self._index_down_until:
                try:
                    if self._index_executor is None:
                        match, added_late = self._check_and_add(value, url, sketch)
                    else:
                        match, added_late = await in_executor(
                            self._index_executor, self._check_and_add_unless_stopped, value, url, sketch
                        )
                except _Stopped:
                    return self._after_stop(url, value, work)
                except Exception as exc:
                    error = self._last_error = exc
                    self._index_down_until = time.monotonic() + INDEX_BREAK_SECONDS
                else:
                    self._last_error = None
                    if self._index_down_until:
                        logger.info("simhash: the index answers again")
                        self._index_down_until = 0.0
                    if error is not None and _own_entry(match, value, url):
                        self.report.count.own_entry_found()
                        match = None  # this page's timed-out write landed: kept
                    return self._decided(url, value, match, added_late, work)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if error is None and isinstance(self._last_error, IndexFullError):
                    return self._unchecked(url, value, sketch, self._last_error, work)  # still full, as far as known
                return self._unchecked(url, value, sketch, error or False, work)
            self.report.count_once(
                "simhash/index_retries",
                url,
                f"the index failed ({type(error).__name__}: {error}); pages wait and their checks are retried "
                f"for up to {self.retry_seconds:g} s (SIMHASH_INDEX_RETRY_SECONDS)",
                level=logging.WARNING,
            )
            await sleep(min(delay, remaining))
            delay = min(delay * 2, RETRY_MAX_DELAY)

    def rows(self) -> int | None:
        """The rows a local index holds, as noted at its last write, else read; None for a remote index."""
        if self._remote:
            return None
        written = self.index.rows_written
        return self.index.backend.rows if written is None else written

    def _decided(self, url: str, value: int, match: Match | None, added_late: int, work: PageWork | None) -> Decision:
        """The decision on a checked page from the index's answer (*match*; None: kept) and the action, counted."""
        if match is None:
            decision = Decision(url, Status.OK.value, value)
        else:
            decision = Decision(url, Status.OK.value, value, match.key, match.distance, match.similarity, self.drop)
        # an entry added: not by a read-only check, nor the page's own entry found again
        stored = not self.readonly and not (match is not None and match.key == url and match.fingerprint == value)
        self.report.count.checked(decision, work, stored=stored, added_late=added_late, rows=self.rows(),
                                  candidates=self.index.candidates_max)  # fmt: skip
        return self.report.log_decision(decision)

    def _check_and_add(self, value: int, url: str, sketch: bytes | None) -> tuple[Match | None, int]:
        """Check-and-add one page (a read-only guard only checks), then add the pages let through while the index
        failed; the match and how many were added late."""
        if sketch is None:
            raise ValueError(f"{url} is checked without its sketch")
        if self.readonly:
            return self.index.check(value, sketch, url), 0
        match = self.index.check_and_add(value, url, sketch)
        pending, self._unindexed = self._unindexed, []
        if not pending:
            return match, 0
        try:
            added = self._add_late(list(dict.fromkeys(pending)))
        except Exception:
            self._unindexed = pending + self._unindexed
            return match, 0
        return match, added

    def _add_late(self, pages: list[_Page]) -> int:
        """Store the pages not in the index yet (one a timed-out call stored is found among its candidates); how
        many were."""
        return sum(
            not any(c.key == url and c.distance == 0 for c in self.index.add_and_candidates(value, url, sketch))
            for value, url, sketch in pages
            if sketch is not None
        )

    def _unchecked(
        self, url: str, value: int, sketch: bytes | None, exc_info: bool | BaseException, work: PageWork | None
    ) -> Decision:
        """A page whose index check failed: let through, counted, and remembered to be added when the index
        answers."""
        if len(self._unindexed) < UNINDEXED_LIMIT and not self.readonly:
            self._unindexed.append((value, url, sketch))
        if isinstance(exc_info, IndexFullError):
            self.report.index_full(url, exc_info)  # one plain line, no traceback
            return self.report.skip(url, SkipReason.INDEX_ERROR, fingerprint=value, logged=True, work=work)
        return self.report.skip(url, SkipReason.INDEX_ERROR, exc_info=exc_info, fingerprint=value, work=work)

    def close(self) -> None:
        """Wait for the index check under way (the others are cancelled), then close the index."""
        if self._index_executor is not None:
            self._index_executor.shutdown(wait=True, cancel_futures=True)
        try:
            self.index.close()
        except Exception:
            logger.error("simhash: closing the index failed", exc_info=True)
