"""Requests left unsent (``SIMHASH_AVOID``, docs/avoid.md): a URL that the host's active URL rules
(:mod:`.urlrules`) rewrite to the URL of a request sent before, a path its confirmed mirror host already has, or a
URL an earlier crawl dropped as a near-duplicate (:mod:`.known`).  A share of them (``SIMHASH_AVOID_VALIDATE``) is
fetched to validate the rules; a withdrawn rule's requests are queued again.  The evidence is kept in the index's
notes (every ``FLUSH_SECONDS`` and at the end), shared by the processes on one index and by recrawls.
"""

from __future__ import annotations

import contextlib
import logging
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from simhash_filter.crawl.known import KnownDuplicates
from simhash_filter.crawl.report import logger
from simhash_filter.crawl.settings import AvoidOptions
from simhash_filter.crawl.urlrules import RuleBook, Url, Verdict, parse_url
from simhash_filter.crawl.waiting import in_executor

if TYPE_CHECKING:
    from scrapy.http import Request

    from simhash_filter.crawl.decision import Decision
    from simhash_filter.crawl.stats import FilterStats
    from simhash_filter.index.backends.base import Backend

__all__ = ["Avoidance", "Avoider"]

#: ``request.meta`` keys: a validation fetch (what it would have been avoided for), and a request sent again
#: after a withdrawal or deprioritised once (not avoided again).
VALIDATE_KEY, EXEMPT_KEY = "simhash_avoid_validate", "simhash_avoid_exempt"
#: Seconds between two writes of the evidence to the index's notes.
FLUSH_SECONDS = 2.0
#: Requests remembered per rule, to be queued again if the rule is withdrawn.
REQUEUE_LIMIT = 10_000
#: URLs remembered as sent (a crawl beyond this many avoids by the first ones only).
MAX_SENT = 1_000_000
#: Priority taken off a deprioritised request.
DEPRIORITIZE_BY = 100


_LEARNED = {"rule": "simhash/avoid/rules_learned", "mirror": "simhash/avoid/mirrors_learned"}
_WHAT = {"url_rule": "a URL variant", "mirror": "a mirror's copy", "known": "a near-duplicate, in an earlier crawl,"}
_WITHDRAWN = {"rule": "simhash/avoid/rules_withdrawn", "mirror": "simhash/avoid/mirrors_withdrawn"}


@dataclass(frozen=True, slots=True)
class Avoidance:
    """Why a request is not sent: ``reason`` (``url_rule`` or ``mirror``), the URL it would fetch again
    (``target``), the rules that rewrote its URL, and the mirror host."""

    reason: str
    target: str
    rules: tuple[str, ...] = ()
    mirror: str | None = None

    def keys(self, host: str) -> list[tuple[str, str, str]]:
        """The verdicts (kind, host, rule) this avoidance rests on."""
        out = [("rule", host, r) for r in self.rules]
        if self.mirror is not None:
            first, second = sorted((host, self.mirror))
            out.append(("mirror", first, second))
        return out


