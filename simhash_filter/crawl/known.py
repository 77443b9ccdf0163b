"""Known near-duplicates (``SIMHASH_AVOID``, docs/avoid.md, "Recrawls skip what they dropped"): a URL that an
earlier crawl dropped as a near-duplicate of a page the index still holds is not downloaded again while its record,
``known|<hash of its URL>|<hash of the kept page's URL>`` = the Unix time in the index's notes, is younger than
``SIMHASH_AVOID_KNOWN_MAX_AGE``.  Hashes are the first 8 bytes of BLAKE2b (stable across processes).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping

__all__ = ["KNOWN_LIMIT", "KNOWN_PREFIX", "KnownDuplicates", "url_hash"]

#: Name prefix of a record in the index's notes.
KNOWN_PREFIX = "known|"
#: Records an index takes at most; beyond, none is added.
KNOWN_LIMIT = 200_000
#: A record this many seconds in the future is not trusted (two processes moved it at once): it is fetched again.
CLOCK_SLACK = 60


def url_hash(url: str) -> int:
    """A stable 64-bit hash of *url* (the same in every process and run)."""
    return int.from_bytes(hashlib.blake2b(url.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


def _record_key(dropped: int, kept: int) -> str:
    return f"{KNOWN_PREFIX}{dropped:016x}|{kept:016x}"


def _parse(key: str) -> tuple[int, int] | None:
    """``(dropped, kept)`` hashes of a record's name, None for another note."""
    if not key.startswith(KNOWN_PREFIX):
        return None
    parts = key[len(KNOWN_PREFIX) :].split("|")
    try:
        return (int(parts[0], 16), int(parts[1], 16)) if len(parts) == 2 else None
    except ValueError:
        return None


class KnownDuplicates:
    """The records of near-duplicates that earlier crawls dropped, and those this crawl adds (*max_age* in
    seconds; 0: no record is acted on)."""

    def __init__(self, max_age: float) -> None:
        self.max_age = max_age
        self._records: dict[str, int] = {}  # record name -> time, as the notes hold them
        self._usable: dict[int, int] = {}  # hash of a dropped URL -> hash of its kept page's URL
        self._expired: dict[int, int] = {}  # the same, for records too old to act on (refreshed when unchanged)
        self._wanted: dict[int, list[int]] = {}  # hash of a kept URL -> the dropped URLs waiting for it, at load
        self._targets: dict[int, str] = {}  # hash of a kept URL -> the URL (for the log)
        self._pending: dict[str, int] = {}

    def load(self, notes: Mapping[str, int], now: float | None = None) -> None:
        """Take the records of the index's notes; :meth:`held` then says which kept pages the index still has."""
        now = time.time() if now is None else now
        newest: dict[int, tuple[int, int]] = {}  # dropped -> (time, kept)
        for name, seen in notes.items():
            parsed = _parse(name)
            if parsed is None:
                continue
            self._records[name] = int(seen)
            dropped, kept = parsed
            if seen > now + CLOCK_SLACK or seen <= newest.get(dropped, (-1, 0))[0]:
                continue
            newest[dropped] = (int(seen), kept)
        for dropped, (seen, kept) in newest.items():
            fresh = self.max_age > 0 and now - seen <= self.max_age
            self._wanted.setdefault(kept, []).append(dropped if fresh else ~dropped)

    @property
    def waiting(self) -> bool:
        """Whether records wait for :meth:`held` (the index's entries must be read)."""
        return bool(self._wanted)

    def held(self, key: str) -> None:
        """A URL the index holds (a live entry): the records whose kept page it is become usable."""
        h = url_hash(key)
        for dropped in self._wanted.pop(h, ()):
            self._targets[h] = key
            if dropped >= 0:
                self._usable[dropped] = h
            else:
                self._expired[~dropped] = h

    def loaded(self) -> None:
        """Every entry was read: the records whose kept page the index does not hold are left unused."""
        self._wanted.clear()

    def target(self, url: str) -> str | None:
        """The kept page's URL when *url* is a known near-duplicate to leave unsent, else None."""
        if not self._usable:
            return None
        kept = self._usable.get(url_hash(url))
        return None if kept is None else self._targets[kept]

    def dropped(self, url: str, kept: str, now: float | None = None) -> None:
        """Record that *url* was found a near-duplicate of the stored page *kept* (now)."""
        self._record(url_hash(url), url_hash(kept), now)

    def unchanged(self, url: str, now: float | None = None) -> None:
        """*url* was fetched again and is what the index stored for it: a record too old to act on is renewed."""
        dropped = url_hash(url)
        kept = self._expired.pop(dropped, None)
        if kept is not None:
            self._record(dropped, kept, now)

    def _record(self, dropped: int, kept: int, now: float | None) -> None:
        name = _record_key(dropped, kept)
        if name not in self._records and len(self._records) >= KNOWN_LIMIT:
            return
        seen = int(time.time() if now is None else now)
        delta = seen - self._records.get(name, 0)
        self._records[name] = seen
        if delta:
            self._pending[name] = self._pending.get(name, 0) + delta

    def take_pending(self) -> dict[str, int]:
        """The increments to add to the notes (and forget here)."""
        pending, self._pending = self._pending, {}
        return pending

    def restore_pending(self, pending: Mapping[str, int]) -> None:
        """Increments whose write failed, kept for the next one."""
        for name, n in pending.items():
            self._pending[name] = self._pending.get(name, 0) + n
