"""WARC output of a crawl (``SIMHASH_WARC``, docs/warc.md): a ``warcinfo`` record, then per HTML response the
downloader middleware saw a ``response`` record (kept, or let through unchecked) or, for a near-duplicate, a
``revisit`` record of :data:`PROFILE` that refers to the kept page's ``response`` record at the root of its chain.
Each record is appended in one write (``.gz``: one gzip member a record); a failed write is undone, counted in
``simhash/warc/errors`` and logged once, never raised into the crawl.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import socket
import uuid
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timezone
from http import HTTPStatus
from io import BytesIO
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from simhash_filter import __version__
from simhash_filter.crawl.decision import SkipReason
from simhash_filter.crawl.policy import is_html
from simhash_filter.crawl.report import logger
from simhash_filter.crawl.settings import SIMHASH_WARC
from simhash_filter.index.backends import error_message

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from simhash_filter.crawl.crawlfilter import CrawlFilter
    from simhash_filter.crawl.decision import Decision
    from simhash_filter.crawl.stats import FilterStats

__all__ = ["PROFILE", "WarcOutput", "warc_date"]

#: The ``WARC-Profile`` of a near-duplicate's ``revisit`` record (docs/warc.md): the page at
#: ``WARC-Refers-To-Target-URI`` says the same thing; the payload was not stored.
PROFILE = "https://github.com/simhash-filter/simhash-filter/warc/near-duplicate/1.0"
WARC_VERSION = "WARC/1.0"
#: The version of a revisit record, which uses WARC/1.1's ``WARC-Refers-To-Target-URI`` and ``-Date``.
REVISIT_VERSION = "WARC/1.1"
#: Checked pages whose record date and id are remembered for the revisits that point at them (the most recent).
REFERS_TO_LIMIT = 100_000
#: zlib level of a ``.gz`` file's records (warcio's own is 9: slower, a few per cent smaller).
GZIP_LEVEL = 6
#: HTTP headers that describe a transfer the stored body no longer has (Scrapy stores it de-chunked): kept
#: under this prefix, so that a reader does not decode the body again.
RENAMED_PREFIX = "X-Crawler-"
_TRANSFER_HEADERS = frozenset({"transfer-encoding"})
_SCHEMES = ("http://", "https://")


def warc_date(when: datetime) -> str:
    """A ``WARC-Date`` of WARC/1.0: UTC, to the second (``2026-11-23T15:52:00Z``)."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _sha1_digest(data: bytes) -> str:
    """A WARC digest: ``sha1:`` and the base32 SHA-1 (as warcio writes it)."""
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode("ascii")


def _protocol(response: Response) -> str:
    """The HTTP version of the status line (``h2`` → ``HTTP/2``; ``HTTP/1.1`` when Scrapy does not say)."""
    protocol = getattr(response, "protocol", None) or ""
    if protocol.upper().startswith("HTTP/"):
        return protocol.upper()
    if protocol.lower() in ("h2", "h3"):
        return f"HTTP/{protocol[1]}"
    return "HTTP/1.1"


def http_headers(response: Response, *, body: bool = True) -> StatusAndHeaders:
    """The status line and headers of a response as Scrapy received them, ``Transfer-Encoding`` and a
    ``Content-Length`` that is not the stored body's (or, without the ``body``, any) renamed ``X-Crawler-*``."""
    headers: list[tuple[str, str]] = []
    body_length = len(response.body) if body else -1
    fix_length = False
    for raw_name, values in response.headers.items():
        name = raw_name.decode("latin-1")
        lower = name.lower()
        if lower in _TRANSFER_HEADERS:
            name = RENAMED_PREFIX + name
        elif lower == "content-length" and any(v.strip() != str(body_length).encode() for v in values):
            name, fix_length = RENAMED_PREFIX + name, True
        headers.extend((name, value.decode("latin-1")) for value in values)
    if fix_length and body:
        headers.append(("Content-Length", str(body_length)))
    try:
        phrase = HTTPStatus(response.status).phrase
    except ValueError:
        phrase = ""
    return StatusAndHeaders(f"{response.status} {phrase}".strip(), headers, protocol=_protocol(response))


@dataclass(frozen=True, slots=True)
class _Root:
    """A ``response`` record that revisits refer to: what a replay tool looks it up by."""

    uri: str
    date: str
    record_id: str
    payload_digest: str


