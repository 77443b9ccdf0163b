"""British and American spellings of a word are compared as one word; distinct words never merge."""

from __future__ import annotations

import pytest

from simhash_filter.config import FingerprintConfig
from simhash_filter.index.tables import hamming
from simhash_filter.model.extract import PageText
from simhash_filter.model.features import text_features
from simhash_filter.model.fingerprint import Fingerprinter
from simhash_filter.model.spelling import american, american_words

PAIRS = [
    ("colour", "color"),
    ("colours", "colors"),
    ("behaviour", "behavior"),
    ("favourite", "favorite"),
    ("honourable", "honorable"),
    ("organise", "organize"),
    ("organised", "organized"),
    ("organising", "organizing"),
    ("organisation", "organization"),
    ("customises", "customizes"),
    ("analyse", "analyze"),
    ("dialogue", "dialog"),
    ("catalogues", "catalogs"),
    ("centre", "center"),
    ("metres", "meters"),
    ("fibre", "fiber"),
    ("travelled", "traveled"),
    ("cancelling", "canceling"),
    ("labelled", "labeled"),
    ("licence", "license"),
    ("defence", "defense"),
    ("grey", "gray"),
    ("programme", "program"),
    ("ageing", "aging"),
]


@pytest.mark.parametrize(("british", "us"), PAIRS)
def test_british_and_american_spellings_meet(british: str, us: str) -> None:
    """Both spellings of a word map to the same string."""
    assert american(british) == american(us)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("four", "for"),
        ("hour", "hor"),
        ("your", "yor"),
        ("filled", "filed"),
        ("tour", "tor"),
        ("pour", "por"),
        ("raise", "raze"),
        ("vogue", "vog"),
        ("spelled", "speled"),
        ("smaller", "smaler"),
    ],
)
def test_distinct_words_stay_apart(a: str, b: str) -> None:
    """Short stems are never rewritten, so different words never become one."""
    assert american(a) != american(b)


@pytest.mark.parametrize("word", ["color", "the", "analysis", "crises", "straße", "颜色", "x", "", "release2024"])
def test_other_words_are_left_alone(word: str) -> None:
    """American spellings, words no rule covers, and non-ASCII words come back unchanged."""
    assert american(word) == word


def test_american_words_maps_every_word_in_order() -> None:
    """The memoised list form equals the word-by-word function, repeats included."""
    words = ["colour", "the", "colour", "centre", "four", "colour"]
    assert american_words(words) == [american(w) for w in words]
    assert american_words(words) == [american(w) for w in words]  # from the memo


BRITISH = (
    "The colour dialogue lets you customise the centre of the programme. Organise your favourite "
    "catalogues, analyse the grey labelled fibres and travelled metres; the licence covers every behaviour."
)
AMERICAN = (
    "The color dialog lets you customize the center of the program. Organize your favorite "
    "catalogs, analyze the gray labeled fibers and traveled meters; the license covers every behavior."
)


@pytest.mark.parametrize("ngrams", [(1,), (1, 2)])
def test_text_features_of_both_spellings_are_equal(ngrams: tuple[int, ...]) -> None:
    """A text in British spelling has the features of the same text in American spelling."""
    config = FingerprintConfig(ngrams=ngrams)
    british = text_features(PageText(texts=((1.0, BRITISH),)), config)
    us = text_features(PageText(texts=((1.0, AMERICAN),)), config)
    assert british == us


def test_a_page_in_both_spellings_has_one_fingerprint() -> None:
    """The en-GB and en-US editions of a page fingerprint alike."""
    page = "<html><body><main><h1>Settings</h1><p>{}</p><p>{}</p></main></body></html>"
    fp = Fingerprinter()
    a = fp.fingerprint(page.format(BRITISH, BRITISH.upper()))
    b = fp.fingerprint(page.format(AMERICAN, AMERICAN.upper()))
    assert a.value is not None and b.value is not None
    assert hamming(a.value, b.value) == 0
