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
from functools import lru_cache
from itertools import compress

import numpy as np
from lxml import etree

from simhash_filter.segment import CJK_RUN

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
#: A link-dense block is still content when a child that is not link-dense holds non-link text of at least
#: this share of the block's link text.
CONTENT_BESIDE_LINKS = 0.25
#: Text is measured in characters; a CJK character counts as this many (it says about as much as a word).
CJK_CHAR_TEXT = 3
#: A boilerplate-looking element holding more than this share of the page's text is not boilerplate.
MAX_BOILERPLATE_SHARE = 0.6
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
_DIGITS_TO_END = re.compile(r"\d[^\x00]*")
_WORDS = re.compile(r"[^\W_]+")
#: One match for each word (as _WORDS finds them) that holds a digit: from its start to its first digit.
_DIGIT_WORDS = re.compile(r"(?<![^\W_])[^\W\d_]*\d")


@dataclass(slots=True)
class PageText:
    """Visible text of one page by role, and its structure features."""

    texts: tuple[tuple[float, str], ...] = ()  # (weight, text), heaviest first
    structure: Counter[str] = field(default_factory=Counter)  # feature -> summed decayed weight
    elements: int = 0
    truncated: bool = False


@lru_cache(maxsize=50_000)
def _boilerplate_words(value: str | bytes) -> bool:
    """Whether a class, id or role value holds a boilerplate word (bytes: as serialized, escaped)."""
    if isinstance(value, bytes):
        value = _unescape(value.decode("utf-8"))
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
    try:
        read = _read_serialized(root, max_elements)
    except (_Unreadable, UnicodeDecodeError):
        read = None
    if read is None:
        return _extract_walk(root, dom_decay, boilerplate_weight, max_elements)
    return _split(*read, dom_decay, boilerplate_weight, False)


#: The name of each start tag in libxml2's XML serialization (a name holds no space, ``/`` or ``>``).
_TAG_NAME = re.compile(rb"<([^ />]+)")
#: What the serializer escapes in text and attribute values: predefined entities, character references.
_REFERENCE = re.compile(r"&(?:(lt|gt|amp|quot|apos)|#([0-9]+)|#x([0-9a-fA-F]+));")
_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}
#: Document type ids under which libxml2 writes XHTML (which adds attributes, e.g. ``id`` to ``<a name>``).
_XHTML_PUBLIC_IDS = frozenset(f"-//W3C//DTD XHTML 1.0 {k}//EN" for k in ("Strict", "Frameset", "Transitional"))
_XHTML_SYSTEM_IDS = frozenset(
    f"http://www.w3.org/TR/xhtml1/DTD/xhtml1-{k}.dtd" for k in ("strict", "frameset", "transitional")
)
_LT, _GT, _SLASH, _AMP, _HASH, _X, _EQUALS, _QUOTE, _SPACE, _BANG, _QUESTION = b"<>/&#x=\" !?"
#: The attributes that can mark boilerplate, as the (little-endian) bytes just before a value's quote.
_MARK_CLASS, _MARK_ID, _MARK_ROLE = (int.from_bytes(b, "little") for b in (b" class=", b" id=", b" role="))
_EVERY_BYTE = np.uint64(0x0101010101010101)
_HIGH_BITS = np.uint64(0x8080808080808080)
#: The bytes that end a tag name, repeated over the eight bytes of a word.
_NAME_ENDS = tuple(np.uint64(c * 0x0101010101010101) for c in b" />")
#: ``_LOW_BYTES[k]`` keeps the k lowest bytes of a word.
_LOW_BYTES = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)


class _Unreadable(Exception):
    """The serialization holds something the event walk reads differently (an entity reference)."""


def _unescape(text: str) -> str:
    """``text`` with the serializer's escapes replaced (:class:`_Unreadable` for an entity reference)."""
    out, count = _REFERENCE.subn(_character, text)
    if count != text.count("&"):
        raise _Unreadable
    return out


def _character(m: re.Match[str]) -> str:
    name, decimal, hexadecimal = m.groups()
    return _ENTITIES[name] if name else chr(int(decimal) if decimal else int(hexadecimal, 16))


