"""The prose verifier's parameters and function words (:mod:`simhash_filter.model.prose`), importing nothing of the
model but the sketch's layout: the fingerprint config names them in the model id (:data:`PROSE_ID`)."""

from __future__ import annotations

from simhash_filter.model.sketch import PROSE_BINS

#: Words after an antecedent that make one spot.
CHAIN = 3
#: Segments weighted under this are not read (boilerplate, link lists, volatile lines).
MIN_WEIGHT = 0.3
#: An article-like page has at least this many distinct spots ...
MIN_SPOTS = 24
#: ... and at least this share of its read characters in lines of at least :data:`PROSE_LINE` characters.
MIN_PROSE_SHARE = 0.5
PROSE_LINE = 120
#: Words read at most (the first of the heaviest text): an article's copies begin alike, and this bounds the work.
MAX_WORDS = 300
#: Characters read per word asked for (a word and its space are about six; CJK words are shorter).
CHARS_PER_WORD = 8
#: Fewer characters of prose than this per spot asked for cannot make :data:`MIN_SPOTS` spots: such a page is not
#: article-like, whatever its words.
SPOT_CHARS = 12
#: xxhash64 seed of the spots (another than the word sketch's and the simhash's).
SPOT_SEED = 0x5B07

#: Function words that start a spot: the most frequent articles, prepositions, pronouns and auxiliaries of the
#: languages of the web's news (English, German, French, Spanish, Italian, Portuguese, Dutch) and Chinese particles.
ANTECEDENTS = frozenset(
    """
    a an the is are was were be been has have had will would can could should may might must do does did this that
    these those there it its he she they we you his her their our of to in on at by for with from as and but or not
    said says about after before over into than which who what when where how also only
    der die das den dem des ein eine einen einem einer eines ist sind war waren wird werden hat haben hatte sich
    nicht mit von zu im auf für bei aus nach über auch und oder aber wie dass es er sie wir
    le la les un une des du de est sont était été a ont avait sera dans sur pour par avec au aux ce cette ces qui
    que il elle ils nous vous se ne pas et ou mais plus
    el los las unos unas es son fue era ha han en con por para del al que se lo su sus y o pero como más
    il lo gli uno di da nel nella sono è stato ha hanno per con che non e
    o os as um uma é são foi em no na do da dos das com por para que não
    het een is zijn was waren heeft hebben van op te met voor door dat niet en maar ook
    的 了 在 是 和 与 也 就 都 而 及 对 将 被 把 从 让 向 为 于 以 这 那 其 之 中 等 但 并 又
    我 他 她 它 们 我们 他们 一个 这个 没有 已经 可以 表示
    """.split()
)

#: Everything a part depends on, for the model id (:meth:`simhash_filter.model.config.FingerprintConfig.model`).
PROSE_ID = (
    f"spots1-{CHAIN}-w{MIN_WEIGHT}-n{MIN_SPOTS}/{SPOT_CHARS}-p{MIN_PROSE_SHARE}/{PROSE_LINE}-m{MAX_WORDS}/"
    f"{CHARS_PER_WORD}-b{PROSE_BINS}-s{SPOT_SEED}-a{len(ANTECEDENTS)}"
)
