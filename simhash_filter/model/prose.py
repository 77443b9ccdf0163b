"""The second verifier, for prose: spot signatures of a page's article text (model v6).

The word sketch (:mod:`simhash_filter.model.sketch`) counts every word of a page at least once, the host's chrome
included, so a short article syndicated into a long page template verifies under the threshold against its
original.  Spot signatures (Theobald, Siddharth and Paepcke, SIGIR 2008) are robust to that chrome: a *spot* is a
function word (an *antecedent*: ``the``, ``der``, ``le``, ``的``) followed by the next :data:`CHAIN` words that are
not function words, a chain never crossing a block (a line of the page's text).  Navigation, link lists and
teasers have few function words; running prose has many, and a copy of an article has the same spots in whatever
template it stands.  Only the text the model weights at least :data:`MIN_WEIGHT` (the main content and the text
near it, never the boilerplate) is read.

A page carries :data:`PART_BYTES` bytes for this after its word sketch (:func:`prose_part`):

- a flags byte, :data:`ARTICLE` when the page is article-like: at least :data:`MIN_SPOTS` distinct spots, and at
  least :data:`MIN_PROSE_SHARE` of its read characters in lines of :data:`PROSE_LINE` characters or more (prose,
  not a menu, a table or a list of options; a CJK character counts as three, as in the model's extraction);
- a one-bit MinHash of its distinct spots (:data:`PROSE_BINS` bins: the word sketch's hashing, with weight one and
  its own seed); two parts estimate the Jaccard similarity of the two pages' spot sets (:func:`prose_similarity`).

The index consults it only where the word sketch verifies no candidate, and only between two article-like pages
(:meth:`simhash_filter.index.nearduplicate.NearDuplicateIndex.best`).  Integers and xxhash only: the same page gives
the same part in every process and on every machine, compiled or not.
"""

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

#: A line break after one of these ends a block; another is a space (the model makes a line of each inline element's
#: text: a link or an emphasis inside a paragraph).
BLOCK_END_CHARS = ".!?:;。！？：；\"'”’)»"
_BLOCK_END = re.compile(rf"(?<=[{re.escape(BLOCK_END_CHARS)}])[ \t]*\n\s*")
_LINE_BREAKS = re.compile(r"\s*\n\s*")


#: What the compiled core's prose part takes, in its order (``_core_prose.pxi``: the same part from the text pass's
#: word table).
CORE_PARAMS = (MIN_WEIGHT, MIN_SPOTS, SPOT_CHARS, CHARS_PER_WORD, MAX_WORDS, PROSE_LINE, MIN_PROSE_SHARE, CHAIN,
               PROSE_BINS, SPOT_SEED, ARTICLE, PART_BYTES, BLOCK_END_CHARS)  # fmt: skip


def _read_lines(page: PageText) -> list[str]:
    """The blocks of the segments the model weights at least :data:`MIN_WEIGHT`, heaviest first, until about
    :data:`MAX_WORDS` words are read."""
    out: list[str] = []
    room = CHARS_PER_WORD * MAX_WORDS
    for weight, text in page.texts:
        if weight < MIN_WEIGHT or room <= 0:
            break  # heaviest first
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
        seen = 0  # content words before this one: content[seen] is the first after it
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
        return bytes(PART_BYTES)  # too little text to tell: most pages that are not articles
    lines = _read_lines(page)
    chars = [len(line) if line.isascii() else len(line) + 2 * sum(map(len, CJK_RUN.findall(line))) for line in lines]
    prose = sum(c for c in chars if c >= PROSE_LINE)  # a CJK character counts as three
    if prose < MIN_PROSE_SHARE * sum(chars) or prose < MIN_SPOTS * SPOT_CHARS:
        return bytes(PART_BYTES)  # told before the words are read: most pages that are not articles
    found = spots(lines, min(max_tokens, MAX_WORDS))
    if len(found) < MIN_SPOTS:
        return bytes(PART_BYTES)
    if compiled_sketch is not None:
        minhash: bytes = compiled_sketch(found, PROSE_BINS, 1.0, SPOT_SEED)
    else:
        minhash = sketch(found, PROSE_BINS, 1.0, SPOT_SEED)
    return bytes([ARTICLE]) + minhash
