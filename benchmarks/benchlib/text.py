"""Ground truth by the public set's rule: a page's visible text, its shingles (English word 3-shingles, Chinese
character 4-grams), and the Jaccard of two pages' shingles (near-identical from 0.9, distinct under 0.5)."""

from __future__ import annotations

import re
import unicodedata

import lxml.html
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
    """``zh`` when CJK ideographs are at least a quarter of the text's non-space characters, else ``en``."""
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
