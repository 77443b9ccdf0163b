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
from simhash_filter.model.sketch import sketch

__all__ = ["ARTICLE", "PART_BYTES", "PROSE_ID", "prose_part", "prose_similarity", "spots"]

#: Words after an antecedent that make one spot.
CHAIN = 3
#: Segments weighted under this are not read (boilerplate, link lists, volatile lines).
MIN_WEIGHT = 0.3
#: An article-like page has at least this many distinct spots ...
MIN_SPOTS = 24
#: ... and at least this share of its read characters in lines of at least :data:`PROSE_LINE` characters.
MIN_PROSE_SHARE = 0.5
PROSE_LINE = 120
#: Words read at most (the first of the heaviest text): an article's copies begin alike, and this bounds the work.
MAX_WORDS = 300
#: Characters read per word asked for (a word and its space are about six; CJK words are shorter).
_CHARS_PER_WORD = 8
#: Fewer characters of prose than this per spot asked for cannot make :data:`MIN_SPOTS` spots (a spot takes four
#: words, and the spots of a sentence overlap): such a page is not article-like, whatever its words.
_SPOT_CHARS = 12
#: Bins of the spots' one-bit MinHash (63 bytes: with the flags, 64 bytes a page).
PROSE_BINS = 504
#: xxhash64 seed of the spots (another than the word sketch's and the simhash's).
SPOT_SEED = 0x5B07
#: Bytes appended to the word sketch: the flags, then the spots' MinHash.
PART_BYTES = 1 + PROSE_BINS // 8
#: The flag of an article-like page.
ARTICLE = 1

#: Function words that start a spot: the most frequent articles, prepositions, pronouns and auxiliaries of the
#: languages of the web's news (English, German, French, Spanish, Italian, Portuguese, Dutch) and Chinese particles.
ANTECEDENTS = frozenset(
    """
    a an the is are was were be been has have had will would can could should may might must do does did this that
    these those there it its he she they we you his her their our of to in on at by for with from as and but or not
    said says about after before over into than which who what when where how also only
    der die das den dem des ein eine einen einem einer eines ist sind war waren wird werden hat haben hatte sich
    nicht mit von zu im auf für bei aus nach über auch und oder aber wie dass es er sie wir
    le la les un une des du de est sont était été a ont avait sera dans sur pour par avec au aux ce cette ces qui
    que il elle ils nous vous se ne pas et ou mais plus
    el los las unos unas es son fue era ha han en con por para del al que se lo su sus y o pero como más
    il lo gli uno di da nel nella sono è stato ha hanno per con che non e
    o os as um uma é são foi em no na do da dos das com por para que não
    het een is zijn was waren heeft hebben van op te met voor door dat niet en maar ook
    的 了 在 是 和 与 也 就 都 而 及 对 将 被 把 从 让 向 为 于 以 这 那 其 之 中 等 但 并 又
    我 他 她 它 们 我们 他们 一个 这个 没有 已经 可以 表示
    """.split()
)

#: Everything a part depends on, for the model id (:meth:`simhash_filter.model.config.FingerprintConfig.model`).
PROSE_ID = (
    f"spots1-{CHAIN}-w{MIN_WEIGHT}-n{MIN_SPOTS}/{_SPOT_CHARS}-p{MIN_PROSE_SHARE}/{PROSE_LINE}-m{MAX_WORDS}/"
    f"{_CHARS_PER_WORD}-b{PROSE_BINS}-s{SPOT_SEED}-a{len(ANTECEDENTS)}"
)


#: A line break after one of these ends a block; another is a space (the model makes a line of each inline element's
#: text: a link or an emphasis inside a paragraph).
_BLOCK_END = re.compile(r"(?<=[.!?:;。！？：；\"'”’)»])[ \t]*\n\s*")
_LINE_BREAKS = re.compile(r"\s*\n\s*")


def _read_lines(page: PageText) -> list[str]:
    """The blocks of the segments the model weights at least :data:`MIN_WEIGHT`, heaviest first, until about
    :data:`MAX_WORDS` words are read."""
    out: list[str] = []
    room = _CHARS_PER_WORD * MAX_WORDS
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
    if sum(len(text) for weight, text in page.texts if weight >= MIN_WEIGHT) < MIN_SPOTS * _SPOT_CHARS:
        return bytes(PART_BYTES)  # too little text to tell: most pages that are not articles
    lines = _read_lines(page)
    chars = [len(line) if line.isascii() else len(line) + 2 * sum(map(len, CJK_RUN.findall(line))) for line in lines]
    prose = sum(c for c in chars if c >= PROSE_LINE)  # a CJK character counts as three
    if prose < MIN_PROSE_SHARE * sum(chars) or prose < MIN_SPOTS * _SPOT_CHARS:
        return bytes(PART_BYTES)  # told before the words are read: most pages that are not articles
    found = spots(lines, min(max_tokens, MAX_WORDS))
    if len(found) < MIN_SPOTS:
        return bytes(PART_BYTES)
    if compiled_sketch is not None:
        minhash = compiled_sketch(found, PROSE_BINS, 1.0, SPOT_SEED)
    else:
        minhash = sketch(found, PROSE_BINS, 1.0, SPOT_SEED)
    return bytes([ARTICLE]) + minhash


def prose_similarity(a: bytes, b: bytes) -> float | None:
    """The estimated Jaccard similarity of two article-like pages' spots (from their :func:`prose_part`), or None
    when either page is not article-like."""
    if len(a) != PART_BYTES or len(b) != PART_BYTES:
        raise ValueError(f"prose parts must be {PART_BYTES} bytes, got {len(a)} and {len(b)}")
    if not (a[0] & b[0] & ARTICLE):
        return None
    differ = (int.from_bytes(a[1:], "little") ^ int.from_bytes(b[1:], "little")).bit_count()
    return max(0.0, 2.0 * (1.0 - differ / PROSE_BINS) - 1.0)
