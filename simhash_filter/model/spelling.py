"""One spelling for English words written differently in British and American English: each case-folded Latin word
is mapped to one spelling by a few suffix rules and a short list of irregular words (docs/design.md, model v2).
The rules never merge two words that mean different things (each leaves a stem of several letters untouched); they
need not produce a dictionary word, as long as every page gets the same one."""

from __future__ import annotations

import re

#: (pattern, replacement) tried in order; the first that matches rewrites the word.  The compiled core applies the
#: same rules in C (``_core.pyx``: ``_american`` and its tables): change both, ``tests/test_core.py`` compares them.
_RULES = (
    # organise, organised, organises, organising, organisation(s), organiser(s) -> -iz-
    (re.compile(r"(?<=[a-z]{3})is(e|es|ed|ing|ation|ations|er|ers)$"), r"iz\1"),
    # analyse, paralyse -> -yze
    (re.compile(r"(?<=[a-z]{3})ys(e|es|ed|ing)$"), r"yz\1"),
    # colour, behaviour, favourite, honourable -> -or-
    (re.compile(r"(?<=[a-z]{3})our(s|ed|ing|ful|ite|ites|able|ably|less|er|ers)?$"), r"or\1"),
    # dialogue, catalogue(s) -> -og
    (re.compile(r"(?<=[a-z]{3})ogue(s)?$"), r"og\1"),
    # centre, metre, litre, fibre, calibre -> -er
    (re.compile(r"(?<=[a-z]{2})([tb])re(s)?$"), r"\1er\2"),
    # travelled, cancelling, labeller -> one l (after a vowel that ends a stem of three letters or more)
    (re.compile(r"(?<=[a-z]{3}[aeiou])ll(ed|ing|er|ers)$"), r"l\1"),
)

#: Words no suffix rule covers.
_IRREGULAR = {
    "licence": "license",
    "licences": "licenses",
    "defence": "defense",
    "defences": "defenses",
    "offence": "offense",
    "offences": "offenses",
    "pretence": "pretense",
    "grey": "gray",
    "greys": "grays",
    "programme": "program",
    "programmes": "programs",
    "ageing": "aging",
    "cheque": "check",
    "cheques": "checks",
    "tyre": "tire",
    "tyres": "tires",
    "aluminium": "aluminum",
    "mould": "mold",
    "moulds": "molds",
    "plough": "plow",
    "storey": "story",
    "storeys": "stories",
    "manoeuvre": "maneuver",
    "manoeuvres": "maneuvers",
    "judgement": "judgment",
    "judgements": "judgments",
    "acknowledgement": "acknowledgment",
    "acknowledgements": "acknowledgments",
}

#: Words shorter than this are never rewritten (no rule can match them).
_MIN_LENGTH = 5


def american(word: str) -> str:
    """The spelling ``word`` (case-folded) is compared under: American for British variants."""
    if len(word) < _MIN_LENGTH:
        return _IRREGULAR.get(word, word)
    irregular = _IRREGULAR.get(word)
    if irregular is not None:
        return irregular
    if not word.isascii():
        return word
    for pattern, replacement in _RULES:
        new = pattern.sub(replacement, word)
        if new != word:
            return new
    return word


def american_words(words: list[str]) -> list[str]:
    """:func:`american` of each word (memoised)."""
    memo = _MEMO
    out = list(map(memo.get, words))
    if None in out:
        if len(memo) > MAX_CACHED_WORDS:
            memo.clear()
        for i, (w, v) in enumerate(zip(words, out, strict=True)):
            if v is None:
                out[i] = memo[w] = american(w)
    return out  # type: ignore[return-value]  # every None was filled


def irregular_spellings() -> dict[str, str]:
    """The irregular words and their American spelling (the compiled core applies them, then the suffix rules)."""
    return _IRREGULAR


def spelling_memo() -> dict[str, str]:
    """The memo of :func:`american_words` (the compiled core reads it, and lets ``american_words`` fill it)."""
    return _MEMO


_MEMO: dict[str, str] = {}
#: The memo is emptied when it grows past this many words.
MAX_CACHED_WORDS = 500_000
