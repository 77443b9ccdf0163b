"""The compiled core's character tables (``_core_chars.pxi``) against CPython's own Unicode database over every code
point: the space, letter/digit and decimal flags are ``str.isspace``, ``str.isalnum`` and ``str.isdecimal``; the fast
form of a character is its NFKC + casefold form with non-word characters as spaces, given only to characters whose
normal form cannot compose with a neighbour's; and on fuzzed typographic text the fast path gives the reference's
words and fingerprints."""

from __future__ import annotations

import unicodedata
from collections import Counter

import pytest
from fuzz.fuzz_core import reference_core
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_filter.model import core
from simhash_filter.model.config import FingerprintConfig
from simhash_filter.model.extract import PageText
from simhash_filter.model.features import WORD
from simhash_filter.model.fingerprint import Fingerprinter

_core = pytest.importorskip("simhash_filter.model._core") if core.compiled_lexbor_walk is not None else None
pytestmark = pytest.mark.skipif(_core is None, reason=f"no compiled core here: {core.describe()}")

_ALL = range(0x110000)
_MODEL_CJK = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))


def _second_starters() -> set[str]:
    """Every starter that composes with the character before it: the second characters (combining class 0) of
    the canonical decompositions of two characters, and the Hangul vowel and trailing jamo (composed by rule)."""
    out = {chr(c) for c in range(0x1161, 0x1176)} | {chr(c) for c in range(0x11A8, 0x11C3)}
    for c in _ALL:
        d = unicodedata.decomposition(chr(c))
        if d and not d.startswith("<"):
            parts = d.split()
            if len(parts) == 2 and unicodedata.combining(chr(int(parts[1], 16))) == 0:
                out.add(chr(int(parts[1], 16)))
    return out


def test_flags_are_strs_own_tests_for_every_code_point():
    """``char_flags`` is str.isspace (1), str.isalnum (2) and str.isdecimal (4) of every code point."""
    flags = _core.char_flags
    for c in _ALL:
        ch = chr(c)
        expected = (1 if ch.isspace() else 0) | (2 if ch.isalnum() else 0) | (4 if ch.isdecimal() else 0)
        assert flags(c) == expected, hex(c)


def test_fast_forms_are_the_normal_forms_and_cannot_compose_for_every_code_point():
    """A code point's fast form is its NFKC + casefold form with every character that is not a letter or digit a
    space; a code point with one begins its NFKD with a starter that composes with nothing before it, so
    normalising a text of such characters is normalising each one (no reordering, no composition across them).
    The C table gives the same forms as the function that fills it."""
    second = _second_starters()
    assert all(unicodedata.category(s)[0] in "ML" for s in second)  # marks and jamo
    accepted: list[str] = []
    forms: list[str] = []
    for c in _ALL:
        ch = chr(c)
        form = _core.fast_form(c)
        if c < 0x80 or form is None:
            continue
        normal = unicodedata.normalize("NFKC", ch).casefold()
        assert form == "".join(x if x.isalnum() else " " for x in normal), hex(c)
        first = unicodedata.normalize("NFKD", ch)[0]
        assert unicodedata.combining(first) == 0 and first not in second, hex(c)
        if unicodedata.category(ch) != "Cn":
            accepted.append(ch)
            forms.append(form)
    assert len(accepted) > 100_000  # letters of every script, punctuation, symbols, CJK ideographs
    for i in range(0, len(accepted), 4096):
        chunk = "\u0301" + "".join(accepted[i : i + 4096])  # one character outside the fast form: the general path
        assert _core.fast_text(chunk) is None
        assert _core.fast_text(chunk[1:]) == "".join(forms[i : i + 4096])
    for ch in ("\u0301", "\u0338", "\u3099", "\u1161", "\u11a8", "\u0b3e", "\u3164", "\ud800"):
        assert _core.fast_form(ord(ch)) is None, ch  # marks, vowel and trailing jamo, surrogates
    assert [_core.fast_form(ord(c)) for c in "\u00e9\u00df\u0130\u00b5\uf900\u2122\u00a0\u00bd\ufe0e"] == [
        "\u00e9", "ss", "i ", "\u03bc", "\u8c48", "tm", " ", "1 2", " "
    ]  # fmt: skip


