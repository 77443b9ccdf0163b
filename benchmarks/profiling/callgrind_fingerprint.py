"""Fingerprinting under callgrind: instructions are counted where wall time on a shared machine is too noisy.

Run it twice under ``valgrind --tool=callgrind``, ``warm`` (start-up, memos warmed on 20 pages) and ``run`` (the
same, then the first ``--pages`` public pages fingerprinted): the difference of the two counts is the pages' own
work.  Compare two checkouts by running each one's interpreter on this file from its own directory.

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        .venv/bin/python -m benchmarks.profiling.callgrind_fingerprint warm
    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        .venv/bin/python -m benchmarks.profiling.callgrind_fingerprint run

``--input`` reads other pages (gzip JSON Lines with an ``html`` field), e.g. the public set's Chinese pages only.
"""

from __future__ import annotations

import argparse
import gzip
import json
from itertools import islice
from pathlib import Path

from benchmarks.benchlib.data import PUBLIC_PAGES
from simhash_filter.model.fingerprint import Fingerprinter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("warm", "run"))
    parser.add_argument("--pages", type=int, default=300, help="public pages in stream order (default: 300)")
    parser.add_argument("--input", type=Path, default=PUBLIC_PAGES, help="other pages (JSON Lines with html, gzip)")
    args = parser.parse_args()
    with gzip.open(args.input, "rt", encoding="utf-8") as f:
        pages = [json.loads(line)["html"] for line in islice(f, args.pages)]
    fingerprinter = Fingerprinter()
    for page in pages[:20]:
        fingerprinter.fingerprint(page)
    if args.mode == "run":
        for page in pages:
            fingerprinter.fingerprint(page)


if __name__ == "__main__":
    main()
