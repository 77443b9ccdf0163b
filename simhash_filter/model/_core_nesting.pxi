# The nesting guard in C: model.nesting.guard (the reference, whose docstring says what it does and why), the same
# bytes for every input.  Included by _core.pyx.

from simhash_filter.model import nesting as _nesting

cdef enum:
    NEST_TABLE = 512  # slots of the name table (a power of two)
    NEST_NAME = 16  # names longer than this have no flags
    NEST_FLAG_BITS = 30  # the flags are bits below this one (checked at import)

cdef int NF_VOID = _nesting.VOID
cdef int NF_RAW = _nesting.RAW
cdef int NF_PLAINTEXT = _nesting.PLAINTEXT
cdef int NF_NO_PUSH = _nesting.NO_PUSH
cdef int NF_NO_POP = _nesting.NO_POP
cdef int NF_SPECIAL = _nesting.SPECIAL
cdef int NF_SCOPE = _nesting.SCOPE
cdef int NF_BUTTON = _nesting.BUTTON
cdef int NF_LIST = _nesting.LIST
cdef int NF_TABLE_SCOPE = _nesting.TABLE_SCOPE
cdef int NF_TABLE_PART = _nesting.TABLE_PART
cdef int NF_CLOSES_P = _nesting.CLOSES_P
cdef int NF_HEADING = _nesting.HEADING
cdef int NF_LI = _nesting.LI
cdef int NF_DD_DT = _nesting.DD_DT
cdef int NF_OPTION = _nesting.OPTION
cdef int NF_OPTGROUP = _nesting.OPTGROUP
cdef int NF_TR = _nesting.TR
cdef int NF_CELL = _nesting.CELL
cdef int NF_SECTION = _nesting.SECTION
cdef int NF_ANCHOR = _nesting.ANCHOR
cdef int NF_P = _nesting.P
cdef int NF_LI_PASS = _nesting.LI_PASS
cdef int NF_FORMATTING = _nesting.FORMATTING

# the name table: lower-case names (NUL-padded) and their flags, open addressing
cdef unsigned char _nest_names[NEST_TABLE][NEST_NAME]
cdef unsigned char _nest_lens[NEST_TABLE]
cdef int _nest_flags[NEST_TABLE]


cdef inline unsigned char _lower(unsigned char c) noexcept nogil:
    return c + 32 if 65 <= c <= 90 else c


cdef inline size_t _nest_hash(const unsigned char* name, Py_ssize_t n) noexcept nogil:
    cdef size_t h = 2166136261u
    cdef Py_ssize_t k
    for k in range(n):
        h = (h ^ _lower(name[k])) * 16777619u
    return h


def _nest_table_init():
    cdef bytes name
    if max(_nesting.NAME_FLAGS.values()) >= 1 << NEST_FLAG_BITS:
        raise ImportError("nesting guard: more flags than the compiled guard counts")
    cdef size_t slot
    cdef Py_ssize_t n
    memset(_nest_lens, 0, sizeof(_nest_lens))
    for name, flags in _nesting.NAME_FLAGS.items():
        n = len(name)
        if not 0 < n <= NEST_NAME:
            raise ImportError(f"nesting guard: element name too long for the table: {name!r}")
        slot = _nest_hash(name, n) & (NEST_TABLE - 1)
        while _nest_lens[slot]:
            slot = (slot + 1) & (NEST_TABLE - 1)
        memcpy(_nest_names[slot], <const char*>name, n)
        _nest_lens[slot] = n
        _nest_flags[slot] = flags


_nest_table_init()


cdef inline int _nest_name_flags(const unsigned char* name, Py_ssize_t n) noexcept nogil:
    cdef size_t slot
    cdef Py_ssize_t k
    if n == 0 or n > NEST_NAME:
        return 0
    slot = _nest_hash(name, n) & (NEST_TABLE - 1)
    while _nest_lens[slot]:
        if _nest_lens[slot] == n:
            k = 0
            while k < n and _nest_names[slot][k] == _lower(name[k]):
                k += 1
            if k == n:
                return _nest_flags[slot]
        slot = (slot + 1) & (NEST_TABLE - 1)
    return 0


