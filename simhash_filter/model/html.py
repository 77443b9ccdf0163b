"""A page's bytes as the UTF-8 bytes the model's parser reads (:func:`page_bytes`), or as an lxml tree
(:func:`parse`, for calibrate's page language).  The encoding is found in a browser's order: a byte-order mark, the
caller's declared encoding (an HTTP header), the page's ``<meta charset>``, a strict UTF-8 / GB18030 sniff, then
windows-1252.  Nothing is fetched and no external entity is resolved."""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from w3lib.encoding import html_body_declared_encoding, http_content_type_encoding, read_bom, to_unicode

#: Elements whose content is never visible text.
INVISIBLE_TAGS = (
    "script",
    "style",
    "noscript",
    "template",
    "head",
    "iframe",
    "svg",
    "math",
    "object",
    "canvas",
    "select",
    "textarea",
    "button",
)

if TYPE_CHECKING:
    from lxml import etree


@cache
def _parser() -> etree.HTMLParser:
    from lxml import etree

    return etree.HTMLParser(
        encoding="utf-8",
        recover=True,
        no_network=True,
        remove_comments=True,
        remove_pis=True,
        compact=True,
        default_doctype=False,
        collect_ids=False,
    )


class NotHtml(ValueError):
    """The input is not text that could be an HTML page (binary garbage, NUL bytes, ...)."""


@dataclass(frozen=True, slots=True)
class Parsed:
    root: etree._Element | None
    encoding: str
    truncated: bool


def _sniff(data: bytes) -> str:
    """Guess an undeclared encoding by strict decoding: UTF-8 first, then GB18030 (covers GBK/GB2312)."""
    for enc in ("utf-8", "gb18030"):
        try:
            data.decode(enc)
        except UnicodeDecodeError:
            continue
        return enc
    return "cp1252"


def _text_encoding(name: str | None) -> str | None:
    """``name`` if it is a text encoding Python can decode with, else None: a declared ``rot13``, ``base64``,
    ``zlib`` or ``idna`` is not one, and is treated as no declaration at all."""
    if not name:
        return None
    try:
        info = codecs.lookup(name)
    except LookupError:
        return None
    if not getattr(info, "_is_text_encoding", True) or info.name in _NOT_TEXT:
        return None
    return name


#: Codecs that claim to be text encodings but cannot decode a page (with errors="replace").
_NOT_TEXT = frozenset({"idna", "punycode", "undefined", "raw-unicode-escape", "unicode-escape"})


def _encoding(data: bytes, declared: str | None) -> tuple[str, bytes, bool]:
    """``(encoding, byte-order mark, sniffed)`` in the module's order; a declaration that names no text encoding is
    passed over."""
    bom_enc, bom = read_bom(data)
    if bom_enc is not None and bom is not None:
        return bom_enc, bom, False
    header = _text_encoding(declared) and f"text/html; charset={declared}"
    enc = _text_encoding(http_content_type_encoding(header)) or _text_encoding(html_body_declared_encoding(data))
    if enc is None:
        return _sniff(data), b"", True
    if enc in ("utf-16", "utf-32"):
        enc += "-be"
    return enc, b"", False


def _to_unicode(data: bytes, declared: str | None) -> tuple[str, str]:
    """``(encoding, text)``: the page decoded from the encoding :func:`_encoding` finds."""
    enc, bom, _ = _encoding(data, declared)
    return enc, to_unicode(data[len(bom) :], enc)


def _cut_utf8_safely(data: bytes, limit: int) -> bytes:
    """Cut at ``limit`` bytes without splitting a UTF-8 sequence (other encodings tolerate a torn tail)."""
    cut = data[:limit]
    j = len(cut)
    while j > 0 and len(cut) - j < 3 and cut[j - 1] & 0xC0 == 0x80:
        j -= 1
    if j > 0 and cut[j - 1] >= 0xC0:
        lead = cut[j - 1]
        need = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        if len(cut) - (j - 1) < need:
            cut = cut[: j - 1]
    return cut


def decode(html: bytes | str, encoding: str | None = None, max_bytes: int = 4_000_000) -> tuple[str, str, bool]:
    """Return ``(text, encoding, truncated)``; raise :class:`NotHtml` for binary input."""
    if isinstance(html, str):
        truncated = False
        if len(html) > max_bytes // 4:  # the cap is in UTF-8 bytes
            data = html.encode("utf-8", "replace")
            truncated = len(data) > max_bytes
            if truncated:
                html = _cut_utf8_safely(data, max_bytes).decode("utf-8", "replace")
        text = html
        enc = "unicode"
    else:
        truncated = len(html) > max_bytes
        data = _cut_utf8_safely(html, max_bytes) if truncated else html
        _check_binary(data[:8192])
        enc, text = _to_unicode(data, encoding)
    if text.find("\x00", 0, 8192) >= 0:
        raise NotHtml("NUL characters in the text: not an HTML page")
    return text, enc, truncated


