"""Generated sites whose pages are reached under many URLs, with the ground truth of what each URL shows.

They are the test sites of "save downloads" (learning, from the near-duplicates the filter finds, which URL
rewrites do not change a page, and which host mirrors which): ``benchmarks/speed/bench_avoid.py`` crawls them and
``tests/test_dupsite.py`` checks them.

- :func:`dup_heavy_site`: a news site (articles in five English sections and a Chinese one, a fifth of them in
  Chinese) whose pages are linked under many URLs, the way real sites link them: a session id in the links of
  some pages (``;jsessionid=`` on the main host, ``?sid=`` on the mirror; one value per linking page, so many
  values per target), tracking parameters (``utm_source``, ``utm_medium``, ``ref``), a comment-order parameter
  that changes nothing (``sort``), print views (``/print/<path>``, bare chrome), ``index.html`` against ``/``,
  paths without their trailing slash, letter-case variants (the server ignores case), and paginated section
  listings (``?page=2`` is another page; ``?page=1`` is the listing itself).  Its mirror on 127.0.0.2 serves the
  same paths in other chrome (site name, navigation, footer, session parameter); the main host links to the
  mirror's copy of a third of the articles, and the mirror's pages link within the mirror.
- :func:`params_matter_site`: a catalogue where query parameters do change the page: ``/list?page=N``,
  ``/article?id=N``, ``&lang=zh`` (the Chinese version) against ``&lang=en`` (the English one, also the
  default), next to one parameter that does not matter (``sid``), and traps for a learner that
  over-generalises: ``/list?page=1`` is ``/list`` but ``?page=2`` is not; ``&lang=en`` is the page without
  ``lang`` but ``&lang=zh`` is not; an old id (``/article?id=1003``) shows article 3 but ids do matter.

Every page carries chrome (navigation, footer, inline scripts) and volatile bits (a reader counter and a
timestamp that depend on the URL), so that the URLs of one page serve near-duplicates, not exact copies.  The
articles are written by :mod:`devsites.sample` from its own vocabularies; the chrome's words are
written here.  A site is deterministic: the same arguments give the same bytes at every URL.  Links to the
other host carry the server's port, 8000 until :meth:`GeneratedSite.serve` binds one.  ``link_order`` shuffles the
links of the start page by a seed (the rest of the site as it is): the same site met by a crawl in another order,
for the tests that what a crawl learns does not depend on that order.

    site = dup_heavy_site(articles=150, seed=7)  # link_order=3: its start page's links in another order
    with site.serve() as server:            # crawl server.url("/"), allowing the hosts of site.hosts
        ...
    site.content_id("http://127.0.0.1:8000/News/2024-05/farming-0012/index.html;jsessionid=9AB3?utm_source=rss")
    # 'article:12': the distinct page a URL shows (None: a 404); site.distinct lists every distinct page
"""

from __future__ import annotations

import html
import json
import random
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, ClassVar
from urllib.parse import parse_qsl, unquote, urlencode, urljoin, urlsplit

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


@dataclass(frozen=True)
class Story:
    """An article of a generated site: its number, text (a :class:`devsites.sample.Article`), section and path."""

    n: int
    article: Any
    section: str
    path: str

    @property
    def lang(self) -> str:
        return str(self.article.lang)

    @property
    def title(self) -> str:
        return str(self.article.title)

    def teaser(self, sentences: int = 3) -> str:
        sep = " " if self.lang == "en" else ""
        return sep.join(self.article.paragraphs[0][:sentences])


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


def _hash(*parts: object) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode("utf-8"))


def _rng(*parts: object) -> random.Random:
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


def _paragraphs(article: Any) -> str:
    return "\n".join(f"<p>{html.escape(p)}</p>" for p in article.text())


