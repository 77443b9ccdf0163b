"""The parser experiment of issue #27: today's libxml2 parse and compiled walk against a Lexbor parse (selectolax)
and a compiled walk over Lexbor's tree (``benchmarks/lexbor/lexbor_walk.pyx``, a prototype outside the package).

CPU time per stage over the public pages, each parser in processes of its own, alternated ``--rounds`` times
(medians):

- libxml2: ``html.parse`` (decode, libxml2, ``strip_elements`` of the invisible tags), ``_core.walk``, ``_split``
  of its tuple, freeing the tree;
- Lexbor: ``html.decode`` and ``LexborHTMLParser`` (decode, Lexbor), ``lexbor_walk.walk``, ``_split`` of its tuple,
  freeing the document;
- and then, in the same processes, the whole ``fingerprint()`` of every page (parse to sketch) by each variant.

``--agree`` fingerprints every page both ways (the Lexbor variant: its walk's tuple through ``extract._split``,
``features.page_features`` and ``Fingerprinter._decide``) and counts the pages whose fingerprints are the same.
``--check`` compares the compiled Lexbor walk with its pure-Python reference (``benchmarks/lexbor/reference.py``)
on every page, with the model's element cap and with a cap of 50.  ``--dedup IN OUT`` writes what
``simhash-filter dedup IN --output OUT`` writes, with the Lexbor variant's fingerprints (so that
``/work/shared/eval/score.py --system`` can score it).

    python benchmarks/bench_parser.py [--pages N] [--rounds 5] [--json out/bench_parser.json]
    python benchmarks/bench_parser.py --agree [--pages N]
    python benchmarks/bench_parser.py --check [--pages N]
    python benchmarks/bench_parser.py --dedup IN.jsonl OUT.jsonl

The Lexbor walk is built in place by the first run (``cythonize -i``; needs the ``bench`` extra: selectolax, Cython).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from benchlib import ROOT
from benchlib.data import PUBLIC_PAGES, read_jsonl
from benchlib.report import make_parser, write_json

LEXBOR_DIR = ROOT / "benchmarks" / "lexbor"
STAGES = ("parse", "walk", "split", "free")
PARSERS = ("libxml2", "lexbor")


def lexbor_walk() -> Any:
    """The compiled Lexbor walk, built in place first when it is missing or older than its source."""
    source = LEXBOR_DIR / "lexbor_walk.pyx"
    built = sorted(LEXBOR_DIR.glob("lexbor_walk.*.so"))
    if not built or built[-1].stat().st_mtime < source.stat().st_mtime:
        cythonize = Path(sys.executable).with_name("cythonize")
        subprocess.run([str(cythonize), "-i", "-3", "-q", source.name], cwd=LEXBOR_DIR, check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
    if str(LEXBOR_DIR) not in sys.path:
        sys.path.insert(0, str(LEXBOR_DIR))
    import lexbor_walk as module

    return module


def lexbor_fingerprinter_class() -> type:
    """A :class:`Fingerprinter` whose pages are parsed by Lexbor and walked by the Lexbor walk (the rest, from
    ``_split`` on, is the model's own)."""
    from selectolax.lexbor import LexborHTMLParser

    from simhash_filter.model.extract import BOILERPLATE_TAGS, PageText, _boilerplate_words, _split
    from simhash_filter.model.fingerprint import Fingerprinter, Status
    from simhash_filter.model.html import NotHtml, decode

    walk = lexbor_walk().walk

    class LexborFingerprinter(Fingerprinter):
        def page_text(
            self, html: bytes | str, encoding: str | None = None
        ) -> tuple[PageText | None, Status, str | None]:
            cfg = self.config
            try:
                text, enc, truncated = decode(html, encoding, cfg.max_bytes)
            except NotHtml:
                return None, Status.NOT_HTML, None
            if not text or text.isspace():
                return None, Status.EMPTY, enc
            parser = LexborHTMLParser(text.encode("utf-8", "replace"))
            walked = walk(parser, cfg.max_elements, BOILERPLATE_TAGS, _boilerplate_words)
            del parser
            if walked is None or not walked[1]:
                return None, Status.EMPTY, enc
            page = _split(*walked[:8], cfg.dom_decay, cfg.boilerplate_weight, walked[8])
            page.truncated = page.truncated or truncated
            return page, Status.OK, enc

    return LexborFingerprinter


# --- one parser's stages, in a process of its own ----------------------------------------------------------------


def _stages_libxml2(pages: list[str]) -> dict[str, Any]:
    from simhash_filter.model._core import walk

    from simhash_filter.config import FingerprintConfig
    from simhash_filter.model.extract import BOILERPLATE_TAGS, _boilerplate_words, _extract_walk, _split
    from simhash_filter.model.html import NotHtml, parse

    cfg = FingerprintConfig()
    clock = time.process_time
    spent = dict.fromkeys(STAGES, 0.0)
    elements = fallbacks = 0
    for page in pages:
        t0 = clock()
        try:
            parsed = parse(page, None, cfg.max_bytes)
        except NotHtml:
            continue
        root = parsed.root
        del parsed
        t1 = clock()
        spent["parse"] += t1 - t0
        if root is None:
            continue
        walked = walk(root, cfg.max_elements, BOILERPLATE_TAGS, _boilerplate_words)
        t2 = clock()
        if walked is None:  # an attribute with entity references: the model's reference walk (and split)
            fallbacks += 1
            _extract_walk(root, cfg.dom_decay, cfg.boilerplate_weight, cfg.max_elements)
        elif walked[1]:
            elements += len(walked[1])
            _split(*walked[:8], cfg.dom_decay, cfg.boilerplate_weight, walked[8])
        t3 = clock()
        del root
        t4 = clock()
        spent["walk"] += t2 - t1
        spent["split"] += t3 - t2
        spent["free"] += t4 - t3
    return {"seconds": spent, "elements": elements, "fallbacks": fallbacks}


def _stages_lexbor(pages: list[str]) -> dict[str, Any]:
    from selectolax.lexbor import LexborHTMLParser

    from simhash_filter.config import FingerprintConfig
    from simhash_filter.model.extract import BOILERPLATE_TAGS, _boilerplate_words, _split
    from simhash_filter.model.html import NotHtml, decode

    walk = lexbor_walk().walk
    cfg = FingerprintConfig()
    clock = time.process_time
    spent = dict.fromkeys(STAGES, 0.0)
    decoding = 0.0
    elements = 0
    for page in pages:
        t0 = clock()
        try:
            text, _enc, _truncated = decode(page, None, cfg.max_bytes)
        except NotHtml:
            continue
        if not text or text.isspace():
            continue
        td = clock()
        parser = LexborHTMLParser(text.encode("utf-8", "replace"))
        del text
        t1 = clock()
        walked = walk(parser, cfg.max_elements, BOILERPLATE_TAGS, _boilerplate_words)
        t2 = clock()
        if walked is not None and walked[1]:
            elements += len(walked[1])
            _split(*walked[:8], cfg.dom_decay, cfg.boilerplate_weight, walked[8])
        t3 = clock()
        del parser
        t4 = clock()
        decoding += td - t0
        spent["parse"] += t1 - t0
        spent["walk"] += t2 - t1
        spent["split"] += t3 - t2
        spent["free"] += t4 - t3
    return {"seconds": spent, "elements": elements, "fallbacks": 0, "decode": decoding}


def _pages(limit: int | None) -> list[str]:
    return [row["html"] for row in islice(read_jsonl(PUBLIC_PAGES), limit)]


def child(parser: str, limit: int | None) -> None:
    pages = _pages(limit)
    measure = _stages_libxml2 if parser == "libxml2" else _stages_lexbor
    measure(pages[:20])  # imports, word tables and the compiled modules loaded before timing
    result = measure(pages)
    result["pages"] = len(pages)
    # then the whole fingerprint (parse to sketch) of every page, a fresh fingerprinter warmed on 20 pages
    if parser == "libxml2":
        from simhash_filter.model.fingerprint import Fingerprinter

        fingerprinter = Fingerprinter()
    else:
        fingerprinter = lexbor_fingerprinter_class()()
    for page in pages[:20]:
        fingerprinter.fingerprint(page)
    start = time.process_time()
    for page in pages:
        fingerprinter.fingerprint(page)
    result["fingerprint"] = time.process_time() - start
    print(json.dumps(result))


def run_child(parser: str, limit: int | None) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", parser] + ([] if limit is None else ["--pages", str(limit)])
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


# --- fingerprints: agreement, dedup --------------------------------------------------------------------------


def agreement(limit: int | None) -> dict[str, Any]:
    from simhash_filter.model.fingerprint import Fingerprinter

    today, lexbor = Fingerprinter(), lexbor_fingerprinter_class()()
    same_value = same_sketch = both_ok = 0
    distances: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    pages = _pages(limit)
    for page in pages:
        a, b = today.fingerprint(page), lexbor.fingerprint(page)
        if a.status != b.status:
            statuses[f"{a.status} -> {b.status}"] += 1
        if a.value is None or b.value is None:
            continue
        both_ok += 1
        d = (a.value ^ b.value).bit_count()
        same_value += d == 0
        same_sketch += a.sketch == b.sketch
        distances["0" if d == 0 else "1-3" if d <= 3 else "4-8" if d <= 8 else "9+"] += 1
    return {"pages": len(pages), "both_fingerprinted": both_ok, "same_fingerprint": same_value,
            "same_sketch": same_sketch, "distances": dict(distances), "status_changes": dict(statuses)}  # fmt: skip


def check(limit: int | None) -> dict[str, Any]:
    from reference import walk as reference_walk
    from selectolax.lexbor import LexborHTMLParser

    from simhash_filter.config import FingerprintConfig
    from simhash_filter.model.extract import BOILERPLATE_TAGS, _boilerplate_words
    from simhash_filter.model.html import NotHtml, decode

    walk = lexbor_walk().walk
    cap = FingerprintConfig().max_elements
    pages = _pages(limit)
    compared = 0
    differ: list[str] = []
    for n, page in enumerate(pages):
        try:
            text = decode(page)[0]
        except NotHtml:
            continue
        parser = LexborHTMLParser(text.encode("utf-8", "replace"))
        for max_elements in (cap, 50):
            compared += 1
            got = walk(parser, max_elements, BOILERPLATE_TAGS, _boilerplate_words)
            want = reference_walk(parser, max_elements, BOILERPLATE_TAGS, _boilerplate_words)
            if got != want:
                differ.append(f"page {n} cap {max_elements}")
    return {"walks": compared, "different": len(differ), "first": differ[:10]}


def dedup_lexbor(src: Path, dst: Path) -> None:
    """``simhash-filter dedup SRC --output DST`` (one process, the default settings), with Lexbor fingerprints."""
    from simhash_filter.batch import dedup as batch
    from simhash_filter.config import FilterConfig

    batch.Fingerprinter = lexbor_fingerprinter_class()  # type: ignore[misc]  # the one _prepared makes

    def lines() -> Iterator[bytes]:
        with open(src, "rb") as f:
            yield from f

    tmp = dst.with_name(dst.name + ".part")
    with open(tmp, "w", encoding="utf-8") as out:
        for outcome in batch.dedup(lines(), config=FilterConfig(), workers=1):
            out.write(json.dumps(outcome.record()) + "\n")
    os.replace(tmp, dst)


# --- the report ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("--pages", type=int, default=None, help="the first N public pages (default: all)")
    parser.add_argument("--rounds", type=int, default=5, help="alternated measurements of each parser (default 5)")
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    parser.add_argument("--agree", action="store_true", help="compare the two parsers' fingerprints instead")
    parser.add_argument("--check", action="store_true", help="the compiled Lexbor walk against its reference")
    parser.add_argument("--dedup", nargs=2, type=Path, metavar=("IN", "OUT"), help="dedup IN to OUT with Lexbor")
    parser.add_argument("--child", choices=PARSERS, help=argparse_hidden())
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.pages)
        return 0
    if args.dedup:
        dedup_lexbor(*args.dedup)
        return 0
    lexbor_walk()  # built once here, not in a timed child
    if args.agree or args.check:
        result = agreement(args.pages) if args.agree else check(args.pages)
        print(json.dumps(result, indent=1))
        if args.json:
            write_json(args.json, result, indent=1)
        return 0
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in PARSERS}
    for r in range(args.rounds):
        for p in PARSERS if r % 2 == 0 else PARSERS[::-1]:
            runs[p].append(run_child(p, args.pages))
            print(f"round {r + 1} {p}: " + ", ".join(f"{s} {runs[p][-1]['seconds'][s]:.3f}" for s in STAGES)
                  + f"; fingerprint() {runs[p][-1]['fingerprint']:.3f}", file=sys.stderr)  # fmt: skip
    pages = runs["libxml2"][0]["pages"]
    med = {p: {s: statistics.median(run["seconds"][s] for run in runs[p]) for s in STAGES} for p in PARSERS}
    for p in PARSERS:
        med[p]["total"] = statistics.median(sum(run["seconds"][s] for s in STAGES) for run in runs[p])
    # the ratio of each round's pair (the two runs next to each other), then the median: steadier on a shared machine
    paired: dict[str, float] = {}
    for s in (*STAGES, "total"):
        pick = (lambda run: sum(run["seconds"].values())) if s == "total" else (lambda run, s=s: run["seconds"][s])
        paired[s] = statistics.median(pick(b) / pick(a) for a, b in zip(runs["libxml2"], runs["lexbor"], strict=True))
    print(f"{pages} pages, medians of {args.rounds} alternated rounds, CPU seconds (µs a page):")
    print(f"{'stage':<8}{'libxml2':>18}{'Lexbor':>18}{'ratio':>8}{'paired':>8}")
    for s in (*STAGES, "total"):
        a, b = med["libxml2"][s], med["lexbor"][s]
        print(f"{s:<8}{a:>8.3f} ({1e6 * a / pages:>6.0f}){b:>8.3f} ({1e6 * b / pages:>6.0f}){b / a:>8.2f}"
              f"{paired[s]:>8.2f}")  # fmt: skip
    whole = {p: statistics.median(run["fingerprint"] for run in runs[p]) for p in PARSERS}
    whole_paired = statistics.median(
        b["fingerprint"] / a["fingerprint"] for a, b in zip(runs["libxml2"], runs["lexbor"], strict=True)
    )
    a, b = whole["libxml2"], whole["lexbor"]
    print(f"{'whole':<8}{a:>8.3f} ({1e6 * a / pages:>6.0f}){b:>8.3f} ({1e6 * b / pages:>6.0f})"
          f"{b / a:>8.2f}{whole_paired:>8.2f}")  # fmt: skip
    decode_s = statistics.median(run["decode"] for run in runs["lexbor"])
    print("(whole: Fingerprinter.fingerprint() of every page, parse to sketch, in the same processes after the stages)")
    elements = {p: runs[p][0]["elements"] for p in PARSERS}
    fallbacks = runs["libxml2"][0]["fallbacks"]
    print(f"(the parse stage includes decoding: {decode_s:.3f} s; elements walked: libxml2 {elements['libxml2']}, "
          f"Lexbor {elements['lexbor']}; reference-walk fallbacks (libxml2): {fallbacks})")  # fmt: skip
    if args.json:
        write_json(args.json, {"pages": pages, "medians": med, "paired_ratios": paired, "fingerprint": whole,
                               "fingerprint_paired": whole_paired, "decode": decode_s,
                               "elements": elements, "runs": runs}, indent=1)  # fmt: skip
    return 0


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    sys.exit(main())
