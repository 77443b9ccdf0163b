"""Build a real-web near-duplicate development set (the format of ``/work/shared/eval/score.py``'s sets).

Originals are real pages already on disk (never copied into the repository): Mozilla Readability's test pages, the
Article Body Extraction benchmark (AEB), GNE's Chinese news portal pages and trafilatura's test cache.  Every variant
is made by this script and labelled with the page it was made from:

- ``syndication``: the article's main content (Readability's ``expected.html``; AEB's ``articleBody`` in ``<p>``;
  for GNE and trafilatura pages the block that matches trafilatura's extraction) inside another site's page: that
  host's main block (located by its known main text, else by where its paragraph prose is; never in a comment area,
  a sidebar or a hidden element) emptied and filled with the article, its headline the article's title, its header,
  navigation, sidebars, footer and comments kept.  Every such page (and every thin sibling) is checked after it is
  built: the inserted text at least 90 % present in the visible text (the labels' function, and what a browser
  shows), the host's own main text under 10 %; a page that fails is dropped and another host tried (counts in the
  README);
- ``proxy``: a web-archive, search-cache or translation-proxy snapshot (a toolbar on top, links rewritten);
- ``ads``, ``counter`` (visit counters, timestamps, generation times, session ids), ``edit`` (word or
  character edits, 1-10 % of the tokens, or one sentence removed).

Hard negatives come with them: several articles syndicated into one host's chrome (``template`` = the host's),
real pages of one site (GNE's portals, nytimes-1..5, wikipedia*, ...), and *thin siblings*: groups of short pages
in one host chrome whose own text is a title and one sentence beside a long note shared by the whole group.

A page's ``lang`` is that of its main text (known or extracted) where that is long enough, else of all its visible
text; a CJK character counts about as a Latin word. Labels follow the public set's rules (its README): visible text
by lxml without script/style/noscript/template/iframe/head, NFKC, lower-case; word 3-shingles, or character 4-grams
without whitespace and punctuation for Chinese and Japanese pages; a variant and its original are true; any pair
with Jaccard >= 0.9 is true; pairs in one cluster that are not true, and pairs with 0.5 <= J < 0.9, are ambiguous;
the rest is true distinct.
Pairs with J >= 0.5 are found with datasketch's MinHashLSH, then measured exactly.

    python -m benchmarks.accuracy.realweb [--out out/realweb] [--seed 20250612]
    NEARDUP_PUBLIC=out/realweb python /work/shared/eval/score.py --set public \\
        --system "simhash-filter dedup {input} --output {output}" --keep out/realweb-runs
    python -m benchmarks.accuracy.realweb --report out/realweb-runs/system.out.jsonl   # by cause x language, misses
"""

from __future__ import annotations

import argparse
import copy
import glob
import gzip
import json
import os
import random
import re
import sys
import unicodedata
from collections import Counter, defaultdict
from itertools import combinations
from urllib.parse import quote, urljoin, urlsplit

import lxml.html
import numpy as np
import xxhash
from lxml import etree
from w3lib.encoding import html_to_unicode

from benchmarks.benchlib.text import (
    LABEL_DROP,
    LANGS,
    hash_jaccard,
    is_cjk,
    label_text,
    language_by_stopwords,
    parse_page,
    shingle_hashes,
)

FORMAT = 1
DEFAULTS = {
    "readability": "/work/sources/readability/test/test-pages",
    "aeb": "/work/sources/aeb",
    "gne": "/work/sources/gne/tests",
    "trafilatura": "/work/sources/trafilatura/tests/cache",
}
CAUSES = ("original", "syndication", "proxy", "ads", "counter", "edit")
MIN_WORDS, MIN_CJK = 80, 200  # an original needs this much visible text
MIN_ARTICLE_CHARS = 400  # main content of an article that can be syndicated
TRUE_J, DISTINCT_J = 0.9, 0.5


# ------------------------------------------------------------------ reading the sources
def _read(path: str) -> bytes:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read()


def _decode(raw: bytes) -> str:
    return html_to_unicode(None, raw)[1]


def _meta_url(root) -> str | None:
    for xp in ('//link[@rel="canonical"]/@href', '//meta[@property="og:url"]/@content'):
        v = root.xpath(xp)
        if v and v[0].strip().startswith("http"):
            return v[0].strip()
    return None


def _title(root) -> str:
    t = root.find(".//title")
    s = (t.text_content() if t is not None else "") or ""
    if not s.strip():
        h = root.find(".//h1")
        s = h.text_content() if h is not None else ""
    return re.sub(r"\s+", " ", s).strip()


def title_key(title: str) -> str:
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", title)).strip().lower()


# ------------------------------------------------------------------ the main block of a page, found robustly
# what a browser does not show: the labels' LABEL_DROP tags, and these, and elements hidden by attribute or style
HIDDEN_TAGS = (*LABEL_DROP, "svg", "select", "textarea", "button", "object", "canvas", "math")
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
CONTAINERS = ("div", "article", "section", "main", "td", "span", "center", "font", "form", "dd", "li")
# class or id words of comment areas, sidebars and widgets: their paragraphs are not the main text
_SIDE = re.compile(r"comment|respond|reply|discuss|disqus|sidebar|widget|related|recommend|footer|\bnav|menu|share|"
                   r"newsletter|promo|teaser|trending|popular", re.I)
_MAINWORD = re.compile(r"article|content|main|story|entry|post-?body|text", re.I)


def _is_hidden(el) -> bool:
    if not isinstance(el.tag, str):
        return True
    return (el.tag in HIDDEN_TAGS or el.get("hidden") is not None
            or bool(_HIDDEN_STYLE.search(el.get("style") or "")))


def _shown(el) -> bool:
    """Neither the element nor an ancestor is hidden from a reader."""
    return not _is_hidden(el) and not any(_is_hidden(a) for a in el.iterancestors())


def rendered_text(html: str) -> str:
    """visible_text, and what a browser would not show either (svg, form controls, ``hidden``, display:none)."""
    root = parse_page(html)
    if root is None:
        return ""
    root = copy.deepcopy(root)
    for el in list(root.iter()):
        if el.getparent() is not None and isinstance(el.tag, str) and _is_hidden(el):
            el.drop_tree()
    for el in root.iter(etree.Comment, etree.ProcessingInstruction):
        el.text = ""
    return unicodedata.normalize("NFKC", " ".join(t for t in root.itertext() if isinstance(t, str))).lower()


_INVISIBLE_CHARS = re.compile("[\u00ad\u200b-\u200d\u2060\ufeff]")


def _norm(s: str) -> str:
    """NFKC, lower-case, whitespace collapsed, soft hyphens and zero-width characters removed (an extractor's
    text and the page's text nodes compare equal)."""
    return re.sub(r"\s+", " ", _INVISIBLE_CHARS.sub("", unicodedata.normalize("NFKC", s))).strip().lower()


