"""Hostile pages through the compiled core, each compared with the pure-Python reference's answer in the same
process (``tests/fuzz/fuzz_core.py`` switches the cores): absurd nesting, one huge text node, invalid UTF-8, NUL
bytes, a flood of tiny elements, more distinct words than the feature cap, deep nesting inside tables.
``make sanitize`` runs these under AddressSanitizer and UndefinedBehaviorSanitizer."""

from __future__ import annotations

import itertools
from functools import cache
from typing import Any

import pytest
from fuzz.fuzz_core import Checker, reference_core
from lxml import etree
from test_core import CFG, _extract_both, needs_core

from devsites.pages import EN_ARTICLES, ZH_ARTICLES
from simhash_filter.model import extract as extract_mod

pytestmark = needs_core

WORDS = " ".join(p for a in EN_ARTICLES for p in a.paragraphs).split()
CHINESE = "".join(p for a in ZH_ARTICLES for p in a.paragraphs)
SMALL_CAP = 37  # an element cap that cuts these pages mid-way: the truncated walk


@cache
def _checker() -> Checker:
    return Checker()


def _words(n: int, start: int = 0) -> list[str]:
    return list(itertools.islice(itertools.cycle(WORDS), start, start + n))


def _assert_same(page: bytes | str, *, encoding: str | None = None) -> dict[str, Any]:
    """Both cores give the same fingerprint and features and the same extraction (before the features fold case
    and cap counts), and the compiled walk cut at a small element cap extracts what the event walk does; returns
    the fingerprint's fields (``status``, ``truncated``, ...)."""
    checker = _checker()
    difference = checker.analyze(page, encoding)
    assert difference is None, difference
    fields = checker.last
    difference = checker.walk(page, CFG.max_elements)
    assert difference is None, difference
    reference, compiled = _extract_both(page, SMALL_CAP)
    assert reference == compiled, f"the event walk and the compiled walk differ at max_elements={SMALL_CAP}"
    return fields


def test_100k_deep_nesting_through_the_parser():
    """A page nested 100,000 elements deep (the nesting guard keeps 512 levels, the words below them joined to the
    deepest), words at every level, gives the reference's fingerprint and features, as bytes and as text."""
    words = _words(100_000)
    page = "<html><body>" + "".join(f"<div>{w} " for w in words) + "</div>" * 100_000 + "<p>after</p></body></html>"
    assert _assert_same(page)["status"] == "ok"
    assert _assert_same(page.encode())["status"] == "ok"


def test_20k_deep_tree_walked_without_recursion():
    """A tree 20,000 elements deep, past the parser's 256 levels (built with lxml, which takes quadratic time
    to: 100,000 would take a minute), with a text and a tail at every level and a boilerplate class every 1,000,
    read element by element gives the event walk's extraction, whole and cut at a small cap."""
    root = etree.Element("html")
    el = etree.SubElement(root, "body")
    for i, word in enumerate(_words(20_000)):
        el = etree.SubElement(el, "div", {"class": "sidebar"} if i % 1000 == 999 else {})
        el.text = word
        el.tail = f"tail{i % 97}"
    kwargs = {"dom_decay": CFG.dom_decay, "boilerplate_weight": CFG.boilerplate_weight}
    for cap in (CFG.max_elements, 10_000, SMALL_CAP):
        page = extract_mod.extract(root, max_elements=cap, **kwargs)
        assert page == extract_mod._extract_walk(root, max_elements=cap, **kwargs), cap
        assert page.truncated is (cap < 20_002)


def test_one_4mb_text_node():
    """4 MiB of words in one text node (cut at ``max_bytes``, mid-word) gives the reference's fingerprint and
    says it was truncated."""
    text = " ".join(_words(800_000))[: 4 * 1024 * 1024]
    fields = _assert_same(("<html><body><p>" + text + "</p></body></html>").encode())
    assert fields["status"] == "ok" and fields["truncated"]


