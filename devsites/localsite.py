"""A tiny local web server for the demo and the tests: serves a fixed set of pages on 127.0.0.1 and
127.0.0.2 (two host names, one port), so that a crawl sees a site and its mirror without a network.

    site = {"/": Page(b"<html>..."), "127.0.0.2/": Page(b"<html>...mirror")}
    with LocalSite(site) as server:
        print(server.url("/"), server.url("/", host="127.0.0.2"))

Keys are a path with its query (served on every host) or ``host + path`` (served on that host only).  A
generated site with more URLs than a mapping can hold (any session id, any tracking parameter) passes
``resolve(host, path)``: it is asked for the page of a path (with its query) that the mapping does not have,
and answers ``None`` for a 404.

    with LocalSite({"/robots.txt": Page(b"", "text/plain")}, resolve=lambda host, path: ...) as server: ...
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import quote, unquote

HOSTS = ("127.0.0.1", "127.0.0.2")
#: ``resolve(host, path)``: the page of a path with its query (percent-decoded) on a host, or ``None``.
Resolver = Callable[[str, str], "Page | None"]


@dataclass(frozen=True)
class Page:
    """One response: status, body and headers.  ``content_type=None`` sends no Content-Type."""

    body: bytes = b""
    content_type: str | None = "text/html; charset=utf-8"
    status: int = 200
    location: str | None = None
    #: Announce more bytes than the body has and close the connection: a truncated download.
    truncated: bool = False


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self._respond(send_body=True)

    def do_HEAD(self) -> None:
        self._respond(send_body=False)

    def _respond(self, *, send_body: bool) -> None:
        host = self.server.server_address[0]
        site = self.server.site
        path = unquote(self.path)  # keys are written as text; URLs arrive percent-encoded
        page = site.get(f"{host}{path}") or site.get(path)
        if page is None and self.server.resolve is not None:
            page = self.server.resolve(host, path)
        if page is None:
            page = Page(b"<html><body><h1>Not found</h1></body></html>", status=404)
        self.send_response(page.status)
        if page.content_type is not None:
            self.send_header("Content-Type", page.content_type)
        if page.location is not None:
            self.send_header("Location", quote(page.location, safe="/?&=:%#;,+@!$'()*~"))  # ASCII on the wire
        self.send_header("Content-Length", str(len(page.body) * 2 if page.truncated else len(page.body)))
        self.end_headers()
        if send_body:
            self.wfile.write(page.body)
        if page.truncated:
            self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:  # quiet: the crawl logs what it gets
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], site: dict[str, Page], resolve: Resolver | None = None) -> None:
        super().__init__(address, _Handler)
        self.site = site
        self.resolve = resolve


class LocalSite:
    """Serve ``site`` on every host of ``hosts``, on one port (0: any free port); paths that ``site`` does not
    have are asked of ``resolve`` (when given)."""

    def __init__(
        self, site: dict[str, Page], hosts: tuple[str, ...] = HOSTS, port: int = 0, resolve: Resolver | None = None
    ) -> None:
        self.site = site
        self.hosts = hosts
        servers = [_Server((hosts[0], port), site, resolve)]
        self.port = servers[0].server_address[1]
        try:
            servers += [_Server((host, self.port), site, resolve) for host in hosts[1:]]
        except OSError:
            for server in servers:
                server.server_close()
            raise
        self._servers = servers
        self._threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
        for thread in self._threads:
            thread.start()

    def url(self, path: str = "/", host: str | None = None) -> str:
        """The URL of ``path`` on ``host`` (default: the first host)."""
        return f"http://{host or self.hosts[0]}:{self.port}{path}"

    def close(self) -> None:
        for server, thread in zip(self._servers, self._threads, strict=True):
            server.shutdown()
            server.server_close()
            thread.join()
        self._servers, self._threads = [], []

    def __enter__(self) -> LocalSite:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
