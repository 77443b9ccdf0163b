# cython: language_level=3, boundscheck=False
"""An experiment (issue #27): the model's tree walk over a page that Lexbor parsed (selectolax's
``LexborHTMLParser``), giving the same kind of tuple as ``simhash_filter.model._core.walk`` gives over libxml2's tree:
``(tag_of, tid, parents, depths, ends, candidates, seg_owner, seg_text, truncated)``.

Not part of the package and not the model: a benchmark-side prototype (``benchmarks/bench_parser.py``), not for
hostile input (Lexbor's tree construction is quadratic in the depth of nested ``<div>``s: docs/speed.md).

Build (in place, next to this file; needs Cython and selectolax, the ``bench`` extra)::

    .venv/bin/cythonize -i -3 benchmarks/lexbor/lexbor_walk.pyx

``bench_parser.py`` runs that by itself when the module is missing or older than this file.

How it reaches Lexbor without its headers (the selectolax wheel ships none): the walk reads the leading fields of
Lexbor's node, text and attribute records through declarations of its own below, laid out as in the Lexbor sources
that selectolax 1.0.x compiles (``lexbor/dom/interfaces/{node,character_data,attr,element}.h``); the two name
look-ups it needs (a tag id's name, an attribute's name) are Lexbor functions that selectolax's extension module
exports, found at import with ``dlsym`` in that module (``dlopen`` with ``RTLD_NOLOAD``: the one Python loaded).
Nothing is linked against at build time.  At import the layout is checked on a small page (:func:`_self_check`):
a selectolax whose Lexbor lays its records out otherwise makes the import fail rather than read garbage.

What the walk gives, as the libxml2 walk does after ``html.parse`` stripped the invisible elements:

- the elements under the root (``<html>``) in document order, each with its tag's number (tags numbered by first
  appearance, ``tag_of`` names them), its parent's index, its depth and the index of the last element of its
  subtree;
- ``candidates``: the elements whose tag is in *boilerplate_tags* or whose ``class``, ``id`` or ``role`` value
  satisfies *boilerplate_words*;
- text segments in the order of an event walk: an element's text at its start, its tail after its subtree closes
  (owned by its parent).  A text is the concatenation of the text nodes up to the next walked element, passing over
  comments, processing instructions and invisible elements (``INVISIBLE_TAGS``: dropped with their content but not
  with their tail, as ``etree.strip_elements(..., with_tail=False)`` leaves the tail joined to the text before it);
  texts that are empty or only white space are left out;
- the cap: after *max_elements* elements the walk stops, ``truncated`` is True and the open elements end at the
  last one.
"""

from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport uintptr_t
from libc.string cimport memcmp, memset
from posix.dlfcn cimport RTLD_LAZY, dlerror, dlopen, dlsym

cdef extern from "<dlfcn.h>":
    int RTLD_NOLOAD

cdef extern from *:
    """
    #include <stddef.h>
    #include <stdint.h>

    /* The leading fields of Lexbor's records (see the module's docstring); names of our own. */
    typedef struct sfx_node sfx_node;
    struct sfx_node {
        void *event_target;
        uintptr_t local_name;        /* tag id (elements), attribute id (attributes) */
        uintptr_t prefix;
        uintptr_t ns;
        void *owner_document;
        sfx_node *next;
        sfx_node *prev;
        sfx_node *parent;
        sfx_node *first_child;
        sfx_node *last_child;
        void *user;
        unsigned int type;           /* an enum in Lexbor */
    };
    typedef struct { unsigned char *data; size_t length; } sfx_str;
    typedef struct { sfx_node node; sfx_str data; } sfx_chars;   /* text, CDATA, comment */
    typedef struct sfx_attr sfx_attr;
    struct sfx_attr {
        sfx_node node;
        uintptr_t upper_name;
        uintptr_t qualified_name;
        sfx_str *value;
        void *owner;
        sfx_attr *next;
        sfx_attr *prev;
    };
    typedef struct {
        sfx_node node;
        uintptr_t upper_name;
        uintptr_t qualified_name;
        sfx_str *is_value;
        sfx_attr *first_attr;
    } sfx_element;

    typedef const unsigned char *(*sfx_tag_name_f)(uintptr_t tag_id, size_t *len);
    typedef const unsigned char *(*sfx_attr_name_f)(sfx_attr *attr, size_t *len);

    static sfx_tag_name_f sfx_tag_name = NULL;
    static sfx_attr_name_f sfx_attr_name = NULL;
    """
    ctypedef struct sfx_node:
        uintptr_t local_name
        sfx_node* next
        sfx_node* parent
        sfx_node* first_child
        unsigned int type
    ctypedef struct sfx_str:
        unsigned char* data
        size_t length
    ctypedef struct sfx_chars:
        sfx_node node
        sfx_str data
    ctypedef struct sfx_attr:
        sfx_node node
        sfx_str* value
        sfx_attr* next
    ctypedef struct sfx_element:
        sfx_node node
        sfx_attr* first_attr
    ctypedef const unsigned char* (*sfx_tag_name_f)(uintptr_t tag_id, size_t* len)
    ctypedef const unsigned char* (*sfx_attr_name_f)(sfx_attr* attr, size_t* len)
    sfx_tag_name_f sfx_tag_name
    sfx_attr_name_f sfx_attr_name

