# --- the sketch (simhash_filter.model.sketch.sketch, the reference) -----------------------------------------


cdef uint64_t _P1 = 0x9E3779B185EBCA87ULL
cdef uint64_t _P2 = 0xC2B2AE3D27D4EB4FULL
cdef uint64_t _P3 = 0x165667B19E3779F9ULL
cdef uint64_t _P4 = 0x85EBCA77C2B2AE63ULL
cdef uint64_t _P5 = 0x27D4EB2F165667C5ULL
cdef uint64_t _GOLDEN = 0x9E3779B97F4A7C15ULL
cdef uint64_t _MIX_A = 0xBF58476D1CE4E5B9ULL
cdef uint64_t _MIX_B = 0x94D049BB133111EBULL
cdef uint64_t _EMPTY = 0xFFFFFFFFFFFFFFFFULL


cdef inline uint64_t _rotl(uint64_t x, int r) noexcept nogil:
    return (x << r) | (x >> (64 - r))


cdef inline uint64_t _read64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)  # little-endian machines only: checked at import below
    return v


cdef inline uint64_t _read32(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return v


cdef inline uint64_t _round(uint64_t acc, uint64_t lane) noexcept nogil:
    acc += lane * _P2
    acc = _rotl(acc, 31)
    return acc * _P1


cdef inline uint64_t _merge(uint64_t acc, uint64_t v) noexcept nogil:
    acc ^= _round(0, v)
    return acc * _P1 + _P4


cdef uint64_t xxh64(const uint8_t* p, Py_ssize_t n, uint64_t seed) noexcept nogil:
    """XXH64 as its specification defines it (the digest the ``xxhash`` package's ``xxh64_intdigest`` gives)."""
    cdef const uint8_t* end = p + n
    cdef uint64_t h, v1, v2, v3, v4
    if n >= 32:
        v1 = seed + _P1 + _P2
        v2 = seed + _P2
        v3 = seed
        v4 = seed - _P1
        while p + 32 <= end:
            v1 = _round(v1, _read64(p))
            v2 = _round(v2, _read64(p + 8))
            v3 = _round(v3, _read64(p + 16))
            v4 = _round(v4, _read64(p + 24))
            p += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        h = _merge(h, v1)
        h = _merge(h, v2)
        h = _merge(h, v3)
        h = _merge(h, v4)
    else:
        h = seed + _P5
    h += <uint64_t>n
    while p + 8 <= end:
        h ^= _round(0, _read64(p))
        h = _rotl(h, 27) * _P1 + _P4
        p += 8
    if p + 4 <= end:
        h ^= _read32(p) * _P1
        h = _rotl(h, 23) * _P2 + _P3
        p += 4
    while p < end:
        h ^= (<uint64_t>p[0]) * _P5
        h = _rotl(h, 11) * _P1
        p += 1
    h ^= h >> 33
    h *= _P2
    h ^= h >> 29
    h *= _P3
    h ^= h >> 32
    return h


def xxh64_intdigest(str text not None, uint64_t seed):
    """XXH64 of *text* in UTF-8 (for tests against the ``xxhash`` package)."""
    cdef Py_ssize_t n
    cdef const char* data = PyUnicode_AsUTF8AndSize(text, &n)
    return xxh64(<const uint8_t*>data, n, seed)


cdef inline uint64_t _mix(uint64_t x) noexcept nogil:
    x += _GOLDEN
    x ^= x >> 30
    x *= _MIX_A
    x ^= x >> 27
    x *= _MIX_B
    x ^= x >> 31
    return x


def sketch(dict words not None, Py_ssize_t bins, double step, uint64_t seed):
    """The sketch of :func:`simhash_filter.model.sketch.sketch`, bit for bit (the reference's docstring says what
    it is): ``(bins + 7) // 8`` bytes."""
    cdef Py_ssize_t nbytes = (bins + 7) // 8
    if not words:
        return bytes(nbytes)
    if bins <= 0:
        raise ValueError(f"bins must be positive, got {bins}")
    cdef uint64_t* out = <uint64_t*>PyMem_Malloc(bins * sizeof(uint64_t))
    cdef uint8_t* packed = <uint8_t*>PyMem_Malloc(nbytes)
    if out is NULL or packed is NULL:
        PyMem_Free(out)
        PyMem_Free(packed)
        raise MemoryError()
    cdef Py_ssize_t i, n
    cdef uint64_t nb = <uint64_t>bins
    cdef const char* data
    try:
        for i in range(bins):
            out[i] = _EMPTY
        for word, weight in words.items():
            data = PyUnicode_AsUTF8AndSize(word, &n)
            _sketch_add(out, nb, xxh64(<const uint8_t*>data, n, seed), weight, step)
        return _sketch_bytes(out, bins, packed, nbytes)
    finally:
        PyMem_Free(out)
        PyMem_Free(packed)


cdef inline void _sketch_add(uint64_t* out, uint64_t nb, uint64_t h, double w, double step) noexcept nogil:
    """The copies of one word (hash *h*, weight *w*) into the bins."""
    cdef double r = rint(w / step)
    cdef uint64_t copies = <uint64_t>r if r >= 1.0 else 1
    cdef uint64_t k = 0, x, value
    cdef Py_ssize_t j
    while k < copies:
        x = _mix(h ^ (k * _GOLDEN))
        j = <Py_ssize_t>(x % nb)
        value = x // nb
        if value < out[j]:
            out[j] = value
        k += 1


cdef bytes _sketch_bytes(uint64_t* out, Py_ssize_t bins, uint8_t* packed, Py_ssize_t nbytes):
    """Densify the bins and pack their low bits."""
    cdef Py_ssize_t i
    _densify(out, bins)
    for i in range(nbytes):
        packed[i] = 0
    for i in range(bins):
        if out[i] & 1:
            packed[i >> 3] |= <uint8_t>(1 << (i & 7))
    return PyBytes_FromStringAndSize(<char*>packed, nbytes)


cdef void _densify(uint64_t* out, Py_ssize_t bins) noexcept nogil:
    """Fill each empty bin from the next filled bin to its right (cyclically): ``mix(value ^ distance)``."""
    cdef Py_ssize_t i, first = -1, next_filled, steps = 0
    for i in range(bins):
        if out[i] != _EMPTY:
            first = i
            break
    if first < 0:
        return
    # Walk right to left from the first filled bin, cyclically; filled bins met are never overwritten before
    # they are used: a hole's source is the filled bin after it, whose value is still its own.
    next_filled = first
    i = first - 1
    while steps < bins - 1:
        if i < 0:
            i += bins
        if out[i] == _EMPTY:
            out[i] = _mix(out[next_filled] ^ <uint64_t>(next_filled - i if next_filled > i else next_filled - i + bins))
        else:
            next_filled = i
        i -= 1
        steps += 1


