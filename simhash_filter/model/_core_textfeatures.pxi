# --- text features (simhash_filter.model.features._text_features, the reference, for single words) -----------


cdef inline bint _ascii_alnum(char c) noexcept nogil:
    return (c >= 97 and c <= 122) or (c >= 65 and c <= 90) or (c >= 48 and c <= 57)


cdef Py_ssize_t _count_ascii(str text, Py_ssize_t budget, dict counts) except -1:
    """Count the words of an ASCII *text* into *counts* (first appearance first), at most *budget* of them: runs
    of letters and digits, lower-cased (the reference's ``translate`` and ``split``)."""
    cdef Py_ssize_t i = 0, start, j, n, taken = 0
    cdef const char* data = PyUnicode_AsUTF8AndSize(text, &n)  # an ASCII string's own characters
    cdef char* lower = <char*>PyMem_Malloc(n + 1)
    cdef char c
    cdef str word
    if lower is NULL:
        raise MemoryError()
    try:
        for j in range(n):
            c = data[j]
            lower[j] = c + 32 if 65 <= c <= 90 else c
        while i < n and taken < budget:
            while i < n and not _ascii_alnum(data[i]):
                i += 1
            if i == n:
                break
            start = i
            while i < n and _ascii_alnum(data[i]):
                i += 1
            word = PyUnicode_DecodeASCII(lower + start, i - start, NULL)
            counts[word] = counts.get(word, 0) + 1
            taken += 1
        return taken
    finally:
        PyMem_Free(lower)


cdef list _memoised(list keys, dict memo, object compute):
    """``memo``'s value of each key; the keys it lacks given by ``compute(missing)`` (which may also refill or
    empty the memo: every value found is taken before it is called)."""
    cdef list out = [memo.get(key) for key in keys]
    cdef list missing = [key for key, value in zip(keys, out) if value is None]
    cdef Py_ssize_t i, j = 0
    if missing:
        computed = compute(missing)
        for i in range(len(out)):
            if out[i] is None:
                out[i] = computed[j]
                j += 1
    return out


def text_features(tuple texts not None, Py_ssize_t max_tokens, Py_ssize_t max_features, object tokenize,
                  dict spelling_memo not None, object american_words, dict value_memo not None, object word_values):
    """``(weights, gram_counts)`` of the reference's ``_text_features`` under single-word features
    (``ngrams == (1,)``), bit for bit: *tokenize* gives the words of a text that is not ASCII, *spelling_memo*
    and *american_words* map words to their American spelling (the latter filling the memo), *value_memo* and
    *word_values* give each word's ``(IDF ** idf_power, gram_count)`` (the latter filling the memo)."""
    cdef dict tf = {}, counts, grams
    cdef Py_ssize_t budget = max_tokens, room, taken
    cdef double rw, w, power
    cdef list words, gram_counts, spelled, values
    cdef object mapped, value
    cdef dict weights
    for rw, text in texts:
        if budget <= 0:
            break
        counts = {}
        if (<str>text).isascii():
            taken = _count_ascii(text, budget, counts)
        else:
            words = tokenize(text, budget)
            taken = len(words)
            for word in words:
                counts[word] = counts.get(word, 0) + 1
        budget -= taken
        if len(counts) > max_features:  # only so many can become features: respell no more
            counts = dict(list(counts.items())[:max_features])
        # each distinct word under its American spelling, counts merged (first appearance first)
        spelled = _memoised(list(counts), spelling_memo, american_words)
        grams = {}
        for mapped, c in zip(spelled, counts.values()):
            grams[mapped] = grams.get(mapped, 0) + c
        room = max_features - len(tf)
        for word, c in grams.items():
            value = tf.get(word)
            if value is not None:
                tf[word] = <double>value + rw * <double>(<Py_ssize_t>c)
            elif room > 0:
                tf[word] = 0.0 + rw * <double>(<Py_ssize_t>c)
                room -= 1
    if not tf:
        return {}, ()
    values = _memoised(list(tf), value_memo, word_values)
    weights = {}
    gram_counts = []
    for (word, value), pair in zip(tf.items(), values):
        power = pair[0]
        gram_counts.append(pair[1])
        w = value
        weights[word] = power * (1.0 + log(w) if w > 1.0 else w)
    return weights, tuple(gram_counts)


