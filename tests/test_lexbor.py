"""The model's parser (model.lexbor): the compiled walk over the Lexbor built into the core reads what the
pure-Python reference reads through selectolax's node API on the same Lexbor, on the test pages, hostile pages and
a sample of the public pages (all of them: ``benchmarks/golden.py``), whole and cut at a small element cap."""

from __future__ import annotations

import gzip
import json
from itertools import islice
from pathlib import Path

import pytest

from devsites.pages import determinism_pages, distinct_pairs, near_duplicate_pairs
from simhash_filter.model import core
from simhash_filter.model.extract import BOILERPLATE_TAGS, _boilerplate_words, _class_words
from simhash_filter.model.html import NotHtml, page_bytes
from simhash_filter.model.lexbor import walk
from simhash_filter.model.nesting import guard

needs_core = pytest.mark.skipif(core.compiled_lexbor_walk is None, reason=f"no compiled core here: {core.describe()}")
PUBLIC_PAGES = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "neardup-public" / "pages.jsonl.gz"


def _odd_pages() -> list[str | bytes]:
    return [
        "<p>a<!-- comment -->tail<?pi x?>after<b>bold</b>b-tail</p>text after",
        '<nav class="menu">Home</nav><div id="main-content" role="main">Body</div><aside class="sidebar">x</aside>',
        '<div class="" id="" role="">empty attributes</div><div class="caf\u00e9 nav">accent</div><div role>r</div>',
        "<table><tr><td>cell<td>two</table><p>unclosed<p>next",
        "<svg><text>vector</text></svg>tail<math><mi>x</mi></math><select><option>o</select>after",
        "<script>var a = '<p>';</script>x<style>p{}</style>y<noscript>n</noscript>z<template><p>t</p></template>w",
        b"<p>caf\xe9 \xff\xfe bytes\x00 with NUL</p>",
        "<ruby>漢<rt>かん</rt>字</ruby>中文\n段落<my-element class=Widget>custom</my-element><P CLASS=NavBar>up</P>",
        "<div>" * 600 + "deep" + "</div>" * 600 + "after",
        "<b><i>" * 300 + "formatting" + "<p>" * 50 + "paragraphs",
        "<div class='x' class='nav' id=a id=sidebar>first of duplicates wins</div>",
        "",
        "<html><head><title>only a title</title></head></html>",
    ]


def _pages() -> list[str | bytes]:
    pairs = [*near_duplicate_pairs().values(), *distinct_pairs().values()]
    pages = [*determinism_pages(), *(p for pair in pairs for p in pair), *_odd_pages()]
    if PUBLIC_PAGES.exists():
        with gzip.open(PUBLIC_PAGES, "rt", encoding="utf-8") as f:
            pages += [json.loads(line)["html"] for line in islice(f, 0, 5_000, 50)]
    return pages


@needs_core
@pytest.mark.parametrize("max_elements", [100_000, 7])
def test_compiled_walk_reads_what_the_reference_reads(max_elements: int):
    """The compiled walk's tuple (elements, tags, parents, depths, subtree ends, boilerplate candidates, text
    segments and their owners, truncation) equals the reference's on every page."""
    words = _class_words()
    for page in _pages():
        try:
            data = guard(page_bytes(page)[0])
        except NotHtml:
            continue
        reference = walk(data, max_elements, BOILERPLATE_TAGS, _boilerplate_words)
        assert core.compiled_lexbor_walk(data, max_elements, BOILERPLATE_TAGS, _boilerplate_words, words) == reference


def test_the_walk_reads_a_page_as_a_browser_builds_it():
    """The tree is the HTML standard's (a paragraph closed by a div; the tbody it implies walked through), invisible
    elements and comments are passed over with their content, the text around them joined, and class, id and role
    words mark boilerplate candidates."""
    page = (
        b"<table><tr><td>cell</td></tr></table><p>para<div class='sidebar'>side</div>"
        b"<p>one<!-- c --> two<script>x</script> three</p>"
    )
    tag_of, tid, parents, depths, ends, candidates, owners, texts, truncated = walk(
        page, 100, BOILERPLATE_TAGS, _boilerplate_words
    )
    assert [tag_of[t] for t in tid] == ["html", "body", "table", "tr", "td", "p", "div", "p"]
    assert parents == [-1, 0, 1, 2, 3, 1, 1, 1] and depths == [0, 1, 2, 3, 4, 2, 2, 2]
    assert ends == [7, 7, 4, 4, 4, 5, 6, 7] and candidates == [6] and not truncated
    assert list(zip(owners, texts, strict=True)) == [(4, "cell"), (5, "para"), (6, "side"), (7, "one two three")]


@pytest.mark.parametrize("compiled", [False, True])
def test_a_table_reads_the_same_with_or_without_its_tbody(compiled: bool):
    """tbody is walked through: a table written with ``<tbody>`` (one, or several, or an empty one) reads as the one
    without it, text between its parts joined as in one body."""
    if compiled and core.compiled_lexbor_walk is None:
        pytest.skip(f"no compiled core here: {core.describe()}")
    rows = [f"<tr><td>cell {i}</td><td>more {i}</td></tr>" for i in range(4)]
    plain = f"<p>before</p><table>{''.join(rows)}</table><p>after</p>".encode()
    parts = f"<tbody>{''.join(rows[:2])}</tbody><tbody></tbody> <tbody>{''.join(rows[2:])}</tbody>"
    written = f"<p>before</p><table>{parts}</table><p>after</p>".encode()
    args = (100, BOILERPLATE_TAGS, _boilerplate_words)

    def read(page: bytes):
        return core.compiled_lexbor_walk(page, *args, _class_words()) if compiled else walk(page, *args)

    assert read(written) == read(plain)
