# The model's parser and tree walk: Lexbor (compiled into this extension from the pinned selectolax sdist's sources,
# setup.py) parses a page's UTF-8 bytes, and the walk reads its tree in the order of an event walk, giving what the
# reference (model.lexbor.walk, over selectolax's node API on the same Lexbor) gives.  Included by _core.pyx.

cdef extern from "lexbor/html/html.h" nogil:
    ctypedef unsigned char lxb_char_t
    ctypedef unsigned int lxb_status_t
    ctypedef uintptr_t lxb_tag_id_t
    ctypedef uintptr_t lxb_dom_attr_id_t
    ctypedef uint32_t lxb_dom_document_opt_t
    ctypedef struct lexbor_str_t:
        lxb_char_t* data
        size_t length
    ctypedef struct lexbor_hash_t:
        pass
    ctypedef struct lxb_dom_node_t:
        uintptr_t local_name
        lxb_dom_node_t* next
        lxb_dom_node_t* parent
        lxb_dom_node_t* first_child
        int type
    ctypedef struct lxb_dom_attr_t:
        lxb_dom_node_t node
        lexbor_str_t* value
        lxb_dom_attr_t* next
    ctypedef struct lxb_dom_element_t:
        lxb_dom_node_t node
        lxb_dom_attr_t* first_attr
    ctypedef struct lxb_dom_document_t:
        lexbor_hash_t* attrs
    ctypedef struct lxb_html_document_t:
        lxb_dom_document_t dom_document
    ctypedef struct lxb_dom_attr_data_t:
        lxb_dom_attr_id_t attr_id

    enum:
        LXB_STATUS_OK
        LXB_DOM_NODE_TYPE_ELEMENT
        LXB_DOM_NODE_TYPE_TEXT
        LXB_DOM_ATTR_CLASS
        LXB_DOM_ATTR_ID
        LXB_TAG__LAST_ENTRY
        LXB_TAG_TBODY
        LXB_DOM_DOCUMENT_OPT_WO_EVENTS

    lxb_html_document_t* lxb_html_document_create()
    lxb_html_document_t* lxb_html_document_destroy(lxb_html_document_t* document)
    lxb_status_t lxb_html_document_parse(lxb_html_document_t* document, const lxb_char_t* html, size_t size)
    void lxb_html_document_dom_opt_set(lxb_html_document_t* document, lxb_dom_document_opt_t opt)
    void lxb_html_document_scripting_set(lxb_html_document_t* document, bint scripting)
    lxb_dom_element_t* lxb_dom_document_element(lxb_dom_document_t* document)
    const lxb_char_t* lxb_dom_element_qualified_name(const lxb_dom_element_t* element, size_t* length)
    const lxb_char_t* lxb_tag_name_by_id(lxb_tag_id_t tag_id, size_t* length)
    const lxb_dom_attr_data_t* lxb_dom_attr_data_by_local_name(lexbor_hash_t* hash, const lxb_char_t* name,
                                                                size_t length)

cdef extern from "lexbor/dom/interfaces/character_data.h" nogil:
    ctypedef struct lxb_dom_character_data_t:
        lxb_dom_node_t node
        lexbor_str_t data

from simhash_filter.model.html import INVISIBLE_TAGS as _INVISIBLE_TAGS
from simhash_filter.model.lexbor import DOCUMENT_OPTIONS as _DOCUMENT_OPTIONS, SCRIPTING as _SCRIPTING

if _DOCUMENT_OPTIONS != LXB_DOM_DOCUMENT_OPT_WO_EVENTS or _SCRIPTING is not True:
    raise ImportError("the compiled core's Lexbor document options differ from model.lexbor's")

# Static tag ids (the same in every document): invisible or not.
cdef bint _lx_invisible[LXB_TAG__LAST_ENTRY]


def _lx_tables_init():
    cdef size_t n
    cdef const lxb_char_t* name
    cdef lxb_tag_id_t tag
    found = set()
    for tag in range(LXB_TAG__LAST_ENTRY):
        name = lxb_tag_name_by_id(tag, &n)
        text = PyUnicode_DecodeUTF8(<const char*>name, n, "replace") if name is not NULL else None
        _lx_invisible[tag] = text in _INVISIBLE_TAGS
        if _lx_invisible[tag]:
            found.add(text)
    if found != set(_INVISIBLE_TAGS):  # the walk judges invisibility by static tag id only
        raise ImportError(f"invisible tags that are not Lexbor's static tags: {set(_INVISIBLE_TAGS) - found}")


_lx_tables_init()


cdef class _LexborPage:
    """A page that Lexbor parsed (the document freed with this object)."""
    cdef lxb_html_document_t* doc

    def __cinit__(self, bytes data not None):
        cdef const lxb_char_t* s = <const lxb_char_t*>(<const char*>data)
        cdef size_t n = len(data)
        cdef lxb_status_t status
        self.doc = lxb_html_document_create()
        if self.doc is NULL:
            raise MemoryError()
        lxb_html_document_dom_opt_set(self.doc, LXB_DOM_DOCUMENT_OPT_WO_EVENTS)
        lxb_html_document_scripting_set(self.doc, True)
        with nogil:
            status = lxb_html_document_parse(self.doc, s, n)
        if status != LXB_STATUS_OK:
            raise MemoryError(f"Lexbor could not parse the page (status {status})")

    def __dealloc__(self):
        if self.doc is not NULL:
            lxb_html_document_destroy(self.doc)


