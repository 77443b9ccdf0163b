"""Decoding and parsing of page bytes: encodings, caps, binary input and hostile markup."""

from __future__ import annotations

import http.server
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from simhash_filter.config import FingerprintConfig
from simhash_filter.model.extract import extract
from simhash_filter.model.fingerprint import Fingerprinter, Status
from simhash_filter.model.html import NotHtml, decode, page_bytes, parse

ZH_TEXT = "这是一个中文网页，用于检查编码识别是否正确。社区图书馆延长了开放时间，居民们非常高兴。"
LATIN_TEXT = "Café owners in Zürich said the naïve plan — “a fête every week” — would cost €2,000."


def page(body: str, head: str = "") -> str:
    return f"<html><head>{head}</head><body><p>{body}</p></body></html>"


def visible_text(html: bytes | str, **kwargs) -> str:
    root = parse(html, **kwargs).root
    assert root is not None
    return " ".join(root.itertext())


def test_declared_encoding_wins_over_meta_charset() -> None:
    """An encoding given by the caller (the HTTP header) beats a wrong <meta charset> in the page."""
    data = page(ZH_TEXT, '<meta charset="iso-8859-1">').encode("gbk")
    text, enc, truncated = decode(data, encoding="gbk")
    assert ZH_TEXT in text
    assert enc in ("gbk", "gb18030")
    assert not truncated


@pytest.mark.parametrize(
    ("meta", "codec", "body"),
    [
        ('<meta charset="shift_jis">', "shift_jis", "日本語のページです。図書館の開館時間が延びました。"),
        (
            '<meta http-equiv="Content-Type" content="text/html; charset=koi8-r">',
            "koi8-r",
            "Библиотека открыта до десяти.",
        ),
        ('<meta charset="gbk">', "gbk", ZH_TEXT),
        ('<meta charset="windows-1252">', "cp1252", LATIN_TEXT),
    ],
)
def test_meta_charset_is_used_without_declaration(meta: str, codec: str, body: str) -> None:
    """Without a declared encoding, the page's own <meta> charset decodes it."""
    assert body in visible_text(page(body, meta).encode(codec))


@pytest.mark.parametrize("charset", ["rot13", "base64", "hex", "zlib", "uu", "bz2", "idna", "punycode", "no-such"])
def test_a_charset_that_is_no_text_encoding_is_no_declaration(charset: str) -> None:
    """A declared or <meta> charset naming a codec that is not a text encoding (or none) is passed over: the
    page is sniffed, as if nothing were declared, instead of raising."""
    data = page(ZH_TEXT, f'<meta charset="{charset}">').encode("utf-8")
    for declared in (None, charset):
        text, enc, _ = decode(data, encoding=declared)
        assert ZH_TEXT in text and enc == "utf-8"
    gbk = page(ZH_TEXT, f'<meta charset="{charset}">').encode("gbk")
    assert ZH_TEXT in decode(gbk, encoding=charset)[0]


def test_byte_order_mark_wins_over_meta_charset() -> None:
    """A UTF-8 byte-order mark decides the encoding even when <meta> says otherwise."""
    data = b"\xef\xbb\xbf" + page(ZH_TEXT, '<meta charset="iso-8859-1">').encode("utf-8")
    text, enc, _ = decode(data)
    assert ZH_TEXT in text
    assert enc.replace("-", "").lower().startswith("utf8")


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_with_byte_order_mark_is_text(codec: str) -> None:
    """UTF-16 with a BOM is decoded, not rejected as binary for its NUL bytes."""
    bom = b"\xff\xfe" if codec.endswith("le") else b"\xfe\xff"
    assert ZH_TEXT in visible_text(bom + page(ZH_TEXT).encode(codec))


@pytest.mark.parametrize("codec", ["gbk", "gb18030", "gb2312"])
def test_undeclared_chinese_bytes_are_sniffed(codec: str) -> None:
    """Undeclared GBK/GB2312/GB18030 bytes (not valid UTF-8) decode back to the original Chinese text."""
    html = page(ZH_TEXT)
    data = html.encode(codec)
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    text, enc, _ = decode(data)
    assert text == html
    assert enc == "gb18030"


def test_gb18030_four_byte_characters_round_trip() -> None:
    """Characters outside GBK (GB18030 four-byte sequences) survive the sniff too."""
    body = ZH_TEXT + "€ 𠀀 㐀"
    assert decode(page(body).encode("gb18030"))[0] == page(body)


def test_windows_1252_is_the_last_resort() -> None:
    """Bytes that are neither UTF-8 nor GB18030 are read as windows-1252."""
    data = page(LATIN_TEXT).encode("cp1252")
    for codec in ("utf-8", "gb18030"):
        with pytest.raises(UnicodeDecodeError):
            data.decode(codec)
    text, enc, _ = decode(data)
    assert LATIN_TEXT in text
    assert enc == "cp1252"


MIXED = "a" + "é" + "中" + "😀" + "b"  # 1-, 2-, 3- and 4-byte UTF-8 sequences


