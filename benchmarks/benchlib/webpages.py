"""Real pages of public collections read from disk (never copied into the repository), each with its main block
located: Mozilla Readability's test pages, the Article Body Extraction benchmark, GNE's portal pages and
trafilatura's test cache, as :class:`Source` objects; the main block of any page found robustly (by its known main
text, else by where its paragraph prose is; never in a comment area, a sidebar or a hidden element), and the check
that a page built around an inserted article shows that article and not the host's own.  Used by the real-web and
documentation set builders (``benchmarks/accuracy/realweb.py``, ``benchmarks/accuracy/docsweb.py``)."""

from __future__ import annotations

import copy
import glob
import gzip
import json
import os
import re
import unicodedata
from urllib.parse import quote, urlsplit

import lxml.html
import numpy as np
from lxml import etree
from w3lib.encoding import html_to_unicode

from benchmarks.benchlib.text import (
    LABEL_DROP,
    is_cjk,
    label_text,
    parse_page,
    shingle_hashes,
)


# ------------------------------------------------------------------ reading the sources
def read_file(path: str) -> bytes:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read()


def decode_html(raw: bytes) -> str:
    return html_to_unicode(None, raw)[1]


def _meta_url(root) -> str | None:
    for xp in ('//link[@rel="canonical"]/@href', '//meta[@property="og:url"]/@content'):
        v = root.xpath(xp)
        if v and v[0].strip().startswith("http"):
            return v[0].strip()
    return None


def title_of(root) -> str:
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


def is_shown(el) -> bool:
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


def norm_text(s: str) -> str:
    """NFKC, lower-case, whitespace collapsed, soft hyphens and zero-width characters removed (an extractor's
    text and the page's text nodes compare equal)."""
    return re.sub(r"\s+", " ", _INVISIBLE_CHARS.sub("", unicodedata.normalize("NFKC", s))).strip().lower()


def _node_stats(root, known: str | None):
    """Per shown element: (characters of shown text, of them matching ``known``, of them paragraph prose)."""
    kstr = norm_text(known) if known else ""
    ksh = set(shingle_hashes(kstr).tolist()) if kstr else set()
    stats: dict = {}
    body = root.find("body")
    if body is None:
        return stats, body

    def score(s: str, in_p: bool, in_a: bool, side: bool):
        t = norm_text(s)
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
    ins = shingle_hashes(norm_text(inserted))
    page = shingle_hashes(norm_text(label_text(html)))
    for name, sh in (("visible", page), ("rendered", shingle_hashes(norm_text(rendered_text(html))))):
        if present(ins, sh) < ARTICLE_PRESENT:
            return f"article_not_{name}"
    if host_main and present(shingle_hashes(norm_text(host_main)), page) >= HOST_PRESENT:
        return "host_text_kept"
    return None


class Source:
    """One real page: url, html, site (template key), the article's content (HTML fragment), its title, and its
    main text as known (Readability's expected.html, AEB's articleBody) or extracted (trafilatura)."""

    def __init__(self, collection, key, site, url, html, content=None, article_title=None, main_text=None):
        self.collection, self.key, self.site, self.url, self.html = collection, key, site, url, html
        self.content, self.article_title = content, article_title
        self.main_text = main_text if main_text is not None else (label_text(content) if content else None)


def site_of_url(url: str) -> str:
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
        html = decode_html(read_file(path))
        root = parse_page(html)
        if root is None:
            continue
        url = _meta_url(root) or f"https://{name}.readability-test.example/"
        exp = os.path.join(os.path.dirname(path), "expected.html")
        content = read_file(exp).decode("utf-8") if os.path.exists(exp) else None
        meta = os.path.join(os.path.dirname(path), "expected-metadata.json")
        title = None
        if os.path.exists(meta):
            title = json.loads(read_file(meta)).get("title")
        family = re.sub(r"-\d+$", "", name)
        out.append(Source("readability", f"readability/{name}", f"readability:{family}", url, html, content, title))
    return out


def read_aeb(d: str) -> list[Source]:
    gt = json.loads(read_file(os.path.join(d, "ground-truth.json")))
    out = []
    for key in sorted(gt):
        path = os.path.join(d, "html", key + ".html.gz")
        if not os.path.exists(path):
            continue
        html = decode_html(read_file(path))
        body = gt[key].get("articleBody") or ""
        paras = [p.strip() for p in re.split(r"\n\s*\n|\n", body) if p.strip()]
        content = "<div>" + "".join(f"<p>{esc(p)}</p>" for p in paras) + "</div>" if paras else None
        url = gt[key].get("url") or f"https://aeb-{key[:12]}.example/"
        out.append(Source("aeb", f"aeb/{key[:16]}", f"aeb:{site_of_url(url)}", url, html, content,
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
        html = decode_html(read_file(path))
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
        html = decode_html(read_file(path))
        root = parse_page(html)
        if root is None:
            continue
        parts = name.split(".")
        # file names are <domain>.<slug>: the domain is the longest prefix that looks like a host name
        dom = ".".join(parts[:2]) if len(parts) > 1 else name
        url = _meta_url(root) or f"https://{dom}/{quote('.'.join(parts[2:]) or 'page')}"
        out.append(_located_source("trafilatura", f"trafilatura/{name}", f"trafilatura:{site_of_url(url) or dom}",
                                   url, html))
    return out


def esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