def _bulk(rng: random.Random, name: str, entries: int = 24) -> str:
    """What a page carries that a reader does not see: a configuration object for the page's scripts."""
    slots = [
        {"slot": f"{name}-{i}", "size": rng.choice(["300x250", "728x90", "160x600"]), "lazy": rng.random() < 0.5}
        for i in range(entries)
    ]
    flags = {f"feature_{i}": rng.random() < 0.5 for i in range(entries)}
    return json.dumps({"site": name, "slots": slots, "flags": flags}, separators=(",", ":"))


def _stamp(host: str, raw: str, lang: str, short: bool = False) -> str:
    """The volatile bits of a page: a reader counter and a timestamp that depend on its URL (``short``: the
    timestamp only)."""
    h = _hash(host, raw)
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


# --- the duplicate-heavy news site ----------------------------------------------------------------------


@dataclass(frozen=True)
class Chrome:
    """A host's chrome in one language: site name, tagline, navigation labels, footer."""

    name: str
    tagline: str
    nav: dict[str, str]
    footer: str
    words: dict[str, str]


_EN_WORDS = {
    "latest": "Latest stories",
    "most_read": "Most read",
    "related": "Related stories",
    "print": "Print",
    "more": "More in",
    "page": "Page",
    "mirror": "mirror copy",
    "chinese": "In Chinese",
    "printed": "printed copy",
    "back": "Back to the story",
    "about": "About",
    "archive": "Archive",
}
_ZH_WORDS = {
    "latest": "最新文章",
    "most_read": "阅读排行",
    "related": "相关文章",
    "print": "打印",
    "more": "更多",
    "page": "页",
    "mirror": "镜像",
    "chinese": "中文",
    "printed": "打印版",
    "back": "返回原文",
    "about": "关于",
    "archive": "归档",
}
SECTIONS_EN = ("news", "local", "business", "sport", "culture")
SECTION_ZH = "zh"
SECTIONS = (*SECTIONS_EN, SECTION_ZH)
#: Chrome by host and language (the mirror: another name, other navigation labels, another footer).
CHROME = {
    (MAIN, "en"): Chrome(
        "The Valley Courier",
        "Independent news for the valley",
        {"home": "Home", "news": "News", "local": "Local", "business": "Business", "sport": "Sport",
         "culture": "Culture", "zh": "中文", "about": "About"},
        "An independent local paper.",
        _EN_WORDS,
    ),
    (MIRROR, "en"): Chrome(
        "Courier Mirror",
        "A nightly copy of the valley paper",
        {"home": "Front page", "news": "News", "local": "Local", "business": "Business", "sport": "Sport",
         "culture": "Arts", "zh": "中文", "about": "About"},
        "A nightly mirror.",
        _EN_WORDS,
    ),
    (MAIN, "zh"): Chrome(
        "山谷信使报",
        "山谷的独立新闻",
        {"home": "首页", "news": "新闻", "local": "本地", "business": "财经", "sport": "体育",
         "culture": "文化", "zh": "中文", "about": "关于"},
        "独立报道",
        _ZH_WORDS,
    ),
    (MIRROR, "zh"): Chrome(
        "信使镜像",
        "每晚同步的镜像",
        {"home": "主页", "news": "新闻", "local": "本地", "business": "财经", "sport": "体育",
         "culture": "艺术", "zh": "中文", "about": "关于"},
        "每晚同步",
        _ZH_WORDS,
    ),
}  # fmt: skip
UTM_SOURCES = ("newsletter", "rss", "social", "homepage", "partner")
UTM_MEDIUMS = ("email", "feed", "web", "referral")
REFS = ("related", "sidebar", "latest", "footer", "nav")
SORTS = ("newest", "oldest", "popular")


