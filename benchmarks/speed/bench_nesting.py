"""Hostile nesting through the model's parser (model v6: Lexbor behind the nesting guard), in ms per 100 KB of page.

Shapes (issue 36), each followed by a paragraph of text that must be read: nested ``<div>``s (1,000 and 100,000),
200,000 nested ``<ul><li>``, 50,000 unclosed ``<b><i>`` pairs, a ``<select>`` of 10,000 ``<option>``s, and an
ordinary page of the same size for comparison.  For each: ``Fingerprinter().fingerprint(page)`` (bytes; decode,
guard, parse, walk, split, features, vote), the guard alone, and Lexbor without the guard (selectolax on the raw
page, only where that takes less than ``--unguarded-limit`` bytes: it is quadratic).  Medians of ``--repeat`` runs,
one process; the pure-Python core with ``SIMHASH_FILTER_PURE_PYTHON=1``.

    python -m benchmarks.speed.bench_nesting --repeat 5 [--json out/nesting.json]
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

from selectolax.lexbor import LexborHTMLParser

from benchmarks.benchlib.report import make_parser
from simhash_filter.model import core
from simhash_filter.model.fingerprint import Fingerprinter
from simhash_filter.model.nesting import guard

WORDS = " ".join(f"deep{i} harbour words" for i in range(30))
TAIL = "<p>" + " ".join(f"after{i} the deep part" for i in range(30)) + "</p>"


def shapes(scale: float) -> dict[str, bytes]:
    def n(count: int) -> int:
        return max(1, int(count * scale))

    ordinary = "".join(f"<div class='c{i % 7}'><p>{WORDS} {i}</p></div>" for i in range(n(1_600)))
    pages = {
        "1,000 nested div": "<div>" * n(1_000) + WORDS + "</div>" * n(1_000),
        "100,000 nested div": "<div>" * n(100_000) + WORDS + "</div>" * n(100_000),
        "200,000 nested ul/li": "<ul><li>" * n(200_000) + WORDS,
        "50,000 unclosed b/i": "<b><i>" * n(50_000) + WORDS,
        "10,000 options": "<select>" + "".join(f"<option>choice {i}" for i in range(n(10_000))) + "</select>" + WORDS,
        "ordinary page": ordinary,
    }
    return {name: f"<html><body>{body}{TAIL}</body></html>".encode() for name, body in pages.items()}


def _median_ms(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0, help="shape sizes times this (a quick run: 0.01)")
    parser.add_argument("--unguarded-limit", type=int, default=120_000, help="bytes: Lexbor alone up to this size")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    fingerprinter = Fingerprinter()
    guard_of = core.compiled_guard or guard
    rows = []
    print(f"{core.describe()}; medians of {args.repeat} runs")
    print("| shape | KB | fingerprint ms | ms / 100 KB | guard ms | status | text after kept | Lexbor alone ms |")
    print("| --- | ---: | ---: | ---: | ---: | --- | --- | ---: |")
    for name, page in shapes(args.scale).items():
        fp, feats, _ = fingerprinter.inspect(page)
        kept = feats is not None and "after29" in feats.text
        ms = _median_ms(lambda page=page: fingerprinter.fingerprint(page), args.repeat)
        guard_ms = _median_ms(lambda page=page: guard_of(page), args.repeat)
        alone = None
        if len(page) <= args.unguarded_limit:
            alone = _median_ms(lambda page=page: LexborHTMLParser(page, options=1), args.repeat)
        kb = len(page) / 1000
        row = {"shape": name, "kb": kb, "fingerprint_ms": ms, "ms_per_100kb": ms * 100 / kb, "guard_ms": guard_ms,
               "status": str(fp.status), "after_kept": kept, "lexbor_alone_ms": alone}  # fmt: skip
        rows.append(row)
        alone_text = "-" if alone is None else f"{alone:.1f}"
        print(f"| {name} | {kb:,.0f} | {ms:.1f} | {row['ms_per_100kb']:.1f} | {guard_ms:.2f} | {fp.status} | "
              f"{'yes' if kept else 'NO'} | {alone_text} |")  # fmt: skip
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"core": core.describe(), "repeat": args.repeat, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
