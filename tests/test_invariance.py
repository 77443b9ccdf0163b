"""Changes to a page's source that a browser does not show leave its fingerprint where it was
(``benchmarks/accuracy/invariance.py`` measures the same transformations on real pages)."""

from __future__ import annotations

import pytest

from benchmarks.accuracy import invariance
from devsites import pages as p
from simhash_filter import fingerprint

PAGES = {
    "en-gazette": p.gazette(p.RAINWATER, ads=True, counter=p.COUNTER_A),
    "en-ledger": p.ledger(p.BACKUPS),
    "zh-portal": p.portal(p.LIBRARY, ads=True, counter=p.COUNTER_B),
    "zh-forum": p.forum(p.TEA_GARDEN),
}


#: (page, transformation) where the transformation changes the page's source (Chinese re-wrapping does
#: nothing to an English page).
CASES = [
    (page, name)
    for page, html in sorted(PAGES.items())
    for name, transform in sorted(invariance.TRANSFORMS.items())
    if transform(html) != html
]


def test_every_transformation_changes_a_page_in_each_language():
    """No transformation is a no-op on both the English and the Chinese fixture pages."""
    for name in invariance.TRANSFORMS:
        assert {page[:2] for page, n in CASES if n == name} >= {"en"} or name == "rewrap-cjk"
        assert {page[:2] for page, n in CASES if n == name} >= {"zh"} or name == "rewrap"


@pytest.mark.parametrize(("page", "name"), CASES)
def test_invisible_changes_keep_the_fingerprint(page, name):
    """Re-wrapped (also between Chinese characters), minified, re-indented, attributes reordered, entities,
    another charset, comments: the same fingerprint (distance 0)."""
    html = PAGES[page]
    assert fingerprint(invariance.TRANSFORMS[name](html)).value == fingerprint(html).value


def test_the_transformations_change_no_visible_text():
    """Each transformation keeps the text a browser would show (whitespace collapsed, CJK line breaks
    joined), so a moved fingerprint would be the model's fault."""
    from lxml import html as lxml_html

    def visible(source: str | bytes) -> str:
        root = lxml_html.document_fromstring(source)
        for bad in root.xpath("//script|//style|//head"):
            bad.drop_tree()
        text = " ".join(root.text_content().split())
        return invariance._CJK_PAIR.sub(r"\1", text).replace(" ", "")

    for html in PAGES.values():
        for transform in invariance.TRANSFORMS.values():
            assert visible(transform(html)) == visible(html)
