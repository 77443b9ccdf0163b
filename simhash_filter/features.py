"""Weighted features of a page: TF-IDF words weighted by where they stand, and decayed DOM structure.

Text is NFKC-normalised and case-folded; Latin-script (and any non-CJK) words are runs of letters and
digits; runs of CJK ideographs are segmented into words with jieba.  A word enters the fingerprint as
the character n-grams of ``<word>`` (``char_ngram``), its weight shared among them, so that a typo or
a spelling variant (colour/color) changes a few features instead of a whole word.  A feature's weight is
``idf ** idf_power * sublinear(tf)``, where each occurrence adds the weight of its place in the page
(main content, other text, boilerplate; see :mod:`simhash_filter.extract`) to tf; n-grams of several
words take the mean IDF of their words.  Words with digits (counters, dates, session ids, versions)
count ``DIGIT_WEIGHT`` of a word, so that numbers that change between fetches move the fingerprint
little.  Structure features get ``structure_weight`` of the vote (see :func:`page_features`).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

from simhash_filter.config import FingerprintConfig
from simhash_filter.extract import PageText
from simhash_filter.segment import CJK_RUN, segment_run
from simhash_filter.weights import chinese_idf, english_idf

#: Words: a CJK run (segmented later) or a run of other letters/digits.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
WORD = re.compile(f"[{_CJK}]+|[^\\W_{_CJK}]+")
HAS_DIGIT = re.compile(r"\d")
DIGIT_WEIGHT = 0.1
#: IDF given to words found in no table (typos, identifiers, random strings).
UNKNOWN_IDF = 12.0


@dataclass(frozen=True, slots=True)
class Features:
    """Distinct features of a page and their weights (text and structure apart, for explanations)."""

    text: dict[str, float]
    structure: dict[str, float]
    truncated: bool = False

    def __len__(self) -> int:
        return len(self.text) + len(self.structure)


def tokenize(text: str, max_tokens: int) -> list[str]:
    """Normalised words of ``text`` (CJK runs segmented with jieba), at most ``max_tokens``."""
    text = unicodedata.normalize("NFKC", text).casefold()
    words = WORD.findall(text)
    if CJK_RUN.search(text) is None:
        return words[:max_tokens]
    out: list[str] = []
    for w in words:
        if is_cjk(w[0]):
            out.extend(segment_run(w))
        else:
            out.append(w)
        if len(out) >= max_tokens:
            break
    return out[:max_tokens]


def is_cjk(c: str) -> bool:
    """Whether the character is a CJK ideograph."""
    return "\u3400" <= c <= "\u9fff" or "\uf900" <= c <= "\ufaff"


def _idf(word: str, en: dict[str, float], zh: dict[str, float], zh_default: float) -> float:
    if is_cjk(word[0]):
        return zh.get(word, zh_default)
    return en.get(word, UNKNOWN_IDF)


def _sublinear(w: float) -> float:
    return w if w <= 1.0 else 1.0 + math.log(w)


def text_features(page: PageText, config: FingerprintConfig) -> dict[str, float]:
    """TF-IDF weight of each distinct word (and word n-gram) of the page, by role."""
    en = english_idf()
    zh, zh_default = chinese_idf()
    tf: dict[str, float] = {}
    budget = config.max_tokens
    for rw, text in page.texts:
        if budget <= 0:
            break
        words = tokenize(text, budget)
        budget -= len(words)
        for n in config.ngrams:
            if n == 1:
                grams = Counter(words)
            else:
                grams = Counter(" ".join(g) for g in zip(*(words[i:] for i in range(n)), strict=False))
            for g, c in grams.items():
                tf[g] = tf.get(g, 0.0) + rw * c
    power = config.idf_power
    out: dict[str, float] = {}
    for g, w in tf.items():
        idf = _IDF_CACHE.get(g)
        if idf is None:
            parts = g.split(" ")
            idf = sum(_idf(p, en, zh, zh_default) for p in parts) / len(parts)
            if HAS_DIGIT.search(g):
                idf *= DIGIT_WEIGHT
            if len(_IDF_CACHE) < 500_000:
                _IDF_CACHE[g] = idf
        out[g] = idf**power * _sublinear(w)
    return out


_IDF_CACHE: dict[str, float] = {}


def char_grams(word: str, n: int) -> list[str]:
    """Character n-grams of ``<word>`` (the whole padded word when it is shorter than n)."""
    padded = f"<{word}>"
    if n == 0 or len(padded) <= n:
        return [padded]
    return [padded[i : i + n] for i in range(len(padded) - n + 1)]


def gram_count(word: str, n: int) -> int:
    """How many features :func:`char_grams` makes of ``word``."""
    return len(word) + 3 - n if n and len(word) + 2 > n else 1


def gram_size(feature: str, config: FingerprintConfig) -> int:
    """Character n-gram size for a text feature: Chinese or other words; word n-grams stay whole (0)."""
    if " " in feature:
        return 0
    return config.cjk_char_ngram if is_cjk(feature[0]) else config.char_ngram


def page_features(page: PageText, config: FingerprintConfig) -> Features:
    """All weighted features of an extracted page, structure scaled to ``structure_weight`` of the vote.

    A simhash bit is the sign of a sum of +-weights: how much a group of features sways it grows with
    the root of the sum of its squared weights, not with its total weight.  The structure (a few heavy
    features) is therefore scaled against the text (many light character n-grams) in that measure.
    """
    text = text_features(page, config)
    structure: dict[str, float] = {}
    sw = config.structure_weight
    if sw > 0 and page.structure:
        s_norm = math.sqrt(sum(v * v for v in page.structure.values()))
        t_norm = math.sqrt(sum(w * w / gram_count(g, gram_size(g, config)) for g, w in text.items()))
        # with no text at all, structure is all there is
        scale = sw / (1 - sw) * t_norm / s_norm if t_norm > 0 and sw < 1 else 1.0 / s_norm
        structure = {k: v * scale for k, v in page.structure.items()}
    if sw >= 1:
        text = {}
    return Features(text=text, structure=structure, truncated=page.truncated)
