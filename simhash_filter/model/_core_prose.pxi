# --- the prose part (simhash_filter.model.prose.prose_part, the reference) ------------------------------------
# The page's read lines are cut from its weighted texts as the reference's regular expressions cut them, their words
# read by the text pass's own tokenizer into the same word table (no Python string per word), and the spots hashed
# from the words' UTF-8 there.

cdef extern from "Python.h":
    object PyUnicode_FromKindAndData(int kind, const void* buffer, Py_ssize_t size)
    enum:
        PyUnicode_4BYTE_KIND

cdef enum:
    _MAX_CHAIN = 7  # spots of at most this many words after the antecedent (spotsig.CHAIN; longer: the reference)


cdef class _Chars:
    """A growing array of code points (the page's read lines, one after another)."""
    cdef Py_UCS4* items
    cdef Py_ssize_t n, cap

    def __cinit__(self):
        self.cap = 4096
        self.n = 0
        self.items = <Py_UCS4*>PyMem_Malloc(self.cap * sizeof(Py_UCS4))
        if self.items is NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.items)

    cdef inline int push(self, Py_UCS4 c) except -1:
        if self.n == self.cap:
            self.items = <Py_UCS4*>_grown(self.items, &self.cap, sizeof(Py_UCS4))
        self.items[self.n] = c
        self.n += 1
        return 0


cdef struct _Ends:
    bint ascii[128]  # the end marks below U+0080
    Py_UCS4 other[16]  # the others
    int n_other


cdef int _ends_of(str ends, _Ends* out) except -1:
    """The end marks of *ends* (``prose.BLOCK_END_CHARS``) as a table."""
    cdef Py_UCS4 c
    memset(out, 0, sizeof(_Ends))
    for c in ends:
        if c < 128:
            out.ascii[c] = True
        elif out.n_other < 16:
            out.other[out.n_other] = c
            out.n_other += 1
        else:
            raise ValueError("too many end marks")
    return 0


cdef inline bint _block_end(Py_UCS4 c, const _Ends* ends) noexcept:
    """Whether *c* ends a sentence or a quotation, so that a line break after it ends a block (``prose._BLOCK_END``'s
    look-behind)."""
    cdef int i
    if c < 128:
        return ends.ascii[c]
    for i in range(ends.n_other):
        if ends.other[i] == c:
            return True
    return False


cdef int _add_line(int kind, void* data, Py_ssize_t start, Py_ssize_t end, _Chars lines, _Ints bounds) except -1:
    """The block ``text[start:end]`` (*kind*, *data*: the text's) as the reference makes it a line: each run of white
    space holding a line break one space (``\\s*\\n\\s*``), then stripped; appended to *lines* (its bounds to *bounds*)
    unless empty."""
    cdef Py_ssize_t i = start, j, first = lines.n
    cdef Py_UCS4 c
    cdef bint line_break
    while i < end:
        c = PyUnicode_READ(kind, data, i)
        if not _char_flags(c) & _SPACE:
            lines.push(c)
            i += 1
            continue
        j = i
        line_break = False
        while j < end:
            c = PyUnicode_READ(kind, data, j)
            if not _char_flags(c) & _SPACE:
                break
            line_break = line_break or c == 10
            j += 1
        if line_break:
            lines.push(32)
        else:
            while i < j:
                lines.push(PyUnicode_READ(kind, data, i))
                i += 1
        i = j
    j = lines.n
    while j > first and _char_flags(lines.items[j - 1]) & _SPACE:
        j -= 1
    i = first
    while i < j and _char_flags(lines.items[i]) & _SPACE:
        i += 1
    if i == j:
        lines.n = first
        return 0
    if i > first:
        memmove(lines.items + first, lines.items + i, (j - i) * sizeof(Py_UCS4))
    lines.n = first + j - i
    bounds.push(first)
    bounds.push(lines.n)
    return 0


