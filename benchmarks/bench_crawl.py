"""The crawl benchmark (issue 3): what the filter costs in a real crawl, and how it does on a mirror pair.

A local site of ``--pages`` real-size pages is served on loopback: the first N *original* pages of the
public near-duplicate set (``../shared/datasets/neardup-public``, stream order, each page's own HTML
at ``/<host><path>`` of its URL, so that its relative links keep working) when that directory is there,
else the generated demo articles (``benchmarks/make_sample.py``, as in ``crawler.demo``) padded to a real
size like ``bench_crawl_threads.py`` does.  The start page ``/`` links every page (one sitemap: paginated
index pages are near-duplicates of each other to the filter, which then drops them in a crawl and loses
the pages only they link); links to pages of the same site that are not in the set point at the page
itself (a crawl would only meet 404s there).  Originals only: the crawls with and without the filter
fetch and parse the same pages (but for the few the filter takes for near-duplicates and drops), so the
difference is the filter's own work.

1. **Rate.**  ``scrapy crawl site -a start_urls=http://127.0.0.1:PORT/`` in a subprocess with the filter
   off (``SIMHASH_ENABLED=False``) and on (the defaults, with ``SIMHASH_BACKEND=--backend``), alternated
   off/on ``--repeat`` times: median pages/s of each (HTML pages / the crawl's ``elapsed_time_seconds``)
   and their ratio (target: on ≥ 90 % of off).  The CPU time per page the filter adds, twice: its own
   account (``simhash/fingerprint_seconds``, and the index's part of ``simhash/reactor_seconds``; wall
   time in the reactor thread) and the crawl process's CPU time (user + sys) per page, on minus off,
   while crawling (spider opened to engine stopped) and for the whole process (start-up included, and
   the CPU time of its worker processes, if any).  ``--processes 0,1,2`` adds crawls with the filter on and
   ``SIMHASH_PROCESSES`` = each value, alternated with the others (``processes=N`` in the report).
   Settings: ``CONCURRENT_REQUESTS`` and ``CONCURRENT_REQUESTS_PER_DOMAIN`` 16, ``DOWNLOAD_DELAY=0``,
   no AutoThrottle, ``LOG_LEVEL=INFO``, robots.txt obeyed (the server answers it at once).
2. **Mirror accuracy.**  The same pages on http://127.0.0.1:PORT/ and their *twins* on
   http://127.0.0.2:PORT/ (same paths): each page served again by one of five mirrors (seeded: a
   verbatim copy with a one-line footer, a verbatim copy with the mirror's banner and footer, a re-skin
   that drops the page's own header/nav/footer/sidebars for its own header/nav/breadcrumbs/footer,
   an old table layout with a related-pages column and a visit counter, a portal with sidebars, ads and
   share/comment text; the chrome's text is written here and names other pages of the set), 30 % of them
   with small content edits, and 15 % edited word by word until their Jaccard falls just under 0.9 (when
   it was above).  Both hosts are crawled once with ``SIMHASH_ACTION=flag``.  Ground truth from the
   served pages: visible text by lxml (body without script/style/noscript/template/iframe, NFKC,
   lower-case), English word 3-shingles, Chinese character 4-grams (the public set's rule); a twin pair
   is *near-identical* when its Jaccard is ≥ 0.9.  Reported: the share of near-identical twin pairs of
   which one page is flagged rightly (target ≥ 97 %), and the share of flags that are wrong by the public
   set's rule (target ≤ 0.5 %): a flag is right when its page and ``duplicate_of`` tell the same page of
   the set (a page and its twin: the generator's label, like the public set's variant labels), or are a
   true pair in the public set's labels; otherwise it is wrong under Jaccard 0.5, ambiguous from 0.5 to
   0.9 (reported beside it) and right from 0.9.  The strict rule (right only at Jaccard ≥ 0.9, so a twin
   flagged at J < 0.9 is wrong) is reported too.

Output: a table on stdout, and with ``--json PATH`` the numbers as JSON.

    python benchmarks/bench_crawl.py [--pages 2000] [--repeat 3] [--backend memory://] [--processes 0,1]
                                     [--json PATH]
    python benchmarks/bench_crawl.py --pages 60 --repeat 1 --json out/bench_crawl.json   # a quick smoke run
"""

from __future__ import annotations

import argparse
import gzip
import html
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import lxml.html
from lxml import etree

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_crawl_threads import EXTENSION, padding  # noqa: E402 - the directories are added above

from crawler.demo import key_of, load_make_sample  # noqa: E402
from crawler.localsite import HOSTS, LocalSite, Page  # noqa: E402

