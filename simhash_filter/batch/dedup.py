"""Batch near-duplicate filtering of JSON Lines pages or :class:`Page` items, in input order (the core of
``simhash-filter dedup``): every input item yields exactly one :class:`Outcome` (a malformed line or a page that
cannot be fingerprinted is reported, never dropped).  Pages are fingerprinted in this process or in worker
processes, the input streamed (a few chunks per worker in flight), then checked in input order.
"""

from __future__ import annotations

import json
import multiprocessing
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from simhash_filter.config import FilterConfig, FingerprintConfig, available_cpus
from simhash_filter.errors import FINGERPRINT_ERROR
from simhash_filter.index.backends import store_errors
from simhash_filter.index.nearduplicate import NearDuplicateIndex, open_index
from simhash_filter.index.tables import is_count
from simhash_filter.model.fingerprint import Fingerprinter

__all__ = [
    "MALFORMED",
    "IndexFailed",
    "Outcome",
    "Page",
    "Summary",
    "WorkersFailed",
    "auto_workers",
    "dedup",
    "fingerprint_items",
    "parse_line",
]

#: Status of an input line that is not a JSON object with string ``url`` and ``html``.
MALFORMED = "malformed"
#: A longer ``url`` makes a line malformed (an index stores keys of at most 1 MiB; no browser sends such a URL).
MAX_URL_CHARS = 65_536
#: Lines sent to a worker at a time, and chunks kept in flight per worker.
CHUNK_LINES = 32
CHUNKS_IN_FLIGHT = 4
#: Python 3.10: how long a broken pool's work queue is drained, at most (:func:`_unblock_broken`).
UNBLOCK_SECONDS = 30.0
#: Worker pools that may break in a row before finishing any work, before a run gives up.
MAX_FRUITLESS_POOLS = 5
#: :func:`auto_workers`: inputs smaller than this stay in one process (a worker takes ~0.3 s to start),
#: and at most this many workers (the index and the output stay in the parent process).
AUTO_WORKERS_MIN_BYTES = 16_000_000
AUTO_WORKERS_MAX = 8


@dataclass(frozen=True, slots=True)
class Page:
    """A page already read, as an input item of :func:`dedup` beside JSON lines: ``html`` is bytes in ``encoding``
    (the charset an HTTP header declared; None: sniffed, as the fingerprinter does) or text."""

    url: str
    html: bytes | str
    encoding: str | None = None

    def record_fields(self) -> tuple[tuple[str, Any], ...]:
        """``(key, value)`` pairs that its output record carries after the contract's keys (none here)."""
        return ()


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one input line or :class:`Page` (``line`` counts from 1)."""

    line: int
    url: str | None
    fingerprint: int | None = None
    duplicate_of: str | None = None
    distance: int | None = None
    #: ``None`` for a fingerprinted page; a :class:`~simhash_filter.model.fingerprint.Status` value or
    #: :data:`MALFORMED` otherwise.
    status: str | None = None
    #: Why a line is malformed or failed (for messages; not part of the output record).
    reason: str | None = None
    #: The input :class:`Page`'s own record fields (:meth:`Page.record_fields`), after the others.
    fields: tuple[tuple[str, Any], ...] = ()

    def record(self) -> dict[str, Any]:
        """The output JSON object: ``url``, ``fingerprint``, ``duplicate_of``, ``distance``, and
        ``status`` (plus ``line`` for a malformed line) only when the page has no fingerprint; then a
        :class:`Page`'s own fields (a WARC record's ``warc_date`` and ``warc_record_id``)."""
        out: dict[str, Any] = {
            "url": self.url,
            "fingerprint": None if self.fingerprint is None else f"{self.fingerprint:016x}",
            "duplicate_of": self.duplicate_of,
            "distance": self.distance,
        }
        if self.status is not None:
            out["status"] = self.status
            if self.status == MALFORMED:
                out["line"] = self.line
        out.update(self.fields)
        return out


@dataclass(slots=True)
class Summary:
    """Counts over a run: every input line is one page or one malformed line (``skipped`` by status)."""

    lines: int = 0
    pages: int = 0
    kept: int = 0
    duplicates: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    malformed: int = 0
    #: The most candidates one page's check verified (the bound on a check's work), when known.
    candidates_max: int = 0

    def count(self, outcome: Outcome) -> None:
        self.lines += 1
        if outcome.status == MALFORMED:
            self.malformed += 1
            return
        self.pages += 1
        if outcome.status is not None:
            self.skipped[outcome.status] += 1
        elif outcome.duplicate_of is not None:
            self.duplicates += 1
        else:
            self.kept += 1


def _loads(line: bytes | str) -> Any:
    """The JSON value of a line: orjson's parse, or for a line orjson refuses (a byte order mark, lone surrogates,
    NaN, huge numbers, a malformed line) the standard library's, which reads or rejects it with its message."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