cdef int _read_lines(tuple texts, double min_weight, Py_ssize_t room, const _Ends* ends, _Chars lines,
                     _Ints bounds) except -1:
    """``prose._read_lines``: the blocks of the texts weighted at least *min_weight*, heaviest first, until *room*
    characters are read; a block ends after a line break that follows one of *ends* (with spaces or tabs between),
    the white space after that break dropped."""
    cdef Py_ssize_t n, pos, i, j, k
    cdef int kind
    cdef void* data
    cdef Py_UCS4 c
    cdef str text
    for weight, text in texts:
        if weight < min_weight or room <= 0:
            break
        n = min(len(text), room)
        room -= n
        kind = PyUnicode_KIND(text)
        data = PyUnicode_DATA(text)
        pos = 0
        i = 1
        while True:
            k = -1
            while i < n:  # the next block end: a line break after an end mark, spaces or tabs between
                if _block_end(PyUnicode_READ(kind, data, i - 1), ends):
                    j = i
                    while j < n:
                        c = PyUnicode_READ(kind, data, j)
                        if c != 32 and c != 9:
                            break
                        j += 1
                    if j < n and PyUnicode_READ(kind, data, j) == 10:
                        k = j + 1
                        while k < n and _char_flags(PyUnicode_READ(kind, data, k)) & _SPACE:
                            k += 1
                        break
                i += 1
            if k < 0:
                _add_line(kind, data, pos, n, lines, bounds)
                break
            _add_line(kind, data, pos, i, lines, bounds)
            pos = k
            i = k + 1
    return 0


cdef struct _Spot:
    uint64_t hash
    Py_ssize_t words[_MAX_CHAIN + 1]


