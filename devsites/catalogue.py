"""The catalogue of :mod:`devsites.dupsite` where query parameters do change the page (:class:`ParamsMatterSite`),
with one parameter that does not and the traps for a learner that over-generalises."""

from __future__ import annotations

import html
import random
from typing import Any
from urllib.parse import parse_qsl, urlencode

from devsites.generated import (
    MAIN,
    GeneratedSite,
    View,
    long_article,
    paragraphs_html,
    script_bulk,
    seeded_rng,
    volatile_stamp,
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
        r = seeded_rng(self.seed, "session", content_id)
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
        bulk = script_bulk(random.Random(f"{self.seed}/params/bulk"), name, entries=16)
        return (
            f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8"><title>{e(title)}</title>'
            f"<script>window.__config = {bulk};</script></head>\n"
            f'<body><header><span class="name">{e(name)}</span><nav>{nav}</nav></header>\n<main>{main}</main>\n'
            f'<footer><p>{e(footer)}</p><p class="stamp">{e(volatile_stamp(view.host, raw, lang))}</p></footer>'
            "</body></html>\n"
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
            f"<h1>{html.escape(self.intro.title)}</h1>\n{paragraphs_html(self.intro)}\n<h2>Latest</h2><ul>{latest}</ul>"
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
            f'\n{paragraphs_html(article)}\n<p class="lang">{other} · <a href="{e(back)}">↑</a></p></article>'
            f'<aside><ul class="related">{items}</ul></aside>'
        )
