"""What the report reads: a crawl's feed (JSON Lines items with the filter's fields), or a ``dedup`` output with
(optionally) its input, as one :class:`Entry` per page in input order.

A feed item carries the filter's fields (``fingerprint``, ``duplicate_of``, ``distance``, ``skipped``) and
``html`` and/or ``text``; a ``dedup`` output line the same decision keys and ``status``, and its input (read as
``dedup`` reads it) gives each line's page, line for line.  A source is read twice (the decisions, then the pages
it shows).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any

from simhash_filter.batch.dedup import MALFORMED, Page, parse_line
from simhash_filter.batch.inputs import input_files
from simhash_filter.batch.reader import InputReader

__all__ = ["UNCHECKED", "Entry", "MismatchError", "Source", "open_lines"]

#: Status of a feed item that carries no fingerprint and no ``skipped`` reason (an item the filter never saw).
UNCHECKED = "unchecked"


class MismatchError(ValueError):
    """A ``dedup`` output and the input given with it do not belong together."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One page as the report sees it: the filter's decision, its size, and its content when asked for."""

    url: str | None
    fingerprint: int | None
    duplicate_of: str | None = None
    distance: int | None = None
    #: None for a page with a fingerprint; else why it has none (a dedup status, a crawl's ``skipped``).
    status: str | None = None
    #: Bytes of its HTML (or of its text, when the source holds no HTML).
    size: int = 0
    html: str | bytes | None = None
    encoding: str | None = None
    text: str | None = None
    #: Whether the source holds the page's HTML (``html`` is filled only when content is asked for).
    has_html: bool = False
    #: A near-duplicate's sketch similarity to the page it names, as its feed item carries it (flag mode), or None.
    similarity: float | None = None
    #: Whether the source holds the page's text (a feed stored without ``text`` or ``html`` has neither).
    has_text: bool = False


def _fingerprint(value: Any) -> int | None:
    if isinstance(value, str) and len(value) == 16:
        try:
            return int(value, 16)
        except ValueError:
            return None
    return None


def _decision(obj: dict[str, Any]) -> tuple[int | None, str | None, int | None, str | None]:
    """``(fingerprint, duplicate_of, distance, status)`` of a feed item or a dedup output line."""
    fingerprint = _fingerprint(obj.get("fingerprint"))
    dup = obj.get("duplicate_of")
    distance = obj.get("distance")
    status = obj.get("status", obj.get("skipped"))
    if fingerprint is not None:
        return fingerprint, dup if isinstance(dup, str) else None, distance if type(distance) is int else None, None
    if not isinstance(status, str) or not status:
        status = UNCHECKED if "fingerprint" not in obj else "no fingerprint"
    return None, None, None, status


def _utf8_len(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


@contextmanager
def open_lines(path: str) -> Iterator[IO[bytes]]:
    """A JSON Lines file to read as bytes, decompressed when its name ends in ``.gz``."""
    with open(path, "rb") as raw:
        if path.endswith(".gz"):
            with gzip.GzipFile(fileobj=raw, mode="rb") as stream:
                yield stream  # type: ignore[misc]  # a GzipFile is a binary stream (typeshed: BufferedIOBase)
        else:
            yield raw


class Source:
    """A report's input: ``path`` (a feed, or a ``dedup`` output) and, for a ``dedup`` output, ``pages`` (its
    input: JSON Lines or WARC, read as ``dedup`` reads it)."""

    def __init__(self, path: str, pages: str | None = None, *, max_bytes: int | None = None) -> None:
        self.path = path
        self.pages = pages
        self.max_bytes = max_bytes
        if path == "-" or pages == "-":
            raise ValueError("the report reads its input twice: give a file, not standard input")
        with open(path, "rb"):
            pass
        #: The files of ``pages``, as ``dedup`` takes them (FileNotFoundError when there are none).
        self.page_files = None if pages is None else input_files([pages])

    def entries(self, content: bool) -> Iterator[Entry]:
        """Every page in input order; with ``content``, its HTML and/or text too."""
        with open_lines(self.path) as lines:
            if self.pages is None or self.page_files is None:
                yield from (_feed_entry(line, content) for line in lines if line.strip())
            else:
                items = iter(InputReader(self.page_files, max_bytes=self.max_bytes))
                yield from _aligned(lines, items, content, self.pages)


def _feed_entry(line: bytes, content: bool) -> Entry:
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return Entry(None, None, status=MALFORMED)
    if not isinstance(obj, dict) or not isinstance(obj.get("url"), str):
        return Entry(None, None, status=MALFORMED)
    fingerprint, dup, distance, status = _decision(obj)
    html, text = obj.get("html"), obj.get("text")
    html = html if isinstance(html, str) else None
    text = text if isinstance(text, str) else None
    size = _utf8_len(html) if html is not None else _utf8_len(text) if text is not None else 0
    has_html, has_text = html is not None, text is not None
    if not content:
        html = text = None
    similarity = obj.get("similarity")
    if dup is None or type(similarity) not in (int, float) or not 0 <= similarity <= 1:  # type: ignore[operator]
        similarity = None
    return Entry(obj["url"], fingerprint, dup, distance, status, size, html, None, text, has_html, similarity, has_text)


def _aligned(out: IO[bytes], items: Iterator[bytes | Page], content: bool, pages_name: str) -> Iterator[Entry]:
    """A ``dedup`` output's lines joined, line for line, with the input items they were made of."""
    for n, line in enumerate((line for line in out if line.strip()), 1):
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            obj = None
        if not isinstance(obj, dict) or "url" not in obj:
            raise MismatchError(f"line {n} of the output is not a dedup output line")
        item = next(items, None)
        if item is None:
            raise MismatchError(f"the output has more lines than {pages_name} has pages ({n - 1})")
        html: bytes | str | None
        if isinstance(item, bytes):
            url, html, _ = parse_line(item)
            encoding = None
        else:
            url, html, encoding = item.url, item.html, item.encoding
        if obj.get("url") != url:
            raise MismatchError(
                f"line {n} of the output is {obj.get('url')!r} where {pages_name} has {url!r}: not its input"
            )
        fingerprint, dup, distance, status = _decision(obj)
        size = 0 if html is None else len(html) if isinstance(html, bytes) else _utf8_len(html)
        yield Entry(
            url,
            fingerprint,
            dup,
            distance,
            status,
            size,
            html if content else None,
            encoding,
            has_html=html is not None,
        )
    if next(items, None) is not None:
        raise MismatchError(f"{pages_name} has more pages than the output has lines: not its output")