import selectolax.lexbor

from simhash_filter.model.html import INVISIBLE_TAGS

cdef enum:
    # Lexbor's node types
    ELEMENT = 1
    TEXT = 3
    CDATA = 4
    # Tag and attribute ids below this are Lexbor's static ones (the same in every document); above it an id is
    # the address of the name's record in the document's own table (no address is that low).
    STATIC_IDS = 4096


cdef void* _symbol(void* handle, const char* name) except NULL:
    cdef void* found = dlsym(handle, name)
    if found is NULL:
        raise ImportError(f"selectolax's module does not export {name.decode()}")
    return found


cdef void* _module = dlopen(selectolax.lexbor.__file__.encode(), RTLD_LAZY | RTLD_NOLOAD)
if _module is NULL:
    raise ImportError(f"cannot find selectolax's loaded module: {(<bytes>dlerror()).decode(errors='replace')}")
sfx_tag_name = <sfx_tag_name_f>_symbol(_module, b"lxb_tag_name_by_id_noi")
sfx_attr_name = <sfx_attr_name_f>_symbol(_module, b"lxb_dom_attr_local_name_noi")

cdef frozenset _INVISIBLE = frozenset(INVISIBLE_TAGS)

# Static tag ids: their names (None until first met) and whether they are invisible (0 unknown, 1 visible,
# 2 invisible); the same in every document, so kept for the process.
cdef list _static_names = [None] * STATIC_IDS
cdef unsigned char _static_kind[STATIC_IDS]
memset(_static_kind, 0, sizeof(_static_kind))

# The static ids of the class, id and role attributes (0: role has none, it is looked up by name per document).
cdef uintptr_t _CLASS_ID = 0
cdef uintptr_t _ID_ID = 0
cdef uintptr_t _ROLE_ID = 0


cdef str _tag_name(uintptr_t tag_id):
    cdef size_t n = 0
    cdef const unsigned char* name = sfx_tag_name(tag_id, &n)
    if name is NULL:
        return ""
    return PyUnicode_DecodeUTF8(<const char*>name, n, "replace")


cdef str _attr_name(sfx_attr* attr):
    cdef size_t n = 0
    cdef const unsigned char* name = sfx_attr_name(attr, &n)
    if name is NULL:
        return ""
    return PyUnicode_DecodeUTF8(<const char*>name, n, "replace")


