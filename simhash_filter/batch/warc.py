"""Pages from WARC files, an input of ``simhash-filter dedup`` and of the Spark job (docs/warc.md): a 2xx
``response`` record whose payload is HTML becomes a :class:`WarcPage` (de-chunked, decoded from its
Content-Encoding, with its declared charset); every other record is counted in :attr:`WarcCounts.skipped` by
reason.  A damaged file keeps the pages before the damage, which is counted (:class:`Damage`), and the rest of that
file is not read.  warcio's private internals are overridden in :class:`_Records` and :class:`_Quiet` only.
"""

from __future__ import annotations

import importlib
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any
from urllib.parse import urlsplit

from w3lib.encoding import http_content_type_encoding
from warcio.archiveiterator import WARCIterator
from warcio.bufferedreaders import (
    BufferedReader,
    ChunkedDataException,
    ChunkedDataReader,
    DecompressingBufferedReader,
)
from warcio.exceptions import ArchiveLoadFailed
from warcio.limitreader import LimitReader
from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeadersParserException

from simhash_filter.batch.dedup import MAX_URL_CHARS, Page

__all__ = ["HTML_TYPES", "SKIP_REASONS", "Damage", "WarcCounts", "WarcPage", "iter_warc_stream"]

#: Content types that make a response a page (as the crawl's ``simhash_filter.crawl.policy.HTML_TYPES``).
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

#: Why a record is not a page (the keys of :attr:`WarcCounts.skipped`).
NOT_RESPONSE = "not_response"  # request, metadata, warcinfo, revisit, resource, conversion, ... records
NOT_HTTP = "not_http"  # a response record without an HTTP response in it (dns:, an empty block)
HTTP_STATUS = "http_status"  # not 2xx
NOT_HTML = "not_html"  # another Content-Type, or none and nothing that looks like HTML
CONTENT_ENCODING = "content_encoding"  # a Content-Encoding that cannot be decoded (unknown, or damaged data)
NO_URL = "no_url"  # no WARC-Target-URI, or one longer than dedup.MAX_URL_CHARS
SKIP_REASONS = (NOT_RESPONSE, NOT_HTTP, HTTP_STATUS, NOT_HTML, CONTENT_ENCODING, NO_URL)

#: Without a Content-Type: a payload whose first bytes hold a doctype or an <html> tag, or a URL path with one
#: of these extensions, is HTML (Scrapy's sniffing, which the crawl uses, with ``<html lang=...>`` too).
_SNIFF_BYTES = 5000
_HTML_START = re.compile(rb"<!doctype\s+html|<html[\s>]", re.IGNORECASE)
_HTML_EXTENSIONS = (".html", ".htm", ".xhtml", ".shtml")
#: Content-Encoding names and the warcio decompressor of each (br where the brotli module is installed).
_DECOMPRESSORS = {"gzip": "gzip", "x-gzip": "gzip", "deflate": "deflate", "br": "br"}
_READ_ERRORS = (ArchiveLoadFailed, StatusAndHeadersParserException, ChunkedDataException, EOFError)


@dataclass(frozen=True, slots=True)
class WarcPage(Page):
    """A page of a WARC file (``url``: its WARC-Target-URI), with the record's WARC-Date and WARC-Record-ID, which
    its ``dedup`` output record carries as ``warc_date`` and ``warc_record_id``."""

    warc_date: str | None = None
    record_id: str | None = None

    def record_fields(self) -> tuple[tuple[str, Any], ...]:
        return (("warc_date", self.warc_date), ("warc_record_id", self.record_id))


@dataclass(frozen=True, slots=True)
class Damage:
    """Where a WARC file is damaged (``offset``: of the record that is, in the file as stored) and how."""

    path: str
    offset: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: damaged at offset {self.offset}: {self.reason}; the rest of the file is not read"


@dataclass
class WarcCounts:
    """What reading WARC input met: ``pages``, records ``skipped`` by reason, ``damaged`` places, ``files``."""

    pages: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    damaged: list[Damage] = field(default_factory=list)
    files: int = 0

    @property
    def records(self) -> int:
        """Records read: pages, skipped and damaged."""
        return self.pages + sum(self.skipped.values()) + len(self.damaged)

    def update(self, other: WarcCounts) -> None:
        """Add ``other``'s counts to these (to sum what several readers met)."""
        self.pages += other.pages
        self.skipped.update(other.skipped)
        self.damaged.extend(other.damaged)
        self.files += other.files


