"""Weighted features of a page: TF-IDF words weighted by where they stand, and decayed DOM structure.

A word (NFKC, case-folded; CJK runs segmented with jieba; British spellings as American ones) enters as the character
n-grams of ``<word>``, its weight shared among them.  A feature's weight is ``idf ** idf_power * sublinear(tf)``,
where each occurrence adds the weight of its place in the page (:mod:`simhash_filter.model.extract`) to tf; word
n-grams take the mean IDF of their words, and words with digits ``DIGIT_WEIGHT`` of it.  Why: docs/design.md.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from itertools import islice
from operator import mul, truediv

from simhash_filter.model.config import FingerprintConfig
from simhash_filter.model.core import compiled_text_features
from simhash_filter.model.extract import PageText
from simhash_filter.model.segment import CJK_RUN, MAX_CACHED_RUN, segment_run, segment_slices
from simhash_filter.model.spelling import american_words, spelling_memo
from simhash_filter.model.weights import chinese_table, english_table

#: Words: a CJK run (segmented later) or a run of other letters/digits.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
WORD = re.compile(f"[{_CJK}]+|[^\\W_{_CJK}]+")
_NON_CJK_WORD = re.compile(r"[^\W_]+")
#: ASCII to lower case, and every character that is not a letter or a digit to a space.
_ASCII_WORDS = str.maketrans({chr(c): chr(c).lower() if chr(c).isalnum() else " " for c in range(128)})
HAS_DIGIT = re.compile(r"\d")
DIGIT_WEIGHT = 0.1
#: IDF given to words found in no table (typos, identifiers, random strings): that of a fairly rare word.
UNKNOWN_IDF = 8.0


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
    if text.isascii():  # NFKC leaves ASCII alone and casefold is lower()
        return text.translate(_ASCII_WORDS).split()[:max_tokens]
    text = unicodedata.normalize("NFKC", text).casefold()
    if CJK_RUN.search(text) is None:
        return _NON_CJK_WORD.findall(text)[:max_tokens]
    words = WORD.findall(text)
    out: list[str] = []
    if len(text) <= max_tokens:  # no more words than characters: no cap to check
        append = out.append
        for w in words:
            if "\u3400" <= w[0] <= "\u9fff" or "\uf900" <= w[0] <= "\ufaff":  # is_cjk(w[0])
                out += segment_run(w)
            else:
                append(w)
        return out
    for w in words:
        if not is_cjk(w[0]):
            out.append(w)
        elif len(w) <= MAX_CACHED_RUN:
            out.extend(segment_run(w))
        else:  # a long run: slice by slice, as far as the cap needs
            for piece in segment_slices(w):
                out.extend(piece)
                if len(out) >= max_tokens:
                    break
        if len(out) >= max_tokens:
            break
    return out[:max_tokens]


def is_cjk(c: str) -> bool:
    """Whether the character is a CJK ideograph."""
    return "\u3400" <= c <= "\u9fff" or "\uf900" <= c <= "\ufaff"


def text_features(page: PageText, config: FingerprintConfig) -> dict[str, float]:
    """TF-IDF weight of each distinct word (and word n-gram) of the page, by role."""
    return _text_features(page, config)[0]


def _text_features(page: PageText, config: FingerprintConfig) -> tuple[dict[str, float], tuple[int, ...]]:
    """:func:`text_features`, and each feature's n-gram count."""
    if compiled_text_features is not None and config.ngrams == (1,):
        return compiled_text_features(  # type: ignore[no-any-return]
            page.texts,
            config.max_tokens,
            config.max_features,
            tokenize,
            spelling_memo(),
            american_words,
            _value_memo(config),
            lambda missing: word_values(missing, config),
        )
    tf: dict[str, float] = {}
    budget = config.max_tokens
    for rw, text in page.texts:
        if budget <= 0:
            break
        words = tokenize(text, budget)
        budget -= len(words)
        spelled = max(config.ngrams) > 1  # word n-grams need every word respelled
        if spelled:
            words = american_words(words)
        for n in config.ngrams:
            if n == 1:
                counts = Counter(words)
                if len(counts) > config.max_features:
                    counts = Counter(dict(islice(counts.items(), config.max_features)))
                grams = counts if spelled else _american_counts(counts)
            else:
                grams = Counter(" ".join(g) for g in zip(*(words[i:] for i in range(n)), strict=False))
            if not tf:
                tf = {g: 0.0 + rw * c for g, c in islice(grams.items(), config.max_features)}
                continue
            room = config.max_features - len(tf)
            for g, c in grams.items():
                if g in tf:
                    tf[g] += rw * c
                elif room > 0:
                    tf[g] = 0.0 + rw * c
                    room -= 1
    if not tf:
        return {}, ()
    powers, hashes = zip(*word_values(list(tf), config), strict=True)
    tfs = list(tf.values())
    log = math.log
    sublinear = {w: 1.0 + log(w) for w in set(tfs) if w > 1.0}
    return dict(zip(tf, map(mul, powers, map(sublinear.get, tfs, tfs)), strict=True)), hashes