class DupHeavySite(GeneratedSite):
    """See :func:`dup_heavy_site`."""

    name = "dup-heavy"
    hosts = (MAIN, MIRROR)
    deliberate_404 = frozenset({"/archive/"})
    #: Share of pages whose links carry a session id, and of article links with each kind of parameter.
    SESSION_SHARE = 0.3
    TRACKING_SHARE = 0.25
    REF_SHARE = 0.15
    SORT_SHARE = 0.1
    #: Article links by form of the path: as it is, ``index.html``, no trailing slash, another letter case.
    PATH_FORMS: ClassVar[dict[str, float]] = {"plain": 0.55, "index": 0.15, "noslash": 0.15, "case": 0.15}
    #: Navigation links by form of the path.
    NAV_FORMS: ClassVar[dict[str, float]] = {"plain": 0.8, "index": 0.1, "noslash": 0.05, "case": 0.05}

    def __init__(
        self,
        articles: int = 150,
        seed: int = 7,
        per_page: int = 10,
        min_words: int = 600,
        link_order: int | None = None,
    ) -> None:
        super().__init__(seed, link_order)
        if articles < 6:
            raise ValueError(f"the duplicate-heavy site needs at least 6 articles, got {articles}")
        rng = random.Random(f"dup-heavy/{seed}")
        self.articles = articles
        self.stories: list[Story] = []
        en = 0
        for n in range(articles):
            lang = "zh" if n % 5 == 4 else "en"
            article = long_article(rng, lang, min_words if lang == "en" else 5 * min_words // 2)
            if lang == "en":
                section, slug = SECTIONS_EN[en % len(SECTIONS_EN)], f"{article.topic}-{n:04d}"
                en += 1
            else:
                section, slug = SECTION_ZH, f"story-{n:04d}"
            self.stories.append(Story(n, article, section, f"/{section}/{article.date[:7]}/{slug}/"))
        self.by_path = {s.path: s for s in self.stories}
        #: The articles whose mirror copy the main host links to.
        self.mirrored = frozenset(s.n for s in self.stories if _rng(seed, "mirrored", s.n).random() < 1 / 3)
        #: Each section's listing pages (lists of story numbers), ``per_page`` stories a page or a few more.
        self.listings: dict[str, list[list[int]]] = {}
        for section in SECTIONS:
            numbers = [s.n for s in self.stories if s.section == section]
            pages = max(1, round(len(numbers) / per_page))
            size = -(-len(numbers) // pages)
            self.listings[section] = [numbers[i : i + size] for i in range(0, len(numbers), size)] or [[]]
        self.most_read = {
            lang: [s.n for s in self.stories if s.lang == lang][:: max(1, articles // 25)][:5] for lang in ("en", "zh")
        }
        self.latest = [s.n for s in reversed(self.stories) if s.lang == "en"][:12]
        self.latest_zh = [s.n for s in reversed(self.stories) if s.lang == "zh"][:4]
        self.about = long_article(random.Random(f"dup-heavy/{seed}/about"), "en", min_words)
        self.distinct = {"home": "/", "about": "/about/"}
        for section, pages in self.listings.items():
            for i in range(len(pages)):
                self.distinct[f"list:{section}:{i + 1}"] = f"/{section}/" + (f"?page={i + 1}" if i else "")
        for s in self.stories:
            self.distinct[f"article:{s.n}"] = s.path

    # --- what a URL shows ---

    def view(self, host: str, raw: str) -> View | None:
        if host not in self.hosts:
            return None
        path, _, query = raw.partition("?")
        path = path.split(";", 1)[0].lower()  # ;jsessionid=...; paths are served in any letter case
        params = dict(parse_qsl(query, keep_blank_values=True))
        printed = path.startswith("/print/")
        if printed:
            path = path.removeprefix("/print")
        path = path.removesuffix("index.html")
        if not path.endswith("/"):
            path += "/"
        story = self.by_path.get(path)
        if story is not None:
            return View(f"article:{story.n}", "print" if printed else "article", host, story.n)
        if printed:
            return None
        if path == "/":
            return View("home", "home", host)
        if path == "/about/":
            return View("about", "about", host)
        section = path.strip("/")
        if section in self.listings:
            page = params.get("page", "1")
            if not page.isdigit() or not 1 <= int(page) <= len(self.listings[section]):
                return None
            return View(f"list:{section}:{int(page)}", "listing", host, (section, int(page)))
        return None

    # --- links: many URLs for one page, derived from the linking page ---

    def session(self, host: str, content_id: str) -> str | None:
        """The session id in the links of a page (on some pages only): one value per linking page."""
        r = _rng(self.seed, "session", host, content_id)
        if r.random() >= self.SESSION_SHARE:
            return None
        return f"{r.getrandbits(128):032X}" if host == MAIN else f"{r.getrandbits(64):016x}"

    def href(
        self, host: str, content_id: str, role: str, path: str, *, article: bool = True, page: int | None = None
    ) -> str:
        """The link that the page ``content_id`` on ``host`` writes, in its ``role``, to ``path`` on ``host``."""
        r = _rng(self.seed, "link", host, content_id, role, path)
        forms = self.PATH_FORMS if article else self.NAV_FORMS
        form = r.choices(list(forms), weights=list(forms.values()))[0]
        if path == "/":
            path = "/index.html" if form == "index" else "/"
        elif form == "index":
            path += "index.html"
        elif form == "noslash":
            path = path.rstrip("/")
        elif form == "case":
            path = path[:1] + path[1].upper() + path[2:]
        session = self.session(host, content_id)
        query: list[tuple[str, str]] = []
        if session and host == MAIN:
            path += f";jsessionid={session}"
        elif session:
            query.append(("sid", session))
        if page is not None:
            query.append(("page", str(page)))
        if article:
            if r.random() < self.TRACKING_SHARE:
                query += [("utm_source", r.choice(UTM_SOURCES)), ("utm_medium", r.choice(UTM_MEDIUMS))]
            if r.random() < self.REF_SHARE:
                query.append(("ref", r.choice(REFS)))
            if r.random() < self.SORT_SHARE:
                query.append(("sort", r.choice(SORTS)))
        return path + (f"?{urlencode(query)}" if query else "")

    def mirror_href(self, content_id: str, story: Story) -> str:
        """The main host's link to the mirror's copy of ``story``."""
        r = _rng(self.seed, "mirror-link", content_id, story.n)
        query = "?utm_source=courier&utm_medium=mirror" if r.random() < 0.3 else ""
        return f"http://{MIRROR}:{self.port}{story.path}{query}"

    # --- pages ---

    def render(self, view: View, raw: str) -> str:
        if view.kind == "print":
            return self._print(view, raw)
        lang = "zh" if view.kind == "listing" and view.key[0] == SECTION_ZH else "en"
        if view.kind == "article":
            lang = self.stories[view.key].lang
        chrome = CHROME[view.host, lang]
        if view.kind == "home":
            title, main = chrome.name, self._home(view, chrome)
        elif view.kind == "about":
            title, main = f"{chrome.words['about']} | {chrome.name}", self._about(view)
        elif view.kind == "listing":
            section, page = view.key
            label = chrome.nav[section]
            title = f"{label} · {chrome.words['page']} {page} | {chrome.name}"
            main = self._listing(view, chrome, section, page)
        else:
            story = self.stories[view.key]
            title, main = f"{story.title} | {chrome.name}", self._article(view, chrome, story)
        return self._document(view, raw, lang, chrome, title, main)

    def _document(self, view: View, raw: str, lang: str, chrome: Chrome, title: str, main: str) -> str:
        e, cid, host = html.escape, view.content_id, view.host
        nav = "".join(
            f'<li class="nav-{key}"><a href="{e(self.href(host, cid, "nav", self._nav_path(key), article=False))}">'
            f"{e(label)}</a></li>"
            for key, label in chrome.nav.items()
        )
        if host == MAIN:
            nav = f'<nav class="main-nav"><ul>{nav}</ul></nav>'
            footer_links = (
                f'<a href="/archive/">{e(chrome.words["archive"])}</a>'
                f' · <a href="http://{MIRROR}:{self.port}/">{e(chrome.words["mirror"])}</a>'
            )
        else:
            nav = f'<div id="menu" role="navigation"><ol class="menu">{nav}</ol></div>'
            footer_links = ""
        bulk_rng = random.Random(f"{self.seed}/{host}/bulk")
        state = json.dumps({"page": cid, "rid": f"{_hash(self.seed, host, raw):08x}"})
        return (
            f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{e(title)}</title>'
            f'<meta name="description" content="{e(chrome.tagline)}">'
            f"<script>window.__config = {_bulk(bulk_rng, chrome.name)};</script></head>\n"
            f'<body class="{view.kind}"><header class="masthead"><a class="logo" '
            f'href="{e(self.href(host, cid, "logo", "/", article=False))}">{e(chrome.name)}</a>'
            f"</header>\n{nav}\n"
            f'<main id="content">\n{main}\n</main>\n'
            f'<footer class="site-footer"><p>{e(chrome.footer)}</p><p class="links">{footer_links}</p>'
            f'<p class="stamp">{e(_stamp(host, raw, lang))}</p></footer>\n'
            f"<script>window.dataLayer = [{state}];</script></body></html>\n"
        )

    @staticmethod
    def _nav_path(key: str) -> str:
        return "/" if key == "home" else f"/{key}/"

    def _story_item(self, view: View, story: Story, role: str, teaser: bool) -> str:
        e = html.escape
        link = f'<a href="{e(self.href(view.host, view.content_id, role, story.path))}">{e(story.title)}</a>'
        if view.host == MAIN and story.n in self.mirrored and role != "related":  # an icon: no words
            link += f' <a class="mirror" title="mirror" href="{e(self.mirror_href(view.content_id, story))}">↗</a>'
        text = f"<p>{e(story.teaser())}</p>" if teaser else ""
        return f'<li class="story"><h3>{link}</h3>{text}</li>'

    def _most_read(self, view: View, chrome: Chrome, lang: str) -> str:
        items = "".join(self._story_item(view, self.stories[n], "most-read", False) for n in self.most_read[lang])
        return f'<aside class="most-read"><h2>{html.escape(chrome.words["most_read"])}</h2><ol>{items}</ol></aside>'

    def _home(self, view: View, chrome: Chrome) -> str:
        e = html.escape
        latest = "".join(self._story_item(view, self.stories[n], "latest", True) for n in self.latest)
        chinese = "".join(self._story_item(view, self.stories[n], "latest-zh", False) for n in self.latest_zh)
        return (
            f'<section class="latest"><h1>{e(chrome.words["latest"])}</h1><ul>{latest}</ul></section>'
            f'<section class="chinese"><h2>{e(chrome.words["chinese"])}</h2><ul>{chinese}</ul></section>'
            + self._most_read(view, chrome, "en")
        )

    def _about(self, view: View) -> str:
        return f"<article><h1>{html.escape(self.about.title)}</h1>\n{_paragraphs(self.about)}</article>"

    def _listing(self, view: View, chrome: Chrome, section: str, page: int) -> str:
        e, host, cid = html.escape, view.host, view.content_id
        items = "".join(self._story_item(view, self.stories[n], "list", True) for n in self.listings[section][page - 1])
        pages = len(self.listings[section])
        pager = " ".join(
            f"<b>{i}</b>"
            if i == page
            else f'<a href="{e(self.href(host, cid, "pager", f"/{section}/", article=False, page=i))}">{i}</a>'
            for i in range(1, pages + 1)
        )
        lang = "zh" if section == SECTION_ZH else "en"
        return (
            f'<section class="listing"><h1>{e(chrome.nav[section])}</h1><ul>{items}</ul>'
            f'<p class="pager">{e(chrome.words["page"])}: {pager}</p></section>' + self._most_read(view, chrome, lang)
        )

    def related(self, story: Story) -> list[Story]:
        """Four other stories of the same section (a window around it)."""
        same = [s for s in self.stories if s.section == story.section and s.n != story.n]
        i = sum(1 for s in same if s.n < story.n)
        return (same[i:] + same[:i])[:4]

    def _related(self, view: View, story: Story, words: dict[str, str]) -> str:
        items = "".join(self._story_item(view, s, "related", False) for s in self.related(story))
        return f'<aside class="related"><h2>{html.escape(words["related"])}</h2><ul>{items}</ul></aside>'

    def _article(self, view: View, chrome: Chrome, story: Story) -> str:
        e, host, cid = html.escape, view.host, view.content_id
        a = story.article
        print_link = self.href(host, cid, "print", f"/print{story.path}", article=False)
        section_link = self.href(host, cid, "section", f"/{story.section}/", article=False)
        return (
            f'<article><h1>{e(a.title)}</h1><p class="byline">{e(a.author)} · {a.date}</p>\n{_paragraphs(a)}\n'
            f'<p class="tools"><a href="{e(print_link)}">{e(chrome.words["print"])}</a> · '
            f'<a href="{e(section_link)}">{e(chrome.words["more"])} {e(chrome.nav[story.section])}</a></p>'
            f"</article>\n{self._related(view, story, chrome.words)}"
        )

    def _print(self, view: View, raw: str) -> str:
        """The print view: the story alone, its related stories, a link back (the article's own links) and the
        volatile stamp."""
        e, story = html.escape, self.stories[view.key]
        a, chrome = story.article, CHROME[view.host, story.lang]
        back = self.href(view.host, view.content_id, "back", story.path, article=False)
        return (
            f'<!DOCTYPE html><html lang="{story.lang}"><head><meta charset="utf-8"><title>{e(a.title)}</title>'
            "<style>body{font-family:serif;max-width:40em}nav,aside{display:none}</style></head>\n"
            f'<body class="print"><p class="printed">{e(chrome.name)} · {e(chrome.words["printed"])}</p>'
            f'<h1>{e(a.title)}</h1><p class="byline">{e(a.author)} · {a.date}</p>\n{_paragraphs(a)}\n'
            f"{self._related(view, story, chrome.words)}"
            f'<p><a href="{e(back)}">{e(chrome.words["back"])}</a></p>'
            f'<p class="stamp">{e(_stamp(view.host, raw, story.lang, short=True))}</p></body></html>\n'
        )


# --- the catalogue where parameters matter ------------------------------------------------------------


PARAMS_CHROME = {
    "en": ("Harbour Reading Room", ("Home", "Catalogue", "Latest"), "The Harbour Reading Room catalogue."),
    "zh": ("港口阅览室", ("首页", "目录", "最新"), "港口阅览室 馆藏目录"),
}


class ParamsMatterSite(GeneratedSite):
    """See :func:`params_matter_site`."""

    name = "params-matter"
    hosts = (MAIN,)
    SESSION_SHARE = 0.5
    #: Old ids: ``/article?id=ALIAS_BASE + n`` shows article n.
    ALIAS_BASE = 1000

    def __init__(
        self,
        articles: int = 60,
        seed: int = 7,
        per_page: int = 10,
        aliases: int = 3,
        min_words: int = 400,
        link_order: int | None = None,
    ) -> None:
        super().__init__(seed, link_order)
        if articles < 2 * per_page:
            raise ValueError(f"the params-matter site needs at least {2 * per_page} articles, got {articles}")
        rng = random.Random(f"params-matter/{seed}")
        self.articles = articles
        self.en = {n: long_article(rng, "en", min_words) for n in range(1, articles + 1)}
        self.zh = {n: long_article(rng, "zh", 2 * min_words) for n in range(1, articles + 1)}
        self.intro = long_article(rng, "en", min_words // 2)
        self.lists = [list(range(i, min(i + per_page, articles + 1))) for i in range(1, articles + 1, per_page)]
        self.aliases = list(range(1, articles + 1, max(1, articles // max(1, aliases))))[:aliases]
        self.distinct = {"home": "/"}
        for i in range(len(self.lists)):
            self.distinct[f"list:{i + 1}"] = f"/list?page={i + 1}" if i else "/list"
        for n in range(1, articles + 1):
            self.distinct[f"article:{n}:en"] = f"/article?id={n}"
            self.distinct[f"article:{n}:zh"] = f"/article?id={n}&lang=zh"
        #: Pairs of paths that a learner meets (``same``: the same page) and must not over-generalise from.
        self.traps: list[tuple[str, str, bool]] = [
            ("/list", "/list?page=1", True),
            ("/list", "/list?page=2", False),
            ("/article?id=3", "/article?id=3&lang=en", True),
            ("/article?id=3", "/article?id=3&lang=zh", False),
            ("/article?id=3&sid=0123abcd", "/article?id=3", True),
            (f"/article?id={self.aliases[0]}", f"/article?id={self.ALIAS_BASE + self.aliases[0]}", True),
            (f"/article?id={self.aliases[0]}", f"/article?id={self.aliases[0] + 1}", False),
        ]

    def view(self, host: str, raw: str) -> View | None:
        if host not in self.hosts:
            return None
        path, _, query = raw.partition("?")
        params = dict(parse_qsl(query, keep_blank_values=True))  # sid (and anything unknown) changes nothing
        if path == "/":
            return View("home", "home", host)
        if path == "/list":
            page = params.get("page", "1")
            if not page.isdigit() or not 1 <= int(page) <= len(self.lists):
                return None
            return View(f"list:{int(page)}", "list", host, int(page))
        if path == "/article":
            ident, lang = params.get("id", ""), params.get("lang", "en")
            if not ident.isdigit() or lang not in ("en", "zh"):
                return None
            n = int(ident)
            if n > self.ALIAS_BASE and n - self.ALIAS_BASE in self.aliases:
                n -= self.ALIAS_BASE
            if not 1 <= n <= self.articles:
                return None
            return View(f"article:{n}:{lang}", "article", host, (n, lang))
        return None

    def href(self, content_id: str, path: str, params: list[tuple[str, str]]) -> str:
        """The link that page ``content_id`` writes to ``path`` with ``params``: with its session id, if any."""
        r = _rng(self.seed, "session", content_id)
        if r.random() < self.SESSION_SHARE:
            params = [*params, ("sid", f"{r.getrandbits(32):08x}")]
        return path + (f"?{urlencode(params)}" if params else "")

    def _article_link(self, cid: str, n: int, lang: str, label: str | None = None) -> str:
        params = [("id", str(n))] + ([("lang", "zh")] if lang == "zh" else [])
        text = label or (self.en if lang == "en" else self.zh)[n].title
        return f'<a href="{html.escape(self.href(cid, "/article", params))}">{html.escape(text)}</a>'

    def render(self, view: View, raw: str) -> str:
        e, cid = html.escape, view.content_id
        lang = view.key[1] if view.kind == "article" else "en"
        name, nav_labels, footer = PARAMS_CHROME[lang]
        nav = (
            f'<a href="/">{e(nav_labels[0])}</a> · <a href="/list">{e(nav_labels[1])}</a>'
            f' · <a href="{e(self.href(cid, "/list", [("page", str(len(self.lists)))]))}">{e(nav_labels[2])}</a>'
        )
        if view.kind == "home":
            title, main = name, self._home(cid)
        elif view.kind == "list":
            title, main = f"{nav_labels[1]} {view.key} | {name}", self._list(cid, view.key)
        else:
            n, lang = view.key
            article = (self.en if lang == "en" else self.zh)[n]
            title, main = f"{article.title} | {name}", self._article(cid, n, lang, article)
        bulk = _bulk(random.Random(f"{self.seed}/params/bulk"), name, entries=16)
        return (
            f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8"><title>{e(title)}</title>'
            f"<script>window.__config = {bulk};</script></head>\n"
            f'<body><header><span class="name">{e(name)}</span><nav>{nav}</nav></header>\n<main>{main}</main>\n'
            f'<footer><p>{e(footer)}</p><p class="stamp">{e(_stamp(view.host, raw, lang))}</p></footer></body></html>\n'
        )

    def _teasers(self, cid: str, numbers: list[int]) -> str:
        items = []
        for n in numbers:
            a = self.en[n]
            items.append(
                f"<li>{self._article_link(cid, n, 'en')}<p>{html.escape(' '.join(a.paragraphs[0][:3]))}</p></li>"
            )
        return "<ul>" + "".join(items) + "</ul>"

    def _home(self, cid: str) -> str:
        pages = " ".join(
            f'<a href="{html.escape(self.href(cid, "/list", [("page", str(i))]) if i > 1 else "/list")}">{i}</a>'
            for i in range(1, len(self.lists) + 1)
        )
        old = " · ".join(
            f'<a href="/article?id={self.ALIAS_BASE + n}">{html.escape(self.en[n].title)}</a>' for n in self.aliases
        )
        latest = "".join(
            f"<li>{self._article_link(cid, n, 'en')}</li>" for n in range(self.articles, self.articles - 5, -1)
        )
        return (
            f"<h1>{html.escape(self.intro.title)}</h1>\n{_paragraphs(self.intro)}\n<h2>Latest</h2><ul>{latest}</ul>"
            f'<p class="pages">Catalogue pages: {pages}</p><p class="old">From the old catalogue: {old}</p>'
        )

    def _list(self, cid: str, page: int) -> str:
        pager = " ".join(
            f"<b>{i}</b>"
            if i == page
            else f'<a href="{html.escape(self.href(cid, "/list", [("page", str(i))]))}">{i}</a>'
            for i in range(1, len(self.lists) + 1)
        )
        return f"<h1>Catalogue, page {page}</h1>{self._teasers(cid, self.lists[page - 1])}<p>Pages: {pager}</p>"

    def _article(self, cid: str, n: int, lang: str, article: Any) -> str:
        e = html.escape
        related = [m for m in (n + 1, n + 2, n + 5) if m <= self.articles] or [1, 2]
        items = "".join(f"<li>{self._article_link(cid, m, lang)}</li>" for m in related)
        other = (
            self._article_link(cid, n, "zh", "中文版")
            if lang == "en"
            else f'<a href="{e(self.href(cid, "/article", [("id", str(n)), ("lang", "en")]))}">English</a>'
        )
        page = (n - 1) // len(self.lists[0]) + 1
        back = self.href(cid, "/list", [("page", str(page))])
        return (
            f'<article><h1>{e(article.title)}</h1><p class="byline">{e(article.author)} · {article.date}</p>'
            f'\n{_paragraphs(article)}\n<p class="lang">{other} · <a href="{e(back)}">↑</a></p></article>'
            f'<aside><ul class="related">{items}</ul></aside>'
        )


def dup_heavy_site(
    articles: int = 150, seed: int = 7, per_page: int = 10, link_order: int | None = None
) -> DupHeavySite:
    """The duplicate-heavy news site and its mirror (see the module's docstring); ``link_order``: the start page's
    links shuffled by this seed (the same site met in another order)."""
    return DupHeavySite(articles, seed, per_page, link_order=link_order)


def params_matter_site(
    articles: int = 60, seed: int = 7, per_page: int = 10, aliases: int = 3, link_order: int | None = None
) -> ParamsMatterSite:
    """The catalogue where parameters matter (see the module's docstring); ``link_order`` as for
    :func:`dup_heavy_site`."""
    return ParamsMatterSite(articles, seed, per_page, aliases, link_order=link_order)


#: The sites by name: a factory of ``(articles, seed)``.
SITES = {"dup-heavy": dup_heavy_site, "params-matter": params_matter_site}