def iter_warc_stream(
    stream: IO[bytes], name: str = "<stream>", counts: WarcCounts | None = None, *, max_bytes: int | None = None
) -> Iterator[WarcPage]:
    """The pages of one open WARC stream (gzip per record, one gzip stream, or uncompressed), in order; what is
    not a page is counted in ``counts`` (``name``: the file named in its :class:`Damage`)."""
    counts = counts if counts is not None else WarcCounts()
    records = _Records(stream)
    try:
        while True:
            start = records.offset
            try:
                record = next(records, None)
            except _READ_ERRORS as exc:
                counts.damaged.append(Damage(name, start, records.unreadable(exc)))
                return
            if record is None:
                break
            if not _valid_length(record):
                counts.damaged.append(Damage(name, start, "a record without a valid Content-Length"))
                return
            page = _page(record, max_bytes)
            problem = records.finish(record)
            if problem is not None:
                counts.damaged.append(Damage(name, start, problem))
                return
            if isinstance(page, str):
                counts.skipped[page] += 1
                continue
            counts.pages += 1
            yield page
        tail = records.tail()
        if tail > 0:
            counts.damaged.append(Damage(name, records.offset, f"the last {tail} bytes are not a whole record"))
    finally:
        records.close()


def _valid_length(record: ArcWarcRecord) -> bool:
    value = record.rec_headers.get_header("Content-Length")
    return value is not None and value.strip().isdigit()


def _page(record: ArcWarcRecord, max_bytes: int | None) -> WarcPage | str:
    """The page a record holds, or why it holds none (a :data:`SKIP_REASONS` value)."""
    if record.rec_type != "response":
        return NOT_RESPONSE
    http = record.http_headers
    if http is None or not http.protocol.upper().startswith("HTTP/"):
        return NOT_HTTP
    code = http.get_statuscode()
    if not (len(code) == 3 and code.isdigit() and code.startswith("2")):
        return HTTP_STATUS
    content_type = (http.get_header("Content-Type") or "").strip()
    mime = content_type.split(";", 1)[0].strip().lower()
    if mime and mime not in HTML_TYPES:
        return NOT_HTML
    url = (record.rec_headers.get_header("WARC-Target-URI") or "").strip()
    if not url or len(url) > MAX_URL_CHARS:
        return NO_URL
    payload = _payload(record, http, max_bytes)
    if payload is None:
        return CONTENT_ENCODING
    if not mime and not _looks_like_html(url, payload):
        return NOT_HTML
    return WarcPage(
        url=url,
        html=payload,
        encoding=http_content_type_encoding(content_type),  # as the crawl's Policy.encoding
        warc_date=record.rec_headers.get_header("WARC-Date"),
        record_id=record.rec_headers.get_header("WARC-Record-ID"),
    )


def _payload(record: ArcWarcRecord, http: Any, max_bytes: int | None) -> bytes | None:
    """The HTTP payload de-chunked and decoded from its Content-Encoding (at most ``max_bytes``), or None when
    that cannot be decoded (one declared compressed that is not is taken as it is, as warcio does)."""
    coding = (http.get_header("Content-Encoding") or "").strip().lower()
    decomp = None
    if coding and coding != "identity":
        decomp = _DECOMPRESSORS.get(coding)
        if decomp is None or (decomp == "br" and _brotli() is None):
            return None
    chunked = "chunked" in (http.get_header("Transfer-Encoding") or "").lower()
    stream: Any = record.raw_stream
    if chunked:
        stream = _QuietChunkedReader(stream, decomp_type=decomp)
    elif decomp is not None:
        stream = _QuietBufferedReader(stream, decomp_type=decomp)
    data = stream.read(max_bytes)
    if getattr(stream, "error", None) is not None:
        return None
    return data


def _looks_like_html(url: str, payload: bytes) -> bool:
    if urlsplit(url).path.lower().endswith(_HTML_EXTENSIONS):
        return True
    return _HTML_START.search(payload[:_SNIFF_BYTES]) is not None


def _one_line(text: str, limit: int = 200) -> str:
    """``text`` on one line of at most ``limit`` characters, control characters escaped."""
    text = " ".join(text.split())
    text = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text[: limit * 2])
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- warcio, quietly: its readers write decompression errors and misaligned records to stderr ------------------