def test_utf8_cut_never_splits_a_character() -> None:
    """Cutting UTF-8 at max_bytes yields a clean prefix of the text (no U+FFFD) and sets truncated."""
    html = "<p>" + MIXED * 40 + "</p>"
    data = html.encode("utf-8")
    for limit in range(20, 60):
        text, enc, truncated = decode(data, max_bytes=limit)
        assert truncated
        assert enc.replace("-", "").lower() == "utf8"
        assert "\ufffd" not in text
        assert html.startswith(text)
        assert len(text.encode("utf-8")) <= limit


def test_utf8_cut_keeps_every_whole_character() -> None:
    """A cut at max_bytes keeps every character that fits whole in the first max_bytes bytes."""
    html = "<p>" + MIXED * 40 + "</p>"
    data = html.encode("utf-8")
    for limit in range(20, 60):
        text, _, _ = decode(data, max_bytes=limit)
        assert len(text.encode("utf-8")) > limit - 4


def test_truncated_page_still_fingerprints() -> None:
    """A page cut at max_bytes is fingerprinted from its head and reports truncated."""
    words = " ".join(f"word{i} alpha beta gamma delta river stone" for i in range(400))
    fp = Fingerprinter(FingerprintConfig(max_bytes=2000)).fingerprint(page(words).encode("utf-8"))
    assert fp.ok
    assert fp.truncated