cdef inline str _lx_decode(const lexbor_str_t* s):
    return PyUnicode_DecodeUTF8(<const char*>s.data, s.length, "replace")


cdef inline bint _lx_walked(lxb_dom_node_t* x) noexcept:
    return x.type == LXB_DOM_NODE_TYPE_ELEMENT and not (x.local_name < LXB_TAG__LAST_ENTRY
                                                        and _lx_invisible[x.local_name])


cdef inline bint _lx_tbody(lxb_dom_node_t* x) noexcept:
    return x.type == LXB_DOM_NODE_TYPE_ELEMENT and x.local_name == LXB_TAG_TBODY


cdef lxb_dom_node_t* _lx_flat(lxb_dom_node_t* x) noexcept:
    """*x*, or where it is a ``tbody``, the first node inside it or after it (tbody is walked through)."""
    while x is not NULL and _lx_tbody(x):
        if x.first_child is not NULL:
            x = x.first_child
            continue
        while x.next is NULL:  # an empty tbody: the node after it
            x = x.parent
            if x is NULL or not _lx_tbody(x):
                return NULL
        x = x.next
    return x


cdef lxb_dom_node_t* _lx_after(lxb_dom_node_t* x) noexcept:
    """The node after *x* among its siblings, walking through tbody."""
    while x.next is NULL:
        x = x.parent
        if x is NULL or not _lx_tbody(x):
            return NULL
    return _lx_flat(x.next)


cdef int _lx_text_run(_Walked w, lxb_dom_node_t** at, Py_ssize_t owner) except -1:
    """Add the text from ``at[0]`` up to the next walked element (left in ``at[0]``, NULL after the last sibling),
    passing over comments and invisible elements with their content, to *w* as a segment of *owner*'s, unless it is
    empty or only white space."""
    cdef lxb_dom_node_t* x = _lx_flat(at[0])
    cdef lxb_dom_character_data_t* c
    cdef Py_ssize_t start = w.text_n
    cdef int visible = 0
    while x is not NULL and not _lx_walked(x):
        if x.type == LXB_DOM_NODE_TYPE_TEXT:
            c = <lxb_dom_character_data_t*>x
            if c.data.length:
                visible |= w.add_text(<const uint8_t*>c.data.data, c.data.length)
        x = _lx_after(x)
    at[0] = x
    if visible:
        w.owner.push(owner)
        w.seg_at.push(start)
        w.seg_size.push(w.text_n - start)
    else:
        w.text_n = start
    return 0


cdef inline bint _lx_flag(const lexbor_str_t* value, ClassWords words, object boilerplate_words) except -1:
    """Whether an attribute value names chrome: judged in C when ASCII and short, else by *boilerplate_words*."""
    cdef char buf[256]
    cdef int judged
    if value is NULL or value.length == 0:
        return False
    if words is not None and value.length < 256 and memchr(value.data, 0, value.length) is NULL:
        memcpy(buf, value.data, value.length)
        buf[value.length] = 0
        judged = words.judge(buf)
        if judged >= 0:
            return judged == 1
    return bool(boilerplate_words(_lx_decode(value)))


cdef bint _lx_candidate(lxb_dom_element_t* el, lxb_dom_attr_id_t role, ClassWords words,
                        object boilerplate_words) except -1:
    """Whether the element's class, id or role value names chrome."""
    cdef lxb_dom_attr_t* a = el.first_attr
    cdef const lexbor_str_t* value_class = NULL
    cdef const lexbor_str_t* value_id = NULL
    cdef const lexbor_str_t* value_role = NULL
    while a is not NULL:
        if a.node.local_name == LXB_DOM_ATTR_CLASS:
            value_class = a.value
        elif a.node.local_name == LXB_DOM_ATTR_ID:
            value_id = a.value
        elif role and a.node.local_name == role:
            value_role = a.value
        a = a.next
    return (_lx_flag(value_class, words, boilerplate_words) or _lx_flag(value_id, words, boilerplate_words)
            or _lx_flag(value_role, words, boilerplate_words))


