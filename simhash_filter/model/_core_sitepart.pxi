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


def sequence_bits(bytes data, int bins):
    """The bits of :func:`simhash_filter.model.sitepart.sequence_bits` of the hashes
    :func:`~simhash_filter.model.sitepart.sequence_hashes` gives for the text whose lower-cased UTF-8 is *data*
    (already cut to the bytes read), or None when it has no token.  *bins*: a power of two up to 256."""
    cdef const uint8_t* p = data
    cdef Py_ssize_t n = len(data), i
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
