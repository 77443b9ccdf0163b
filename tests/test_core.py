"""The compiled core (``simhash_filter.model._core``) against the pure-Python reference: the same extraction, the
same sketches and the same fingerprints on every page, hostile ones included; which one runs is said by
``--version``, and a build without the extension still works."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import lxml.html
import pytest
import xxhash
from fuzz.fuzz_core import reference_core  # every compiled_* function of the model set aside in this process
from hypothesis import given, settings
from hypothesis import strategies as st

from devsites.pages import determinism_pages, distinct_pairs, near_duplicate_pairs
from simhash_filter import DEFAULTS
from simhash_filter.model import core
from simhash_filter.model import extract as extract_mod
from simhash_filter.model import sketch as sketch_mod
from simhash_filter.model.config import FingerprintConfig
from simhash_filter.model.features import Features
from simhash_filter.model.fingerprint import Fingerprinter
from simhash_filter.model.html import NotHtml, page_bytes

CFG = DEFAULTS.fingerprint
UNDER_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

needs_core = pytest.mark.skipif(core.compiled_lexbor_walk is None, reason=f"no compiled core here: {core.describe()}")


def _hostile_pages() -> list[str | bytes]:
    deep = "<div>" * 20_000 + "deep text" + "</div>" * 20_000
    return [
        deep,
        "<html><body>" + "word " * 400_000 + "</body></html>",  # one 2 MB text node
        b"<html><body><p>caf\xe9 \xff\xfe bytes\x00 with NUL</p></body></html>",
        "<p>a<!-- comment -->tail<?pi x?>after<b>bold</b>b-tail</p>text after",
        '<html><body><nav class="menu">Home About</nav><div id="main-content" role="main">Body text '
        'here</div><aside class="sidebar">links</aside><footer>foot</footer></body></html>',
        "<table><tr><td>cell<td>two</table><p>unclosed<p>next",
        '<div class="" id="" role="">empty attributes</div><svg><text>vector</text></svg>',
        "<html><body>" + "".join(f"<p>para {i} " + "x" * (i % 7) + "</p>" for i in range(60_000)) + "</body></html>",
        "",
        "   \n\t ",
        "<html><head><title>only a title</title></head></html>",
        "<ruby>漢<rt>かん</rt>字<rt>じ</rt></ruby>中文\n段落\n换行",
    ]


def _pages() -> list[str | bytes]:
    pairs = [*near_duplicate_pairs().values(), *distinct_pairs().values()]
    return [*determinism_pages(), *(p for pair in pairs for p in pair), *_hostile_pages()]


def _extract_both(page: str | bytes, max_elements: int):
    try:
        data = page_bytes(page, None, CFG.max_bytes)[0]
    except NotHtml:
        return None, None
    if not data:
        return None, None
    kwargs = {"dom_decay": CFG.dom_decay, "boilerplate_weight": CFG.boilerplate_weight}
    with reference_core():
        reference = extract_mod.extract_page(data, max_elements=max_elements, **kwargs)
    compiled = extract_mod.extract_page(data, max_elements=max_elements, **kwargs)
    return reference, compiled


@needs_core
@pytest.mark.parametrize("max_elements", [CFG.max_elements, 7])
def test_compiled_walk_extracts_what_the_reference_walk_extracts(max_elements):
    """On the test pages and hostile ones (deep nesting, 2 MB text nodes, NUL and invalid bytes, comments and
    PIs, 60k elements), at the default element cap and at a tiny one, the compiled guard, walk and split give the
    reference's page text and structure."""
    assert core.compiled_lexbor_walk_split is not None
    for page in _pages():
        reference, compiled = _extract_both(page, max_elements)
        assert reference == compiled
        if reference is not None:  # the same dict order too: the structure's norm sums in that order
            assert list(reference.structure.items()) == list(compiled.structure.items())


