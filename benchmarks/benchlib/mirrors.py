"""The mirror twins of ``bench_crawl.py``: each page served again by one of five mirror sites (seeded), in the
mirror's chrome (all its text written here), maybe with edits in its text (a few words; 1-5 % of them; or word
by word until its Jaccard to the page falls just under 0.9)."""

from __future__ import annotations

import html
import random
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import lxml.html
from lxml import etree

from .data import Source
from .site import BASE_HREF, title_of
from .text import CJK, INVISIBLE, NEAR_IDENTICAL, jaccard, shingles, visible_text

TWIN_SEED = 3


@dataclass(frozen=True)
class Mirror:
    """A mirror site: its style of chrome and its text (all written here)."""

    name: str
    style: str  # plain | banner | reskin | legacy | portal
    weight: float
    localized: bool  # Chinese chrome around Chinese pages
    tagline: str


MIRRORS = (
    Mirror("Fjordnet rsync mirror", "plain", 0.20, False, ""),
    Mirror("Northgate University Open Source Mirror", "banner", 0.25, False, ""),
    Mirror("DocuHaven", "reskin", 0.20, True, "Manuals and help pages, mirrored daily"),
    Mirror("The Linux Reading Room", "legacy", 0.175, False, "Free documentation since 1999"),
    Mirror("TechPortal Knowledge Base", "portal", 0.175, True, "Answers for admins, developers and office users"),
)
NAV = {
    "en": ["Home", "Documentation", "Downloads", "Mirrors", "News", "Forum", "Support", "About", "Contact"],
    "zh": ["首页", "文档", "下载", "镜像列表", "新闻", "论坛", "技术支持", "关于我们", "联系方式"],
}
WORDS = {
    "en": {
        "home": "Home",
        "search": "Search this site",
        "go": "Go",
        "related": "Related pages",
        "popular": "Popular this week",
        "rights": "All rights reserved.",
        "privacy": "Privacy policy",
        "terms": "Terms of use",
        "contact": "Contact",
        "share": "Share this page:",
        "comments": "comments",
        "views": "views",
        "updated": "Last updated",
        "generated": "Page generated in",
        "sponsored": "Sponsored",
        "ad_label": "Advertisement",
    },
    "zh": {
        "home": "首页",
        "search": "站内搜索",
        "go": "搜索",
        "related": "相关页面",
        "popular": "本周热门",
        "rights": "版权所有。",
        "privacy": "隐私政策",
        "terms": "使用条款",
        "contact": "联系我们",
        "share": "分享到：",
        "comments": "条评论",
        "views": "次浏览",
        "updated": "最后更新",
        "generated": "页面生成耗时",
        "sponsored": "推广",
        "ad_label": "广告",
    },
}
ADS = {
    "en": [
        ("Fast VPS hosting", "SSD servers from $4 a month, deployed in under a minute."),
        ("Learn Linux online", "Self-paced courses with hands-on labs. First week free."),
        ("Office templates", "Hundreds of letters, invoices and slides ready to edit."),
        ("Backup made simple", "Encrypted off-site backups for your whole team."),
        ("Cheap domains", "Register a .net or .org today and get free e-mail forwarding."),
    ],
    "zh": [
        ("云服务器限时特惠", "新用户首年低至九十九元，一分钟快速部署。"),
        ("Linux 运维课程", "零基础入门到实战，报名即送实验环境。"),
        ("办公模板大全", "简历、合同、演示文稿模板免费下载。"),
        ("企业数据备份", "异地加密备份，安全可靠，按需付费。"),
    ],
}
SHARE = ["Twitter", "Facebook", "LinkedIn", "Reddit", "E-mail"]
MIRROR_PAGES = {  # the pages the mirrors' chrome links to
    "/about.html": "About this mirror: who runs it, how often it is synchronised, and how to report a problem.",
    "/contact.html": "Write to the mirror administrators at the address below; we answer within two working days.",
    "/donate.html": "This mirror is run by volunteers. Donations pay for bandwidth and disks.",
}
CHROME_TAGS = ("header", "footer", "nav", "aside")
CHROME_NAMES = re.compile(r"^(nav\w*|header|footer|sidebar|breadcrumbs?|menu)$", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]{2,}")
EDIT_KINDS = ("none", "small", "medium", "threshold")
EDIT_WEIGHTS = (0.55, 0.20, 0.10, 0.15)


