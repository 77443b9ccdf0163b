"""The second verifier, for prose: spot signatures of a page's article text, as the :data:`PART_BYTES` bytes a page
carries after its word sketch (:func:`prose_part`): a flags byte (:data:`ARTICLE` when the page is article-like),
then a one-bit MinHash of its distinct spots, which :func:`prose_similarity` compares.  A spot is a function word
(:data:`ANTECEDENTS`) and the next :data:`CHAIN` words that are not, within one block of the text the model weights
at least :data:`MIN_WEIGHT`.  The method and the rule that reads it: docs/how-it-works.md, step 3.  Integers and
xxhash only: the same part in every process, compiled or not."""

from __future__ import annotations

import re

from simhash_filter.model.core import compiled_sketch
from simhash_filter.model.extract import PageText
from simhash_filter.model.features import tokenize
from simhash_filter.model.segment import CJK_RUN
from simhash_filter.model.sketch import ARTICLE, PART_BYTES, PROSE_BINS, prose_similarity, sketch
from simhash_filter.model.spotsig import (
    ANTECEDENTS,
    CHAIN,
    CHARS_PER_WORD,
    MAX_WORDS,
    MIN_PROSE_SHARE,
    MIN_SPOTS,
    MIN_WEIGHT,
    PROSE_ID,
    PROSE_LINE,
    SPOT_CHARS,
    SPOT_SEED,
)

__all__ = ["ANTECEDENTS", "ARTICLE", "PART_BYTES", "PROSE_ID", "SPOT_SEED", "prose_part", "prose_similarity", "spots"]

#: A line break after one of these ends a block; another is a space (a link or an emphasis inside a paragraph).
BLOCK_END_CHARS = ".!?:;。！？：；\"'”’)»"
_BLOCK_END = re.compile(rf"(?<=[{re.escape(BLOCK_END_CHARS)}])[ \t]*\n\s*")
_LINE_BREAKS = re.compile(r"\s*\n\s*")


#: What the compiled core's prose part (``_core_prose.pxi``) takes, in its order.
CORE_PARAMS = (MIN_WEIGHT, MIN_SPOTS, SPOT_CHARS, CHARS_PER_WORD, MAX_WORDS, PROSE_LINE, MIN_PROSE_SHARE, CHAIN,
               PROSE_BINS, SPOT_SEED, ARTICLE, PART_BYTES, BLOCK_END_CHARS)  # fmt: skip


def _read_lines(page: PageText) -> list[str]:
    """The blocks of the segments the model weights at least :data:`MIN_WEIGHT`, heaviest first, until about
    :data:`MAX_WORDS` words are read."""
    out: list[str] = []
    room = CHARS_PER_WORD * MAX_WORDS
    for weight, text in page.texts:
        if weight < MIN_WEIGHT or room <= 0:
            break
        text = text[:room]
        room -= len(text)
        out += (b for b in (_LINE_BREAKS.sub(" ", block).strip() for block in _BLOCK_END.split(text)) if b)
    return out


def spots(lines: list[str], max_tokens: int) -> dict[str, float]:
    """The distinct spots of *lines* (each a block: no chain crosses two), each as ``{spot: 1.0}``; at most
    *max_tokens* words are read.  A spot is its antecedent and the next :data:`CHAIN` other words."""
    out: dict[str, float] = {}
    budget = max_tokens
    for line in lines:
        if budget <= 0:
            break
        words = tokenize(line, budget)
        budget -= len(words)
        content = [w for w in words if w not in ANTECEDENTS]
        seen = 0  # content[seen] is the first content word after this one
        for w in words:
            if w not in ANTECEDENTS:
                seen += 1
            elif seen + CHAIN <= len(content):
                out[":".join((w, *content[seen : seen + CHAIN]))] = 1.0
    return out


def prose_part(page: PageText, max_tokens: int) -> bytes:
    """The :data:`PART_BYTES` bytes a page carries after its word sketch: its flags and its spots' MinHash (all
    zero for a page that is not article-like)."""
    if sum(len(text) for weight, text in page.texts if weight >= MIN_WEIGHT) < MIN_SPOTS * SPOT_CHARS:
        return bytes(PART_BYTES)
    lines = _read_lines(page)
    chars = [len(line) if line.isascii() else len(line) + 2 * sum(map(len, CJK_RUN.findall(line))) for line in lines]
    prose = sum(c for c in chars if c >= PROSE_LINE)  # a CJK character counts as three
    if prose < MIN_PROSE_SHARE * sum(chars) or prose < MIN_SPOTS * SPOT_CHARS:
        return bytes(PART_BYTES)
    found = spots(lines, min(max_tokens, MAX_WORDS))
    if len(found) < MIN_SPOTS:
        return bytes(PART_BYTES)
    if compiled_sketch is not None:
        minhash: bytes = compiled_sketch(found, PROSE_BINS, 1.0, SPOT_SEED)
    else:
        minhash = sketch(found, PROSE_BINS, 1.0, SPOT_SEED)
    return bytes([ARTICLE]) + minhash
