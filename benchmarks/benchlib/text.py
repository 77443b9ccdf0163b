"""The benchmarks' ground-truth text rules and language guessers, in one module.

The default is the public set's rule: a page's visible text (:func:`visible_text`), its language
(:func:`language`), its shingles (English word 3-shingles, Chinese character 4-grams: :func:`shingles`) and the
Jaccard of two pages' shingles (:func:`jaccard`; near-identical from 0.9, distinct under 0.5).

The variants below are other rules, not copies: each one keeps the rule its caller's figures in the docs were
measured with, and its docstring's first line says why it differs.

- the real-web labels (``accuracy/realweb.py``, ``accuracy/docsweb.py``): :func:`label_text`,
  :func:`shingle_hashes`, :func:`hash_jaccard`, :func:`is_cjk`, :func:`language_by_stopwords`;
- main-text extraction's metric (``accuracy/bench_extract.py``): :func:`tokens`, :func:`block_text`;
- fixture pages by language (``benchlib.data.pages_by_language``: ``bench_fingerprint``, ``golden``):
  :func:`html_language`;
- text kinds to time (``speed/bench_text_kinds.py``): :func:`has_ideograph`.
"""

from __future__ import annotations

import copy
import re
import unicodedata
from collections import Counter

import lxml.html
import numpy as np
import xxhash
from lxml import etree

#: Two pages whose shingles' Jaccard is at least this are near-identical.
NEAR_IDENTICAL = 0.9
#: The public set's rule: two pages with a Jaccard under this (and no chain of true pairs) are distinct; from
#: it up to NEAR_IDENTICAL, ambiguous.
DISTINCT = 0.5
#: Elements whose text a browser does not show.
INVISIBLE = ("script", "style", "noscript", "template", "iframe")
#: A CJK ideograph.
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

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
    """The public set's language: ``zh`` when CJK ideographs are at least a quarter of the text's non-space
    characters, else ``en``."""
    letters = sum(1 for c in text if not c.isspace())
    return "zh" if letters and len(CJK.findall(text)) >= 0.25 * letters else "en"


def shingles(text: str, lang: str) -> frozenset[str]:
    """English: word 3-shingles; Chinese: character 4-grams without spaces and punctuation."""
    if lang == "zh":
        chars = re.sub(r"[\W_]+", "", text)
        return frozenset(chars[i : i + 4] for i in range(max(1, len(chars) - 3)))
    words = re.findall(r"\w+", text)
    return frozenset(" ".join(words[i : i + 3]) for i in range(max(1, len(words) - 2)))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """``|a & b| / |a | b|`` (1 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 1.0


# --- the real-web labels' rules (accuracy/realweb.py, accuracy/docsweb.py) ---------------------------------

#: Elements whose text :func:`label_text` drops: :data:`INVISIBLE` and the head.
LABEL_DROP = (*INVISIBLE, "head")
#: The languages :func:`language_by_stopwords` tells apart (``other``: none of them).
LANGS = ("en", "zh", "de", "fr", "other")
#: A few of each language's most common words.
STOP = {
    "en": "the and of to is in that for with was on are as it this by be from have not".split(),
    "de": "der die und das ist nicht mit den von zu sich auf ein eine dem des auch für wird".split(),
    "fr": "le la les et des est une dans pour que du qui pas sur au avec par ce il".split(),
    "es": "el los las y del por una con para que es se lo como más pero sus".split(),
}


def parse_page(html: str) -> lxml.html.HtmlElement | None:
    """A decoded page's tree as lxml parses a ``str`` (None when it cannot)."""
    try:
        return lxml.html.document_fromstring(html)
    except (etree.ParserError, ValueError):
        return None


def label_text(html: str) -> str:
    """The real-web labels' visible text: of a decoded ``str``, the head dropped too, whitespace as in the page.

    Every text node outside :data:`LABEL_DROP`, comments and processing instructions emptied, NFKC,
    lower-case.  The labels of the real-web and documentation sets were computed with it."""
    root = parse_page(html)
    if root is None:
        return ""
    root = copy.deepcopy(root)
    for el in list(root.iter(*LABEL_DROP)):
        if el.getparent() is not None:
            el.drop_tree()
    for el in root.iter(etree.Comment, etree.ProcessingInstruction):
        el.text = ""
    parts = [t for t in root.itertext() if isinstance(t, str)]
    return unicodedata.normalize("NFKC", " ".join(parts)).lower()


def is_cjk(ch: str) -> bool:
    """The real-web labels' CJK character: an ideograph or kana (the public set's :data:`CJK` has no kana).

    The characters of :data:`CJK_CHAR`, compared by code point: it runs on every character of a page."""
    o = ord(ch)
    return 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0xF900 <= o <= 0xFAFF or 0x3040 <= o <= 0x30FF


def shingle_hashes(text: str, cjk: bool = False) -> np.ndarray:
    """The real-web labels' shingles: one rule for every language, hashed (xxh64) for sets of millions of pages.

    The sorted unique 64-bit hashes of the text's shingles: character 4-grams of its CJK characters (whitespace
    and punctuation removed) and word 3-shingles of the rest.  One rule for every page, so that two pages of
    different languages (a Chinese article in an English site's chrome) are compared on the same shingles; a
    Chinese page gets character 4-grams, an English one word 3-shingles.  ``cjk`` is kept for callers (unused)."""
    chars = "".join(ch for ch in text if is_cjk(ch))
    grams = ["\x00" + chars[i:i + 4] for i in range(max(0, len(chars) - 3))] or (["\x00" + chars] if chars else [])
    words = re.findall(r"\w+", "".join(" " if is_cjk(ch) else ch for ch in text))
    wgrams = [" ".join(words[i:i + 3]) for i in range(max(0, len(words) - 2))]
    grams += wgrams or ([" ".join(words)] if words else [])
    hashes = (xxhash.xxh64_intdigest(g.encode("utf-8", "surrogatepass")) for g in grams)
    return np.unique(np.fromiter(hashes, dtype=np.uint64, count=len(grams)))


