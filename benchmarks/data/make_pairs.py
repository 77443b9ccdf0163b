"""Write a labelled set for ``simhash-filter calibrate``: pages (JSON Lines) and labelled pairs (JSON Lines), made
from ``devsites/sample.py``'s generated sample, which knows which pages are variants of which.

- duplicates: every two pages of one article (the original and its mirror, copy, ads and edit variants, and the
  variants between themselves);
- distinct: as many pairs of pages of two different articles (``--negatives`` per duplicate), half of them *hard*
  (two articles on the same site: the same template around other text), half drawn from the whole sample.

Two variants that the sample put at one URL keep the first.  The same arguments always give the same bytes.

    python -m benchmarks.data.make_pairs out/pairs/pages.jsonl out/pairs/labels.jsonl [--articles 120] [--seed 7]
    simhash-filter calibrate out/pairs/labels.jsonl --pages out/pairs/pages.jsonl
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
from collections import defaultdict
from itertools import combinations
from urllib.parse import urlsplit

from devsites import sample


def _write(path: str, rows: list[dict[str, object]]) -> None:
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    if path.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    with open(path, "wb") as f:
        f.write(data)


def unique_urls(pages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The pages without those whose URL an earlier page has (two variants of an article can land on one URL)."""
    seen: set[str] = set()
    out = []
    for page in pages:
        if page["url"] not in seen:
            seen.add(page["url"])
            out.append(page)
    return out


def labelled_pairs(pages: list[dict[str, str]], negatives: float, seed: int) -> list[dict[str, object]]:
    """Every pair of pages of one group (duplicates), and ``negatives`` times as many pairs of two groups."""
    groups: dict[str, list[dict[str, str]]] = defaultdict(list)
    for page in pages:
        groups[page["group"]].append(page)
    labels: list[dict[str, object]] = []
    for group in sorted(groups):
        members = sorted(groups[group], key=lambda p: (p["variant"] != "original", p["url"]))
        for a, b in combinations(members, 2):
            labels.append({"url_a": a["url"], "url_b": b["url"], "duplicate": True})
    rng = random.Random(seed)
    by_host: dict[str, list[dict[str, str]]] = defaultdict(list)
    for page in pages:
        by_host[urlsplit(page["url"]).hostname or ""].append(page)
    hosts = sorted(h for h, members in by_host.items() if len({p["group"] for p in members}) > 1)
    wanted = round(negatives * len(labels))
    seen: set[tuple[str, str]] = set()
    distinct: list[dict[str, object]] = []
    attempts = 0
    while len(distinct) < wanted and attempts < 100 * max(1, wanted):
        attempts += 1
        hard = len(distinct) % 2 == 0 and hosts
        a, b = rng.sample(by_host[rng.choice(hosts)], 2) if hard else rng.sample(pages, 2)
        key = (min(a["url"], b["url"]), max(a["url"], b["url"]))
        if a["group"] == b["group"] or key in seen:
            continue
        seen.add(key)
        distinct.append({"url_a": a["url"], "url_b": b["url"], "duplicate": False})
    out = labels + distinct
    rng.shuffle(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", help="pages to write: JSON Lines of {url, html} (.gz compressed if so named)")
    parser.add_argument("labels", help="labelled pairs to write: JSON Lines of {url_a, url_b, duplicate}")
    parser.add_argument("--articles", type=int, default=120, help="distinct articles (default: 120)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default: 7)")
    parser.add_argument("--negatives", type=float, default=1.0, help="distinct pairs per duplicate pair (default: 1.0)")
    args = parser.parse_args(argv)
    pages = unique_urls(sample.sample(args.articles, args.seed))
    labels = labelled_pairs(pages, args.negatives, args.seed)
    _write(args.pages, [{"url": p["url"], "html": p["html"]} for p in pages])
    _write(args.labels, labels)
    duplicates = sum(bool(label["duplicate"]) for label in labels)
    print(
        f"wrote {len(pages)} pages of {args.articles} articles to {args.pages} and {len(labels)} labelled pairs "
        f"({duplicates} duplicates, {len(labels) - duplicates} distinct) to {args.labels}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