cdef inline bint _nest_ws(unsigned char c) noexcept nogil:
    return c == 9 or c == 10 or c == 12 or c == 13 or c == 32


cdef inline bint _nest_letter(unsigned char c) noexcept nogil:
    return 65 <= c <= 90 or 97 <= c <= 122


cdef Py_ssize_t _nest_find(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, const char* pat,
                           Py_ssize_t m) noexcept nogil:
    """The first *pat* in s[i:n], or -1."""
    cdef const unsigned char* hit
    while i + m <= n:
        hit = <const unsigned char*>memchr(s + i, pat[0], n - m + 1 - i)
        if hit is NULL:
            return -1
        i = hit - s
        if memcmp(s + i, pat, m) == 0:
            return i
        i += 1
    return -1


cdef Py_ssize_t _nest_name_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    while i < n and not _nest_ws(s[i]) and s[i] != 47 and s[i] != 62:  # / >
        i += 1
    return i


cdef Py_ssize_t _nest_tag_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """nesting._tag_end."""
    cdef Py_ssize_t j
    cdef const unsigned char* hit
    cdef unsigned char quote
    while True:
        while i < n and (_nest_ws(s[i]) or s[i] == 47):
            i += 1
        if i >= n:
            return -1
        if s[i] == 62:
            return i + 1
        i += 1  # the attribute name's first character (may be '=')
        while i < n and not _nest_ws(s[i]) and s[i] != 47 and s[i] != 62 and s[i] != 61:
            i += 1
        j = i
        while j < n and _nest_ws(s[j]):
            j += 1
        if j >= n or s[j] != 61:  # no '=': the next attribute (or the end)
            continue
        j += 1
        while j < n and _nest_ws(s[j]):
            j += 1
        i = j
        if i >= n:
            return -1
        quote = s[i]
        if quote == 34 or quote == 39:
            hit = <const unsigned char*>memchr(s + i + 1, quote, n - i - 1)
            if hit is NULL:
                return -1
            i = hit - s + 1
        else:
            while i < n and not _nest_ws(s[i]) and s[i] != 62:
                i += 1


cdef Py_ssize_t _nest_raw_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, const unsigned char* name,
                              Py_ssize_t m) noexcept nogil:
    """nesting._raw_end: the '<' of ``</name`` (any case) followed by white space, '/' or '>', or -1."""
    cdef Py_ssize_t k
    while True:
        i = _nest_find(s, n, i, b"</", 2)
        if i < 0 or i + 2 + m >= n:
            return -1
        k = 0
        while k < m and _lower(s[i + 2 + k]) == _lower(name[k]):
            k += 1
        if k == m and (_nest_ws(s[i + 2 + m]) or s[i + 2 + m] == 47 or s[i + 2 + m] == 62):
            return i
        i += 1


