"""What the verification sketch adds to fingerprinting a page: CPU time, per page, in one process.

    python -m benchmarks.speed.bench_sketch [PAGES.jsonl[.gz]] [--pages 1500] [--repeat 3]

For each page (the public set's by default): ``Fingerprinter.fingerprint`` (decode, parse, extract, features,
simhash and sketch) and, on the same page's features, :func:`simhash_filter.model.sketch.sketch` alone.  Reported:
the median over ``--repeat`` passes of the total time of each, and the ratio of the whole fingerprint to the
fingerprint without its sketch (the issue's budget: at most 1.2).
"""

from __future__ import annotations

import statistics
import sys
import time
from itertools import islice
from pathlib import Path

from benchmarks.benchlib.data import PUBLIC_PAGES, read_jsonl
from benchmarks.benchlib.report import make_parser
from simhash_filter.model.fingerprint import Fingerprinter
from simhash_filter.model.sketch import sketch


def main() -> int:
    parser = make_parser(__doc__)
    parser.add_argument("pages", nargs="?", type=Path, default=PUBLIC_PAGES)
    parser.add_argument("--pages", dest="limit", type=int, default=1500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    pages = [row["html"] for row in islice(read_jsonl(args.pages), args.limit)]
    fingerprinter = Fingerprinter()
    cfg = fingerprinter.config
    features = [fingerprinter.analyze(html)[1] for html in pages]  # also loads the word tables
    words = [f.text for f in features if f is not None]
    totals, sketches = [], []
    for _ in range(args.repeat):
        start = time.process_time()
        for html in pages:
            fingerprinter.fingerprint(html)
        totals.append(time.process_time() - start)
        start = time.process_time()
        for w in words:
            sketch(w, cfg.sketch_bins, cfg.sketch_step)
        sketches.append(time.process_time() - start)
    total, part = statistics.median(totals), statistics.median(sketches)
    print(f"{len(pages)} pages of {args.pages.name}, median of {args.repeat} passes (CPU seconds)")
    print(f"fingerprint with sketch  {total:.2f} s  ({1000 * total / len(pages):.2f} ms/page)")
    print(f"sketch alone             {part:.2f} s  ({1000 * part / len(pages):.2f} ms/page)")
    print(f"with / without sketch    {total / (total - part):.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