class Avoider:
    """The crawl's URL rules: checks requests before download, learns from the decisions on responses."""

    def __init__(
        self,
        backend: Backend,
        count: FilterStats,
        options: AvoidOptions | None = None,
        *,
        same_distance: int = 3,
        distinct_distance: int = 10,
    ) -> None:
        options = AvoidOptions() if options is None else options
        self.backend = backend
        self.count = count
        self.action = options.action
        self.validate = options.validate
        self.mirror_mode = options.mirrors
        self.book = RuleBook(
            options.min_examples, same_distance, distinct_distance, min_precision=options.min_precision
        )
        #: Near-duplicates dropped by earlier crawls (and this one), kept in the index's notes.
        self.known = KnownDuplicates(options.known_max_age)
        # host -> hash of a canonical URL -> the first URL sent (hashes: about 300 bytes a URL in all)
        self._sent: dict[str, dict[int, str]] = {}
        self._raw: dict[str, list[str]] = {}  # host -> URLs sent, to rebuild its canonical ones
        self._hosts: dict[str, int] = {}  # host -> order first seen (the later of two mirrors is skipped whole)
        self._n_sent = 0
        self._urls: set[str] = set()  # every URL remembered as sent
        #: Requests left unsent in this crawl.
        self.avoided = 0
        self._avoided: dict[tuple[str, str, str], list[Request]] = {}
        self._last_flush = time.monotonic()
        remote = getattr(backend, "remote", False)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="simhash-notes") if remote else None
        self._flushing = False
        self.requeue: Any = None  # set by the crawl: schedules a request again

    def load(self) -> None:
        """Read the evidence kept with the index, its URLs as sent, and the records of near-duplicates earlier crawls
        dropped whose kept page it holds."""
        notes = self.backend.notes()
        self._apply(self.book.merge(notes), initial=True)
        self.known.load(notes)
        with contextlib.suppress(NotImplementedError):
            self._read_entries()
        self.known.loaded()

    def _read_entries(self) -> None:
        """The index's URLs as sent (the first :data:`MAX_SENT`), and each to the known near-duplicates' records."""
        for n, entry in enumerate(self.backend.entries()):
            if n < MAX_SENT:
                page = parse_url(entry.key)
                if page is not None:
                    self._remember(page, entry.key)
            elif not self.known.waiting:
                break
            if self.known.waiting:
                self.known.held(entry.key)

    def check(self, request: Request) -> Avoidance | None:
        """Whether *request* is left unsent (then counted and remembered), else it is remembered as sent."""
        page = parse_url(request.url)
        if page is None:
            return None
        exempt = request.meta.get(EXEMPT_KEY) or request.meta.get(VALIDATE_KEY)
        known = None if exempt else self.known.target(request.url)
        if known is not None:  # before the URLs of earlier crawls: the index holds a dropped page's URL too
            return self._leave_unsent(request, page, Avoidance("known", known))
        if request.url in self._urls:  # a retry, a redirect back, a page of an earlier crawl
            return None
        if exempt:
            self._remember(page, request.url)
            return None
        found = self._find(page, request.url)
        if found is None:
            self._remember(page, request.url)
            return None
        if self.validate and zlib.crc32(request.url.encode("utf-8", "surrogatepass")) < self.validate * 2**32:
            request.meta[VALIDATE_KEY] = {"target": found.target, "rules": list(found.rules), "mirror": found.mirror}
            self.count.count("simhash/avoid/validations")
            self._remember(page, request.url)
            return None
        return self._leave_unsent(request, page, found)

    def _leave_unsent(self, request: Request, page: Url, found: Avoidance) -> Avoidance:
        """Count *request* as avoided (or deprioritised) and remember it for a withdrawal of what it rests on."""
        if self.action == "deprioritize":
            self.count.count(f"simhash/deprioritized/{found.reason}")
            return found
        self.count.count(f"simhash/avoided/{found.reason}")
        for key in found.keys(page.host):
            waiting = self._avoided.setdefault(key, [])
            if len(waiting) < REQUEUE_LIMIT:
                waiting.append(request)
        self.avoided += 1
        if self.avoided == 1:
            logger.info(
                "simhash: not fetching %s: %s of %s (further requests avoided are counted in simhash/avoided/...)",
                request.url,
                _WHAT[found.reason],
                found.target,
            )
        return found

    def deprioritized(self, request: Request) -> Request:
        """*request* sent back to the scheduler with a lower priority, not to be avoided again."""
        meta = {**request.meta, EXEMPT_KEY: True}
        return request.replace(priority=request.priority - DEPRIORITIZE_BY, meta=meta, dont_filter=True)

    def _find(self, page: Url, url: str) -> Avoidance | None:
        canonical = self.book.canonical(page)
        target = self._sent.get(page.host, {}).get(hash(canonical))
        if target is not None and target != url:
            return Avoidance("url_rule", target, tuple(self.book.rewrites(page)))
        if self.mirror_mode == "off":
            return None
        for host in sorted(self.book.mirrors(page.host)):
            other = self.book.canonical(Url(page.scheme, host, page.path, page.params))
            target = self._sent.get(host, {}).get(hash(other))
            if target is not None:
                return Avoidance("mirror", target, mirror=host)
            if self.mirror_mode == "all" and self._hosts.get(host, 1 << 62) < self._hosts.get(page.host, 1 << 62):
                return Avoidance("mirror", f"{page.scheme}://{host}/", mirror=host)
        return None

    def _remember(self, page: Url, url: str) -> None:
        self._hosts.setdefault(page.host, len(self._hosts))
        if self._n_sent >= MAX_SENT:
            return
        self._n_sent += 1
        self._urls.add(url)
        self._raw.setdefault(page.host, []).append(url)
        self._sent.setdefault(page.host, {}).setdefault(hash(self.book.canonical(page)), url)

    async def observed(self, decision: Decision, request: Request) -> None:
        """Learn from the decision on a response (a page checked in the index)."""
        if decision.fingerprint is None or not decision.checked:
            return
        if decision.unchanged:
            self.known.unchanged(decision.url)
        elif decision.duplicate_of is not None:
            self.known.dropped(decision.url, decision.duplicate_of)
        changes = self.book.observe(decision.url, decision.fingerprint, decision.duplicate_of)
        meta = request.meta.get(VALIDATE_KEY)
        if meta:
            changes += self.book.validated(
                decision.url, decision.fingerprint, decision.duplicate_of, meta["target"], meta["rules"], meta["mirror"]
            )
        self._apply(changes)
        if time.monotonic() - self._last_flush >= FLUSH_SECONDS:
            await self.flush()

    async def flush(self) -> None:
        """Add the evidence gathered since the last flush to the index's notes, and take every process's."""
        if self._flushing:
            return
        self._flushing = True
        self._last_flush = time.monotonic()
        pending, known = self.book.take_pending(), self.known.take_pending()
        try:
            if self._executor is None:
                totals = self.backend.add_notes({**pending, **known})
            else:
                totals = await in_executor(self._executor, self.backend.add_notes, {**pending, **known})
        except Exception as exc:
            self.book.restore_pending(pending)  # kept for the next flush
            self.known.restore_pending(known)
            self._count_once("simhash/avoid/notes_errors", f"cannot write the URL rules' evidence: {exc}")
        else:
            self._apply(self.book.merge(totals))
        finally:
            self._flushing = False

    def _apply(self, changes: list[Verdict], initial: bool = False) -> None:
        """Log the rules and mirrors that became active or were withdrawn; queue again what a withdrawn one
        avoided; rebuild the sent URLs of hosts whose rules changed."""
        hosts: set[str] = set()
        for verdict in changes:
            hosts.update((verdict.host, verdict.rule) if verdict.kind == "mirror" else (verdict.host,))
            what = "mirror" if verdict.kind == "mirror" else "URL rule"
            if verdict.active:
                self.count.count(_LEARNED[verdict.kind])
                logger.info("simhash: %s %s: %s", "known" if initial else "learned", what, verdict.describe())
            elif verdict.negatives:
                self.count.count(_WITHDRAWN[verdict.kind])
                logger.info("simhash: withdrawn %s: %s", what, verdict.describe())
                self._requeue((verdict.kind, verdict.host, verdict.rule))
        for host in hosts & self._raw.keys():
            sent: dict[int, str] = {}
            for url in self._raw[host]:
                page = parse_url(url)
                if page is not None:
                    sent.setdefault(hash(self.book.canonical(page)), url)
            self._sent[host] = sent

    def _requeue(self, key: tuple[str, str, str]) -> None:
        waiting = [r for r in self._avoided.pop(key, []) if r.url not in self._urls]  # once, if avoided twice
        if not waiting or self.requeue is None:
            return
        for request in waiting:
            page = parse_url(request.url)
            if page is not None:
                self._remember(page, request.url)
            self.requeue(request.replace(meta={**request.meta, EXEMPT_KEY: True}, dont_filter=True))
        self.count.count("simhash/avoid/requeued", len(waiting))

    def _count_once(self, key: str, message: str) -> None:
        if not self.count.get(key):
            logger.warning("simhash: %s", message)
        self.count.count(key)

    def summary(self) -> list[str]:
        """One line per active rule or mirror (and per withdrawn one)."""
        return [v.describe() for v in self.book.verdicts() if v.active or v.negatives]

    def close_sync(self) -> None:
        """Write what is pending (in this thread) and stop."""
        pending = {**self.book.take_pending(), **self.known.take_pending()}
        try:
            if pending:
                self.backend.add_notes(pending)
        except Exception as exc:
            logger.error("simhash: cannot write the URL rules' evidence at the end of the crawl: %s", exc)
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        active = [v for v in self.book.verdicts() if v.active]
        self.count.set("simhash/avoid/rules_active", sum(v.kind == "rule" for v in active))
        self.count.set("simhash/avoid/mirrors_active", sum(v.kind == "mirror" for v in active))
        for line in self.summary():
            logger.log(logging.INFO, "simhash: URL rules at the end: %s", line)
