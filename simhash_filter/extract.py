"""Walk a parsed page once and weight its visible text by where it stands: main content, other, boilerplate.

The walk is iterative (``etree.iterwalk``), so hostile nesting cannot hit a recursion limit, and it
visits at most ``max_elements`` elements.  Roles come from generic signals only:

- *boilerplate*: navigation-like elements (``nav``, ``header``, ``footer``, ``aside``, ``menu``, or a
  class/id word such as ``nav``, ``menu``, ``sidebar``, ``banner``, ``ad``), and link lists (blocks whose
  visible text is mostly link text);
- *main content* (weight 1): the element reached by descending from the root into the child that holds
  a majority of the page's non-boilerplate, non-link text, as long as one does;
- *other* text, outside that element, is weighted down smoothly by the share of the text the descent
  kept at each level, so that a small change in the page never flips a whole block in or out.

Boilerplate gets ``boilerplate_weight``, capped so that it carries at most ``MAX_BOILERPLATE_MASS`` of
the weight of the rest.

Structure features (tag, parent tag, depth) are collected in the same walk; inside the content
element the depth counts from the content element, so the same article keeps its structure when it
is moved into another site's template.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from lxml import etree

BOILERPLATE_TAGS = frozenset({"nav", "header", "footer", "aside", "menu"})
BOILERPLATE_WORDS = frozenset(
    (
        "nav navbar navigation menu menubar header masthead footer sidebar sidenav breadcrumb breadcrumbs "
        "banner ad ads advert adverts advertisement advertising sponsor sponsored promo promotion cookie "
        "cookies share sharing social toolbar topbar pager pagination widget widgets subscribe newsletter "
        "popup modal related skip"
    ).split(" ")
)
LINK_LIST_TAGS = frozenset({"ul", "ol", "dl", "div", "table", "tbody", "tr", "td", "p", "section", "span", "li"})
_WORD_SPLIT = re.compile(r"[\s_\-:.]+|(?<=[a-z])(?=[A-Z])")

#: A block whose text is more than this share of link text is a link list.
LINK_DENSITY = 0.6
#: A boilerplate-looking element holding more than this share of the page's text is not boilerplate.
MAX_BOILERPLATE_SHARE = 0.6
#: Weight of text outside a content element that holds all of its parent's text (1 at a half share).
OUTSIDE_MIN_WEIGHT = 0.0
#: Boilerplate text carries at most this share of the weight of the other text.
MAX_BOILERPLATE_MASS = 0.1


@dataclass(slots=True)
class PageText:
    """Visible text of one page by role, and its structure features."""

    texts: tuple[tuple[float, str], ...] = ()  # (weight, text), heaviest first
    structure: Counter[str] = field(default_factory=Counter)  # feature -> summed decayed weight
    elements: int = 0
    truncated: bool = False


@lru_cache(maxsize=50_000)
def _boilerplate_words(value: str) -> bool:
    return any(w.lower() in BOILERPLATE_WORDS for w in _WORD_SPLIT.split(value))


def _looks_like_boilerplate(tag: str, el: etree._Element) -> bool:
    """Navigation, headers, footers, sidebars or ads, by tag, class, id or role."""
    if tag in BOILERPLATE_TAGS:
        return True
    get = el.get
    return any((v := get(a)) and _boilerplate_words(v) for a in ("class", "id", "role"))


def extract(
    root: etree._Element, *, dom_decay: float, boilerplate_weight: float, max_elements: int
) -> PageText:
    """Split the visible text under ``root`` by role and collect decayed structure features."""
    tags: list[str] = []
    parents: list[int] = []
    depths: list[int] = []
    ends: list[int] = []
    in_link: list[bool] = []
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
            in_link.append(tag == "a" or (parent >= 0 and in_link[parent]))
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
    return _split(tags, parents, depths, ends, in_link, candidates, seg_owner, seg_text, dom_decay,
                  boilerplate_weight, truncated)


def _subtree_sums(values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Sum of ``values`` over each element's subtree (elements are numbered in document order)."""
    cum = np.concatenate(([0], np.cumsum(values)))
    return cum[ends + 1] - cum[starts]


