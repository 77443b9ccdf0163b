"""Tests of simhash_filter.model.explain: which features pushed two fingerprints apart."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_filter import FingerprintConfig, Status, fingerprint, hamming
from simhash_filter.model.explain import Explanation, explain

CHANGED_WORDS = ("ninety", "fortnight", "hundred", "week", "views", "1234", "spring", "sale", "garden", "tools")


def test_identical_pages_have_no_differences(pages):
    """The same page twice gives distance 0, nothing listed, and similarity 1."""
    e = explain(pages["en_article"], pages["en_article"])
    assert e.distance == 0
    assert e.text == () and e.structure == ()
    assert e.text_difference == e.structure_difference == 0.0
    assert e.text_share == e.structure_share == 0.0
    assert e.weighted_jaccard == pytest.approx(1.0)


def test_distance_matches_the_fingerprints(pages):
    """The explanation carries the same fingerprints and distance as fingerprint() gives."""
    e = explain(pages["en_article"], pages["en_other"])
    a, b = fingerprint(pages["en_article"]), fingerprint(pages["en_other"])
    assert (e.a.value, e.b.value) == (a.value, b.value)
    assert e.distance == hamming(a.value, b.value)


def test_changed_sentence_is_listed(pages):
    """The words of the changed sentence, the ad and the counter are among the listed text features."""
    e = explain(pages["en_article"], pages["en_edited"], top=10)
    listed = [d.name for d in e.text]
    assert any(part in word for name in listed for part in name.split() if len(part) >= 3 for word in CHANGED_WORDS), (
        listed
    )


def test_chinese_edit_is_listed(pages):
    """A changed Chinese phrase shows up as listed text features (segmented words, not characters only)."""
    e = explain(pages["zh_article"], pages["zh_edited"], top=20)
    assert e.text
    assert all(d.difference > 0 for d in e.text)


def test_one_sided_features_name_their_page(pages):
    """Features present in one page only report which one, with weight 0 in the other."""
    e = explain(pages["en_article"], pages["en_other"], ratio=1e9)
    assert e.text
    for d in (*e.text, *e.structure):
        assert d.only_in in ("a", "b")
        assert (d.weight_a == 0.0) != (d.weight_b == 0.0)


def test_listing_is_sorted_and_limited(pages):
    """At most ``top`` features per kind are listed, largest difference first."""
    e = explain(pages["en_article"], pages["en_copy"], top=4)
    for diffs in (e.text, e.structure):
        assert len(diffs) <= 4
        assert [d.difference for d in diffs] == sorted((d.difference for d in diffs), reverse=True)


def test_other_article_in_same_template_differs_by_text(pages):
    """Two articles in the same template differ almost only by text features."""
    e = explain(pages["en_article"], pages["en_other"])
    assert e.text_share > 0.9
    assert e.text_share + e.structure_share == pytest.approx(1.0)


def test_copy_in_another_template_differs_by_structure(pages):
    """The same article in another template lists structure features and a real structure share."""
    e = explain(pages["en_article"], pages["en_copy"])
    assert e.structure
    assert e.structure_difference > 0
    assert e.structure_share > explain(pages["en_article"], pages["en_other"]).structure_share


def test_structure_weight_zero_has_no_structure(pages):
    """With structure_weight 0 nothing structural is compared."""
    e = explain(pages["en_article"], pages["en_copy"], config=FingerprintConfig(structure_weight=0.0))
    assert e.structure == ()
    assert e.structure_share == 0.0


def test_page_without_fingerprint_is_explained(pages):
    """A page that cannot be fingerprinted keeps its status; the other page's features are one-sided."""
    e = explain(pages["blank"], pages["en_article"])
    assert e.a.value is None and e.a.status is Status.EMPTY
    assert e.distance is None
    assert e.text and all(d.only_in == "b" for d in e.text)
    image = explain(pages["image_only"], pages["en_article"])
    assert image.a.status is Status.TOO_FEW_FEATURES


@pytest.mark.parametrize(("kwargs", "message"), [({"top": -1}, "top"), ({"ratio": 0.5}, "ratio")])
def test_bad_arguments_are_rejected(pages, kwargs, message):
    """Invalid ``top`` or ``ratio`` raise ValueError naming the argument."""
    with pytest.raises(ValueError, match=message):
        explain(pages["en_article"], pages["en_other"], **kwargs)


WORDS = st.sampled_from(
    "river bridge market lantern harvest winter station teacher orchard ferry council museum "
    "bakery storm valley archive garden harbour festival timber".split()
)


@settings(max_examples=25, deadline=None)
@given(st.lists(WORDS, min_size=0, max_size=60), st.lists(WORDS, min_size=0, max_size=60))
def test_shares_and_similarity_are_bounded(make_page, words_a, words_b):
    """Shares are in [0, 1] and sum to 1 (or are both 0); weighted Jaccard is in [0, 1]."""
    e: Explanation = explain(make_page("A", [" ".join(words_a)]), make_page("B", [" ".join(words_b)]))
    assert 0.0 <= e.text_share <= 1.0 and 0.0 <= e.structure_share <= 1.0
    total = e.text_share + e.structure_share
    assert total == pytest.approx(1.0) or total == 0.0
    assert 0.0 <= e.weighted_jaccard <= 1.0 + 1e-9
