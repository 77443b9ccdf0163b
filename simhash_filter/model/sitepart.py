"""The site part of a page's stored sketch (:data:`~simhash_filter.model.sketch.SITE_BYTES` bytes between the word
sketch and the prose part): a 4-byte hash of the page's title, then a one-bit one-permutation MinHash of the
unweighted word 3-shingles of its visible text.  The index compares it for candidates of the same host only
(:func:`simhash_filter.index.nearduplicate.apart`; docs/how-it-works.md, step 4).  Integers and xxhash only: the
same part in every process, compiled or not."""

from __future__ import annotations

import html
import re

import numpy as np
import xxhash

from simhash_filter.model.core import compiled_sequence_bits
from simhash_filter.model.extract import PageText
from simhash_filter.model.sketch import SEQUENCE_BINS, SITE_BYTES, TITLE_BYTES

#: The characters of visible text read (the heaviest segments first).
MAX_CHARS = 20_000
#: Seed of the title hash and of the tokens.
SITE_SEED = 0x517E
#: Named in the model id (:meth:`~simhash_filter.model.config.FingerprintConfig.model`).
SITE_ID = f"title{TITLE_BYTES}-seq3-{SEQUENCE_BINS}-{MAX_CHARS}"

_TITLE = re.compile(rb"<title\b[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_P = np.uint64(0x100000001B3)  # the polynomial of a token's bytes (odd: invertible modulo 2**64)
_K1, _K2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)
#: The bytes of text read at most (MAX_CHARS characters of up to 4 bytes).
_MAX_BYTES = 4 * MAX_CHARS
with np.errstate(over="ignore"):  # P**(i+1) and its inverse modulo 2**64, by position
    _POWERS = np.cumprod(np.full(_MAX_BYTES, _P, dtype=np.uint64))
    _INVERSE = np.cumprod(np.full(_MAX_BYTES, np.uint64(pow(int(_P), -1, 2**64)), dtype=np.uint64))
# a byte's class: 1 a token's byte (ASCII letter or digit, any byte of a non-ASCII character), 2 a lead byte of
# U+3000-U+9FFF (0xE3-0xE9), which starts a token of its own; 0 other bytes.  A token starts where the class rises.
_CLASS = np.zeros(256, dtype=np.uint8)
_CLASS[[*range(48, 58), *range(97, 123), *range(128, 256)]] = 1
_CLASS[0xE3:0xEA] = 2
_BINS = np.arange(SEQUENCE_BINS, dtype=np.int64)
_BIN_SHIFT = np.uint64(64 - (SEQUENCE_BINS - 1).bit_length())


def page_title(data: bytes) -> str:
    """The page's title as a reader sees it (the first ``<title>`` of its UTF-8 bytes), case folded; '' without."""
    found = _TITLE.search(data, 0, 1 << 16)
    if found is None:
        return ""
    return " ".join(html.unescape(found.group(1).decode("utf-8", "replace")).split()).casefold()


def sequence_hashes(text: str) -> np.ndarray:
    """The uint64 hashes of the word 3-shingles of *text* (of its words where it has fewer than three).  Tokens:
    runs of ASCII letters and digits (lower-cased) and of other non-ASCII characters, each CJK character its own."""
    data = np.frombuffer(text.lower().encode("utf-8", "replace")[:_MAX_BYTES], dtype=np.uint8)
    cls = _CLASS[data]
    word = cls.astype(bool)
    kept = data[word]
    if not len(kept):
        return np.zeros(0, dtype=np.uint64)
    starts = np.empty(len(cls), dtype=bool)
    starts[0] = True
    np.greater(cls[1:], cls[:-1], out=starts[1:])
    first = np.flatnonzero(starts[word])
    with np.errstate(over="ignore"):
        tokens = np.add.reduceat(kept * _POWERS[: len(kept)], first) * _INVERSE[first]
        if len(tokens) >= 3:
            tokens = (tokens[:-2] * _K1 + tokens[1:-1]) * _K2 + tokens[2:]
        tokens ^= tokens >> np.uint64(31)
        tokens *= _K1
    return tokens


def sequence_bits(hashes: np.ndarray) -> bytes:
    """The one-bit one-permutation MinHash of *hashes* (not empty) in
    :data:`~simhash_filter.model.sketch.SEQUENCE_BINS` bins: a hash's leading bits are its bin; an empty bin takes
    the value of the next filled bin to its right, shifted by the distance."""
    ordered = np.sort(hashes)
    bins = (ordered >> _BIN_SHIFT).astype(np.int64)
    first = np.empty(len(bins), dtype=bool)
    first[0] = True
    np.not_equal(bins[1:], bins[:-1], out=first[1:])
    filled, smallest = bins[first], ordered[first]
    source = np.searchsorted(filled, _BINS) % len(filled)
    shift = ((filled[source] - _BINS) & 63).astype(np.uint64)  # the distance to the right, modulo 64
    bits = ((smallest[source] >> shift) & np.uint64(1)).astype(np.uint8)
    return np.packbits(bits, bitorder="little").tobytes()


def site_part(page: PageText) -> bytes:
    """The :data:`~simhash_filter.model.sketch.SITE_BYTES` bytes of the page's site part: its title's hash, then
    the MinHash of its word sequences (zero bits for a page without words)."""
    title = xxhash.xxh32_intdigest(page.title.encode("utf-8"), SITE_SEED) if page.title else 0
    head = title.to_bytes(TITLE_BYTES, "little")
    if compiled_sequence_bits is not None:
        bits = compiled_sequence_bits(page.texts, MAX_CHARS, _MAX_BYTES, SEQUENCE_BINS)
        return head + (bits if bits is not None else bytes(SITE_BYTES - TITLE_BYTES))
    text, room = [], MAX_CHARS
    for _weight, segment in page.texts:
        if room <= 0:
            break
        text.append(segment[:room])
        room -= len(segment)
    hashes = sequence_hashes("\n".join(text))
    if not len(hashes):
        return head + bytes(SITE_BYTES - TITLE_BYTES)
    return head + sequence_bits(hashes)