_PIECES = st.sampled_from(
    [
        "<p>", "</p>", "<div>", "</div>", '<div class="nav">', '<div id="sidebar">', "<nav>", "</nav>", "<ul><li>",
        "</li></ul>", '<a href="/x">', "</a>", "<table><tr><td>", "</td><td>", "</td></tr></table>", "<footer>",
        "<main>", "</main>", "<br>", "<span>", "</span>", "Visited 1,234 times", "updated 2024-05-06 12:30",
        "river market bridge council ", "ferry orchard school ", "中文段落\n换行文字", "汉字 12 个",
        "\u00a0 \u2003 ", "\n\n  ", "x", "１２３ full width", "١٢٣ arabic digits", "ⅷ numeral", "_under_score",
    ]
)  # fmt: skip


@needs_core
@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, min_size=1, max_size=60), st.sampled_from([0.45, 0.7, 1.0]), st.sampled_from([0.1, 0.5]))
def test_compiled_split_weights_what_the_reference_weights(pieces, dom_decay, boilerplate_weight):
    """On random pages made of navigation, link lists, tables, counters, CJK text with line breaks, Unicode
    spaces and digits of other scripts, the compiled split gives the reference's texts and structure exactly."""
    data = "".join(pieces).encode("utf-8")
    kwargs = {"dom_decay": dom_decay, "boilerplate_weight": boilerplate_weight, "max_elements": CFG.max_elements}
    with reference_core():
        reference = extract_mod.extract_page(data, **kwargs)
    compiled = extract_mod.extract_page(data, **kwargs)
    assert reference == compiled
    assert list(reference.structure.items()) == list(compiled.structure.items())


@needs_core
def test_compiled_xxh64_is_the_xxhash_packages():
    """The core's own XXH64 gives the ``xxhash`` package's digest for every length around the 4/8/32-byte steps,
    ASCII, accented, CJK and astral characters, NUL bytes, and random seeds."""
    from simhash_filter.model import _core

    rng = random.Random(7)
    for n in [*range(0, 80), 255, 256, 1000, 4097]:
        for _ in range(8):
            text = "".join(rng.choice("abcé中😀 \x00") for _ in range(n))
            seed = rng.getrandbits(64)
            assert _core.xxh64_intdigest(text, seed) == xxhash.xxh64_intdigest(text.encode(), seed), (n, seed)


@needs_core
@settings(max_examples=300, deadline=None)
@given(
    words=st.dictionaries(
        st.text(alphabet="abcdefghé中文字", min_size=1, max_size=12),
        st.floats(min_value=0.0, max_value=40.0, allow_nan=False) | st.sampled_from([0.125, 0.375, 0.625, 2.5]),
        max_size=300,
    ),
    shape=st.sampled_from([(512, 0.25), (64, 0.25), (8, 1.0), (1000, 0.1)]),
)
def test_compiled_sketch_is_the_references(words, shape):
    """The compiled sketch equals the reference bit for bit: weights on the rounding boundaries (half-way copies
    round to even), empty bins densified, any number of bins and any step."""
    bins, step = shape
    assert core.compiled_sketch(words, bins, step, sketch_mod.SEED) == sketch_mod.sketch(words, bins, step)


def _fingerprints(pure: bool) -> list[str]:
    code = (
        "import sys, json; sys.path.insert(0, 'tests'); from test_core import _pages; "
        "from simhash_filter import fingerprint; "
        "print(json.dumps([[f.hex, f.sketch.hex() if f.sketch else None, str(f.status)] "
        "for f in map(fingerprint, _pages())]))"
    )
    env = {**os.environ, core.PURE_ENV: "1" if pure else "0"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=True)
    return proc.stdout


_WORDS = st.text(st.sampled_from("abcdeé中文字ö1 "), min_size=1, max_size=12).filter(lambda w: w.strip() == w)