def parse_line(line: bytes | str) -> tuple[str | None, str | None, str | None]:
    """``(url, html, None)`` for a good line, else ``(url if known, None, reason)``."""
    if not line.strip():
        return None, None, "empty line"
    try:
        obj = _loads(line)
    except RecursionError:
        return None, None, "not JSON (nested too deeply)"
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, too many digits
        return None, None, f"not JSON ({exc})"
    if not isinstance(obj, dict):
        return None, None, f"not a JSON object (got {type(obj).__name__})"
    if "url" not in obj:
        return None, None, 'missing "url"'
    url = obj["url"]
    if not isinstance(url, str):
        return None, None, f'"url" is not a string (got {type(url).__name__})'
    if len(url) > MAX_URL_CHARS:
        return None, None, f'"url" is longer than {MAX_URL_CHARS} characters ({len(url)})'
    if "html" not in obj:
        return url, None, 'missing "html"'
    html = obj["html"]
    if not isinstance(html, str):
        return url, None, f'"html" is not a string (got {type(html).__name__})'
    return url, html, None


# An input item: a JSON line, or a page already read.
_Item = bytes | Page
class _Prepared(NamedTuple):
    """A fingerprinted line before the index sees it: its fingerprint and sketch, or why it has none."""

    url: str | None
    value: int | None
    status: str | None
    reason: str | None
    sketch: bytes | None

_worker_fingerprinter: Fingerprinter | None = None


def _init_worker(config: FingerprintConfig) -> None:
    global _worker_fingerprinter
    _worker_fingerprinter = Fingerprinter(config)


def _prepare(fingerprinter: Fingerprinter, line: _Item) -> _Prepared:
    encoding = None
    url: str | None
    html: bytes | str | None
    if isinstance(line, Page):
        url, html, encoding = line.url, line.html, line.encoding
    else:
        url, html, reason = parse_line(line)
        if html is None:
            return _Prepared(url, None, MALFORMED, reason, None)
    try:
        fp = fingerprinter.fingerprint(html, encoding)
    except Exception as exc:  # one bad page must not end a run over millions
        return _Prepared(url, None, FINGERPRINT_ERROR, f"{type(exc).__name__}: {exc}", None)
    return _Prepared(url, fp.value, None if fp.ok else str(fp.status), None, fp.sketch)


def _prepare_chunk(lines: list[_Item]) -> list[_Prepared]:
    assert _worker_fingerprinter is not None, "worker not initialised"
    return [_prepare(_worker_fingerprinter, line) for line in lines]


def _chunks(lines: Iterable[_Item], size: int) -> Iterator[list[_Item]]:
    chunk: list[_Item] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _prepared(lines: Iterable[_Item], config: FingerprintConfig, workers: int) -> Iterator[_Prepared]:
    """Fingerprint lines in order, in this process or in ``workers`` processes."""
    if workers <= 1:
        fingerprinter = Fingerprinter(config)
        for line in lines:
            yield _prepare(fingerprinter, line)
        return
    yield from _in_workers(_chunks(lines, CHUNK_LINES), workers, _prepare_chunk, _init_worker, (config,))


def fingerprint_items(
    items: Iterable[bytes | Page], *, config: FingerprintConfig, workers: int = 1
) -> Iterator[tuple[str | None, int | None, str | None, str | None, bytes | None]]:
    """Fingerprint items in input order as :func:`dedup` does, without an index: one ``(url, fingerprint, status,
    reason, sketch)`` per item (``status`` None, a fingerprint :class:`Status`, :data:`MALFORMED` or
    :data:`~simhash_filter.errors.FINGERPRINT_ERROR`).  Raises :class:`WorkersFailed` as :func:`dedup`."""
    return _prepared(items, config, workers)


class WorkersFailed(Exception):
    """The worker processes died again and again without finishing any work (they cannot start)."""


class IndexFailed(Exception):
    """The index failed part way (a full disk under an on-disk index, a Redis server gone): the store's own
    error is the ``__cause__``, told apart from the input's read errors, which are ``OSError`` too."""


