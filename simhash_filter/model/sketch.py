"""A page's verification sketch: weighted one-permutation MinHash of its TF-IDF words, one bit per bin, and the
layout of the parts stored after it.  Two sketches estimate the weighted Jaccard similarity of the words
(:func:`similarity`); integers and xxhash only, so a page's sketch is the same in every process and on every
machine.  The method: docs/how-it-works.md, step 2."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import xxhash

#: xxhash64 seed of the words (another than the simhash's, so the two are independent).
SEED = 0x5CE7C4
_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_A = np.uint64(0xBF58476D1CE4E5B9)
_MIX_B = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, a bijection of uint64 (in place on a fresh array)."""
    with np.errstate(over="ignore"):
        x += _GOLDEN
        x ^= x >> np.uint64(30)
        x *= _MIX_A
        x ^= x >> np.uint64(27)
        x *= _MIX_B
        x ^= x >> np.uint64(31)
    return x


def sketch_bytes(bins: int) -> int:
    """Bytes of a sketch of ``bins`` one-bit bins."""
    return (bins + 7) // 8


def sketch(words: Mapping[str, float], bins: int = 512, step: float = 0.25, seed: int = SEED) -> bytes:
    """The sketch of a page's weighted words (``{word: weight}``): ``sketch_bytes(bins)`` bytes, all zero bits for a
    page without words.  Each word counts ``max(1, rint(weight / step))`` times."""
    if not words:
        return bytes(sketch_bytes(bins))
    hashes = np.fromiter((xxhash.xxh64_intdigest(w.encode("utf-8"), seed) for w in words), dtype=np.uint64,
                         count=len(words))  # fmt: skip
    weights = np.fromiter(words.values(), dtype=np.float64, count=len(hashes))
    copies = np.maximum(1, np.rint(weights / step)).astype(np.int64)
    ends = np.cumsum(copies)
    number = np.arange(int(ends[-1]), dtype=np.uint64) - np.repeat((ends - copies).astype(np.uint64), copies)
    with np.errstate(over="ignore"):
        h = _mix(np.repeat(hashes, copies) ^ (number * _GOLDEN))
    nbins = np.uint64(bins)
    out = np.full(bins, _EMPTY, dtype=np.uint64)
    np.minimum.at(out, (h % nbins).astype(np.intp), h // nbins)
    empty = out == _EMPTY
    if empty.any():
        filled = np.flatnonzero(~empty)
        holes = np.flatnonzero(empty)
        source = filled[np.searchsorted(filled, holes) % len(filled)]
        out[holes] = _mix(out[source] ^ ((source - holes) % bins).astype(np.uint64))
    bits = (out & np.uint64(1)).astype(np.uint8)
    return np.packbits(bits, bitorder="little").tobytes()


def similarity(a: bytes, b: bytes) -> float:
    """Estimated weighted Jaccard similarity of the pages of two sketches, in [0, 1]."""
    if len(a) != len(b):
        raise ValueError(f"sketches of different sizes: {len(a)} and {len(b)} bytes")
    if not a:
        return 0.0
    differ = int.from_bytes(a, "little") ^ int.from_bytes(b, "little")
    agree = 1.0 - differ.bit_count() / (8 * len(a))
    return max(0.0, 2.0 * agree - 1.0)


#: The prose part after the word sketch (:func:`simhash_filter.model.prose.prose_part`): a flags byte, then a one-bit
#: MinHash of the page's spot signatures in this many bins.
PROSE_BINS = 504
PART_BYTES = 1 + PROSE_BINS // 8
#: The flag of an article-like page.
ARTICLE = 1


def prose_similarity(a: bytes, b: bytes) -> float | None:
    """The estimated Jaccard similarity of two article-like pages' spots (from their prose parts), or None when
    either page is not article-like."""
    if len(a) != PART_BYTES or len(b) != PART_BYTES:
        raise ValueError(f"prose parts must be {PART_BYTES} bytes, got {len(a)} and {len(b)}")
    if not (a[0] & b[0] & ARTICLE):
        return None
    return similarity(a[1:], b[1:])


#: The site part between the word sketch and the prose part (:func:`simhash_filter.model.sitepart.site_part`): a
#: title hash, then a one-bit MinHash of the word 3-shingles of the page's visible text in this many bins.
SEQUENCE_BINS = 256
TITLE_BYTES = 4
SITE_BYTES = TITLE_BYTES + SEQUENCE_BINS // 8


def site_part_of(stored: bytes, words: int) -> bytes | None:
    """The site part of a stored sketch whose first *words* bytes are the word sketch (None when it has none: a
    sketch of the word sketch alone, or of the word sketch and the prose part)."""
    part = stored[words : len(stored) - PART_BYTES]
    return part if len(part) == SITE_BYTES else None


def titles_differ(a: bytes, b: bytes) -> bool:
    """Two site parts of pages whose titles differ (a page without a title differs from none)."""
    ta, tb = a[:TITLE_BYTES], b[:TITLE_BYTES]
    return ta != tb and any(ta) and any(tb)


def sequence_similarity(a: bytes, b: bytes) -> float:
    """The estimated Jaccard similarity of the word 3-shingles of two pages' visible text (from their site parts)."""
    return similarity(a[TITLE_BYTES:], b[TITLE_BYTES:])