cdef class _NestStack:
    """nesting._Stack: the open elements' names (pointers into the page) and flags, with counts of the flags the
    implied closes look for."""
    cdef const unsigned char** name
    cdef Py_ssize_t* length
    cdef int* flags
    cdef Py_ssize_t top, cap
    cdef Py_ssize_t counts[NEST_FLAG_BITS]

    def __cinit__(self, Py_ssize_t cap):
        self.cap = cap
        self.top = 0
        memset(self.counts, 0, sizeof(self.counts))
        self.name = <const unsigned char**>PyMem_Malloc((cap + 1) * sizeof(const unsigned char*))
        self.length = <Py_ssize_t*>PyMem_Malloc((cap + 1) * sizeof(Py_ssize_t))
        self.flags = <int*>PyMem_Malloc((cap + 1) * sizeof(int))
        if self.name is NULL or self.length is NULL or self.flags is NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.name)
        PyMem_Free(self.length)
        PyMem_Free(self.flags)

    cdef inline void count(self, int flags, int step) noexcept nogil:
        cdef int bit
        if flags & (NF_P | NF_LI | NF_DD_DT | NF_TR | NF_CELL | NF_SECTION | NF_ANCHOR):
            for bit in range(NEST_FLAG_BITS):
                if flags & (1 << bit):
                    self.counts[bit] += step

    cdef inline void push(self, const unsigned char* name, Py_ssize_t n, int flags) noexcept nogil:
        self.name[self.top] = name
        self.length[self.top] = n
        self.flags[self.top] = flags
        self.top += 1
        self.count(flags, 1)

    cdef inline void truncate(self, Py_ssize_t top) noexcept nogil:
        while self.top > top:
            self.top -= 1
            self.count(self.flags[self.top], -1)

    cdef inline Py_ssize_t counted(self, int want) noexcept nogil:
        cdef int bit = 0
        while not want & (1 << bit):
            bit += 1
        return self.counts[bit]

    cdef Py_ssize_t find(self, Py_ssize_t top, int want, int stop) noexcept nogil:
        cdef Py_ssize_t at
        if not self.counted(want):
            return -1
        for at in range(top - 1, -1, -1):
            if self.flags[at] & want:
                return at
            if self.flags[at] & stop:
                return -1
        return -1

    cdef Py_ssize_t implied(self, int flags) noexcept nogil:
        cdef int* f = self.flags
        cdef Py_ssize_t top = self.top, at
        cdef int kind = flags & (NF_LI | NF_DD_DT), want = 0, stop = 0
        if kind and self.counted(kind):
            for at in range(top - 1, -1, -1):
                if f[at] & kind:
                    top = at
                    break
                if f[at] & NF_SPECIAL and not f[at] & NF_LI_PASS:
                    break
        if flags & NF_CLOSES_P:
            at = self.find(top, NF_P, NF_SCOPE | NF_BUTTON)
            if at >= 0:
                top = at
        if flags & NF_HEADING:
            if top and f[top - 1] & NF_HEADING:
                top -= 1
        elif flags & (NF_OPTION | NF_OPTGROUP):
            if top and f[top - 1] & NF_OPTION:
                top -= 1
            if flags & NF_OPTGROUP and top and f[top - 1] & NF_OPTGROUP:
                top -= 1
        else:
            if flags & NF_TR:
                want, stop = NF_TR, NF_TABLE_SCOPE | NF_SECTION
            elif flags & NF_CELL:
                want, stop = NF_CELL, NF_TABLE_SCOPE | NF_SECTION | NF_TR
            elif flags & NF_SECTION:
                want, stop = NF_SECTION, NF_TABLE_SCOPE
            elif flags & NF_ANCHOR:
                want, stop = NF_ANCHOR, NF_SCOPE
            if want:
                at = self.find(top, want, stop)
                if at >= 0:
                    top = at
        return top

    cdef void end_tag(self, const unsigned char* name, Py_ssize_t n, int flags) noexcept nogil:
        cdef int stop
        cdef Py_ssize_t at, k
        if flags & NF_NO_POP:
            return
        if flags & NF_TABLE_PART:
            stop = NF_TABLE_SCOPE
        elif flags & NF_LI:
            stop = NF_SCOPE | NF_LIST
        elif flags & NF_P:
            stop = NF_SCOPE | NF_BUTTON
        elif flags & (NF_SPECIAL | NF_FORMATTING):
            stop = NF_SCOPE
        else:
            stop = NF_SPECIAL
        for at in range(self.top - 1, -1, -1):
            if self.length[at] == n:
                k = 0
                while k < n and _lower(self.name[at][k]) == _lower(name[k]):
                    k += 1
                if k == n:
                    self.truncate(at)
                    return
            if self.flags[at] & stop:
                return


