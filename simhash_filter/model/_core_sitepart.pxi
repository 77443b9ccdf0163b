# The site part's word sequences (model v7; simhash_filter.model.sitepart, the reference): the one-bit MinHash of the
# word 3-shingles of a page's text, from its lower-cased UTF-8 bytes, bit for bit as sequence_hashes and sequence_bits
# give it with numpy.

cdef uint64_t _SEQ_P = 0x100000001B3ULL
cdef uint64_t _SEQ_K1 = 0x9E3779B97F4A7C15ULL
cdef uint64_t _SEQ_K2 = 0xC2B2AE3D27D4EB4FULL


cdef inline uint8_t _seq_class(uint8_t c) noexcept nogil:
    """1 a token's byte, 2 a lead byte of U+3000-U+9FFF (a token of its own), 0 other bytes."""
    if 0xE3 <= c <= 0xE9:
        return 2
    if c >= 128 or 48 <= c <= 57 or 97 <= c <= 122:
        return 1
    return 0


cdef inline uint64_t _seq_mix(uint64_t x) noexcept nogil:
    x ^= x >> 31
    return x * _SEQ_K1


# str.lower of one code point: 0 until first met, else the lower-case code point + 1, or _LOWER_GENERAL where str.lower
# gives more than one character or reads the neighbours (capital sigma's final form): such a segment is lower-cased by
# str.lower itself.
cdef uint32_t _lower_table[0x110000]
cdef enum:
    _LOWER_GENERAL = 0xFFFFFFFF


cdef uint32_t _lower_of(uint32_t c) except 0:
    cdef str low = chr(c).lower()
    cdef uint32_t v = ord(low) + 1 if len(low) == 1 and c != 0x3A3 else _LOWER_GENERAL
    _lower_table[c] = v
    return v


cdef inline Py_ssize_t _put_utf8(uint32_t c, char* out) noexcept:
    """The UTF-8 of code point *c* into *out* (a lone surrogate as ``?``, as ``encode("utf-8", "replace")``): its
    length."""
    if c < 0x80:
        out[0] = <char>c
        return 1
    if c < 0x800:
        out[0] = <char>(0xC0 | (c >> 6))
        out[1] = <char>(0x80 | (c & 0x3F))
        return 2
    if 0xD800 <= c <= 0xDFFF:
        out[0] = 63
        return 1
    if c < 0x10000:
        out[0] = <char>(0xE0 | (c >> 12))
        out[1] = <char>(0x80 | ((c >> 6) & 0x3F))
        out[2] = <char>(0x80 | (c & 0x3F))
        return 3
    out[0] = <char>(0xF0 | (c >> 18))
    out[1] = <char>(0x80 | ((c >> 12) & 0x3F))
    out[2] = <char>(0x80 | ((c >> 6) & 0x3F))
    out[3] = <char>(0x80 | (c & 0x3F))
    return 4


cdef Py_ssize_t _lowered(str segment, Py_ssize_t m, char* out, Py_ssize_t k, Py_ssize_t limit) except -1:
    """Write the UTF-8 of ``segment[:m].lower()`` into *out* from *k*, stopping at *limit* bytes: the new end."""
    cdef int kind = PyUnicode_KIND(segment)
    cdef void* data = PyUnicode_DATA(segment)
    cdef Py_ssize_t i, start = k, n
    cdef uint32_t c, v
    cdef const char* low
    for i in range(m):
        if k >= limit:
            return limit
        c = PyUnicode_READ(kind, data, i)
        if c < 128:
            out[k] = <char>(c + 32 if 65 <= c <= 90 else c)
            k += 1
            continue
        v = _lower_table[c]
        if v == 0:
            v = _lower_of(c)
        if v == _LOWER_GENERAL:  # str.lower over the whole segment
            encoded = segment[:m].lower().encode("utf-8", "replace")
            low, n = encoded, len(encoded)
            n = min(n, limit - start)
            memcpy(out + start, low, n)
            return start + n
        k += _put_utf8(v - 1, out + k)
    return min(k, limit)


def sequence_bits(tuple texts not None, Py_ssize_t max_chars, Py_ssize_t max_bytes, int bins):
    """The bits of :func:`simhash_filter.model.sitepart.sequence_bits` of the hashes
    :func:`~simhash_filter.model.sitepart.sequence_hashes` gives for the text :func:`~simhash_filter.model.sitepart.
    site_part` reads from the page's *texts* (``PageText.texts``: the segments in order, *max_chars* characters in
    all, joined by line breaks, lower-cased, the first *max_bytes* of its UTF-8), or None when it has no token.
    *bins*: a power of two up to 256."""
    cdef _Key buf = _Key()
    cdef Py_ssize_t room = max_chars, k = 0, m
    cdef str segment
    cdef bint first = True
    buf.reserve(max_bytes + 4)
    for _weight, segment in texts:
        if room <= 0 or k >= max_bytes:
            break
        if not first:
            buf.data[k] = 10
            k += 1
        first = False
        m = len(segment)
        k = _lowered(segment, m if m < room else room, buf.data, k, max_bytes)
        room -= m
    return _sequence_bits(<const uint8_t*>buf.data, k, bins)


cdef object _sequence_bits(const uint8_t* p, Py_ssize_t n, int bins):
    """The site part's bits of the lower-cased UTF-8 text *p* (*n* bytes), or None when it has no token."""
    cdef Py_ssize_t i
    cdef uint8_t c, prev = 0
    cdef uint64_t h = 0, m = 1, t0 = 0, t1 = 0, x, value
    cdef Py_ssize_t tokens = 0
    cdef uint64_t smallest[256]
    cdef bint filled[256]
    cdef int shift_bins = 64
    cdef int b, src, k
    cdef unsigned char out[32]
    if bins > 256 or bins < 8 or bins & (bins - 1):
        raise ValueError(f"bins must be a power of two in [8, 256], got {bins}")
    k = bins - 1
    while k:
        shift_bins -= 1
        k >>= 1
    for b in range(bins):
        filled[b] = False
        smallest[b] = 0
    # tokens in order; each finished token enters the shingle window
    for i in range(n + 1):
        c = _seq_class(p[i]) if i < n else 0
        if prev != 0 and (c == 0 or c > prev):  # the token before byte i is done: h
            if tokens >= 2:
                x = _seq_mix((t0 * _SEQ_K1 + t1) * _SEQ_K2 + h)
                b = <int>(x >> shift_bins)
                if not filled[b] or x < smallest[b]:
                    smallest[b] = x
                    filled[b] = True
            t0, t1 = t1, h
            tokens += 1
        if c != 0:
            if prev == 0 or c > prev:
                h = 0
                m = 1
            h += <uint64_t>p[i] * m
            m *= _SEQ_P
        prev = c
    if tokens == 0:
        return None
    if tokens < 3:  # the words themselves
        for k in range(<int>tokens):
            x = _seq_mix(t1 if (k == tokens - 1) else t0)
            b = <int>(x >> shift_bins)
            if not filled[b] or x < smallest[b]:
                smallest[b] = x
                filled[b] = True
    memset(out, 0, 32)
    for b in range(bins):
        src = b
        for k in range(bins):
            src = (b + k) % bins
            if filled[src]:
                break
        value = (smallest[src] >> <uint64_t>((src - b) & 63)) & 1
        out[b >> 3] |= <unsigned char>(value << (b & 7))
    return PyBytes_FromStringAndSize(<char*>out, bins // 8)