def _serialize(root: etree._Element) -> bytes:
    """``root`` and its subtree, without its tail, as libxml2 writes XML (UTF-8, no declaration)."""
    info = root.getroottree().docinfo
    public, system = info.public_id, info.system_url
    xhtml_public, xhtml_system = public in _XHTML_PUBLIC_IDS, system in _XHTML_SYSTEM_IDS
    if not (xhtml_public or xhtml_system):
        return etree.tostring(root, encoding="utf-8", with_tail=False)
    try:  # clear the XHTML ids for the time of the call; they are put back as they were
        if xhtml_public:
            info.public_id = None
        if xhtml_system:
            info.system_url = None
        return etree.tostring(root, encoding="utf-8", with_tail=False)
    finally:
        if xhtml_public:
            info.public_id = public
        if xhtml_system:
            info.system_url = system


def _read_serialized(
    root: etree._Element, max_elements: int
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]] | None:
    """What :func:`_split` takes, read from the tree's serialization in a few C-level passes rather than
    element by element through lxml's proxies: the tags (numbered in order of first appearance), each
    element's parent, depth and last descendant, the boilerplate candidates, and the text segments in
    the order of an event walk with the element each belongs to (its own text, or a child's tail).

    In the serialization ``<`` and ``>`` appear only as tag delimiters and ``"`` inside a tag only
    around attribute values: every other one is escaped.  None where the serialization could read
    differently from the event walk: a tree of the XML parser (namespaced names), nodes other than
    elements and text (comments, processing instructions, CDATA), characters the serializer cannot
    write (``&#xFFFD;``), names holding ``<`` or ``"``, or more than ``max_elements`` elements.
    """
    if root.getroottree().docinfo.xml_version is not None:  # not the HTML parser's tree
        return None
    data = _serialize(root)
    size = len(data)
    padded = bytes(8) + data + bytes(16)
    a = np.frombuffer(padded, dtype=np.uint8, offset=8)  # the data and 16 zero bytes: a[i + 2] always exists
    # words[i + 8]: the 8 bytes from offset i on, as one little-endian number; words[i]: the 8 before it.
    words = np.ndarray((size + 17,), dtype="<u8", buffer=padded, strides=(1,))
    lt = np.flatnonzero(a == _LT)  # each tag from a "<" ...
    gt = np.flatnonzero(a == _GT)  # ... to the next ">"
    t = len(lt)
    if t == 0 or len(gt) != t or not ((lt < gt).all() and (gt[:-1] < lt[1:]).all()):
        return None
    after_lt = a[lt + 1]
    if ((after_lt == _BANG) | (after_lt == _QUESTION)).any():
        return None
    amp = np.flatnonzero(a == _AMP)
    if ((a[amp + 1] == _HASH) & (a[amp + 2] == _X)).any():  # only an unwritable character makes a hex reference
        return None
    close = after_lt == _SLASH  # </name>
    empty = a[gt - 1] == _SLASH  # <name .../>: an element with no children and no text
    delta = np.where(close, -1, np.where(empty, 0, 1))
    after = np.cumsum(delta)  # depth after each tag
    before = after - delta
    if after[-1] != 0 or (t > 1 and after[:-1].min() < 1):  # the root is closed by the last tag
        return None
    starts = np.flatnonzero(~close)  # each element's start tag, in document order
    n = len(starts)
    if n > max_elements:
        return None
    named = _tag_numbers(padded, words, lt[starts] + 1) or _tag_numbers_by_regex(data, n)
    if named is None:
        return None
    tag_of, tid = named
    number = np.cumsum(~close) - 1  # per tag: the last element started at or before it

    # Start and end tags pair up level by level: at each depth they alternate in document order.
    paired = np.flatnonzero(~empty)
    order = paired[np.argsort(np.where(close, after, before)[paired], kind="stable")]
    opens, closes = order[0::2], order[1::2]
    if close[opens].any() or not close[closes].all():
        return None
    ends = number[starts]  # an empty element ends with itself
    ends[number[opens]] = number[closes]
    depths = before[starts]
    # What stands at depth d + 1 belongs to the last start tag at depth d before it.
    open_key = before[opens] * t + opens  # ascending: by depth, then position
    parents = np.full(n, -1, dtype=np.int64)
    inner = np.flatnonzero(depths > 0)
    parents[inner] = number[opens[np.searchsorted(open_key, (depths[inner] - 1) * t + starts[inner]) - 1]]

    text = data.decode("utf-8")
    # The bytes that continue a character (10xxxxxx): a byte offset less those before it is a character offset.
    follow = None if len(text) == size else np.flatnonzero((a[:size] & 0xC0) == 0x80)

    # Boilerplate candidates: by tag, or by a class, id or role value.  Quotes inside tags pair up
    # as ="value" (a quote in an attribute's name breaks the pattern: then the event walk reads it).
    candidate = np.fromiter((name in BOILERPLATE_TAGS for name in tag_of), dtype=bool, count=len(tag_of))[tid]
    quote = np.flatnonzero(a == _QUOTE)
    tag = np.searchsorted(lt, quote, side="right") - 1
    inside = quote < gt[tag]
    quote, tag = quote[inside], tag[inside]
    if len(quote):
        first, last = quote[0::2], quote[1::2]
        if len(first) != len(last) or (tag[0::2] != tag[1::2]).any() or (a[first - 1] != _EQUALS).any():
            return None
        if not ((a[last + 1] == _SPACE) | (a[last + 1] == _SLASH) | (a[last + 1] == _GT)).all():
            return None
        back = words[first]  # the 8 bytes before each opening quote
        mark = ((back >> 8) == _MARK_CLASS) | ((back >> 32) == _MARK_ID) | ((back >> 16) == _MARK_ROLE)
        first, last, tag = first[mark] + 1, last[mark], tag[0::2][mark]
        candidate[number[tag[_marked(text, words, first, last, amp, follow)]]] = True

    # Text segments: the non-blank text between two tags; after a start tag it is the element's text,
    # after an end tag (or an empty element) the tail of that element, which belongs to its parent.
    begin, stop = gt[:-1] + 1, lt[1:]  # text k lies between tag k and tag k + 1
    filled = np.flatnonzero(stop > begin)
    if len(filled):
        solid = (a > 32) | ((a < 28) & ((a < 9) | (a > 13)))  # not ASCII whitespace (as str.isspace sees it)
        bounds = np.empty(2 * len(filled), dtype=np.int64)
        bounds[0::2], bounds[1::2] = begin[filled], stop[filled]
        filled = filled[np.logical_or.reduceat(solid, bounds)[0::2]]
    texts = _slices(text, begin[filled], stop[filled], follow)
    for k in _holding(amp, begin[filled], stop[filled]):
        texts[k] = _unescape(texts[k])
    blank = np.fromiter(map(str.isspace, texts), dtype=bool, count=len(texts))
    if blank.any():  # Unicode spaces only, or escaped ones
        keep = ~blank
        filled, texts = filled[keep], list(compress(texts, keep.tolist()))
    seg_owner = number[opens[np.searchsorted(open_key, (after[filled] - 1) * t + filled, side="right") - 1]]
    return (tag_of, tid, parents, depths, ends, np.flatnonzero(candidate), seg_owner, texts)


