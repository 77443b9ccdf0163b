"""The nesting guard (model.nesting and its C twin in the compiled core): the same bytes from both on every input,
ordinary pages left alone, deep ones cut at the depth limit with the text in and after the deep part kept, and the
hostile shapes (deep ``<div>``s, nested lists, the ``<b><i>`` formatting bomb, a ``<select>`` of 10,000 options)
fingerprinted with that text in bounded time, by both cores."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devsites.pages import determinism_pages
from simhash_filter.model import core
from simhash_filter.model.nesting import MAX_DEPTH, guard

ROOT = Path(__file__).resolve().parent.parent

needs_core = pytest.mark.skipif(core.compiled_guard is None, reason=f"no compiled core here: {core.describe()}")

_PIECES = [
    "<div>", "</div>", "<p>", "</p>", "<li>", "<ul>", "</ul>", "<b>", "</b>", "<i>", "<a href='x>y'>", "</a>",
    "<table>", "<td>", "<tr>", "<th>", "<tbody>", "</table>", "<!--", "-->", "--!>", "<!-->", "<!--->", "<script>",
    "</script>", "</SCRIPT\n", "<style class=a>", "</style>", "<textarea>", "</textarea >", "<plaintext>", "text",
    " ", "<option>", "<optgroup>", "<select>", "</select>", '<span class="q', '">', "<!x>", "<?p>", "</ >", "</>",
    "<h1>", "<h2>", "<dd>", "<dt>", "<object>", "</object>", "<svg>", "</svg>", "<br/>", "</br>", "<button>",
    "</button>", "<DIV>", "</Div>", "<x-y>", "</x-y>", "=", "'", '"', "/", ">", "<", "é", "<noscript>",
    "</noscript>", "<html>", "</body>", "<img src=a>", "<a b=c/>", "<section>", "</li>", "</dd>",
]  # fmt: skip


def _soup(rnd: random.Random, n: int) -> bytes:
    return "".join(rnd.choice(_PIECES) for _ in range(n)).encode("utf-8") + rnd.choice([b"", b"\xff", b"<"])


@needs_core
def test_compiled_guard_gives_the_references_bytes_on_tag_soup():
    """On 2,000 random pages of tag soup (comments, raw text, quoted '>', unclosed tags, implied closes) at depth
    limits from 0 to 64 and the model's, the C guard removes exactly what the Python guard removes."""
    rnd = random.Random(36)
    for _ in range(2_000):
        page = _soup(rnd, rnd.randint(0, 1_500))
        for depth in (0, 1, 3, 8, 64, MAX_DEPTH):
            assert core.compiled_guard(page, depth) == guard(page, depth), (depth, page[:300])


@needs_core
@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=400), st.integers(0, 20))
def test_compiled_guard_is_the_reference(pieces: list[str], depth: int):
    """The same, on pages hypothesis builds."""
    page = "".join(pieces).encode("utf-8")
    assert core.compiled_guard(page, depth) == guard(page, depth)


def test_ordinary_pages_pass_unchanged():
    """The test pages are nested far less than the limit: the guard gives them back as they are."""
    for page in determinism_pages():
        data = page if isinstance(page, bytes) else page.encode("utf-8")
        assert guard(data) is data


def test_deep_start_tags_are_cut_and_the_rest_kept():
    """Past the limit the start tags go and everything else stays: the deep text, the end tags, comments holding
    tags, raw text (a script's start tag is never cut: its content would become markup), attribute values with '>'."""
    deep = b"<div>" * 5 + b"<p title='a>b'>deep<!-- <div><div> --><script><div></script></p>" + b"</div>" * 5 + b"after"
    assert guard(deep, 3) == (
        b"<div>" * 3 + b"deep<!-- <div><div> --><script><div></script></p>" + b"</div>" * 5 + b"after"
    )
    # implied closes keep a long list or a run of paragraphs shallow
    items = b"<ul>" + b"<li>item" * 1_000 + b"</ul>" + b"<p>para" * 1_000
    assert guard(items, 3) is items


def test_nothing_deeper_than_the_limit_reaches_the_parser():
    """After the guard, Lexbor's tree of 100,000 nested divs is at most the limit deep (plus html and body)."""
    from simhash_filter.model.lexbor import parse

    page = guard(b"<div>" * 100_000 + b"deep" + b"</div>" * 100_000 + b"<p>after</p>")
    node, depth = parse(page).root, 0
    while node is not None:
        node, depth = node.child, depth + 1
    assert depth <= MAX_DEPTH + 3  # html, body and the text node below the deepest div


SHAPES = {
    "1,000 nested divs": "'<div>' * 1_000 + WORDS + '</div>' * 1_000",
    "100,000 nested divs": "'<div>' * 100_000 + WORDS + '</div>' * 100_000",
    "200,000 nested lists": "'<ul><li>' * 200_000 + WORDS",
    "50,000 unclosed <b><i>": "'<b><i>' * 50_000 + WORDS",
    "10,000 options": "'<select>' + ''.join(f'<option>choice {i}' for i in range(10_000)) + '</select>' + WORDS",
    "200,000 comments": "'<div><!-- c -->' * 200_000 + WORDS",
}

SCRIPT = """
import json, sys
from simhash_filter.model.fingerprint import Fingerprinter
WORDS = " ".join(f"deep{i} harbour words" for i in range(30))
TAIL = "<p>" + " ".join(f"after{i} the deep part" for i in range(30)) + "</p>"
fingerprinter = Fingerprinter()
out = {}
for name, shape in json.loads(sys.argv[1]).items():
    page = "<html><body>" + eval(shape) + TAIL + "</body></html>"
    fp, feats, _ = fingerprinter.inspect(page.encode("utf-8"))
    words = set() if feats is None else set(feats.text)
    out[name] = [str(fp.status), "deep29" in words, "after29" in words]
print(json.dumps(out))
"""


@pytest.mark.parametrize("pure", [False, True], ids=["compiled if built", "reference"])
def test_hostile_shapes_keep_their_text_in_bounded_time(pure: bool):
    """Each shape (the largest 1.1-1.6 MB) is fingerprinted with the words inside the deep part and the text after
    it, well within a bound far above the honest cost (about a tenth of a second each compiled; Lexbor alone
    needed 84 s for the 100,000 divs)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if pure:
        env[core.PURE_ENV] = "1"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(SHAPES)], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    assert got == {name: ["ok", True, True] for name in SHAPES}
