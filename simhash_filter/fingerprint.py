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
from dataclasses import dataclass

import numpy as np
import xxhash

from simhash_filter.config import FingerprintConfig
from simhash_filter.extract import extract
from simhash_filter.features import Features, char_grams, gram_size, page_features
from simhash_filter.html import NotHtml, parse

F = 64
WEIGHT_SCALE = 1024


class Status(str, enum.Enum):
    """Outcome of fingerprinting one page."""

    OK = "ok"
    EMPTY = "empty"  # nothing parsed, or no elements at all
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

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def hex(self) -> str | None:
        return None if self.value is None else f"{self.value:016x}"


def feature_hashes(names: list[str], seed: int) -> np.ndarray:
    """xxhash64 of each feature name (UTF-8), as uint64."""
    h = xxhash.xxh64_intdigest
    return np.fromiter((h(s.encode("utf-8"), seed) for s in names), dtype=np.uint64, count=len(names))


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


class Fingerprinter:
    """Fingerprints pages under one :class:`FingerprintConfig` (reuse one per process)."""

    def __init__(self, config: FingerprintConfig | None = None) -> None:
        self.config = config or FingerprintConfig()
        self._word_cache: dict[str, np.ndarray] = {}  # word -> hashes of its character n-grams

    def features(
        self, html: bytes | str, encoding: str | None = None
    ) -> tuple[Features | None, Status, str | None]:
        """The page's weighted features, or None with the reason."""
        cfg = self.config
        try:
            parsed = parse(html, encoding, cfg.max_bytes)
        except NotHtml:
            return None, Status.NOT_HTML, None
        if parsed.root is None:
            return None, Status.EMPTY, parsed.encoding
        page = extract(parsed.root, dom_decay=cfg.dom_decay, boilerplate_weight=cfg.boilerplate_weight,
                       max_elements=cfg.max_elements)
        if page.elements == 0:
            return None, Status.EMPTY, parsed.encoding
        page.truncated = page.truncated or parsed.truncated
        return page_features(page, cfg), Status.OK, parsed.encoding

    def fingerprint(self, html: bytes | str, encoding: str | None = None) -> Fingerprint:
        """Fingerprint one page (bytes in any declared or sniffed encoding, or str)."""
        return self.analyze(html, encoding)[0]

    def analyze(self, html: bytes | str, encoding: str | None = None) -> tuple[Fingerprint, Features | None]:
        """The page's fingerprint and the features it was made from (one parse)."""
        feats, status, enc = self.features(html, encoding)
        return self._decide(feats, status, enc), feats

    def _decide(self, feats: Features | None, status: Status, enc: str | None) -> Fingerprint:
        if feats is None:
            return Fingerprint(None, status, encoding=enc)
        n = len(feats)
        if len(feats.text) < self.config.min_features:
            return Fingerprint(None, Status.TOO_FEW_FEATURES, n, feats.truncated, enc)
        return Fingerprint(self.fingerprint_features(feats), Status.OK, n, feats.truncated, enc)

    def fingerprint_features(self, feats: Features) -> int:
        """Simhash of a page's features: each word as its character n-grams, then the structure."""
        cache = self._word_cache
        if len(cache) > 500_000:
            cache.clear()
        hash_parts: list[np.ndarray] = []
        weights: list[float] = []
        counts: list[int] = []
        for word, w in feats.text.items():
            h = cache.get(word)
            if h is None:
                h = cache[word] = feature_hashes(char_grams(word, gram_size(word, self.config)), self.config.seed)
            hash_parts.append(h)
            weights.append(w / len(h))
            counts.append(len(h))
        if feats.structure:
            hash_parts.append(feature_hashes(list(feats.structure), self.config.seed))
            weights.extend(feats.structure.values())
            counts.extend([1] * len(feats.structure))
        hashes = np.concatenate(hash_parts)
        return simhash(hashes, np.repeat(np.asarray(weights), counts))


_DEFAULT: Fingerprinter | None = None


def fingerprint(
    html: bytes | str, encoding: str | None = None, config: FingerprintConfig | None = None
) -> Fingerprint:
    """Fingerprint one page with the default settings (or ``config``)."""
    global _DEFAULT
    if config is not None:
        return Fingerprinter(config).fingerprint(html, encoding)
    if _DEFAULT is None:
        _DEFAULT = Fingerprinter()
    return _DEFAULT.fingerprint(html, encoding)
