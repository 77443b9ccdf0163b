"""The demo's website (``python -m crawler.demo``, also crawled by the benchmarks): the generated sample of
:mod:`devsites.sample` (English and Chinese articles in eight site templates) as a site on 127.0.0.1 with its
mirror on 127.0.0.2, listing pages that link every article, and pages that must not stop a crawl (an image,
JSON, an empty page, an image-only page, redirects, a path robots.txt forbids); and the truth about each article
page (its article, how it was made, its language)."""

from __future__ import annotations

import html
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from devsites.localsite import HOSTS, Page
from devsites.sample import sample

MAIN, MIRROR = HOSTS


@dataclass(frozen=True)
class Truth:
    """What the generator knows about a page: its article (group), how it was made, its language."""

    group: str
    variant: str
    lang: str


def _page(text: str) -> Page:
    return Page(text.encode("utf-8"))


def _listing(title: str, intro: str, links: list[tuple[str, str]]) -> Page:
    e = html.escape
    items = "\n".join(f'<li><a href="{e(href)}">{e(label)}</a></li>' for href, label in links)
    return _page(
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{e(title)}</title></head>'
        f"<body><h1>{e(title)}</h1><p>{e(intro)}</p><ul>\n{items}\n</ul></body></html>"
    )


def build_site(articles: int, seed: int) -> tuple[dict[str, Page], dict[str, Truth]]:
    """The pages (keys: path, or host + path) and the truth about each article page (host + path)."""
    pages = sample(articles, seed)
    site: dict[str, Page] = {}
    truth: dict[str, Truth] = {}
    listings: dict[str, list[tuple[str, str]]] = defaultdict(list)  # site prefix -> links (main host)
    mirrored: list[tuple[str, str]] = []
    titles = re.compile(r"<title>(.*?)</title>", re.S)
    for row in pages:
        parts = urlsplit(row["url"])
        prefix = parts.netloc.removesuffix(".example")
        path = f"/{prefix}{parts.path}" + (f"?{parts.query}" if parts.query else "")
        host = MIRROR if row["variant"] == "mirror" else MAIN
        site[f"{host}{path}"] = _page(row["html"])
        truth[f"{host}{path}"] = Truth(row["group"], row["variant"], row["lang"])
        found = titles.search(row["html"])
        label = html.unescape(found.group(1)) if found else path
        (mirrored if host == MIRROR else listings[prefix]).append((path, label))
    for prefix, links in listings.items():
        site[f"{MAIN}/{prefix}/"] = _listing(
            f"{prefix}: all stories", f"Every story published on {prefix}, newest last.", links
        )
    a_story = next(iter(truth)).removeprefix(MAIN) if next(iter(truth)).startswith(MAIN) else "/"
    site.update(
        {
            "/robots.txt": Page(b"User-agent: *\nDisallow: /private/\n", content_type="text/plain"),
            "/private/drafts": _page("<html><body><p>Drafts are not for crawlers.</p></body></html>"),
            "/files/logo": Page(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64), content_type="image/png"),
            "/api/latest": Page(json.dumps({"stories": len(pages)}).encode(), content_type="application/json"),
            "/empty": Page(b""),
            "/gallery": _page('<html><body><img src="/files/logo" alt=""></body></html>'),
            "/old-home": Page(status=301, location="/", content_type=None),
            "/print/first-story": Page(status=302, location=a_story, content_type=None),
        }
    )
    extras = [(p, p) for p in ("/files/logo", "/api/latest", "/empty", "/gallery", "/old-home", "/print/first-story")]
    extras.append(("/private/drafts", "drafts"))
    site[f"{MAIN}/"] = _listing(
        "Local demo: eight generated news sites",
        "Stories from generated news sites, blogs and portals in English and Chinese, with their copies.",
        [(f"/{prefix}/", prefix) for prefix in sorted(listings)] + extras,
    )
    site[f"{MIRROR}/"] = _listing("镜像站 Mirror", "Mirrored stories / 转载的文章", mirrored)
    return site, truth


def key_of(url: str) -> str:
    """``http://127.0.0.1:8000/a?b`` → ``127.0.0.1/a?b`` (the keys of :func:`build_site`)."""
    parts = urlsplit(url)
    return unquote(f"{parts.hostname}{parts.path}" + (f"?{parts.query}" if parts.query else ""))
