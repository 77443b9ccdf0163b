# --- one pass from a page's text segments to its fingerprint and sketch ---------------------------------------
# (``Fingerprinter.fingerprint``: the reference's ``page_features`` then ``_decide``, without a Python string per
# word occurrence and without the page's dict of features)
#
# Over 600 lines, and one job: every part here serves this pass and works on its word entries (``_Word``): the
# word table that keys them, the IDF and the American spelling filled into an entry once per word, the page's
# buffers that count them, and the UTF-8 readers of the pass's text loop.  Apart, each would be read only beside
# the others.


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
    bint antecedent  # a function word that starts a spot of the prose part (WordTable.antecedents)


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
    cdef tuple antecedent_words  # the prose part's function words, UTF-8 (marked again after each reset)
    cdef object cut  # jieba's segmenter (rjieba.cut), once a run of CJK ideographs needs it

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
        if self.antecedent_words is not None:
            for word in self.antecedent_words:
                self.words[self.find(word, len(word))].antecedent = True
        return 0

    def antecedents(self, words not None):
        """The function words that start a spot of the prose part (``spotsig.ANTECEDENTS``), as words of the text
        pass (NFKC, case-folded)."""
        self.antecedent_words = tuple(sorted(word.encode("utf-8") for word in words))
        for word in self.antecedent_words:
            self.words[self.find(word, len(word))].antecedent = True

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
        w.antecedent = False
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
    """One occurrence of entry *e* in *segment*: a new distinct word of it, or one more of a known one (for a
    *segment* below 0, the occurrence is appended to *seg*'s items: the words in order, for the prose part)."""
    cdef _Word* w = &table.words[e]
    if segment < 0:
        return seg.push(e)
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
                               tuple segmenter, _Key key) except -1:
    """Count the words of a normalised, case-folded *text* (``features.tokenize``'s words after its NFKC and
    casefold: runs of letters and digits, runs of CJK ideographs segmented by *segmenter*), at most *budget*."""
    cdef Py_ssize_t i = 0, j, k, n = len(text), taken = 0
    cdef Py_UCS4 c
    while i < n and taken < budget:
        c = text[i]
        if _cjk(c):
            j = i + 1
            while j < n and _cjk(text[j]):
                j += 1
            key.reserve(3 * (j - i) + 1)
            key.data[0] = 1
            for k in range(i, j):  # three UTF-8 bytes each: the ideographs are in the BMP, above U+0800
                _utf8_ideograph(text[k], key.data + 1 + 3 * (k - i))
            taken += _count_run(table, key, j - i, budget - taken, segment, seg, segmenter)
            i = j
        elif _char_flags(c) & _ALNUM:
            j = i + 1
            while j < n and _char_flags(text[j]) & _ALNUM and not _cjk(text[j]):
                j += 1
            _count_word(table, table.find(key.data, _utf8(text, i, j, key)), segment, seg)
            taken += 1
            i = j
        else:
            i += 1
    return taken


