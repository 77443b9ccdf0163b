"""What the generated sites of :mod:`devsites.dupsite` share: the base class :class:`GeneratedSite` (fixed pages,
the page of any other URL, the ground truth of what each URL shows, a local server, a walk of every reachable URL),
what one URL shows (:class:`View`), and the page parts every site writes (a page's volatile reader counter and
timestamp, a script configuration a reader does not see, long articles)."""

from __future__ import annotations

import html
import json
import random
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from devsites import sample
from devsites.localsite import HOSTS, LocalSite, Page

MAIN, MIRROR = HOSTS
#: The port in links to the other host until :meth:`GeneratedSite.serve` binds the real one.
DEFAULT_PORT = 8000
ROBOTS = Page(b"User-agent: *\nDisallow: /private/\n", content_type="text/plain")
_HREF = re.compile(r"""<a\b[^>]*?\bhref\s*=\s*(["'])(.*?)\1""", re.IGNORECASE | re.DOTALL)
_ANCHOR = re.compile(r"<a\b[^>]*>.*?</a>", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class View:
    """What one URL shows: its distinct page (``content_id``), in which form (``kind``), on which host."""

    content_id: str
    kind: str
    host: str
    key: Any = None


def links_of(page: str, url: str) -> list[str]:
    """The absolute URLs of the ``<a href>`` links of ``page`` (served at ``url``), fragments dropped."""
    out = []
    for m in _HREF.finditer(page):
        href = html.unescape(m.group(2)).strip()
        if href and not href.startswith(("#", "mailto:", "javascript:")):
            out.append(urljoin(url, href).split("#", 1)[0])
    return out


def shuffle_links(page: str, rng: random.Random) -> str:
    """``page`` with its ``<a>`` elements in another order (each with its text; the rest of the page in place): the
    same links, met by a crawl in another order."""
    anchors = _ANCHOR.findall(page)
    rng.shuffle(anchors)
    order = iter(anchors)
    return _ANCHOR.sub(lambda _: next(order), page)


def url_hash(*parts: object) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode("utf-8"))


def seeded_rng(*parts: object) -> random.Random:
    """A generator seeded by ``parts`` (a string seed: the same numbers in every process)."""
    return random.Random("/".join(map(str, parts)))


def _words(article: Any) -> int:
    text = "".join(article.text())
    return len(text) if article.lang == "zh" else len(text.split())


def long_article(rng: random.Random, lang: str, min_words: int) -> sample.Article:
    """A :mod:`devsites.sample` article of at least ``min_words`` words (characters in Chinese): paragraphs of four
    more sentences in its own words are added while it is shorter (pages of real length: chrome is a small
    part of them)."""
    article = sample.make_article(rng, lang)
    while _words(article) < min_words:
        extra = tuple(sample.sentence(rng, lang, article.words) for _ in range(4))
        article = replace(article, paragraphs=(*article.paragraphs, extra))
    return article


def paragraphs_html(article: Any) -> str:
    return "\n".join(f"<p>{html.escape(p)}</p>" for p in article.text())


def script_bulk(rng: random.Random, name: str, entries: int = 24) -> str:
    """What a page carries that a reader does not see: a configuration object for the page's scripts."""
    slots = [
        {"slot": f"{name}-{i}", "size": rng.choice(["300x250", "728x90", "160x600"]), "lazy": rng.random() < 0.5}
        for i in range(entries)
    ]
    flags = {f"feature_{i}": rng.random() < 0.5 for i in range(entries)}
    return json.dumps({"site": name, "slots": slots, "flags": flags}, separators=(",", ":"))


def volatile_stamp(host: str, raw: str, lang: str, short: bool = False) -> str:
    """The volatile bits of a page: a reader counter and a timestamp that depend on its URL (``short``: the
    timestamp only)."""
    h = url_hash(host, raw)
    readers, hh, mm, ss = 100 + h % 9000, (h >> 13) % 24, (h >> 18) % 60, (h >> 24) % 60
    if short:
        return f"{hh:02d}:{mm:02d}:{ss:02d}"
    if lang == "zh":
        return f"{readers} 次阅读 · 更新于 {hh:02d}:{mm:02d}:{ss:02d}"
    return f"{readers} readers today · updated {hh:02d}:{mm:02d}:{ss:02d}"


