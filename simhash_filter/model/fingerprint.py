"""64-bit simhash fingerprints of HTML pages (Charikar, STOC 2002).

Each feature is hashed to 64 bits with xxhash64 (fixed seed); its weight is added to every bit column
where the hash has a 1 and subtracted where it has a 0, in one integer matrix product per page; the
sign of each column is one bit.  Weights are rounded to integers (1/1024) before the vote, so the sum is
exact and the fingerprint is the same on every machine, in every process.

A page with fewer than ``min_features`` distinct text features gets status ``too_few_features`` and no
fingerprint: empty and image-only pages must not all collide on one value.
"""

from __future__ import annotations

import enum
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from itertools import repeat

import numpy as np
import xxhash

from simhash_filter.model.config import FingerprintConfig
from simhash_filter.model.core import (
    compiled_counts,
    compiled_page_fingerprint,
    compiled_sketch,
    compiled_vote,
    compiled_word_table,
)
from simhash_filter.model.extract import PageText, extract_page
from simhash_filter.model.features import (
    DIGIT_WEIGHT,
    UNKNOWN_IDF,
    Features,
    char_grams,
    gram_size,
    page_features,
    word_values,
)
from simhash_filter.model.html import NotHtml, page_bytes
from simhash_filter.model.prose import ANTECEDENTS, CORE_PARAMS, PART_BYTES, prose_part
from simhash_filter.model.segment import MAX_CACHED_RUN, jieba_cut, segment_slices
from simhash_filter.model.sitepart import page_title, site_part
from simhash_filter.model.sketch import SEED as SKETCH_SEED
from simhash_filter.model.sketch import SITE_BYTES, sketch
from simhash_filter.model.spelling import irregular_spellings
from simhash_filter.model.weights import TABLE_SEED, chinese_table, english_table

F = 64
WEIGHT_SCALE = 1024
#: The elements the parser gives every page (``html``, ``body``; ``head`` is not walked).
IMPLIED_ELEMENTS = 2


class Status(str, enum.Enum):
    """Outcome of fingerprinting one page."""

    OK = "ok"
    EMPTY = "empty"  # nothing parsed: no text and no elements but html and body
    TOO_FEW_FEATURES = "too_few_features"  # too little text to fingerprint (e.g. image-only)
    NOT_HTML = "not_html"  # binary or otherwise not text

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """A page's simhash (``value`` is None unless ``status`` is OK)."""

    value: int | None
    status: Status
    features: int = 0
    truncated: bool = False
    encoding: str | None = None
    #: What the index verifies with, with the value: the sketch of the page's words
    #: (:func:`simhash_filter.model.sketch.sketch`), then its site part
    #: (:func:`simhash_filter.model.sitepart.site_part`) and its prose part
    #: (:func:`simhash_filter.model.prose.prose_part`).
    sketch: bytes | None = None
    #: How many of the sketch's last bytes follow the word sketch (the site and prose parts; 0: the model has neither).
    prose_bytes: int = 0

    @property
    def word_sketch(self) -> bytes | None:
        """The sketch of the page's words alone (what :func:`simhash_filter.model.sketch.similarity` compares)."""
        return None if self.sketch is None else self.sketch[: len(self.sketch) - self.prose_bytes]

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def hex(self) -> str | None:
        return None if self.value is None else f"{self.value:016x}"


def feature_hashes(names: list[str], seed: int) -> np.ndarray:
    """xxhash64 of each feature name (UTF-8), as uint64."""
    return np.fromiter(
        map(xxhash.xxh64_intdigest, map(str.encode, names), repeat(seed)), dtype=np.uint64, count=len(names)
    )