cdef Py_ssize_t _count_fast(WordTable table, const char* data, Py_ssize_t n, Py_ssize_t budget, Py_ssize_t segment,
                            _Buffer seg, tuple segmenter, _Key key) except -1:
    """Count the words of a text's fast form *data* (``_fast_form``: UTF-8 of letters and digits, spaces), at most
    *budget*: what ``_count_unicode`` counts in its normal form (runs of CJK ideographs, runs of other letters and
    digits)."""
    cdef Py_ssize_t i = 0, j, size, taken = 0
    cdef bint cjk
    cdef uint32_t c
    while i < n and taken < budget:
        if data[i] == 32:
            i += 1
            continue
        size = _utf8_char(data, i, &c)
        cjk = _cjk(c)
        j = i + size
        while j < n and data[j] != 32:
            size = _utf8_char(data, j, &c)
            if _cjk(c) != cjk:
                break
            j += size
        if cjk:  # three UTF-8 bytes each: the ideographs are in the BMP, above U+0800
            key.reserve(j - i + 1)
            key.data[0] = 1
            memcpy(key.data + 1, data + i, j - i)
            taken += _count_run(table, key, (j - i) // 3, budget - taken, segment, seg, segmenter)
        else:
            _count_word(table, table.find(data + i, j - i), segment, seg)
            taken += 1
        i = j
    return taken


cdef inline Py_ssize_t _utf8_char(const char* data, Py_ssize_t i, uint32_t* c) noexcept:
    """The length of the (valid) UTF-8 character at ``data[i]``, its code point in *c*."""
    cdef uint8_t b = <uint8_t>data[i]
    if b < 0x80:
        c[0] = b
        return 1
    if b < 0xE0:
        c[0] = ((b & 0x1F) << 6) | (<uint8_t>data[i + 1] & 0x3F)
        return 2
    if b < 0xF0:
        c[0] = ((b & 0x0F) << 12) | ((<uint8_t>data[i + 1] & 0x3F) << 6) | (<uint8_t>data[i + 2] & 0x3F)
        return 3
    c[0] = (((b & 0x07) << 18) | ((<uint8_t>data[i + 1] & 0x3F) << 12) | ((<uint8_t>data[i + 2] & 0x3F) << 6)
            | (<uint8_t>data[i + 3] & 0x3F))
    return 4


cdef inline void _utf8_ideograph(uint32_t c, char* out) noexcept:
    out[0] = <char>(0xE0 | (c >> 12))
    out[1] = <char>(0x80 | ((c >> 6) & 0x3F))
    out[2] = <char>(0x80 | (c & 0x3F))


cdef Py_ssize_t _utf8(str text, Py_ssize_t i, Py_ssize_t j, _Key out) except -1:
    """Write the UTF-8 of ``text[i:j]`` (no surrogates) into *out*: its length."""
    cdef Py_ssize_t k, n = 0
    cdef uint32_t c
    out.reserve(4 * (j - i))
    for k in range(i, j):
        c = text[k]
        if c < 0x80:
            out.data[n] = <char>c
            n += 1
        elif c < 0x800:
            out.data[n] = <char>(0xC0 | (c >> 6))
            out.data[n + 1] = <char>(0x80 | (c & 0x3F))
            n += 2
        elif c < 0x10000:
            out.data[n] = <char>(0xE0 | (c >> 12))
            out.data[n + 1] = <char>(0x80 | ((c >> 6) & 0x3F))
            out.data[n + 2] = <char>(0x80 | (c & 0x3F))
            n += 3
        else:
            out.data[n] = <char>(0xF0 | (c >> 18))
            out.data[n + 1] = <char>(0x80 | ((c >> 12) & 0x3F))
            out.data[n + 2] = <char>(0x80 | ((c >> 6) & 0x3F))
            out.data[n + 3] = <char>(0x80 | (c & 0x3F))
            n += 4
    return n


cdef Py_ssize_t _count_run(WordTable table, _Key key, Py_ssize_t chars, Py_ssize_t budget, Py_ssize_t segment,
                           _Buffer seg, tuple segmenter) except -1:
    """Count the words of a run of *chars* CJK ideographs, at most *budget*; *key* holds 0x01 then the run's UTF-8
    (its entry's key in the table).  A run is segmented the first time the table meets it, as ``segment_run``
    segments it (one ideograph is its own word, a longer run is cut by jieba's segmenter, called straight from here),
    then read from the table; a run too long to cache, slice by slice (``segment_slices``)."""
    cdef Py_ssize_t n = 3 * chars + 1, e, start, end, taken = 0, size
    cdef const char* data
    jieba_cut, segment_slices, max_cached_run = segmenter
    if chars > max_cached_run:
        for piece in segment_slices(PyUnicode_DecodeUTF8(key.data + 1, n - 1, NULL)):
            for word in piece:
                if taken == budget:
                    return taken
                data = PyUnicode_AsUTF8AndSize(word, &size)
                _count_word(table, table.find(data, size), segment, seg)
                taken += 1
        return taken
    e = table.known(key.data, n)
    if e < 0:
        start = table.runs.n
        if chars == 1:
            table.runs.push(table.find(key.data + 1, 3))
        else:
            if table.cut is None:  # the segmenter loads its dictionary on first use: pages without CJK never do
                table.cut = jieba_cut()
            for word in table.cut(PyUnicode_DecodeUTF8(key.data + 1, n - 1, NULL), True):
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
                     object word_values, object fsum, tuple prose=None):
    """``(features, value, sketch)`` of a page's text segments and structure features under single-word features:
    what the reference's ``page_features`` then ``Fingerprinter._decide`` give (value and sketch None when the page
    has fewer than *min_features* text features), bit for bit; None where this pass declines (a weight too large
    for exact integer sums) and the reference must compute it.  *segmenter* is ``(jieba_cut, segment_slices,
    MAX_CACHED_RUN)`` of :mod:`~simhash_filter.model.segment`, for runs of CJK ideographs; *word_values* is the
    reference's, for words the table cannot value; *fsum* is ``math.fsum``.  With *prose* (the prose part's
    parameters, ``Fingerprinter``'s), the sketch is followed by the page's prose part (``prose.prose_part``)."""
    cdef _Buffer seg = _Buffer(), segments = _Buffer(), tf = _Buffer(), grouped = _Buffer()
    cdef Py_ssize_t budget = max_tokens, taken, i, j, start, e, first, last, room, page, segment, group, s
    cdef Py_ssize_t nbytes = (bins + 7) // 8
    cdef Py_ssize_t size
    cdef _Key lower = _Key(), key = _Key()
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
            size = _fast_form(text, lower)
            if size >= 0:
                taken = _count_fast(table, lower.data, size, budget, segment, seg, segmenter, key)
            else:
                text = _normalize("NFKC", text).casefold()
                taken = _count_unicode(table, text, budget, segment, seg, segmenter, key)
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
        page_sketch = _sketch_bytes(out, bins, packed, nbytes)
    finally:
        PyMem_Free(out)
        PyMem_Free(packed)
    if prose is not None:
        part = _prose_part(table, texts, max_tokens, segmenter, prose)
        if part is None:
            return None
        page_sketch += part
    return tf.n + len(scaled), value, page_sketch