cdef class _Walk:
    """One page's walk: the per-document state (dynamic tag ids, the role attribute's id, tag numbers)."""

    cdef list tag_of, tid, parents, depths, ends, candidates, seg_owner, seg_text
    cdef dict dynamic_kind   # dynamic tag id -> True when invisible
    cdef dict dynamic_number # dynamic tag id -> its number
    cdef list bp_tag         # tag number -> True when the tag is a boilerplate tag
    cdef Py_ssize_t number_of[STATIC_IDS]   # static tag id -> its number + 1 (0: not met yet)
    cdef uintptr_t role_id   # the role attribute's id in this document, once met (0: not met)
    cdef set other_attrs     # dynamic attribute ids known not to be role
    cdef frozenset boilerplate_tags

    def __cinit__(self, frozenset boilerplate_tags):
        self.tag_of = []
        self.tid = []
        self.parents = []
        self.depths = []
        self.ends = []
        self.candidates = []
        self.seg_owner = []
        self.seg_text = []
        self.dynamic_kind = {}
        self.dynamic_number = {}
        self.bp_tag = []
        memset(self.number_of, 0, sizeof(self.number_of))
        self.role_id = _ROLE_ID
        self.other_attrs = set()
        self.boilerplate_tags = boilerplate_tags

    cdef inline bint invisible(self, uintptr_t tag_id):
        cdef unsigned char kind
        if tag_id < STATIC_IDS:
            kind = _static_kind[tag_id]
            if kind == 0:
                name = _tag_name(tag_id)
                _static_names[tag_id] = name
                kind = 2 if name in _INVISIBLE else 1
                _static_kind[tag_id] = kind
            return kind == 2
        hidden = self.dynamic_kind.get(tag_id)
        if hidden is None:
            hidden = self.dynamic_kind[tag_id] = _tag_name(tag_id) in _INVISIBLE
        return hidden

    cdef Py_ssize_t _new_number(self, str name):
        cdef Py_ssize_t number = len(self.tag_of)
        self.tag_of.append(name)
        self.bp_tag.append(name in self.boilerplate_tags)
        return number

    cdef inline Py_ssize_t number(self, uintptr_t tag_id):
        """The number of a visible element's tag (numbered when first met)."""
        cdef Py_ssize_t k
        if tag_id < STATIC_IDS:
            k = self.number_of[tag_id]
            if k == 0:
                k = self._new_number(<str>_static_names[tag_id]) + 1
                self.number_of[tag_id] = k
            return k - 1
        number = self.dynamic_number.get(tag_id)
        if number is None:
            number = self.dynamic_number[tag_id] = self._new_number(_tag_name(tag_id))
        return number

    cdef object text_run(self, sfx_node** at):
        """The text from ``at[0]`` up to the next walked element (left in ``at[0]``, NULL at the end of the
        siblings), or None when it is empty or only white space."""
        cdef sfx_node* x = at[0]
        cdef sfx_chars* first = NULL
        cdef sfx_chars* c
        cdef list parts = None
        cdef object text
        while x is not NULL:
            if x.type == ELEMENT:
                if not self.invisible(x.local_name):
                    break
            elif x.type == TEXT or x.type == CDATA:
                c = <sfx_chars*>x
                if c.data.length:
                    if first is NULL:
                        first = c
                    else:
                        if parts is None:
                            parts = [_decode(first)]
                        parts.append(_decode(c))
            x = x.next
        at[0] = x
        if first is NULL:
            return None
        if parts is None:
            return _visible(first)
        text = "".join(parts)
        return None if (<str>text).isspace() else text

    cdef bint flagged(self, sfx_element* el, object boilerplate_words) except -1:
        """Whether the element's class, id or role value names boilerplate (the first of each attribute)."""
        cdef sfx_attr* a = el.first_attr
        cdef sfx_str* value_class = NULL
        cdef sfx_str* value_id = NULL
        cdef sfx_str* value_role = NULL
        cdef bint has_class = False, has_id = False, has_role = False
        cdef uintptr_t aid
        while a is not NULL:
            aid = a.node.local_name
            if aid == _CLASS_ID:
                if not has_class:
                    has_class = True
                    value_class = a.value
            elif aid == _ID_ID:
                if not has_id:
                    has_id = True
                    value_id = a.value
            elif aid >= STATIC_IDS or aid == self.role_id:
                if self.role_id == 0 and aid not in self.other_attrs:
                    if _attr_name(a) == "role":
                        self.role_id = aid
                    else:
                        self.other_attrs.add(aid)
                if aid == self.role_id and not has_role:
                    has_role = True
                    value_role = a.value
            a = a.next
        return (
            _flag(value_class, boilerplate_words)
            or _flag(value_id, boilerplate_words)
            or _flag(value_role, boilerplate_words)
        )


cdef inline str _decode(sfx_chars* c):
    return PyUnicode_DecodeUTF8(<const char*>c.data.data, c.data.length, "replace")


cdef inline object _visible(sfx_chars* c):
    """The text node's text, or None when it is only white space (as ``str.isspace`` says; an all-ASCII text is
    judged on its bytes without making a string)."""
    cdef const unsigned char* p = c.data.data
    cdef size_t i, n = c.data.length
    cdef unsigned char b
    cdef bint ascii = True
    for i in range(n):
        b = p[i]
        if b >= 0x80:
            ascii = False
            break
        if not (b == 32 or 9 <= b <= 13 or 28 <= b <= 31):
            text = _decode(c)
            return text
    if ascii:
        return None
    text = _decode(c)
    return None if (<str>text).isspace() else text


