"""The compiled core against the pure-Python core, side by side in one run: CPU time per page of
``Fingerprinter().fingerprint(html)`` over the same public pages, each core in processes of its own
(``SIMHASH_FILTER_PURE_PYTHON=1`` for the reference), alternated ``--repeat`` times; medians and their ratio.
Both must give the same fingerprints: each process prints a digest of all of them, and they are compared.  Each
process also times ``lxml.html.document_fromstring(page).text_content()`` over the same pages (the parser's own
speed, the ceiling the issue measures against) and the report gives each core's speed as a share of it.

    python -m benchmarks.speed.bench_core [--pages 1500] [--repeat 5] [--json out/bench_core.json]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from itertools import islice
from pathlib import Path

from benchmarks.benchlib import ROOT
from benchmarks.benchlib.data import PUBLIC_PAGES, read_jsonl
from benchmarks.benchlib.report import make_parser, write_json

CORES = {"compiled": "0", "pure-Python": "1"}

# Run in a fresh process per measurement: the page list on stdin, one JSON line out.
_CHILD = r"""
import hashlib, json, sys, time
from simhash_filter.model.fingerprint import Fingerprinter
from simhash_filter.model import core
pages = json.load(sys.stdin)
fingerprinter = Fingerprinter()
fingerprinter.fingerprint(pages[0])  # word tables loaded before timing
start = time.process_time()
prints = [fingerprinter.fingerprint(page) for page in pages]
seconds = time.process_time() - start
digest = hashlib.sha256(repr([(p.value, p.sketch) for p in prints]).encode()).hexdigest()
import lxml.html
start = time.process_time()
for page in pages:
    lxml.html.document_fromstring(page).text_content()
parser = time.process_time() - start
print(json.dumps({"core": core.describe(), "seconds": seconds, "digest": digest, "parser_seconds": parser}))
"""


def measure(pages_json: str, pure: str) -> dict:
    env = {**os.environ, "SIMHASH_FILTER_PURE_PYTHON": pure}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD], input=pages_json, env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--pages", type=int, default=1500, help="public pages, in stream order (default: 1500)")
    parser.add_argument("--repeat", type=int, default=5, help="measurements of each core (default: 5)")
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    args = parser.parse_args(argv)
    pages = [row["html"] for row in islice(read_jsonl(PUBLIC_PAGES), args.pages)]
    pages_json = json.dumps(pages)
    runs: dict[str, list[dict]] = {name: [] for name in CORES}
    for _ in range(args.repeat):
        for name, pure in CORES.items():
            runs[name].append(measure(pages_json, pure))
    digests = {run["digest"] for rs in runs.values() for run in rs}
    result = {"pages": len(pages), "repeat": args.repeat, "identical_fingerprints": len(digests) == 1}
    for name, rs in runs.items():
        seconds = statistics.median(r["seconds"] for r in rs)
        result[name] = {"core": rs[0]["core"], "cpu_seconds": seconds, "pages_per_cpu_second": len(pages) / seconds}
        print(f"{name:12} {rs[0]['core']}: {len(pages) / seconds:7.0f} pages per CPU second (median of {args.repeat})")
    result["ratio"] = result["pure-Python"]["cpu_seconds"] / result["compiled"]["cpu_seconds"]
    print(f"compiled ÷ pure-Python speed: {result['ratio']:.2f}x; fingerprints identical: {len(digests) == 1}")
    parser = statistics.median(r["parser_seconds"] for rs in runs.values() for r in rs)
    result["parser_pages_per_cpu_second"] = len(pages) / parser
    for name in runs:
        share = parser / result[name]["cpu_seconds"]
        result[name]["speed_of_parser"] = share
        ceiling = f"lxml.html.document_fromstring + text_content() ({len(pages) / parser:.0f} pages/s)"
        print(f"{name:12} {share:.2f}x the speed of {ceiling}")
    if args.json:
        write_json(args.json, result, indent=1)
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