BINARY = {
    "random-with-nuls": bytes(random.Random(7).randrange(256) for _ in range(4096)) + b"\x00" * 16,
    "png-header": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00\x00\x00\x01\x00\x08\x06\x00\x00\x00"
    + bytes(random.Random(8).randrange(256) for _ in range(2048)),
    "control-bytes": bytes(range(1, 9)) * 300,
    "nul-in-text": "<html><body><p>text\x00with nul</p></body></html>",
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_input_is_not_html(name: str) -> None:
    """Binary garbage raises NotHtml from the parser and gets status not_html with no value."""
    with pytest.raises(NotHtml):
        parse(BINARY[name])
    fp = Fingerprinter().fingerprint(BINARY[name])
    assert fp.status is Status.NOT_HTML
    assert fp.value is None


@pytest.fixture
def secret_file(tmp_path: Path) -> tuple[Path, str]:
    secret = "SECRET-7c1f9e2a-do-not-leak"
    path = tmp_path / "secret.txt"
    path.write_text(secret, encoding="utf-8")
    return path, secret


class _Recorder(http.server.BaseHTTPRequestHandler):
    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).requests.append(self.path)
        body = b'<!ENTITY remote "REMOTE-SECRET">REMOTE-SECRET'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server that records every request it gets."""
    _Recorder.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Recorder.requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_parser_never_reads_files(secret_file: tuple[Path, str]) -> None:
    """DOCTYPE SYSTEM ids and external entities naming a local file are never resolved."""
    path, secret = secret_file
    pages = [
        f'<!DOCTYPE html SYSTEM "{path}"><html><body><p>hello</p></body></html>',
        f'<!DOCTYPE html SYSTEM "file://{path}"><html><body><p>hello</p></body></html>',
        f'<!DOCTYPE html [<!ENTITY xxe SYSTEM "file://{path}">]><html><body><p>a &xxe; b</p></body></html>',
        f'<?xml version="1.0"?><!DOCTYPE p [<!ENTITY xxe SYSTEM "{path}">]><html><body><p>&xxe;</p></body></html>',
        f'<html><body><p>x</p><xi:include xmlns:xi="http://www.w3.org/2001/XInclude" href="{path}"/></body></html>',
    ]
    fingerprinter = Fingerprinter(FingerprintConfig(min_features=1))
    for html in pages:
        for data in (html, html.encode("utf-8")):
            assert secret not in visible_text(data)
            feats, _, _ = fingerprinter.features(data)
            assert feats is not None
            assert not any("secret" in k or "leak" in k for k in feats.text)


def test_parser_never_fetches_urls(http_server: tuple[str, list[str]]) -> None:
    """DOCTYPE SYSTEM ids and external entities naming an http URL are never fetched."""
    url, requests = http_server
    pages = [
        f'<!DOCTYPE html SYSTEM "{url}/doctype.dtd"><html><body><p>hello</p></body></html>',
        f'<!DOCTYPE html [<!ENTITY ext SYSTEM "{url}/entity">]><html><body><p>a &ext; b</p></body></html>',
        f'<!DOCTYPE html [<!ENTITY % dtd SYSTEM "{url}/param.dtd"> %dtd;]><html><body><p>&remote;</p></body></html>',
    ]
    for html in pages:
        assert "REMOTE-SECRET" not in visible_text(html)
        Fingerprinter().fingerprint(html)
    time.sleep(0.05)
    assert requests == []


@pytest.mark.parametrize(
    ("open_tag", "close_tag"),
    [("<div>", "</div>"), ("<div><span>", "</span></div>"), ("<table><tr><td>", "</td></tr></table>"), ("<b>", "")],
)
def test_deep_nesting_does_not_recurse(open_tag: str, close_tag: str) -> None:
    """100,000 levels of nesting parse (lxml), extract and fingerprint without RecursionError; the fingerprint reads
    the text under them."""
    words = " ".join(f"deep{i} text" for i in range(20))
    html = "<html><body>" + open_tag * 100_000 + words + close_tag * 100_000 + "</body></html>"
    parsed = parse(html)
    assert parsed.root is not None
    page = extract(parsed.root, dom_decay=0.45, boilerplate_weight=0.05, max_elements=200_000)
    assert page.elements <= 200_000
    fp, feats, _ = Fingerprinter().inspect(html)
    assert fp.status is Status.OK and feats is not None and "deep19" in feats.text


ARTICLE = " ".join(f"The harbour ferry number {i} leaves the quay at dawn with the orchard crates." for i in range(30))


@pytest.mark.parametrize("core", ["compiled if built", "reference"])
def test_text_nested_deep_is_read(core: str) -> None:
    """An article under 253, 254, 2,000 or 20,000 nested elements is read and fingerprinted (libxml2, the parser
    before model v6, dropped what was below its 256 levels; the nesting guard keeps the text of the deep part),
    with the text after the deep part; an image-only deep page keeps ``too_few_features``."""
    fingerprinter = Fingerprinter()
    if core == "reference":
        fingerprinter._words = None  # the pure-Python path: analyze() and _decide()
    for depth in (253, 254, 2_000, 20_000):
        html = "<html><body>" + "<div>" * depth + f"<p>{ARTICLE}</p>" + "</div>" * depth + "<p>after words</p>"
        for given in (html, html.encode("utf-8")):
            assert fingerprinter.fingerprint(given).status is Status.OK, depth
        fp, feats, _ = fingerprinter.inspect(html)
        assert fp.status is Status.OK and feats is not None and {"orchard", "after"} <= feats.text.keys()
    assert Fingerprinter().fingerprint("<html><body>" + "<div>" * 2_000 + "<img src=a.png>").status is (
        Status.TOO_FEW_FEATURES
    )


def test_deep_nesting_respects_max_elements() -> None:
    """Deep or wide pages visit at most max_elements elements and report truncated."""
    cfg = FingerprintConfig(max_elements=500)
    for html in ("<div>" * 100_000 + "x", "<body>" + "<p>word here</p>" * 20_000 + "</body>"):
        parsed = parse(html)
        assert parsed.root is not None
        page = extract(parsed.root, dom_decay=0.45, boilerplate_weight=0.05, max_elements=cfg.max_elements)
        assert page.elements <= 500
    fp = Fingerprinter(cfg).fingerprint("<body>" + "".join(f"<p>word{i} text here</p>" for i in range(5000)))
    assert fp.truncated


def test_internal_entity_expansion_does_not_blow_up() -> None:
    """Billion-laughs style internal entities in a DOCTYPE are not expanded exponentially."""
    decls = ['<!ENTITY lol0 "lol">'] + [f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)]
    html = f"<!DOCTYPE lolz [{''.join(decls)}]><html><body><p>&lol9; &lol9; &lol9;</p></body></html>"
    start = time.perf_counter()
    text = visible_text(html)
    fp = Fingerprinter().fingerprint(html)
    assert time.perf_counter() - start < 60  # expanded, it would not end (and the text length below says it too)
    assert len(text) < 10_000
    assert fp.status in (Status.OK, Status.TOO_FEW_FEATURES)


def test_empty_input_parses_to_nothing() -> None:
    """Empty or whitespace-only input gives no tree rather than an error."""
    for html in ("", b"", "  \n\t", b"\xef\xbb\xbf"):
        assert parse(html).root is None


@pytest.mark.parametrize(
    ("page", "declared"),
    [
        ("<p>caf\u00e9 \u4e2d\u6587 \u2014 plain</p>".encode(), None),
        ("<p>caf\u00e9</p>".encode(), "utf-8"),
        ("<p>caf\u00e9</p>".encode(), "UTF8"),
        ('<meta charset="utf-8"><p>caf\u00e9</p>'.encode(), None),
        (b"<p>ascii only</p>", "latin-1"),
        (b"<p>caf\xe9 invalid utf-8</p>", "utf-8"),
        (b"\xef\xbb\xbf<p>with a byte-order mark</p>", None),
        ("<p>caf\u00e9</p>".encode("cp1252"), None),
        ("<p>\u4e2d\u6587</p>".encode("gb18030"), None),
        (b"  \n\t ", None),
        ("<p>caf\u00e9</p>", None),
    ],
)
def test_page_bytes_are_the_decoded_text_in_utf8(page: bytes | str, declared: str | None) -> None:
    """The parser's input is the page decoded (BOM, declaration, sniff) and encoded to UTF-8, with the same encoding
    named; valid UTF-8 bytes (declared or sniffed, no byte-order mark) are handed on as they are, not copied."""
    text, enc, truncated = decode(page, declared)
    data, got_enc, got_truncated = page_bytes(page, declared)
    assert data == (b"" if text.isspace() else text.encode("utf-8")) and (got_enc, got_truncated) == (enc, truncated)
    if isinstance(page, bytes) and enc in ("utf-8", "UTF8") and not page.startswith(b"\xef\xbb\xbf"):
        try:
            page.decode("utf-8")
        except UnicodeDecodeError:
            return
        assert data is page or not data
