"""A crowd of look-alike pages (issue 39): one real documentation page's template, every text node's words
replaced, page after page — the same structure and size, no two pages near-duplicates (a catalogue, a forum, a
product listing) — then real near-duplicates of a few of them.

The template is read at run time from the public labelled set (the first page whose URL contains ``--template``,
default ``kb.techcorner.example``, a help page); nothing of it is stored in this repository.  Each word of every
text node (and tail) is replaced by a word drawn at random from the template's own words (seeded), so every page
has the template's structure, its number of words node by node and its words' frequencies, and no two pages share
a sentence: their fingerprints fall within a few bits of each other (half the pairs within 10), their sketches do
not verify.

    python -m devsites.crowd --pages 20000 --out crowd.jsonl [--near 5]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from lxml import html as lxml_html

PUBLIC_PAGES = Path("/work/shared/datasets/neardup-public/pages.jsonl.gz")
SEED = 39
_WORD = re.compile(r"\w+", re.UNICODE)


def template(substring: str = "kb.techcorner.example", source: Path = PUBLIC_PAGES) -> tuple[str, str]:
    """``(url, html)`` of the first page of *source* whose URL contains *substring*."""
    with gzip.open(source, "rt", encoding="utf-8") as f:
        for line in f:
            page = json.loads(line)
            if substring in page["url"]:
                return page["url"], page["html"]
    raise SystemExit(f"no page of {source} has {substring!r} in its URL")


def _text_slots(root: lxml_html.HtmlElement) -> list[tuple[lxml_html.HtmlElement, str]]:
    """Every (element, "text" | "tail") holding words, scripts and styles left out."""
    slots = []
    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        if el.tag not in ("script", "style") and el.text and _WORD.search(el.text):
            slots.append((el, "text"))
        if el.tail and _WORD.search(el.tail):
            slots.append((el, "tail"))
    return slots


def vocabulary(rng: random.Random, n: int = 20_000) -> list[str]:
    """*n* made-up words of 2 to 10 letters."""
    return ["".join(rng.choices("etaoinshrdlcumwfgypbvkjxqz", k=rng.randint(2, 10))) for _ in range(n)]


def crowd(page_html: str, n: int, seed: int = SEED, distinct: bool = False) -> Iterator[str]:
    """*n* pages of *page_html*'s template, each with every word of every text node replaced: by the template's
    own words (a crowd), or (*distinct*) by made-up words of a large vocabulary (ordinary distinct pages of the
    same size and structure: their fingerprints fall anywhere)."""
    rng = random.Random(seed)
    root = lxml_html.document_fromstring(page_html)
    slots = _text_slots(root)
    originals = [getattr(el, which) for el, which in slots]
    words = [w for text in originals for w in _WORD.findall(text)]  # the template's own words, as often as there
    if distinct:
        words = vocabulary(rng)
    for _ in range(n):
        for (el, which), text in zip(slots, originals, strict=True):
            setattr(el, which, _WORD.sub(lambda _m: rng.choice(words), text))
        yield lxml_html.tostring(root, encoding="unicode", doctype="<!DOCTYPE html>")


def near_duplicate(page_html: str, seed: int = SEED) -> str:
    """A real near-duplicate of a page: the same page with two words of its longest text node changed and a line
    added at the end of the body (what a mirror, a reprint or a later edit changes)."""
    rng = random.Random(seed)
    root = lxml_html.document_fromstring(page_html)
    el, which = max(_text_slots(root), key=lambda slot: len(_WORD.findall(getattr(*slot))))
    text = getattr(el, which)
    found = list(_WORD.finditer(text))
    for m in rng.sample(found, 2):
        text = text[: m.start()] + m.group().upper() + text[m.end() :]
    setattr(el, which, text)
    body = root.find("body")
    if body is not None:
        extra = lxml_html.fragment_fromstring("<p>Mirrored for offline reading.</p>")
        body.append(extra)
    return lxml_html.tostring(root, encoding="unicode", doctype="<!DOCTYPE html>")


def write(path: Path, pages: int, near: list[int], substring: str, distinct: bool = False) -> tuple[str, list[str]]:
    """Write the crowd (*distinct*: the distinct pages of its template) to *path* as JSON Lines (``url``,
    ``html``), then a near-duplicate of each page of *near* (numbers), whose URLs are returned (with the
    template's URL)."""
    url, page = template(substring)
    near_set = set(near)
    kept: dict[int, str] = {}
    twins = []
    with open(path, "w", encoding="utf-8") as out:
        for i, h in enumerate(crowd(page, pages, distinct=distinct)):
            if i in near_set:
                kept[i] = h
            out.write(json.dumps({"url": f"https://crowd.example/page/{i}", "html": h}) + "\n")
        for i in near:
            twin = f"https://mirror.example/page/{i}"
            out.write(json.dumps({"url": twin, "html": near_duplicate(kept[i])}) + "\n")
            twins.append(twin)
    return url, twins


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--near", default="0,100,10000,19999", help="crowd pages to add a near-duplicate of")
    parser.add_argument("--template", default="kb.techcorner.example")
    args = parser.parse_args(argv)
    near = [int(x) for x in args.near.split(",") if x and int(x) < args.pages]
    url, twins = write(args.out, args.pages, near, args.template)
    print(f"{args.pages} pages of the template of {url}, then {len(twins)} near-duplicates -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
