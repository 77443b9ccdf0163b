"""A local website for the crawl tests, built from the fixture articles of :mod:`devsites.pages`.

It is served on 127.0.0.1 and 127.0.0.2 (one port): the second host is a mirror.  Every article
appears in several near-duplicate forms (a mirror, a copy in another template, an ad/counter variant,
a one-word edit, a redirect, a page without Content-Type, broken markup, another charset), next to
inputs that must not stop a crawl (binary files, an empty page, an image-only page, a huge page, a
truncated download, a 404, a page that makes the index fail, a path that robots.txt forbids).

``GROUPS`` names the near-duplicate groups: a crawl should keep exactly one page of each.

    python -m devsites.site_server    # prints the port, serves until stdin is closed
"""

from __future__ import annotations

import html
import json
import sys

from devsites import pages as p
from devsites.localsite import LocalSite, Page

MIRROR = "127.0.0.2"
#: Paths whose URL key contains this make the test index backend fail (tests/crawl_helpers.py).
INDEX_ERROR_PATH = "/news/index-error"

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
    b"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82"
)


def _html(text: str) -> Page:
    return Page(text.encode("utf-8"))


def _front_page(title: str, intro: list[str], links: list[tuple[str, str]]) -> Page:
    e = html.escape
    items = "\n".join(f'<li><a href="{e(href)}">{e(label)}</a></li>' for href, label in links)
    paras = "\n".join(f"<p>{e(t)}</p>" for t in intro)
    return _html(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(title)}</title></head><body>"
        f"<main><h1>{e(title)}</h1>{paras}</main><nav><ul>{items}</ul></nav></body></html>"
    )


def _huge_page() -> Page:
    """About 4.2 MB of text: more than the fingerprint reads (max_bytes, 4 MB)."""
    words = "harbour ferry orchard lantern quarry meadow signal bridge canal market".split()
    rows = []
    for i in range(26_500):
        w = [words[(i * 7 + j * 3) % len(words)] for j in range(12)]
        rows.append(f"<p>Entry {i} of the ledger lists the {' '.join(w)} and nothing else of note today.</p>")
    body = "\n".join(rows)
    return _html(f"<!DOCTYPE html><html><head><title>Ledger</title></head><body><main>{body}</main></body></html>")


#: A page whose response announces twice its length and closes early: a truncated download.
_TRUNCATED = _front_page(
    "Notice board",
    [
        "The allotment committee meets on the second Tuesday of each month in the scout hut by the canal.",
        "Seed swaps happen on the first Saturday; bring labelled envelopes and a pencil for the ledger.",
        "Lost keys, gloves and one very muddy umbrella are waiting for their owners at the gate house.",
    ],
    [],
).body

#: Near-duplicate groups: every page of a group says the same thing; keys are URL host + path.
GROUPS: dict[str, list[str]] = {
    "rainwater": [
        "127.0.0.1/news/rainwater",
        "127.0.0.1/news/rainwater?sid=9f3a7c21",
        "127.0.0.1/news/rainwater-ads",
        "127.0.0.1/blog/rainwater",
        "127.0.0.1/news/rainwater-edited",
        "127.0.0.1/news/rainwater?print=1",
        f"{MIRROR}/news/rainwater",
    ],
    "lighthouse": [
        "127.0.0.1/news/lighthouse",
        "127.0.0.1/no-type",
        "127.0.0.1/broken",
        f"{MIRROR}/news/lighthouse",
    ],
    "backups": ["127.0.0.1/news/backups", "127.0.0.1/blog/backups"],
    "library": [
        "127.0.0.1/zh/library",
        "127.0.0.1/zh/library?from=feed",
        "127.0.0.1/forum/library",
        "127.0.0.1/zh/library-edited",
    ],
    "home-server": ["127.0.0.1/zh/home-server", "127.0.0.1/zh/home-server-gbk"],
    "tea-garden": ["127.0.0.1/zh/tea-garden", f"{MIRROR}/zh/tea-garden"],
}

#: Pages that are not fingerprinted, by the reason counted in ``simhash/skipped/<reason>``.
SKIPPED = {
    "not_html": ["127.0.0.1/files/logo", "127.0.0.1/api/articles"],
    "empty": ["127.0.0.1/empty"],
    "too_few_features": ["127.0.0.1/gallery"],
    "index_error": [f"127.0.0.1{INDEX_ERROR_PATH}"],
}
#: Distinct pages that are fingerprinted and kept (besides one page of each group).
OTHERS = [
    "127.0.0.1/",
    f"{MIRROR}/",
    "127.0.0.1/huge",
    "127.0.0.1/zh/home-server-wrong-charset",
    "127.0.0.1/truncated",
]


