# --- the split (simhash_filter.model.extract._split, the reference) ------------------------------------------


cdef struct _Ranked:
    double weight
    Py_ssize_t index


cdef int _heaviest_first(const void* a, const void* b) noexcept nogil:
    """Weight descending, then document order: numpy's stable argsort of the negated weights."""
    cdef const _Ranked* x = <const _Ranked*>a
    cdef const _Ranked* y = <const _Ranked*>b
    if x.weight != y.weight:
        return -1 if x.weight > y.weight else 1
    return -1 if x.index < y.index else (1 if x.index > y.index else 0)


cdef struct _Keyed:
    long long key
    Py_ssize_t index


cdef int _by_key(const void* a, const void* b) noexcept nogil:
    cdef const _Keyed* x = <const _Keyed*>a
    cdef const _Keyed* y = <const _Keyed*>b
    if x.key != y.key:
        return -1 if x.key < y.key else 1
    return -1 if x.index < y.index else (1 if x.index > y.index else 0)


cdef double _pairwise_sum(const double* a, Py_ssize_t n) noexcept nogil:
    """numpy's pairwise summation of float64 (``ndarray.sum`` of a contiguous array), operation for operation."""
    cdef Py_ssize_t i, n2
    cdef double res, r0, r1, r2, r3, r4, r5, r6, r7
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[i]
        return res
    if n <= 128:
        r0, r1, r2, r3, r4, r5, r6, r7 = a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]
        i = 8
        while i < n - (n % 8):
            r0 += a[i]
            r1 += a[i + 1]
            r2 += a[i + 2]
            r3 += a[i + 3]
            r4 += a[i + 4]
            r5 += a[i + 5]
            r6 += a[i + 6]
            r7 += a[i + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < n:
            res += a[i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise_sum(a, n2) + _pairwise_sum(a + n2, n - n2)


cdef inline void _subtree_sums(const double* values, const Py_ssize_t* ends, double* cum, double* out,
                               Py_ssize_t n) noexcept nogil:
    """``out[i]``: the sum of ``values`` over element i's subtree (whole numbers, so every sum is exact)."""
    cdef Py_ssize_t i
    cdef double acc = 0.0
    for i in range(n):
        acc += values[i]
        cum[i] = acc
    for i in range(n):
        out[i] = cum[ends[i]] - cum[i] + values[i]


cdef inline void _mark_subtrees(const bint* starts, const Py_ssize_t* ends, bint* out, Py_ssize_t n) noexcept nogil:
    """``out[i]`` set (never cleared) when element i is inside the subtree of an element with ``starts`` set."""
    cdef Py_ssize_t i, reach = -1
    for i in range(n):
        if starts[i] and ends[i] > reach:
            reach = ends[i]
        if reach >= i:
            out[i] = True


cdef int _remove_line_breaks(_Walked w, object line_break) except -1:
    """Each segment with a line break and a character of U+3000 and above (what a CJK line break needs) rewritten by
    *line_break* (which removes the line breaks between CJK characters): its new UTF-8 appended to the text."""
    cdef Py_ssize_t k, n, at
    cdef const char* data
    cdef const uint8_t* p
    cdef bint wide, newline
    for k in range(w.seg_at.n):
        p = <const uint8_t*>w.text + w.seg_at.items[k]
        n = w.seg_size.items[k]
        if memchr(p, 10, n) is NULL:
            continue
        wide = False
        for at in range(n):
            if p[at] >= 0xE3:
                wide = True
                break
        if not wide:
            continue
        text = line_break(PyUnicode_DecodeUTF8(<const char*>p, n, NULL))
        data = PyUnicode_AsUTF8AndSize(text, &n)
        w.reserve(n)
        memcpy(w.text + w.text_n, data, n)
        w.seg_at.items[k] = w.text_n
        w.seg_size.items[k] = n
        w.text_n += n
    return 0


cdef tuple _split_arrays(_Walked w, double dom_decay, double boilerplate_weight, object line_break,
                         frozenset list_tags, tuple params):
    """``(texts, structure)`` of the walk *w*: what :func:`simhash_filter.model.extract._split` (the reference, whose
    comments say what each step means) gives, bit for bit: *line_break* removes the line breaks between CJK
    characters from a segment, *list_tags* are the tags of link-list blocks, *params* the reference's constants in
    the order unpacked below.  ``structure`` is a dict in the reference's (sorted) order."""
    cdef double max_share, link_density, beside_links, hub_share, outside_min, max_mass, volatile_weight
    cdef double volatile_share, cjk_text, prose_chars, prose_paragraphs
    cdef Py_ssize_t volatile_words, volatile_chars
    (max_share, link_density, beside_links, hub_share, outside_min, max_mass, volatile_weight, volatile_words,
     volatile_chars, volatile_share, cjk_text, prose_chars, prose_paragraphs) = params
    cdef Py_ssize_t n = w.tid.n, m = w.seg_at.n, n_tags = len(w.tag_of)
    cdef double* f = NULL
    cdef bint* b = NULL
    cdef _Ranked* ranked = NULL
    cdef _Keyed* keyed = NULL
    cdef char* joined = NULL
    _remove_line_breaks(w, line_break)
    try:
        f = <double*>PyMem_Malloc((10 * n + 3 * m + 1) * sizeof(double))
        b = <bint*>PyMem_Malloc((9 * n + m + n_tags + 1) * sizeof(bint))
        ranked = <_Ranked*>PyMem_Malloc((m + 1) * sizeof(_Ranked))
        keyed = <_Keyed*>PyMem_Malloc((n + 1) * sizeof(_Keyed))
        joined = <char*>PyMem_Malloc(w.text_n + m + 1)
        if f is NULL or b is NULL or ranked is NULL or keyed is NULL or joined is NULL:
            raise MemoryError()
        return _split(w.tag_of, w.text, w.seg_at.items, w.seg_size.items, joined, w.tid.items, w.parent.items,
                      w.depth.items, w.end.items, w.candidates, w.owner.items, n, m, dom_decay, boilerplate_weight,
                      list_tags, f, b, ranked, keyed, max_share, link_density, beside_links, hub_share, outside_min,
                      max_mass, volatile_weight, volatile_words, volatile_chars, volatile_share, cjk_text,
                      prose_chars, prose_paragraphs)
    finally:
        PyMem_Free(f)
        PyMem_Free(b)
        PyMem_Free(ranked)
        PyMem_Free(keyed)
        PyMem_Free(joined)


cdef tuple _split(list tag_of, const char* seg_text, const Py_ssize_t* seg_at, const Py_ssize_t* seg_size,
                  char* joined, Py_ssize_t* tid, Py_ssize_t* parent, Py_ssize_t* depth, Py_ssize_t* end,
                  list candidates, Py_ssize_t* owner, Py_ssize_t n, Py_ssize_t m, double dom_decay,
                  double boilerplate_weight, frozenset list_tags, double* f, bint* b, _Ranked* ranked, _Keyed* keyed, double max_share, double link_density,
                  double beside_links, double hub_share, double outside_min, double max_mass,
                  double volatile_weight, Py_ssize_t volatile_words, Py_ssize_t volatile_chars,
                  double volatile_share, double cjk_text, double prose_chars, double prose_paragraphs):
    # scratch: 10 float arrays of n, 3 of m; 9 flag arrays of n, one of m, one per tag
    cdef double* own = f
    cdef double* cum = f + n
    cdef double* text = f + 2 * n
    cdef double* link_text = f + 3 * n
    cdef double* good = f + 4 * n
    cdef double* tmp = f + 5 * n
    cdef double* beside = f + 6 * n
    cdef double* level_weight = f + 7 * n
    cdef double* powers = f + 8 * n
    cdef double* rest = f + 9 * n
    cdef double* seg_len = f + 10 * n
    cdef double* seg_weight = f + 10 * n + m
    cdef bint* link = b
    cdef bint* boiler = b + n
    cdef bint* chrome = b + 2 * n
    cdef bint* starts = b + 3 * n
    cdef bint* linky = b + 4 * n
    cdef bint* in_content = b + 5 * n
    cdef bint* is_boiler = b + 6 * n
    cdef bint* keep = b + 7 * n
    cdef bint* is_list = b + 8 * n
    cdef bint* volatile = b + 9 * n
    cdef bint* list_tag = b + 9 * n + m
    cdef Py_ssize_t i, k, p, a_id = -1, n_tags = len(tag_of), words, digit_words, visible, cjk, content, child
    cdef Py_ssize_t best, last, count, n_depth, d, first
    cdef bint in_space, in_word, word_has_digit, has_digit, little_left
    cdef uint32_t ch
    cdef uint8_t flags
    cdef const char* seg
    cdef Py_ssize_t at, size, length
    cdef double total, share, weight, boiler_chars, rest_mass, v
    cdef long long key

    # the segments (CJK line breaks removed): visible length (CJK characters counted cjk_text times); volatile
    for k in range(m):
        seg = seg_text + seg_at[k]
        size = seg_size[k]
        visible = words = digit_words = cjk = 0
        in_space = True  # str.split(): runs of whitespace separate words, none at the ends
        in_word = word_has_digit = has_digit = False
        count = 0  # whitespace-separated words
        at = 0
        while at < size:
            if <uint8_t>seg[at] < 0x80:
                ch = <uint8_t>seg[at]
                at += 1
                flags = _flag_table[ch]  # filled at import for ASCII
            else:
                at += _utf8_char(seg, at, &ch)
                flags = _char_flags(ch)
            if flags & _SPACE:
                in_space = True
            else:
                visible += 1
                if in_space:
                    count += 1
                    in_space = False
            if flags & _ALNUM:  # the reference's [^\W_]+ words and \d digits
                if not in_word:
                    in_word = True
                    word_has_digit = False
                    words += 1
                if flags & _DECIMAL:
                    has_digit = True
                    if not word_has_digit:
                        word_has_digit = True
                        digit_words += 1
            else:
                in_word = False
            if ch >= 0x3400 and _cjk(ch):
                cjk += 1
        if count > 1:
            visible += count - 1
        seg_len[k] = <double>(visible + <Py_ssize_t>(cjk_text - 1) * cjk)
        volatile[k] = (
            has_digit and visible <= volatile_chars and words <= volatile_words
            and digit_words >= volatile_share * words
        )

    for i in range(n_tags):
        list_tag[i] = tag_of[i] in list_tags
        if a_id < 0 and tag_of[i] == "a":
            a_id = i
    for i in range(n):
        own[i] = 0.0
        starts[i] = tid[i] == a_id
        link[i] = boiler[i] = False
    for k in range(m):
        own[owner[k]] += seg_len[k]
    _mark_subtrees(starts, end, link, n)
    _subtree_sums(own, end, cum, text, n)
    total = text[0]

    for i in range(n):
        starts[i] = False
    for i in candidates:
        if text[i] <= max_share * total:
            starts[i] = True
    _mark_subtrees(starts, end, boiler, n)
    # the path down to the prose (elements whose own text outside links is a paragraph) when the marks swallow it
    v = total  # text left outside the marks
    share = 0.0  # twice the prose inside the marks, less all the prose
    for i in range(n):
        tmp[i] = 0.0 if (link[i] or own[i] < prose_chars) else own[i]
        if boiler[i]:
            v -= own[i]
            share += 2.0 * tmp[i]
        share -= tmp[i]
    little_left = v < prose_chars <= total
    if little_left or share > 0:
        _subtree_sums(tmp, end, cum, good, n)  # prose per subtree
        for i in range(n):
            keep[i] = False  # on the prose path
            boiler[i] = False
            tmp[i] = 1.0 if tmp[i] > 0 else 0.0
        _subtree_sums(tmp, end, cum, beside, n)  # paragraphs per subtree
        content = 0
        while good[content] > 0:
            keep[content] = little_left or beside[content] >= prose_paragraphs
            child, last = content + 1, end[content]
            best = -1
            while child <= last:
                if best < 0 or good[child] > good[best]:
                    best = child
                child = end[child] + 1
            if best < 0 or good[best] * 2 < good[content]:
                break
            content = best
        for i in range(n):
            starts[i] = starts[i] and not keep[i]
        _mark_subtrees(starts, end, boiler, n)
    for i in range(n):
        chrome[i] = boiler[i]
        tmp[i] = 0.0 if boiler[i] else own[i]
    _subtree_sums(tmp, end, cum, text, n)
    for i in range(n):
        tmp[i] = tmp[i] if link[i] else 0.0
    _subtree_sums(tmp, end, cum, link_text, n)
    for i in range(n):
        linky[i] = link_text[i] > link_density * text[i]
        beside[i] = 0.0
    for i in range(n):
        p = parent[i]
        if p >= 0:
            v = 0.0 if linky[i] else text[i] - link_text[i]
            if v > beside[p]:
                beside[p] = v
    for i in range(n):
        starts[i] = (
            list_tag[tid[i]] and text[i] > 0 and linky[i] and text[i] <= max_share * total
            and beside[i] < beside_links * link_text[i]
        )
    _mark_subtrees(starts, end, boiler, n)

    for i in range(n):
        tmp[i] = 0.0 if (boiler[i] or link[i]) else own[i]
    _subtree_sums(tmp, end, cum, good, n)
    if good[0] < hub_share * text[0]:  # a hub page: its link lists are its content
        for i in range(n):
            boiler[i] = chrome[i]
            link[i] = False
            good[i] = text[i]

    # the descent into the content element, and the weight of the text left outside at each level
    content = 0
    chain = []
    if good[0] > 0:
        while True:
            child, last = content + 1, end[content]
            if child > last:
                break
            best = child
            while child <= last:
                if good[child] > good[best]:
                    best = child
                child = end[child] + 1
            share = good[best] / good[content] if good[content] > 0 else 0.0
            if share < 0.5:
                break
            chain.append((content, share))
            content = best
    level_weights = []
    weight = 1.0
    for _, share in reversed(chain):
        if share < 1.0:
            weight *= 1.0 - (share - 0.5) / 0.5 * (1.0 - outside_min)
        level_weights.append(weight)
    for i in range(n):
        level_weight[i] = 1.0
        in_content[i] = content <= i <= end[content]
    for (node, _), weight in zip(chain, reversed(level_weights)):
        for i in range(<Py_ssize_t>node, end[<Py_ssize_t>node] + 1):
            level_weight[i] = weight
    for i in range(content, end[content] + 1):
        level_weight[i] = 1.0
    boiler_chars = 0.0
    count = 0
    for i in range(n):
        is_boiler[i] = boiler[i] or (link[i] and not in_content[i])
        if is_boiler[i]:
            boiler_chars += own[i]
        else:
            rest[count] = own[i] * level_weight[i]
            count += 1
    rest_mass = 0.0 + _pairwise_sum(rest, count)
    if boiler_chars > 0:
        v = max_mass * rest_mass / boiler_chars
        if v < boilerplate_weight:
            boilerplate_weight = v
    for k in range(m):
        v = boilerplate_weight if is_boiler[owner[k]] else level_weight[owner[k]]
        if volatile[k]:
            v *= volatile_weight
        ranked[k].weight = rint(v * 1000.0) / 1000.0
        ranked[k].index = k
    qsort(ranked, m, sizeof(_Ranked), _heaviest_first)
    texts = []
    first = 0
    while first < m:
        k = first + 1
        while k < m and ranked[k].weight == ranked[first].weight:
            k += 1
        if ranked[first].weight > 0:  # the group's segments joined by line breaks, one str
            length = 0
            for i in range(first, k):
                if i > first:
                    joined[length] = 10
                    length += 1
                memcpy(joined + length, seg_text + seg_at[ranked[i].index], seg_size[ranked[i].index])
                length += seg_size[ranked[i].index]
            texts.append((ranked[first].weight, PyUnicode_DecodeUTF8(joined, length, NULL)))
        first = k

    # structure: (inside content?, parent tag, tag, depth) -> summed dom_decay ** depth, in sorted key order
    n_depth = 0
    for i in range(n):
        keep[i] = not boiler[i]
        d = depth[i] - depth[content] if in_content[i] else depth[i]
        if d + 1 > n_depth:
            n_depth = d + 1
    if n_depth > n:
        raise ValueError("split: depths beyond the number of elements")
    v = 1.0
    for d in range(n_depth):
        powers[d] = v
        v *= dom_decay
    count = 0
    for i in range(n):
        if keep[i]:
            p = -1 if parent[i] < 0 or i == content else tid[parent[i]]
            d = depth[i] - depth[content] if in_content[i] else depth[i]
            keyed[count].key = (((<long long>in_content[i]) * (n_tags + 1) + p + 1) * n_tags + tid[i]) * n_depth + d
            keyed[count].index = i
            count += 1
    qsort(keyed, count, sizeof(_Keyed), _by_key)
    structure = {}
    first = 0
    while first < count:
        key = keyed[first].key
        v = 0.0
        k = first
        while k < count and keyed[k].key == key:
            i = keyed[k].index
            v += powers[depth[i] - depth[content] if in_content[i] else depth[i]]
            k += 1
        d = key % n_depth
        key //= n_depth
        i = key % n_tags
        key //= n_tags
        p = key % (n_tags + 1)
        key //= n_tags + 1
        structure[f"{'c' if key else 'o'}|{tag_of[p - 1] if p else ''}>{tag_of[i]}|{d}"] = v
        first = k
    return tuple(texts), structure


