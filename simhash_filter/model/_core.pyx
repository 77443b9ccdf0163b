# cython: language_level=3, embedsignature=True
"""The compiled core: the tree walk over libxml2's nodes of a page that lxml parsed, and the sketch.

Each gives bit for bit what its pure-Python reference gives.  The walk gives exactly what :func:`simhash_filter.model.extract._extract_walk` collects with ``etree.iterwalk``
(the reference): the elements in document order with their tags, parents, depths and subtree ends, their
``class``/``id``/``role`` values, and the text segments in the order of an event walk (an element's text at
its start, its tail after the end of its subtree), through lxml's own C accessors (``textOf``, ``tailOf``,
``namespacedName``), so the strings are the ones lxml's ``.text``, ``.tail`` and ``.tag`` return.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.unicode cimport (
    Py_UNICODE_ISALNUM,
    Py_UNICODE_ISDECIMAL,
    Py_UNICODE_ISSPACE,
    PyUnicode_AsUTF8AndSize,
    PyUnicode_DecodeASCII,
    PyUnicode_DecodeUTF8,
)
from libc.math cimport log, pow, rint, sqrt
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport qsort
from libc.string cimport memcmp, memcpy, strcmp, strlen

from lxml.includes cimport tree
from lxml.includes.etreepublic cimport _Element, namespacedName, tailOf, textOf

cimport lxml.includes.etreepublic as cetree

import sys
from unicodedata import normalize as _normalize

if sys.byteorder != "little":  # the hashes read input words as little-endian integers
    raise ImportError("the compiled core is written for little-endian machines")

cetree.import_lxml__etree()


cdef inline tree.xmlNode* _next_walked(tree.xmlNode* c_node) noexcept:
    """*c_node* or the first sibling after it that the reference's ``iterwalk`` reports: elements and entity
    references (comments and processing instructions, which the page parser removes, are passed over with
    their tails, as the reference does)."""
    while c_node is not NULL and c_node.type != tree.XML_ELEMENT_NODE and c_node.type != tree.XML_ENTITY_REF_NODE:
        c_node = c_node.next
    return c_node


class _Unusual(Exception):
    """An attribute value that is not plain text nodes (entity references): the reference walk reads it."""


cdef inline object _attribute(tree.xmlNode* c_node, const char* name):
    """The attribute without namespace, as ``el.get(name)`` gives it (None when absent).  Read from the
    attribute's text nodes (libxml2's own functions are not exported by lxml's module)."""
    cdef tree.xmlAttr* c_attr = c_node.properties
    cdef tree.xmlNode* c_text
    cdef list parts
    while c_attr is not NULL:
        if c_attr.ns is NULL and c_attr.name is not NULL and strcmp(<const char*>c_attr.name, name) == 0:
            c_text = c_attr.children
            if c_text is NULL:
                return ""
            if c_text.next is NULL and c_text.type == tree.XML_TEXT_NODE:
                return (<const char*>c_text.content).decode("utf-8") if c_text.content is not NULL else ""
            parts = []
            while c_text is not NULL:
                if c_text.type != tree.XML_TEXT_NODE:
                    raise _Unusual()
                if c_text.content is not NULL:
                    parts.append((<const char*>c_text.content).decode("utf-8"))
                c_text = c_text.next
            return "".join(parts)
        c_attr = c_attr.next
    return None


cdef inline bint _has_text(object text):
    return text is not None and text and not (<str>text).isspace()


def walk(_Element root not None, Py_ssize_t max_elements, frozenset boilerplate_tags, object boilerplate_words,
         ClassWords class_words=None):
    """``(tag_of, tid, parents, depths, ends, candidates, seg_owner, seg_text, truncated)`` of the subtree of
    *root*, stopping after *max_elements* elements (then ``truncated`` is True and the open elements end at the
    last one): ``tid`` numbers each element's tag by first appearance (``tag_of`` names the numbers), and
    ``candidates`` are the elements whose tag is in *boilerplate_tags* or whose ``class``, ``id`` or ``role``
    satisfies *boilerplate_words* (judged by *class_words* in C where it can).  None for a tree it leaves to the
    reference walk (an attribute holding entity references)."""
    cdef _Walked w = _Walked()
    try:
        w.walk(root, max_elements, boilerplate_tags, boilerplate_words, class_words)
    except _Unusual:
        return None
    return (w.tag_of, w.tid.to_list(), w.parent.to_list(), w.depth.to_list(), w.end.to_list(), w.candidates,
            w.owner.to_list(), w.seg_text, w.truncated)


def walk_split(_Element root not None, Py_ssize_t max_elements, frozenset boilerplate_tags, object boilerplate_words,
               ClassWords class_words, double dom_decay, double boilerplate_weight, object line_break,
               frozenset list_tags not None, tuple params not None):
    """``(texts, structure, elements, truncated)``: :func:`walk` then :func:`split` in one call, the element
    arrays never made Python lists (``texts`` is empty for a tree without elements); None where :func:`walk`
    declines."""
    cdef _Walked w = _Walked()
    try:
        w.walk(root, max_elements, boilerplate_tags, boilerplate_words, class_words)
    except _Unusual:
        return None
    if w.tid.n == 0:
        return (), {}, 0, w.truncated
    texts, structure = _split_arrays(w.tag_of, w.tid.items, w.parent.items, w.depth.items, w.end.items,
                                     w.candidates, w.owner.items, w.seg_text, w.tid.n, dom_decay, boilerplate_weight,
                                     line_break, list_tags, params)  # fmt: skip
    return texts, structure, w.tid.n, w.truncated


cdef class _Ints:
    """A growing array of Py_ssize_t."""
    cdef Py_ssize_t* items
    cdef Py_ssize_t n, cap

    def __cinit__(self):
        self.cap = 256
        self.n = 0
        self.items = <Py_ssize_t*>PyMem_Malloc(self.cap * sizeof(Py_ssize_t))
        if self.items is NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.items)

    cdef inline int push(self, Py_ssize_t item) except -1:
        if self.n == self.cap:
            self.items = <Py_ssize_t*>_grown(self.items, &self.cap, sizeof(Py_ssize_t))
        self.items[self.n] = item
        self.n += 1
        return 0

    cdef list to_list(self):
        return [self.items[i] for i in range(self.n)]


cdef class ClassWords:
    """The chrome words and content words of class, id and role values (``extract.BOILERPLATE_WORDS`` and
    ``CONTENT_WORDS``) in C, to judge an ASCII value from libxml2's bytes as ``extract._boilerplate_words`` does:
    its words (split at whitespace, ``_ - : .`` and lower-to-upper case changes, lower-cased) hold a chrome word
    and no content word."""
    cdef bytes blob  # the words, each as a length byte then its letters; chrome words first
    cdef Py_ssize_t chrome  # where the content words start
    cdef uint64_t lengths, firsts  # the words' lengths (below 64) and first bytes (mod 64), as bit sets

    def __cinit__(self, frozenset chrome not None, frozenset content not None):
        parts = []
        for words in (chrome, content):
            for word in sorted(words):
                data = word.encode("ascii")
                if not 0 < len(data) < 256 or not word.islower():
                    raise ValueError(f"class words must be lower-case ASCII: {word!r}")
                parts.append(bytes([len(data)]) + data)
                self.lengths |= (<uint64_t>1) << min(len(data), 63)
                self.firsts |= (<uint64_t>1) << (data[0] & 63)
            if words is chrome:
                self.chrome = sum(map(len, parts))
        self.blob = b"".join(parts)

    def __call__(self, str value not None):
        """:meth:`judge` of *value* (True, False, or None where the reference must judge it)."""
        cdef bytes data = value.encode("utf-8", "surrogatepass")
        if b"\0" in data:
            return None
        cdef int judged = self.judge(data)
        return None if judged < 0 else judged == 1

    cdef int kind(self, const char* word, Py_ssize_t n) noexcept:
        """1 for a chrome word, 2 for a content word, 0 for another (*word* lower-cased)."""
        cdef const char* blob = self.blob
        cdef Py_ssize_t i = 0, end = len(self.blob)
        if not (self.lengths >> min(n, 63)) & 1 or not (self.firsts >> (word[0] & 63)) & 1:
            return 0
        while i < end:
            if blob[i] == n and memcmp(blob + i + 1, word, n) == 0:
                return 1 if i < self.chrome else 2
            i += 1 + <uint8_t>blob[i]
        return 0

    cdef int judge(self, const char* value) noexcept:
        """1 when the ASCII *value* names chrome, 0 when not, -1 when it is not ASCII (the reference judges it)."""
        cdef Py_ssize_t i = 0, start, n
        cdef char word[256]
        cdef uint8_t c
        cdef int kind
        cdef bint chrome = False
        while True:
            while value[i] != 0 and _class_separator(value[i]):
                i += 1
            if value[i] == 0:
                return chrome
            start = i
            n = 0
            while value[i] != 0 and not _class_separator(value[i]):
                c = <uint8_t>value[i]
                if c >= 0x80:
                    return -1
                if i > start and 65 <= c <= 90 and 97 <= <uint8_t>value[i - 1] <= 122:
                    break  # a lower-to-upper case change ends the word
                if n < 255:
                    word[n] = c + 32 if 65 <= c <= 90 else c
                n += 1
                i += 1
            if n < 256:
                kind = self.kind(word, n)
                if kind == 2:  # a content word: not chrome, whatever follows
                    return 0
                if kind == 1:
                    chrome = True


cdef inline bint _class_separator(char c) noexcept nogil:
    """Whitespace (as ``\\s`` matches it in ASCII), ``_``, ``-``, ``:`` or ``.``."""
    return c == 32 or 9 <= c <= 13 or 28 <= c <= 31 or c == 95 or c == 45 or c == 58 or c == 46