def _tag_numbers(padded: bytes, words: np.ndarray, at: np.ndarray) -> tuple[list[str], np.ndarray] | None:
    """The tag names starting at data offsets ``at``, and each one's number in order of first appearance,
    from two 8-byte words per name (None if a name is 16 bytes or longer)."""
    low, high = words[at + 8], words[at + 16]
    end_low, end_high = _name_end(low), _name_end(high)
    length = np.where(end_low < 8, end_low, 8 + end_high)
    if (length >= 16).any():
        return None
    first, inverse = _distinct(_masked(low, high, length))
    order = np.argsort(first)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    at, length = at[first[order]] + 8, length[first[order]]
    names = [padded[i : i + k].decode("utf-8") for i, k in zip(at.tolist(), length.tolist(), strict=True)]
    return names, rank[inverse]


def _masked(low: np.ndarray, high: np.ndarray, length: np.ndarray) -> list[np.ndarray]:
    """The first ``length`` (at most 16) bytes of strings whose first 16 bytes are the words ``low`` and
    ``high``, as one or two keys (none of the bytes is zero, so equal keys mean equal strings)."""
    low = low & _LOW_BYTES[np.minimum(length, 8)]
    if (length <= 8).all():
        return [low]
    return [low, high & _LOW_BYTES[np.clip(length - 8, 0, 8)]]


