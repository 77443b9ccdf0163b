"""A local site of hostile pages for the fault-injection tests (``tests/test_fault_injection.py``): a gzip bomb
(which :mod:`devsites.localsite` cannot serve: it sends no Content-Encoding), a huge gzip page, deep nesting, 10 MB of
distinct words, binary bytes served as HTML, a charset no codec knows and an empty page, beside ordinary articles of
:mod:`devsites.pages` (one of them a near-duplicate of another).

    with serve(hostile_site()) as port: ...   # http://127.0.0.1:PORT/ links every page
"""

from __future__ import annotations

import contextlib
import gzip
import html
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from devsites import pages as p


@dataclass(frozen=True)
class Response:
    body: bytes
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "text/html; charset=utf-8"),)


def _gzip_bomb(size: int) -> bytes:
    """An HTML page of about *size* bytes (``<p>`` and spaces) gzip-compressed to about a thousandth of that: gzip
    members of 1 MiB of spaces, back to back (a gzip stream may hold many members, read as one)."""
    spaces = gzip.compress(b" " * (1 << 20), 9, mtime=0)
    head = gzip.compress(b"<!DOCTYPE html><html><body><p>", 9, mtime=0)
    return head + spaces * (size >> 20) + gzip.compress(b"</p></body></html>", 9, mtime=0)


#: The ordinary pages of :func:`hostile_site`: distinct articles, and a near-duplicate of the first.
ORDINARY = {
    "/news/rainwater": p.gazette(p.RAINWATER),
    "/news/lighthouse": p.gazette(p.LIGHTHOUSE),
    "/news/backups": p.gazette(p.BACKUPS),
    "/zh/library": p.portal(p.LIBRARY),
    "/blog/rainwater": p.ledger(p.RAINWATER),  # a copy of /news/rainwater in another template: dropped
}
GZIP = (("Content-Type", "text/html; charset=utf-8"), ("Content-Encoding", "gzip"))


def hostile_site() -> dict[str, Response]:
    """The pages by path: the ordinary pages (``ORDINARY``) and hostile pages beside them, all linked from
    ``/``."""
    rng = random.Random(17)
    hostile = {
        # 1 GiB of HTML in a 1 MB gzip response: past DOWNLOAD_MAXSIZE (32 MiB), Scrapy stops decompressing it
        "/hostile/gzip-bomb": Response(_gzip_bomb(1 << 30), GZIP),
        # 20 MB of HTML in a 50 kB gzip response, within DOWNLOAD_MAXSIZE: read up to the 4 MB work cap
        "/hostile/gzip-huge": Response(
            gzip.compress(b"<html><body><p>" + b"lantern quarry meadow " * 900_000 + b"</p></body></html>"), GZIP
        ),
        "/hostile/deep-nesting": Response(b"<html><body>" + b"<div>" * 200_000 + b"deep text" + b"</div>" * 200_000),
        # 10 MB of distinct words: fingerprinted up to the work cap
        "/hostile/huge-text": Response(
            b"<html><body><p>"
            + " ".join(f"w{rng.getrandbits(40):x}" for _ in range(900_000)).encode()
            + b"</p></body></html>"
        ),
        "/hostile/binary": Response(rng.randbytes(200_000)),  # served as text/html
        "/hostile/bad-charset": Response(
            p.portal(p.TEA_GARDEN).encode(), (("Content-Type", "text/html; charset=x-no-such-charset-9"),)
        ),
        "/hostile/empty": Response(b""),
    }
    paths = [*ORDINARY, *hostile]
    links = "".join(f'<li><a href="{path}">{html.escape(path)}</a></li>' for path in paths)
    front = "<!DOCTYPE html><html><head><title>Hostile test site</title></head><body><h1>Hostile test site</h1>"
    front += "<p>Every page of this site is linked below: ordinary articles, and pages made to hurt a crawler.</p>"
    front += f"<ul>{links}</ul></body></html>"
    pages = {"/": Response(front.encode()), **{path: Response(text.encode()) for path, text in ORDINARY.items()}}
    return {**pages, **hostile}


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        page = self.server.pages.get(self.path)
        if page is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        for name, value in page.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(page.body)))
        self.end_headers()
        with contextlib.suppress(OSError):  # the crawler may give up on a large body
            self.wfile.write(page.body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, pages: dict[str, Response]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.pages = pages


@contextlib.contextmanager
def serve(pages: dict[str, Response]) -> Iterator[int]:
    """Serve *pages* on 127.0.0.1 in a thread; yield the port."""
    server = _Server(pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