cdef inline bint _flag(sfx_str* value, object boilerplate_words) except -1:
    if value is NULL or value.length == 0:
        return False
    return bool(boilerplate_words(PyUnicode_DecodeUTF8(<const char*>value.data, value.length, "replace")))


def walk(object parser not None, Py_ssize_t max_elements, frozenset boilerplate_tags, object boilerplate_words):
    """``(tag_of, tid, parents, depths, ends, candidates, seg_owner, seg_text, truncated)`` of the document that
    *parser* (a ``selectolax.lexbor.LexborHTMLParser``) holds, from its root element, as
    ``simhash_filter.model._core.walk`` gives them for libxml2's tree; None when the document has no root."""
    root = parser.root
    if root is None:
        return None
    cdef uintptr_t address = root.mem_id
    return _walk(<sfx_node*>address, max_elements, boilerplate_tags, boilerplate_words)


cdef tuple _walk(sfx_node* top, Py_ssize_t max_elements, frozenset boilerplate_tags, object boilerplate_words):
    cdef _Walk w = _Walk(boilerplate_tags)
    cdef list tid = w.tid, parents = w.parents, depths = w.depths, ends = w.ends, candidates = w.candidates
    cdef list seg_owner = w.seg_owner, seg_text = w.seg_text
    cdef list stack = []
    cdef sfx_node* c = top
    cdef sfx_node* nxt
    cdef Py_ssize_t i, number, n = 0
    cdef bint truncated = False
    cdef object text
    if top.type != ELEMENT or w.invisible(top.local_name):
        return [], [], [], [], [], [], [], [], False
    while True:
        # the element's start (c is always a walked element here)
        if n >= max_elements:
            truncated = True
            break
        i = n
        n += 1
        number = w.number(c.local_name)
        tid.append(number)
        parents.append(stack[-1] if stack else -1)
        depths.append(len(stack))
        ends.append(i)
        if w.bp_tag[number] or w.flagged(<sfx_element*>c, boilerplate_words):
            candidates.append(i)
        stack.append(i)
        nxt = c.first_child
        text = w.text_run(&nxt)
        if text is not None:
            seg_owner.append(i)
            seg_text.append(text)
        if nxt is not NULL:
            c = nxt
            continue
        # the ends of the element and of every ancestor whose last walked child it is
        while True:
            ends[stack.pop()] = n - 1
            if c is top:
                break
            nxt = c.next
            text = w.text_run(&nxt)
            if text is not None:
                seg_owner.append(stack[-1])
                seg_text.append(text)
            if nxt is not NULL:
                c = nxt
                break
            c = c.parent
        if c is top:
            break
    if truncated:
        for i in stack:
            ends[i] = n - 1
    return w.tag_of, tid, parents, depths, ends, candidates, seg_owner, seg_text, truncated


def _self_check() -> None:
    """Find the class and id attributes' static ids (and role's, should it have one), and check the record layout
    on a small page: a mismatch raises ImportError."""
    global _CLASS_ID, _ID_ID, _ROLE_ID
    parser = selectolax.lexbor.LexborHTMLParser(b'<p class="c" id="i" role="r">one<!-- x --><b>two</b>three</p>')
    p = parser.css_first("p")
    cdef sfx_element* el = <sfx_element*><uintptr_t>p.mem_id
    cdef sfx_attr* a = el.first_attr
    ids = {}
    while a is not NULL:
        ids[_attr_name(a)] = a.node.local_name
        a = a.next
    if set(ids) != {"class", "id", "role"} or not (0 < ids["class"] < STATIC_IDS and 0 < ids["id"] < STATIC_IDS):
        raise ImportError(f"Lexbor's attribute records are not laid out as this module expects: {ids}")
    _CLASS_ID = ids["class"]
    _ID_ID = ids["id"]
    _ROLE_ID = ids["role"] if ids["role"] < STATIC_IDS else 0
    got = walk(parser, 100, frozenset(), lambda v: v in ("c", "r"))
    want = (["html", "body", "p", "b"], [0, 1, 2, 3], [-1, 0, 1, 2], [0, 1, 2, 3], [3, 3, 3, 3], [2],
            [2, 3, 2], ["one", "two", "three"], False)
    if got != want:
        raise ImportError(f"Lexbor's node records are not laid out as this module expects: {got}")


_self_check()