@needs_core
@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(_WORDS, st.floats(0.001, 50.0), min_size=1, max_size=40),
    st.dictionaries(st.text(min_size=1, max_size=20), st.floats(0.001, 5.0), max_size=10),
    st.sampled_from([(4, 2), (0, 0), (3, 1)]),
)
def test_compiled_vote_is_the_references(text, structure, ngram_sizes):
    """The compiled vote gives the reference's simhash for any words (CJK, accents, word n-grams with spaces,
    long words whose counts pass 255 in a column) and structure names, at several n-gram sizes."""
    text = {**text, "z" * 700: 2.0}  # 700 n-grams of one word: columns counted past a byte
    config = FingerprintConfig(char_ngram=ngram_sizes[0], cjk_char_ngram=ngram_sizes[1])
    feats = Features(text=text, structure=structure)
    with reference_core():
        expected = Fingerprinter(config).fingerprint_features(feats)
    compiled = Fingerprinter(config)
    assert compiled.fingerprint_features(feats) == expected
    assert compiled.fingerprint_features(feats) == expected  # from the memo now


_TEXTS = st.lists(
    st.tuples(
        st.sampled_from([1.0, 0.5, 0.05, 0.333]),
        st.lists(
            st.sampled_from(
                [
                    "colour", "Colours", "organise", "theatre", "the", "Harbour", "x7", "2024", "B2B", "ÉCOLE",
                    "naïve", "ﬁle", "中文字符", "我们的城市", "Straße", "İstanbul", "_id", "a-b", "  ", "\n", ".",
                ]
            ),
            max_size=40,
        ).map(" ".join),
    ),
    max_size=6,
)  # fmt: skip


@needs_core
@settings(max_examples=300, deadline=None)
@given(_TEXTS, st.sampled_from([(200_000, 30_000), (7, 3), (25, 5)]))
def test_compiled_text_features_are_the_references(texts, caps):
    """Words, their American spellings, counts, IDF weights and n-gram counts of texts in English, other Latin
    scripts and Chinese, under the default caps and tiny token and feature caps, are the reference's exactly."""
    from simhash_filter.model.extract import PageText
    from simhash_filter.model.features import _text_features

    config = FingerprintConfig(max_tokens=caps[0], max_features=caps[1], min_features=1)
    page = PageText(texts=tuple(texts))
    with reference_core():
        expected = _text_features(page, config)
    got = _text_features(page, config)
    assert got == expected
    assert list(got[0]) == list(expected[0])


@needs_core
def test_same_fingerprints_and_sketches_compiled_or_not():
    """Whole fingerprints and sketches of every test page are bit-identical with and without the compiled core
    (each in its own process, as a user would run them)."""
    assert _fingerprints(pure=False) == _fingerprints(pure=True)


def test_the_environment_selects_the_pure_python_core():
    """``SIMHASH_FILTER_PURE_PYTHON=1`` runs the reference, and ``--version`` says which core runs."""
    env = {**os.environ, core.PURE_ENV: "1"}
    out = subprocess.run(
        [sys.executable, "-m", "simhash_filter", "--version"], env=env, capture_output=True, text=True, check=True
    ).stdout
    out = " ".join(out.split())  # argparse wraps the line at the terminal's width
    assert f"pure-Python core ({core.PURE_ENV} is set)" in out
    assert DEFAULTS.fingerprint.model_id() in out