def _root_of(record: Any) -> _Root | None:
    """The root a later revisit of this record's page refers to: the record itself when it is a ``response``, else
    the root its own revisit referred to."""
    headers = record.rec_headers
    if record.rec_type == "response":
        digest = headers.get_header("WARC-Payload-Digest")
        if digest is None:
            return None
        return _Root(headers.get_header("WARC-Target-URI"), headers.get_header("WARC-Date"),
                     headers.get_header("WARC-Record-ID"), digest)  # fmt: skip
    refers_to = headers.get_header("WARC-Refers-To")
    if refers_to is None:
        return None
    return _Root(headers.get_header("WARC-Refers-To-Target-URI"), headers.get_header("WARC-Refers-To-Date"),
                 refers_to, headers.get_header("WARC-Payload-Digest"))  # fmt: skip


class WarcOutput:
    """Writes a crawl's WARC file; ``info``: the ``warcinfo`` fields after ``software`` and ``format``.  Opening
    the file raises ``OSError``; nothing else raises."""

    def __init__(self, path: str | os.PathLike[str], count: FilterStats, info: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.count = count
        self.gzip = self.path.name.endswith(".gz")
        self.closed = False
        self.responses = 0
        self.revisits = 0
        self._failures_logged = False
        #: Checked page URL → the ``response`` record at the root of its chain (None: not known); the most recent.
        self._written: OrderedDict[str, _Root | None] = OrderedDict()
        self._writer = WARCWriter(BytesIO(), gzip=False, warc_version=WARC_VERSION)  # records only; gzip is ours
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - closed by close()
        try:
            self._end = self._file.seek(0, os.SEEK_END)
            fields = {"software": f"simhash-filter {__version__}", "format": "WARC File Format 1.0", **(info or {})}
            self._append(self._writer.create_warcinfo_record(self.path.name, fields))
        except BaseException:
            self._file.close()
            raise

    @classmethod
    def for_crawler(cls, crawler: Crawler, crawl_filter: CrawlFilter) -> WarcOutput | None:
        """The crawl's WARC output (closed when the spider closes), or None when ``SIMHASH_WARC`` is empty; raises
        ``ValueError`` naming the setting when the file cannot be opened or written."""
        settings = crawler.settings
        path = settings.get("SIMHASH_WARC", SIMHASH_WARC) or ""
        if not isinstance(path, (str, os.PathLike)):
            raise ValueError(f"SIMHASH_WARC must be a file path or '', got {path!r}")
        path = os.fspath(path)
        if not path or crawl_filter.options.readonly:  # an inspection command's pages are no part of the crawl's record
            return None
        config = crawl_filter.options.config
        spider = getattr(crawler.spidercls, "name", None)
        info = {
            "isPartOf": spider,
            "hostname": socket.gethostname(),
            "robots": "obey" if settings.getbool("ROBOTSTXT_OBEY") else "ignore",
            "http-header-user-agent": settings.get("USER_AGENT"),
            "simhash-model": config.fingerprint.model_id(),
            "simhash-action": crawl_filter.options.action,
            "simhash-max-distance": config.max_distance,
            "simhash-min-similarity": config.min_similarity,
            "simhash-revisit-profile": PROFILE,
        }
        try:
            output = cls(path, crawl_filter.report.count, info)
        except OSError as exc:
            raise ValueError(f"SIMHASH_WARC={path!r}: cannot write the WARC file: {error_message(exc)}") from exc
        crawler.signals.connect(output.spider_closed, signal=signals.spider_closed)
        logger.info("simhash: writing the crawl's WARC to %s", os.path.abspath(path), extra={"crawler": crawler})
        return output

    def write(self, response: Response, decision: Decision | None, fetched: datetime) -> None:
        """Write the record of a response the filter saw (its ``decision``; None: exempt); never raises."""
        if self.closed or not response.url.startswith(_SCHEMES):
            return
        try:
            checked = decision is not None and decision.checked
            if checked and decision is not None and decision.near_duplicate:
                record = self._revisit(response, decision, fetched)
                self._append(record)
                self.revisits += 1
                self.count.count("simhash/warc/revisits")
            elif checked or is_html(response):
                record = self._response(response, decision, fetched)
                self._append(record)
                self.responses += 1
                self.count.count("simhash/warc/responses")
            else:
                return
            if checked:  # in the index: later near-duplicates may point at this record, or at its root
                self._remember(response.url, _root_of(record))
        except Exception as exc:
            self._failed(response.url, exc)

    def _headers(
        self, record_type: str, url: str, date: str, extra: list[tuple[str, str]], version: str = WARC_VERSION
    ) -> StatusAndHeaders:
        headers = [
            ("WARC-Type", record_type),
            ("WARC-Record-ID", f"<urn:uuid:{uuid.uuid4()}>"),
            ("WARC-Date", date),
            ("WARC-Target-URI", url),
            *extra,
        ]
        return StatusAndHeaders("", headers, protocol=version)

    @staticmethod
    def _ip_address(response: Response) -> list[tuple[str, str]]:
        ip = getattr(response, "ip_address", None)
        return [("WARC-IP-Address", str(ip))] if ip is not None else []

    def _response(self, response: Response, decision: Decision | None, fetched: datetime) -> Any:
        """A ``response`` record: a kept page (``WARC-Simhash-Fingerprint``) or one let through unchecked
        (``WARC-Simhash-Skipped``: the reason)."""
        extra = self._ip_address(response)
        if decision is not None and decision.checked and decision.hex is not None:
            extra.append(("WARC-Simhash-Fingerprint", decision.hex))
        else:
            reason = decision.status if decision is not None else SkipReason.DONT_SIMHASH.value
            extra.append(("WARC-Simhash-Skipped", reason))
        headers = self._headers("response", response.url, warc_date(fetched), extra)
        body = response.body
        return self._writer.create_warc_record(
            response.url, "response", payload=BytesIO(body), length=len(body), warc_headers=headers,
            http_headers=http_headers(response),
        )  # fmt: skip

    def _revisit(self, response: Response, decision: Decision, fetched: datetime) -> Any:
        """A ``revisit`` record of :data:`PROFILE` (WARC/1.1): the HTTP headers, the root ``response`` record it
        refers to, and the filter's match in ``WARC-Simhash-*`` headers."""
        assert decision.duplicate_of is not None
        extra = [*self._ip_address(response), ("WARC-Profile", PROFILE)]
        root = self._root(decision.duplicate_of)
        if root is not None:
            extra += [("WARC-Refers-To-Target-URI", root.uri), ("WARC-Refers-To-Date", root.date),
                      ("WARC-Refers-To", root.record_id), ("WARC-Payload-Digest", root.payload_digest)]  # fmt: skip
        else:  # kept by an earlier crawl or another process, or forgotten: found by its URI (and date) alone
            extra.append(("WARC-Refers-To-Target-URI", decision.duplicate_of))
        extra += [("WARC-Simhash-Duplicate-Of", decision.duplicate_of),
                  ("WARC-Simhash-Payload-Digest", _sha1_digest(response.body))]  # fmt: skip
        if decision.distance is not None:
            extra.append(("WARC-Simhash-Distance", str(decision.distance)))
        if decision.hex is not None:
            extra.append(("WARC-Simhash-Fingerprint", decision.hex))
        if decision.similarity is not None:
            extra.append(("WARC-Simhash-Similarity", f"{decision.similarity:.3f}"))
        headers = self._headers("revisit", response.url, warc_date(fetched), extra, version=REVISIT_VERSION)
        return self._writer.create_warc_record(
            response.url, "revisit", warc_headers=headers, http_headers=http_headers(response, body=False)
        )

    def _root(self, url: str) -> _Root | None:
        """The ``response`` record at the root of the chain of the page at ``url`` (None: not known)."""
        if url not in self._written:
            return None
        self._written.move_to_end(url)
        return self._written[url]

    def _remember(self, url: str, root: _Root | None) -> None:
        self._written[url] = root
        self._written.move_to_end(url)
        if len(self._written) > REFERS_TO_LIMIT:
            self._written.popitem(last=False)

    def _append(self, record: Any) -> None:
        """Serialize ``record`` and append it in one write; a failed write is undone (the file cut back)."""
        buffer = BytesIO()
        self._writer.out = buffer
        self._writer.write_record(record)
        data = buffer.getvalue()
        if self.gzip:
            compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, zlib.MAX_WBITS | 16)
            data = compressor.compress(data) + compressor.flush()
        view = memoryview(data)
        try:
            while view:
                written = self._file.write(view)
                view = view[written:]
        except BaseException:
            with contextlib.suppress(OSError):
                self._file.truncate(self._end)
            raise
        self._end += len(data)

    def _failed(self, url: str, exc: Exception) -> None:
        self.count.count("simhash/warc/errors")
        if not self._failures_logged:
            self._failures_logged = True
            logger.error(
                "simhash: cannot write the WARC record of %s to %s: %s (further failures are only counted in "
                "simhash/warc/errors)",
                url,
                self.path,
                error_message(exc),
                exc_info=not isinstance(exc, OSError),  # a bug: its traceback
            )

    def close(self) -> None:
        """Close the file (its records are written as they come: nothing is buffered)."""
        if self.closed:
            return
        self.closed = True
        try:
            self._file.close()
        except OSError as exc:
            self._failed("(closing)", exc)

    def spider_closed(self, spider: Any, reason: str = "") -> None:
        self.close()
        logger.info(
            "simhash: WARC %s: %d response records, %d revisits (near-duplicates)%s",
            self.path,
            self.responses,
            self.revisits,
            f", {self.count.get('simhash/warc/errors')} records not written" if self._failures_logged else "",
            extra={"spider": spider},
        )
