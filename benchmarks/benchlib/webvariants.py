"""Near-duplicate variants of a real page (:class:`benchlib.webpages.Source`), every added word written here:
syndication into another site's chrome, web-archive, search-cache and translation-proxy snapshots, ads, visit
counters and session ids, word, character and sentence edits, and thin siblings in one host's chrome.  Used by the
real-web and documentation set builders (``benchmarks/accuracy/realweb.py``, ``benchmarks/accuracy/docsweb.py``)."""

from __future__ import annotations

import random
import re
from collections import Counter
from urllib.parse import quote, urljoin, urlsplit

import lxml.html
from lxml import etree

from benchmarks.benchlib.text import (
    LABEL_DROP,
    parse_page,
)
from benchmarks.benchlib.webpages import (
    Source,
    esc,
    is_shown,
    locate_main,
    norm_text,
    site_of_url,
    title_of,
)

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


def parse_fragment(html: str):
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


def serialize(root) -> str:
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


def empty_main(root, main, host_text: str, title: str) -> None:
    """Empty the host's main block; its headline outside the block (an h1 whose text is the host's title or in
    its main text) becomes ``title``."""
    for c in list(main):
        main.remove(c)
    main.text = None
    own = norm_text(host_text)
    t = root.find(".//title")
    own_title = norm_text(t.text_content() or "") if t is not None else ""
    for h in root.iter("h1"):
        if main in h.iterancestors() or not is_shown(h):
            continue
        ht = norm_text(h.text_content() or "")
        if ht and (ht in own_title or ht in own):
            for c in list(h):
                h.remove(c)
            h.text = title


def make_syndication(rng, article: Source, host: Source, credit: bool):
    root, main, host_text = host_main(host)
    if main is None:
        return None
    title = article.article_title or title_of(parse_page(article.html))
    empty_main(root, main, host_text, title)
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
        p.text = (f"This article originally appeared on {site_of_url(article.url)} and is republished here "
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
    return serialize(root), title


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
               f'value="{esc(url)}"><button>Go</button></form><p>Snapshot of {esc(url)} captured {n} times '
               f"between {y - rng.randint(1, 6)} and {y}. This capture: {y}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:"
               f'{s:02d} UTC.</p><a href="{base}{esc(url)}">Previous capture</a> <a href="{base}{esc(url)}">'
               f'Next capture</a> <a href="https://webarchive.example/about">About this archive</a></div>')
    elif style == "cache":
        base = "https://cache.search-cache.example/cache?u="
        new_url = base + quote(url, safe="")
        bar = (f'<div id="cache-banner"><p>This is the search cache of <a href="{esc(url)}">{esc(url)}</a>. '
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
               f'<button>Translate</button></form><a href="{esc(url)}">View original page</a> '
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
    body.insert(0, parse_fragment(bar))
    return serialize(root), new_url, {"proxy_style": style}


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
        (target.addprevious if rng.random() < 0.5 else target.addnext)(parse_fragment(ad))
    return serialize(root), {"ad_kinds": kinds}


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
        div = parse_fragment(f'<div class="page-stats">{" | ".join(esc(b) for b in bits)}</div>')
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
        form = parse_fragment('<form method="post" action="/login">'
                              f'<input type="hidden" name="csrf" value="{_hex(rng, 32)}"></form>')
        body.append(form)
        query = "sid=" + sid
    else:
        query = f"t={rng.randint(1_500_000_000, 1_750_000_000)}"
    url = src.url + ("&" if "?" in src.url else "?") + query
    return serialize(root), url, {"counter_kinds": kinds}


EDIT_LEVELS = ["words", "1pct", "2pct", "4pct", "7pct", "10pct", "sentence"]
_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")


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
        cands = [s for s in slots if len([x for x in SENTENCE_END.split(get(s)) if x.strip()]) >= 2]
        if cands:
            s = rng.choice(cands)
            sents = [x for x in SENTENCE_END.split(get(s)) if x.strip()]
            sents.pop(rng.randrange(len(sents)))
            put(s, ("" if cjk else " ").join(sents))
            ops["sentence-delete"] += 1
        return serialize(root), {"edit_level": level, "edit_ops": sum(ops.values()), "ops": dict(ops)}
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
    return serialize(root), {"edit_level": level, "edit_ops": sum(ops.values()), "ops": dict(ops)}


def edited_url(rng, url: str) -> str:
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
    empty_main(root, main, host_text, title)
    main.append(parse_fragment(f"<h1>{esc(title)}</h1>"))
    main.append(parse_fragment(f"<p>{esc(sentence)}</p>"))
    main.append(parse_fragment('<div class="section-note">' + "".join(f"<p>{esc(s)}</p>" for s in note) + "</div>"))
    t = root.find(".//title")
    if t is not None:
        for c in list(t):
            t.remove(c)
        t.text = page_title or title
    return serialize(root)
