"""Fingerprinting by kind of page against the parser's own text, side by side in one process: CPU time of
``Fingerprinter().fingerprint(page)`` (parsing included) and of ``lxml.html.document_fromstring(page).text_content()``
(the floor a user measures) over the same pages, best of ``--repeat`` passes each, alternated; and the share of the
pages' text (characters of the text segments the model weighs) that takes the general path of the text pass (NFKC
over the whole segment and a Python string per word) rather than the compiled fast path, with the share that took it
before the typographic fast path (every segment that is not ASCII).

Kinds: the public set's pages with no CJK ideograph and those with some (first ``--pages`` of each, stream order),
and each ``--docs NAME=DIR`` (every ``*.html`` under DIR, e.g. Debian's ``python3.11-doc`` library reference or
``postgresql-doc-15``'s manual, unpacked with ``apt-get download`` and ``dpkg -x``).  Compare two checkouts by
running it from each one's root.

    python -m benchmarks.speed.bench_text_kinds [--pages 500] [--repeat 5] [--docs python=DIR ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import lxml.html

from benchmarks.benchlib.data import PUBLIC_PAGES, read_jsonl
from benchmarks.benchlib.text import has_ideograph
from simhash_filter import DEFAULTS
from simhash_filter.model import core
from simhash_filter.model.extract import extract
from simhash_filter.model.fingerprint import Fingerprinter
from simhash_filter.model.html import parse


def kinds(pages: int, docs: list[str]) -> dict[str, list[str | bytes]]:
    """The pages of each kind."""
    latin: list[str | bytes] = []
    chinese: list[str | bytes] = []
    for row in read_jsonl(PUBLIC_PAGES):
        page = row["html"]
        (chinese if has_ideograph(page) else latin).append(page)
        if len(latin) >= pages and len(chinese) >= pages:
            break
    out = {"public": latin[:pages], "public-chinese": chinese[:pages]}
    for spec in docs:
        name, _, folder = spec.partition("=")
        out[name] = [p.read_bytes() for p in sorted(Path(folder).rglob("*.html"))]
    return out


def general_share(pages: list[str | bytes]) -> tuple[float, float]:
    """Shares of the pages' weighed text that is not ASCII (the general path before) and that takes it now."""
    from simhash_filter.model import _core

    fast_text = getattr(_core, "fast_text", lambda text: None)  # a checkout without the fast path: none
    total = non_ascii = general = 0
    for page in pages:
        parsed = parse(page, None, DEFAULTS.fingerprint.max_bytes)
        if parsed.root is None:
            continue
        cfg = DEFAULTS.fingerprint
        page_text = extract(parsed.root, dom_decay=cfg.dom_decay, boilerplate_weight=cfg.boilerplate_weight,
                            max_elements=cfg.max_elements)  # fmt: skip
        for _, text in page_text.texts:
            total += len(text)
            if not text.isascii():
                non_ascii += len(text)
                if fast_text(text) is None:
                    general += len(text)
    return non_ascii / max(total, 1), general / max(total, 1)


def cpu(function, pages: list[str | bytes]) -> float:
    start = time.process_time()
    for page in pages:
        function(page)
    return time.process_time() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=500, help="public pages of each kind (default: 500)")
    parser.add_argument("--repeat", type=int, default=5, help="passes of each, the best kept (default: 5)")
    parser.add_argument("--docs", action="append", default=[], help="NAME=DIR: a kind of HTML documentation pages")
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    args = parser.parse_args(argv)
    results = {"core": core.describe(), "kinds": {}}
    for name, pages in kinds(args.pages, args.docs).items():
        before, now = general_share(pages)
        fingerprinter = Fingerprinter()
        for page in pages:  # word tables and memos warmed, as in a long run
            fingerprinter.fingerprint(page)
        ours, floor = [], []
        for _ in range(args.repeat):
            ours.append(cpu(fingerprinter.fingerprint, pages))
            floor.append(cpu(lambda page: lxml.html.document_fromstring(page).text_content(), pages))
        row = {
            "pages": len(pages),
            "kb_per_page": round(sum(map(len, pages)) / len(pages) / 1000, 1),
            "fingerprint_s": round(min(ours), 3),
            "text_content_s": round(min(floor), 3),
            "ratio": round(min(floor) / min(ours), 3),
            "general_share_before": round(before, 3),
            "general_share_now": round(now, 3),
        }
        results["kinds"][name] = row
        print(name, json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
