

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


