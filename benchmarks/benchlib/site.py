"""Pages to serve on loopback with :class:`devsites.localsite.LocalSite`: the demo site padded to a real page
size, links to pages that are not served pointed elsewhere, a start page that links every page."""

from __future__ import annotations

import html
import json
import random
import re
from urllib.parse import unquote, urljoin, urlsplit

from devsites.demosite import build_site
from devsites.localsite import HOSTS, Page

MAIN, MIRROR = HOSTS
#: A page's ``<base href>``.
BASE_HREF = re.compile(r"""<base\b[^>]*?\bhref\s*=\s*(["'])(.*?)\1""", re.IGNORECASE | re.DOTALL)
_A_HREF = re.compile(r"""(<a\b[^>]*?\bhref\s*=\s*)(["'])(.*?)\2""", re.IGNORECASE | re.DOTALL)

_WORDS = (
    "river market bridge council ferry orchard school library harbour station valley garden museum "
    "tram meadow season festival bakery workshop lantern quarry canal signal timber"
).split()


def padding(rng: random.Random, kb: int) -> str:
    """About ``kb`` KiB of what real pages carry around an article: link lists in a sidebar
    and inline scripts (generated words; links to fragments of the same page, so no new URLs)."""
    parts: list[str] = ['<aside class="sidebar">']
    size = 0
    n = 0
    while size < kb * 1024 * 0.6:
        n += 1
        links = "".join(
            f'<li><a href="#s{n}">{" ".join(rng.choice(_WORDS) for _ in range(10))}</a></li>' for _ in range(4)
        )
        block = f'<nav class="more" id="s{n}"><h4>{rng.choice(_WORDS)}</h4><ul>{links}</ul></nav>'
        parts.append(block)
        size += len(block)
    parts.append("</aside>")
    data = json.dumps([{"id": i, "tag": rng.choice(_WORDS), "w": rng.random()} for i in range(int(kb * 10))])
    parts.append(f"<script>window.__state = {data[: int(kb * 1024 * 0.4)]}</script>")
    return "".join(parts)


def pad(page: str, rng: random.Random, kb: int) -> str:
    """``page`` with :func:`padding` at the end of its body."""
    head, _, tail = page.rpartition("</body>")
    return head + padding(rng, kb) + "</body>" + tail


def padded_site(articles: int, kb: int) -> dict[str, Page]:
    """The demo site (``crawler.demo.build_site``, seed 7) with every HTML page padded by ``kb`` KiB."""
    site, _ = build_site(articles, seed=7)
    rng = random.Random(1)
    out = {}
    for key, page in site.items():
        if page.content_type and page.content_type.startswith("text/html") and b"</body>" in page.body:
            page = Page(pad(page.body.decode("utf-8"), rng, kb).encode("utf-8"))
        out[key] = page
    return out


def relink(page: str, path: str, paths: set[str], host: str = MAIN) -> str:
    """``page`` with its links to this site's pages that are not served pointed at the page itself (its
    own HTML otherwise, byte for byte; links to other hosts are left: the crawl does not follow them)."""
    here = f"http://{host}{path}"
    found = BASE_HREF.search(page)
    base = urljoin(here, html.unescape(found.group(2))) if found else here

    def fix(m: re.Match[str]) -> str:
        parts = urlsplit(urljoin(base, html.unescape(m.group(3).strip())))
        if parts.hostname != host:
            return m.group(0)
        target = unquote(parts.path) + (f"?{parts.query}" if parts.query else "")
        if target in paths or target == path:
            return m.group(0)
        return f"{m.group(1)}{m.group(2)}{html.escape(path)}{m.group(2)}"

    return _A_HREF.sub(fix, page)


def title_of(page: str, default: str) -> str:
    """The text of the page's ``<title>``, else ``default``."""
    found = re.search(r"<title[^>]*>(.*?)</title>", page, re.IGNORECASE | re.DOTALL)
    text = " ".join(html.unescape(found.group(1)).split()) if found else ""
    return text or default


def sitemap(title: str, entries: list[tuple[str, str]]) -> Page:
    """The start page: a list of links (path, label) to every page of the site."""
    e = html.escape
    items = "\n".join(f'<li><a href="{e(href)}">{e(label)}</a></li>' for href, label in entries)
    body = (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{e(title)}</title></head>'
        f"<body><h1>{e(title)}</h1><ul>\n{items}\n</ul></body></html>"
    )
    return Page(body.encode("utf-8"))