cdef inline int _attribute_flag(tree.xmlNode* c_node, const char* name, ClassWords words,
                                object boilerplate_words) except -1:
    """Whether the attribute *name* names chrome: judged in C from libxml2's bytes when its value is one ASCII text
    node, else by *boilerplate_words* on the value :func:`_attribute` reads."""
    cdef tree.xmlAttr* c_attr = c_node.properties
    cdef tree.xmlNode* c_text
    cdef int judged
    if words is not None:
        while c_attr is not NULL:
            if c_attr.ns is NULL and c_attr.name is not NULL and strcmp(<const char*>c_attr.name, name) == 0:
                c_text = c_attr.children
                if c_text is NULL:
                    return 0
                if c_text.next is NULL and c_text.type == tree.XML_TEXT_NODE:
                    if c_text.content is NULL:
                        return 0
                    judged = words.judge(<const char*>c_text.content)
                    if judged >= 0:
                        return judged
                break
            c_attr = c_attr.next
        else:
            return 0
    return _flagged(_attribute(c_node, name), boilerplate_words)


cdef inline bint _flagged(object value, object boilerplate_words):
    return value is not None and value and boilerplate_words(value)


cdef class _Walked:
    """What the walk collects: the elements' tag numbers, parents, depths and subtree ends in document order, the
    boilerplate candidates, and the text segments with their owners (see :func:`walk`)."""
    cdef list tag_of, candidates, seg_text
    cdef _Ints tid, parent, depth, end, owner, stack
    cdef bint truncated

    def __cinit__(self):
        self.tag_of, self.candidates, self.seg_text = [], [], []
        self.tid, self.parent, self.depth, self.end, self.owner, self.stack = _Ints(), _Ints(), _Ints(), _Ints(), \
            _Ints(), _Ints()
        self.truncated = False

    cdef int walk(self, _Element root, Py_ssize_t max_elements, frozenset boilerplate_tags,
                  object boilerplate_words, ClassWords class_words) except -1:
        cdef dict names = {}
        # element names are interned by the parser: each distinct name pointer's tag number and boilerplate mark
        cdef const unsigned char* seen_name[64]
        cdef Py_ssize_t seen_number[64]
        cdef bint seen_boiler[64]
        cdef Py_ssize_t slot, number_i
        cdef bint boiler_tag
        for slot in range(64):
            seen_name[slot] = NULL
        cdef tree.xmlNode* top = root._c_node
        cdef tree.xmlNode* c_node = top
        cdef tree.xmlNode* c_next
        cdef Py_ssize_t i, n = 0
        cdef _Ints stack = self.stack
        cdef object text, tag, number
        while True:
            # the node's start
            if c_node.type == tree.XML_ELEMENT_NODE:
                if n >= max_elements:
                    self.truncated = True
                    break
                i = n
                n += 1
                slot = -1
                if c_node.ns is NULL and c_node.name is not NULL:
                    slot = (<size_t>c_node.name >> 4) & 63
                    while seen_name[slot] is not NULL and seen_name[slot] != c_node.name:
                        slot = (slot + 1) & 63
                        if slot == ((<size_t>c_node.name >> 4) & 63):  # full: no memo for this name
                            slot = -1
                            break
                if slot >= 0 and seen_name[slot] is not NULL:
                    number_i, boiler_tag = seen_number[slot], seen_boiler[slot]
                else:
                    tag = namespacedName(c_node)
                    number = names.get(tag)
                    if number is None:
                        number = names[tag] = len(self.tag_of)
                        self.tag_of.append(tag)
                    number_i, boiler_tag = number, tag in boilerplate_tags
                    if slot >= 0:
                        seen_name[slot], seen_number[slot], seen_boiler[slot] = c_node.name, number_i, boiler_tag
                self.tid.push(number_i)
                self.parent.push(stack.items[stack.n - 1] if stack.n else -1)
                self.depth.push(stack.n)
                self.end.push(i)
                if (
                    boiler_tag
                    or _attribute_flag(c_node, b"class", class_words, boilerplate_words)
                    or _attribute_flag(c_node, b"id", class_words, boilerplate_words)
                    or _attribute_flag(c_node, b"role", class_words, boilerplate_words)
                ):
                    self.candidates.append(i)
                stack.push(i)
                text = textOf(c_node)
                if _has_text(text):
                    self.owner.push(i)
                    self.seg_text.append(text)
                c_next = _next_walked(c_node.children)
                if c_next is not NULL:
                    c_node = c_next
                    continue
            # the ends of the node and of every ancestor whose last walked child it is
            while True:
                if c_node.type == tree.XML_ELEMENT_NODE:
                    stack.n -= 1
                    self.end.items[stack.items[stack.n]] = n - 1
                if c_node is top:
                    break
                if stack.n:
                    text = tailOf(c_node)
                    if _has_text(text):
                        self.owner.push(stack.items[stack.n - 1])
                        self.seg_text.append(text)
                c_next = _next_walked(c_node.next)
                if c_next is not NULL:
                    c_node = c_next
                    break
                c_node = c_node.parent
            if c_node is top:
                break
        if self.truncated:
            for i in range(stack.n):
                self.end.items[stack.items[i]] = n - 1
        return 0


# --- the sketch (simhash_filter.model.sketch.sketch, the reference) -----------------------------------------


cdef uint64_t _P1 = 0x9E3779B185EBCA87ULL
cdef uint64_t _P2 = 0xC2B2AE3D27D4EB4FULL
cdef uint64_t _P3 = 0x165667B19E3779F9ULL
cdef uint64_t _P4 = 0x85EBCA77C2B2AE63ULL
cdef uint64_t _P5 = 0x27D4EB2F165667C5ULL
cdef uint64_t _GOLDEN = 0x9E3779B97F4A7C15ULL
cdef uint64_t _MIX_A = 0xBF58476D1CE4E5B9ULL
cdef uint64_t _MIX_B = 0x94D049BB133111EBULL
cdef uint64_t _EMPTY = 0xFFFFFFFFFFFFFFFFULL


cdef inline uint64_t _rotl(uint64_t x, int r) noexcept nogil:
    return (x << r) | (x >> (64 - r))


cdef inline uint64_t _read64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)  # little-endian machines only: checked at import below
    return v