def _node_stats(root, known: str | None):
    """Per shown element: (characters of shown text, of them matching ``known``, of them paragraph prose)."""
    kstr = _norm(known) if known else ""
    ksh = set(shingle_hashes(kstr).tolist()) if kstr else set()
    stats: dict = {}
    body = root.find("body")
    if body is None:
        return stats, body

    def score(s: str, in_p: bool, in_a: bool, side: bool):
        t = _norm(s)
        if not t:
            return 0, 0, 0
        n = len(t)
        m = 0
        if kstr:
            if len(t) >= 12 and t in kstr:
                m = n
            elif len(t) >= 40:
                sh = shingle_hashes(t)
                if len(sh) and sum(1 for x in sh.tolist() if x in ksh) >= 0.5 * len(sh):
                    m = n
        prose = n if not in_a and not side and (in_p or n >= 80 or sum(map(is_cjk, t)) >= 30) else 0
        return n, m, prose

    order = []

    def walk(el, in_p, in_a, side):
        if _is_hidden(el):
            return
        order.append(el)
        in_p = in_p or el.tag in ("p", "blockquote", "pre", "h2", "h3", "h4")
        in_a = in_a or el.tag == "a"
        name = f"{el.get('class') or ''} {el.get('id') or ''}"
        side = side or el.tag in ("aside", "nav", "footer") or bool(_SIDE.search(name) and not _MAINWORD.search(name))
        n, m, pr = score(el.text or "", in_p, in_a, side)
        for c in el:
            if isinstance(c.tag, str):
                walk(c, in_p, in_a, side)
            if c.tail:
                tn, tm, tp = score(c.tail, in_p, in_a, side)
                n, m, pr = n + tn, m + tm, pr + tp
        stats[el] = [n, m, pr]

    walk(body, False, False, False)
    for el in reversed(order):  # children before parents: add them up
        p = el.getparent()
        if p in stats and el is not body:
            s = stats[p]
            for k in range(3):
                s[k] += stats[el][k]
    return stats, body


def locate_main(root, known: str | None = None):
    """The host's main block, or None.  With a known main text (Readability's expected.html, AEB's articleBody,
    trafilatura's extraction): the shown container whose text matches it best (F1 of matching characters).
    Otherwise, and when nothing matches: from body, descend while one child holds most of the paragraph prose
    (text in <p>, or long text runs, not in links, not in comment areas, sidebars or widgets)."""
    stats, body = _node_stats(root, known)
    if body is None or body not in stats:
        return None
    ktot = stats[body][1]
    if known and ktot >= 200:
        best, best_f = None, 0.0
        for el, (n, m, _pr) in stats.items():
            if el.tag not in CONTAINERS or not m:
                continue
            f = 2 * m / (n + ktot)
            if f > best_f:
                best, best_f = el, f
        if best is not None and best_f >= 0.5:
            return best
    el = body
    while True:
        total = stats[el][2]
        kids = [c for c in el if c in stats]
        nxt = max(kids, key=lambda c: stats[c][2], default=None)
        if nxt is None or total == 0 or stats[nxt][2] <= 0.5 * total:
            break
        el = nxt
    while el.tag not in CONTAINERS and el is not body:
        el = el.getparent()
    return el if el is not body and stats[el][2] >= 200 else None


def present(part: np.ndarray, whole: np.ndarray) -> float:
    """Share of ``part``'s shingles that ``whole`` has."""
    if not len(part):
        return 0.0
    return len(np.intersect1d(part, whole, assume_unique=True)) / len(part)


ARTICLE_PRESENT, HOST_PRESENT = 0.9, 0.1


def check_insert(html: str, inserted: str, host_main: str) -> str | None:
    """None when the page is what the insert means: ``inserted`` (text) at least 90 % present in the page's visible
    text (the labels' function, and what a browser shows), the host's own main text under 10 %; else why not."""
    ins = shingle_hashes(_norm(inserted))
    page = shingle_hashes(_norm(label_text(html)))
    for name, sh in (("visible", page), ("rendered", shingle_hashes(_norm(rendered_text(html))))):
        if present(ins, sh) < ARTICLE_PRESENT:
            return f"article_not_{name}"
    if host_main and present(shingle_hashes(_norm(host_main)), page) >= HOST_PRESENT:
        return "host_text_kept"
    return None


class Source:
    """One real page: url, html, site (template key), the article's content (HTML fragment), its title, and its
    main text as known (Readability's expected.html, AEB's articleBody) or extracted (trafilatura)."""

    def __init__(self, collection, key, site, url, html, content=None, article_title=None, main_text=None):
        self.collection, self.key, self.site, self.url, self.html = collection, key, site, url, html
        self.content, self.article_title = content, article_title
        self.main_text = main_text if main_text is not None else (label_text(content) if content else None)


def _site_of_url(url: str) -> str:
    host = (urlsplit(url).hostname or "").lower()
    return host[4:] if host.startswith("www.") else host


# Readability's hand-made test cases (lorem ipsum and markup tests), not pages of the web
SYNTHETIC_TESTS = re.compile(r"^(\d{3}(-.*)?|rtl-\d|base-url.*|basic-tags-cleaning|clean-links|comment-inside-script-"
                             r"parsing|data-url-image|hidden-nodes|invalid-attributes|js-link-replacement|keep-.*|"
                             r"lazy-image-\d|links-in-tables|metadata-content-missing|missing-paragraphs|normalize-"
                             r"spaces|ol|remove-.*|reordering-paragraphs|replace-.*|social-buttons|style-tags-removal|"
                             r"svg-parsing|table-style-attributes|title-.*|toc-missing|visibility-hidden|article-author-"
                             r"tag|parsely-metadata|schema-org-context-object|bug-\d+|cnet-svg-classes|mathjax)$")


def read_readability(d: str) -> list[Source]:
    out = []
    for path in sorted(glob.glob(os.path.join(d, "*", "source.html"))):
        name = os.path.basename(os.path.dirname(path))
        if SYNTHETIC_TESTS.match(name):
            continue
        html = _decode(_read(path))
        root = parse_page(html)
        if root is None:
            continue
        url = _meta_url(root) or f"https://{name}.readability-test.example/"
        exp = os.path.join(os.path.dirname(path), "expected.html")
        content = _read(exp).decode("utf-8") if os.path.exists(exp) else None
        meta = os.path.join(os.path.dirname(path), "expected-metadata.json")
        title = None
        if os.path.exists(meta):
            title = json.loads(_read(meta)).get("title")
        family = re.sub(r"-\d+$", "", name)
        out.append(Source("readability", f"readability/{name}", f"readability:{family}", url, html, content, title))
    return out


def read_aeb(d: str) -> list[Source]:
    gt = json.loads(_read(os.path.join(d, "ground-truth.json")))
    out = []
    for key in sorted(gt):
        path = os.path.join(d, "html", key + ".html.gz")
        if not os.path.exists(path):
            continue
        html = _decode(_read(path))
        body = gt[key].get("articleBody") or ""
        paras = [p.strip() for p in re.split(r"\n\s*\n|\n", body) if p.strip()]
        content = "<div>" + "".join(f"<p>{_esc(p)}</p>" for p in paras) + "</div>" if paras else None
        url = gt[key].get("url") or f"https://aeb-{key[:12]}.example/"
        out.append(Source("aeb", f"aeb/{key[:16]}", f"aeb:{_site_of_url(url)}", url, html, content,
                          main_text=body or None))
    return out


def extract_main_text(html: str) -> str | None:
    """trafilatura's main text of a page (no comments), the known main text of pages without one."""
    import trafilatura

    return trafilatura.extract(html, include_comments=False, include_tables=True, deduplicate=False) or None