def simhash(hashes: np.ndarray, weights: np.ndarray) -> int:
    """Charikar's simhash of weighted 64-bit feature hashes (one vectorised vote)."""
    if len(hashes) == 0:
        raise ValueError("simhash of no features")
    bits = np.unpackbits(hashes.astype("<u8").view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    w = np.maximum(np.rint(np.asarray(weights, dtype=np.float64) * WEIGHT_SCALE), 1).astype(np.int64)
    ones = w @ bits.astype(np.int64)  # weight voting 1 in each column
    votes = 2 * ones - w.sum()  # (+w where 1) + (-w where 0)
    value = np.packbits(votes > 0, bitorder="little").view("<u8")[0]
    return int(value)


class _FeatureBits:
    """Memo of feature names -> how many of their 64-bit hashes have a 1 in each bit column.

    A word enters the vote as its character n-grams, all with one weight, so its part in the vote is
    that weight times these counts: one row per word instead of one per n-gram, computed once.  Counts
    are kept as bytes; the rare name with more than 255 hashes voting in one column (a word of
    hundreds of characters) keeps its counts in ``wide`` and points to row 0, which stays all zeros.
    """

    __slots__ = ("counts", "ids", "seed", "sizes", "used", "wide")

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.ids: dict[str, int] = {}
        self.counts = np.zeros((1024, F), dtype=np.uint8)
        self.sizes = np.zeros(1024, dtype=np.int64)  # hashes per name
        self.used = 1  # row 0 is the zero row of wide names
        self.wide: dict[str, tuple[np.ndarray, int]] = {}  # name -> (counts, hashes)

    def rows(self, names: list[str], split: Callable[[str], list[str]]) -> np.ndarray:
        """Row of each name, adding the names not seen yet (``split(name)``: the strings it is hashed as)."""
        rows = list(map(self.ids.get, names))
        if None in rows:
            new = [n for n, r in zip(names, rows, strict=True) if r is None]
            if len(self.ids) + len(new) > MAX_CACHED_FEATURES:  # full: start again with these names
                self.ids.clear()
                self.wide.clear()
                self.used = 1
                new = list(dict.fromkeys(names))
            self._add(new, split)
            rows = list(map(self.ids.__getitem__, names))
        return np.asarray(rows, dtype=np.intp)

    def _add(self, new: list[str], split: Callable[[str], list[str]]) -> None:
        for start in range(0, len(new), ADD_BATCH):  # bounds the temporary bit arrays (64 bytes a hash)
            self._add_batch(new[start : start + ADD_BATCH], split)

    def _add_batch(self, new: list[str], split: Callable[[str], list[str]]) -> None:
        parts = [split(n) for n in new]
        sizes = np.array([len(p) for p in parts], dtype=np.int64)
        hashes = feature_hashes([g for p in parts for g in p], self.seed)
        bits = np.unpackbits(hashes.astype("<u8", copy=False).view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
        counts = np.add.reduceat(bits, np.cumsum(sizes) - sizes, axis=0, dtype=np.int64)
        if counts.max() > 255:
            wide = counts.max(axis=1) > 255
            for j in np.flatnonzero(wide).tolist():
                self.ids[new[j]] = 0
                self.wide[new[j]] = (counts[j], int(sizes[j]))
            keep = ~wide
            new, counts, sizes = [n for n, k in zip(new, keep.tolist(), strict=True) if k], counts[keep], sizes[keep]
        first, end = self.used, self.used + len(new)
        if end > len(self.counts):
            cap = max(end, 2 * len(self.counts))
            counts_grown, sizes_grown = np.zeros((cap, F), dtype=np.uint8), np.zeros(cap, dtype=np.int64)
            counts_grown[: self.used] = self.counts[: self.used]
            sizes_grown[: self.used] = self.sizes[: self.used]
            self.counts, self.sizes = counts_grown, sizes_grown
        self.counts[first:end] = counts
        self.sizes[first:end] = sizes
        self.used = end
        self.ids.update(zip(new, range(first, end), strict=True))

    def vote(self, names: list[str], rows: np.ndarray, weights: np.ndarray, exact_int: bool) -> np.ndarray:
        """Per bit column, the summed weight of the names' hashes with a 1 there."""
        out: np.ndarray
        if exact_int:
            weights = weights.astype(np.int64)
            out = weights @ self.counts[rows].astype(np.int64)
        else:
            out = weights @ self.counts[rows]
        if self.wide:
            for j in np.flatnonzero(rows == 0).tolist():
                out = out + weights[j] * self.wide[names[j]][0]
        return out

    def hash_counts(self, names: list[str], rows: np.ndarray) -> np.ndarray:
        """How many hashes each name has."""
        sizes: np.ndarray = self.sizes[rows]
        if self.wide:
            for j in np.flatnonzero(rows == 0).tolist():
                sizes[j] = self.wide[names[j]][1]
        return sizes


#: Feature memos are emptied when they grow past this many names.
MAX_CACHED_FEATURES = 500_000
#: The compiled word table (words, their spellings, values, vote rows; CJK runs) starts again past this many entries:
#: about 250 bytes each, so at most ~60 MB a process.
MAX_TABLE_WORDS = 250_000
#: New names are hashed this many at a time.
ADD_BATCH = 4096


class Fingerprinter:
    """Fingerprints pages under one :class:`FingerprintConfig` (reuse one per process)."""

    def __init__(self, config: FingerprintConfig | None = None) -> None:
        self.config = config or FingerprintConfig()
        self._text_bits = _FeatureBits(self.config.seed)  # words -> counts over their character n-grams
        self._structure_bits = _FeatureBits(self.config.seed)  # structure features, hashed whole
        self._bits_lock = threading.Lock()  # the memos grow in place: one page at a time reads or grows them
        if compiled_counts is not None:  # the compiled core's memos of the same counts
            self._counts = (
                compiled_counts(self.config.seed, True, MAX_CACHED_FEATURES),
                compiled_counts(self.config.seed, False, MAX_CACHED_FEATURES),
            )
        # the compiled one-pass path from text segments to fingerprint (single-word features only)
        self._words = None
        if compiled_word_table is not None and self.config.ngrams == (1,):
            cfg = self.config
            self._words = compiled_word_table(cfg.seed, SKETCH_SEED, cfg.char_ngram, cfg.cjk_char_ngram,
                                              MAX_TABLE_WORDS)  # fmt: skip
            self._words.values(english_table, chinese_table, UNKNOWN_IDF, DIGIT_WEIGHT, cfg.idf_power, TABLE_SEED,
                               irregular_spellings())  # fmt: skip
            if cfg.prose:  # the prose part from the same table, in the same call
                self._words.antecedents(ANTECEDENTS)

    def page_text(self, html: bytes | str, encoding: str | None = None) -> tuple[PageText | None, Status, str | None]:
        """The page's visible text by role and its structure features, or None with the reason."""
        cfg = self.config
        try:
            data, enc, truncated = page_bytes(html, encoding, cfg.max_bytes)
        except NotHtml:
            return None, Status.NOT_HTML, None
        if not data:
            return None, Status.EMPTY, enc
        page = extract_page(
            data, dom_decay=cfg.dom_decay, boilerplate_weight=cfg.boilerplate_weight, max_elements=cfg.max_elements
        )
        if page.elements <= IMPLIED_ELEMENTS and not page.texts:  # only what the parser adds to any page
            return None, Status.EMPTY, enc
        page.truncated = page.truncated or truncated
        page.title = page_title(data)
        return page, Status.OK, enc

    def features(self, html: bytes | str, encoding: str | None = None) -> tuple[Features | None, Status, str | None]:
        """The page's weighted features, or None with the reason."""
        page, status, enc = self.page_text(html, encoding)
        return (None if page is None else page_features(page, self.config)), status, enc

    def fingerprint(self, html: bytes | str, encoding: str | None = None) -> Fingerprint:
        """Fingerprint one page (bytes in any declared or sniffed encoding, or str)."""
        if self._words is None:
            return self.analyze(html, encoding)[0]
        page, status, enc = self.page_text(html, encoding)
        if page is None:
            return Fingerprint(None, status, encoding=enc)
        return self.fingerprint_page(page, enc)

    def fingerprint_page(self, page: PageText, encoding: str | None = None) -> Fingerprint:
        """The fingerprint of an extracted page: in one compiled pass from its text segments to its fingerprint,
        sketch and prose part where the compiled core is built (the same fingerprint as :meth:`analyze`, without the
        features)."""
        cfg = self.config
        if self._words is not None and compiled_page_fingerprint is not None:
            with self._bits_lock:
                done = compiled_page_fingerprint(
                    self._words, self._counts[1], page.texts, page.structure, cfg.max_tokens, cfg.max_features,
                    cfg.structure_weight, cfg.min_features, cfg.sketch_bins, cfg.sketch_step,
                    (jieba_cut, segment_slices, MAX_CACHED_RUN), self._word_values, math.fsum,
                    CORE_PARAMS if cfg.prose else None,
                )  # fmt: skip
            if done is not None:  # else declined (a weight beyond exact integer sums): the reference computes it
                n, value, page_sketch = done
                if value is None:
                    return Fingerprint(None, Status.TOO_FEW_FEATURES, n, page.truncated, encoding)
                if cfg.prose:  # the site part between the word sketch and the prose part (model v7)
                    words = cfg.word_sketch_bytes
                    page_sketch = page_sketch[:words] + site_part(page) + page_sketch[words:]
                return Fingerprint(value, Status.OK, n, page.truncated, encoding, page_sketch,
                                   SITE_BYTES + PART_BYTES if cfg.prose else 0)  # fmt: skip
        return self._decide(page_features(page, cfg), Status.OK, encoding, page)

    def _prose(self, page: PageText) -> bytes:
        """The parts after the word sketch: the site part, then the prose part (model v7; nothing when the model has
        no prose verifier)."""
        return site_part(page) + prose_part(page, self.config.max_tokens) if self.config.prose else b""

    def _word_values(self, words: list[str]) -> list[tuple[float, int]]:
        return word_values(words, self.config)

    def analyze(self, html: bytes | str, encoding: str | None = None) -> tuple[Fingerprint, Features | None]:
        """The page's fingerprint and the features it was made from (one parse)."""
        fp, feats, _page = self._inspected(html, encoding)
        return fp, feats

    def inspect(self, html: bytes | str, encoding: str | None = None) -> tuple[Fingerprint, Features | None, str]:
        """The page's fingerprint, its features and its main text (:meth:`PageText.main_text`), from one parse."""
        fp, feats, page = self._inspected(html, encoding)
        return fp, feats, "" if page is None else page.main_text()

    def _inspected(
        self, html: bytes | str, encoding: str | None
    ) -> tuple[Fingerprint, Features | None, PageText | None]:
        page, status, enc = self.page_text(html, encoding)
        feats = None if page is None else page_features(page, self.config)
        return self._decide(feats, status, enc, page), feats, page

    def _decide(self, feats: Features | None, status: Status, enc: str | None, page: PageText | None) -> Fingerprint:
        if feats is None or page is None:
            return Fingerprint(None, status, encoding=enc)
        n = len(feats)
        if len(feats.text) < self.config.min_features:
            return Fingerprint(None, Status.TOO_FEW_FEATURES, n, feats.truncated, enc)
        value = self.fingerprint_features(feats)
        if compiled_sketch is not None:
            page_sketch = compiled_sketch(feats.text, self.config.sketch_bins, self.config.sketch_step, SKETCH_SEED)
        else:
            page_sketch = sketch(feats.text, self.config.sketch_bins, self.config.sketch_step)
        prose = self._prose(page)
        return Fingerprint(value, Status.OK, n, feats.truncated, enc, page_sketch + prose, len(prose))

    def fingerprint_features(self, feats: Features) -> int:
        """Simhash of a page's features: each word as its character n-grams, then the structure.

        The same vote as :func:`simhash` over the hashes of every word's n-grams (each with the word's
        weight shared among them) and of every structure feature, summed per word from memoised counts.
        """
        cfg = self.config
        words, names = list(feats.text), list(feats.structure)
        if not words and not names:
            raise ValueError("simhash of no features")
        if compiled_vote is not None:
            with self._bits_lock:
                value: int | None = compiled_vote(
                    *self._counts, feats.text, feats.structure, cfg.char_ngram, cfg.cjk_char_ngram
                )
            if value is not None:
                return value
        text_bits, structure_bits = self._text_bits, self._structure_bits
        ws = np.fromiter(feats.structure.values(), dtype=np.float64, count=len(names))
        ws = np.maximum(np.rint(ws * WEIGHT_SCALE), 1)
        with self._bits_lock:
            t_rows = text_bits.rows(words, lambda w: char_grams(w, gram_size(w, cfg)))
            s_rows = structure_bits.rows(names, lambda name: [name])
            sizes = text_bits.hash_counts(words, t_rows)
            # A word's weight is shared among its n-grams, then every weight is rounded to an integer
            # (1/WEIGHT_SCALE) exactly as simhash() does; float64 sums of integers are exact below 2**53.
            wt = np.fromiter(feats.text.values(), dtype=np.float64, count=len(words)) / sizes
            wt = np.maximum(np.rint(wt * WEIGHT_SCALE), 1)
            total = float(wt @ sizes) + float(ws.sum())
            exact_int = total >= _EXACT_FLOAT_SUM  # never for real pages: then the vote is done in int64
            ones = text_bits.vote(words, t_rows, wt, exact_int) + structure_bits.vote(names, s_rows, ws, exact_int)
        if exact_int:
            total = int(wt.astype(np.int64) @ sizes) + int(ws.astype(np.int64).sum())
        votes = 2 * ones - total
        return int(np.packbits(votes > 0, bitorder="little").view("<u8")[0])


#: Sums of integer-valued float64 stay exact while below 2**53; beyond 2**52 the vote uses int64.
_EXACT_FLOAT_SUM = float(2**52)


_DEFAULT: Fingerprinter | None = None


def fingerprint(html: bytes | str, encoding: str | None = None, config: FingerprintConfig | None = None) -> Fingerprint:
    """Fingerprint one page with the default settings (or ``config``)."""
    global _DEFAULT
    if config is not None:
        return Fingerprinter(config).fingerprint(html, encoding)
    if _DEFAULT is None:
        _DEFAULT = Fingerprinter()
    return _DEFAULT.fingerprint(html, encoding)
