"""Pages from WARC files (Common Crawl, Heritrix, Browsertrix): an input of ``simhash-filter dedup`` and of the
Spark job, read with warcio.

A ``response`` record becomes a :class:`WarcPage` when its HTTP status is 2xx and its payload is HTML: a
Content-Type of ``text/html`` or ``application/xhtml+xml``, or none and a payload (or a URL) that looks like
HTML.  The payload is de-chunked and decoded from its Content-Encoding (gzip, deflate, br); its charset is the
one the HTTP Content-Type declares, read as the crawl reads it (``Policy.encoding``), and the fingerprinter
falls back as it does for a crawled page when that names no charset or the bytes are not valid in it.

Every other record is counted in :attr:`WarcCounts.skipped` by reason (:data:`SKIP_REASONS`), never an error.
A damaged file (a record cut short, a damaged gzip member, bytes that are not a WARC record) keeps the pages
read before the damage; the damage is counted in :attr:`WarcCounts.damaged` with the file and offset, and the
rest of that file is not read (where a record ends is not known after it), the next file is.
"""

from __future__ import annotations

import errno
import glob
import importlib
import os
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
from simhash_filter.batch.inputs import WARC, WARC_SUFFIXES, is_input_name, kind

__all__ = [
    "HTML_TYPES",
    "SKIP_REASONS",
    "WARC_SUFFIXES",
    "Damage",
    "WarcCounts",
    "WarcPage",
    "WarcReader",
    "is_warc_input",
    "iter_warc_pages",
    "iter_warc_stream",
    "warc_files",
]

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
    """A page of a WARC file: ``url`` (its WARC-Target-URI), ``html`` (the HTTP payload's bytes, decoded from
    its Content-Encoding), ``encoding`` (the charset its Content-Type declares, or None), and the record's
    WARC-Date and WARC-Record-ID, which its ``dedup`` output record carries as ``warc_date`` and
    ``warc_record_id``."""

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
    """What reading WARC input met: the ``pages``, the records ``skipped`` by reason, the ``damaged`` places (one
    a file at most) and the ``files`` opened."""

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


def _is_glob(path: str) -> bool:
    return "*" in path or "?" in path


def is_warc_input(path: str) -> bool:
    """Whether ``dedup`` reads ``path`` as WARC: a ``.warc`` or ``.warc.gz`` file, a directory, or a glob (with
    ``*`` or ``?``) that is not the name of a file; anything else is JSON Lines (``-``: standard input)."""
    if path == "-":
        return False
    if path.lower().endswith(WARC_SUFFIXES) or os.path.isdir(path):
        return True
    return _is_glob(path) and not os.path.exists(path)


def _warc_files_under(directory: str) -> list[str]:
    """A directory's WARC files, as :mod:`simhash_filter.batch.inputs` takes them (not hidden, at any depth)."""
    found = []
    for parent, dirs, names in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for name in names:
            path = os.path.join(parent, name)
            if kind(name) == WARC and is_input_name(os.path.relpath(path, directory)):
                found.append(path)
    return sorted(found)


def warc_files(source: str | os.PathLike[str]) -> list[str]:
    """The files of a WARC input, in the order read: a file itself; a directory's ``*.warc`` and ``*.warc.gz``
    files at any depth, sorted by path; the files a glob matches (``**`` for any depth; a directory it matches
    as a directory), sorted by path.  A file that does not exist, a directory without WARC files and a glob
    that matches none raise :class:`FileNotFoundError`."""
    path = os.fspath(source)
    if os.path.isdir(path):
        files = _warc_files_under(path)
        if not files:
            raise FileNotFoundError(errno.ENOENT, "no .warc or .warc.gz files in this directory", path)
        return files
    if os.path.exists(path):
        return [path]
    if not _is_glob(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    files = []
    for match in glob.glob(path, recursive=True):
        if os.path.isdir(match):
            files.extend(_warc_files_under(match))
        else:
            files.append(match)
    if not files:
        raise FileNotFoundError(errno.ENOENT, "no WARC files match", path)
    return sorted(set(files))


class WarcReader:
    """The pages of a WARC input (:func:`warc_files`), in order, counting in :attr:`counts` what is not a page.

    The files are listed when the reader is made (:class:`FileNotFoundError` when there are none) and opened
    one at a time as the pages are read.  ``max_bytes``: read at most this much of each payload (the
    fingerprinter's work cap and one byte; None: all of it).
    """

    def __init__(
        self, source: str | os.PathLike[str], *, max_bytes: int | None = None, counts: WarcCounts | None = None
    ) -> None:
        self.files = warc_files(source)
        self.max_bytes = max_bytes
        self.counts = counts if counts is not None else WarcCounts()
        self._sizes = [_size(path) for path in self.files]
        self._done = 0  # bytes of the files read to their end
        self._current: IO[bytes] | None = None

    @property
    def size(self) -> int:
        """The files' total size in bytes (as stored: compressed)."""
        return sum(self._sizes)

    @property
    def compressed(self) -> int:
        """How many of :attr:`size`'s bytes are in ``.gz`` files."""
        return sum(size for path, size in zip(self.files, self._sizes, strict=True) if path.lower().endswith(".gz"))

    def position(self) -> int:
        """Bytes of the files read so far (for a progress bar)."""
        current = self._current
        return self._done + (current.tell() if current is not None and not current.closed else 0)

    def __iter__(self) -> Iterator[WarcPage]:
        for path, size in zip(self.files, self._sizes, strict=True):
            with open(path, "rb") as f:
                self._current = f
                self.counts.files += 1
                yield from iter_warc_stream(f, path, self.counts, max_bytes=self.max_bytes)
            self._current = None
            self._done += size


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0  # opening it will say why


def iter_warc_pages(
    source: str | os.PathLike[str] | IO[bytes], counts: WarcCounts | None = None, *, max_bytes: int | None = None
) -> Iterator[WarcPage]:
    """The pages of a WARC file, a directory or a glob of them (:func:`warc_files`), or of an open binary
    stream (gzip per record, one gzip stream, or uncompressed), in order.  What is not a page is counted in
    ``counts`` (skipped records by reason, damage with its file and offset); nothing raises but a failed read
    (``OSError``) or, for a path, :class:`FileNotFoundError` when it names no file."""
    counts = counts if counts is not None else WarcCounts()
    if hasattr(source, "read"):
        stream: IO[bytes] = source  # type: ignore[assignment]
        counts.files += 1
        yield from iter_warc_stream(stream, str(getattr(stream, "name", "<stream>")), counts, max_bytes=max_bytes)
    else:
        yield from WarcReader(source, max_bytes=max_bytes, counts=counts)


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
    that cannot be decoded.  A payload declared compressed that is not (its first bytes do not decompress) is
    taken as it is, as warcio's ``content_stream()`` takes it."""
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
    """warcio's iterator over WARC records (WARC only, no ARC), which notes damage instead of writing it to
    stderr, and reads a ``.warc.gz`` compressed as one gzip stream instead of refusing it (seeking into such a
    file is not possible, reading it through is)."""

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
