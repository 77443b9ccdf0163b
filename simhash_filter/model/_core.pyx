# cython: language_level=3, embedsignature=True
"""The compiled core: the tree walk over libxml2's nodes of a page that lxml parsed, and the sketch.

Each gives bit for bit what its pure-Python reference gives.  The walk gives exactly what :func:`simhash_filter.model.extract._extract_walk` collects with ``etree.iterwalk``
(the reference): the elements in document order with their tags, parents, depths and subtree ends, their
``class``/``id``/``role`` values, and the text segments in the order of an event walk (an element's text at
its start, its tail after the end of its subtree), through lxml's own C accessors (``textOf``, ``tailOf``,
``namespacedName``), so the strings are the ones lxml's ``.text``, ``.tail`` and ``.tag`` return.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.math cimport rint
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, strcmp

from lxml.includes cimport tree
from lxml.includes.etreepublic cimport _Element, namespacedName, tailOf, textOf

cimport lxml.includes.etreepublic as cetree

import sys

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


def walk(_Element root not None, Py_ssize_t max_elements, frozenset boilerplate_tags, object boilerplate_words):
    """``(tag_of, tid, parents, depths, ends, candidates, seg_owner, seg_text, truncated)`` of the subtree of
    *root*, stopping after *max_elements* elements (then ``truncated`` is True and the open elements end at the
    last one): ``tid`` numbers each element's tag by first appearance (``tag_of`` names the numbers), and
    ``candidates`` are the elements whose tag is in *boilerplate_tags* or whose ``class``, ``id`` or ``role``
    satisfies *boilerplate_words*.  None for a tree it leaves to the reference walk (an attribute holding
    entity references)."""
    try:
        return _walk(root, max_elements, boilerplate_tags, boilerplate_words)
    except _Unusual:
        return None


cdef inline bint _flagged(object value, object boilerplate_words):
    return value is not None and value and boilerplate_words(value)


cdef tuple _walk(_Element root, Py_ssize_t max_elements, frozenset boilerplate_tags, object boilerplate_words):
    cdef list tag_of = [], tid = [], parents = [], depths = [], ends = [], candidates = []
    cdef list seg_owner = [], seg_text = [], stack = []
    cdef dict names = {}
    cdef tree.xmlNode* top = root._c_node
    cdef tree.xmlNode* c_node = top
    cdef tree.xmlNode* c_next
    cdef Py_ssize_t i, n = 0
    cdef bint truncated = False
    cdef object text, tag, number
    while True:
        # the node's start
        if c_node.type == tree.XML_ELEMENT_NODE:
            if n >= max_elements:
                truncated = True
                break
            i = n
            n += 1
            tag = namespacedName(c_node)
            number = names.get(tag)
            if number is None:
                number = names[tag] = len(tag_of)
                tag_of.append(tag)
            tid.append(number)
            parents.append(stack[-1] if stack else -1)
            depths.append(len(stack))
            ends.append(i)
            if (
                tag in boilerplate_tags
                or _flagged(_attribute(c_node, b"class"), boilerplate_words)
                or _flagged(_attribute(c_node, b"id"), boilerplate_words)
                or _flagged(_attribute(c_node, b"role"), boilerplate_words)
            ):
                candidates.append(i)
            stack.append(i)
            text = textOf(c_node)
            if _has_text(text):
                seg_owner.append(i)
                seg_text.append(text)
            c_next = _next_walked(c_node.children)
            if c_next is not NULL:
                c_node = c_next
                continue
        # the ends of the node and of every ancestor whose last walked child it is
        while True:
            if c_node.type == tree.XML_ELEMENT_NODE:
                ends[stack.pop()] = n - 1
            if c_node is top:
                break
            if stack:
                text = tailOf(c_node)
                if _has_text(text):
                    seg_owner.append(stack[-1])
                    seg_text.append(text)
            c_next = _next_walked(c_node.next)
            if c_next is not NULL:
                c_node = c_next
                break
            c_node = c_node.parent
        if c_node is top:
            break
    if truncated:
        for i in stack:
            ends[i] = n - 1
    return tag_of, tid, parents, depths, ends, candidates, seg_owner, seg_text, truncated


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
    cdef Py_ssize_t i, j, n
    cdef uint64_t h, x, value, nb = <uint64_t>bins, copies, k
    cdef double w, r
    cdef const char* data
    try:
        for i in range(bins):
            out[i] = _EMPTY
        for word, weight in words.items():
            data = PyUnicode_AsUTF8AndSize(word, &n)
            h = xxh64(<const uint8_t*>data, n, seed)
            w = weight
            r = rint(w / step)
            copies = <uint64_t>r if r >= 1.0 else 1
            k = 0
            while k < copies:
                x = _mix(h ^ (k * _GOLDEN))
                j = <Py_ssize_t>(x % nb)
                value = x // nb
                if value < out[j]:
                    out[j] = value
                k += 1
        _densify(out, bins)
        for i in range(nbytes):
            packed[i] = 0
        for i in range(bins):
            if out[i] & 1:
                packed[i >> 3] |= <uint8_t>(1 << (i & 7))
        return PyBytes_FromStringAndSize(<char*>packed, nbytes)
    finally:
        PyMem_Free(out)
        PyMem_Free(packed)


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