@pytest.mark.skipif(bool(os.environ.get(core.PURE_ENV)), reason=f"{core.PURE_ENV} is set")
def test_version_names_the_core_in_use():
    """``--version`` names the core this install runs: compiled where it was built."""
    out = subprocess.run(
        [sys.executable, "-m", "simhash_filter", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert core.describe() in " ".join(out.split())


@pytest.mark.skipif(not UNDER_CI, reason="CI builds the compiled core; a local install may lack a compiler")
def test_ci_runs_the_compiled_core():
    """Under CI the package was installed with a compiler at hand: the compiled core must have been built."""
    if os.environ.get(core.PURE_ENV, "") not in ("", "0"):
        pytest.skip(f"{core.PURE_ENV} is set")
    assert core.compiled_lexbor_walk is not None, core.describe()


def test_a_missing_extension_falls_back_with_one_warning(tmp_path):
    """When the extension cannot be imported the package says so once and fingerprints with the reference."""
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text(
        "import sys\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'simhash_filter.model._core':\n"
        "            raise ImportError('blocked for the test')\n"
        "sys.meta_path.insert(0, _Block())\n",
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if k != core.PURE_ENV}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    code = (
        "import logging; logging.basicConfig(); from simhash_filter import fingerprint; "
        "from simhash_filter.model import core; "
        "print(core.describe()); print(fingerprint('<p>' + ' '.join(f'word{i} text' for i in range(40)) + '</p>').hex)"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "compiled core not available: blocked for the test" in proc.stdout
    assert proc.stderr.count("the compiled core is not available") == 1
    assert len(proc.stdout.splitlines()[-1]) == 16


def test_walk_over_a_real_tree_gives_parents_before_children():
    """Sanity of either walk: parents precede children, subtree ends enclose them (the lists _split relies on)."""
    root = lxml.html.document_fromstring("<html><body><div><p>a</p><p>b</p></div><span>c</span></body></html>")
    kwargs = {"dom_decay": CFG.dom_decay, "boilerplate_weight": CFG.boilerplate_weight, "max_elements": 50}
    page = extract_mod.extract(root, **kwargs)
    assert page.elements == 6
    assert [t for _, t in page.texts]


@needs_core
def test_compiled_word_table_spells_and_values_words_as_the_reference():
    """The word table's American spellings (irregular words, then the suffix rules in C) and its IDF powers and
    n-gram counts are the reference's for the 2,000 commonest English words, the same words under every suffix
    a spelling rule knows, Chinese words and words of other scripts (which it leaves to the reference: None)."""
    import wordfreq

    from simhash_filter.model.features import word_values
    from simhash_filter.model.spelling import american

    common = [w for w in wordfreq.top_n_list("en", 2_000) if w.isalnum()]
    suffixes = ["ise", "ised", "isations", "yse", "ysing", "our", "ours", "ourable", "ogue", "ogues", "tre", "bres",
                "elled", "alling", "iller", "s"]  # fmt: skip
    words = [*common, *(w + s for w in common[::5] for s in suffixes), "grey", "licences", "ageing", "x7", "b2b"]
    words += ["中文", "我们的城市", "字", "café", "straße", "ﬁle", "a" * 70 + "ise", "ab" * 40 + "elled"]
    fingerprinter = Fingerprinter(FingerprintConfig())
    got = fingerprinter._words.describe(words)
    expected = word_values(words, fingerprinter.config)
    for word, found, value in zip(words, got, expected, strict=True):
        if found is None:  # the reference computes it
            assert not word.isascii() and not all("\u3400" <= c <= "\u9fff" for c in word), word
            continue
        assert found == (american(word), *value), word
    assert [got[words.index(w)] for w in ("café", "straße", "ﬁle")] == [None] * 3


@needs_core
@settings(max_examples=80, deadline=None)
@given(
    _TEXTS,
    st.dictionaries(st.sampled_from(["d:p", "d:div/p", "t:a", "x"]), st.floats(0.01, 50), max_size=4),
    st.sampled_from([(200_000, 30_000, 8, 0.05), (7, 3, 1, 0.05), (25, 5, 2, 0.3), (200_000, 30_000, 1, 0.0)]),
)
def test_compiled_page_fingerprint_is_the_references(texts, structure, caps):
    """The one compiled pass from a page's text segments and structure to its fingerprint, sketch and feature
    count gives what the reference's features, vote and sketch give, under tiny token and feature caps, a
    minimum of features to reach and structure weights from none to 0.3."""
    from collections import Counter

    from simhash_filter.model.extract import PageText

    max_tokens, max_features, min_features, structure_weight = caps
    config = FingerprintConfig(max_tokens=max_tokens, max_features=max_features, min_features=min_features,
                               structure_weight=structure_weight)  # fmt: skip
    page = PageText(texts=tuple(texts), structure=Counter(structure))
    with reference_core():
        expected = Fingerprinter(config).fingerprint_page(page)
    fingerprinter = Fingerprinter(config)
    assert fingerprinter._words is not None
    assert fingerprinter.fingerprint_page(page) == expected
    assert fingerprinter.fingerprint_page(page) == expected  # again, from the table's memo


_PROSE_WORDS = [
    "the", "of", "a", "and", "in", "der", "le", "的", "了", "我们", "council", "harbour", "river", "bridge", "opened",
    "school", "market", "Colour", "naïve", "ﬁle", "Straße", "x7", "2024", "中文字符", "城市", "e\u0301", "\u00a0",
    "\u3000", "\t", "\n",
]  # fmt: skip
_SENTENCE_ENDS = [" ", ". ", ".\n", ". \t\n\u3000 ", "\n", " \n ", "。\n", "”\n", "!", ":\n\n", "»"]
_PROSE_TEXT = st.lists(
    st.tuples(st.lists(st.sampled_from(_PROSE_WORDS), min_size=5, max_size=40).map(" ".join),
              st.sampled_from(_SENTENCE_ENDS)).map("".join),
    min_size=3,
    max_size=40,
).map("".join)  # fmt: skip


@needs_core
@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([1.0, 0.5, 0.3, 0.2]), _PROSE_TEXT), min_size=1, max_size=4).map(
        lambda texts: sorted(texts, key=lambda t: -t[0])
    ),
    st.sampled_from([200_000, 40]),
)
def test_compiled_prose_part_is_the_references(texts, max_tokens):
    """The prose part computed in the compiled pass from the word table (lines cut at end marks and line breaks,
    white space runs with line breaks made one space, words read with the text pass's tokenizer, spots hashed from
    the table's UTF-8) is the reference's, on text of function words, CJK particles, typographic and combining
    characters and odd white space, under the default token cap and a tiny one."""
    from collections import Counter

    from simhash_filter.model.extract import PageText
    from simhash_filter.model.prose import PART_BYTES, prose_part
    from simhash_filter.model.sketch import SITE_BYTES

    config = FingerprintConfig(max_tokens=max_tokens, min_features=1)
    page = PageText(texts=tuple(texts), structure=Counter({"c|div>p|1": 1.0}))
    fingerprinter = Fingerprinter(config)
    got = fingerprinter.fingerprint_page(page)
    assert got.sketch is not None and got.prose_bytes == SITE_BYTES + PART_BYTES  # model v7's site part first
    assert got.sketch[-PART_BYTES:] == prose_part(page, max_tokens)