cdef inline uint64_t _read32(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return v


cdef inline uint64_t _round(uint64_t acc, uint64_t lane) noexcept nogil:
    acc += lane * _P2
    acc = _rotl(acc, 31)
    return acc * _P1


cdef inline uint64_t _merge(uint64_t acc, uint64_t v) noexcept nogil:
    acc ^= _round(0, v)
    return acc * _P1 + _P4


cdef uint64_t xxh64(const uint8_t* p, Py_ssize_t n, uint64_t seed) noexcept nogil:
    """XXH64 as its specification defines it (the digest the ``xxhash`` package's ``xxh64_intdigest`` gives)."""
    cdef const uint8_t* end = p + n
    cdef uint64_t h, v1, v2, v3, v4
    if n >= 32:
        v1 = seed + _P1 + _P2
        v2 = seed + _P2
        v3 = seed
        v4 = seed - _P1
        while p + 32 <= end:
            v1 = _round(v1, _read64(p))
            v2 = _round(v2, _read64(p + 8))
            v3 = _round(v3, _read64(p + 16))
            v4 = _round(v4, _read64(p + 24))
            p += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        h = _merge(h, v1)
        h = _merge(h, v2)
        h = _merge(h, v3)
        h = _merge(h, v4)
    else:
        h = seed + _P5
    h += <uint64_t>n
    while p + 8 <= end:
        h ^= _round(0, _read64(p))
        h = _rotl(h, 27) * _P1 + _P4
        p += 8
    if p + 4 <= end:
        h ^= _read32(p) * _P1
        h = _rotl(h, 23) * _P2 + _P3
        p += 4
    while p < end:
        h ^= (<uint64_t>p[0]) * _P5
        h = _rotl(h, 11) * _P1
        p += 1
    h ^= h >> 33
    h *= _P2
    h ^= h >> 29
    h *= _P3
    h ^= h >> 32
    return h


def xxh64_intdigest(str text not None, uint64_t seed):
    """XXH64 of *text* in UTF-8 (for tests against the ``xxhash`` package)."""
    cdef Py_ssize_t n
    cdef const char* data = PyUnicode_AsUTF8AndSize(text, &n)
    return xxh64(<const uint8_t*>data, n, seed)


cdef inline uint64_t _mix(uint64_t x) noexcept nogil:
    x += _GOLDEN
    x ^= x >> 30
    x *= _MIX_A
    x ^= x >> 27
    x *= _MIX_B
    x ^= x >> 31
    return x


def sketch(dict words not None, Py_ssize_t bins, double step, uint64_t seed):
    """The sketch of :func:`simhash_filter.model.sketch.sketch`, bit for bit (the reference's docstring says what
    it is): ``(bins + 7) // 8`` bytes."""
    cdef Py_ssize_t nbytes = (bins + 7) // 8
    if not words:
        return bytes(nbytes)
    if bins <= 0:
        raise ValueError(f"bins must be positive, got {bins}")
    cdef uint64_t* out = <uint64_t*>PyMem_Malloc(bins * sizeof(uint64_t))
    cdef uint8_t* packed = <uint8_t*>PyMem_Malloc(nbytes)
    if out is NULL or packed is NULL:
        PyMem_Free(out)
        PyMem_Free(packed)
        raise MemoryError()
    cdef Py_ssize_t i, n
    cdef uint64_t nb = <uint64_t>bins
    cdef const char* data
    try:
        for i in range(bins):
            out[i] = _EMPTY
        for word, weight in words.items():
            data = PyUnicode_AsUTF8AndSize(word, &n)
            _sketch_add(out, nb, xxh64(<const uint8_t*>data, n, seed), weight, step)
        return _sketch_bytes(out, bins, packed, nbytes)
    finally:
        PyMem_Free(out)
        PyMem_Free(packed)


cdef inline void _sketch_add(uint64_t* out, uint64_t nb, uint64_t h, double w, double step) noexcept nogil:
    """The copies of one word (hash *h*, weight *w*) into the bins."""
    cdef double r = rint(w / step)
    cdef uint64_t copies = <uint64_t>r if r >= 1.0 else 1
    cdef uint64_t k = 0, x, value
    cdef Py_ssize_t j
    while k < copies:
        x = _mix(h ^ (k * _GOLDEN))
        j = <Py_ssize_t>(x % nb)
        value = x // nb
        if value < out[j]:
            out[j] = value
        k += 1


cdef bytes _sketch_bytes(uint64_t* out, Py_ssize_t bins, uint8_t* packed, Py_ssize_t nbytes):
    """Densify the bins and pack their low bits."""
    cdef Py_ssize_t i
    _densify(out, bins)
    for i in range(nbytes):
        packed[i] = 0
    for i in range(bins):
        if out[i] & 1:
            packed[i >> 3] |= <uint8_t>(1 << (i & 7))
    return PyBytes_FromStringAndSize(<char*>packed, nbytes)


cdef void _densify(uint64_t* out, Py_ssize_t bins) noexcept nogil:
    """Fill each empty bin from the next filled bin to its right (cyclically): ``mix(value ^ distance)``."""
    cdef Py_ssize_t i, first = -1, next_filled, steps = 0
    for i in range(bins):
        if out[i] != _EMPTY:
            first = i
            break
    if first < 0:
        return
    # Walk right to left from the first filled bin, cyclically; filled bins met are never overwritten before
    # they are used: a hole's source is the filled bin after it, whose value is still its own.
    next_filled = first
    i = first - 1
    while steps < bins - 1:
        if i < 0:
            i += bins
        if out[i] == _EMPTY:
            out[i] = _mix(out[next_filled] ^ <uint64_t>(next_filled - i if next_filled > i else next_filled - i + bins))
        else:
            next_filled = i
        i -= 1
        steps += 1


# --- the split (simhash_filter.model.extract._split, the reference) ------------------------------------------


cdef struct _Ranked:
    double weight
    Py_ssize_t index


cdef int _heaviest_first(const void* a, const void* b) noexcept nogil:
    """Weight descending, then document order: numpy's stable argsort of the negated weights."""
    cdef const _Ranked* x = <const _Ranked*>a
    cdef const _Ranked* y = <const _Ranked*>b
    if x.weight != y.weight:
        return -1 if x.weight > y.weight else 1
    return -1 if x.index < y.index else (1 if x.index > y.index else 0)


cdef struct _Keyed:
    long long key
    Py_ssize_t index


cdef int _by_key(const void* a, const void* b) noexcept nogil:
    cdef const _Keyed* x = <const _Keyed*>a
    cdef const _Keyed* y = <const _Keyed*>b
    if x.key != y.key:
        return -1 if x.key < y.key else 1
    return -1 if x.index < y.index else (1 if x.index > y.index else 0)


cdef double _pairwise_sum(const double* a, Py_ssize_t n) noexcept nogil:
    """numpy's pairwise summation of float64 (``ndarray.sum`` of a contiguous array), operation for operation."""
    cdef Py_ssize_t i, n2
    cdef double res, r0, r1, r2, r3, r4, r5, r6, r7
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[i]
        return res
    if n <= 128:
        r0, r1, r2, r3, r4, r5, r6, r7 = a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]
        i = 8
        while i < n - (n % 8):
            r0 += a[i]
            r1 += a[i + 1]
            r2 += a[i + 2]
            r3 += a[i + 3]
            r4 += a[i + 4]
            r5 += a[i + 5]
            r6 += a[i + 6]
            r7 += a[i + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < n:
            res += a[i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise_sum(a, n2) + _pairwise_sum(a + n2, n - n2)


cdef inline void _subtree_sums(const double* values, const Py_ssize_t* ends, double* cum, double* out,
                               Py_ssize_t n) noexcept nogil:
    """``out[i]``: the sum of ``values`` over element i's subtree (whole numbers, so every sum is exact)."""
    cdef Py_ssize_t i
    cdef double acc = 0.0
    for i in range(n):
        acc += values[i]
        cum[i] = acc
    for i in range(n):
        out[i] = cum[ends[i]] - cum[i] + values[i]


cdef inline void _mark_subtrees(const bint* starts, const Py_ssize_t* ends, bint* out, Py_ssize_t n) noexcept nogil:
    """``out[i]`` set (never cleared) when element i is inside the subtree of an element with ``starts`` set."""
    cdef Py_ssize_t i, reach = -1
    for i in range(n):
        if starts[i] and ends[i] > reach:
            reach = ends[i]
        if reach >= i:
            out[i] = True


cdef inline bint _cjk(Py_UCS4 c) noexcept nogil:
    return 0x3400 <= c <= 0x4DBF or 0x4E00 <= c <= 0x9FFF or 0xF900 <= c <= 0xFAFF


cdef Py_ssize_t* _int_array(list values, Py_ssize_t extra) except NULL:
    cdef Py_ssize_t i, n = len(values)
    cdef Py_ssize_t* out = <Py_ssize_t*>PyMem_Malloc((n + extra + 1) * sizeof(Py_ssize_t))
    if out is NULL:
        raise MemoryError()
    for i in range(n):
        out[i] = values[i]
    return out


def split(list tag_of not None, list tid not None, list parents not None, list depths not None, list ends not None,
          list candidates not None, list seg_owner not None, list seg_text not None, double dom_decay,
          double boilerplate_weight, object line_break, frozenset list_tags not None, tuple params not None):
    """``(texts, structure)`` of :func:`simhash_filter.model.extract._split` (the reference, whose comments say
    what each step means), bit for bit: *line_break* removes the line breaks between CJK characters from a
    segment, *list_tags* are the tags of link-list blocks, *params* the reference's constants in the order
    unpacked below.  ``structure`` is a dict in the reference's (sorted) order."""
    cdef Py_ssize_t n = len(tid), m = len(seg_text)
    if n == 0 or len(parents) != n or len(depths) != n or len(ends) != n or len(seg_owner) != m:
        raise ValueError("split: the element lists and the segment lists must each have one length, elements > 0")
    cdef Py_ssize_t* c_tid = NULL
    cdef Py_ssize_t* c_parent = NULL
    cdef Py_ssize_t* c_depth = NULL
    cdef Py_ssize_t* c_end = NULL
    cdef Py_ssize_t* c_owner = NULL
    try:
        c_tid = _int_array(tid, 0)
        c_parent = _int_array(parents, 0)
        c_depth = _int_array(depths, 0)
        c_end = _int_array(ends, 0)
        c_owner = _int_array(seg_owner, 0)
        return _split_arrays(tag_of, c_tid, c_parent, c_depth, c_end, candidates, c_owner, seg_text, n, dom_decay,
                             boilerplate_weight, line_break, list_tags, params)  # fmt: skip
    finally:
        PyMem_Free(c_tid)
        PyMem_Free(c_parent)
        PyMem_Free(c_depth)
        PyMem_Free(c_end)
        PyMem_Free(c_owner)


cdef tuple _split_arrays(list tag_of, Py_ssize_t* c_tid, Py_ssize_t* c_parent, Py_ssize_t* c_depth,
                         Py_ssize_t* c_end, list candidates, Py_ssize_t* c_owner, list seg_text, Py_ssize_t n,
                         double dom_decay, double boilerplate_weight, object line_break, frozenset list_tags,
                         tuple params):
    """:func:`split` on the element arrays (*n* elements, a segment per item of *seg_text*)."""
    cdef double max_share, link_density, beside_links, hub_share, outside_min, max_mass, volatile_weight
    cdef double volatile_share, cjk_text, prose_chars, prose_paragraphs
    cdef Py_ssize_t volatile_words, volatile_chars
    (max_share, link_density, beside_links, hub_share, outside_min, max_mass, volatile_weight, volatile_words,
     volatile_chars, volatile_share, cjk_text, prose_chars, prose_paragraphs) = params
    cdef Py_ssize_t m = len(seg_text), n_tags = len(tag_of)
    cdef double* f = NULL
    cdef bint* b = NULL
    cdef _Ranked* ranked = NULL
    cdef _Keyed* keyed = NULL
    try:
        f = <double*>PyMem_Malloc((10 * n + 3 * m + 1) * sizeof(double))
        b = <bint*>PyMem_Malloc((9 * n + m + n_tags + 1) * sizeof(bint))
        ranked = <_Ranked*>PyMem_Malloc((m + 1) * sizeof(_Ranked))
        keyed = <_Keyed*>PyMem_Malloc((n + 1) * sizeof(_Keyed))
        if f is NULL or b is NULL or ranked is NULL or keyed is NULL:
            raise MemoryError()
        return _split(tag_of, seg_text, c_tid, c_parent, c_depth, c_end, candidates, c_owner, n, m, dom_decay,
                      boilerplate_weight, line_break, list_tags, f, b, ranked, keyed, max_share, link_density,
                      beside_links, hub_share, outside_min, max_mass, volatile_weight, volatile_words,
                      volatile_chars, volatile_share, cjk_text, prose_chars, prose_paragraphs)
    finally:
        PyMem_Free(f)
        PyMem_Free(b)
        PyMem_Free(ranked)
        PyMem_Free(keyed)


cdef tuple _split(list tag_of, list seg_text, Py_ssize_t* tid, Py_ssize_t* parent, Py_ssize_t* depth,
                  Py_ssize_t* end, list candidates, Py_ssize_t* owner, Py_ssize_t n, Py_ssize_t m,
                  double dom_decay, double boilerplate_weight, object line_break, frozenset list_tags,
                  double* f, bint* b, _Ranked* ranked, _Keyed* keyed, double max_share, double link_density,
                  double beside_links, double hub_share, double outside_min, double max_mass,
                  double volatile_weight, Py_ssize_t volatile_words, Py_ssize_t volatile_chars,
                  double volatile_share, double cjk_text, double prose_chars, double prose_paragraphs):
    # scratch: 10 float arrays of n, 3 of m; 9 flag arrays of n, one of m, one per tag
    cdef double* own = f
    cdef double* cum = f + n
    cdef double* text = f + 2 * n
    cdef double* link_text = f + 3 * n
    cdef double* good = f + 4 * n
    cdef double* tmp = f + 5 * n
    cdef double* beside = f + 6 * n
    cdef double* level_weight = f + 7 * n
    cdef double* powers = f + 8 * n
    cdef double* rest = f + 9 * n
    cdef double* seg_len = f + 10 * n
    cdef double* seg_weight = f + 10 * n + m
    cdef bint* link = b
    cdef bint* boiler = b + n
    cdef bint* chrome = b + 2 * n
    cdef bint* starts = b + 3 * n
    cdef bint* linky = b + 4 * n
    cdef bint* in_content = b + 5 * n
    cdef bint* is_boiler = b + 6 * n
    cdef bint* keep = b + 7 * n
    cdef bint* is_list = b + 8 * n
    cdef bint* volatile = b + 9 * n
    cdef bint* list_tag = b + 9 * n + m
    cdef Py_ssize_t i, k, p, a_id = -1, n_tags = len(tag_of), words, digit_words, visible, cjk, content, child
    cdef Py_ssize_t best, last, count, n_depth, d, first
    cdef bint in_space, in_word, word_has_digit, has_digit, little_left
    cdef Py_UCS4 ch
    cdef str seg
    cdef double total, share, weight, boiler_chars, rest_mass, v
    cdef long long key

    # the segments: CJK line breaks removed; visible length (CJK characters counted cjk_text times); volatile
    seg_text = list(seg_text)
    for k in range(m):
        seg = seg_text[k]
        if not seg.isascii() and "\n" in seg:
            seg = seg_text[k] = line_break(seg)
        visible = words = digit_words = cjk = 0
        in_space = True  # str.split(): runs of whitespace separate words, none at the ends
        in_word = word_has_digit = has_digit = False
        count = 0  # whitespace-separated words
        for ch in seg:
            if Py_UNICODE_ISSPACE(ch):
                in_space = True
            else:
                visible += 1
                if in_space:
                    count += 1
                    in_space = False
            if Py_UNICODE_ISALNUM(ch):  # the reference's [^\W_]+ words and \d digits
                if not in_word:
                    in_word = True
                    word_has_digit = False
                    words += 1
                if Py_UNICODE_ISDECIMAL(ch):
                    has_digit = True
                    if not word_has_digit:
                        word_has_digit = True
                        digit_words += 1
            else:
                in_word = False
            if _cjk(ch):
                cjk += 1
        if count > 1:
            visible += count - 1
        seg_len[k] = <double>(visible + <Py_ssize_t>(cjk_text - 1) * cjk)
        volatile[k] = (
            has_digit and visible <= volatile_chars and words <= volatile_words
            and digit_words >= volatile_share * words
        )

    for i in range(n_tags):
        list_tag[i] = tag_of[i] in list_tags
        if a_id < 0 and tag_of[i] == "a":
            a_id = i
    for i in range(n):
        own[i] = 0.0
        starts[i] = tid[i] == a_id
        link[i] = boiler[i] = False
    for k in range(m):
        own[owner[k]] += seg_len[k]
    _mark_subtrees(starts, end, link, n)
    _subtree_sums(own, end, cum, text, n)
    total = text[0]

    for i in range(n):
        starts[i] = False
    for i in candidates:
        if text[i] <= max_share * total:
            starts[i] = True
    _mark_subtrees(starts, end, boiler, n)
    # the path down to the prose (elements whose own text outside links is a paragraph) when the marks swallow it
    v = total  # text left outside the marks
    share = 0.0  # twice the prose inside the marks, less all the prose
    for i in range(n):
        tmp[i] = 0.0 if (link[i] or own[i] < prose_chars) else own[i]
        if boiler[i]:
            v -= own[i]
            share += 2.0 * tmp[i]
        share -= tmp[i]
    little_left = v < prose_chars <= total
    if little_left or share > 0:
        _subtree_sums(tmp, end, cum, good, n)  # prose per subtree
        for i in range(n):
            keep[i] = False  # on the prose path
            boiler[i] = False
            tmp[i] = 1.0 if tmp[i] > 0 else 0.0
        _subtree_sums(tmp, end, cum, beside, n)  # paragraphs per subtree
        content = 0
        while good[content] > 0:
            keep[content] = little_left or beside[content] >= prose_paragraphs
            child, last = content + 1, end[content]
            best = -1
            while child <= last:
                if best < 0 or good[child] > good[best]:
                    best = child
                child = end[child] + 1
            if best < 0 or good[best] * 2 < good[content]:
                break
            content = best
        for i in range(n):
            starts[i] = starts[i] and not keep[i]
        _mark_subtrees(starts, end, boiler, n)
    for i in range(n):
        chrome[i] = boiler[i]
        tmp[i] = 0.0 if boiler[i] else own[i]
    _subtree_sums(tmp, end, cum, text, n)
    for i in range(n):
        tmp[i] = tmp[i] if link[i] else 0.0
    _subtree_sums(tmp, end, cum, link_text, n)
    for i in range(n):
        linky[i] = link_text[i] > link_density * text[i]
        beside[i] = 0.0
    for i in range(n):
        p = parent[i]
        if p >= 0:
            v = 0.0 if linky[i] else text[i] - link_text[i]
            if v > beside[p]:
                beside[p] = v
    for i in range(n):
        starts[i] = (
            list_tag[tid[i]] and text[i] > 0 and linky[i] and text[i] <= max_share * total
            and beside[i] < beside_links * link_text[i]
        )
    _mark_subtrees(starts, end, boiler, n)

    for i in range(n):
        tmp[i] = 0.0 if (boiler[i] or link[i]) else own[i]
    _subtree_sums(tmp, end, cum, good, n)
    if good[0] < hub_share * text[0]:  # a hub page: its link lists are its content
        for i in range(n):
            boiler[i] = chrome[i]
            link[i] = False
            good[i] = text[i]

    # the descent into the content element, and the weight of the text left outside at each level
    content = 0
    chain = []
    if good[0] > 0:
        while True:
            child, last = content + 1, end[content]
            if child > last:
                break
            best = child
            while child <= last:
                if good[child] > good[best]:
                    best = child
                child = end[child] + 1
            share = good[best] / good[content] if good[content] > 0 else 0.0
            if share < 0.5:
                break
            chain.append((content, share))
            content = best
    level_weights = []
    weight = 1.0
    for _, share in reversed(chain):
        if share < 1.0:
            weight *= 1.0 - (share - 0.5) / 0.5 * (1.0 - outside_min)
        level_weights.append(weight)
    for i in range(n):
        level_weight[i] = 1.0
        in_content[i] = content <= i <= end[content]
    for (node, _), weight in zip(chain, reversed(level_weights)):
        for i in range(<Py_ssize_t>node, end[<Py_ssize_t>node] + 1):
            level_weight[i] = weight
    for i in range(content, end[content] + 1):
        level_weight[i] = 1.0
    boiler_chars = 0.0
    count = 0
    for i in range(n):
        is_boiler[i] = boiler[i] or (link[i] and not in_content[i])
        if is_boiler[i]:
            boiler_chars += own[i]
        else:
            rest[count] = own[i] * level_weight[i]
            count += 1
    rest_mass = 0.0 + _pairwise_sum(rest, count)
    if boiler_chars > 0:
        v = max_mass * rest_mass / boiler_chars
        if v < boilerplate_weight:
            boilerplate_weight = v
    for k in range(m):
        v = boilerplate_weight if is_boiler[owner[k]] else level_weight[owner[k]]
        if volatile[k]:
            v *= volatile_weight
        ranked[k].weight = rint(v * 1000.0) / 1000.0
        ranked[k].index = k
    qsort(ranked, m, sizeof(_Ranked), _heaviest_first)
    texts = []
    first = 0
    while first < m:
        k = first + 1
        while k < m and ranked[k].weight == ranked[first].weight:
            k += 1
        if ranked[first].weight > 0:
            texts.append((ranked[first].weight, "\n".join([seg_text[ranked[i].index] for i in range(first, k)])))
        first = k

    # structure: (inside content?, parent tag, tag, depth) -> summed dom_decay ** depth, in sorted key order
    n_depth = 0
    for i in range(n):
        keep[i] = not boiler[i]
        d = depth[i] - depth[content] if in_content[i] else depth[i]
        if d + 1 > n_depth:
            n_depth = d + 1
    if n_depth > n:
        raise ValueError("split: depths beyond the number of elements")
    v = 1.0
    for d in range(n_depth):
        powers[d] = v
        v *= dom_decay
    count = 0
    for i in range(n):
        if keep[i]:
            p = -1 if parent[i] < 0 or i == content else tid[parent[i]]
            d = depth[i] - depth[content] if in_content[i] else depth[i]
            keyed[count].key = (((<long long>in_content[i]) * (n_tags + 1) + p + 1) * n_tags + tid[i]) * n_depth + d
            keyed[count].index = i
            count += 1
    qsort(keyed, count, sizeof(_Keyed), _by_key)
    structure = {}
    first = 0
    while first < count:
        key = keyed[first].key
        v = 0.0
        k = first
        while k < count and keyed[k].key == key:
            i = keyed[k].index
            v += powers[depth[i] - depth[content] if in_content[i] else depth[i]]
            k += 1
        d = key % n_depth
        key //= n_depth
        i = key % n_tags
        key //= n_tags
        p = key % (n_tags + 1)
        key //= n_tags + 1
        structure[f"{'c' if key else 'o'}|{tag_of[p - 1] if p else ''}>{tag_of[i]}|{d}"] = v
        first = k
    return tuple(texts), structure


# --- the vote (simhash_filter.model.fingerprint.Fingerprinter.fingerprint_features, the reference) ------------


#: A weight rounds to at most this many units: beyond it the compiled vote declines (int64 sums stay exact).
cdef double _MAX_UNITS = 1099511627776.0  # 2 ** 40


cdef int64_t _gram_bits(const uint8_t* p, Py_ssize_t size, int n, uint64_t seed, int64_t* out) except -1:
    """Add the bits of the hashes of the code-point n-grams of the UTF-8 *p* (``<word>``; the whole of it for
    n = 0 or when it is not longer than n) to *out*; return how many hashes there were."""
    cdef Py_ssize_t i, j, k, grams, starts_len = 0
    cdef uint64_t h
    cdef Py_ssize_t* starts = <Py_ssize_t*>PyMem_Malloc((size + 1) * sizeof(Py_ssize_t))
    if starts is NULL:
        raise MemoryError()
    try:
        for i in range(size):
            if (p[i] & 0xC0) != 0x80:  # the first byte of a code point
                starts[starts_len] = i
                starts_len += 1
        starts[starts_len] = size
        if n == 0 or starts_len <= n:
            h = xxh64(p, size, seed)
            for j in range(64):
                out[j] += (h >> j) & 1
            return 1
        grams = starts_len - n + 1
        for k in range(grams):
            h = xxh64(p + starts[k], starts[k + n] - starts[k], seed)
            for j in range(64):
                out[j] += (h >> j) & 1
        return grams
    finally:
        PyMem_Free(starts)


cdef class FeatureCounts:
    """Memo of feature names -> how many of their hashes have a 1 in each of the 64 bit columns, and how many
    hashes they have: a text word is hashed as the character n-grams of ``<word>``, a structure feature whole.
    Rows are kept as bytes; a name with more than 255 hashes voting in one column is counted afresh each time."""

    cdef uint64_t seed
    cdef bint padded  # text words (hashed as n-grams of <word>), else structure features (hashed whole)
    cdef dict ids  # name -> row; -1 for a name counted afresh
    cdef uint8_t* counts
    cdef int64_t* sizes
    cdef Py_ssize_t used, cap, limit

    def __cinit__(self, uint64_t seed, bint padded, Py_ssize_t limit):
        self.seed = seed
        self.padded = padded
        self.ids = {}
        self.limit = limit
        self.used = 0
        self.cap = 1024
        self.counts = <uint8_t*>PyMem_Malloc(self.cap * 64)
        self.sizes = <int64_t*>PyMem_Malloc(self.cap * sizeof(int64_t))
        if self.counts is NULL or self.sizes is NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.counts)
        PyMem_Free(self.sizes)

    def __len__(self):
        return len(self.ids)

    cdef int64_t count(self, str name, int n, int64_t* out) except -1:
        """Bit counts of *name*'s hashes into *out*, and their number: for text words the n-grams of code points
        of ``<name>`` as ``char_grams`` makes them (``<name>`` whole for n = 0 or a short name), for structure
        features the name whole."""
        cdef Py_ssize_t size, j
        cdef const char* data
        cdef uint64_t h
        cdef bytes word
        for j in range(64):
            out[j] = 0
        if not self.padded:
            data = PyUnicode_AsUTF8AndSize(name, &size)
            h = xxh64(<const uint8_t*>data, size, self.seed)
            for j in range(64):
                out[j] += (h >> j) & 1
            return 1
        word = ("<" + name + ">").encode("utf-8")
        return _gram_bits(<const uint8_t*>(<char*>word), len(word), n, self.seed, out)

    cdef Py_ssize_t row(self, str name, int n, int64_t* scratch) except -2:
        """The memo row of *name* (added when new), or -1 for a name whose counts are in *scratch* (too wide
        for a row of bytes); then ``scratch[64]`` holds its number of hashes."""
        cdef object found = self.ids.get(name)
        cdef Py_ssize_t r, j
        cdef int64_t size, top = 0
        if found is not None:
            r = found
            if r >= 0:
                return r
        size = self.count(name, n, scratch)
        scratch[64] = size
        for j in range(64):
            if scratch[j] > top:
                top = scratch[j]
        if top > 255:
            if found is None and len(self.ids) < self.limit:
                self.ids[name] = -1
            return -1
        if len(self.ids) >= self.limit:  # full: start again
            self.ids.clear()
            self.used = 0
        if self.used == self.cap:
            self._grow()
        r = self.used
        for j in range(64):
            self.counts[r * 64 + j] = <uint8_t>scratch[j]
        self.sizes[r] = size
        self.used += 1
        self.ids[name] = r
        return r

    cdef int _grow(self) except -1:
        cdef Py_ssize_t cap = 2 * self.cap
        cdef uint8_t* counts = <uint8_t*>PyMem_Realloc(self.counts, cap * 64)
        if counts is NULL:
            raise MemoryError()
        self.counts = counts
        cdef int64_t* sizes = <int64_t*>PyMem_Realloc(self.sizes, cap * sizeof(int64_t))
        if sizes is NULL:
            raise MemoryError()
        self.sizes = sizes
        self.cap = cap
        return 0


cdef int _add_votes(FeatureCounts bits, dict features, bint text, int char_ngram, int cjk_char_ngram,
                    int64_t* ones, int64_t* total) except -1:
    """Add each feature's rounded weight to the columns where its hashes have a 1 (a text word's weight shared
    among its n-grams first); 1 when a weight is too large for exact sums (the reference then votes)."""
    cdef int64_t scratch[65]
    cdef Py_ssize_t r, j
    cdef int n
    cdef int64_t size, units
    cdef double w
    cdef const uint8_t* row
    cdef str name
    for name, value in features.items():
        if not text:
            n = 0
        elif " " in name:
            n = 0
        else:
            n = cjk_char_ngram if _cjk(name[0]) else char_ngram
        r = bits.row(name, n, scratch)
        size = bits.sizes[r] if r >= 0 else scratch[64]
        w = value
        if text:
            w = w / <double>size
        w = rint(w * 1024.0)
        if w < 1.0:
            w = 1.0
        if not w <= _MAX_UNITS:
            return 1
        units = <int64_t>w
        total[0] += units * size
        if r >= 0:
            row = bits.counts + r * 64
            for j in range(64):
                ones[j] += units * row[j]
        else:
            for j in range(64):
                ones[j] += units * scratch[j]
    return 0


def vote(FeatureCounts text_bits not None, FeatureCounts structure_bits not None, dict text not None,
         dict structure not None, int char_ngram, int cjk_char_ngram):
    """The simhash of a page's features, as the reference's ``fingerprint_features`` computes it (None when a
    weight is too large for this vote's exact integer sums: the reference then computes it)."""
    cdef int64_t ones[64]
    cdef int64_t total = 0
    cdef uint64_t value = 0
    cdef Py_ssize_t j
    for j in range(64):
        ones[j] = 0
    if _add_votes(text_bits, text, True, char_ngram, cjk_char_ngram, ones, &total):
        return None
    if _add_votes(structure_bits, structure, False, char_ngram, cjk_char_ngram, ones, &total):
        return None
    for j in range(64):
        if 2 * ones[j] - total > 0:
            value |= (<uint64_t>1) << j
    return value


# --- text features (simhash_filter.model.features._text_features, the reference, for single words) -----------


cdef inline bint _ascii_alnum(char c) noexcept nogil:
    return (c >= 97 and c <= 122) or (c >= 65 and c <= 90) or (c >= 48 and c <= 57)


cdef Py_ssize_t _count_ascii(str text, Py_ssize_t budget, dict counts) except -1:
    """Count the words of an ASCII *text* into *counts* (first appearance first), at most *budget* of them: runs
    of letters and digits, lower-cased (the reference's ``translate`` and ``split``)."""
    cdef Py_ssize_t i = 0, start, j, n, taken = 0
    cdef const char* data = PyUnicode_AsUTF8AndSize(text, &n)  # an ASCII string's own characters
    cdef char* lower = <char*>PyMem_Malloc(n + 1)
    cdef char c
    cdef str word
    if lower is NULL:
        raise MemoryError()
    try:
        for j in range(n):
            c = data[j]
            lower[j] = c + 32 if 65 <= c <= 90 else c
        while i < n and taken < budget:
            while i < n and not _ascii_alnum(data[i]):
                i += 1
            if i == n:
                break
            start = i
            while i < n and _ascii_alnum(data[i]):
                i += 1
            word = PyUnicode_DecodeASCII(lower + start, i - start, NULL)
            counts[word] = counts.get(word, 0) + 1
            taken += 1
        return taken
    finally:
        PyMem_Free(lower)


cdef list _memoised(list keys, dict memo, object compute):
    """``memo``'s value of each key; the keys it lacks given by ``compute(missing)`` (which may also refill or
    empty the memo: every value found is taken before it is called)."""
    cdef list out = [memo.get(key) for key in keys]
    cdef list missing = [key for key, value in zip(keys, out) if value is None]
    cdef Py_ssize_t i, j = 0
    if missing:
        computed = compute(missing)
        for i in range(len(out)):
            if out[i] is None:
                out[i] = computed[j]
                j += 1
    return out


def text_features(tuple texts not None, Py_ssize_t max_tokens, Py_ssize_t max_features, object tokenize,
                  dict spelling_memo not None, object american_words, dict value_memo not None, object word_values):
    """``(weights, gram_counts)`` of the reference's ``_text_features`` under single-word features
    (``ngrams == (1,)``), bit for bit: *tokenize* gives the words of a text that is not ASCII, *spelling_memo*
    and *american_words* map words to their American spelling (the latter filling the memo), *value_memo* and
    *word_values* give each word's ``(IDF ** idf_power, gram_count)`` (the latter filling the memo)."""
    cdef dict tf = {}, counts, grams
    cdef Py_ssize_t budget = max_tokens, room, taken
    cdef double rw, w, power
    cdef list words, gram_counts, spelled, values
    cdef object mapped, value
    cdef dict weights
    for rw, text in texts:
        if budget <= 0:
            break
        counts = {}
        if (<str>text).isascii():
            taken = _count_ascii(text, budget, counts)
        else:
            words = tokenize(text, budget)
            taken = len(words)
            for word in words:
                counts[word] = counts.get(word, 0) + 1
        budget -= taken
        if len(counts) > max_features:  # only so many can become features: respell no more
            counts = dict(list(counts.items())[:max_features])
        # each distinct word under its American spelling, counts merged (first appearance first)
        spelled = _memoised(list(counts), spelling_memo, american_words)
        grams = {}
        for mapped, c in zip(spelled, counts.values()):
            grams[mapped] = grams.get(mapped, 0) + c
        room = max_features - len(tf)
        for word, c in grams.items():
            value = tf.get(word)
            if value is not None:
                tf[word] = <double>value + rw * <double>(<Py_ssize_t>c)
            elif room > 0:
                tf[word] = 0.0 + rw * <double>(<Py_ssize_t>c)
                room -= 1
    if not tf:
        return {}, ()
    values = _memoised(list(tf), value_memo, word_values)
    weights = {}
    gram_counts = []
    for (word, value), pair in zip(tf.items(), values):
        power = pair[0]
        gram_counts.append(pair[1])
        w = value
        weights[word] = power * (1.0 + log(w) if w > 1.0 else w)
    return weights, tuple(gram_counts)


# --- one pass from a page's text segments to its fingerprint and sketch ---------------------------------------
# (``Fingerprinter.fingerprint``: the reference's ``page_features`` then ``_decide``, without a Python string per
# word occurrence and without the page's dict of features)


cdef struct _Word:
    uint64_t hash  # XXH64 of the word's UTF-8 under the sketch's seed: the table's key and the sketch's hash
    Py_ssize_t offset, length  # the UTF-8 in the arena
    Py_ssize_t spelled  # the entry of its American spelling, -1 until known
    double power  # IDF ** idf_power, as a feature (valid when grams > 0)
    int64_t grams  # its n-gram count (reference: gram_count), 0 until known
    Py_ssize_t row  # its vote row, -1 for a word too wide for a row of bytes, -2 until counted
    int64_t size  # how many n-gram hashes vote
    Py_ssize_t seen, slot  # the segment or page that last saw it, and its place there
    Py_ssize_t grouped, group  # the segment whose spellings last counted it, and its place there
    Py_ssize_t run_start, run_len  # for a run of CJK ideographs (keyed by 0x01 and its UTF-8): its words' entries


cdef class WordTable:
    """The words met so far (a C hash table keyed by their UTF-8): each word's American spelling, IDF power,
    n-gram count, vote row of bit counts and sketch hash, computed once (by the reference's functions, or as the
    vote and the sketch compute them) and then read without a Python string.  Emptied between pages when it
    holds more than *limit* words."""

    cdef uint64_t seed, sketch_seed
    cdef int char_ngram, cjk_char_ngram
    cdef Py_ssize_t limit, used, cap, slots_mask, arena_used, arena_cap, rows_used, rows_cap, serial
    cdef _Word* words
    cdef Py_ssize_t* slots
    cdef char* arena
    cdef uint8_t* rows
    cdef _Ints runs  # the words of the runs of CJK ideographs met, entry by entry
    # the IDF tables (simhash_filter.model.weights.IdfTable's sorted arrays) and the spelling's irregular words
    cdef _Idf english, chinese
    cdef object english_loader, chinese_loader
    cdef double unknown_idf, digit_weight, idf_power
    cdef uint64_t table_seed
    cdef dict irregular

    def __cinit__(self, uint64_t seed, uint64_t sketch_seed, int char_ngram, int cjk_char_ngram, Py_ssize_t limit):
        self.seed = seed
        self.sketch_seed = sketch_seed
        self.char_ngram = char_ngram
        self.cjk_char_ngram = cjk_char_ngram
        self.limit = limit
        self.words = NULL
        self.slots = NULL
        self.arena = NULL
        self.rows = NULL
        self._reset()

    def __dealloc__(self):
        PyMem_Free(self.words)
        PyMem_Free(self.slots)
        PyMem_Free(self.arena)
        PyMem_Free(self.rows)

    def __len__(self):
        return self.used

    cdef int _reset(self) except -1:
        PyMem_Free(self.words)
        PyMem_Free(self.slots)
        PyMem_Free(self.arena)
        PyMem_Free(self.rows)
        self.cap, self.arena_cap, self.rows_cap = 4096, 65536, 1024
        self.words = <_Word*>PyMem_Malloc(self.cap * sizeof(_Word))
        self.slots = <Py_ssize_t*>PyMem_Malloc(2 * self.cap * sizeof(Py_ssize_t))
        self.arena = <char*>PyMem_Malloc(self.arena_cap)
        self.rows = <uint8_t*>PyMem_Malloc(self.rows_cap * 64)
        if self.words is NULL or self.slots is NULL or self.arena is NULL or self.rows is NULL:
            raise MemoryError()
        self.slots_mask = 2 * self.cap - 1
        for i in range(2 * self.cap):
            self.slots[i] = -1
        self.used = self.arena_used = self.rows_used = 0
        self.runs = _Ints()
        return 0

    cdef Py_ssize_t find(self, const char* data, Py_ssize_t n) except -1:
        """The entry of the word whose UTF-8 is *data* (added when new)."""
        cdef uint64_t h = xxh64(<const uint8_t*>data, n, self.sketch_seed)
        cdef Py_ssize_t s = self.probe(data, n, h), e = self.slots[s]
        cdef _Word* w
        if e >= 0:
            return e
        if self.used == self.cap:
            self._grow()
            return self.find(data, n)
        while self.arena_used + n > self.arena_cap:
            self.arena = <char*>_grown(self.arena, &self.arena_cap, 1)
        memcpy(self.arena + self.arena_used, data, n)
        e = self.used
        w = &self.words[e]
        w.hash, w.offset, w.length = h, self.arena_used, n
        w.spelled, w.grams, w.row, w.size, w.seen, w.grouped, w.run_len = -1, 0, -2, 0, -1, -1, -1
        self.arena_used += n
        self.used += 1
        self.slots[s] = e
        return e

    cdef str string(self, Py_ssize_t e):
        """Entry *e*'s word as a str (for the reference's functions; the table keeps only its UTF-8)."""
        return PyUnicode_DecodeUTF8(self.arena + self.words[e].offset, self.words[e].length, NULL)

    cdef inline Py_ssize_t probe(self, const char* data, Py_ssize_t n, uint64_t h) noexcept:
        """The slot of the word whose UTF-8 is *data* (hash *h*), or of the empty slot where it would go."""
        cdef Py_ssize_t s = <Py_ssize_t>(h & <uint64_t>self.slots_mask), e
        cdef _Word* w
        while True:
            e = self.slots[s]
            if e < 0:
                return s
            w = &self.words[e]
            if w.hash == h and w.length == n and memcmp(self.arena + w.offset, data, n) == 0:
                return s
            s = (s + 1) & self.slots_mask

    cdef Py_ssize_t known(self, const char* data, Py_ssize_t n) noexcept:
        """The entry of the word whose UTF-8 is *data*, or -1."""
        return self.slots[self.probe(data, n, xxh64(<const uint8_t*>data, n, self.sketch_seed))]

    cdef int _grow(self) except -1:
        cdef Py_ssize_t i, s, cap = 2 * self.cap
        self.words = <_Word*>_grown(self.words, &self.cap, sizeof(_Word))
        PyMem_Free(self.slots)
        self.slots = <Py_ssize_t*>PyMem_Malloc(2 * cap * sizeof(Py_ssize_t))
        if self.slots is NULL:
            raise MemoryError()
        self.slots_mask = 2 * cap - 1
        for i in range(2 * cap):
            self.slots[i] = -1
        for i in range(self.used):
            s = <Py_ssize_t>(self.words[i].hash & <uint64_t>self.slots_mask)
            while self.slots[s] >= 0:
                s = (s + 1) & self.slots_mask
            self.slots[s] = i
        return 0

    def values(self, english_loader not None, chinese_loader not None, double unknown_idf, double digit_weight,
               double idf_power, uint64_t table_seed, dict irregular not None):
        """What the words' values are computed from: functions giving the English IDF table and the Chinese one
        with its default (each called once, when a word first needs it), the reference's constants, and the
        irregular American spellings (the suffix rules are :mod:`simhash_filter.model.spelling`'s, in C)."""
        self.english_loader = english_loader
        self.chinese_loader = chinese_loader
        self.unknown_idf, self.digit_weight, self.idf_power = unknown_idf, digit_weight, idf_power
        self.table_seed = table_seed
        self.irregular = irregular

    def describe(self, list words not None):
        """``(american spelling, IDF ** idf_power, n-gram count)`` of each word as this table computes them
        (None where the reference computes them): for the tests against the reference."""
        cdef list out = []
        cdef const char* data
        cdef Py_ssize_t n, e, s
        for word in words:
            data = PyUnicode_AsUTF8AndSize(word, &n)
            e = self.find(data, n)
            s = self.spelling(e)
            if not self.value(e):
                out.append(None)
            else:
                out.append((self.string(s), self.words[e].power, self.words[e].grams))
        return out

    cdef Py_ssize_t spelling(self, Py_ssize_t e) except -1:
        """The entry of entry *e*'s American spelling (found once): an irregular word's, else the suffix rules'
        rewrite of an ASCII word, else the word itself."""
        cdef _Word* w = &self.words[e]
        cdef char small[64]
        cdef char* buf = small
        cdef const char* data
        cdef Py_ssize_t n = w.length, i, s
        cdef bint ascii = True
        if w.spelled >= 0:
            return w.spelled
        american = self.irregular.get(self.string(e))
        if american is not None:
            data = PyUnicode_AsUTF8AndSize(american, &n)
            s = self.find(data, n)
            self.words[e].spelled = s
            return s
        data = self.arena + w.offset
        for i in range(n):
            if <uint8_t>data[i] >= 0x80:
                ascii = False
                break
        s = e
        if ascii and n >= 5:
            if n > 64:
                buf = <char*>PyMem_Malloc(n)
                if buf is NULL:
                    raise MemoryError()
            try:
                if _american(data, n, buf, &n):
                    s = self.find(buf, n)
            finally:
                if buf != small:
                    PyMem_Free(buf)
        self.words[e].spelled = s
        return s

    cdef bint value(self, Py_ssize_t e) except -1:
        """Fill entry *e*'s IDF power and n-gram count as ``features.word_values`` computes them, for an ASCII word
        (the English table) or a word of CJK ideographs only (the Chinese table); False for another word."""
        cdef _Word* w = &self.words[e]
        cdef const uint8_t* p = <const uint8_t*>(self.arena + w.offset)
        cdef Py_ssize_t n = w.length, i, chars
        cdef bint ascii = True, alpha = True, digit = False
        cdef uint32_t c
        cdef double idf
        cdef int gram
        cdef _Idf table
        if w.grams > 0:
            return True
        for i in range(n):
            if p[i] >= 0x80:
                ascii = False
                break
            if not (97 <= p[i] <= 122 or 65 <= p[i] <= 90):
                alpha = False
                digit = digit or 48 <= p[i] <= 57
        if self.english_loader is None:  # values() was not called: the reference computes them
            return False
        if ascii:
            if self.english is None:
                self.english = _Idf(self.english_loader())
            table, idf, chars, gram = self.english, self.unknown_idf, n, self.char_ngram
        else:
            if n % 3:
                return False
            for i in range(0, n, 3):  # three-byte UTF-8 sequences of CJK ideographs only
                if p[i] & 0xF0 != 0xE0 or p[i + 1] & 0xC0 != 0x80 or p[i + 2] & 0xC0 != 0x80:
                    return False
                c = ((p[i] & 0x0F) << 12) | ((p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F)
                if not (0x3400 <= c <= 0x9FFF or 0xF900 <= c <= 0xFAFF):
                    return False
            if self.chinese is None:
                loaded, default = self.chinese_loader()
                self.chinese = _Idf(loaded)
                self.chinese.default = default
            table, idf, chars, gram = self.chinese, self.chinese.default, n // 3, self.cjk_char_ngram
            alpha = True
        w = &self.words[e]  # a loader may have run Python code, but never on this table
        p = <const uint8_t*>(self.arena + w.offset)
        idf = table.lookup(p, n, xxh64(p, n, self.table_seed), idf)
        if not alpha and digit:
            idf *= self.digit_weight
        if not idf > 0.0 or not self.idf_power >= 0.0:  # pow's special cases: the reference computes it
            return False
        w = &self.words[e]
        w.power = pow(idf, self.idf_power)
        w.grams = chars + 3 - gram if gram and chars + 2 > gram else 1
        return True

    cdef int count_row(self, Py_ssize_t e, int64_t* scratch) except -1:
        """Count the vote bits of entry *e* (a feature): into a new row, or into *scratch* each time for a word
        with more than 255 hashes in one column (its row is then -1)."""
        cdef _Word* w = &self.words[e]
        cdef str name = self.string(e)
        cdef int n = self.cjk_char_ngram if _cjk(name[0]) else self.char_ngram
        cdef bytes padded = ("<" + name + ">").encode("utf-8")
        cdef Py_ssize_t j
        cdef int64_t top = 0
        for j in range(64):
            scratch[j] = 0
        w.size = _gram_bits(<const uint8_t*>(<char*>padded), len(padded), n, self.seed, scratch)
        for j in range(64):
            if scratch[j] > top:
                top = scratch[j]
        if top > 255:
            w.row = -1
            return 0
        if self.rows_used == self.rows_cap:
            self.rows = <uint8_t*>_grown(self.rows, &self.rows_cap, 64)
        w = &self.words[e]
        w.row = self.rows_used
        for j in range(64):
            self.rows[w.row * 64 + j] = <uint8_t>scratch[j]
        self.rows_used += 1
        return 0


cdef class _Idf:
    """An IDF table's sorted arrays (``IdfTable``: hashes, values, offsets into the UTF-8 blob), read in C."""
    cdef const uint64_t[::1] hashes
    cdef const double[::1] values
    cdef const int64_t[::1] offsets
    cdef bytes blob
    cdef double default

    def __cinit__(self, table):
        self.hashes, self.values, self.offsets, self.blob = table.arrays()

    cdef double lookup(self, const uint8_t* word, Py_ssize_t n, uint64_t h, double default) noexcept:
        """The value of the word whose UTF-8 is *word* and hash *h* (entries of one hash sit side by side)."""
        cdef Py_ssize_t lo = 0, hi = self.hashes.shape[0], mid
        cdef const char* blob = self.blob
        while lo < hi:
            mid = (lo + hi) // 2
            if self.hashes[mid] < h:
                lo = mid + 1
            else:
                hi = mid
        while lo < self.hashes.shape[0] and self.hashes[lo] == h:
            if self.offsets[lo + 1] - self.offsets[lo] == n and memcmp(blob + self.offsets[lo], word, n) == 0:
                return self.values[lo]
            lo += 1
        return default


cdef inline bint _az(const char* w, Py_ssize_t start, Py_ssize_t count) noexcept nogil:
    """Whether the *count* characters before *start* are all a-z."""
    cdef Py_ssize_t i
    if start < count:
        return False
    for i in range(start - count, start):
        if not (97 <= w[i] <= 122):
            return False
    return True


cdef inline bint _ends(const char* w, Py_ssize_t n, const char* tail) noexcept nogil:
    cdef Py_ssize_t m = strlen(tail)
    return m <= n and memcmp(w + n - m, tail, m) == 0


cdef bint _american(const char* w, Py_ssize_t n, char* out, Py_ssize_t* out_n) noexcept nogil:
    """:func:`simhash_filter.model.spelling.american`'s suffix rules on an ASCII word of 5 to 60 letters: the
    first rule whose pattern matches rewrites the word into *out* (True); False when none does.  Each rule is
    ``(?<=[a-z]{k}...)stem(suffix)$``: the stem ends where one of its suffixes (or, for rules with an optional
    suffix, nothing) ends the word, and the longest matching suffix is the regex's leftmost match."""
    cdef Py_ssize_t p, best, m
    cdef int rule, k
    cdef const char* suffix
    cdef const char* stem
    cdef const char* into
    for rule in range(6):
        best = -1
        for k in range(_RULE_SUFFIXES[rule]):
            suffix = _SUFFIXES[rule][k]
            if not _ends(w, n, suffix):
                continue
            stem = _STEMS[rule]
            m = strlen(stem)
            p = n - <Py_ssize_t>strlen(suffix) - m  # where the stem starts
            if p < 0 or (best >= 0 and p >= best):
                continue
            if rule == 4:  # ([tb])re: t or b, then re, after two letters
                if not ((w[p] == 116 or w[p] == 98) and w[p + 1] == 114 and w[p + 2] == 101 and _az(w, p, 2)):
                    continue
            elif rule == 5:  # ll after three letters and a vowel
                if not (memcmp(w + p, stem, m) == 0 and p >= 4 and _az(w, p - 1, 3)
                        and (w[p - 1] == 97 or w[p - 1] == 101 or w[p - 1] == 105 or w[p - 1] == 111
                             or w[p - 1] == 117)):
                    continue
            elif not (memcmp(w + p, stem, m) == 0 and _az(w, p, 3)):
                continue
            best = p
        if best >= 0:
            m = strlen(_STEMS[rule])
            memcpy(out, w, best)
            into = _INTO[rule]
            if rule == 4:  # the t or b kept: ter, ber
                out[best] = w[best]
                memcpy(out + best + 1, b"er", 2)
                memcpy(out + best + 3, w + best + 3, n - best - 3)
                out_n[0] = n
            else:
                memcpy(out + best, into, strlen(into))
                memcpy(out + best + strlen(into), w + best + m, n - best - m)
                out_n[0] = n - m + <Py_ssize_t>strlen(into)
            return True
    return False


# The suffix rules of simhash_filter.model.spelling (the tests check this table against them word by word).
cdef const char* _STEMS[6]
cdef const char* _INTO[6]
cdef int _RULE_SUFFIXES[6]
cdef const char* _SUFFIXES[6][12]
_STEMS[:] = [b"is", b"ys", b"our", b"ogue", b"tre", b"ll"]
_INTO[:] = [b"iz", b"yz", b"or", b"og", b"er", b"l"]
_RULE_SUFFIXES[:] = [8, 4, 12, 2, 2, 4]
_SUFFIXES[0][:8] = [b"e", b"es", b"ed", b"ing", b"ation", b"ations", b"er", b"ers"]
_SUFFIXES[1][:4] = [b"e", b"es", b"ed", b"ing"]
_SUFFIXES[2][:12] = [b"", b"s", b"ed", b"ing", b"ful", b"ite", b"ites", b"able", b"ably", b"less", b"er", b"ers"]
_SUFFIXES[3][:2] = [b"", b"s"]
_SUFFIXES[4][:2] = [b"", b"s"]
_SUFFIXES[5][:4] = [b"ed", b"ing", b"er", b"ers"]


cdef void* _grown(void* p, Py_ssize_t* cap, size_t item) except NULL:
    """*p* reallocated to twice its capacity of items (*cap* updated)."""
    cdef void* q = PyMem_Realloc(p, 2 * cap[0] * item)
    if q is NULL:
        raise MemoryError()
    cap[0] *= 2
    return q


cdef class _Buffer(_Ints):
    """An :class:`_Ints` with a double beside each item (a page's entries and their values)."""
    cdef double* values

    def __cinit__(self):
        self.values = <double*>PyMem_Malloc(self.cap * sizeof(double))
        if self.values is NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.values)

    cdef inline int add(self, Py_ssize_t item, double value) except -1:
        cdef double* values
        if self.n == self.cap:
            values = <double*>PyMem_Realloc(self.values, 2 * self.cap * sizeof(double))
            if values is NULL:
                raise MemoryError()
            self.values = values
        self.values[self.n] = value
        return self.push(item)


cdef int _count_word(WordTable table, Py_ssize_t e, Py_ssize_t segment, _Buffer seg) except -1:
    """One occurrence of entry *e* in *segment*: a new distinct word of it, or one more of a known one."""
    cdef _Word* w = &table.words[e]
    if w.seen == segment:
        seg.values[w.slot] += 1.0
        return 0
    w.seen = segment
    w.slot = seg.n
    return seg.add(e, 1.0)


cdef Py_ssize_t _count_ascii_words(WordTable table, str text, Py_ssize_t budget, Py_ssize_t segment, _Buffer seg,
                                   _Key lower) except -1:
    """Count the words of an ASCII *text* (runs of letters and digits, lower-cased: the reference's ``translate``
    and ``split``), at most *budget*; *lower* is a buffer for the lower-cased text."""
    cdef Py_ssize_t i = 0, j, start, n, taken = 0
    cdef const char* data = PyUnicode_AsUTF8AndSize(text, &n)  # an ASCII string's own characters
    lower.reserve(n + 1)
    for j in range(n):
        lower.data[j] = data[j] + 32 if 65 <= data[j] <= 90 else data[j]
    while i < n and taken < budget:
        while i < n and not _ascii_alnum(lower.data[i]):
            i += 1
        if i == n:
            break
        start = i
        while i < n and _ascii_alnum(lower.data[i]):
            i += 1
        _count_word(table, table.find(lower.data + start, i - start), segment, seg)
        taken += 1
    return taken


cdef Py_ssize_t _count_unicode(WordTable table, str text, Py_ssize_t budget, Py_ssize_t segment, _Buffer seg,
                               tuple segmenter) except -1:
    """Count the words of a normalised, case-folded *text* (``features.tokenize``'s words after its NFKC and
    casefold: runs of letters and digits, runs of CJK ideographs segmented by *segmenter*), at most *budget*."""
    cdef Py_ssize_t i = 0, j, n = len(text), taken = 0, size
    cdef Py_UCS4 c
    cdef const char* data
    cdef _Key key = _Key()
    segment_run, segment_slices, max_cached_run = segmenter
    while i < n and taken < budget:
        c = text[i]
        if _cjk(c):
            j = i + 1
            while j < n and _cjk(text[j]):
                j += 1
            if j - i <= max_cached_run:
                taken += _count_run(table, text, i, j, budget - taken, segment, seg, segment_run, key)
            else:
                for piece in segment_slices(text[i:j]):
                    for word in piece:
                        if taken == budget:
                            break
                        data = PyUnicode_AsUTF8AndSize(word, &size)
                        _count_word(table, table.find(data, size), segment, seg)
                        taken += 1
                    if taken == budget:
                        break
            i = j
        elif Py_UNICODE_ISALNUM(c):
            j = i + 1
            while j < n and Py_UNICODE_ISALNUM(text[j]) and not _cjk(text[j]):
                j += 1
            word = text[i:j]
            data = PyUnicode_AsUTF8AndSize(word, &size)
            _count_word(table, table.find(data, size), segment, seg)
            taken += 1
            i = j
        else:
            i += 1
    return taken


cdef class _Key:
    """A growing byte buffer (a run's key)."""
    cdef char* data
    cdef Py_ssize_t cap

    def __dealloc__(self):
        PyMem_Free(self.data)

    cdef int reserve(self, Py_ssize_t n) except -1:
        if n > self.cap:
            PyMem_Free(self.data)
            self.data = <char*>PyMem_Malloc(n)
            if self.data is NULL:
                self.cap = 0
                raise MemoryError()
            self.cap = n
        return 0


cdef Py_ssize_t _count_run(WordTable table, str text, Py_ssize_t i, Py_ssize_t j, Py_ssize_t budget,
                           Py_ssize_t segment, _Buffer seg, object segment_run, _Key key) except -1:
    """Count the words of the run of CJK ideographs ``text[i:j]``, at most *budget*: segmented by *segment_run* the
    first time the table meets it, then read from the table (its entry's key: 0x01, then the run's UTF-8)."""
    cdef Py_ssize_t k, n = 3 * (j - i) + 1, e, start, end, taken = 0, size
    cdef uint32_t c
    cdef const char* data
    key.reserve(n)
    key.data[0] = 1
    for k in range(i, j):  # three UTF-8 bytes each: the ideographs are in the BMP, above U+0800
        c = <Py_UCS4>text[k]
        key.data[1 + 3 * (k - i)] = <char>(0xE0 | (c >> 12))
        key.data[2 + 3 * (k - i)] = <char>(0x80 | ((c >> 6) & 0x3F))
        key.data[3 + 3 * (k - i)] = <char>(0x80 | (c & 0x3F))
    e = table.known(key.data, n)
    if e < 0:
        run = text[i:j]
        start = table.runs.n
        for word in segment_run(run):
            data = PyUnicode_AsUTF8AndSize(word, &size)
            table.runs.push(table.find(data, size))
        e = table.find(key.data, n)
        table.words[e].run_start, table.words[e].run_len = start, table.runs.n - start
    start, end = table.words[e].run_start, table.words[e].run_start + table.words[e].run_len
    while start < end and taken < budget:
        _count_word(table, table.runs.items[start], segment, seg)
        start += 1
        taken += 1
    return taken


def page_fingerprint(WordTable table not None, FeatureCounts structure_bits not None, tuple texts not None,
                     object structure, Py_ssize_t max_tokens, Py_ssize_t max_features, double structure_weight,
                     Py_ssize_t min_features, Py_ssize_t bins, double step, tuple segmenter not None,
                     object word_values, object fsum):
    """``(features, value, sketch)`` of a page's text segments and structure features under single-word features:
    what the reference's ``page_features`` then ``Fingerprinter._decide`` give (value and sketch None when the page
    has fewer than *min_features* text features), bit for bit; None where this pass declines (a weight too large
    for exact integer sums) and the reference must compute it.  *segmenter* is ``(segment_run, segment_slices,
    MAX_CACHED_RUN)`` of :mod:`~simhash_filter.model.segment`, for runs of CJK ideographs; *word_values* is the
    reference's, for words the table cannot value; *fsum* is ``math.fsum``."""
    cdef _Buffer seg = _Buffer(), segments = _Buffer(), tf = _Buffer(), grouped = _Buffer()
    cdef Py_ssize_t budget = max_tokens, taken, i, j, start, e, first, last, room, page, segment, group, s
    cdef Py_ssize_t nbytes = (bins + 7) // 8
    cdef _Key lower = _Key()
    cdef _Word* w
    cdef double rw, weight, t_norm, s_norm, scale
    cdef list missing, values
    cdef int64_t scratch[65]
    cdef int64_t ones[64]
    cdef int64_t total = 0, units
    cdef uint64_t value = 0
    cdef const uint8_t* row
    cdef uint64_t* out
    cdef uint8_t* packed
    if min_features < 1 or bins <= 0 or not 0.0 <= structure_weight < 1.0:
        return None
    if table.used > table.limit:
        table._reset()
    page = table.serial
    table.serial += 1
    # 1. each segment's distinct words (first appearance first) and their counts, within the token budget
    for rw, text in texts:
        if budget <= 0:
            break
        start = seg.n
        segment = table.serial
        table.serial += 1
        if (<str>text).isascii():
            taken = _count_ascii_words(table, text, budget, segment, seg, lower)
        else:
            taken = _count_unicode(table, _normalize("NFKC", text).casefold(), budget, segment, seg, segmenter)
        budget -= taken
        if seg.n - start > max_features:  # only so many can become features: respell no more
            seg.n = start + max_features
        segments.add(seg.n, rw)
    # 2. the American spelling of the words met for the first time
    for i in range(seg.n):
        table.spelling(seg.items[i])
    # 3. the page's features: each segment's spellings counted, added to tf (new ones while there is room)
    first = 0
    for s in range(segments.n):
        last, rw = segments.items[s], segments.values[s]
        group = table.serial
        table.serial += 1
        grouped.n = 0
        for i in range(first, last):
            e = table.words[seg.items[i]].spelled
            w = &table.words[e]
            if w.grouped == group:
                grouped.values[w.group] += seg.values[i]
            else:
                w.grouped = group
                w.group = grouped.n
                grouped.add(e, seg.values[i])
        room = max_features - tf.n
        for j in range(grouped.n):
            e = grouped.items[j]
            w = &table.words[e]
            if w.seen == page:
                tf.values[w.slot] = tf.values[w.slot] + rw * grouped.values[j]
            elif room > 0:
                w.seen = page
                w.slot = tf.n
                tf.add(e, 0.0 + rw * grouped.values[j])
                room -= 1
        first = last
    # 4. IDF powers and n-gram counts of features met for the first time (the reference's word_values for a word
    # that is neither ASCII nor CJK ideographs only); their weights
    missing = [table.string(tf.items[i]) for i in range(tf.n) if not table.value(tf.items[i])]
    if missing:
        values = word_values(missing)
        j = 0
        for i in range(tf.n):
            w = &table.words[tf.items[i]]
            if w.grams == 0:
                w.power, w.grams = values[j]
                j += 1
    for i in range(tf.n):
        w = &table.words[tf.items[i]]
        weight = tf.values[i]
        tf.values[i] = w.power * (1.0 + log(weight) if weight > 1.0 else weight)
    # 5. the structure, scaled against the text as page_features scales it
    scaled = {}
    if structure_weight > 0 and structure:
        s_norm = sqrt(fsum([v * v for v in structure.values()]))
        t_norm = sqrt(fsum([tf.values[i] * tf.values[i] / <double>table.words[tf.items[i]].grams
                            for i in range(tf.n)]))
        scale = structure_weight / (1 - structure_weight) * t_norm / s_norm if t_norm > 0 else 1.0 / s_norm
        scaled = {name: v * scale for name, v in structure.items()}
    if tf.n < min_features:
        return tf.n + len(scaled), None, None
    # 6. the vote: each word's weight shared among its n-grams, rounded to units of 1/1024
    for j in range(64):
        ones[j] = 0
    for i in range(tf.n):
        e = tf.items[i]
        if table.words[e].row == -2 or table.words[e].row == -1:
            table.count_row(e, scratch)
        w = &table.words[e]
        weight = rint(tf.values[i] / <double>w.size * 1024.0)
        if weight < 1.0:
            weight = 1.0
        if not weight <= _MAX_UNITS:
            return None
        units = <int64_t>weight
        total += units * w.size
        if w.row >= 0:
            row = table.rows + w.row * 64
            for j in range(64):
                ones[j] += units * row[j]
        else:
            for j in range(64):
                ones[j] += units * scratch[j]
    if _add_votes(structure_bits, scaled, False, 0, 0, ones, &total):
        return None
    for j in range(64):
        if 2 * ones[j] - total > 0:
            value |= (<uint64_t>1) << j
    # 7. the sketch
    out = <uint64_t*>PyMem_Malloc(bins * sizeof(uint64_t))
    packed = <uint8_t*>PyMem_Malloc(nbytes)
    if out is NULL or packed is NULL:
        PyMem_Free(out)
        PyMem_Free(packed)
        raise MemoryError()
    try:
        for i in range(bins):
            out[i] = _EMPTY
        for i in range(tf.n):
            _sketch_add(out, <uint64_t>bins, table.words[tf.items[i]].hash, tf.values[i], step)
        return tf.n + len(scaled), value, _sketch_bytes(out, bins, packed, nbytes)
    finally:
        PyMem_Free(out)
        PyMem_Free(packed)