def _distinct(keys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """For rows of keys (one array per key): the first row of each distinct combination, and each
    row's combination as an index into those."""
    order = np.lexsort(keys[::-1])  # stable: the first row of a run of equal keys is its first occurrence
    new = np.zeros(len(order), dtype=bool)
    new[:1] = True
    for key in keys:
        ordered = key[order]
        new[1:] |= ordered[1:] != ordered[:-1]
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return order[new], inverse


def _name_end(words: np.ndarray) -> np.ndarray:
    """Per word, the offset of its first byte that ends a tag name (8 if none does)."""
    found = np.zeros(len(words), dtype=np.uint64)
    for ends in _NAME_ENDS:  # a zero byte of x sets its high bit in (x - 1...1) & ~x, the first one exactly
        x = words ^ ends
        found |= (x - _EVERY_BYTE) & ~x & _HIGH_BITS
    lowest = np.maximum(found & (~found + np.uint64(1)), np.uint64(1))  # its lowest bit: 2 ** (8 * offset + 7)
    return np.where(found == 0, 8, (np.log2(lowest.astype(np.float64)).astype(np.int64) - 7) // 8)


def _tag_numbers_by_regex(data: bytes, n: int) -> tuple[list[str], np.ndarray] | None:
    """:func:`_tag_numbers` for any length of name, by a regex over the serialization."""
    names = _TAG_NAME.findall(data)
    if len(names) != n:
        return None
    ids = dict.fromkeys(names, 0)
    for i, name in enumerate(ids):
        ids[name] = i
    return [name.decode("utf-8") for name in ids], np.fromiter(map(ids.__getitem__, names), dtype=np.int64, count=n)


def _marked(
    text: str, words: np.ndarray, first: np.ndarray, last: np.ndarray, amp: np.ndarray, follow: np.ndarray | None
) -> np.ndarray:
    """Whether each attribute value (bytes ``first`` to ``last`` of the data) holds a boilerplate word.

    Values repeat (``class="item"``): those of at most 16 bytes are compared as two words, and each
    distinct one is read and judged once."""
    length = last - first
    short = np.flatnonzero(length <= 16)
    one = np.zeros(len(first), dtype=bool)  # the value read for each distinct short value, and each long one
    distinct, inverse = _distinct(_masked(words[first[short] + 8], words[first[short] + 16], length[short]))
    one[short[distinct]] = True
    one[length > 16] = True
    read = np.flatnonzero(one)
    values = _slices(text, first[read], last[read], follow)
    for k in _holding(amp, first[read], last[read]):
        values[k] = _unescape(values[k])
    memo = _MARKED
    marks = list(map(memo.get, values))
    if None in marks:
        if len(memo) > MAX_MARKED:
            memo.clear()
        for k, value in enumerate(values):
            if marks[k] is None:
                marks[k] = memo[value] = _boilerplate_words(value)
    judged = np.zeros(len(first), dtype=bool)
    judged[read] = marks
    judged[short] = judged[short[distinct]][inverse]
    return judged


def _slices(text: str, begin: np.ndarray, stop: np.ndarray, follow: np.ndarray | None) -> list[str]:
    """``text[begin:stop]`` for each pair of byte offsets of its UTF-8 form (``follow``: the offsets of
    the bytes that continue a character, None if there are none)."""
    if follow is not None:
        begin, stop = begin - np.searchsorted(follow, begin), stop - np.searchsorted(follow, stop)
    return list(map(text.__getitem__, map(slice, begin.tolist(), stop.tolist())))


def _holding(points: np.ndarray, begin: np.ndarray, stop: np.ndarray) -> list[int]:
    """Which of the sorted, disjoint spans ``[begin, stop)`` hold one of ``points``."""
    if not len(points) or not len(begin):
        return []
    k = np.searchsorted(begin, points, side="right") - 1
    hit = (k >= 0) & (points < stop[np.maximum(k, 0)])
    return np.unique(k[hit]).tolist()


#: Memo of class, id and role values -> whether they hold a boilerplate word (emptied past MAX_MARKED).
_MARKED: dict[str, bool] = {}
MAX_MARKED = 50_000


def _extract_walk(root: etree._Element, dom_decay: float, boilerplate_weight: float, max_elements: int) -> PageText:
    """:func:`extract` by an event walk over every node, stopping after ``max_elements`` elements."""
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
    return _split(list(names), tid, parents, depths, ends, candidates, seg_owner, seg_text, dom_decay,
                  boilerplate_weight, truncated)


def _volatile(seg_text: list[str]) -> np.ndarray | None:
    """Which text segments are volatile lines: at most ``VOLATILE_MAX_WORDS`` words, at least
    ``VOLATILE_SHARE`` of them holding digits (None when no short segment has a digit)."""
    lengths = np.fromiter(map(len, seg_text), dtype=np.int64, count=len(seg_text))
    short = np.flatnonzero(lengths <= VOLATILE_MAX_CHARS)
    if not len(short):
        return None
    texts = seg_text if len(short) == len(seg_text) else [seg_text[i] for i in short.tolist()]
    # One regex pass over the short segments finds those with a digit: a match runs from a segment's
    # first digit to its end.
    found = [m.start() for m in _DIGITS_TO_END.finditer("\x00".join(texts))]
    if not found:
        return None
    starts = np.zeros(len(texts), dtype=np.int64)
    np.cumsum(lengths[short][:-1] + 1, out=starts[1:])
    out = np.zeros(len(seg_text), dtype=bool)
    for j in np.unique(np.searchsorted(starts, found, side="right") - 1).tolist():
        words = len(_WORDS.findall(texts[j]))
        if words <= VOLATILE_MAX_WORDS:
            out[short[j]] = len(_DIGIT_WORDS.findall(texts[j])) >= VOLATILE_SHARE * words
    return out


def _subtree_sums(values: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Sum of ``values`` over each element's subtree, the elements numbered in document order and
    ``ends`` holding each subtree's last element.  The values are whole numbers: every sum is exact."""
    cum = np.cumsum(values)
    return cum[ends] - cum + values


def _mark(idx: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Boolean per element (``idx``: their numbers): inside any of the subtrees given by ``starts``,
    i.e. some start at or before it has its subtree's end at or after it."""
    reach = np.full(len(idx), -1, dtype=np.int64)
    reach[starts] = ends[starts]
    return np.maximum.accumulate(reach) >= idx


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
    weights = np.bincount(inverse, weights=dom_decay ** d[keep].astype(np.float64), minlength=len(uniq))
    out: Counter[str] = Counter()
    for k, w in zip(uniq.tolist(), weights.tolist(), strict=True):
        k, dd = divmod(k, n_depth)
        k, t = divmod(k, n_tags)
        inside, p = divmod(k, n_tags + 1)
        out[f"{'c' if inside else 'o'}|{tag_of[p - 1] if p else ''}>{tag_of[t]}|{dd}"] = w
    return out


def _split(
    tag_of: list[str],
    tids: list[int] | np.ndarray,
    parents: list[int] | np.ndarray,
    depths: list[int] | np.ndarray,
    ends_in: list[int] | np.ndarray,
    candidates: list[int] | np.ndarray,
    seg_owner: list[int] | np.ndarray,
    seg_text: list[str],
    dom_decay: float,
    boilerplate_weight: float,
    truncated: bool,
) -> PageText:
    """Weight the text segments collected by the walk, and build the structure features.

    ``tids`` numbers each element's tag by order of first appearance, ``tag_of`` names the numbers.
    """
    n = len(tids)
    tid = np.asarray(tids, dtype=np.int64)
    ends = np.asarray(ends_in, dtype=np.int64)
    ends_l = ends.tolist()
    idx = np.arange(n)
    parent = np.asarray(parents, dtype=np.int64)
    owner = np.asarray(seg_owner, dtype=np.int64)
    seg_len = np.fromiter(map(len, map(str.strip, seg_text)), dtype=np.int64, count=len(seg_text))
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
    kept_own = np.where(boiler, 0, own_text)
    text = _subtree_sums(kept_own, ends)
    link_text = _subtree_sums(np.where(link, kept_own, 0), ends)
    is_list_tag = np.fromiter((t in LINK_LIST_TAGS for t in tag_of), dtype=bool, count=len(tag_of))[tid]
    small = text <= MAX_BOILERPLATE_SHARE * total
    linky = link_text > LINK_DENSITY * text
    # A block of mostly links is no link list when a child of it that is not holds text of its own worth
    # CONTENT_BESIDE_LINKS of the block's links: a content cell beside a sidebar in one table row.
    beside = np.zeros(n)
    child = parent >= 0
    np.maximum.at(beside, parent[child], np.where(linky, 0.0, text - link_text)[child])
    dense = is_list_tag & (text > 0) & linky & small & (beside < CONTENT_BESIDE_LINKS * link_text)
    if dense.any():
        boiler |= _mark(idx, np.flatnonzero(dense), ends)

    # Main content: descend into the child holding most of the good (non-boilerplate, non-link) text
    # while it holds a majority.  Text left outside at each step is weighted down smoothly by the
    # share the child holds, so a small change in the page never flips a whole block in or out.
    good_own = np.where(boiler | link, 0, own_text)
    good = _subtree_sums(good_own, ends)
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
    texts = tuple(
        (w, "\n".join(segments[a:b]))
        for w, a, b in zip(weights[starts].tolist(), starts, [*starts[1:], len(segments)], strict=True)
        if w > 0
    ) if len(segments) else ()

    structure = _structure(tid, tag_of, parent, np.asarray(depths), in_content, ~boiler, content, dom_decay)
    return PageText(texts=texts, structure=structure, elements=n, truncated=truncated)