MAIN, MIRROR = HOSTS
PUBLIC = ROOT.parent / "shared" / "datasets" / "neardup-public"
NEAR_IDENTICAL = 0.9
#: The public set's rule: two pages with a Jaccard under this (and no chain of true pairs) are distinct; from
#: it up to NEAR_IDENTICAL, ambiguous.
DISTINCT = 0.5
TWIN_SEED = 3
TARGET_RATIO, TARGET_FLAGGED, TARGET_WRONG = 0.90, 0.97, 0.005

# The stats extension of bench_crawl_threads.py, plus the crawl process's CPU time while it crawls.
EXTENSION_CPU = (
    EXTENSION
    + """

class BenchCpu(BenchStats):
    def opened(self, spider):
        self.cpu = time.process_time()
        super().opened(spider)

    def stopped(self):
        self.crawler.stats.set_value("bench/crawl_cpu_seconds", time.process_time() - self.cpu)
        self.crawler.stats.set_value("bench/self_cpu_seconds", time.process_time())  # start-up included
        super().stopped()
"""
)

CRAWL_SETTINGS = {
    "CONCURRENT_REQUESTS": "16",
    "CONCURRENT_REQUESTS_PER_DOMAIN": "16",
    "DOWNLOAD_DELAY": "0",
    "AUTOTHROTTLE_ENABLED": "False",
    "LOG_LEVEL": "INFO",
}


# --- the pages ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """A page of the set: its URL there, HTML, language and id."""

    url: str
    html: str
    lang: str
    label: str

    @property
    def path(self) -> str:
        """Where the local site serves it: ``/<host><path>[?query]``."""
        parts = urlsplit(self.url)
        return f"/{parts.hostname}{parts.path}" + (f"?{parts.query}" if parts.query else "")


@dataclass
class Corpus:
    """The pages to serve, where they come from, and the public set's true pairs among them."""

    name: str
    sources: list[Source]
    true_pairs: set[frozenset[str]] = field(default_factory=set)


def load_public(n: int, directory: Path = PUBLIC) -> Corpus:
    """The first ``n`` original pages of the public set, in stream order."""
    with gzip.open(directory / "truth.json.gz", "rt", encoding="utf-8") as f:
        truth = json.load(f)
    labels = truth["pages"]
    originals = sum(1 for p in labels if p["cause"] == "original")
    if n > originals:
        raise SystemExit(f"the public set has {originals} original pages; --pages {n} asks for more")
    sources: list[Source] = []
    with gzip.open(directory / "pages.jsonl.gz", "rt", encoding="utf-8") as f:
        for line, label in zip(f, labels, strict=False):
            if label["cause"] != "original":
                continue
            row = json.loads(line)
            sources.append(Source(row["url"], row["html"], label["lang"], label["id"]))
            if len(sources) == n:
                break
    ids = {s.label for s in sources}
    pairs = {frozenset(p[:2]) for p in truth["true_pairs"] if p[0] in ids and p[1] in ids}
    return Corpus(f"public near-duplicate set ({directory}), original pages", sources, pairs)


def load_demo(n: int, page_kb: int = 6) -> Corpus:
    """``n`` generated articles (the demo site's generator), padded with ``page_kb`` KiB like real pages."""
    rows = [r for r in load_make_sample().sample(n, seed=7) if r["variant"] == "original"]
    rng = random.Random(1)
    sources = []
    for i, row in enumerate(rows[:n]):
        head, _, tail = row["html"].rpartition("</body>")
        sources.append(Source(row["url"], head + padding(rng, page_kb) + "</body>" + tail, row["lang"], f"demo-{i}"))
    return Corpus(f"generated demo articles (benchmarks/make_sample.py), padded by {page_kb} KiB", sources)


_A_HREF = re.compile(r"""(<a\b[^>]*?\bhref\s*=\s*)(["'])(.*?)\2""", re.IGNORECASE | re.DOTALL)
_BASE_HREF = re.compile(r"""<base\b[^>]*?\bhref\s*=\s*(["'])(.*?)\1""", re.IGNORECASE | re.DOTALL)


def relink(page: str, path: str, paths: set[str]) -> str:
    """``page`` with its links to this site's pages that are not served pointed at the page itself (its
    own HTML otherwise, byte for byte; links to other hosts are left: the crawl does not follow them)."""
    here = f"http://{MAIN}{path}"
    found = _BASE_HREF.search(page)
    base = urljoin(here, html.unescape(found.group(2))) if found else here

    def fix(m: re.Match[str]) -> str:
        parts = urlsplit(urljoin(base, html.unescape(m.group(3).strip())))
        if parts.hostname != MAIN:
            return m.group(0)
        target = unquote(parts.path) + (f"?{parts.query}" if parts.query else "")
        if target in paths or target == path:
            return m.group(0)
        return f"{m.group(1)}{m.group(2)}{html.escape(path)}{m.group(2)}"

    return _A_HREF.sub(fix, page)


