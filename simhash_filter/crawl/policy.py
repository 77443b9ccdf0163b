"""Which pages the filter checks, and why not: the responses it lets through unchecked (exempt, HTTP
errors, not HTML, empty) with their reason, and the document it fingerprints for a response or an item.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from itemadapter import ItemAdapter
from scrapy.http import HtmlResponse, Request, Response
from w3lib.encoding import http_content_type_encoding

from simhash_filter.crawl.decision import DONT_META_KEY, SkipReason

__all__ = ["HTML_TYPES", "Policy", "Skip", "is_html", "item_document"]

#: Content types fingerprinted when a response declares one.
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

_HTML_MARKUP = re.compile(
    r"<\s*(?:!doctype|html|head|body|div|p|br|span|a|article|section|main|h[1-6]|ul|ol|li|table|tr|td)\b", re.I
)


def is_html(response: Response) -> bool:
    """HTML by the declared Content-Type; without one, by Scrapy's sniffing (URL and body)."""
    content_type = response.headers.get(b"Content-Type")
    if content_type:
        mime = content_type.split(b";", 1)[0].strip().lower().decode("latin-1")
        return mime in HTML_TYPES
    return isinstance(response, HtmlResponse)


def item_document(values: list[Any]) -> bytes | str | None:
    """One page to fingerprint from item field values: HTML as is, plain text as paragraphs."""
    parts: list[str] = []
    for value in values:
        if isinstance(value, (list, tuple)):
            value = "\n\n".join(str(v) for v in value if isinstance(v, (str, bytes)))
        if isinstance(value, bytes):
            if len(values) == 1:
                return value
            value = value.decode("utf-8", "replace")
        if not isinstance(value, str) or not value.strip():
            continue
        if _HTML_MARKUP.search(value[:4096]):
            parts.append(value)
        else:
            parts.extend(f"<p>{html.escape(p.strip())}</p>" for p in re.split(r"\n\s*\n", value) if p.strip())
    if not parts:
        return None
    if len(parts) == 1 and _HTML_MARKUP.match(parts[0].lstrip()) and "<p>" not in parts[0][:3]:
        return parts[0]
    return "<html><body><article>\n" + "\n".join(parts) + "\n</article></body></html>"


@dataclass(frozen=True, slots=True)
class Skip:
    """Why a response is let through unchecked (``simhash/skipped/<reason>``), and the level of its log line."""

    reason: SkipReason
    level: int = logging.INFO


class Policy:
    """Decides which responses are fingerprinted, and what is fingerprinted of a response or an item."""

    def __init__(self, item_fields: Iterable[str] = ()) -> None:
        self.item_fields = list(item_fields)
        self._item_number = 0

    def skip(self, request: Request, response: Response) -> Skip | None:
        """Why ``response`` is not fingerprinted, or None if it is."""
        if request.meta.get(DONT_META_KEY):
            return Skip(SkipReason.DONT_SIMHASH)
        if not 200 <= response.status < 300:
            return Skip(SkipReason.HTTP_STATUS, logging.DEBUG)  # HttpErrorMiddleware logs them
        if not is_html(response):
            return Skip(SkipReason.NOT_HTML, logging.DEBUG)
        if len(response.body) < 65536 and not response.body.strip():  # larger blank pages: the fingerprinter
            return Skip(SkipReason.EMPTY)
        return None

    @staticmethod
    def encoding(response: Response) -> str | None:
        """The charset the response declares in its Content-Type, if any."""
        return http_content_type_encoding((response.headers.get(b"Content-Type") or b"").decode("latin-1"))

    def item_page(self, item: Any) -> tuple[str, bytes | str] | None:
        """``(url, document)`` of an item's ``SIMHASH_ITEM_FIELDS`` (an item without a ``url`` is numbered),
        or None if it has none of them."""
        adapter = ItemAdapter(item)
        values = [adapter.get(name) for name in self.item_fields if adapter.get(name) is not None]
        document = item_document(values)
        if document is None:
            return None
        url = adapter.get("url")
        if not isinstance(url, str) or not url:
            self._item_number += 1
            url = f"item:{self._item_number}"
        return url, document
