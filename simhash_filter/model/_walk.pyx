# cython: language_level=3, embedsignature=True
"""The compiled core's tree walk: one pass over libxml2's nodes of a page that lxml parsed.

It gives exactly what :func:`simhash_filter.model.extract._extract_walk` collects with ``etree.iterwalk``
(the reference): the elements in document order with their tags, parents, depths and subtree ends, their
``class``/``id``/``role`` values, and the text segments in the order of an event walk (an element's text at
its start, its tail after the end of its subtree), through lxml's own C accessors (``textOf``, ``tailOf``,
``namespacedName``), so the strings are the ones lxml's ``.text``, ``.tail`` and ``.tag`` return.
"""

from libc.string cimport strcmp

from lxml.includes cimport tree
from lxml.includes.etreepublic cimport _Element, namespacedName, tailOf, textOf

cimport lxml.includes.etreepublic as cetree

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
