# --- characters: str's space, letter and digit tests and the text's normal form, as C tables -----------------
# Both tables are filled on first use (a block of 256 code points, or one code point) from CPython's own Unicode
# database: the flags by the functions str.isspace, str.isalnum and str.isdecimal call (re's \s, [^\W_] and \d on
# a str), the normal forms by unicodedata (NFKC, then casefold: what features.tokenize applies).
# tests/test_core_chars.py checks both against them over every code point.

import unicodedata as _unicodedata

cdef enum:
    _SPACE = 1  # str.isspace (str.split's separators)
    _ALNUM = 2  # str.isalnum (a word character of the reference's [^\W_]+)
    _DECIMAL = 4  # str.isdecimal (the reference's \d)

cdef uint8_t _flag_table[0x110000]
cdef bint _flag_filled[0x1100]


cdef void _fill_flags(uint32_t block) noexcept:
    cdef uint32_t c
    cdef uint8_t f
    for c in range(block << 8, (block + 1) << 8):
        f = 0
        if Py_UNICODE_ISSPACE(c):
            f |= _SPACE
        if Py_UNICODE_ISALNUM(c):
            f |= _ALNUM
        if Py_UNICODE_ISDECIMAL(c):
            f |= _DECIMAL
        _flag_table[c] = f
    _flag_filled[block] = True


_fill_flags(0)  # ASCII's, read straight from the table where a loop has an ASCII byte in hand


cdef inline bint _cjk(uint32_t c) noexcept nogil:
    """Whether *c* is a CJK ideograph (the model's ranges: unified, extension A, compatibility)."""
    return 0x3400 <= c <= 0x4DBF or 0x4E00 <= c <= 0x9FFF or 0xF900 <= c <= 0xFAFF


cdef inline uint8_t _char_flags(uint32_t c) noexcept:
    """``_SPACE | _ALNUM | _DECIMAL`` as str's own methods judge the character *c*."""
    if not _flag_filled[c >> 8]:
        _fill_flags(c >> 8)
    return _flag_table[c]


def char_flags(uint32_t c):
    """The flags of the code point *c* (for the tests): ``1`` space, ``2`` letter or digit, ``4`` decimal digit."""
    if c > 0x10FFFF:
        raise ValueError("not a code point")
    return _char_flags(c)


# The fast form of a text (features.tokenize without NFKC and casefold over the whole text, and without a Python
# string per word): each character replaced by its own NFKC + casefold form, in UTF-8, with every character of it
# that is not a letter or digit made a space.  That gives the reference's words exactly when normalising the text
# is normalising it character by character: when no character's normal form can reorder or compose with its
# neighbours'.  A character qualifies when its NFKD begins with a starter (combining class 0) that is neither a mark
# (variation selectors excepted) nor a Hangul vowel or trailing jamo: the only starters that compose with the
# character before them are vowel signs (marks) and those jamo (tests/test_core_chars.py derives that set from
# unicodedata over every code point).
# A text with any other character (a combining mark, a lone surrogate, ...) takes the general path.

cdef enum:
    _GENERAL = 1  # not in the fast form: the text takes the general path
    _MAPPED = 2  # the form's UTF-8 length in bits 2-7, its offset in _form_pool in bits 8-31

cdef uint32_t _form_table[0x110000]  # 0 until first met
cdef char* _form_pool = NULL
cdef Py_ssize_t _form_pool_used = 0, _form_pool_cap = 0
cdef char _ascii_form[128]
for _c in range(128):
    _ascii_form[_c] = ord(chr(_c).lower()) if chr(_c).isalnum() else 32


def fast_form(uint32_t c):
    """The fast form of the code point *c*: its NFKC + casefold form with every character that is not a letter or
    digit made a space (a str), or None when it sends its text to the general path."""
    cdef str ch = chr(c)
    if 0xD800 <= c <= 0xDFFF:  # a lone surrogate (no normal form)
        return None
    first = _unicodedata.normalize("NFKD", ch)[0]
    if _unicodedata.combining(first) or 0x1160 <= ord(first) <= 0x11FF:
        return None
    if _unicodedata.category(first)[0] == "M" and not _variation_selector(ord(first)):
        return None
    return "".join([x if x.isalnum() else " " for x in _unicodedata.normalize("NFKC", ch).casefold()])


cdef inline bint _variation_selector(uint32_t c) noexcept:
    """A variation selector (a mark that composes with nothing: emoji and text presentation, CJK variants)."""
    return 0xFE00 <= c <= 0xFE0F or 0xE0100 <= c <= 0xE01EF


cdef uint32_t _classify(uint32_t c) except 0:
    """Entry of the character *c* in ``_form_table`` (filled now)."""
    global _form_pool, _form_pool_used, _form_pool_cap
    cdef uint32_t v = _GENERAL
    cdef Py_ssize_t n
    cdef const char* data
    form = fast_form(c)
    if form is not None:
        data = PyUnicode_AsUTF8AndSize(form, &n)
        if 0 < n < 64 and _form_pool_used + n < (1 << 24):
            if _form_pool_used + n > _form_pool_cap:
                _form_pool_cap = max(4096, 2 * _form_pool_cap)
                _form_pool = <char*>PyMem_Realloc(_form_pool, _form_pool_cap)
                if _form_pool is NULL:
                    raise MemoryError()
            memcpy(_form_pool + _form_pool_used, data, n)
            v = _MAPPED | <uint32_t>(n << 2) | <uint32_t>(_form_pool_used << 8)
            _form_pool_used += n
    _form_table[c] = v
    return v


cdef Py_ssize_t _fast_form(str text, _Key out) except -2:
    """Write the fast form of the text that is not ASCII *text* into *out*: its length in bytes, or -1 when a
    character of it sends it to the general path."""
    cdef Py_ssize_t k = 0, n
    cdef Py_UCS4 ch
    cdef uint32_t v, c
    out.reserve(3 * len(text) + 64)
    for ch in text:
        c = ch
        if k + 64 > out.cap:
            out.grow(2 * out.cap)
        if c < 128:
            out.data[k] = _ascii_form[c]
            k += 1
            continue
        v = _form_table[c]
        if v == 0:
            v = _classify(c)
        if v == _GENERAL:
            return -1
        n = (v >> 2) & 63
        memcpy(out.data + k, _form_pool + (v >> 8), n)
        k += n
    return k


def fast_text(str text):
    """The fast form of the text that is not ASCII *text*, or None when it takes the general path (for the
    tests)."""
    cdef _Key buf = _Key()
    cdef Py_ssize_t n = _fast_form(text, buf)
    return None if n < 0 else PyUnicode_DecodeUTF8(buf.data, n, NULL)


cdef class _Key:
    """A growing byte buffer (a run's key, a word's UTF-8, a text's fast form)."""
    cdef char* data
    cdef Py_ssize_t cap

    def __dealloc__(self):
        PyMem_Free(self.data)

    cdef int reserve(self, Py_ssize_t n) except -1:
        """At least *n* bytes (the contents are not kept)."""
        if n > self.cap:
            PyMem_Free(self.data)
            self.data = <char*>PyMem_Malloc(n)
            if self.data is NULL:
                self.cap = 0
                raise MemoryError()
            self.cap = n
        return 0

    cdef int grow(self, Py_ssize_t n) except -1:
        """At least *n* bytes, the contents kept."""
        cdef char* data
        if n > self.cap:
            data = <char*>PyMem_Realloc(self.data, n)
            if data is NULL:
                raise MemoryError()
            self.data = data
            self.cap = n
        return 0