def site() -> dict[str, Page]:
    """The pages by path (served on both hosts) or host + path."""
    r, lh, lib = p.RAINWATER, p.LIGHTHOUSE, p.LIBRARY
    broken = p.gazette(lh).replace("</p>", "").replace("</li>", "").replace("</div>", "", 3)
    broken = broken[: broken.index("<footer")] + '<div class="unclosed"><p>Read more <b>about <i>the'
    pages: dict[str, Page] = {
        "/robots.txt": Page(b"User-agent: *\nDisallow: /private/\n", content_type="text/plain"),
        "/private/secret": _html(p.gazette(p.BACKUPS)),
        # rainwater: counter + session id, ads, a copy in another template, an edit, a redirect
        "/news/rainwater": _html(p.gazette(r)),
        "/news/rainwater?sid=9f3a7c21": _html(p.gazette(r, counter=p.COUNTER_A)),
        "/news/rainwater-ads": _html(p.gazette(r, ads=True)),
        "/blog/rainwater": _html(p.ledger(r)),
        "/news/rainwater-edited": _html(p.gazette(r.edited(2, "steel frame", "iron frame"))),
        "/print/rainwater": Page(status=302, location="/news/rainwater?print=1", content_type=None),
        "/news/rainwater?print=1": _html(p.gazette(r)),
        "/moved": Page(status=301, location="/news/rainwater", content_type=None),  # already seen: dupefilter
        f"{MIRROR}/news/rainwater": _html(p.gazette(r)),
        # lighthouse: no Content-Type (sniffed), broken markup, a mirror with a visit counter
        "/news/lighthouse": _html(p.gazette(lh)),
        "/no-type": Page(p.gazette(lh).encode("utf-8"), content_type=None),
        "/broken": _html(broken),
        f"{MIRROR}/news/lighthouse": _html(p.gazette(lh, counter=p.COUNTER_A)),
        # backups: a copy on a blog
        "/news/backups": _html(p.gazette(p.BACKUPS)),
        "/blog/backups": _html(p.ledger(p.BACKUPS)),
        # Chinese: ads + counter, a forum repost, an edit; GBK declared in <meta> only; a wrong charset
        "/zh/library": _html(p.portal(lib)),
        "/zh/library?from=feed": _html(p.portal(lib, ads=True, counter=p.COUNTER_A)),
        "/forum/library": _html(p.forum(lib)),
        "/zh/library-edited": _html(p.portal(lib.edited(0, "宽大的", "明亮的"))),
        "/zh/home-server": _html(p.portal(p.HOME_SERVER)),
        "/zh/home-server-gbk": Page(p.portal(p.HOME_SERVER, charset="gbk").encode("gbk"), content_type="text/html"),
        "/zh/home-server-wrong-charset": Page(
            p.forum(p.HOME_SERVER).replace('<meta charset="utf-8">', "").encode("gbk"),
            content_type="text/html; charset=utf-8",
        ),
        "/zh/tea-garden": _html(p.portal(p.TEA_GARDEN)),
        f"{MIRROR}/zh/tea-garden": _html(p.forum(p.TEA_GARDEN)),
        # inputs that must not stop the crawl
        "/files/logo": Page(PNG, content_type="image/png"),
        "/api/articles": Page(json.dumps({"articles": [r.title, lh.title]}).encode(), content_type="application/json"),
        "/empty": Page(b""),
        "/gallery": _html('<!DOCTYPE html><html><body><img src="/files/logo" alt=""></body></html>'),
        "/huge": _huge_page(),
        "/truncated": Page(_TRUNCATED, truncated=True),
        INDEX_ERROR_PATH: _html(p.ledger(lh)),
    }
    main_links = [(path, path) for path in pages if not path.startswith((MIRROR, "/robots"))]
    main_links += [("/missing", "a broken link")]
    pages["127.0.0.1/"] = _front_page(
        "Riverside test site",
        [
            "This front page lists every page of the local test site, the originals and their copies.",
            "Each story appears here in several versions: with advertisements, with a visit counter, "
            "copied by a blog, edited by one word, served without a content type, or redirected.",
        ],
        main_links,
    )
    pages[f"{MIRROR}/"] = _front_page(
        "镜像站点首页",
        ["这是测试用的镜像站点，转载了主站的几篇文章，内容与原文基本相同，只是页面模板和访问计数有所不同。"],
        [(path.removeprefix(MIRROR), path) for path in pages if path.startswith(f"{MIRROR}/")],
    )
    return pages


def main() -> int:
    with LocalSite(site()) as server:
        print(server.port, flush=True)
        sys.stdin.read()  # serve until the parent closes our stdin (or dies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