def _in_workers(
    chunks: Iterable[list[_Item]],
    workers: int,
    work: Callable[[list[_Item]], list[_Prepared]],
    initializer: Callable[..., None],
    initargs: tuple[Any, ...],
) -> Iterator[_Prepared]:
    """``work(chunk)`` for each chunk in ``workers`` processes, a bounded queue of chunks in flight; the results in
    input order.  A worker that dies breaks the pool: a new one redoes the lines in flight one at a time, so that
    a page that kills its worker twice is reported as an error.  After :data:`MAX_FRUITLESS_POOLS` pools in a row
    broke before finishing anything, :class:`WorkersFailed` is raised."""
    ctx = multiprocessing.get_context("spawn")  # no fork of a threaded parent; same on every OS

    def start() -> ProcessPoolExecutor:
        return ProcessPoolExecutor(workers, mp_context=ctx, initializer=initializer, initargs=initargs)

    pool = start()

    def submit(lines: list[_Item]) -> Future[list[_Prepared]]:
        try:
            return pool.submit(work, lines)
        except BrokenProcessPool as exc:  # it broke since the last answer: this chunk fails with the others
            failed: Future[list[_Prepared]] = Future()
            failed.set_exception(exc)
            return failed

    pending: deque[tuple[list[_Item], Future[list[_Prepared]]]] = deque()  # in input order
    suspects: deque[_Item] = deque()  # lines in flight when a worker died, to redo alone
    source = iter(chunks)
    done_in_pool = fruitless = strikes = 0  # strikes: deaths of the worker with the first suspect alone
    try:
        while True:
            if not suspects:
                while len(pending) < workers * CHUNKS_IN_FLIGHT and (chunk := next(source, None)) is not None:
                    pending.append((chunk, submit(chunk)))
            elif not pending:
                line = suspects.popleft()
                pending.append(([line], submit([line])))
            if not pending:
                return
            chunk, future = pending[0]
            alone = len(pending) == 1 and len(chunk) == 1
            try:
                results = future.result()
            except BrokenProcessPool as exc:
                _unblock_broken(pool)
                pool.shutdown(wait=True, cancel_futures=True)
                fruitless = 0 if done_in_pool else fruitless + 1
                if fruitless >= MAX_FRUITLESS_POOLS:
                    raise WorkersFailed(f"the worker processes died {fruitless} times in a row ({exc})") from None
                lines = [line for lines, _ in pending for line in lines]
                pending.clear()
                strikes = strikes + 1 if alone else 0
                if strikes >= 2:
                    strikes = 0
                    yield _worker_died(lines[0])
                else:
                    suspects.extendleft(reversed(lines))
                pool, done_in_pool = start(), 0
                continue
            pending.popleft()
            done_in_pool += 1
            fruitless = strikes = 0
            yield from results
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _unblock_broken(pool: ProcessPoolExecutor) -> None:
    """Python 3.10: read a broken pool's work pipe empty until its manager thread is done (its feeder thread may
    wait for ever to write into a pipe no dead worker reads; 3.11 and later close the pipe themselves)."""
    thread = getattr(pool, "_executor_manager_thread", None)
    reader = getattr(getattr(pool, "_call_queue", None), "_reader", None)
    if sys.version_info >= (3, 11) or thread is None or reader is None:
        return
    deadline = time.monotonic() + UNBLOCK_SECONDS
    while thread.is_alive() and time.monotonic() < deadline:
        try:
            if reader.poll(0.05):
                reader.recv_bytes()
        except (OSError, EOFError, TypeError):
            return


def _worker_died(line: _Item) -> _Prepared:
    if isinstance(line, Page):
        url: str | None = line.url
    else:
        url, _, reason = parse_line(line)
        if reason is not None:
            return _Prepared(url, None, MALFORMED, reason, None)
    return _Prepared(url, None, FINGERPRINT_ERROR, "its worker process died (killed, or out of memory)", None)


def auto_workers(input_bytes: int | None) -> int:
    """A ``workers`` value for an input of ``input_bytes`` (None: unknown): one process for small inputs, else one
    worker per available CPU (at most :data:`AUTO_WORKERS_MAX`).  The output is the same for every value."""
    if input_bytes is None or input_bytes < AUTO_WORKERS_MIN_BYTES:
        return 1
    cpus = available_cpus()
    return 1 if cpus < 2 else min(cpus, AUTO_WORKERS_MAX)


def dedup(
    lines: Iterable[bytes | Page],
    *,
    config: FilterConfig,
    workers: int = 1,
    index: NearDuplicateIndex | None = None,
) -> Iterator[Outcome]:
    """One :class:`Outcome` per input line or :class:`Page`, in input order, read lazily: a page checked and added
    against the pages before it (in this run or already in ``index``; without one, a memory index for ``config``,
    closed at the end)."""
    if not is_count(workers, 1):
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    return _dedup(lines, config, workers, index)


def _dedup(
    lines: Iterable[_Item], config: FilterConfig, workers: int, index: NearDuplicateIndex | None
) -> Iterator[Outcome]:
    # The pages' own record fields stay in this process, in input order (at most the items in flight).
    fields: deque[tuple[tuple[str, Any], ...]] = deque()

    def noted(items: Iterable[_Item]) -> Iterator[_Item]:
        for item in items:
            fields.append(item.record_fields() if isinstance(item, Page) else ())
            yield item

    with ExitStack() as stack:
        if index is None:
            index = stack.enter_context(open_index(config))
        prepared = _prepared(noted(lines), config.fingerprint, workers)
        for n, (url, value, status, reason, sketch) in enumerate(prepared, 1):
            extra = fields.popleft()
            if value is None or url is None or sketch is None:
                yield Outcome(n, url, status=status, reason=reason, fields=extra)
                continue
            try:
                match = index.check_and_add(value, url, sketch)
            except store_errors() as exc:
                raise IndexFailed(str(exc)) from exc
            if match is None:
                yield Outcome(n, url, value, fields=extra)
            else:
                yield Outcome(n, url, value, match.key, match.distance, fields=extra)
