"""Weighted features of a page: TF-IDF words weighted by where they stand, and decayed DOM structure.

Text is NFKC-normalised and case-folded; Latin-script (and any non-CJK) words are runs of letters and
digits; runs of CJK ideographs are segmented into words with jieba; British spellings become American
ones (:mod:`simhash_filter.spelling`).  A word enters the fingerprint as the character n-grams of
``<word>`` (``char_ngram``), its weight shared among them, so that a typo or another spelling variant
changes a few features instead of a whole word.  A feature's weight is
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
from itertools import compress, repeat
from operator import add, contains, is_, itemgetter, mul, truediv

import numpy as np

from simhash_filter.config import FingerprintConfig
from simhash_filter.extract import PageText
from simhash_filter.segment import CJK_RUN, segment_run
from simhash_filter.spelling import american_words
from simhash_filter.weights import chinese_table, english_table

#: Words: a CJK run (segmented later) or a run of other letters/digits.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
WORD = re.compile(f"[{_CJK}]+|[^\\W_{_CJK}]+")
_NON_CJK_WORD = re.compile(r"[^\W_]+")
#: ASCII to lower case, and every character that is not a letter or a digit to a space.
_ASCII_WORDS = str.maketrans({chr(c): chr(c).lower() if chr(c).isalnum() else " " for c in range(128)})
#: The same for UTF-8 bytes (already case-folded); the bytes of other characters are kept.
_BYTE_WORDS = bytes(c if c >= 128 or chr(c).isalnum() else 32 for c in range(256))
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
#: Characters common in pages that fail NFKC's quick check, and their NFKC decompositions.
_DECOMPOSED = (("\xa0", " "), ("\u2026", "..."), ("\u202f", " "))
_CJK_SPLIT = re.compile(f"([{_CJK}]+)")
#: Text with at most this many CJK runs has the words of its other text found in bulk.
_FEW_RUNS = 16
HAS_DIGIT = re.compile(r"\d")
DIGIT_WEIGHT = 0.1
#: IDF given to words found in no table (typos, identifiers, random strings): that of a fairly rare
#: word, so that a typo or a session id never outweighs the words the page is made of.
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
    if text.isascii():  # NFKC leaves ASCII alone, casefold is lower(), and words are runs of [a-z0-9]
        return text.translate(_ASCII_WORDS).split()[:max_tokens]
    text = _normalized(text)
    if text.isascii():
        return text.translate(_ASCII_WORDS).split()[:max_tokens]
    if CJK_RUN.search(text) is None:  # then WORD is just this simpler (faster) pattern
        return _NON_CJK_WORD.findall(text)[:max_tokens]
    parts = _CJK_SPLIT.split(text)  # other text, a CJK run, other text, ..., other text
    if len(parts) <= 2 * _FEW_RUNS + 1:  # a few runs in other text: the words of the other text in bulk
        out = _NON_CJK_WORD.findall(parts[0])
        for k in range(1, len(parts), 2):
            out += segment_run(parts[k])
            if parts[k + 1]:
                out += _NON_CJK_WORD.findall(parts[k + 1])
            if len(out) >= max_tokens:
                break
        return out[:max_tokens]
    words = WORD.findall(text)
    out = []
    if len(text) <= max_tokens:  # no run of text makes more words than it has characters: no cap to check
        append = out.append
        for w in words:
            if "\u3400" <= w[0] <= "\u9fff" or "\uf900" <= w[0] <= "\ufaff":  # is_cjk(w[0])
                out += segment_run(w)
            else:
                append(w)
        return out
    for w in words:
        if is_cjk(w[0]):
            out.extend(segment_run(w))
        else:
            out.append(w)
        if len(out) >= max_tokens:
            break
    return out[:max_tokens]


def _normalized(text: str) -> str:
    """NFKC and case folding.  The characters of :data:`_DECOMPOSED` are replaced by their NFKC
    decompositions first (which leaves the result as it is): most pages then pass NFKC's quick check."""
    for c, decomposed in _DECOMPOSED:
        if c in text:
            text = text.replace(c, decomposed)
    return unicodedata.normalize("NFKC", text).casefold()


def _word_counts(text: str, max_tokens: int) -> tuple[dict[str, int], int]:
    """``Counter(tokenize(text, max_tokens))`` (in the same order) and how many words that is.

    Text other than CJK runs is counted without a string per occurrence of a word: the characters that
    are not letters or digits become spaces, and the UTF-8 bytes are split and counted."""
    if text.isascii():
        words = text.translate(_ASCII_WORDS).split()[:max_tokens]
        return Counter(words), len(words)
    folded = _normalized(text)
    if folded.isascii():
        words = folded.translate(_ASCII_WORDS).split()[:max_tokens]
        return Counter(words), len(words)
    parts = _CJK_SPLIT.split(folded)  # other text, a CJK run, other text, ..., other text
    if len(parts) == 1:
        return _other_word_counts(folded, max_tokens)
    if len(parts) <= 2 * _FEW_RUNS + 1:
        counts, total = _other_word_counts(parts[0], max_tokens)
        for k in range(1, len(parts)):
            if k % 2:
                words = segment_run(parts[k])
                more: dict[str, int] = Counter(words)
                used = len(words)
            elif parts[k]:
                more, used = _other_word_counts(parts[k], max_tokens)
            else:
                continue
            total += used
            # counts[w] = counts.get(w, 0) + c, new words at the end in order
            counts.update(zip(more, map(add, map(counts.get, more, repeat(0)), more.values()), strict=True))
        if total <= max_tokens:  # (a part cut at max_tokens leaves more than that: there is a run besides)
            return counts, total
    words = tokenize(text, max_tokens)
    return Counter(words), len(words)