def _mark(n: int, starts: list[int] | np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Boolean per element: inside any of the subtrees given by ``starts``."""
    diff = np.zeros(n + 1, dtype=np.int64)
    s = np.asarray(starts, dtype=np.int64)
    np.add.at(diff, s, 1)
    np.add.at(diff, ends[s] + 1, -1)
    return np.cumsum(diff[:n]) > 0


def _structure(
    tags: list[str],
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
    """
    names: dict[str, int] = {}
    tid = np.fromiter((names.setdefault(t, len(names)) for t in tags), dtype=np.int64, count=len(tags))
    ptid = np.where(parent >= 0, tid[np.maximum(parent, 0)], -1)
    ptid[content] = -1
    d = np.where(in_content, depth - depth[content], depth)
    n_tags, n_depth = len(names), int(d.max()) + 1
    key = ((in_content.astype(np.int64) * (n_tags + 1) + ptid + 1) * n_tags + tid) * n_depth + d
    uniq, inverse = np.unique(key[keep], return_inverse=True)
    weights = np.bincount(inverse, weights=dom_decay ** d[keep].astype(np.float64), minlength=len(uniq))
    tag_of = list(names)
    out: Counter[str] = Counter()
    for k, w in zip(uniq.tolist(), weights.tolist(), strict=True):
        k, dd = divmod(k, n_depth)
        k, t = divmod(k, n_tags)
        inside, p = divmod(k, n_tags + 1)
        out[f"{'c' if inside else 'o'}|{tag_of[p - 1] if p else ''}>{tag_of[t]}|{dd}"] = w
    return out


def _split(
    tags: list[str],
    parents: list[int],
    depths: list[int],
    ends_l: list[int],
    in_link_l: list[bool],
    candidates: list[int],
    seg_owner: list[int],
    seg_text: list[str],
    dom_decay: float,
    boilerplate_weight: float,
    truncated: bool,
) -> PageText:
    """Weight the text segments collected by the walk, and build the structure features."""
    n = len(tags)
    idx = np.arange(n)
    ends = np.asarray(ends_l, dtype=np.int64)
    parent = np.asarray(parents, dtype=np.int64)
    owner = np.asarray(seg_owner, dtype=np.int64)
    seg_len = np.fromiter((len(t.strip()) for t in seg_text), dtype=np.int64, count=len(seg_text))
    link = np.asarray(in_link_l, dtype=bool)
    own_text = np.bincount(owner, weights=seg_len, minlength=n) if len(owner) else np.zeros(n)
    text = _subtree_sums(own_text, idx, ends)
    total = text[0]

    # Boilerplate: navigation-like elements that do not hold most of the page; then link lists, judged
    # on the text that is left (an ad inside a block must not make the block look like content).
    boiler_starts = [i for i in candidates if text[i] <= MAX_BOILERPLATE_SHARE * total]
    boiler = _mark(n, boiler_starts, ends) if boiler_starts else np.zeros(n, dtype=bool)
    kept_own = np.where(boiler, 0, own_text)
    text = _subtree_sums(kept_own, idx, ends)
    link_text = _subtree_sums(np.where(link, kept_own, 0), idx, ends)
    is_list_tag = np.isin(np.asarray(tags), list(LINK_LIST_TAGS))
    small = text <= MAX_BOILERPLATE_SHARE * total
    dense = is_list_tag & (text > 0) & (link_text > LINK_DENSITY * text) & small
    if dense.any():
        boiler |= _mark(n, np.flatnonzero(dense), ends)

    # Main content: descend into the child holding most of the good (non-boilerplate, non-link) text
    # while it holds a majority.  Text left outside at each step is weighted down smoothly by the
    # share the child holds, so a small change in the page never flips a whole block in or out.
    good_own = np.where(boiler | link, 0, own_text)
    good = _subtree_sums(good_own, idx, ends)
    content = 0
    chain: list[tuple[int, float]] = []  # (element, share its best child holds)
    if good[0] > 0:
        while True:
            children = np.flatnonzero(parent == content)
            if len(children) == 0:
                break
            best = int(children[np.argmax(good[children])])
            share = good[best] / good[content] if good[content] > 0 else 0.0
            if share < 0.5:
                break
            chain.append((content, share))
            content = best
    # Text outside the content element takes the weight of its nearest ancestor on the descent path:
    # the product, from that level down, of 1 at a half share falling to OUTSIDE_MIN_WEIGHT at all of it.
    level_weights: list[float] = []
    weight = 1.0
    for _, share in reversed(chain):
        weight *= 1.0 - (share - 0.5) / 0.5 * (1.0 - OUTSIDE_MIN_WEIGHT)
        level_weights.append(weight)
    level_weight = np.ones(n)
    for (node, _), w in zip(chain, reversed(level_weights), strict=True):  # outer to inner: inner overwrite
        level_weight[node : ends[node] + 1] = w
    in_content = (idx >= content) & (idx <= ends[content])
    level_weight[in_content] = 1.0
    is_boiler = boiler | (link & ~in_content)
    # Boilerplate never outweighs the page: its mass is capped to a share of the rest.
    boiler_chars = float(own_text[is_boiler].sum())
    rest_mass = float((own_text * level_weight)[~is_boiler].sum())
    if boiler_chars > 0:
        boilerplate_weight = min(boilerplate_weight, MAX_BOILERPLATE_MASS * rest_mass / boiler_chars)
    seg_weight = np.where(is_boiler, boilerplate_weight, level_weight)
    groups: dict[float, list[str]] = {}
    if len(owner):
        for w, t in zip(np.round(seg_weight[owner], 3).tolist(), seg_text, strict=True):
            groups.setdefault(w, []).append(t)

    structure = _structure(tags, parent, np.asarray(depths), in_content, ~boiler, content, dom_decay)
    texts = tuple((w, "\n".join(ts)) for w, ts in sorted(groups.items(), reverse=True) if w > 0)
    return PageText(texts=texts, structure=structure, elements=n, truncated=truncated)
