"""An experiment: boilerplate learned per host from a corpus, against the model's per-page rules.

Every text node (an element's text or tail, whitespace collapsed) seen on at least ``MIN`` pages of one host is
blanked in every page of that host, and the set is written again with the same labels, to be scored with the same
command as the set it came from (docs/accuracy.md, "A real-web development set").  With ``--kept DEDUP_OUTPUT`` (a
dedup output of the same set) only the pages it kept teach a host's boilerplate, as a crawl that learns from the
pages it keeps would; otherwise an article and its near-duplicates on one host teach their own text.

    python benchmarks/host_boilerplate.py out/realweb out/realweb-host3 --min 3 \
        [--kept out/realweb-runs/system.out.jsonl]
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from lxml import etree

_PARSER = etree.HTMLParser(recover=True, remove_comments=True)


def text_nodes(root: etree._Element) -> Iterator[tuple[etree._Element, str, str]]:
    """(element, "text" or "tail", the text with its whitespace collapsed) of every visible-looking text node."""
    for el in root.iter():
        if not isinstance(el.tag, str) or el.tag in ("script", "style"):
            continue
        for attr in ("text", "tail"):
            value = getattr(el, attr)
            if value and not value.isspace():
                yield el, attr, " ".join(value.split())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="a set directory (pages.jsonl.gz, truth.json.gz)")
    parser.add_argument("out", type=Path, help="the set directory to write")
    parser.add_argument("--min", type=int, default=3, help="pages of one host a text node is seen on (default 3)")
    parser.add_argument("--kept", type=Path, help="a dedup output of the set: only its kept pages teach")
    args = parser.parse_args()

    with gzip.open(args.source / "pages.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    kept = [True] * len(rows)
    if args.kept:
        with args.kept.open(encoding="utf-8") as f:
            kept = [json.loads(line)["duplicate_of"] is None for line in f]
    trees: list[etree._Element | None] = []
    seen: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for row, teaches in zip(rows, kept, strict=True):
        try:
            root = etree.fromstring(row["html"].encode("utf-8", "replace"), _PARSER)
        except (etree.ParserError, ValueError):
            root = None
        trees.append(root)
        if root is not None and teaches:
            seen[urlsplit(row["url"]).hostname or ""].update({text for _, _, text in text_nodes(root)})

    args.out.mkdir(parents=True, exist_ok=True)
    shutil.copy(args.source / "truth.json.gz", args.out / "truth.json.gz")
    blanked = 0
    with gzip.open(args.out / "pages.jsonl.gz", "wt", encoding="utf-8") as out:
        for row, root in zip(rows, trees, strict=True):
            html = row["html"]
            if root is not None:
                learned = seen[urlsplit(row["url"]).hostname or ""]
                for el, attr, text in list(text_nodes(root)):
                    if learned[text] >= args.min:
                        setattr(el, attr, " ")
                        blanked += 1
                html = etree.tostring(root, encoding="unicode", method="html")
            out.write(json.dumps({"url": row["url"], "html": html}) + "\n")
    print(f"{len(rows)} pages, {len(seen)} hosts, {blanked} text nodes blanked")


if __name__ == "__main__":
    main()