def title_of(page: str, default: str) -> str:
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


# --- the twins -----------------------------------------------------------------------------------------


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
INVISIBLE = ("script", "style", "noscript", "template", "iframe")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
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
    cjk = [m.start() for m in _CJK.finditer(text)]
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
        vocab = {"cjk": _CJK.findall(text), "word": _WORD.findall(text)}
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
        found = _BASE_HREF.search(source.html)
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


# --- ground truth ----------------------------------------------------------------------------------------


_PARSER = lxml.html.HTMLParser(encoding="utf-8")


def visible_text(page: str | bytes) -> str:
    """The body's text without script/style/noscript/template/iframe, NFKC, lower-case, one space apart."""
    data = page.encode("utf-8") if isinstance(page, str) else page
    if not data.strip():
        return ""
    doc = lxml.html.document_fromstring(data, parser=_PARSER)
    for el in list(doc.iter(*INVISIBLE, etree.Comment, etree.ProcessingInstruction)):
        if el.getparent() is not None:
            el.drop_tree()  # keeps the text that follows the element
    body = doc.find("body")
    text = " ".join((body if body is not None else doc).itertext())
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def language(text: str) -> str:
    letters = sum(1 for c in text if not c.isspace())
    return "zh" if letters and len(_CJK.findall(text)) >= 0.25 * letters else "en"


def shingles(text: str, lang: str) -> frozenset[str]:
    """English: word 3-shingles; Chinese: character 4-grams without spaces and punctuation."""
    if lang == "zh":
        chars = re.sub(r"[\W_]+", "", text)
        return frozenset(chars[i : i + 4] for i in range(max(1, len(chars) - 3)))
    words = re.findall(r"\w+", text)
    return frozenset(" ".join(words[i : i + 3]) for i in range(max(1, len(words) - 2)))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 1.0


class Truth:
    """The served pages' ground truth: which page of the set each key tells, and pairwise Jaccard."""

    def __init__(
        self, site: dict[str, Page], label_of: dict[str, str], lang_of: dict[str, str], true_pairs: set[frozenset[str]]
    ) -> None:
        self.site = site
        self.label_of = label_of
        self.lang_of = lang_of
        self.true_pairs = true_pairs
        self._text: dict[str, str] = {}
        self._shingles: dict[tuple[str, str], frozenset[str]] = {}

    def text(self, key: str) -> str:
        """The visible text of the page served at ``key`` (host + path; empty if nothing is served there)."""
        if key not in self._text:
            page = self.site.get(key) or self.site.get(key.removeprefix(MAIN).removeprefix(MIRROR))
            self._text[key] = visible_text(page.body) if page and page.status == 200 else ""
        return self._text[key]

    def shingles(self, key: str, lang: str) -> frozenset[str]:
        if (key, lang) not in self._shingles:
            self._shingles[key, lang] = shingles(self.text(key), lang)
        return self._shingles[key, lang]

    def jaccard(self, a: str, b: str) -> float:
        """Jaccard of the two pages' shingles, by the language of the set's page (else of ``a``'s text)."""
        lang = self.lang_of.get(a) or language(self.text(a))
        return jaccard(self.shingles(a, lang), self.shingles(b, lang))

    def labelled(self, a: str, b: str) -> bool:
        """The same page of the set (a page and its twin), or a true pair in the set's labels."""
        la, lb = self.label_of.get(a), self.label_of.get(b)
        return la is not None and lb is not None and (la == lb or frozenset((la, lb)) in self.true_pairs)


# --- crawling -------------------------------------------------------------------------------------------


