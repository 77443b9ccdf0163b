"""A request's body read within the service's limits, and the pages it holds: one page's bytes (its charset from
the ``Content-Type``), WARC response records, or JSON Lines of ``{"url", "html"}`` (``simhash-filter dedup``'s
input).  Every refusal is a :class:`BadRequest` with its HTTP status and one line saying why.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import AsyncIterator

from w3lib.encoding import http_content_type_encoding

from simhash_filter.batch.dedup import MALFORMED, parse_line
from simhash_filter.batch.warc import WarcCounts, iter_warc_stream
from simhash_filter.serve.service import PageIn

__all__ = ["WARC_TYPES", "BadRequest", "batch_pages", "media_type", "one_page", "read_body"]

#: Media types of a WARC body (``application/warc``, its registered type; the others as tools send them).
WARC_TYPES = frozenset({"application/warc", "application/x-warc", "application/warc+gzip"})
#: ``Content-Encoding`` values a request body may have (zlib's window bits for each).
_ENCODINGS = {"gzip": 31, "x-gzip": 31, "deflate": 15}


class BadRequest(Exception):
    """A request the service refuses, with its HTTP ``status`` and a one-line message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def media_type(content_type: str | None) -> str:
    """The media type of a ``Content-Type`` value, lower case, without its parameters."""
    return (content_type or "").split(";", 1)[0].strip().lower()


async def read_body(chunks: AsyncIterator[bytes], content_length: str | None, content_encoding: str | None,
                    limit: int) -> bytes:  # fmt: skip
    """The body, at most *limit* bytes as sent and once its ``Content-Encoding`` (gzip, deflate) is undone: a
    larger one is refused (413) as soon as its length is known, without reading the rest."""
    if content_length is not None:
        if not content_length.strip().isdigit():
            raise BadRequest(400, f"Content-Length is not a number: {content_length[:40]!r}")
        if int(content_length) > limit:
            raise BadRequest(413, f"the body of {int(content_length):,} bytes is over the limit of {limit:,} bytes")
    coding = (content_encoding or "identity").strip().lower()
    if coding != "identity" and coding not in _ENCODINGS:
        raise BadRequest(415, f"Content-Encoding {coding[:40]!r} is not supported (gzip, deflate or none)")
    data = bytearray()
    async for chunk in chunks:
        data += chunk
        if len(data) > limit:
            raise BadRequest(413, f"the body is over the limit of {limit:,} bytes")
    if coding == "identity":
        return bytes(data)
    inflate = zlib.decompressobj(_ENCODINGS[coding])
    try:
        body = inflate.decompress(bytes(data), limit + 1)
    except zlib.error as exc:
        raise BadRequest(400, f"the body is not valid {coding} ({exc})") from None
    if len(body) > limit or inflate.unconsumed_tail:
        raise BadRequest(413, f"the body decompresses to over the limit of {limit:,} bytes")
    if not inflate.eof:
        raise BadRequest(400, f"the {coding} body is cut short")
    return body


def _charset(content_type: str | None) -> str | None:
    """The codec named by a ``Content-Type``'s charset (None: none named, the page's bytes are sniffed); a charset
    no codec knows is refused (415), not guessed."""
    if not content_type or "charset=" not in content_type.lower():
        return None
    encoding = http_content_type_encoding(content_type)
    if encoding is None:
        named = content_type.lower().split("charset=", 1)[1].split(";", 1)[0].strip(" \"'")
        raise BadRequest(415, f"charset {named[:40]!r} is not known; send the page with a known charset, or none to "
                              "have it sniffed as the crawl does")  # fmt: skip
    return encoding


def one_page(body: bytes, content_type: str | None, url: str | None, max_bytes: int) -> PageIn:
    """The page of a single-page request: its bytes with ``?url=`` and the charset of its ``Content-Type``, or
    (``Content-Type: application/warc``) the one response record of a WARC body, its URL the record's."""
    if media_type(content_type) in WARC_TYPES:
        pages = warc_pages(body, max_bytes)
        if len(pages) != 1:
            raise BadRequest(400, f"the WARC body holds {len(pages)} pages: send several to /v1/batch")
        return pages[0]
    if not url:
        raise BadRequest(400, "the page's URL is missing: add ?url=... (percent-encoded)")
    return PageIn(url, body[: max_bytes + 1], _charset(content_type))


def warc_pages(body: bytes, max_bytes: int) -> list[PageIn]:
    """The HTML pages of a WARC body (gzip per record, or not), in order; a body that holds none is refused, with
    what its records were (422)."""
    counts = WarcCounts()
    pages = [
        PageIn(page.url, page.html, page.encoding, fields=page.record_fields())
        for page in iter_warc_stream(io.BytesIO(body), "<body>", counts, max_bytes=max_bytes + 1)
    ]
    if counts.damaged:
        raise BadRequest(422, f"the WARC body is damaged: {counts.damaged[0]}")
    if not pages:
        what = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.skipped.items())) or "no record"
        raise BadRequest(422, f"the WARC body holds no HTML response record ({what})")
    return pages


def batch_pages(body: bytes, content_type: str | None, max_pages: int, max_bytes: int) -> list[PageIn]:
    """The pages of a batch: WARC records, or JSON Lines of ``{"url", "html"}`` (a malformed line is a page with
    status ``malformed``, as ``dedup`` reports it); more than *max_pages* is refused (413)."""
    if media_type(content_type) in WARC_TYPES:
        pages = warc_pages(body, max_bytes)
    else:
        lines = body.split(b"\n")
        if lines and not lines[-1].strip():
            lines.pop()  # the newline that ends the last line
        if len(lines) > max_pages:
            raise BadRequest(413, f"the batch holds {len(lines):,} lines, over the limit of {max_pages:,} pages")
        pages = [_line_page(line) for line in lines]
    if len(pages) > max_pages:
        raise BadRequest(413, f"the batch holds {len(pages):,} pages, over the limit of {max_pages:,} pages")
    return pages


def _line_page(line: bytes) -> PageIn:
    url, html, reason = parse_line(line)
    if html is None:
        return PageIn(url, status=MALFORMED, reason=reason)
    return PageIn(url, html)