def _other_word_counts(folded: str, max_tokens: int) -> tuple[dict[str, int], int]:
    """:func:`_word_counts` of normalised text without CJK runs."""
    for c in set(_NON_ASCII.findall(folded)):
        if not c.isalnum():  # a letter or digit is what str.isalnum() says ("_" is ASCII)
            folded = folded.replace(c, " ")
    pieces = folded.encode("utf-8").translate(_BYTE_WORDS).split()[:max_tokens]
    counts = Counter(pieces)
    return dict(zip(map(bytes.decode, counts), counts.values(), strict=True)), len(pieces)


def is_cjk(c: str) -> bool:
    """Whether the character is a CJK ideograph."""
    return "\u3400" <= c <= "\u9fff" or "\uf900" <= c <= "\ufaff"


def text_features(page: PageText, config: FingerprintConfig) -> dict[str, float]:
    """TF-IDF weight of each distinct word (and word n-gram) of the page, by role."""
    return _text_features(page, config)[0]


def _text_features(page: PageText, config: FingerprintConfig) -> tuple[dict[str, float], tuple[int, ...]]:
    """:func:`text_features`, and each feature's n-gram count."""
    tf: dict[str, float] = {}
    budget = config.max_tokens
    for rw, text in page.texts:
        if budget <= 0:
            break
        spelled = max(config.ngrams) > 1  # word n-grams need every word respelled; single words only the distinct
        if spelled:
            words = american_words(tokenize(text, budget))
            budget -= len(words)
        else:
            word_counts, used = _word_counts(text, budget)
            budget -= used
        for n in config.ngrams:
            if n == 1:
                grams = Counter(words) if spelled else _american_counts(word_counts)
            else:
                grams = Counter(" ".join(g) for g in zip(*(words[i:] for i in range(n)), strict=False))
            weighted = map(mul, repeat(rw), grams.values())  # rw * c
            if not tf:  # the first group: every gram is new
                tf = dict(zip(grams, map(add, repeat(0.0), weighted), strict=True))
                continue
            # tf[g] = tf.get(g, 0.0) + rw * c for each gram: new grams go to the end, in order
            tf.update(zip(grams, map(add, map(tf.get, grams, repeat(0.0)), weighted), strict=True))
    if not tf:
        return {}, ()
    powers, counts = zip(*word_values(list(tf), config), strict=True)
    # IDF ** idf_power times the sublinear tf: w up to 1, then 1 + ln w (computed once per distinct w)
    tfs = list(tf.values())
    log = math.log
    sublinear = {w: 1.0 + log(w) for w in set(tfs) if w > 1.0}
    return dict(zip(tf, map(mul, powers, map(sublinear.get, tfs, tfs)), strict=True)), counts


def _american_counts(counts: dict[str, int]) -> dict[str, int]:
    """``counts`` with each word under its :func:`~simhash_filter.spelling.american` spelling (the distinct
    words are mapped, not every occurrence), in the order of first appearance."""
    words = list(counts)
    mapped = american_words(words)
    if mapped == words:
        return counts
    out = dict(zip(mapped, counts.values(), strict=True))  # the order of first appearance
    if len(out) < len(counts):  # words that share a spelling: sum their counts
        changed = [(w, m) for w, m in zip(words, mapped, strict=True) if w != m]
        respelled = {w for w, _ in changed}
        for m in {m for _, m in changed}:
            out[m] = sum(counts[w] for w, t in changed if t == m) + (
                counts[m] if m in counts and m not in respelled else 0
            )
    return out


def word_values(features: list[str], config: FingerprintConfig) -> list[tuple[float, int]]:
    """``(IDF ** idf_power, gram_count)`` of each text feature under ``config`` (memoised per word)."""
    key = (config.idf_power, config.char_ngram, config.cjk_char_ngram)
    memo = _WORD_CACHE.get(key)
    if memo is None:
        memo = _WORD_CACHE[key] = {}
    values = list(map(memo.get, features))
    if None in values:
        missing = list(compress(features, map(is_, values, repeat(None))))
        powers = map(pow, gram_idfs(missing), repeat(config.idf_power))  # idf ** idf_power
        fresh = dict(zip(missing, zip(powers, _gram_counts(missing, config), strict=True), strict=True))
        if len(memo) + len(fresh) > MAX_CACHED_WORDS:
            memo.clear()
        memo.update(fresh)
        values = list(map(fresh.get, features, values))
    return values  # type: ignore[return-value]  # every None was filled


