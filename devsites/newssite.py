"""The duplicate-heavy news site of :mod:`devsites.dupsite` (:class:`DupHeavySite`) and its mirror: articles in
five English sections and a Chinese one, linked under many URLs (session ids, tracking parameters, print views,
letter-case and trailing-slash variants, paginated listings)."""

from __future__ import annotations

import html
import json
import random
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlencode

from devsites.generated import (
    MAIN,
    MIRROR,
    GeneratedSite,
    View,
    long_article,
    paragraphs_html,
    script_bulk,
    seeded_rng,
    url_hash,
    volatile_stamp,
)

# --- the duplicate-heavy news site ----------------------------------------------------------------------


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
        self.mirrored = frozenset(s.n for s in self.stories if seeded_rng(seed, "mirrored", s.n).random() < 1 / 3)
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
        r = seeded_rng(self.seed, "session", host, content_id)
        if r.random() >= self.SESSION_SHARE:
            return None
        return f"{r.getrandbits(128):032X}" if host == MAIN else f"{r.getrandbits(64):016x}"

    def href(
        self, host: str, content_id: str, role: str, path: str, *, article: bool = True, page: int | None = None
    ) -> str:
        """The link that the page ``content_id`` on ``host`` writes, in its ``role``, to ``path`` on ``host``."""
        r = seeded_rng(self.seed, "link", host, content_id, role, path)
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
        r = seeded_rng(self.seed, "mirror-link", content_id, story.n)
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
        state = json.dumps({"page": cid, "rid": f"{url_hash(self.seed, host, raw):08x}"})
        return (
            f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{e(title)}</title>'
            f'<meta name="description" content="{e(chrome.tagline)}">'
            f"<script>window.__config = {script_bulk(bulk_rng, chrome.name)};</script></head>\n"
            f'<body class="{view.kind}"><header class="masthead"><a class="logo" '
            f'href="{e(self.href(host, cid, "logo", "/", article=False))}">{e(chrome.name)}</a>'
            f"</header>\n{nav}\n"
            f'<main id="content">\n{main}\n</main>\n'
            f'<footer class="site-footer"><p>{e(chrome.footer)}</p><p class="links">{footer_links}</p>'
            f'<p class="stamp">{e(volatile_stamp(host, raw, lang))}</p></footer>\n'
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
        return f"<article><h1>{html.escape(self.about.title)}</h1>\n{paragraphs_html(self.about)}</article>"

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
            f'<article><h1>{e(a.title)}</h1><p class="byline">{e(a.author)} · {a.date}</p>\n{paragraphs_html(a)}\n'
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
            f'<h1>{e(a.title)}</h1><p class="byline">{e(a.author)} · {a.date}</p>\n{paragraphs_html(a)}\n'
            f"{self._related(view, story, chrome.words)}"
            f'<p><a href="{e(back)}">{e(chrome.words["back"])}</a></p>'
            f'<p class="stamp">{e(volatile_stamp(view.host, raw, story.lang, short=True))}</p></body></html>\n'
        )