def hash_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """The Jaccard of two sets of :func:`shingle_hashes` (sorted unique arrays; 1 for two empty sets)."""
    if not len(a) and not len(b):
        return 1.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)


def language_by_stopwords(text: str) -> tuple[str, bool]:
    """The real-web labels' language: also German and French (by stopwords), and Japanese apart (by kana).

    Returns (lang, cjk shingling): en/zh/de/fr by script and stopwords, else other."""
    han = sum(1 for ch in text if 0x4E00 <= ord(ch) <= 0x9FFF)
    kana = sum(1 for ch in text if 0x3040 <= ord(ch) <= 0x30FF)
    letters = sum(1 for ch in text if ch.isalpha())
    # a CJK character is about a word: Chinese beside its pinyin, or in an English menu, is still Chinese
    latin_words = len(re.findall(r"[a-zA-Z\u00c0-\u024f]+", text))
    if letters and ((han + kana) >= 0.25 * letters or (han + kana >= 50 and han + kana >= 0.5 * latin_words)):
        return ("other" if kana >= 0.1 * (han + kana) else "zh"), True
    words = Counter(re.findall(r"[^\W\d_]+", text))
    scores = {lg: sum(words[w] for w in ws) for lg, ws in STOP.items()}
    best = max(scores, key=lambda k: scores[k])
    if scores[best] < 5:
        return "other", False
    return (best if best in LANGS else "other"), False


# --- main-text extraction's metric (accuracy/bench_extract.py) ---------------------------------------------

_KANA_AND_IDEOGRAPHS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # one token a character
TOKEN = re.compile(rf"[{_KANA_AND_IDEOGRAPHS}]|[^\W_{_KANA_AND_IDEOGRAPHS}]+")
#: A CJK ideograph or kana (a token of its own).
CJK_CHAR = re.compile(rf"[{_KANA_AND_IDEOGRAPHS}]")
#: Elements that break words in :func:`block_text`.
BLOCK_TAGS = frozenset(
    "address article aside blockquote body br dd details div dl dt figcaption figure footer form h1 h2 h3 h4 h5 h6 "
    "header hr li main nav ol p pre section summary table tbody td tfoot th thead tr ul caption".split()
)
#: Elements whose text extraction's rules skip (:func:`block_text`; iframes kept: the references keep their text).
EXTRACT_INVISIBLE = frozenset(("script", "style", "noscript", "template"))


def tokens(text: str) -> list[str]:
    """Extraction's tokens, a bag not shingles (order-free, as the extraction benchmark's AEB metric counts).

    Word tokens of ``text``: NFKC, lower-case; a CJK ideograph or kana alone, else a run of letters and digits."""
    return TOKEN.findall(unicodedata.normalize("NFKC", text).lower())


def block_text(html: str | bytes) -> str:
    """Extraction's reference text: block elements and ``<br>`` break words (an extractor's HTML output, read
    as a reader sees it; :func:`visible_text` joins text nodes without knowing blocks).

    The text of an HTML document or fragment, scripts dropped, one space apart."""
    data = html.encode("utf-8") if isinstance(html, str) else html
    if not data.strip():
        return ""
    try:
        root = lxml.html.document_fromstring(data, parser=lxml.html.HTMLParser(encoding="utf-8"))
    except (etree.ParserError, ValueError):
        return ""
    out: list[str] = []
    skip = 0
    for event, el in etree.iterwalk(root, events=("start", "end")):
        tag = el.tag if isinstance(el.tag, str) else ""
        if event == "start":
            if tag in EXTRACT_INVISIBLE:
                skip += 1
            elif not skip:
                if tag in BLOCK_TAGS:
                    out.append(" ")
                if tag and el.text:
                    out.append(el.text)
        else:
            if tag in EXTRACT_INVISIBLE:
                skip -= 1
            elif not skip and tag in BLOCK_TAGS:
                out.append(" ")
            if not skip and el.tail:
                out.append(el.tail)
    return " ".join("".join(out).split())


# --- fixture pages by language, and text kinds ---------------------------------------------------------------

_TAG = re.compile(r"<script.*?</script>|<style.*?</style>|<[^>]*>", re.S | re.I)


def html_language(html: str) -> str:
    """The fixture pages' language, from raw HTML without parsing it (a tenth of CJK, where a page's Chinese text
    may sit in English chrome): ``zh`` when CJK ideographs are at least 10% of the visible non-space characters,
    else ``en``."""
    text = "".join(_TAG.sub(" ", html).split())
    return "zh" if text and len(CJK.findall(text)) >= 0.1 * len(text) else "en"


def has_ideograph(page: str) -> bool:
    """The text kinds' split, not a language guess: any CJK ideograph in the raw HTML puts a page among the
    ``public-chinese`` pages that ``bench_text_kinds`` times apart (the docs' figures were measured so)."""
    return CJK.search(page) is not None