def _american_counts(counts: Counter[str]) -> Counter[str]:
    """``counts`` with each word under its :func:`~simhash_filter.model.spelling.american` spelling."""
    words = list(counts)
    mapped = american_words(words)
    if mapped == words:
        return counts
    out: Counter[str] = Counter()
    for w, c in zip(mapped, counts.values(), strict=True):
        out[w] += c
    return out


def _value_memo(config: FingerprintConfig) -> dict[str, tuple[float, int]]:
    key = (config.idf_power, config.char_ngram, config.cjk_char_ngram)
    memo = _WORD_CACHE.get(key)
    if memo is None:
        memo = _WORD_CACHE[key] = {}
    return memo


def word_values(features: list[str], config: FingerprintConfig) -> list[tuple[float, int]]:
    """``(IDF ** idf_power, gram_count)`` of each text feature under ``config`` (memoised per word)."""
    memo = _value_memo(config)
    values = list(map(memo.get, features))
    if None in values:
        missing = [g for g, v in zip(features, values, strict=True) if v is None]
        power = config.idf_power
        fresh = {
            g: (idf**power, gram_count(g, gram_size(g, config)))
            for g, idf in zip(missing, gram_idfs(missing), strict=True)
        }
        if len(memo) + len(fresh) > MAX_CACHED_WORDS:
            memo.clear()
        memo.update(fresh)
        values = [fresh[g] if v is None else v for g, v in zip(features, values, strict=True)]
    return values  # type: ignore[return-value]  # every None was filled


def gram_idfs(grams: list[str]) -> list[float]:
    """IDF of each word or word n-gram (the mean over its words), a tenth of it with digits."""
    words = list(dict.fromkeys(p for g in grams for p in g.split(" "))) if any(" " in g for g in grams) else grams
    cjk = [w for w in words if is_cjk(w[0])]
    other = [w for w in words if not is_cjk(w[0])] if cjk else words
    word_idf = dict(zip(other, english_table().lookup(other, UNKNOWN_IDF), strict=True)) if other else {}
    if cjk:
        zh, zh_default = chinese_table()
        word_idf.update(zip(cjk, zh.lookup(cjk, zh_default), strict=True))
    out = []
    for g in grams:
        if " " in g:
            parts = g.split(" ")
            idf = sum(word_idf[p] for p in parts) / len(parts)
        else:
            idf = word_idf[g]
        if not g.isalpha() and HAS_DIGIT.search(g):
            idf *= DIGIT_WEIGHT
        out.append(idf)
    return out


#: (idf_power, char_ngram, cjk_char_ngram) -> word -> (IDF ** idf_power, gram_count).
_WORD_CACHE: dict[tuple[float, int, int], dict[str, tuple[float, int]]] = {}
#: Per-word memos are emptied when they grow past this many words.
MAX_CACHED_WORDS = 500_000


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
    """All weighted features of an extracted page, structure scaled to ``structure_weight`` of the vote, measured as
    the root of the sum of squared weights (docs/design.md)."""
    text, counts = _text_features(page, config)
    structure: dict[str, float] = {}
    sw = config.structure_weight
    if sw > 0 and page.structure:
        # math.fsum: correctly rounded, the same on every Python
        s_norm = math.sqrt(math.fsum(v * v for v in page.structure.values()))
        weights = list(text.values())
        t_norm = math.sqrt(math.fsum(map(truediv, map(mul, weights, weights), counts)))  # sum of w * w / count
        scale = sw / (1 - sw) * t_norm / s_norm if t_norm > 0 and sw < 1 else 1.0 / s_norm
        structure = {k: v * scale for k, v in page.structure.items()}
    if sw >= 1:
        text = {}
    return Features(text=text, structure=structure, truncated=page.truncated)
