# --- the vote (simhash_filter.model.fingerprint.Fingerprinter.fingerprint_features, the reference) ------------


#: A weight rounds to at most this many units: beyond it the compiled vote declines (int64 sums stay exact).
cdef double _MAX_UNITS = 1099511627776.0  # 2 ** 40


cdef int64_t _gram_bits(const uint8_t* p, Py_ssize_t size, int n, uint64_t seed, int64_t* out) except -1:
    """Add the bits of the hashes of the code-point n-grams of the UTF-8 *p* (``<word>``; the whole of it for
    n = 0 or when it is not longer than n) to *out*; return how many hashes there were."""
    cdef Py_ssize_t i, j, k, grams, starts_len = 0
    cdef uint64_t h
    cdef Py_ssize_t* starts = <Py_ssize_t*>PyMem_Malloc((size + 1) * sizeof(Py_ssize_t))
    if starts is NULL:
        raise MemoryError()
    try:
        for i in range(size):
            if (p[i] & 0xC0) != 0x80:  # the first byte of a code point
                starts[starts_len] = i
                starts_len += 1
        starts[starts_len] = size
        if n == 0 or starts_len <= n:
            h = xxh64(p, size, seed)
            for j in range(64):
                out[j] += (h >> j) & 1
            return 1
        grams = starts_len - n + 1
        for k in range(grams):
            h = xxh64(p + starts[k], starts[k + n] - starts[k], seed)
            for j in range(64):
                out[j] += (h >> j) & 1
        return grams
    finally:
        PyMem_Free(starts)


cdef class FeatureCounts:
    """Memo of feature names -> how many of their hashes have a 1 in each of the 64 bit columns, and how many
    hashes they have: a text word is hashed as the character n-grams of ``<word>``, a structure feature whole.
    Rows are kept as bytes; a name with more than 255 hashes voting in one column is counted afresh each time."""

    cdef uint64_t seed
    cdef bint padded  # text words (hashed as n-grams of <word>), else structure features (hashed whole)
    cdef dict ids  # name -> row; -1 for a name counted afresh
    cdef uint8_t* counts
    cdef int64_t* sizes
    cdef Py_ssize_t used, cap, limit

    def __cinit__(self, uint64_t seed, bint padded, Py_ssize_t limit):
        self.seed = seed
        self.padded = padded
        self.ids = {}
        self.limit = limit
        self.used = 0
        self.cap = 1024
        self.counts = <uint8_t*>PyMem_Malloc(self.cap * 64)
        self.sizes = <int64_t*>PyMem_Malloc(self.cap * sizeof(int64_t))
        if self.counts is NULL or self.sizes is NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.counts)
        PyMem_Free(self.sizes)

    def __len__(self):
        return len(self.ids)

    cdef int64_t count(self, str name, int n, int64_t* out) except -1:
        """Bit counts of *name*'s hashes into *out*, and their number: for text words the n-grams of code points
        of ``<name>`` as ``char_grams`` makes them (``<name>`` whole for n = 0 or a short name), for structure
        features the name whole."""
        cdef Py_ssize_t size, j
        cdef const char* data
        cdef uint64_t h
        cdef bytes word
        for j in range(64):
            out[j] = 0
        if not self.padded:
            data = PyUnicode_AsUTF8AndSize(name, &size)
            h = xxh64(<const uint8_t*>data, size, self.seed)
            for j in range(64):
                out[j] += (h >> j) & 1
            return 1
        word = ("<" + name + ">").encode("utf-8")
        return _gram_bits(<const uint8_t*>(<char*>word), len(word), n, self.seed, out)

    cdef Py_ssize_t row(self, str name, int n, int64_t* scratch) except -2:
        """The memo row of *name* (added when new), or -1 for a name whose counts are in *scratch* (too wide
        for a row of bytes); then ``scratch[64]`` holds its number of hashes."""
        cdef object found = self.ids.get(name)
        cdef Py_ssize_t r, j
        cdef int64_t size, top = 0
        if found is not None:
            r = found
            if r >= 0:
                return r
        size = self.count(name, n, scratch)
        scratch[64] = size
        for j in range(64):
            if scratch[j] > top:
                top = scratch[j]
        if top > 255:
            if found is None and len(self.ids) < self.limit:
                self.ids[name] = -1
            return -1
        if len(self.ids) >= self.limit:  # full: start again
            self.ids.clear()
            self.used = 0
        if self.used == self.cap:
            self._grow()
        r = self.used
        for j in range(64):
            self.counts[r * 64 + j] = <uint8_t>scratch[j]
        self.sizes[r] = size
        self.used += 1
        self.ids[name] = r
        return r

    cdef int _grow(self) except -1:
        cdef Py_ssize_t cap = 2 * self.cap
        cdef uint8_t* counts = <uint8_t*>PyMem_Realloc(self.counts, cap * 64)
        if counts is NULL:
            raise MemoryError()
        self.counts = counts
        cdef int64_t* sizes = <int64_t*>PyMem_Realloc(self.sizes, cap * sizeof(int64_t))
        if sizes is NULL:
            raise MemoryError()
        self.sizes = sizes
        self.cap = cap
        return 0


cdef int _add_votes(FeatureCounts bits, dict features, bint text, int char_ngram, int cjk_char_ngram,
                    int64_t* ones, int64_t* total) except -1:
    """Add each feature's rounded weight to the columns where its hashes have a 1 (a text word's weight shared
    among its n-grams first); 1 when a weight is too large for exact sums (the reference then votes)."""
    cdef int64_t scratch[65]
    cdef Py_ssize_t r, j
    cdef int n
    cdef int64_t size, units
    cdef double w
    cdef const uint8_t* row
    cdef str name
    for name, value in features.items():
        if not text:
            n = 0
        elif " " in name:
            n = 0
        else:
            n = cjk_char_ngram if _cjk(name[0]) else char_ngram
        r = bits.row(name, n, scratch)
        size = bits.sizes[r] if r >= 0 else scratch[64]
        w = value
        if text:
            w = w / <double>size
        w = rint(w * 1024.0)
        if w < 1.0:
            w = 1.0
        if not w <= _MAX_UNITS:
            return 1
        units = <int64_t>w
        total[0] += units * size
        if r >= 0:
            row = bits.counts + r * 64
            for j in range(64):
                ones[j] += units * row[j]
        else:
            for j in range(64):
                ones[j] += units * scratch[j]
    return 0


def vote(FeatureCounts text_bits not None, FeatureCounts structure_bits not None, dict text not None,
         dict structure not None, int char_ngram, int cjk_char_ngram):
    """The simhash of a page's features, as the reference's ``fingerprint_features`` computes it (None when a
    weight is too large for this vote's exact integer sums: the reference then computes it)."""
    cdef int64_t ones[64]
    cdef int64_t total = 0
    cdef uint64_t value = 0
    cdef Py_ssize_t j
    for j in range(64):
        ones[j] = 0
    if _add_votes(text_bits, text, True, char_ngram, cjk_char_ngram, ones, &total):
        return None
    if _add_votes(structure_bits, structure, False, char_ngram, cjk_char_ngram, ones, &total):
        return None
    for j in range(64):
        if 2 * ones[j] - total > 0:
            value |= (<uint64_t>1) << j
    return value