cdef object _prose_part(WordTable table, tuple texts, Py_ssize_t max_tokens, tuple segmenter, tuple params):
    """The prose part of a page whose weighted texts are *texts*, bit for bit the reference's (``prose_part``); None
    where this pass declines (a chain too long for it)."""
    cdef double min_weight, min_share
    cdef Py_ssize_t min_spots, spot_chars, chars_per_word, max_words, prose_line, chain, bins, part_bytes
    cdef Py_ssize_t total = 0, prose = 0, chars, i, j, k, t, budget, taken, content, seen, size, found = 0
    cdef Py_ssize_t nbytes, slots_mask, s
    cdef uint64_t seed, h
    cdef int article
    cdef str ends, line
    cdef _Ends end_marks
    cdef _Chars lines = _Chars()
    cdef _Ints bounds = _Ints()
    cdef _Buffer words = _Buffer()
    cdef _Ints contents = _Ints()
    cdef _Key key = _Key(), lower = _Key()
    cdef _Spot* spots = NULL
    cdef Py_ssize_t* slots = NULL
    cdef uint64_t* out = NULL
    cdef uint8_t* packed = NULL
    cdef _Word* w
    (min_weight, min_spots, spot_chars, chars_per_word, max_words, prose_line, min_share, chain, bins, seed,
     article, part_bytes, ends) = params
    if not 0 < chain <= _MAX_CHAIN or bins <= 0:
        return None
    for weight, text in texts:
        if weight >= min_weight:
            total += len(<str>text)
    if total < min_spots * spot_chars:
        return bytes(part_bytes)  # too little text to tell
    _ends_of(ends, &end_marks)
    _read_lines(texts, min_weight, chars_per_word * max_words, &end_marks, lines, bounds)
    total = 0
    for i in range(0, bounds.n, 2):
        chars = bounds.items[i + 1] - bounds.items[i]
        for j in range(bounds.items[i], bounds.items[i + 1]):
            if _cjk(lines.items[j]):
                chars += 2  # a CJK character counts as three
        total += chars
        if chars >= prose_line:
            prose += chars
    if <double>prose < min_share * <double>total or prose < min_spots * spot_chars:
        return bytes(part_bytes)
    # the spots of each line: an antecedent and the next chain words that are not antecedents, within the line
    budget = min(max_tokens, max_words)
    size = 64
    while size < 2 * budget + 2:
        size *= 2
    slots_mask = size - 1
    nbytes = (bins + 7) // 8
    try:
        spots = <_Spot*>PyMem_Malloc((budget + 1) * sizeof(_Spot))
        slots = <Py_ssize_t*>PyMem_Malloc(size * sizeof(Py_ssize_t))
        out = <uint64_t*>PyMem_Malloc(bins * sizeof(uint64_t))
        packed = <uint8_t*>PyMem_Malloc(nbytes)
        if spots is NULL or slots is NULL or out is NULL or packed is NULL:
            raise MemoryError()
        for i in range(size):
            slots[i] = -1
        for i in range(0, bounds.n, 2):
            if budget <= 0:
                break
            line = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, lines.items + bounds.items[i],
                                             bounds.items[i + 1] - bounds.items[i])
            words.n = 0
            taken = _tokens(table, line, budget, words, segmenter, key, lower)
            budget -= taken
            contents.n = 0
            for t in range(words.n):
                if not table.words[words.items[t]].antecedent:
                    contents.push(words.items[t])
            seen = 0
            for t in range(words.n):
                w = &table.words[words.items[t]]
                if not w.antecedent:
                    seen += 1
                    continue
                if seen + chain > contents.n:
                    continue
                spots[found].words[0] = words.items[t]
                for k in range(chain):
                    spots[found].words[k + 1] = contents.items[seen + k]
                h = _spot_hash(table, spots[found].words, chain + 1, key, seed)
                spots[found].hash = h
                s = <Py_ssize_t>(h & <uint64_t>slots_mask)
                while slots[s] >= 0 and not (spots[slots[s]].hash == h and memcmp(
                        spots[slots[s]].words, spots[found].words, (chain + 1) * sizeof(Py_ssize_t)) == 0):
                    s = (s + 1) & slots_mask
                if slots[s] < 0:  # a new spot
                    slots[s] = found
                    found += 1
        if found < min_spots:
            return bytes(part_bytes)
        for i in range(bins):
            out[i] = _EMPTY
        for i in range(found):
            _sketch_add(out, <uint64_t>bins, spots[i].hash, 1.0, 1.0)
        return bytes([article]) + _sketch_bytes(out, bins, packed, nbytes)
    finally:
        PyMem_Free(spots)
        PyMem_Free(slots)
        PyMem_Free(out)
        PyMem_Free(packed)


cdef Py_ssize_t _tokens(WordTable table, str line, Py_ssize_t budget, _Buffer words, tuple segmenter, _Key key,
                        _Key lower) except -1:
    """Append the entries of *line*'s words (``features.tokenize``'s, at most *budget*) to *words*: how many."""
    cdef Py_ssize_t size
    if line.isascii():
        return _count_ascii_words(table, line, budget, -1, words, lower)
    size = _fast_form(line, lower)
    if size >= 0:
        return _count_fast(table, lower.data, size, budget, -1, words, segmenter, key)
    return _count_unicode(table, _normalize("NFKC", line).casefold(), budget, -1, words, segmenter, key)


cdef uint64_t _spot_hash(WordTable table, const Py_ssize_t* entries, Py_ssize_t n, _Key key, uint64_t seed) except? 0:
    """XXH64 of the spot whose words are these entries, joined by colons (``":".join(...)`` in UTF-8)."""
    cdef Py_ssize_t i, length = n - 1
    cdef _Word* w
    for i in range(n):
        length += table.words[entries[i]].length
    key.reserve(length)
    length = 0
    for i in range(n):
        w = &table.words[entries[i]]
        if i:
            key.data[length] = 58  # ':'
            length += 1
        memcpy(key.data + length, table.arena + w.offset, w.length)
        length += w.length
    return xxh64(<const uint8_t*>key.data, length, seed)
