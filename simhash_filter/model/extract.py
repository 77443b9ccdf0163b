"""Walk a parsed page once and weight its visible text by where it stands: main content, other, boilerplate.

The page is parsed by Lexbor behind the nesting guard (:func:`extract_page`; :mod:`~simhash_filter.model.lexbor`,
:mod:`~simhash_filter.model.nesting`); the walk of its tree is iterative, so hostile nesting cannot hit a recursion
limit, and it visits at most ``max_elements`` elements.  Roles come from generic signals only:

- *boilerplate*: navigation-like elements (``nav``, ``header``, ``footer``, ``aside``, ``menu``, ``form``,
  or a class/id word such as ``nav``, ``menu``, ``sidebar``, ``banner``, ``ad``, ``comments``), and link lists
  (blocks whose visible text is mostly link text) -- but never the elements around the page's prose when the
  marks would leave less than a paragraph of the page, or would hold most of its prose (see ``PROSE_CHARS``);
- *main content* (weight 1): the element reached by descending from the root into the child that holds
  a majority of the page's non-boilerplate, non-link text, as long as one does;
- *other* text, outside that element, is weighted down smoothly by the share of the text the descent
  kept at each level, so that a small change in the page never flips a whole block in or out.

Boilerplate gets ``boilerplate_weight``, capped so that it carries at most ``MAX_BOILERPLATE_MASS`` of
the weight of the rest.  Volatile lines -- short text segments made largely of numbers: visit counters,
timestamps, "generated in" lines, session ids -- count ``VOLATILE_WEIGHT`` of their place's weight.

Structure features (tag, parent tag, depth) are collected in the same walk; inside the content
element the depth counts from the content element, so the same article keeps its structure when it
is moved into another site's template.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cache, lru_cache
from itertools import islice
from typing import TYPE_CHECKING, Any

import numpy as np

from simhash_filter.model import lexbor
from simhash_filter.model.core import (
    compiled_class_words,
    compiled_guard,
    compiled_lexbor_walk_split,
)
from simhash_filter.model.nesting import guard
from simhash_filter.model.segment import CJK_RUN

if TYPE_CHECKING:  # lxml trees are read by extract() only (the benchmarks'); the model parses with Lexbor
    from lxml import etree

BOILERPLATE_TAGS = frozenset({"nav", "header", "footer", "aside", "menu", "form"})
BOILERPLATE_WORDS = frozenset(
    (
        "nav navbar navigation menu menubar header masthead footer sidebar sidenav breadcrumb breadcrumbs "
        "banner ad ads advert adverts advertisement advertising sponsor sponsored promo promotion cookie "
        "cookies share sharing social toolbar topbar pager pagination widget widgets subscribe newsletter "
        "popup modal related skip comment comments disqus respond reply replies"
    ).split(" ")
)
#: Words of a class or id value that name the page's own content: with one of them, a boilerplate word in the same
#: value names a part of the content (``article-body pagination-first``), not chrome.
CONTENT_WORDS = frozenset(("article", "content", "story", "entry", "body", "post"))
LINK_LIST_TAGS = frozenset({"ul", "ol", "dl", "div", "table", "tbody", "tr", "td", "p", "section", "span", "li"})
_WORD_SPLIT = re.compile(r"[\s_\-:.]+|(?<=[a-z])(?=[A-Z])")

#: A block whose text is more than this share of link text is a link list.
LINK_DENSITY = 0.6
#: A link-dense block is still content when a child that is not link-dense holds non-link text of at least
#: this share of the block's link text.
CONTENT_BESIDE_LINKS = 0.25
#: A page whose text outside links (and outside navigation, headers, footers) is less than this share of its
#: text outside navigation, headers and footers is a hub page: its link lists are its content.
HUB_TEXT_SHARE = 0.25
#: Text is measured in characters; a CJK character counts as this many (it says about as much as a word).
CJK_CHAR_TEXT = 3
#: A boilerplate-looking element holding more than this share of the page's text is not boilerplate.
MAX_BOILERPLATE_SHARE = 0.6
#: An element whose own text outside links is at least this long (a CJK character counting CJK_CHAR_TEXT) is
#: a paragraph of prose.  When the boilerplate marks leave less than a paragraph of the page, no class word
#: counts on the path down to the page's prose (:func:`_prose_path`).
PROSE_CHARS = 100
#: ... and when they would hold most of the page's prose, no class word counts on the path down to it wherever
#: that path holds at least this many paragraphs (a banner or a cookie notice of one or two long paragraphs stays
#: chrome).
PROSE_PARAGRAPHS = 3
#: Weight of text outside a content element that holds all of its parent's text (1 at a half share).
OUTSIDE_MIN_WEIGHT = 0.0
#: Boilerplate text carries at most this share of the weight of the other text.
MAX_BOILERPLATE_MASS = 0.1
#: Volatile lines (visit counters, timestamps, "generated in" lines, session ids: a text segment of at
#: most VOLATILE_MAX_WORDS words, at least VOLATILE_SHARE of them with digits) count this share of
#: their place's weight, so that what changes on every fetch moves the fingerprint little.
VOLATILE_WEIGHT = 0.1
VOLATILE_MAX_WORDS = 12
VOLATILE_MAX_CHARS = 160
VOLATILE_SHARE = 0.25
_DIGITS = re.compile(r"\d+")
#: A line break (with the spaces around it) between two CJK characters: not rendered (CSS Text's segment
#: break rule for East Asian text), so Chinese text re-wrapped in the source reads the same.
_CJK_LINE_BREAK = re.compile(
    r"(?<=[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef])[ \t\r]*\n\s*"
    r"(?=[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef])"
)
_WORDS = re.compile(r"[^\W_]+")


@dataclass(slots=True)
class PageText:
    """Visible text of one page by role, and its structure features."""

    texts: tuple[tuple[float, str], ...] = ()  # (weight, text), heaviest first
    structure: Counter[str] = field(default_factory=Counter)  # feature -> summed decayed weight
    elements: int = 0
    truncated: bool = False
    title: str = ""  # the page's <title>, as written (model v7's site part reads it)

    def main_text(self) -> str:
        """The text the page is mostly about: its heaviest-weighted segments (the main content, outside
        boilerplate, link lists and volatile lines), in document order, one per line."""
        return self.texts[0][1] if self.texts else ""


@lru_cache(maxsize=50_000)
def _boilerplate_words(value: str) -> bool:
    """A class, id or role value that names chrome: one of its words is a boilerplate word and none is a content
    word (``content-with-sidebar``, ``article-body pagination-first`` name the article's own block)."""
    words = {w.lower() for w in _WORD_SPLIT.split(value)}
    return not words.isdisjoint(BOILERPLATE_WORDS) and words.isdisjoint(CONTENT_WORDS)


@cache
def _class_words() -> Any:
    """The compiled core's judge of class, id and role values (:func:`_boilerplate_words` in C, for ASCII values)."""
    return None if compiled_class_words is None else compiled_class_words(BOILERPLATE_WORDS, CONTENT_WORDS)


def _looks_like_boilerplate(tag: str, el: etree._Element) -> bool:
    """Navigation, headers, footers, sidebars or ads, by tag, class, id or role."""
    if tag in BOILERPLATE_TAGS:
        return True
    get = el.get
    return any((v := get(a)) and _boilerplate_words(v) for a in ("class", "id", "role"))


def extract_page(data: bytes, *, dom_decay: float, boilerplate_weight: float, max_elements: int) -> PageText:
    """Split the visible text of the page *data* (UTF-8 bytes) by role and collect decayed structure features: the
    model's path (model v6), the page parsed by Lexbor behind the nesting guard (:mod:`~simhash_filter.model.lexbor`,
    :mod:`~simhash_filter.model.nesting`)."""
    if compiled_lexbor_walk_split is not None and compiled_guard is not None:
        texts, structure, elements, truncated = compiled_lexbor_walk_split(
            compiled_guard(data), max_elements, BOILERPLATE_TAGS, _boilerplate_words, _class_words(), dom_decay,
            boilerplate_weight, _remove_cjk_line_breaks, LINK_LIST_TAGS, _SPLIT_PARAMS,
        )  # fmt: skip
        return PageText(texts=texts, structure=Counter(structure), elements=elements, truncated=truncated)
    walked = lexbor.walk(guard(data), max_elements, BOILERPLATE_TAGS, _boilerplate_words)
    if not walked[1]:
        return PageText(truncated=walked[8])
    return _split(*walked[:8], dom_decay, boilerplate_weight, walked[8])


def extract(root: etree._Element, *, dom_decay: float, boilerplate_weight: float, max_elements: int) -> PageText:
    """Split the visible text under the lxml tree ``root`` by role and collect decayed structure features: the model
    before v6, whose parser was libxml2, in Python only (:func:`extract_page` is the model's path now; this one
    stays for the benchmarks that read lxml trees: ``bench_fingerprint``'s stages, ``bench_text_kinds``)."""
    from lxml import etree
    # The elements in document order, each read once through a few C-level accessors; everything
    # else (parents, depths, subtree ends, text order, link and boilerplate marks) is computed from
    # these lists.  Trees with other nodes (comments, entities) or more than ``max_elements``
    # elements take the event walk instead, which gives the same result.
    els = list(islice(root.iter(), max_elements + 1))
    n = len(els)
    tags = [e.tag for e in els]
    names: dict[str, int] = {}
    tid = [names.setdefault(t, len(names)) for t in tags]
    if n > max_elements or not all(isinstance(t, str) for t in names):
        return _extract_walk(root, dom_decay, boilerplate_weight, max_elements)
    index = {e: i for i, e in enumerate(els)}
    index[root.getparent()] = -1  # the root's parent (None for a document's root) is outside the walk
    parents = [index[e.getparent()] for e in els]
    depths = [0] * n
    for i in range(1, n):
        depths[i] = depths[parents[i]] + 1
    ends = list(range(n))  # last element of each subtree: children come after their parent
    for i in range(n - 1, 0, -1):
        p = parents[i]
        if ends[p] < ends[i]:
            ends[p] = ends[i]

    get = etree._Element.get
    words = _boilerplate_words
    candidates = [
        i
        for i, (tag, c, d, r) in enumerate(
            zip(
                tags,
                [get(e, "class") for e in els],
                [get(e, "id") for e in els],
                [get(e, "role") for e in els],
                strict=True,
            )
        )
        if tag in BOILERPLATE_TAGS or (c and words(c)) or (d and words(d)) or (r and words(r))
    ]

    # Text segments in the order of an event walk: an element's text at its start, its tail after
    # the end of its subtree, where the tails of elements ending together close innermost first.
    step = max(depths) + 2
    top = step - 1
    segs = [(i * step, i, t) for i, t in enumerate([e.text for e in els]) if t and not t.isspace()]
    segs += [
        (ends[i] * step + top - depths[i], parents[i], t)
        for i, t in enumerate([e.tail for e in els])
        if i and t and not t.isspace()
    ]
    segs.sort()
    return _split(
        list(names),
        tid,
        parents,
        depths,
        ends,
        candidates,
        [s[1] for s in segs],
        [s[2] for s in segs],
        dom_decay,
        boilerplate_weight,
        False,
    )


def _extract_walk(root: etree._Element, dom_decay: float, boilerplate_weight: float, max_elements: int) -> PageText:
    """:func:`extract` by an event walk over every node, stopping after ``max_elements`` elements."""
    from lxml import etree
    tags: list[str] = []
    parents: list[int] = []
    depths: list[int] = []
    ends: list[int] = []
    candidates: list[int] = []
    seg_owner: list[int] = []
    seg_text: list[str] = []
    stack: list[int] = []
    truncated = False
    for event, el in etree.iterwalk(root, events=("start", "end")):
        tag = el.tag
        if not isinstance(tag, str):  # entities and other non-element nodes: keep their tail only
            if event == "end" and stack and el.tail and not el.tail.isspace():
                seg_owner.append(stack[-1])
                seg_text.append(el.tail)
            continue
        if event == "start":
            i = len(tags)
            if i >= max_elements:
                truncated = True
                break
            parent = stack[-1] if stack else -1
            tags.append(tag)
            parents.append(parent)
            depths.append(len(stack))
            ends.append(i)
            if _looks_like_boilerplate(tag, el):
                candidates.append(i)
            stack.append(i)
            if el.text and not el.text.isspace():
                seg_owner.append(i)
                seg_text.append(el.text)
        else:
            i = stack.pop()
            ends[i] = len(tags) - 1
            if stack and el.tail and not el.tail.isspace():
                seg_owner.append(stack[-1])
                seg_text.append(el.tail)
    n = len(tags)
    if n == 0:
        return PageText(truncated=truncated)
    if truncated:  # close the elements still open when the cap was hit
        for i in stack:
            ends[i] = n - 1
    names: dict[str, int] = {}
    tid = [names.setdefault(t, len(names)) for t in tags]
    return _split(
        list(names),
        tid,
        parents,
        depths,
        ends,
        candidates,
        seg_owner,
        seg_text,
        dom_decay,
        boilerplate_weight,
        truncated,
    )


def _remove_cjk_line_breaks(text: str) -> str:
    return _CJK_LINE_BREAK.sub("", text)


#: The constants of :func:`_split`, in the order the compiled core's ``split`` takes them.
_SPLIT_PARAMS = (
    MAX_BOILERPLATE_SHARE,
    LINK_DENSITY,
    CONTENT_BESIDE_LINKS,
    HUB_TEXT_SHARE,
    OUTSIDE_MIN_WEIGHT,
    MAX_BOILERPLATE_MASS,
    VOLATILE_WEIGHT,
    VOLATILE_MAX_WORDS,
    VOLATILE_MAX_CHARS,
    VOLATILE_SHARE,
    CJK_CHAR_TEXT,
    PROSE_CHARS,
    PROSE_PARAGRAPHS,
)


def _volatile(seg_text: list[str]) -> np.ndarray | None:
    """Which text segments are volatile lines: at most ``VOLATILE_MAX_WORDS`` words, at least
    ``VOLATILE_SHARE`` of them holding digits (None when no segment has a digit)."""
    joined = "\x00".join(seg_text)  # one regex pass over the page finds the segments with digits
    found = [m.start() for m in _DIGITS.finditer(joined)]
    if not found:
        return None
    starts = np.cumsum([0, *(len(t) + 1 for t in seg_text[:-1])])
    out = np.zeros(len(seg_text), dtype=bool)
    for i in np.unique(np.searchsorted(starts, found, side="right") - 1).tolist():
        text = seg_text[i]
        if _visible_len(text) > VOLATILE_MAX_CHARS:
            continue
        words = _WORDS.findall(text)
        if len(words) <= VOLATILE_MAX_WORDS:
            out[i] = sum(_DIGITS.search(w) is not None for w in words) >= VOLATILE_SHARE * len(words)
    return out


def _visible_len(text: str) -> int:
    """Characters of ``text`` as a browser shows them: each run of whitespace is one space, none at the ends
    (so that re-wrapping or re-indenting a page does not change how much text a block holds)."""
    return len(" ".join(text.split()))


def _subtree_sums(values: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Sum of ``values`` over each element's subtree, the elements numbered in document order and
    ``ends`` holding each subtree's last element.  The values are whole numbers: every sum is exact."""
    cum = np.cumsum(values)
    sums: np.ndarray = cum[ends] - cum + values
    return sums


def _mark(idx: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Boolean per element (``idx``: their numbers): inside any of the subtrees given by ``starts``,
    i.e. some start at or before it has its subtree's end at or after it."""
    reach = np.full(len(idx), -1, dtype=np.int64)
    reach[starts] = ends[starts]
    return np.maximum.accumulate(reach) >= idx


def decay_powers(decay: float, n: int) -> np.ndarray:
    """``decay ** d`` for d < n, by repeated multiplication: each step one correctly rounded product, so the
    same on every machine (numpy's ``power`` is vectorised differently on different CPUs and can differ in
    the last bit)."""
    out = np.empty(n)
    p = 1.0
    for i in range(n):
        out[i] = p
        p *= decay
    return out


def _structure(
    tid: np.ndarray,
    tag_of: list[str],
    parent: np.ndarray,
    depth: np.ndarray,
    in_content: np.ndarray,
    keep: np.ndarray,
    content: int,
    dom_decay: float,
) -> Counter[str]:
    """(inside content?, parent tag, tag, depth) features, each summing ``dom_decay ** depth``.

    Depth counts from the content element inside it and from the root outside it; the content
    element's own parent belongs to the template, so it is left out of that element's feature.
    ``tid`` numbers the tags in order of first appearance (``tag_of`` names them).
    """
    ptid = np.where(parent >= 0, tid[np.maximum(parent, 0)], -1)
    ptid[content] = -1
    d = np.where(in_content, depth - depth[content], depth)
    n_tags, n_depth = len(tag_of), int(d.max()) + 1
    key = ((in_content.astype(np.int64) * (n_tags + 1) + ptid + 1) * n_tags + tid) * n_depth + d
    uniq, inverse = np.unique(key[keep], return_inverse=True)
    weights = np.bincount(inverse, weights=decay_powers(dom_decay, n_depth)[d[keep]], minlength=len(uniq))
    out: Counter[str] = Counter()
    for k, w in zip(uniq.tolist(), weights.tolist(), strict=True):
        k, dd = divmod(k, n_depth)
        k, t = divmod(k, n_tags)
        inside, p = divmod(k, n_tags + 1)
        out[f"{'c' if inside else 'o'}|{tag_of[p - 1] if p else ''}>{tag_of[t]}|{dd}"] = w
    return out


def _prose_path(prose_own: np.ndarray, ends_l: list[int]) -> np.ndarray:
    """Boolean per element: on the path from the root down to the element that holds the page's prose (the
    elements whose own text outside links is a paragraph, ``PROSE_CHARS`` or more), descending into the child
    holding a majority of the prose while one does.  Where the boilerplate marks swallow the page's prose, a class
    word on these elements is taken to say nothing: a blog platform's ``widget`` wrapper, a ``sidebar`` layout
    column or a ``header`` element around the article is where the article is."""
    n = len(ends_l)
    on_path = np.zeros(n, dtype=bool)
    prose = _subtree_sums(prose_own, np.asarray(ends_l, dtype=np.int64)).tolist()
    node = 0
    while prose[node] > 0:
        on_path[node] = True
        child, last = node + 1, ends_l[node]
        best = -1
        while child <= last:
            if best < 0 or prose[child] > prose[best]:
                best = child
            child = ends_l[child] + 1
        if best < 0 or prose[best] * 2 < prose[node]:
            break
        node = best
    return on_path


def _split(
    tag_of: list[str],
    tid_l: list[int],
    parents: list[int],
    depths: list[int],
    ends_l: list[int],
    candidates: list[int],
    seg_owner: list[int],
    seg_text: list[str],
    dom_decay: float,
    boilerplate_weight: float,
    truncated: bool,
) -> PageText:
    """Weight the text segments collected by the walk, and build the structure features.

    ``tid_l`` numbers each element's tag by order of first appearance, ``tag_of`` names the numbers.
    """
    seg_text = [t if t.isascii() else _remove_cjk_line_breaks(t) for t in seg_text]
    n = len(tid_l)
    tid = np.asarray(tid_l, dtype=np.int64)
    ends = np.asarray(ends_l, dtype=np.int64)
    idx = np.arange(n)
    parent = np.asarray(parents, dtype=np.int64)
    owner = np.asarray(seg_owner, dtype=np.int64)
    seg_len = np.fromiter(map(_visible_len, seg_text), dtype=np.int64, count=len(seg_text))
    wide = [k for k, seg in enumerate(seg_text) if not seg.isascii()]
    if wide:  # a Chinese character says about as much as a few Latin letters: count it as CJK_CHAR_TEXT
        seg_len[wide] += [(CJK_CHAR_TEXT - 1) * sum(map(len, CJK_RUN.findall(seg_text[k]))) for k in wide]
    a_id = tag_of.index("a") if "a" in tag_of else -1
    link = _mark(idx, np.flatnonzero(tid == a_id), ends)  # inside a link
    own_text = np.bincount(owner, weights=seg_len, minlength=n) if len(owner) else np.zeros(n)
    text = _subtree_sums(own_text, ends)
    total = text[0]

    # Boilerplate: navigation-like elements that do not hold most of the page; then link lists, judged
    # on the text that is left (an ad inside a block must not make the block look like content).
    cand = np.asarray(candidates, dtype=np.int64)
    boiler_starts = cand[text[cand] <= MAX_BOILERPLATE_SHARE * total]
    boiler = _mark(idx, boiler_starts, ends) if len(boiler_starts) else np.zeros(n, dtype=bool)
    prose_own = np.where(link | (own_text < PROSE_CHARS), 0, own_text)
    little_left = total - own_text[boiler].sum() < PROSE_CHARS <= total
    swallowed = 2 * prose_own[boiler].sum() > prose_own.sum()
    if little_left or swallowed:
        # Class words swallowed the article (less than a paragraph is left, or most of the prose is in the
        # marks): none of them counts on the path down to the page's prose -- a blog platform's widget or a
        # sidebar column around the article -- where that path holds several paragraphs (or nothing is left).
        on_path = _prose_path(prose_own, ends_l)
        if not little_left:
            on_path &= _subtree_sums((prose_own > 0).astype(np.int64), ends) >= PROSE_PARAGRAPHS
        boiler_starts = boiler_starts[~on_path[boiler_starts]]
        boiler = _mark(idx, boiler_starts, ends) if len(boiler_starts) else np.zeros(n, dtype=bool)
    kept_own = np.where(boiler, 0, own_text)
    chrome = boiler.copy()  # navigation, headers, footers, ads: never content, not even on a hub page
    text = _subtree_sums(kept_own, ends)
    link_text = _subtree_sums(np.where(link, kept_own, 0), ends)
    is_list_tag = np.fromiter((t in LINK_LIST_TAGS for t in tag_of), dtype=bool, count=len(tag_of))[tid]
    small = text <= MAX_BOILERPLATE_SHARE * total
    linky = link_text > LINK_DENSITY * text
    # A block of mostly links is no link list when a child of it that is not holds text of its own worth
    # CONTENT_BESIDE_LINKS of the block's links: a content cell beside a sidebar in one table row.
    beside = np.zeros(n)
    has_parent = parent >= 0
    np.maximum.at(beside, parent[has_parent], np.where(linky, 0.0, text - link_text)[has_parent])
    dense = is_list_tag & (text > 0) & linky & small & (beside < CONTENT_BESIDE_LINKS * link_text)
    if dense.any():
        boiler |= _mark(idx, np.flatnonzero(dense), ends)

    # Main content: descend into the child holding most of the good (non-boilerplate, non-link) text
    # while it holds a majority.  Text left outside at each step is weighted down smoothly by the
    # share the child holds, so a small change in the page never flips a whole block in or out.
    good_own = np.where(boiler | link, 0, own_text)
    good = _subtree_sums(good_own, ends)
    if good[0] < HUB_TEXT_SHARE * text[0]:
        # A hub page (a menu, a category or index page, a table of contents): what it says is mostly link
        # text outside the chrome.  Its link lists are its content, so that two hubs differ by their lists.
        boiler, link = chrome, np.zeros(n, dtype=bool)
        good = text
    content = 0
    chain: list[tuple[int, float]] = []  # (element, share its best child holds)
    if good[0] > 0:
        good_l = good.tolist()
        while True:
            child, last = content + 1, ends_l[content]
            if child > last:  # no children
                break
            best = child  # the first child with the most good text: children follow each other's subtrees
            while child <= last:
                if good_l[child] > good_l[best]:
                    best = child
                child = ends_l[child] + 1
            share = good_l[best] / good_l[content] if good_l[content] > 0 else 0.0
            if share < 0.5:
                break
            chain.append((content, share))
            content = best
    # Text outside the content element takes the weight of its nearest ancestor on the descent path:
    # the product, from that level down, of 1 at a half share falling to OUTSIDE_MIN_WEIGHT at all of it.
    # A level whose child holds all of its text (a wrapper) leaves no text outside and adds no factor:
    # wrappers around an example or a table inside the content must not silence the rest of the page.
    level_weights: list[float] = []
    weight = 1.0
    for _, share in reversed(chain):
        if share < 1.0:
            weight *= 1.0 - (share - 0.5) / 0.5 * (1.0 - OUTSIDE_MIN_WEIGHT)
        level_weights.append(weight)
    level_weight = np.ones(n)
    for (node, _), w in zip(chain, reversed(level_weights), strict=True):  # outer to inner: inner overwrite
        level_weight[node : ends[node] + 1] = w
    in_content = np.zeros(n, dtype=bool)
    in_content[content : ends[content] + 1] = True
    level_weight[in_content] = 1.0
    is_boiler = boiler | (link & ~in_content)
    # Boilerplate never outweighs the page: its mass is capped to a share of the rest.
    boiler_chars = float(own_text[is_boiler].sum())
    rest_mass = float((own_text * level_weight)[~is_boiler].sum())
    if boiler_chars > 0:
        boilerplate_weight = min(boilerplate_weight, MAX_BOILERPLATE_MASS * rest_mass / boiler_chars)
    seg_weight = np.where(is_boiler, boilerplate_weight, level_weight)[owner]
    volatile = _volatile(seg_text)
    if volatile is not None:
        seg_weight[volatile] *= VOLATILE_WEIGHT
    # One text per weight (rounded), heaviest first, its segments in document order.
    weights = np.round(seg_weight, 3)
    order = np.argsort(-weights, kind="stable")
    weights = weights[order]
    starts = [0, *(np.flatnonzero(weights[1:] != weights[:-1]) + 1).tolist()]
    segments = [seg_text[i] for i in order.tolist()]
    texts = (
        tuple(
            (w, "\n".join(segments[a:b]))
            for w, a, b in zip(weights[starts].tolist(), starts, [*starts[1:], len(segments)], strict=True)
            if w > 0
        )
        if len(segments)
        else ()
    )

    structure = _structure(tid, tag_of, parent, np.asarray(depths), in_content, ~boiler, content, dom_decay)
    return PageText(texts=texts, structure=structure, elements=n, truncated=truncated)
