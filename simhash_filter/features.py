"""Weighted features of a page: TF-IDF text n-grams weighted by role, and decayed DOM structure.

Text is NFKC-normalised and case-folded; Latin-script (and any non-CJK) words are runs of letters and
digits; runs of CJK ideographs are segmented into words with jieba.  A feature's weight is
``idf * role weight * tf`` with sublinear tf (``1 + ln tf``); n-grams of several words take the mean IDF
of their words.  Words with digits (counters, dates, session ids, versions) count ``DIGIT_WEIGHT`` of
a word, so that numbers that change between fetches move the fingerprint little.  Structure features
get ``structure_weight`` of the total weight.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from simhash_filter.config import FingerprintConfig
from simhash_filter.extract import PageText
from simhash_filter.segment import CJK_RUN, segment_run
from simhash_filter.weights import chinese_idf, english_idf

#: Words: a CJK run (segmented later) or a run of other letters/digits.
WORD = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+|[^\W_\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
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
        if "\u3400" <= w[0] <= "\u9fff" or "\uf900" <= w[0] <= "\ufaff":
            out.extend(segment_run(w))
        else:
            out.append(w)
        if len(out) >= max_tokens:
            break
    return out[:max_tokens]


def _idf(word: str, en: dict[str, float], zh: dict[str, float], zh_default: float) -> float:
    c = word[0]
    if "\u3400" <= c <= "\u9fff" or "\uf900" <= c <= "\ufaff":
        return zh.get(word, zh_default)
    return en.get(word, UNKNOWN_IDF)


def _sublinear(w: float) -> float:
    return w if w <= 1.0 else 1.0 + math.log(w)


def text_features(page: PageText, config: FingerprintConfig) -> dict[str, float]:
    """TF-IDF weights of the page's words and word n-grams, by role."""
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
                grams = Counter(" ".join(g) for g in zip(*(words[i:] for i in range(n))))
            for g, c in grams.items():
                tf[g] = tf.get(g, 0.0) + rw * c
    out: dict[str, float] = {}
    for g, w in tf.items():
        parts = g.split(" ")
        idf = (sum(_idf(p, en, zh, zh_default) for p in parts) / len(parts)) ** config.idf_power
        if HAS_DIGIT.search(g):
            idf *= DIGIT_WEIGHT
        weight = idf * _sublinear(w)
        if config.char_ngram and len(parts) == 1:
            grams = _char_grams(g, config.char_ngram)
            share = weight / len(grams)
            for cg in grams:
                out[cg] = out.get(cg, 0.0) + share
        else:
            out[g] = out.get(g, 0.0) + weight
    return out


@lru_cache(maxsize=100_000)
def _char_grams(word: str, n: int) -> tuple[str, ...]:
    padded = f"<{word}>"
    if len(padded) <= n:
        return (padded,)
    return tuple(padded[i : i + n] for i in range(len(padded) - n + 1))


def page_features(page: PageText, config: FingerprintConfig) -> Features:
    """All weighted features of an extracted page; structure scaled to ``structure_weight`` of the total."""
    text = text_features(page, config)
    structure: dict[str, float] = {}
    sw = config.structure_weight
    if sw > 0 and page.structure:
        s_total = sum(page.structure.values())
        t_total = sum(text.values())
        if t_total > 0 and sw < 1:
            scale = sw / (1 - sw) * t_total / s_total
        else:  # no text at all: structure is all there is
            scale = 1.0 / s_total
        structure = {k: v * scale for k, v in page.structure.items()}
    if sw >= 1:
        text = {}
    return Features(text=text, structure=structure, truncated=page.truncated)