@dataclass
class Twin:
    """A page's twin on the mirror host: its HTML and how it was made."""

    path: str
    html: str
    mirror: str
    edit: str
    edits: int


def _fragment(markup: str) -> Any:
    return lxml.html.fragment_fromstring(markup, create_parent="div")


def is_chrome(el: Any) -> bool:
    """The source site's own header, footer, navigation and sidebars (what a re-skinning mirror drops)."""
    if not isinstance(el.tag, str):
        return False
    if el.tag in CHROME_TAGS:
        return True
    names = f"{el.get('class', '')} {el.get('id', '')}".split()
    return el.tag in ("div", "table", "ul", "section") and any(CHROME_NAMES.match(n) for n in names)


def text_slots(body: Any, skip: set[Any]) -> list[tuple[Any, str]]:
    """Visible text nodes under ``body`` outside the elements of ``skip`` (and their subtrees)."""
    inside: set[Any] = set()
    for el in skip:
        inside.update(el.iter())
    slots = []
    for el in body.iter():
        if el is not body and el.getparent() not in inside and el.tail and el.tail.strip():
            slots.append((el, "tail"))
        if el not in inside and isinstance(el.tag, str) and el.tag not in INVISIBLE and el.text and el.text.strip():
            slots.append((el, "text"))
    return slots


def edit_once(slots: list[tuple[Any, str]], rng: random.Random, vocab: dict[str, list[str]]) -> bool:
    """One edit in a random text node: a word replaced, deleted, inserted or typo'd (Chinese: a character)."""
    weights = [len(getattr(el, attr)) for el, attr in slots]
    if not slots or not sum(weights):
        return False
    el, attr = rng.choices(slots, weights)[0]
    text = getattr(el, attr)
    op = rng.choice(("replace", "delete", "insert", "typo"))
    cjk = [m.start() for m in CJK.finditer(text)]
    if cjk and len(cjk) >= len(text) / 4:
        i = rng.choice(cjk)
        other = rng.choice(vocab["cjk"] or ["的"])
        new = {"replace": other, "delete": "", "insert": text[i] + other, "typo": other}[op]
        setattr(el, attr, text[:i] + new + text[i + 1 :])
        return True
    words = list(_WORD.finditer(text))
    if not words:
        return False
    found = rng.choice(words)
    word = found.group()
    other = rng.choice(vocab["word"] or [word])
    if op == "typo" and len(word) >= 4:
        j = rng.randrange(1, len(word) - 2)
        new = word[:j] + word[j + 1] + word[j] + word[j + 2 :]
    else:
        new = {"replace": other, "delete": "", "insert": f"{word} {other}", "typo": other}[op]
    setattr(el, attr, text[: found.start()] + new + text[found.end() :])
    return True