_TYPOGRAPHIC = (
    "\ufe0e\ufe0f\u00a0\u2002\u2003\u2009\u200a\u202f\u205f\u3000"  # spaces
    "\u2018\u2019\u201a\u201c\u201d\u201e\u00ab\u00bb\u2039\u203a"  # quotes
    "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"  # dashes
    "\u2190\u2192\u21d2\u2194\u00b6\u00a7\u2026\u2022\u00b7\u2020\u2021\u2122\u00a9\u00ae\u00b0\u2032\u2033"
    "\u00bd\u00b2\u2460\u2153\u2260\u2264\u00d7\u00f7\u20ac\u00a3\u00a5\u2116\u2103\ufb01\uff21\uff4d\uff10"
    "\uff0c\u3001\u3002\uff08\uff09\u300a\u300b\u2160\u24d0\u3250\u2474\u33a1"  # fullwidth, CJK punctuation, letterlike
)
_LETTERS = "\u00e9\u00c9\u00df\u0130\u00b5\u03c2\u3042\u304c\uac00\u0b47\uf900\ufa0e\u0660\u0436\ufb01"
_GENERAL = "\u0301\u0338\u3099\u1161\u11a8\u0b3e\u3164"
_TEXT = st.text(
    st.sampled_from(
        list("abcXYZ019 _-.,'\n\t") + list(_TYPOGRAPHIC) + list("中文字我们的城市") + list(_LETTERS) + list(_GENERAL)
    ),
    max_size=40,
)


def _words(text: str) -> list[str]:
    """The reference's words of *text* before CJK runs are segmented (features.tokenize's WORD)."""
    return WORD.findall(unicodedata.normalize("NFKC", text).casefold())


@settings(max_examples=2000, deadline=None)
@given(_TEXT)
def test_fast_text_has_the_references_words(text):
    """Wherever the fast form is given, its runs of ASCII letters and digits and of CJK ideographs are the
    reference's words of the text, in order (the general path is taken otherwise)."""
    fast = _core.fast_text(text)
    if fast is None:
        assert any(_core.fast_form(ord(c)) is None for c in text if ord(c) >= 0x80)
        return
    assert WORD.findall(fast) == _words(text)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([1.0, 0.3, 2.5]), _TEXT.map(lambda t: t * 3)), max_size=6),
    st.sampled_from([(200_000, 30_000, 1), (7, 3, 1), (25, 5, 2)]),
)
def test_compiled_pass_over_typographic_text_is_the_references(texts, caps):
    """The compiled pass over text full of no-break spaces, quotes, dashes, arrows, fullwidth and CJK punctuation
    (and some characters that send a text to the general path) gives the reference's fingerprint, sketch and
    feature count, under tiny token and feature caps too."""
    max_tokens, max_features, min_features = caps
    config = FingerprintConfig(max_tokens=max_tokens, max_features=max_features, min_features=min_features)
    page = PageText(texts=tuple(texts), structure=Counter({"d:p": 1.0}))
    with reference_core():
        expected = Fingerprinter(config).fingerprint_page(page)
    fingerprinter = Fingerprinter(config)
    assert fingerprinter.fingerprint_page(page) == expected
    assert fingerprinter.fingerprint_page(page) == expected  # again, from the table's memo


def test_a_long_cjk_run_in_typographic_text_is_segmented_in_slices_as_the_reference():
    """A run of CJK ideographs longer than the segmenter's cache bound, between typographic characters, is
    counted slice by slice as the reference counts it, under a token cap that ends inside it too."""
    text = "\u201c" + "我们的城市中文字" * 700 + "\u201d\u00a0end"
    for max_tokens in (200_000, 1_000):
        config = FingerprintConfig(max_tokens=max_tokens, min_features=1)
        page = PageText(texts=((1.0, text),), structure=Counter())
        with reference_core():
            expected = Fingerprinter(config).fingerprint_page(page)
        assert Fingerprinter(config).fingerprint_page(page) == expected