def nesting_guard(bytes data not None, Py_ssize_t max_depth=_nesting.MAX_DEPTH):
    """``model.nesting.guard`` in C: *data* without the start tags met while *max_depth* elements are open (*data*
    itself when there are none)."""
    cdef const unsigned char* s = <const unsigned char*>(<const char*>data)
    cdef Py_ssize_t n = len(data), i = 0, a, b, name_end, end, tags = 0
    cdef const unsigned char* hit
    cdef unsigned char c
    cdef int flags
    cdef _Ints cuts
    cdef _NestStack stack
    if max_depth < 0:
        raise ValueError("max_depth must be >= 0")
    hit = s
    while True:  # fewer tags than the depth: nothing to remove
        hit = <const unsigned char*>memchr(hit, 60, n - (hit - s))
        if hit is NULL:
            break
        tags += 1
        hit += 1
        if tags > max_depth:
            break
    if tags <= max_depth:
        return data
    cuts = _Ints()
    stack = _NestStack(max_depth)
    while True:
        hit = <const unsigned char*>memchr(s + i, 60, n - i)  # <
        if hit is NULL:
            break
        i = hit - s
        if i + 1 >= n:
            break
        c = s[i + 1]
        if c == 33:  # <!
            if i + 3 < n and s[i + 2] == 45 and s[i + 3] == 45:  # <!--
                a = _nest_find(s, n, i + 2, b"-->", 3)
                b = _nest_find(s, n if a < 0 else a + 3, i + 2, b"--!>", 4)  # only before "-->"
                if a < 0 and b < 0:
                    break
                i = a + 3 if b < 0 or 0 <= a < b else b + 4
                continue
            hit = <const unsigned char*>memchr(s + i + 2, 62, n - i - 2)
            if hit is NULL:
                break
            i = hit - s + 1
        elif c == 63:  # <?
            hit = <const unsigned char*>memchr(s + i + 2, 62, n - i - 2)
            if hit is NULL:
                break
            i = hit - s + 1
        elif c == 47:  # </
            if i + 2 >= n:
                break
            c = s[i + 2]
            if _nest_letter(c):
                name_end = _nest_name_end(s, n, i + 2)
                end = _nest_tag_end(s, n, name_end)
                if end < 0:
                    break
                stack.end_tag(s + i + 2, name_end - i - 2, _nest_name_flags(s + i + 2, name_end - i - 2))
                i = end
            elif c == 62:
                i += 3
            else:
                hit = <const unsigned char*>memchr(s + i + 2, 62, n - i - 2)
                if hit is NULL:
                    break
                i = hit - s + 1
        elif _nest_letter(c):
            name_end = _nest_name_end(s, n, i + 1)
            end = _nest_tag_end(s, n, name_end)
            if end < 0:
                break
            flags = _nest_name_flags(s + i + 1, name_end - i - 1)
            if flags & NF_RAW:
                if flags & NF_PLAINTEXT:
                    break
                i = _nest_raw_end(s, n, end, s + i + 1, name_end - i - 1)
                if i < 0:
                    break
                continue
            if not flags & (NF_VOID | NF_NO_PUSH):
                if stack.top >= max_depth:
                    cuts.push(i)
                    cuts.push(end)
                else:
                    stack.truncate(stack.implied(flags))
                    stack.push(s + i + 1, name_end - i - 1, flags)
            i = end
        else:
            i += 1
    if cuts.n == 0:
        return data
    cdef Py_ssize_t size = n, k, at = 0, w = 0
    for k in range(0, cuts.n, 2):
        size -= cuts.items[k + 1] - cuts.items[k]
    out = PyBytes_FromStringAndSize(NULL, size)
    cdef char* o = out
    for k in range(0, cuts.n, 2):
        memcpy(o + w, s + at, cuts.items[k] - at)
        w += cuts.items[k] - at
        at = cuts.items[k + 1]
    memcpy(o + w, s + at, n - at)
    return out


def control_bytes(bytes data not None, const uint8_t[::1] control not None):
    """How many bytes of *data* are in the 256-entry table *control* (``html._check_binary``'s count of the control
    bytes that text does not contain)."""
    cdef const uint8_t* p = <const uint8_t*>(<const char*>data)
    cdef const uint8_t* table
    cdef Py_ssize_t i, n = len(data), count = 0
    if control.shape[0] != 256:
        raise ValueError("control must have 256 entries")
    table = &control[0]
    for i in range(n):
        count += table[p[i]]
    return count