class TwinMaker:
    """Makes each page's twin (seeded): a mirror's chrome around the page, maybe edits in its text."""

    def __init__(self, sources: list[Source], seed: int = TWIN_SEED) -> None:
        self.rng = random.Random(seed)
        self.titles = [(s.path, title_of(s.html, s.path)) for s in sources]

    def make(self, source: Source, page: str) -> Twin:
        rng = self.rng
        mirror = rng.choices(MIRRORS, [m.weight for m in MIRRORS])[0]
        lang = source.lang if mirror.localized and source.lang in WORDS else "en"
        edit = rng.choices(EDIT_KINDS, EDIT_WEIGHTS)[0]
        values = self.chrome_values(rng, source, lang)
        doc = lxml.html.document_fromstring(page)
        body = doc.find("body")
        if body is None:
            body = etree.SubElement(doc, "body")
        chrome = [el for el in body.iter() if is_chrome(el)]
        chrome = [el for el in chrome if not any(is_chrome(a) for a in el.iterancestors())]
        if mirror.style not in ("plain", "banner"):  # a re-skin drops the source's own chrome
            for el in chrome:
                el.drop_tree()
            chrome = []
        slots = text_slots(body, set(chrome))
        text = " ".join(getattr(el, attr) for el, attr in slots)
        vocab = {"cjk": CJK.findall(text), "word": _WORD.findall(text)}
        words = len(vocab["cjk"]) + len(vocab["word"])

        def render() -> str:
            return self.render(mirror, lang, doc, body, source, values)

        edits = 0
        if edit == "small":
            edits = sum(edit_once(slots, rng, vocab) for _ in range(rng.randint(1, 3)))
        elif edit == "medium":
            n = max(1, round(words * rng.uniform(0.01, 0.05)))
            edits = sum(edit_once(slots, rng, vocab) for _ in range(n))
        elif edit == "threshold":  # word by word until the Jaccard to the page falls just under 0.9
            original = shingles(visible_text(page), source.lang)
            step = max(1, words // 150)
            for _ in range(words // step + 1):
                if jaccard(original, shingles(visible_text(render()), source.lang)) < NEAR_IDENTICAL:
                    break
                edits += sum(edit_once(slots, rng, vocab) for _ in range(step))
        return Twin(source.path, render(), mirror.name, edit if edits else "none", edits)

    def chrome_values(self, rng: random.Random, source: Source, lang: str) -> dict[str, Any]:
        """What changes from page to page in a mirror's chrome: counters, dates, related pages, ads."""
        others = [t for t in rng.sample(self.titles, min(len(self.titles), 13)) if t[0] != source.path]
        section = [part for part in urlsplit(source.url).path.split("/") if part][-2:-1]
        return {
            "related": others[: rng.randint(4, 8)],
            "popular": others[8:12],
            "nav": sorted(rng.sample(range(len(NAV["en"])), rng.randint(5, 8))),
            "date": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            "time": f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}",
            "views": rng.randint(12, 250_000),
            "comments": rng.randint(0, 60),
            "seconds": rng.randint(8, 400) / 1000,
            "node": rng.choice(["fra", "ams", "sjc", "sin", "nrt"]) + str(rng.randint(1, 9)),
            "ads": rng.sample(ADS[lang], rng.randint(1, 2)),
            "ad_markup": rng.randrange(3),
            "ad_at": rng.random(),
            "section": section[0] if section else "docs",
        }

    def render(self, mirror: Mirror, lang: str, doc: Any, body: Any, source: Source, v: dict[str, Any]) -> str:
        e = html.escape
        w = WORDS[lang]
        if mirror.style in ("plain", "banner"):  # the page as it is, with the mirror's footer (and banner)
            host = urlsplit(source.url).hostname or ""
            added = [
                _fragment(
                    f'<div style="font-size:small">Mirrored by {e(mirror.name)}. Served by node {v["node"]} · '
                    f'{v["views"]:,} requests today · <a href="/donate.html">Support this mirror</a></div>'
                    if mirror.style == "banner"
                    else f'<p class="mirror-note">{v["node"]}.fjordnet.example · synced {v["date"]}</p>'
                )[0]
            ]
            body.append(added[0])
            if mirror.style == "banner":
                added.append(
                    _fragment(
                        f'<div style="background:#ffd;padding:4px">This is a mirror of {e(host)}, synchronised '
                        f'{v["date"]} {v["time"]} UTC. <a href="/">Mirror home</a> · '
                        f'<a href="/about.html">About this mirror</a></div>'
                    )[0]
                )
                body.insert(0, added[1])
            try:
                return lxml.html.tostring(doc, encoding="unicode", doctype="<!DOCTYPE html>")
            finally:
                for el in added:
                    body.remove(el)
        title = title_of(source.html, source.path)
        content = e(body.text or "") + "".join(lxml.html.tostring(el, encoding="unicode") for el in body)
        head = f'<meta charset="utf-8"><title>{e(title)} · {e(mirror.name)}</title>'
        found = BASE_HREF.search(source.html)
        if found:  # the page's relative links keep working on the mirror
            head += f'<base href="{found.group(2)}">'
        head += (
            '<link rel="stylesheet" href="/static/site.css"><script>window.stats = {page: location.pathname};</script>'
        )
        hrefs = ["/", "/about.html", "/contact.html", "/donate.html"]
        nav = [f'<a href="{hrefs[i % len(hrefs)]}">{e(NAV[lang][i])}</a>' for i in v["nav"]]
        nav_list = "".join(f"<li>{a}</li>" for a in nav)
        related = "".join(f'<li><a href="{e(p)}">{e(t)}</a></li>' for p, t in v["related"])
        footer_links = (
            f'<a href="/about.html">{e(w["privacy"])}</a> · <a href="/about.html">{e(w["terms"])}</a> · '
            f'<a href="/contact.html">{e(w["contact"])}</a>'
        )
        counter = f"{v['views']:,} {w['views']} · {w['generated']} {v['seconds']:.3f} s"
        if mirror.style == "reskin":
            page = (
                f'<header class="site-header"><a class="brand" href="/">{e(mirror.name)}</a> '
                f'<span class="tagline">{e(mirror.tagline)}</span><form class="search" action="/">'
                f'<input name="q" placeholder="{e(w["search"])}"><button>{e(w["go"])}</button></form></header>'
                f'<nav class="main-nav"><ul>{nav_list}</ul></nav>'
                f'<div class="breadcrumbs"><a href="/">{e(w["home"])}</a> › {e(v["section"])} › {e(title)}</div>'
                f"<main>{content}</main>"
                f"<footer><p>© {v['date'][:4]} {e(mirror.name)}. {e(w['rights'])}</p><p>{footer_links}</p>"
                f"<p>{e(w['updated'])}: {v['date']} · {e(counter)}</p></footer>"
            )
        elif mirror.style == "legacy":  # a table layout without telling class names
            rel = "<br>".join(f'<a href="{e(p)}">{e(t)}</a>' for p, t in v["related"])
            page = (
                f'<table width="100%" cellpadding="4"><tr><td colspan="2" class="t1"><font size="5">'
                f"{e(mirror.name)}</font><br><i>{e(mirror.tagline)}</i><br>{' | '.join(nav)}</td></tr>"
                f'<tr><td class="c1" width="200" valign="top"><b>{e(w["related"])}</b><br>{rel}</td>'
                f'<td class="c2" valign="top">{content}</td></tr>'
                f'<tr><td colspan="2" class="t2" align="center">You are visitor number {v["views"]:,} since '
                f"{v['date']}. {e(w['generated'])} {v['seconds']:.3f} s. © {e(mirror.name)}</td></tr></table>"
            )
        else:  # portal: sidebars, an ad inside the content and maybe one beside it, share and comment counts
            ads = [self.ad(name, text, w, v["ad_markup"]) for name, text in v["ads"]]
            content = self.insert_ad(content, ads[0], v["ad_at"])
            popular = "".join(f'<li><a href="{e(p)}">{e(t)}</a></li>' for p, t in v["popular"])
            share = " ".join(f'<a href="#share-{s.lower()}">{s}</a>' for s in SHARE)
            page = (
                f'<header><a class="brand" href="/">{e(mirror.name)}</a><p>{e(mirror.tagline)}</p></header>'
                f'<nav><ul>{nav_list}</ul></nav><div class="layout"><main><article>{content}</article>'
                f'<div class="article-meta">{e(w["updated"])} {v["date"]} · {v["comments"]} {e(w["comments"])} · '
                f'{v["views"]:,} {e(w["views"])}</div><div class="share">{e(w["share"])} {share}</div></main>'
                f"<aside><h3>{e(w['related'])}</h3><ul>{related}</ul><h3>{e(w['popular'])}</h3><ul>{popular}</ul>"
                f"{''.join(ads[1:])}</aside></div>"
                f"<footer><p>© {v['date'][:4]} {e(mirror.name)}. {e(w['rights'])} {footer_links}</p></footer>"
            )
        return f'<!DOCTYPE html><html lang="{lang}"><head>{head}</head><body>{page}</body></html>'

    @staticmethod
    def ad(name: str, text: str, w: dict[str, str], markup: int) -> str:
        """An ad block in one of three markups (a labelled div, an ad-network slot, an image banner)."""
        e = html.escape
        if markup == 0:
            return (
                f'<div class="ad"><small>{e(w["ad_label"])}</small> <a href="#ad"><b>{e(name)}</b> {e(text)}</a></div>'
            )
        if markup == 1:
            return (
                f'<div class="sponsored"><span>{e(w["sponsored"])}</span><ins class="adsbygoogle" data-slot="8812">'
                f'</ins><script>(adsbygoogle = window.adsbygoogle || []).push({{}});</script><p><a href="#ad">'
                f"{e(name)}</a>: {e(text)}</p></div>"
            )
        return f'<div id="b728"><a href="#ad"><img src="/static/b728.png" alt="{e(name)}"></a><p>{e(text)}</p></div>'

    @staticmethod
    def insert_ad(content: str, ad: str, at: float) -> str:
        """The ad after one of the content's paragraphs (at a random place)."""
        ends = [m.end() for m in re.finditer(r"</p>", content)]
        if not ends:
            return content + ad
        i = ends[min(len(ends) - 1, int(at * len(ends)))]
        return content[:i] + ad + content[i:]