def _located_source(collection, key, site, url, html) -> Source:
    """A page without a known main content: trafilatura's text, located in the page; its block is the content."""
    known = extract_main_text(html)
    root = parse_page(html)
    el = locate_main(root, known)
    content = None
    if el is not None:
        # the content is what a reader sees of the block, in a div (a td or li alone is no fragment)
        el = copy.deepcopy(el)
        for x in list(el.iter()):
            if x is not el and isinstance(x.tag, str) and _is_hidden(x):
                x.drop_tree()
        el.tag, el.tail = "div", None
        el.attrib.clear()
        content = lxml.html.tostring(el, encoding="unicode", with_tail=False)
    return Source(collection, key, site, url, html, content, main_text=known or (label_text(content)
                                                                                  if content else None))


def read_gne(d: str) -> list[Source]:
    out = []
    for path in sorted(glob.glob(os.path.join(d, "*", "*.html"))):
        site = os.path.basename(os.path.dirname(path))
        n = os.path.splitext(os.path.basename(path))[0]
        html = _decode(_read(path))
        root = parse_page(html)
        if root is None:
            continue
        url = _meta_url(root) or f"https://news.{site}.gne-test.example/article/{n}.html"
        out.append(_located_source("gne", f"gne/{site}/{n}", f"gne:{site}", url, html))
    return out


def read_trafilatura(d: str) -> list[Source]:
    out = []
    for path in sorted(glob.glob(os.path.join(d, "*.html"))):
        name = os.path.basename(path)[:-5]
        html = _decode(_read(path))
        root = parse_page(html)
        if root is None:
            continue
        parts = name.split(".")
        # file names are <domain>.<slug>: the domain is the longest prefix that looks like a host name
        dom = ".".join(parts[:2]) if len(parts) > 1 else name
        url = _meta_url(root) or f"https://{dom}/{quote('.'.join(parts[2:]) or 'page')}"
        out.append(_located_source("trafilatura", f"trafilatura/{name}", f"trafilatura:{_site_of_url(url) or dom}",
                                   url, html))
    return out


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# ------------------------------------------------------------------ synthetic text (our own)
AD_EN = ["Sponsored", "Advertisement", "Promoted", "Partner content"]
AD_PRODUCTS = ["Cloud backup", "Noise-cancelling headphones", "Running shoes", "A weekend in Lisbon", "Home insurance",
               "Online course in data analysis", "Electric bike", "Meal kits", "Standing desk", "Travel card"]
AD_CLAIMS = ["save up to 40% this week only", "free shipping on every order", "try it free for 30 days",
             "rated best in class by our readers", "limited offer, book now", "compare prices in seconds"]
AD_ZH = ["限时特惠，立即抢购", "全场包邮，满百再减", "新用户注册即送好礼", "点击了解更多详情", "品牌直降，错过再等一年"]
COUNTER_EN = ["This page has been viewed {n:,} times", "Visitors: {n}", "Hits since launch: {n}", "Page views: {n:,}"]
COUNTER_ZH = ["本页已被浏览 {n} 次", "访问量：{n}", "阅读 {n}"]


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _date(rng: random.Random) -> tuple[int, int, int, int, int, int]:
    return (rng.randint(2016, 2025), rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 23), rng.randint(0, 59),
            rng.randint(0, 59))


def _el(html: str):
    return lxml.html.fragment_fromstring(html, create_parent=False)


def _body(root):
    b = root.find("body")
    if b is None:
        b = etree.SubElement(root, "body")
    return b


def _blocks(body):
    """Block elements inside body where something can be inserted before or after."""
    return [el for el in body.iter("div", "p", "section", "article", "ul", "table", "h2", "h3")
            if el.getparent() is not None and not any(a.tag in LABEL_DROP for a in el.iterancestors())]


def _serialize(root) -> str:
    return "<!DOCTYPE html>\n" + lxml.html.tostring(root, encoding="unicode")


# ------------------------------------------------------------------ variants
_MAIN_CACHE: dict[str, tuple[str | None, str]] = {}


def host_main(host: Source):
    """(parsed host page, its main block or None, the host's own main text): the block located by the host's
    known main text (else by paragraph prose); the text is the known one, else the block's."""
    root = parse_page(host.html)
    if host.key not in _MAIN_CACHE:
        el = locate_main(root, host.main_text) if root is not None else None
        path = root.getroottree().getpath(el) if el is not None else None
        text = host.main_text or (" ".join(el.itertext()) if el is not None else "")
        _MAIN_CACHE[host.key] = (path, text)
    path, text = _MAIN_CACHE[host.key]
    found = root.xpath(path) if path else []
    return root, (found[0] if found else None), text


def _empty_main(root, main, host_text: str, title: str) -> None:
    """Empty the host's main block; its headline outside the block (an h1 whose text is the host's title or in
    its main text) becomes ``title``."""
    for c in list(main):
        main.remove(c)
    main.text = None
    own = _norm(host_text)
    t = root.find(".//title")
    own_title = _norm(t.text_content() or "") if t is not None else ""
    for h in root.iter("h1"):
        if main in h.iterancestors() or not _shown(h):
            continue
        ht = _norm(h.text_content() or "")
        if ht and (ht in own_title or ht in own):
            for c in list(h):
                h.remove(c)
            h.text = title


def make_syndication(rng, article: Source, host: Source, credit: bool):
    root, main, host_text = host_main(host)
    if main is None:
        return None
    title = article.article_title or _title(parse_page(article.html))
    _empty_main(root, main, host_text, title)
    frag = lxml.html.fragment_fromstring(article.content, create_parent="div")
    # readability's expected.html wraps the article in one div: unwrap it
    while len(frag) == 1 and frag[0].tag == "div" and not (frag.text or "").strip():
        frag = frag[0]
    if (frag.text or "").strip():
        main.text = frag.text
    for c in list(frag):
        main.append(c)
    if credit:
        p = etree.SubElement(main, "p")
        p.set("class", "syndication-credit")
        p.text = (f"This article originally appeared on {_site_of_url(article.url)} and is republished here "
                  f"under a content partnership.")
    t = root.find(".//title")
    if t is None:
        head = root.find("head")
        if head is None:
            head = etree.Element("head")
            root.insert(0, head)
        t = etree.SubElement(head, "title")
    t.text = title
    for c in list(t):
        t.remove(c)
    return _serialize(root), title


PROXY_STYLES = ("archive", "cache", "translate")


