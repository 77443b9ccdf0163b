# What a walk of a page's tree collects (_Walked, in growing arrays of _Ints), and the judge of class, id and role
# values in C (ClassWords): shared by the Lexbor walk (_core_lexbor.pxi), the nesting guard and the one pass.


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
    ``CONTENT_WORDS``) in C, to judge an ASCII value from the parser's bytes as ``extract._boilerplate_words`` does:
    its words (split at whitespace, ``_ - : .`` and lower-to-upper case changes, lower-cased) hold a chrome word
    and no content word."""
    cdef bytes blob  # the words, each as a length byte then its letters; chrome words first
    cdef Py_ssize_t chrome  # where the content words start
    cdef uint64_t lengths, firsts, lasts  # the words' lengths (below 64), first and last bytes (mod 64), as bit sets

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
                self.lasts |= (<uint64_t>1) << (data[len(data) - 1] & 63)
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
        if (not (self.lengths >> min(n, 63)) & 1 or not (self.firsts >> (word[0] & 63)) & 1
                or not (self.lasts >> (word[n - 1] & 63)) & 1):
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


cdef class _Walked:
    """What the walk collects: the elements' tag numbers, parents, depths and subtree ends in document order, the
    boilerplate candidates, and the text segments with their owners (see :func:`lexbor_walk`).  The segments'
    text is one UTF-8 buffer (valid, without surrogates), segment k at ``text[seg_at[k]:seg_at[k] + seg_size[k]]``:
    no Python string per text node."""
    cdef list tag_of, candidates
    cdef _Ints tid, parent, depth, end, owner, stack, seg_at, seg_size
    cdef bint truncated
    cdef char* text
    cdef Py_ssize_t text_n, text_cap

    def __cinit__(self):
        self.tag_of, self.candidates = [], []
        self.tid, self.parent, self.depth, self.end, self.owner, self.stack = _Ints(), _Ints(), _Ints(), _Ints(), \
            _Ints(), _Ints()
        self.seg_at, self.seg_size = _Ints(), _Ints()
        self.truncated = False
        self.text_cap = 4096
        self.text = <char*>PyMem_Malloc(self.text_cap)
        if self.text is NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.text)

    cdef int reserve(self, Py_ssize_t n) except -1:
        """Room for *n* more bytes of text."""
        while self.text_n + n > self.text_cap:
            self.text = <char*>_grown(self.text, &self.text_cap, 1)
        return 0

    cdef int add_text(self, const uint8_t* p, Py_ssize_t n) except -1:
        """Append the text node *p* (*n* bytes of UTF-8; an invalid one decoded with replacement characters, as
        ``bytes.decode("utf-8", "replace")``): 1 when it holds a character that is not white space
        (``str.isspace``), else 0."""
        cdef Py_ssize_t i = 0, size
        cdef int visible = 0
        cdef uint8_t b
        cdef uint32_t c
        cdef uint64_t word
        cdef const char* data
        while i < n:
            b = p[i]
            if b < 0x80:
                if visible:  # only the check of the UTF-8 is left: eight ASCII bytes at a time
                    while i + 8 <= n:
                        memcpy(&word, p + i, 8)
                        if word & 0x8080808080808080ULL:
                            break
                        i += 8
                    if i < n and p[i] < 0x80:
                        i += 1
                    continue
                if not (b == 32 or 9 <= b <= 13 or 28 <= b <= 31):
                    visible = 1
                i += 1
                continue
            size = _utf8_strict(p + i, n - i, &c)
            if size == 0:  # not valid UTF-8: the replacement characters, as the parser's text decoded
                text = PyUnicode_DecodeUTF8(<const char*>p, n, "replace")
                data = PyUnicode_AsUTF8AndSize(text, &size)
                self.reserve(size)
                memcpy(self.text + self.text_n, data, size)
                self.text_n += size
                return 0 if text.isspace() else 1
            if not visible and not _char_flags(c) & _SPACE:
                visible = 1
            i += size
        self.reserve(n)
        memcpy(self.text + self.text_n, p, n)
        self.text_n += n
        return visible

    cdef list segments(self):
        """The segments' text as a list of str."""
        return [PyUnicode_DecodeUTF8(self.text + self.seg_at.items[k], self.seg_size.items[k], NULL)
                for k in range(self.seg_at.n)]


cdef inline Py_ssize_t _utf8_strict(const uint8_t* p, Py_ssize_t n, uint32_t* c) noexcept:
    """The length of the UTF-8 character at *p* (at most *n* bytes) as Python's decoder accepts it (no overlong
    forms, no surrogates, nothing above U+10FFFF), its code point in *c*; 0 when it is not valid."""
    cdef uint8_t b = p[0]
    cdef Py_ssize_t size, k
    cdef uint8_t low = 0x80, high = 0xBF
    if 0xC2 <= b <= 0xDF:
        size = 2
        c[0] = b & 0x1F
    elif 0xE0 <= b <= 0xEF:
        size = 3
        c[0] = b & 0x0F
        if b == 0xE0:
            low = 0xA0
        elif b == 0xED:
            high = 0x9F
    elif 0xF0 <= b <= 0xF4:
        size = 4
        c[0] = b & 0x07
        if b == 0xF0:
            low = 0x90
        elif b == 0xF4:
            high = 0x8F
    else:
        return 0
    if size > n or not low <= p[1] <= high:
        return 0
    for k in range(1, size):
        if k > 1 and not 0x80 <= p[k] <= 0xBF:
            return 0
        c[0] = (c[0] << 6) | (p[k] & 0x3F)
    return size