class GeneratedSite:
    """A generated site: fixed pages (``pages``) and the pages of any other URL (:meth:`resolve`), and the
    ground truth (:meth:`content_id`, :attr:`distinct`)."""

    #: A short name (the benchmark's rows).
    name = "site"
    #: The hosts a crawl of the site visits (its ``allowed_domains``); other hosts get 404s.
    hosts: tuple[str, ...] = (MAIN,)
    #: Where a crawl starts (paths on the main host).
    start_paths: tuple[str, ...] = ("/",)
    #: Paths that pages link to on purpose and that are not served (a 404 a crawl meets).
    deliberate_404: frozenset[str] = frozenset()
    #: Articles of the site (its size argument).
    articles: int = 0

    def __init__(self, seed: int, link_order: int | None = None) -> None:
        self.seed = seed
        #: None: the start pages list their links in the site's order; a number: shuffled by that seed.
        self.link_order = link_order
        self.port = DEFAULT_PORT
        self.pages: dict[str, Page] = {"/robots.txt": ROBOTS}

    # --- to be written by each site ---

    def view(self, host: str, raw: str) -> View | None:
        """What the URL path ``raw`` (with its query, percent-decoded) shows on ``host``; ``None``: a 404."""
        raise NotImplementedError

    def render(self, view: View, raw: str) -> str:
        """The HTML of ``view`` served at ``raw``."""
        raise NotImplementedError

    #: Every distinct page: content id -> its canonical path on the main host.
    distinct: dict[str, str]

    # --- shared ---

    def resolve(self, host: str, raw: str) -> Page | None:
        """The page at ``raw`` (path with query, percent-decoded) on ``host``, or ``None`` (a 404)."""
        view = self.view(host, raw)
        if view is None:
            return None
        page = self.render(view, raw)
        if self.link_order is not None and host == MAIN and raw in self.start_paths:
            page = shuffle_links(page, random.Random(f"{self.seed}/links/{self.link_order}"))
        return Page(page.encode("utf-8"))

    def content_id(self, url: str) -> str | None:
        """The distinct page that ``url`` shows (``None``: not a page of the site)."""
        parts = urlsplit(url)
        raw = unquote(parts.path or "/") + (f"?{unquote(parts.query)}" if parts.query else "")
        view = self.view(parts.hostname or "", raw)
        return None if view is None else view.content_id

    def url(self, path: str = "/", host: str = MAIN) -> str:
        return f"http://{host}:{self.port}{path}"

    def start_urls(self) -> list[str]:
        return [self.url(path) for path in self.start_paths]

    def serve(self, port: int = 0) -> LocalSite:
        """A :class:`LocalSite` serving this site (on ``port``, 0: a free one); links to the other host
        carry its port from now on."""
        server = LocalSite(self.pages, port=port, resolve=self.resolve)
        self.port = server.port
        return server

    def fetch(self, url: str) -> Page:
        """The page at ``url`` as the server answers it (no server needed)."""
        parts = urlsplit(url)
        raw = unquote(parts.path or "/") + (f"?{unquote(parts.query)}" if parts.query else "")
        page = self.pages.get(f"{parts.hostname}{raw}") or self.pages.get(raw)
        if page is None:
            page = self.resolve(parts.hostname or "", raw)
        return page or Page(b"<html><body><h1>Not found</h1></body></html>", status=404)

    def walk(self, limit: int = 100_000) -> Iterator[tuple[str, Page, list[str]]]:
        """Every URL a crawl without a filter reaches from the start pages, breadth first, with its page and
        links (links to hosts outside :attr:`hosts` are listed, not followed): ``(url, page, links)``."""
        seen = set(self.start_urls())
        queue = list(self.start_urls())
        for url in queue:
            page = self.fetch(url)
            links = links_of(page.body.decode("utf-8"), url) if page.status == 200 else []
            yield url, page, links
            for link in links:
                if link not in seen and urlsplit(link).hostname in self.hosts and len(seen) < limit:
                    seen.add(link)
                    queue.append(link)