def make_proxy(rng, src: Source, style: str):
    root = parse_page(src.html)
    body = _body(root)
    y, mo, d, h, mi, s = _date(rng)
    stamp = f"{y}{mo:02d}{d:02d}{h:02d}{mi:02d}{s:02d}"
    url = src.url
    if style == "archive":
        base = f"https://webarchive.example/web/{stamp}/"
        new_url = base + url
        n = rng.randint(2, 400)
        bar = (f'<div id="wm-toolbar"><form action="https://webarchive.example/search"><input name="url" '
               f'value="{_esc(url)}"><button>Go</button></form><p>Snapshot of {_esc(url)} captured {n} times '
               f"between {y - rng.randint(1, 6)} and {y}. This capture: {y}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:"
               f'{s:02d} UTC.</p><a href="{base}{_esc(url)}">Previous capture</a> <a href="{base}{_esc(url)}">'
               f'Next capture</a> <a href="https://webarchive.example/about">About this archive</a></div>')
    elif style == "cache":
        base = "https://cache.search-cache.example/cache?u="
        new_url = base + quote(url, safe="")
        bar = (f'<div id="cache-banner"><p>This is the search cache of <a href="{_esc(url)}">{_esc(url)}</a>. '
               f"It is a snapshot of the page as it appeared on {d} {mo}/{y} {h:02d}:{mi:02d}:{s:02d} GMT. The "
               f"current page could have changed in the meantime.</p><a href=\"{base}{quote(url, safe='')}&text=1\">"
               f'Text-only version</a> <a href="https://cache.search-cache.example/help">Learn more</a></div>')
    else:
        host = (urlsplit(url).hostname or "x").replace("-", "--").replace(".", "-")
        base = f"https://{host}.translate-proxy.example"
        split = urlsplit(url)
        new_url = base + (split.path or "/") + ("?" + split.query + "&" if split.query else "?") + "_x_tr_sl=auto"
        bar = ('<div id="tr-bar"><form><label>Translate from</label><select><option>Detect language</option>'
               '<option>English</option></select><label>to</label><select><option>English</option></select>'
               f'<button>Translate</button></form><a href="{_esc(url)}">View original page</a> '
               '<a href="https://translate-proxy.example/options">Options</a></div>')
    for el in root.iter("a", "link", "img", "form", "script"):
        attr = {"a": "href", "link": "href", "img": "src", "form": "action", "script": "src"}[el.tag]
        v = el.get(attr)
        if v and not v.startswith(("#", "javascript:", "data:", "mailto:")):
            try:
                absolute = urljoin(url, v)
            except ValueError:
                continue
            el.set(attr, (base + absolute) if style == "archive" else
                   (base + quote(absolute, safe="")) if style == "cache" else absolute.replace(
                       f"{split.scheme}://{split.netloc}", base, 1))
    body.insert(0, _el(bar))
    return _serialize(root), new_url, {"proxy_style": style}


def make_ads(rng, src: Source, cjk: bool):
    root = parse_page(src.html)
    body = _body(root)
    blocks = _blocks(body) or [body]
    kinds = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["text", "script", "iframe", "img", "text+img"])
        kinds.append(kind)
        if kind in ("text", "text+img"):
            if cjk:
                txt = f"<p>广告 · {rng.choice(AD_ZH)} · {rng.choice(AD_ZH)}</p>"
            else:
                txt = (f"<p><b>{rng.choice(AD_EN)}</b> {rng.choice(AD_PRODUCTS)}: {rng.choice(AD_CLAIMS)}. "
                       f'<a href="https://ads.adnet.example/c?id={_hex(rng, 8)}">Learn more</a></p>')
            img = (f'<img src="https://cdn.adnet.example/b/{_hex(rng, 10)}.jpg" width="300" height="250">'
                   if kind == "text+img" else "")
            ad = f'<div class="ad-slot ad-{_hex(rng, 4)}">{txt}{img}</div>'
        elif kind == "script":
            ad = (f'<div class="ad"><script async src="https://ads.adnet.example/show.js?slot={_hex(rng, 6)}"></script>'
                  f'<ins class="adsbygoogle" data-ad-slot="{rng.randint(10**9, 10**10)}"></ins></div>')
        elif kind == "iframe":
            ad = (f'<div class="ad-frame"><iframe src="https://ads.adnet.example/frame/{_hex(rng, 8)}" width="728" '
                  f'height="90"></iframe></div>')
        else:
            ad = (f'<div class="banner"><a href="https://ads.adnet.example/c?b={_hex(rng, 8)}"><img alt="ad" '
                  f'src="https://cdn.adnet.example/{_hex(rng, 12)}.gif"></a></div>')
        target = rng.choice(blocks)
        (target.addprevious if rng.random() < 0.5 else target.addnext)(_el(ad))
    return _serialize(root), {"ad_kinds": kinds}


def make_counter(rng, src: Source, cjk: bool):
    root = parse_page(src.html)
    body = _body(root)
    kinds = rng.sample(["counter", "timestamp", "generated", "session"], rng.randint(1, 3))
    y, mo, d, h, mi, s = _date(rng)
    bits = []
    if "counter" in kinds:
        bits.append(rng.choice(COUNTER_ZH if cjk else COUNTER_EN).format(n=rng.randint(100, 2_000_000)))
    if "timestamp" in kinds:
        bits.append(f"更新时间：{y}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}" if cjk else
                     f"Last updated {y}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}")
    if "generated" in kinds:
        bits.append(f"Page generated in {rng.uniform(0.004, 2.5):.4f} s")
    if bits:
        div = _el(f'<div class="page-stats">{" | ".join(_esc(b) for b in bits)}</div>')
        blocks = _blocks(body)
        if blocks and rng.random() < 0.5:
            rng.choice(blocks).addnext(div)
        else:
            body.append(div)
    query = ""
    if "session" in kinds:
        sid = _hex(rng, 24)
        for a in root.iter("a"):
            href = a.get("href")
            if href and not href.startswith(("#", "javascript:", "mailto:")):
                a.set("href", href + ("&" if "?" in href else "?") + "sid=" + sid)
        form = _el(f'<form method="post" action="/login"><input type="hidden" name="csrf" value="{_hex(rng, 32)}">'
                   "</form>")
        body.append(form)
        query = "sid=" + sid
    else:
        query = f"t={rng.randint(1_500_000_000, 1_750_000_000)}"
    url = src.url + ("&" if "?" in src.url else "?") + query
    return _serialize(root), url, {"counter_kinds": kinds}


EDIT_LEVELS = ["words", "1pct", "2pct", "4pct", "7pct", "10pct", "sentence"]
_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_SENT = re.compile(r"(?<=[.!?。！？])\s*")


def _text_slots(body):
    """(element, 'text'|'tail') pairs of visible text nodes under body."""
    slots = []
    for el in body.iter():
        if not isinstance(el.tag, str):
            continue
        hidden = el.tag in LABEL_DROP or any(a.tag in LABEL_DROP for a in el.iterancestors())
        if not hidden and (el.text or "").strip():
            slots.append((el, "text"))
        if el is not body and (el.tail or "").strip() and not any(a.tag in LABEL_DROP for a in el.iterancestors()):
            slots.append((el, "tail"))
    return slots