@needs_core
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_compiled_control_byte_count_is_the_references(data):
    """The count of control bytes that tells a binary page from text is the reference's (``bytes.translate``)."""
    from simhash_filter.model import html

    expected = len(data) - len(data.translate(None, html._CONTROL_BYTES))
    assert core.compiled_control_bytes(data, html._CONTROL_TABLE) == expected


_CLASS_PIECES = [
    "nav", "Nav", "menuBar", "sidebar", "side", "bar", "ads", "ad", "content", "Content", "post", "articleBody",
    "comment", "x", "Q", "7", "-", "_", ".", ":", " ", "\t", "\x1c", "é", "\u00a0", "\u212a",
]  # fmt: skip


@needs_core
@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_CLASS_PIECES), max_size=7).map("".join))
def test_compiled_class_words_judge_values_as_the_reference(value):
    """A class, id or role value is judged chrome in C exactly as ``extract._boilerplate_words`` judges it (words
    split at whitespace, ``_ - : .`` and case changes), or left to it (None) when it is not ASCII."""
    judge = extract_mod._class_words()
    got = judge(value)
    if value.isascii():
        assert got == extract_mod._boilerplate_words(value)
    else:
        assert got in (None, extract_mod._boilerplate_words(value))


@needs_core
def test_the_word_table_starts_again_past_its_limit_with_the_same_fingerprints(monkeypatch):
    """A word table over its limit empties itself between pages; the fingerprints and sketches stay the same."""
    from simhash_filter.model import fingerprint as fingerprint_mod

    pages = _pages()[:40]
    unbounded = Fingerprinter()
    expected = [unbounded.fingerprint(page) for page in pages]
    monkeypatch.setattr(fingerprint_mod, "MAX_TABLE_WORDS", 50)
    small = Fingerprinter()
    assert [small.fingerprint(page) for page in pages + pages] == expected + expected
    assert len(small._words) < len(unbounded._words)