def system_busy_seconds() -> float:
    """CPU seconds every process of the machine has used since boot (Linux; 0 elsewhere)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def crawl(server: LocalSite, workdir: Path, starts: list[str], settings: dict[str, str]) -> dict[str, Any]:
    """One ``scrapy crawl site`` in a subprocess: its stats (with ``bench/*``), the feed's items, and
    the process's CPU time (user + sys, start-up included) in ``bench/process_cpu_seconds``."""
    stats_file, feed, log = workdir / "stats.json", workdir / "items.jsonl", workdir / "crawl.log"
    for path in (stats_file, log):
        path.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "scrapy.cmdline",
        "crawl",
        "site",
        "-a",
        f"start_urls={','.join(starts)}",
        "-O",
        f"{feed}:jsonlines",
        "-s",
        f"BENCH_STATS={stats_file}",
        "-s",
        f"LOG_FILE={log}",
        "-s",
        'EXTENSIONS={"bench_ext.BenchCpu": 0}',
    ]
    for name, value in {**CRAWL_SETTINGS, **settings}.items():
        cmd += ["-s", f"{name}={value}"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(workdir), str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_before = resource.getrusage(resource.RUSAGE_SELF)  # this process: the site's server threads
    busy_before = system_busy_seconds()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_after = resource.getrusage(resource.RUSAGE_SELF)
    busy = system_busy_seconds() - busy_before
    if proc.returncode != 0 or not stats_file.exists():
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        raise SystemExit(f"the crawl failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}{text[-3000:]}")
    stats = json.loads(stats_file.read_text())
    stats["bench/process_cpu_seconds"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    stats["bench/wall_seconds"] = wall
    stats["bench/server_cpu_seconds"] = (server_after.ru_utime - server_before.ru_utime) + (
        server_after.ru_stime - server_before.ru_stime
    )
    # what the rest of the machine used meanwhile (other jobs on a shared machine: a noisy run)
    stats["bench/other_cpu_seconds"] = max(
        0.0, busy - stats["bench/process_cpu_seconds"] - stats["bench/server_cpu_seconds"]
    )
    stats["bench/items"] = [json.loads(line) for line in feed.read_text(encoding="utf-8").splitlines() if line]
    return stats


def html_pages(stats: dict[str, Any]) -> int:
    """HTML pages fetched (status 200, robots.txt excluded)."""
    ok = stats.get("downloader/response_status_count/200", 0)
    return ok - stats.get("robotstxt/response_status_count/200", 0)


@dataclass
class Run:
    """The numbers of one rate crawl."""

    pages: int
    seconds: float
    crawl_cpu: float
    process_cpu: float
    fingerprint: float
    reactor: float
    index: float
    checked: int
    dropped: int
    not_found: int
    in_reactor: int  # pages fingerprinted in the reactor thread while worker processes started
    worker_cpu: float  # CPU time of the crawl process after the engine stopped (exit), and of its worker processes
    server_cpu: float  # CPU time of the local site's server (this process) during the crawl
    other_cpu: float  # CPU time of the machine's other processes during the crawl
    wall: float  # the crawl's subprocess, start to exit

    @classmethod
    def of(cls, stats: dict[str, Any]) -> Run:
        return cls(
            pages=html_pages(stats),
            seconds=float(stats["elapsed_time_seconds"]),
            crawl_cpu=float(stats["bench/crawl_cpu_seconds"]),
            process_cpu=float(stats["bench/process_cpu_seconds"]),
            fingerprint=float(stats.get("simhash/fingerprint_seconds", 0.0)),
            reactor=float(stats.get("simhash/reactor_seconds", 0.0)),
            # the index checks in the reactor thread (before simhash/index_seconds: all of it but fingerprinting)
            index=float(
                stats.get("simhash/index_seconds")
                or stats.get("simhash/reactor_seconds", 0.0) - stats.get("simhash/fingerprint_seconds", 0.0)
            ),
            checked=int(stats.get("simhash/checked", 0)),
            dropped=int(stats.get("simhash/dropped", 0)),
            not_found=int(stats.get("downloader/response_status_count/404", 0)),
            in_reactor=int(stats.get("simhash/fingerprinted_in_reactor", 0)),
            worker_cpu=max(0.0, float(stats["bench/process_cpu_seconds"]) - float(stats["bench/self_cpu_seconds"])),
            server_cpu=float(stats["bench/server_cpu_seconds"]),
            other_cpu=float(stats["bench/other_cpu_seconds"]),
            wall=float(stats["bench/wall_seconds"]),
        )

    @property
    def rate(self) -> float:
        return self.pages / self.seconds

    def per_page_ms(self, seconds: float) -> float:
        return 1000 * seconds / self.pages if self.pages else 0.0


def median_of(runs: list[Run], get: Callable[[Run], float]) -> float:
    return statistics.median(get(r) for r in runs)


def rate_benchmark(
    server: LocalSite, workdir: Path, repeat: int, backend: str, processes: list[int] | None = None
) -> dict[str, Any]:
    start = [server.url("/", MAIN)]
    configs = {"off": {"SIMHASH_ENABLED": "False"}, "on": {"SIMHASH_BACKEND": backend}}
    for n in processes or []:
        configs[f"processes={n}"] = {"SIMHASH_BACKEND": backend, "SIMHASH_PROCESSES": str(n)}
    runs: dict[str, list[Run]] = {name: [] for name in configs}
    for i in range(repeat):
        for name, settings in configs.items():  # alternated, so that drift hits both
            run = Run.of(crawl(server, workdir, start, settings))
            runs[name].append(run)
            print(
                f"  crawl {i + 1}/{repeat}, filter {name}: {run.pages} pages in {run.seconds:.2f} s "
                f"({run.rate:.0f} pages/s), CPU {run.per_page_ms(run.crawl_cpu):.2f} ms/page; "
                f"other processes {run.other_cpu / run.wall:.2f} CPUs",
                flush=True,
            )
    out: dict[str, Any] = {}
    for name, rs in runs.items():
        out[name] = {
            "pages": median_of(rs, lambda r: r.pages),
            "seconds": median_of(rs, lambda r: r.seconds),
            "pages_per_s": median_of(rs, lambda r: r.rate),
            "crawl_cpu_ms_per_page": median_of(rs, lambda r: r.per_page_ms(r.crawl_cpu)),
            "process_cpu_ms_per_page": median_of(rs, lambda r: r.per_page_ms(r.process_cpu)),
            "not_found": median_of(rs, lambda r: r.not_found),
            "dropped": median_of(rs, lambda r: r.dropped),
            "fingerprinted_in_reactor": median_of(rs, lambda r: r.in_reactor),
            "worker_cpu_ms_per_page": median_of(rs, lambda r: r.per_page_ms(r.worker_cpu)),
            "server_cpu_ms_per_page": median_of(rs, lambda r: r.per_page_ms(r.server_cpu)),
            # CPUs busy on average while crawling: the crawl process, its workers and the site's server
            "cpus_busy": median_of(rs, lambda r: (r.process_cpu + r.server_cpu) / r.seconds),
            # CPUs the machine's other processes kept busy meanwhile (near 0 on a quiet machine)
            "other_cpus_busy": median_of(rs, lambda r: r.other_cpu / r.wall),
            "runs": [r.__dict__ | {"pages_per_s": r.rate} for r in rs],
        }
    for name, on in runs.items():
        if name == "off":
            continue
        c = out[name]
        c["ratio"] = c["pages_per_s"] / out["off"]["pages_per_s"]
        c["ratios"] = [a.rate / b.rate for a, b in zip(on, runs["off"], strict=True)]  # each on/off pair
        c["filter_ms_per_page"] = {
            "fingerprint": median_of(on, lambda r: r.per_page_ms(r.fingerprint)),
            # the reactor thread's time: the index checks, and the pages fingerprinted there
            "reactor": median_of(on, lambda r: r.per_page_ms(r.reactor)),
        }
        c["added_cpu_ms_per_page"] = {
            "crawl": c["crawl_cpu_ms_per_page"] - out["off"]["crawl_cpu_ms_per_page"],
            "process": c["process_cpu_ms_per_page"] - out["off"]["process_cpu_ms_per_page"],
        }
    on = runs["on"]
    out["ratio"] = out["on"]["ratio"]
    out["filter_ms_per_page"] = {
        "fingerprint": median_of(on, lambda r: r.per_page_ms(r.fingerprint)),
        "index": median_of(on, lambda r: r.per_page_ms(r.index)),
        "reactor": median_of(on, lambda r: r.per_page_ms(r.reactor)),
    }
    out["added_cpu_ms_per_page"] = out["on"]["added_cpu_ms_per_page"]
    out["variants"] = [name for name in configs if name not in ("off", "on")]
    return out


def mirror_benchmark(
    server: LocalSite, workdir: Path, backend: str, truth: Truth, pairs: list[tuple[str, str, Twin]]
) -> dict[str, Any]:
    starts = [server.url("/", host) for host in HOSTS]
    stats = crawl(server, workdir, starts, {"SIMHASH_ACTION": "flag", "SIMHASH_BACKEND": backend})
    items = stats["bench/items"]
    crawled = {key_of(i["url"]) for i in items}
    flags = {key_of(i["url"]): key_of(i["duplicate_of"]) for i in items if i.get("duplicate_of")}

    def right(a: str, b: str) -> bool:
        return truth.labelled(a, b) or truth.jaccard(a, b) >= NEAR_IDENTICAL

    bands = ((0.9, 1.01, "≥ 0.90"), (0.8, 0.9, "0.80-0.90"), (0.5, 0.8, "0.50-0.80"), (0.0, 0.5, "< 0.50"))
    by_band: dict[str, Counter[str]] = defaultdict(Counter)
    by_mirror: dict[str, Counter[str]] = defaultdict(Counter)
    by_edit: dict[str, Counter[str]] = defaultdict(Counter)
    missed: list[dict[str, Any]] = []
    for a, b, twin in pairs:
        j = truth.jaccard(a, b)
        caught = any(x in flags and right(x, flags[x]) for x in (a, b))
        band = next(name for lo, hi, name in bands if lo <= j < hi)
        for table, name in ((by_band, band), (by_mirror, twin.mirror), (by_edit, twin.edit)):
            table[name]["pairs"] += 1
            table[name]["flagged"] += caught
            if j >= NEAR_IDENTICAL:
                table[name]["near_identical"] += 1
                table[name]["near_identical_flagged"] += caught
        if j >= NEAR_IDENTICAL and not caught:
            missed.append(
                {
                    "page": a,
                    "twin": b,
                    "jaccard": round(j, 3),
                    "mirror": twin.mirror,
                    "edit": twin.edit,
                    "flag": {x: flags[x] for x in (a, b) if x in flags},
                }
            )
    near = sum(c["near_identical"] for c in by_band.values())
    near_caught = sum(c["near_identical_flagged"] for c in by_band.values())
    wrong: list[dict[str, Any]] = []
    strict_wrong: Counter[str] = Counter()
    for a, b in flags.items():
        j = truth.jaccard(a, b)
        if j < NEAR_IDENTICAL:
            strict_wrong["same page of the set" if truth.labelled(a, b) else "different pages"] += 1
        if not right(a, b):
            kind = "articles" if a in truth.label_of and b in truth.label_of else "other pages"
            wrong.append({"page": a, "duplicate_of": b, "jaccard": round(j, 3), "kind": kind})
    distinct = sum(1 for w in wrong if w["jaccard"] < DISTINCT)
    wrong_bands = Counter(next(name for lo, hi, name in bands if lo <= w["jaccard"] < hi) for w in wrong)
    return {
        "pages_crawled": len(crawled),
        "pairs": len(pairs),
        "pairs_crawled": sum(1 for a, b, _ in pairs if a in crawled and b in crawled),
        "near_identical": near,
        "near_identical_flagged": near_caught,
        "flagged_share": near_caught / near if near else None,
        "flags": len(flags),
        "wrong_flags": len(wrong),
        "wrong_share": len(wrong) / len(flags) if flags else 0.0,
        "wrong_by_jaccard": dict(wrong_bands),
        "wrong_by_kind": dict(Counter(w["kind"] for w in wrong)),
        "distinct_flags": distinct,
        "distinct_share": distinct / len(flags) if flags else 0.0,
        "strict_wrong_flags": sum(strict_wrong.values()),
        "strict_wrong_share": sum(strict_wrong.values()) / len(flags) if flags else 0.0,
        "strict_wrong_by_kind": dict(strict_wrong),
        "by_jaccard": {name: dict(by_band[name]) for _, _, name in bands},
        "by_mirror": {m.name: dict(by_mirror[m.name]) for m in MIRRORS},
        "by_edit": {k: dict(by_edit[k]) for k in EDIT_KINDS},
        "distance_histogram": {k.rsplit("/", 1)[1]: v for k, v in stats.items() if k.startswith("simhash/distance/")},
        "examples_missed": missed[:10],
        "wrong": wrong[:200],
    }


# --- the site, the report --------------------------------------------------------------------------------


def build(corpus: Corpus) -> tuple[dict[str, Page], Truth, list[tuple[str, str, Twin]], list[int]]:
    """The site on both hosts, its ground truth, the (page, twin) key pairs and the pages' sizes."""
    sources = corpus.sources
    paths = {s.path for s in sources}
    pages = {s.path: relink(s.html, s.path, paths) for s in sources}
    site: dict[str, Page] = {"/robots.txt": Page(b"User-agent: *\nDisallow: /private/\n", content_type="text/plain")}
    label_of: dict[str, str] = {}
    lang_of: dict[str, str] = {}
    for s in sources:
        site[f"{MAIN}{s.path}"] = Page(pages[s.path].encode("utf-8"))
    maker = TwinMaker(sources)
    pairs = []
    for s in sources:
        twin = maker.make(s, pages[s.path])
        site[f"{MIRROR}{s.path}"] = Page(twin.html.encode("utf-8"))
        a, b = key_of(f"http://{MAIN}{s.path}"), key_of(f"http://{MIRROR}{s.path}")
        for key in (a, b):
            label_of[key], lang_of[key] = s.label, s.lang
        pairs.append((a, b, twin))
    entries = [(s.path, title_of(s.html, s.path)) for s in sources]
    site[f"{MAIN}/"] = sitemap("All pages", entries)
    site[f"{MIRROR}/"] = sitemap("Mirror contents", entries)
    for path, text in MIRROR_PAGES.items():
        site[f"{MIRROR}{path}"] = Page(f"<html><body><h1>{path[1:-5].title()}</h1><p>{text}</p></body></html>".encode())
    sizes = [len(site[f"{MAIN}{s.path}"].body) for s in sources]
    return site, Truth(site, label_of, lang_of, corpus.true_pairs), pairs, sizes


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def report(result: dict[str, Any]) -> Iterator[str]:
    yield ""
    yield (
        f"Pages: {result['pages']} from the {result['source']}; HTML median {result['html_median_kib']:.1f} KiB "
        f"(total {result['html_total_mib']:.1f} MiB); {result['cpus']} CPUs; backend {result['backend']}"
    )
    if result.get("rate"):
        yield ""
        yield from report_rate(result["rate"], result["repeat"])
    yield ""
    yield from report_mirror(result["mirror"])


def report_rate(r: dict[str, Any], repeat: int) -> Iterator[str]:
    yield f"1. Rate: scrapy crawl site over one host, filter off/on alternated, median of {repeat}"
    yield f"{'':<12}{'pages':>7}{'crawl s':>9}{'pages/s':>9}{'CPU ms/page':>13}" + (
        f"{'with start-up':>15}{'404':>6}{'dropped':>9}"
    )
    for name in ("off", "on"):
        c = r[name]
        yield (
            f"{'filter ' + name:<12}{c['pages']:>7.0f}{c['seconds']:>9.2f}{c['pages_per_s']:>9.1f}"
            f"{c['crawl_cpu_ms_per_page']:>13.2f}{c['process_cpu_ms_per_page']:>15.2f}{c['not_found']:>6.0f}"
            f"{c['dropped'] if name == 'on' else '-':>9}"
        )
    ok = "met" if r["ratio"] >= TARGET_RATIO else "NOT met"
    yield f"on / off: {r['ratio']:.3f} (target ≥ {TARGET_RATIO:.2f}: {ok})"
    f, a = r["filter_ms_per_page"], r["added_cpu_ms_per_page"]
    in_workers = r["on"]["fingerprinted_in_reactor"] > 0 or f["reactor"] < f["fingerprint"]
    yield (
        f"CPU time the filter adds per page: {f['fingerprint']:.2f} ms fingerprinting"
        f"{' (in worker processes)' if in_workers else ''} + {f['index']:.3f} ms index; the reactor thread "
        f"{f['reactor']:.2f} ms (its own account); the crawl process: {a['crawl']:+.2f} ms while crawling, "
        f"{a['process']:+.2f} ms with start-up and workers (on - off, medians)"
    )
    if r.get("variants"):
        yield ""
        yield f"Filter on with SIMHASH_PROCESSES (alternated with the crawls above), median of {repeat}"
        yield (
            f"{'':<14}{'pages/s':>9}{'on/off':>8}{'pairs on/off':>22}{'fp ms/page':>12}{'reactor ms':>12}"
            f"{'+CPU crawl':>12}{'+CPU all':>10}{'after+wk':>9}{'server':>8}{'CPUs busy':>11}{'others':>8}"
            f"{'fp in reactor':>15}"
        )
        for name in ["off", "on", *r["variants"]]:
            c = r[name]
            f, a = c.get("filter_ms_per_page"), c.get("added_cpu_ms_per_page")
            if f is None or a is None:
                cells = f"{'':>8}{'':>22}{'':>12}{'':>12}{'':>12}{'':>10}"
            else:
                pairs = " ".join(f"{x:.2f}" for x in c["ratios"])
                cells = (
                    f"{c['ratio']:>8.3f}{pairs:>22}{f['fingerprint']:>12.2f}{f['reactor']:>12.2f}"
                    f"{a['crawl']:>+12.2f}{a['process']:>+10.2f}"
                )
            yield (
                f"{name:<14}{c['pages_per_s']:>9.1f}{cells}{c['worker_cpu_ms_per_page']:>9.2f}"
                f"{c['server_cpu_ms_per_page']:>8.2f}{c['cpus_busy']:>11.2f}{c['other_cpus_busy']:>8.2f}"
                f"{c['fingerprinted_in_reactor']:>15.0f}"
            )
        yield (
            "(ms per page, medians. +CPU crawl: the crawl process's CPU while crawling, its threads included, minus "
            "the filter-off crawl's; +CPU all: the same for the whole process, start-up and worker processes "
            "included; after+wk: the crawl process's CPU after the engine stopped, and its worker processes'; "
            "server: the local site's; CPUs busy: crawl process, "
            "workers and server together, CPU seconds per second of crawl; others: the machine's other processes)"
        )


def report_mirror(m: dict[str, Any]) -> Iterator[str]:
    yield (
        f"2. Mirror pair, SIMHASH_ACTION=flag: {m['pairs']} pages on {MAIN} and their twins on {MIRROR}; "
        f"{m['pages_crawled']} pages crawled, {m['pairs_crawled']} pairs complete"
    )
    yield (
        f"near-identical twins (visible-text Jaccard ≥ 0.9): {m['near_identical']}; flagged "
        f"{m['near_identical_flagged']} = {pct(m['flagged_share'])} (target ≥ {pct(TARGET_FLAGGED)})"
    )
    yield (
        f"flags: {m['flags']}; wrong {m['distinct_flags']} = {pct(m['distinct_share'])} (target ≤ {TARGET_WRONG:.1%}; "
        f"the public set's rule: wrong = not the same page of the set, not a true pair of its labels, "
        f"Jaccard < {DISTINCT}; {DISTINCT}-{NEAR_IDENTICAL} is ambiguous)"
    )
    yield (
        f"  unlabelled flags under Jaccard {NEAR_IDENTICAL} (ambiguous ones included): {m['wrong_flags']} = "
        f"{pct(m['wrong_share'])}"
        + (f"; by Jaccard: {m['wrong_by_jaccard']}; by pages: {m['wrong_by_kind']}" if m["wrong_by_kind"] else "")
    )
    yield (
        f"  strict rule (right only at Jaccard ≥ 0.9): wrong {m['strict_wrong_flags']} = "
        f"{pct(m['strict_wrong_share'])}: {m['strict_wrong_by_kind']}"
    )
    yield f"{'twin pairs by Jaccard':<44}{'pairs':>7}{'flagged':>9}{'share':>9}"
    for name, c in m["by_jaccard"].items():
        yield f"  {name:<42}{c.get('pairs', 0):>7}{c.get('flagged', 0):>9}{pct(_share(c)):>9}"
    yield f"{'by mirror (near-identical pairs flagged)':<44}{'pairs':>7}{'J ≥ 0.9':>9}{'flagged':>9}{'all':>9}"
    for name, c in [*m["by_mirror"].items(), *((f"edit: {k}", v) for k, v in m["by_edit"].items())]:
        share = c.get("near_identical_flagged", 0) / c["near_identical"] if c.get("near_identical") else None
        yield f"  {name:<42}{c.get('pairs', 0):>7}{c.get('near_identical', 0):>9}{pct(share):>9}{pct(_share(c)):>9}"
    for w in m["wrong"][:5]:
        yield f"  wrong: {w['page']} ≈ {w['duplicate_of']} (Jaccard {w['jaccard']})"
    for w in m["examples_missed"][:3]:
        yield f"  missed: {w['page']} / {w['twin']} (Jaccard {w['jaccard']}, {w['mirror']}, edit {w['edit']})"


def _share(c: dict[str, int]) -> float | None:
    return c.get("flagged", 0) / c["pairs"] if c.get("pairs") else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000, help="pages of the site (default: 2000)")
    parser.add_argument(
        "--repeat", type=int, default=3, help="off/on crawl pairs for the rate (default: 3; 0: mirror part only)"
    )
    parser.add_argument("--backend", default="memory://", help="SIMHASH_BACKEND of the crawls (default: memory://)")
    parser.add_argument(
        "--processes",
        default="",
        help="also crawl with the filter on and SIMHASH_PROCESSES set to each of these values (comma-separated)",
    )
    parser.add_argument(
        "--source",
        choices=("auto", "public", "demo"),
        default="auto",
        help=f"pages: the public set ({PUBLIC}), the generated demo, or the first that exists",
    )
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    use_public = args.source == "public" or (args.source == "auto" and (PUBLIC / "pages.jsonl.gz").exists())
    corpus = load_public(args.pages) if use_public else load_demo(args.pages)
    site, truth, pairs, sizes = build(corpus)
    print(
        f"{len(corpus.sources)} pages from the {corpus.name}; {len(site)} URLs served "
        f"(twins and sitemaps included); built in {time.perf_counter() - start:.1f} s",
        flush=True,
    )
    result: dict[str, Any] = {
        "source": corpus.name,
        "pages": len(corpus.sources),
        "html_median_kib": statistics.median(sizes) / 1024,
        "html_total_mib": sum(sizes) / 2**20,
        "cpus": os.cpu_count(),
        "backend": args.backend,
        "repeat": args.repeat,
        "settings": CRAWL_SETTINGS,
    }
    with tempfile.TemporaryDirectory() as tmp, LocalSite(site) as server:
        workdir = Path(tmp)
        (workdir / "bench_ext.py").write_text(EXTENSION_CPU)
        processes = [int(n) for n in args.processes.split(",") if n.strip()]
        result["rate"] = (
            rate_benchmark(server, workdir, args.repeat, args.backend, processes) if args.repeat > 0 else None
        )
        print("  crawling both hosts with SIMHASH_ACTION=flag", flush=True)
        result["mirror"] = mirror_benchmark(server, workdir, args.backend, truth, pairs)
    result["targets"] = {
        "ratio": result["rate"]["ratio"] >= TARGET_RATIO if result["rate"] else None,
        "twins_flagged": (result["mirror"]["flagged_share"] or 0) >= TARGET_FLAGGED,
        "wrong_flags": result["mirror"]["distinct_share"] <= TARGET_WRONG,
    }
    result["seconds"] = time.perf_counter() - start
    print("\n".join(report(result)))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