@pytest.mark.parametrize(
    "declared",
    [None, "utf-8", "gb18030", "shift_jis"],
    ids=["sniffed", "utf-8", "gb18030", "shift_jis"],
)
def test_invalid_utf8(declared):
    """Lone continuation bytes, truncated and overlong sequences, encoded surrogates and 0xFF bytes in text,
    attribute values and tag names give the reference's answer, sniffed or under a declared encoding."""
    bad = [b"\xff", b"\xfe\xff", b"\x80", b"\xbf\xbf", b"\xc3", b"\xe4\xb8", b"\xf0\x9f\x98", b"\xc0\xaf",
           b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80"]  # fmt: skip
    parts = [b"<html><body>"]
    for i, word in enumerate(_words(400)):
        b = bad[i % len(bad)]
        w = word.encode()
        parts.append(b'<p class="nav' + b + b'">' + w + b + b"</p>" if i % 5 == 0 else w + b + b" ")
        if i % 50 == 0:
            parts.append(b"<d" + b + b"iv>" + CHINESE[i : i + 30].encode() + b"</d" + b + b"iv>")
    parts.append(b"</body></html>")
    page = b"".join(parts)
    assert _assert_same(page, encoding=declared)["status"] == "ok"


def test_nul_bytes():
    """NUL bytes after the first 8 KiB (earlier ones make the page binary) in text, attribute values and tag
    names reach the parser and give the reference's answer, as bytes and as text; early ones give not_html."""
    lead = "<html><body><p>" + " ".join(_words(2_000)) + "</p>"
    assert len(lead) > 8192
    tail = "".join(
        f'<p class="a\x00nav">{w}\x00{w}</p><di\x00v id="\x00">\x00x</div>\x00' for w in _words(500, start=2_000)
    )
    page = lead + tail + "</body></html>"
    for variant in (page, page.encode()):
        assert _assert_same(variant)["status"] == "ok"
    early = "<p>\x00</p>" + page
    for variant in (early, early.encode()):
        assert _assert_same(variant)["status"] == "not_html"


def test_100k_tiny_elements():
    """A page of 100,500 one-word elements (more than ``max_elements``) gives the reference's fingerprint and says
    it was truncated."""
    tags = itertools.cycle(["i", "b", "span", "a", "li", "em"])
    body = "".join(f"<{t}>{w}</{t}>" for t, w in zip(tags, _words(100_500), strict=False))
    fields = _assert_same(f"<html><body>{body}</body></html>")
    assert fields["status"] == "ok" and fields["truncated"]


def test_more_distinct_words_than_max_features():
    """40,000 distinct made-up words and 3,000 distinct Chinese characters, more than ``max_features``, give the
    reference's features: the same first-met words kept, with the same weights."""
    syllables = "ka lo mi nu pe ra si to vu we xa yo za bi co de fa gu hi jo".split()
    words = ["".join(t) for t in itertools.islice(itertools.product(syllables, repeat=4), 40_000)]
    chinese = "".join(chr(0x4E00 + i * 7) for i in range(3_000))
    page = "<html><body><p>" + " ".join(words) + "</p><p>" + chinese + "</p></body></html>"
    assert len(words) + len(chinese) > CFG.max_features
    assert _assert_same(page)["status"] == "ok"


def test_deep_nesting_inside_a_table():
    """Tables nested 50,000 deep, 100,000 divs inside one table cell, and 30,000 unclosed rows of lists and
    divs, with a word in every cell, after a paragraph of text, give the reference's answer."""
    words = _words(100_000)
    tables = "<table>" + "".join(f"<tr><td>{w} <table>" for w in words[:50_000]) + "</table>" * 50_001
    divs = "<table><tr><td>start " + "".join(f"<div>{w} " for w in words) + "</div>" * 100_000 + "</td></tr></table>"
    mixed = "<table>" + "".join(f"<tr><td><ul><li>{w}<div>" for w in words[:30_000]) + "</table>"
    before = "<p>" + " ".join(_words(150, start=7)) + "</p>"
    for page in (tables, divs, mixed):
        assert _assert_same(f"<html><body>{before}{page}<p>after the table</p></body></html>")["status"] == "ok"


def test_the_checker_sees_a_difference(monkeypatch):
    """The comparison is not vacuous: the reference runs with no compiled function in reach, and a compiled walk
    that reads one paragraph wrong is reported, in the fingerprint and in the extraction."""
    page = "<html><body>" + "".join(f"<p>{w}</p>" for w in _words(60)) + "</body></html>"
    walk = extract_mod.compiled_lexbor_walk_split
    assert walk is not None
    with reference_core():
        assert extract_mod.compiled_lexbor_walk_split is None
    assert extract_mod.compiled_lexbor_walk_split is walk

    def misreading(data, *args):
        return walk(data.replace(b"<p>", b"<p>misread ", 1), *args)  # only the compiled core reads it wrong

    checker = Checker()
    monkeypatch.setattr(extract_mod, "compiled_lexbor_walk_split", misreading)
    assert checker.analyze(page) is not None
    assert "texts" in (checker.walk(page, CFG.max_elements) or "")
    monkeypatch.undo()
    assert checker.analyze(page) is None