#: Control bytes that text does not contain (tab, newline, form feed, carriage return and escape excepted).
_CONTROL_BYTES = bytes(c for c in range(1, 32) if c not in (9, 10, 12, 13, 27))
#: The same as a table of 256 entries, 1 for a control byte.
_CONTROL_TABLE = bytes(1 if c in _CONTROL_BYTES else 0 for c in range(256))


@cache
def _compiled_control_bytes() -> Callable[[bytes, bytes], int] | None:
    """The compiled core's count of control bytes, or None (imported on first use: the core imports this module)."""
    from simhash_filter.model.core import compiled_control_bytes

    return compiled_control_bytes


def _check_binary(head: bytes) -> None:
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16
        return
    if b"\x00" in head:
        raise NotHtml("NUL bytes in the first 8 KiB: binary content, not an HTML page")
    count = _compiled_control_bytes()
    if count is not None:
        control = count(head, _CONTROL_TABLE)
    else:
        control = len(head) - len(head.translate(None, _CONTROL_BYTES))
    if head and control / len(head) > 0.05:
        raise NotHtml(f"{control} control bytes in the first {len(head)}: binary content, not an HTML page")


def page_bytes(html: bytes | str, encoding: str | None = None, max_bytes: int = 4_000_000) -> tuple[bytes, str, bool]:
    """``(data, encoding, truncated)``: the page as UTF-8 bytes for the model's parser (empty when the page is empty
    or only white space); raise :class:`NotHtml` for binary input.  Valid UTF-8 bytes without a byte-order mark are
    handed on as they are."""
    if isinstance(html, bytes):
        truncated = len(html) > max_bytes
        data = _cut_utf8_safely(html, max_bytes) if truncated else html
        _check_binary(data[:8192])
        enc, bom, sniffed = _encoding(data, encoding)
        if not bom and _is_utf8(enc) and (sniffed or _valid_utf8(data)):
            if _nul_in_first_chars(data, 8192):  # decode()'s test, on the same text
                raise NotHtml("NUL characters in the text: not an HTML page")
            return (data if data.strip(_ASCII_SPACE) else b""), enc, truncated
    elif len(html) <= max_bytes // 4:  # str within the cap in any case
        if not html or html.isspace():
            return b"", "unicode", False
        data = html.encode("utf-8", "replace")
        if _nul_in_first_chars(data, 8192):  # decode()'s test, on the same text
            raise NotHtml("NUL characters in the text: not an HTML page")
        return data, "unicode", False
    text, enc, truncated = decode(html, encoding, max_bytes)
    if not text or text.isspace():
        return b"", enc, truncated
    return text.encode("utf-8", "replace"), enc, truncated


def _nul_in_first_chars(data: bytes, chars: int) -> bool:
    """Whether the first *chars* characters of the valid UTF-8 *data* hold a NUL."""
    at = data.find(b"\x00", 0, 4 * chars)
    return at >= 0 and len(data[:at].decode("utf-8")) < chars


#: The ASCII characters ``str.isspace`` counts as white space.
_ASCII_SPACE = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"


def _is_utf8(enc: str) -> bool:
    try:
        return codecs.lookup(enc).name == "utf-8"
    except LookupError:
        return False


def _valid_utf8(data: bytes) -> bool:
    """Whether *data* decodes as UTF-8 without an error."""
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def parse(html: bytes | str, encoding: str | None = None, max_bytes: int = 4_000_000) -> Parsed:
    """Decode and parse a page; drop invisible elements.  ``root`` is None when nothing parsed."""
    text, enc, truncated = decode(html, encoding, max_bytes)
    if not text or text.isspace():
        return Parsed(None, enc, truncated)
    from lxml import etree

    data = text.encode("utf-8", "replace")
    try:
        root = etree.fromstring(data, _parser())
    except (etree.ParserError, etree.XMLSyntaxError, ValueError):
        root = None
    if root is None:
        return Parsed(None, enc, truncated)
    etree.strip_elements(root, *INVISIBLE_TAGS, with_tail=False)
    return Parsed(root, enc, truncated)