def make_edit(rng, src: Source, cjk: bool):
    root = parse_page(src.html)
    body = _body(root)
    slots = _text_slots(body)
    level = rng.choice(EDIT_LEVELS)
    ops: Counter = Counter()

    def get(slot):
        el, which = slot
        return el.text if which == "text" else el.tail

    def put(slot, value):
        el, which = slot
        value = _CTRL.sub("", value)
        if which == "text":
            el.text = value
        else:
            el.tail = value

    if level == "sentence":
        cands = [s for s in slots if len([x for x in _SENT.split(get(s)) if x.strip()]) >= 2]
        if cands:
            s = rng.choice(cands)
            sents = [x for x in _SENT.split(get(s)) if x.strip()]
            sents.pop(rng.randrange(len(sents)))
            put(s, ("" if cjk else " ").join(sents))
            ops["sentence-delete"] += 1
        return _serialize(root), {"edit_level": level, "edit_ops": sum(ops.values()), "ops": dict(ops)}
    unit = (lambda t: [m.start() for m in re.finditer(r"[\u3400-\u9fff]", t)]) if cjk else \
        (lambda t: [m.start() for m in re.finditer(r"\w+", t)])
    weights = [len(unit(get(s))) for s in slots]
    total = sum(weights)
    if not total:
        return None
    n = rng.randint(1, 3) if level == "words" else max(1, round(int(level[:-3]) / 100 * total))
    pool = [get(s) for s in slots]
    for _ in range(n):
        s = rng.choices(slots, weights=weights)[0]
        t = get(s)
        if cjk:
            pos = [m.start() for m in re.finditer(r"[\u3400-\u9fff]", t)]
            if not pos:
                continue
            i = rng.choice(pos)
            op = rng.choice(["char-delete", "char-insert", "char-replace", "char-swap"])
            donor = rng.choice(pool)
            other = rng.choice(re.findall(r"[\u3400-\u9fff]", donor) or ["的"])
            if op == "char-delete":
                t = t[:i] + t[i + 1:]
            elif op == "char-insert":
                t = t[:i] + other + t[i:]
            elif op == "char-replace":
                t = t[:i] + other + t[i + 1:]
            elif i + 1 < len(t):
                t = t[:i] + t[i + 1] + t[i] + t[i + 2:]
        else:
            ms = list(re.finditer(r"\w+", t))
            if not ms:
                continue
            m = rng.choice(ms)
            op = rng.choice(["insert", "delete", "replace", "typo"])
            donor_words = re.findall(r"\w{3,}", rng.choice(pool)) or ["also"]
            w = m.group()
            if op == "delete":
                new = ""
            elif op == "insert":
                new = w + " " + rng.choice(donor_words)
            elif op == "replace":
                new = rng.choice(donor_words)
            else:
                k = rng.randrange(len(w))
                new = w[:k] + rng.choice("aeioustnrl") + w[k + 1:] if len(w) > 1 else w + "s"
            t = t[:m.start()] + new + t[m.end():]
        ops[op] += 1
        put(s, t)
    return _serialize(root), {"edit_level": level, "edit_ops": sum(ops.values()), "ops": dict(ops)}


def _edit_url(rng, url: str) -> str:
    sp = urlsplit(url)
    r = rng.random()
    if r < 0.4:
        return url + ("&" if sp.query else "?") + f"rev={rng.randint(2, 40)}"
    if r < 0.7:
        return f"{sp.scheme}://{sp.netloc}/amp{sp.path or '/'}" + (f"?{sp.query}" if sp.query else "")
    return url + ("&" if sp.query else "?") + f"utm_source=newsletter&utm_campaign={_hex(rng, 6)}"


def make_thin(rng, host: Source, title: str, sentence: str, note: list[str], page_title: str | None):
    root, main, host_text = host_main(host)
    if main is None:
        return None
    _empty_main(root, main, host_text, title)
    main.append(_el(f"<h1>{_esc(title)}</h1>"))
    main.append(_el(f"<p>{_esc(sentence)}</p>"))
    main.append(_el('<div class="section-note">' + "".join(f"<p>{_esc(s)}</p>" for s in note) + "</div>"))
    t = root.find(".//title")
    if t is not None:
        for c in list(t):
            t.remove(c)
        t.text = page_title or title
    return _serialize(root)


# ------------------------------------------------------------------ the build
class Page(dict):
    pass


def _slug(s: str, rng) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")[:40] or "story"
    return f"{s}-{rng.randint(100, 99999)}"


def _sentences(text: str, cjk: bool) -> list[str]:
    out = [s.strip() for s in _SENT.split(re.sub(r"\s+", " ", text)) if s.strip()]
    return [s for s in out if (20 <= len(s) <= 200 if cjk else 60 <= len(s) <= 300)]


PROBE_TITLE = "A probe headline for the host check"
PROBE = ("The probe paragraph stands where the host's own article was, and the check reads the page again to see "
         "that this text is shown and that the host's own main text is gone from it. " * 2).strip()


def page_lang(text: str, main_text: str | None) -> tuple[str, bool]:
    """The language of a page: of its main text where that is long enough (chrome in another language, a Chinese
    article in an English menu), else of all its visible text."""
    if main_text:
        t = _norm(main_text)
        lang, cjk = language_by_stopwords(t)
        if sum(map(is_cjk, t)) >= MIN_CJK or len(re.findall(r"\w+", t)) >= MIN_WORDS:
            return lang, cjk
    return language_by_stopwords(text)


def load_sources(args) -> list[Source]:
    readers = {"readability": read_readability, "aeb": read_aeb, "gne": read_gne, "trafilatura": read_trafilatura}
    out = []
    for name, reader in readers.items():
        d = getattr(args, name)
        probe = os.path.join(d, "ground-truth.json") if name == "aeb" else d
        if not os.path.exists(probe):
            raise SystemExit(f"realweb: {name} source missing: {probe} (pass --{name} DIR)")
        out += reader(d)
    if args.sites_of > 1:  # a seeded part of the sites: a held-out set shares no site (template) with a tuned one
        out = [s for s in out if xxhash.xxh64_intdigest(split_key(s).encode(), args.split_seed) % args.sites_of ==
               args.sites_from]  # fmt: skip
    return out


def split_key(src: Source) -> str:
    """The site a source page belongs to, for a split by site: the family of a Readability test page, the host
    name of an AEB page, the portal of a GNE page, the first two labels of a trafilatura cache file's name."""
    if src.collection == "aeb":
        return "aeb:" + urlsplit(src.url).netloc
    if src.collection == "trafilatura":
        return "traf:" + ".".join(src.key.split("/", 1)[1].split(".")[:2])
    return src.site