def _brotli() -> Any:
    """The brotli module (``brotli`` or ``brotlicffi``), or None."""
    for name in ("brotli", "brotlicffi"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


class _BrotliDecompressor:
    """A brotli decompressor as warcio's readers use one (warcio 1.8's own fails with brotli 1.2, whose
    ``Decompressor`` takes no new attribute)."""

    unused_data = b""

    def __init__(self) -> None:
        decompressor = _brotli().Decompressor()
        self._process = getattr(decompressor, "process", None) or decompressor.decompress
        self._finished = decompressor.is_finished

    def decompress(self, data: bytes) -> bytes:
        return self._process(data)

    def flush(self) -> bytes:
        return b""

    @property
    def eof(self) -> bool:
        return bool(self._finished())


class _Quiet:
    """A warcio reader that keeps a decompression error (after the first block) in ``error`` instead of
    writing it to stderr, and then reads nothing more; it decodes br with :class:`_BrotliDecompressor`."""

    error: str | None = None

    def _init_decomp(self, decomp_type: str | None) -> None:
        if decomp_type == "br":
            self.num_block_read = 0
            self.decomp_type = decomp_type
            self.decompressor = _BrotliDecompressor()
            return
        super()._init_decomp(decomp_type)  # type: ignore[misc]

    def _decompress(self, data: bytes) -> bytes:
        if self.error is not None:
            return b""
        if self.decompressor is not None and data and self.num_block_read > 0:
            try:
                return self.decompressor.decompress(data)
            except Exception as exc:  # zlib.error, brotli.error
                self.error = str(exc) or type(exc).__name__
                return b""
        return super()._decompress(data)  # type: ignore[misc]  # its first block: not compressed after all?

    def _fillbuff(self, block_size: int | None = None) -> None:
        if self.error is not None:
            self.buff = None
            return
        super()._fillbuff(block_size)  # type: ignore[misc]


class _QuietFileReader(_Quiet, DecompressingBufferedReader):
    pass


class _QuietBufferedReader(_Quiet, BufferedReader):
    pass


class _QuietChunkedReader(_Quiet, ChunkedDataReader):
    pass


class _Unparsable(ArchiveLoadFailed):
    """Record headers that made warcio fail (not one of its own errors)."""


class _Records(WARCIterator):
    """warcio's iterator over WARC records, which notes damage instead of writing it to stderr, and reads a
    ``.warc.gz`` compressed as one gzip stream instead of refusing it."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__(stream)
        block_size: int = getattr(self, "reader").block_size  # noqa: B009 - warcio's own reader, replaced here
        self.reader = _QuietFileReader(self.fh, block_size=block_size)
        self.misaligned = False
        self.gzipped = False  # the records so far were in gzip members

    def _raise_invalid_gzip_err(self) -> None:
        pass

    def _next_record(self, next_line: bytes | None) -> ArcWarcRecord:
        try:
            return super()._next_record(next_line)
        except (AttributeError, TypeError, ValueError) as exc:  # warcio 1.8: a response without WARC-Target-URI
            raise _Unparsable(f"WARC headers that warcio cannot parse ({type(exc).__name__}: {exc})") from exc

    def _consume_blanklines(self) -> tuple[bytes | None, int]:
        # warcio's, without its warning on stderr: a record not followed by a blank line is noted.
        empty_size = 0
        first_line = True
        while True:
            line = self.reader.readline()
            if len(line) == 0:
                return None, empty_size
            stripped = line.rstrip()
            if len(stripped) == 0 or first_line:
                empty_size += len(line)
                if len(stripped) != 0:
                    self.misaligned = True
                first_line = False
                continue
            return line, empty_size

    def finish(self, record: ArcWarcRecord) -> str | None:
        """Read ``record`` to its end; how it is damaged, or None."""
        self.read_to_end()
        reader = self.reader
        error = reader.error if reader is not None else None
        if error is not None:
            return _one_line(f"a damaged gzip member ({error})")
        stream = record.raw_stream
        if isinstance(stream, LimitReader) and stream.limit > 0:
            return f"a record cut short (the file holds {record.length - stream.limit} of its {record.length} bytes)"
        if self.misaligned:
            return "a record whose Content-Length is not its length (no blank line after it)"
        decompressor = reader.decompressor if reader is not None else None
        self.gzipped = decompressor is not None
        if self.next_line is None and decompressor is not None and not getattr(decompressor, "eof", True):
            return "a gzip member cut short (the file ends before its end)"
        return None

    def unreadable(self, exc: Exception) -> str:
        """Why the bytes after the last record read are no record (``exc``: what warcio raised)."""
        reader = self.reader
        if self.gzipped and reader is not None and reader.decompressor is None:  # warcio gave up decompressing
            return "a damaged gzip member"
        return _one_line(str(exc) if isinstance(exc, _Unparsable) else f"not a WARC record ({exc})")

    def tail(self) -> int:
        """After the last record: the bytes left that are not a whole record (a gzip member cut in its header)."""
        return max(0, self.fh.tell() - self.offset)