def _gram_counts(features: list[str], config: FingerprintConfig) -> list[int]:
    """``gram_count(g, gram_size(g, config))`` of each text feature ``g``."""
    lengths = np.fromiter(map(len, features), dtype=np.int64, count=len(features))
    size = _gram_sizes(features, config)
    return np.where((size > 0) & (lengths + 2 > size), lengths + 3 - size, 1).tolist()


def _gram_sizes(features: list[str], config: FingerprintConfig) -> np.ndarray:
    """:func:`gram_size` of each text feature."""
    size = np.where(_first_is_cjk(features), config.cjk_char_ngram, config.char_ngram)
    size[np.fromiter(map(contains, features, repeat(" ")), dtype=bool, count=len(features))] = 0
    return size


def _first_is_cjk(words: list[str]) -> np.ndarray:
    """Per word (none empty), whether it starts with a CJK ideograph (:func:`is_cjk`)."""
    first = np.fromiter(map(ord, map(itemgetter(0), words)), dtype=np.int64, count=len(words))
    return ((first >= 0x3400) & (first <= 0x9FFF)) | ((first >= 0xF900) & (first <= 0xFAFF))


def gram_idfs(grams: list[str]) -> list[float]:
    """IDF of each word or word n-gram (the mean over its words), a tenth of it with digits."""
    if any(map(contains, grams, repeat(" "))):
        return _gram_idfs_of_ngrams(grams)
    cjk = _first_is_cjk(grams)
    idf = np.empty(len(grams))
    if not cjk.all():
        other = np.flatnonzero(~cjk)
        idf[other] = english_table().lookup([grams[i] for i in other.tolist()], UNKNOWN_IDF)
    if cjk.any():
        zh, zh_default = chinese_table()
        chinese = np.flatnonzero(cjk)
        idf[chinese] = zh.lookup([grams[i] for i in chinese.tolist()], zh_default)
    out = idf.tolist()
    letters = np.fromiter(map(str.isalpha, grams), dtype=bool, count=len(grams))
    for i in np.flatnonzero(~letters).tolist():  # letters only: no digit (\d is a kind of non-letter)
        if HAS_DIGIT.search(grams[i]):
            out[i] *= DIGIT_WEIGHT
    return out


def _gram_idfs_of_ngrams(grams: list[str]) -> list[float]:
    """:func:`gram_idfs` when some features are word n-grams."""
    words = list(dict.fromkeys(p for g in grams for p in g.split(" ")))
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
            idf = word_idf[g]  # the mean of one value is that value, exactly
        if not g.isalpha() and HAS_DIGIT.search(g):  # letters only: no digit (\d is a kind of non-letter)
            idf *= DIGIT_WEIGHT
        out.append(idf)
    return out


#: (idf_power, char_ngram, cjk_char_ngram) -> word -> (IDF ** idf_power, gram_count): the IDF tables
#: never change, so neither does any of this.
_WORD_CACHE: dict[tuple[float, int, int], dict[str, tuple[float, int]]] = {}
#: Per-word memos are emptied when they grow past this many words.
MAX_CACHED_WORDS = 500_000


def char_grams(word: str, n: int) -> list[str]:
    """Character n-grams of ``<word>`` (the whole padded word when it is shorter than n)."""
    padded = f"<{word}>"
    if n == 0 or len(padded) <= n:
        return [padded]
    return [padded[i : i + n] for i in range(len(padded) - n + 1)]


def word_grams(words: list[str], config: FingerprintConfig) -> tuple[list[str], np.ndarray]:
    """``char_grams(w, gram_size(w, config))`` of each word, one word's after another, and how many each
    word has: all cut from one string of the padded words."""
    padded = np.fromiter(map(len, words), dtype=np.int64, count=len(words)) + 2
    size = _gram_sizes(words, config)
    windows = (size > 0) & (padded > size)
    count = np.where(windows, padded - size + 1, 1)
    width = np.where(windows, size, padded)
    word_of = np.repeat(np.arange(len(words)), count)  # each gram's word
    first = np.cumsum(count) - count
    offset = np.cumsum(padded) - padded
    starts = offset[word_of] + np.arange(len(word_of)) - first[word_of]
    joined = "<" + "><".join(words) + ">"
    return list(map(joined.__getitem__, map(slice, starts.tolist(), (starts + width[word_of]).tolist()))), count


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
    text, counts = _text_features(page, config)
    structure: dict[str, float] = {}
    sw = config.structure_weight
    if sw > 0 and page.structure:
        s_norm = math.sqrt(sum(v * v for v in page.structure.values()))
        weights = list(text.values())
        t_norm = math.sqrt(sum(map(truediv, map(mul, weights, weights), counts)))  # sum of w * w / count
        # with no text at all, structure is all there is
        scale = sw / (1 - sw) * t_norm / s_norm if t_norm > 0 and sw < 1 else 1.0 / s_norm
        structure = {k: v * scale for k, v in page.structure.items()}
    if sw >= 1:
        text = {}
    return Features(text=text, structure=structure, truncated=page.truncated)