def build(args) -> dict:
    try:
        from datasketch import MinHash, MinHashLSH
    except ImportError:
        raise SystemExit("realweb: needs datasketch (pip install datasketch)") from None
    rng = random.Random(args.seed)
    sources = load_sources(args)
    seen_urls: set[str] = set()
    originals: list[dict] = []
    skipped = Counter()
    for src in sources:
        text = label_text(src.html)
        lang, cjk = page_lang(text, src.main_text)
        n_words = len(re.findall(r"\w+", text)) if not cjk else sum(1 for ch in text if is_cjk(ch))
        if n_words < (MIN_CJK if cjk else MIN_WORDS):
            skipped[src.collection] += 1
            continue
        while src.url in seen_urls:
            src.url += ("&" if "?" in src.url else "?") + "dup=1"
        seen_urls.add(src.url)
        art_text = label_text(src.content) if src.content else ""
        originals.append(dict(src=src, lang=lang, cjk=cjk, article_ok=len(art_text.strip()) >= MIN_ARTICLE_CHARS
                              * (0.4 if cjk else 1), title=_title(parse_page(src.html))))
    # hosts: pages whose main block holds a good share of the text and which have some chrome around it, and
    # where emptying that block takes the host's own main text away (a probe paragraph in its place)
    hosts = []
    rejects: Counter = Counter()
    for o in originals:
        root, mb, own = host_main(o["src"])
        if mb is None:
            rejects["host_no_main_block"] += 1
            continue
        whole = len(label_text(o["src"].html))
        inner = len(unicodedata.normalize("NFKC", " ".join(mb.itertext())))
        if not (whole and 0.25 <= inner / whole <= 0.9 and whole - inner >= 150):
            rejects["host_main_share"] += 1
            continue
        _empty_main(root, mb, own, PROBE_TITLE)
        mb.append(_el(f"<p>{PROBE}</p>"))
        why = check_insert(_serialize(root), PROBE, own)
        if why:
            rejects[f"host_probe_{why}"] += 1
            continue
        hosts.append(o)
    by_site = defaultdict(list)
    for h in hosts:
        by_site[h["src"].site].append(h)
    host_pool = [rng.choice(v) for _k, v in sorted(by_site.items())]
    rng.shuffle(host_pool)
    host_pool = host_pool[:args.hosts]

    pages: list[Page] = []

    def add(html, url, o, cause, info, template, title=None, topic=None, source=None, lang=None, cjk=None):
        while url in seen_urls:
            url += ("&" if "?" in url else "?") + f"v={rng.randint(2, 999)}"
        seen_urls.add(url)
        p = Page(url=url, html=html, cause=cause, orig=o, info=info, template=template,
                 title=title if title is not None else (o["title"] if o else ""),
                 topic=topic if topic is not None else (o["topic"] if o else None),
                 source=source or o["src"].collection, lang=lang or o["lang"],
                 cjk=o["cjk"] if cjk is None else cjk)
        pages.append(p)
        return p

    site_count = Counter(o["src"].site for o in originals)
    for o in originals:
        s = o["src"]
        o["topic"] = s.site if site_count[s.site] > 1 else f"{s.site}/{urlsplit(s.url).path.strip('/').split('/')[0]}"
        o["page"] = add(s.html, s.url, o, "original", {"collection": s.collection, "key": s.key}, s.site)
        o["page"]["orig"] = None
        o["page"]["self"] = o
    # syndication: each article into one host of another site, a third of them into a second one
    for o in originals:
        if not o["article_ok"]:
            continue
        copies = 1 + (rng.random() < args.second_host)
        used = set()
        for _ in range(copies):
            for _try in range(12):
                h = rng.choice(host_pool)
                if h["src"].site == o["src"].site or h["src"].site in used:
                    continue
                made = make_syndication(rng, o["src"], h["src"], credit=rng.random() < 0.4)
                if made is None:
                    continue
                html, title = made
                why = check_insert(html, label_text(o["src"].content), host_main(h["src"])[2])
                if why:
                    rejects[f"syndication_{why}"] += 1
                    continue
                used.add(h["src"].site)
                hurl = urlsplit(h["src"].url)
                url = f"{hurl.scheme or 'https'}://{hurl.netloc}/partner/{_slug(title, rng)}.html"
                add(html, url, o, "syndication", {"host": h["src"].key, "host_site": h["src"].site}, h["src"].site,
                    title=title)
                break
    for o in originals:
        s = o["src"]
        if rng.random() < args.proxy:
            style = rng.choice(PROXY_STYLES)
            html, url, info = make_proxy(rng, s, style)
            add(html, url, o, "proxy", info, s.site)
        if rng.random() < args.ads:
            html, info = make_ads(rng, s, o["cjk"])
            add(html, s.url + ("&" if "?" in s.url else "?") + f"ref=ad{rng.randint(1, 99)}", o, "ads", info, s.site)
        if rng.random() < args.counter:
            html, url, info = make_counter(rng, s, o["cjk"])
            add(html, url, o, "counter", info, s.site)
        if rng.random() < args.edit:
            made = make_edit(rng, s, o["cjk"])
            if made:
                add(made[0], _edit_url(rng, s.url), o, "edit", made[1], s.site)
    # thin siblings: groups of short pages in one host chrome, a long note shared by the group
    sent_pool = defaultdict(list)
    for o in originals:
        if o["src"].content:
            sent_pool[o["lang"]] += [(o, x) for x in _sentences(label_text(o["src"].content), o["cjk"])]
    thin_groups = 0
    for gi, h in enumerate(sorted(host_pool, key=lambda x: x["src"].key)[:args.thin_groups]):
        lang = h["lang"] if len(sent_pool[h["lang"]]) >= 60 else "en"
        pool = sent_pool[lang]
        cjk = lang == "zh" or (lang == "other" and h["cjk"])
        note_n = [3, 6, 10, 16][gi % 4]
        note = [x for _o, x in rng.sample(pool, note_n)]
        donors = rng.sample([o for o in originals if o["lang"] == lang], min(rng.randint(5, 9), sum(
            1 for o in originals if o["lang"] == lang)))
        shared_title = f"Notes and updates | {h['src'].site.split(':')[-1]}" if gi % 2 else None
        hurl = urlsplit(h["src"].url)
        for d in donors:
            sents = _sentences(label_text(d["src"].content or d["src"].html), d["cjk"])
            if not sents:
                continue
            t = d["title"] or sents[0][:60]
            sent = rng.choice(sents)
            html = make_thin(rng, h["src"], t, sent, note, shared_title)
            if html is None:
                continue
            why = check_insert(html, " ".join([t, sent, *note]), host_main(h["src"])[2])
            if why:
                rejects[f"thin_{why}"] += 1
                continue
            add(html, f"{hurl.scheme or 'https'}://{hurl.netloc}/notes/{gi}/{_slug(t, rng)}", None, "original",
                {"thin_group": gi, "host": h["src"].key, "note_sentences": note_n}, h["src"].site,
                title=shared_title or t, topic=f"thin:{gi}", source="thin", lang=lang, cjk=cjk)
        thin_groups += 1
    return dict(pages=pages, originals=originals, skipped=skipped, hosts=host_pool, thin_groups=thin_groups,
                rejects=rejects,
                MinHash=MinHash, MinHashLSH=MinHashLSH, rng=rng)


def order_and_label(b: dict, args) -> dict:
    rng, pages = b["rng"], b["pages"]
    # crawl order: originals spread over the stream, a variant after its original (args.before: before it)
    for p in pages:
        if p["orig"] is None:
            p["key"] = rng.random()
    for p in pages:
        if p["orig"] is not None:
            ok = p["orig"]["page"]["key"]
            p["key"] = ok * rng.random() if rng.random() < args.before else ok + (1 - ok) * rng.random()
    pages.sort(key=lambda p: p["key"])
    for i, p in enumerate(pages):
        p["id"] = f"rw-{i:05d}"
    sh = []
    for p in pages:
        sh.append(shingle_hashes(label_text(p["html"]), p["cjk"]))
    n = len(pages)
    # candidates: MinHashLSH at 0.5 over the shingle hashes
    MinHash, MinHashLSH = b["MinHash"], b["MinHashLSH"]
    lsh = MinHashLSH(threshold=0.5, num_perm=128)
    mhs = []
    for i, s in enumerate(sh):
        m = MinHash(num_perm=128, seed=1, hashfunc=lambda v: v)
        m.update_batch([int(v) & 0xFFFFFFFF for v in s] if len(s) else [0])
        mhs.append(m)
        lsh.insert(i, m)
    cand = set()
    for i, m in enumerate(mhs):
        for j in lsh.query(m):
            if j != i:
                cand.add((min(i, j), max(i, j)))
    jcache: dict[tuple[int, int], float] = {}

    def J(i, j):
        k = (min(i, j), max(i, j))
        if k not in jcache:
            jcache[k] = round(hash_jaccard(sh[k[0]], sh[k[1]]), 4)
        return jcache[k]

    idx_of = {id(p): i for i, p in enumerate(pages)}
    orig_idx = [idx_of[id(p["orig"]["page"])] if p["orig"] is not None else None for p in pages]
    true: dict[tuple[int, int], str] = {}
    for i, oi in enumerate(orig_idx):
        if oi is not None:
            true[(min(i, oi), max(i, oi))] = pages[i]["cause"]
    variants = defaultdict(list)
    for i, oi in enumerate(orig_idx):
        if oi is not None:
            variants[oi].append(i)
    sibling_pairs = set()
    for vs in variants.values():
        for a, c in combinations(sorted(vs), 2):
            sibling_pairs.add((a, c))
            if J(a, c) >= TRUE_J:
                true.setdefault((a, c), "sibling")
    ge05 = {k for k in cand if J(*k) >= DISTINCT_J}
    for k in ge05:
        if J(*k) >= TRUE_J:
            true.setdefault(k, "jaccard")
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, c in true:
        parent[find(a)] = find(c)
    members = defaultdict(list)
    for i in range(n):
        members[find(i)].append(i)
    amb: dict[tuple[int, int], str] = {}
    for ms in members.values():
        for a, c in combinations(sorted(ms), 2):
            if (a, c) not in true:
                amb[(a, c)] = "sibling" if (a, c) in sibling_pairs else "same_cluster"
    for k in sibling_pairs:
        if k not in true:
            amb.setdefault(k, "sibling")
    for k in ge05:
        if k not in true:
            amb.setdefault(k, "jaccard_0.5_0.9")
    cluster = [pages[min(members[find(i)])]["id"] for i in range(n)]
    recs = []
    for i, p in enumerate(pages):
        oi = orig_idx[i]
        recs.append(dict(
            id=p["id"], url=p["url"], lang=p["lang"], source=p["source"], cause=p["cause"],
            original=pages[oi]["id"] if oi is not None else None,
            jaccard_to_original=J(i, oi) if oi is not None else None, natural_identical=None,
            title=p["title"], title_key=title_key(p["title"]) or None, topic=p["topic"], xkey=None,
            template=p["template"], n_shingles=len(sh[i]), cluster=cluster[i],
            info=dict(p["info"])))
    ids = [p["id"] for p in pages]
    true_pairs = [[ids[a], ids[c], J(a, c), r] for (a, c), r in sorted(true.items())]
    amb_pairs = [[ids[a], ids[c], J(a, c), r] for (a, c), r in sorted(amb.items())]
    return dict(recs=recs, true_pairs=true_pairs, amb_pairs=amb_pairs, n_cand=len(cand), n_ge05=len(ge05))


