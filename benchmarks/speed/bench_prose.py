"""What the prose verifier (model v6's spot signatures, :mod:`simhash_filter.model.prose`) costs a page: CPU seconds
of ``Fingerprinter.fingerprint`` with ``FingerprintConfig(prose=True)`` (the default) against ``prose=False`` (the
same model without the prose part), on the same pages in one process, alternated run by run, medians of
``--repeat`` runs; and the prose part alone (:func:`~simhash_filter.model.prose.prose_part` of the extracted
pages), and model v7's site part alone (:func:`~simhash_filter.model.sitepart.site_part`: ``prose=True`` carries
it too).  Each run uses a fresh ``Fingerprinter`` after one untimed warm-up pass over the pages (word tables, the
segmenter and the memos warm, as in a long crawl).

    python -m benchmarks.speed.bench_prose [PAGES.jsonl.gz ...] [--limit 1500] [--repeat 5]

PAGES default to the public set's pages; a real-web development set (``python -m benchmarks.accuracy.realweb``)
is another input.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import time
from itertools import islice
from pathlib import Path

from benchmarks.benchlib.data import PUBLIC_PAGES
from simhash_filter.model.config import FingerprintConfig
from simhash_filter.model.fingerprint import Fingerprinter
from simhash_filter.model.prose import prose_part
from simhash_filter.model.sitepart import site_part


def read_pages(path: Path, limit: int) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line)["html"] for line in islice(f, limit)]


def cpu(fn, pages: list[str]) -> float:
    start = time.process_time()
    for html in pages:
        fn(html)
    return time.process_time() - start


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="*", type=Path, default=[PUBLIC_PAGES])
    ap.add_argument("--limit", type=int, default=1500, help="pages read from each file (default: 1500)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    for path in args.pages:
        pages = read_pages(path, args.limit)
        on, off = FingerprintConfig(), FingerprintConfig(prose=False)
        texts = [t for t in (Fingerprinter(off).page_text(h)[0] for h in pages) if t is not None]
        times: dict[str, list[float]] = {"prose": [], "no prose": [], "prose part alone": [], "site part alone": []}
        for run in range(args.repeat):
            order = [("prose", on), ("no prose", off)][:: 1 if run % 2 else -1]
            for name, config in order:
                fp = Fingerprinter(config)
                cpu(fp.fingerprint, pages)  # warm-up
                times[name].append(cpu(fp.fingerprint, pages))
            times["prose part alone"].append(cpu(lambda page, cap=on.max_tokens: prose_part(page, cap), texts))
            times["site part alone"].append(cpu(site_part, texts))
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{path} ({len(pages)} pages), CPU ms a page, median of {args.repeat}:")
        for name, value in med.items():
            print(f"  {name:18s} {1000 * value / len(pages):7.3f}")
        print(f"  ratio prose / no prose: {med['prose'] / med['no prose']:.3f}; with the site part / without it: "
              f"{med['prose'] / (med['prose'] - med['site part alone']):.3f}")


if __name__ == "__main__":
    main()
