"""Where ``dedup --workers 1``'s CPU goes, stage by stage: a re-enactment of its loop over the public stream with a
CPU clock around each stage (the same calls ``dedup`` makes, in the same order, one process).

Stages: start-up (imports), reading and parsing the JSON lines, the page's UTF-8 bytes (``html.page_bytes``), the
nesting guard, Lexbor's parse with the walk and split by role and the tree freed (``extract.extract_page``, the guard
run again inside it and subtracted), the features, vote and sketch (one compiled pass where the core has it;
``page_features`` then the vote and sketch before it), the index's check, writing the output line.  Run it from a
checkout's root with that checkout's interpreter to compare two checkouts:

    python -m benchmarks.profiling.profile_stages [--input PAGES.jsonl(.gz)] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from collections import defaultdict
from pathlib import Path

CLOCK = time.process_time
START = CLOCK()

from benchmarks.benchlib.data import PUBLIC_PAGES  # noqa: E402
from simhash_filter.batch.dedup import open_index, parse_line  # noqa: E402
from simhash_filter.config import FilterConfig  # noqa: E402
from simhash_filter.model import extract, html, nesting  # noqa: E402
from simhash_filter.model.core import compiled_guard  # noqa: E402
from simhash_filter.model.features import page_features  # noqa: E402
from simhash_filter.model.fingerprint import Fingerprinter, Status  # noqa: E402

IMPORTED = CLOCK()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path, default=PUBLIC_PAGES)
    parser.add_argument("--json", type=Path, help="also write the seconds per stage here")
    args = parser.parse_args()
    opener = gzip.open if args.input.suffix == ".gz" else open
    with opener(args.input, "rb") as f:
        lines = f.read().splitlines()
    spent: dict[str, float] = defaultdict(float)
    spent["start-up (imports)"] = IMPORTED - START
    fingerprinter = Fingerprinter()
    cfg = fingerprinter.config
    index = open_index(FilterConfig())
    one_pass = getattr(fingerprinter, "fingerprint_page", None)
    guard = compiled_guard or nesting.guard
    pages = 0
    for line in lines:
        t0 = CLOCK()
        url, page, _ = parse_line(line)
        t1 = CLOCK()
        data = html.page_bytes(page, None, cfg.max_bytes)[0]
        t2 = CLOCK()
        spent["JSON in"] += t1 - t0
        spent["UTF-8 bytes (decode)"] += t2 - t1
        if not data:
            continue
        guard(data)
        tg = CLOCK()
        text = extract.extract_page(data, dom_decay=cfg.dom_decay, boilerplate_weight=cfg.boilerplate_weight,
                                    max_elements=cfg.max_elements)  # fmt: skip
        t3 = CLOCK()
        if one_pass is not None:
            fp = one_pass(text)
        else:
            fp = fingerprinter._decide(page_features(text, cfg), Status.OK, None)
        t4 = CLOCK()
        spent["nesting guard"] += tg - t2
        t5 = CLOCK()
        found = index.check_and_add(fp.value, url, fp.sketch) if fp.value is not None else None
        t6 = CLOCK()
        json.dumps({"url": url, "fingerprint": fp.hex, "duplicate_of": found and found.key})
        t7 = CLOCK()
        spent["Lexbor parse, walk and split, tree freed"] += t3 - tg - (tg - t2)  # less the guard inside it
        spent["features, vote, sketch"] += t4 - t3
        spent["index"] += t6 - t5
        spent["JSON out"] += t7 - t6
        pages += 1
    total = sum(spent.values())
    print(f"# {pages} pages of {args.input.name}: {total:.2f} CPU s")
    print("| stage | CPU s | share |\n| --- | ---: | ---: |")
    for stage, seconds in spent.items():
        print(f"| {stage} | {seconds:.2f} | {100 * seconds / total:.1f} % |")
    if args.json:
        args.json.write_text(json.dumps(dict(spent), indent=1))


if __name__ == "__main__":
    main()