def _bucket(j: float) -> str:
    return ">=0.9" if j >= 0.9 else "0.7-0.9" if j >= 0.7 else "0.5-0.7" if j >= 0.5 else "<0.5"


def write_set(b: dict, lab: dict, args) -> None:
    os.makedirs(args.out, exist_ok=True)
    pages, recs = b["pages"], lab["recs"]
    data = "".join(json.dumps({"url": p["url"], "html": p["html"]}, ensure_ascii=False) + "\n" for p in pages)
    with open(os.path.join(args.out, "pages.jsonl.gz"), "wb") as f:
        f.write(gzip.compress(data.encode("utf-8"), mtime=0))
    by_cl = Counter((r["cause"], r["lang"]) for r in recs)
    buckets = defaultdict(Counter)
    for r in recs:
        if r["cause"] != "original":
            buckets[r["cause"]][_bucket(r["jaccard_to_original"])] += 1
    stats = dict(
        n_pages=len(recs),
        by_cause_lang={f"{c}/{lg}": by_cl[(c, lg)] for c in CAUSES for lg in LANGS if by_cl[(c, lg)]},
        originals_by_collection=dict(Counter(r["source"] for r in recs if r["cause"] == "original")),
        skipped_too_little_text=dict(b["skipped"]), hosts=len(b["hosts"]), thin_groups=b["thin_groups"],
        insert_rejects=dict(sorted(b["rejects"].items())),
        thin_pages=sum(1 for r in recs if r["source"] == "thin"),
        true_pairs=len(lab["true_pairs"]), true_by_relation=dict(Counter(x[3] for x in lab["true_pairs"])),
        ambiguous_pairs=len(lab["amb_pairs"]), ambiguous_by_reason=dict(Counter(x[3] for x in lab["amb_pairs"])),
        jaccard_buckets={c: dict(v) for c, v in buckets.items()})
    truth = dict(set="realweb", version=FORMAT, seed=args.seed, pages=recs, true_pairs=lab["true_pairs"],
                 ambiguous_pairs=lab["amb_pairs"], stats=stats,
                 rules=dict(extractor="lxml body text minus script/style/noscript/template/head/iframe, NFKC, "
                                      "lower-case", en_shingle="word 3-shingles of the non-CJK text (every page)",
                            zh_shingle="character 4-grams of the CJK characters (every page; whitespace and "
                                       "punctuation removed)",
                            true_j=TRUE_J, distinct_j=DISTINCT_J),
                 lsh_audit=dict(lsh_candidates=lab["n_cand"], pairs_ge_0_5_found=lab["n_ge05"]),
                 sources={k: getattr(args, k) for k in DEFAULTS},
                 templates=sorted({r["template"] for r in recs}), mirror_sites=[])
    with open(os.path.join(args.out, "truth.json.gz"), "wb") as f:
        f.write(gzip.compress(json.dumps(truth, ensure_ascii=False, sort_keys=True).encode("utf-8"), mtime=0))
    langs = [lg for lg in LANGS if any(by_cl[(c, lg)] for c in CAUSES)]
    lines = ["# Near-duplicate web-page development set: realweb (built, not committed)", "",
             f"Built by `benchmarks/accuracy/realweb.py` (seed {args.seed}, format {FORMAT}) from real pages on disk: "
             + ", ".join(f"{k} `{getattr(args, k)}`" for k in DEFAULTS) + ". The page text is theirs; do not "
             "commit or redistribute this directory. Score: `NEARDUP_PUBLIC=<this dir> python "
             "/work/shared/eval/score.py --set public --system ...`. Labels: the public set's rules "
             "(`rules` in truth.json.gz).", "",
             f"## Size by cause and language ({len(recs)} pages)",
             "| cause | " + " | ".join(langs) + " |", "| --- |" + " --- |" * len(langs)]
    for c in CAUSES:
        lines.append(f"| {c} | " + " | ".join(str(by_cl[(c, lg)]) for lg in langs) + " |")
    lines += ["", f"Originals by collection: {stats['originals_by_collection']} (thin siblings: "
              f"{stats['thin_pages']} pages in {stats['thin_groups']} groups, cause `original`, source `thin`). "
              f"Skipped for too little visible text: {dict(b['skipped'])}. Host chromes: {len(b['hosts'])}.", "",
              "Every syndication page and thin sibling is checked after it is built: the inserted text at least "
              f"{ARTICLE_PRESENT:.0%} present in the page's visible text (the labels' function, and without what a "
              f"browser hides), the host's own main text under {HOST_PRESENT:.0%}; a page that fails is dropped and "
              "another host tried. Host pages are probed the same way first. Rejected: "
              + (", ".join(f"{k} {v}" for k, v in sorted(b["rejects"].items())) or "none") + ".", "",
              f"True pairs: {stats['true_pairs']} {stats['true_by_relation']}; ambiguous pairs: "
              f"{stats['ambiguous_pairs']} {stats['ambiguous_by_reason']}. LSH candidates {lab['n_cand']}, "
              f"pairs with J >= 0.5 among them {lab['n_ge05']}.", "",
              "Variants by exact Jaccard to their original:", "",
              "| cause | >=0.9 | 0.7-0.9 | 0.5-0.7 | <0.5 |", "| --- | --- | --- | --- | --- |"]
    for c in CAUSES[1:]:
        v = buckets[c]
        lines.append(f"| {c} | " + " | ".join(str(v[k]) for k in (">=0.9", "0.7-0.9", "0.5-0.7", "<0.5")) + " |")
    lines += ["", "score.py's own per-cause table knows only original/ads/counter/edit of these causes and en/zh of "
              "these languages: `python -m benchmarks.accuracy.realweb --report OUTPUT` gives every cause and "
              "language."]
    with open(os.path.join(args.out, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


# ------------------------------------------------------------------ report of a system's output on the set
def report(args) -> None:
    with gzip.open(os.path.join(args.out, "truth.json.gz"), "rt", encoding="utf-8") as f:
        truth = json.load(f)
    pages = truth["pages"]
    rows = [json.loads(x) for x in _read(args.report).decode("utf-8").splitlines() if x.strip()]
    if len(rows) != len(pages):
        raise SystemExit(f"realweb: {len(rows)} output lines, {len(pages)} pages")
    idx = {p["id"]: i for i, p in enumerate(pages)}
    pos = {p["url"]: i for i, p in enumerate(pages)}
    tr, am = defaultdict(set), defaultdict(set)
    for a, c, _j, _r in truth["true_pairs"]:
        tr[idx[a]].add(idx[c])
        tr[idx[c]].add(idx[a])
    for a, c, _j, _r in truth["ambiguous_pairs"]:
        am[idx[a]].add(idx[c])
        am[idx[c]].add(idx[a])
    n = len(pages)
    positive = [any(j < i for j in tr[i]) for i in range(n)]
    verdict = []
    for i, r in enumerate(rows):
        d = r.get("duplicate_of")
        j = pos.get(d) if d is not None else None
        verdict.append(None if d is None else "fp" if j is None or j >= i else "tp" if j in tr[i] else
                       "amb" if j in am[i] else "fp")

    def cat(p):
        return "thin" if p["source"] == "thin" else p["cause"]

    def agg(sel):
        tp = sum(verdict[i] == "tp" for i in sel)
        fp = sum(verdict[i] == "fp" for i in sel)
        ps = sum(positive[i] for i in sel)
        hit = sum(positive[i] and verdict[i] == "tp" for i in sel)
        pr = tp / (tp + fp) if tp + fp else None
        rc = hit / ps if ps else None
        f1 = 2 * pr * rc / (pr + rc) if pr and rc else None
        return len(sel), ps, tp, fp, pr, rc, f1

    def pct(x):
        return "-" if x is None else f"{100 * x:.1f}"

    print("| group | pages | positives | tp | fp | precision | recall | F1 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    groups = [("all", list(range(n)))]
    groups += [(f"cause:{c}", [i for i in range(n) if cat(pages[i]) == c]) for c in (*CAUSES, "thin")]
    groups += [(f"lang:{lg}", [i for i in range(n) if pages[i]["lang"] == lg]) for lg in LANGS]
    for name, sel in groups:
        if sel:
            a = agg(sel)
            print(f"| {name} | {a[0]} | {a[1]} | {a[2]} | {a[3]} | {pct(a[4])} | {pct(a[5])} | {pct(a[6])} |")
    print("\nrecall by cause x language:")
    for c in CAUSES[1:]:
        cells = []
        for lg in LANGS:
            sel = [i for i in range(n) if pages[i]["cause"] == c and pages[i]["lang"] == lg]
            if sel:
                a = agg(sel)
                cells.append(f"{lg} {pct(a[5])} ({a[1]})")
        print(f"  {c}: " + ", ".join(cells))
    print("lenient recall by cause x language (a flag to the original or to an ambiguous partner counts):")
    for c in CAUSES[1:]:
        cells = []
        for lg in LANGS:
            sel = [i for i in range(n) if pages[i]["cause"] == c and pages[i]["lang"] == lg and positive[i]]
            if sel:
                cells.append(f"{lg} {pct(sum(verdict[i] in ('tp', 'amb') for i in sel) / len(sel))} ({len(sel)})")
        print(f"  {c}: " + ", ".join(cells))
    unfp = [i for i, r in enumerate(rows) if r.get("fingerprint") is None]
    print(f"\nunfingerprinted pages: {len(unfp)} "
          f"({Counter((cat(pages[i]), rows[i].get('status')) for i in unfp).most_common()})")
    misses = [i for i in range(n) if positive[i] and verdict[i] != "tp"]
    print(f"misses: {len(misses)} by cause {Counter(cat(pages[i]) for i in misses).most_common()}")
    print(f"  of them unfingerprinted themselves: {sum(rows[i].get('fingerprint') is None for i in misses)}; "
          f"flagged to an ambiguous partner: {sum(verdict[i] == 'amb' for i in misses)}")
    fps = [i for i in range(n) if verdict[i] == "fp"]
    kinds = Counter()
    for i in fps:
        j = pos.get(rows[i]["duplicate_of"])
        same = "same_template" if j is not None and pages[j]["template"] == pages[i]["template"] else "other_template"
        kinds[(cat(pages[i]), cat(pages[j]) if j is not None else "?", same)] += 1
    print(f"false positives: {len(fps)} (flagged page, named page, template): {kinds.most_common()}")
    if args.examples:
        for label, sel in (("miss", misses), ("fp", fps)):
            for i in sel[:args.examples]:
                p = pages[i]
                d = rows[i].get("duplicate_of")
                print(f"  {label} {p['id']} {cat(p)}/{p['lang']} J_orig={p['jaccard_to_original']} "
                      f"orig={p['original']} flagged={d} info={json.dumps(p['info'], ensure_ascii=False)[:160]} "
                      f"url={p['url'][:90]}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for k, v in DEFAULTS.items():
        ap.add_argument(f"--{k}", default=v, help=f"source directory (default {v})")
    ap.add_argument("--out", default="out/realweb", help="set directory to write (default out/realweb)")
    ap.add_argument("--seed", type=int, default=20250612)
    ap.add_argument("--hosts", type=int, default=45, help="host chromes for syndication (one per site at most)")
    ap.add_argument("--second-host", type=float, default=0.35, help="share of articles syndicated twice")
    ap.add_argument("--proxy", type=float, default=0.35)
    ap.add_argument("--ads", type=float, default=0.35)
    ap.add_argument("--counter", type=float, default=0.35)
    ap.add_argument("--edit", type=float, default=0.5)
    ap.add_argument("--thin-groups", type=int, default=8)
    ap.add_argument("--sites-of", type=int, default=1, help="split the source sites into this many seeded parts ...")
    ap.add_argument("--sites-from", type=int, default=0, help="... and build from this one (0-based)")
    ap.add_argument("--split-seed", type=int, default=37, help="seed of the split by site (default 37)")
    ap.add_argument("--before", type=float, default=0.06, help="share of variants placed before their original")
    ap.add_argument("--report", metavar="OUTPUT", help="instead of building: break a system's output on the set "
                                                       "(--out) down by cause and language; misses, false positives")
    ap.add_argument("--examples", type=int, default=0, help="with --report: print this many misses and FPs")
    args = ap.parse_args(argv)
    if args.report:
        report(args)
        return
    b = build(args)
    lab = order_and_label(b, args)
    write_set(b, lab, args)
    print(f"realweb: {len(lab['recs'])} pages, {len(lab['true_pairs'])} true pairs, {len(lab['amb_pairs'])} "
          f"ambiguous -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