cdef int _lx_walk(_Walked w, _LexborPage page, Py_ssize_t max_elements, frozenset boilerplate_tags,
                  object boilerplate_words, ClassWords class_words) except -1:
    """The walk of the page's tree from its root element into *w* (``walk``'s tuple)."""
    cdef lxb_dom_node_t* top = <lxb_dom_node_t*>lxb_dom_document_element(&page.doc.dom_document)
    cdef lxb_dom_node_t* c = top
    cdef lxb_dom_node_t* nxt
    cdef const lxb_dom_attr_data_t* role_data
    cdef lxb_dom_attr_id_t role = 0
    cdef Py_ssize_t i, n = 0, number
    cdef Py_ssize_t number_of[LXB_TAG__LAST_ENTRY]  # static tag id -> its number + 1 (0: not met yet)
    cdef dict dynamic = {}  # other tag ids -> their numbers
    cdef list boiler = []  # tag number -> a boilerplate tag
    cdef _Ints stack = w.stack
    cdef size_t length
    cdef const lxb_char_t* name
    cdef uintptr_t tag
    if top is NULL or not _lx_walked(top):
        return 0
    memset(number_of, 0, sizeof(number_of))
    role_data = lxb_dom_attr_data_by_local_name(page.doc.dom_document.attrs, <const lxb_char_t*>b"role", 4)
    if role_data is not NULL:
        role = role_data.attr_id
    while True:
        # the element's start (c is a walked element here)
        if n >= max_elements:
            w.truncated = True
            break
        i = n
        n += 1
        tag = c.local_name
        if tag < LXB_TAG__LAST_ENTRY and number_of[tag]:
            number = number_of[tag] - 1
        else:
            found = dynamic.get(tag) if tag >= LXB_TAG__LAST_ENTRY else None
            if found is None:
                name = lxb_dom_element_qualified_name(<lxb_dom_element_t*>c, &length)
                text = PyUnicode_DecodeUTF8(<const char*>name, length, "replace") if name is not NULL else ""
                number = len(w.tag_of)
                w.tag_of.append(text)
                boiler.append(text in boilerplate_tags)
                if tag < LXB_TAG__LAST_ENTRY:
                    number_of[tag] = number + 1
                else:
                    dynamic[tag] = number
            else:
                number = found
        w.tid.push(number)
        w.parent.push(stack.items[stack.n - 1] if stack.n else -1)
        w.depth.push(stack.n)
        w.end.push(i)
        if boiler[number] or _lx_candidate(<lxb_dom_element_t*>c, role, class_words, boilerplate_words):
            w.candidates.append(i)
        stack.push(i)
        nxt = c.first_child
        _lx_text_run(w, &nxt, i)
        if nxt is not NULL:
            c = nxt
            continue
        # the ends of the element and of every ancestor whose last walked child it is
        while True:
            stack.n -= 1
            w.end.items[stack.items[stack.n]] = n - 1
            if c is top:
                break
            nxt = _lx_after(c)
            _lx_text_run(w, &nxt, stack.items[stack.n - 1])
            if nxt is not NULL:
                c = nxt
                break
            c = c.parent
            while _lx_tbody(c):  # walked through: its table is the element that ends
                c = c.parent
        if c is top:
            break
    if w.truncated:
        for i in range(stack.n):
            w.end.items[stack.items[i]] = n - 1
    return 0


def lexbor_walk(bytes data not None, Py_ssize_t max_elements, frozenset boilerplate_tags, object boilerplate_words,
                ClassWords class_words=None):
    """``(tag_of, tid, parents, depths, ends, candidates, seg_owner, seg_text, truncated)`` of the page *data* (UTF-8
    bytes, as the nesting guard left them) parsed by Lexbor: what ``model.lexbor.walk`` gives.  The elements in
    document order, stopping after *max_elements* (then ``truncated`` is True and the open elements end at the last
    one): ``tid`` numbers each element's tag by first appearance (``tag_of`` names the numbers), and ``candidates``
    are the elements whose tag is in *boilerplate_tags* or whose ``class``, ``id`` or ``role`` satisfies
    *boilerplate_words* (judged by *class_words* in C where it can); the text segments in the order of an event walk,
    each with the element that owns it."""
    cdef _Walked w = _Walked()
    cdef _LexborPage page = _LexborPage(data)
    _lx_walk(w, page, max_elements, boilerplate_tags, boilerplate_words, class_words)
    return (w.tag_of, w.tid.to_list(), w.parent.to_list(), w.depth.to_list(), w.end.to_list(), w.candidates,
            w.owner.to_list(), w.segments(), w.truncated)


def lexbor_walk_split(bytes data not None, Py_ssize_t max_elements, frozenset boilerplate_tags,
                      object boilerplate_words, ClassWords class_words, double dom_decay, double boilerplate_weight,
                      object line_break, frozenset list_tags not None, tuple params not None):
    """``(texts, structure, elements, truncated)``: :func:`lexbor_walk` then :func:`split` in one call, the element
    arrays never made Python lists (``texts`` is empty for a tree without elements)."""
    cdef _Walked w = _Walked()
    cdef _LexborPage page = _LexborPage(data)
    _lx_walk(w, page, max_elements, boilerplate_tags, boilerplate_words, class_words)
    page = None  # the tree is freed before the split
    if w.tid.n == 0:
        return (), {}, 0, w.truncated
    texts, structure = _split_arrays(w, dom_decay, boilerplate_weight, line_break, list_tags, params)
    return texts, structure, w.tid.n, w.truncated
