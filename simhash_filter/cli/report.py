"""``simhash-filter report``: one self-contained HTML file of what the filter did, from a crawl's feed or a ``dedup``
output (with its input for the texts)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from simhash_filter.cli.common import filter_config
from simhash_filter.report import DEFAULT_MAX_PAIRS, DEFAULT_TEXT_CAP, report_path

__all__ = ["add_report_parser"]

#: As ``dedup``: the input had malformed lines (a usage error's status too).
EXIT_MALFORMED = 2

EPILOG = """\
examples:
  scrapy crawl site -a start_urls=https://example.com/ -a store=both -s SIMHASH_ACTION=flag -O pages.jsonl
  simhash-filter report pages.jsonl                      # writes pages.report.html
  simhash-filter dedup pages.jsonl.gz -o result.jsonl
  simhash-filter report result.jsonl --pages pages.jsonl.gz -o report.html --workers 2
  simhash-filter report result.jsonl --pages crawl/ -o report.html     # the dedup input was WARC

exit status: 0 written, 1 an input could not be read or the report not written, 2 a usage error or malformed
input lines (as dedup: the report is written when any line was a page; none is when no line was)"""


def _say(message: str) -> None:
    print(f"simhash-filter: {message}", file=sys.stderr)


def cmd_report(args: argparse.Namespace, config: Any) -> int:
    from simhash_filter.report.build import Options, build
    from simhash_filter.report.source import MismatchError, Source

    if args.max_pairs < 0 or args.text_cap < 100 or args.workers < 1:
        args.parser.error("--max-pairs must be >= 0, --text-cap >= 100 and --workers >= 1")
    output = args.output or report_path(args.input)
    for name in (args.input, args.pages):
        if name is not None and os.path.abspath(output) == os.path.abspath(name):
            args.parser.error(f"the output {output} is an input: write it elsewhere")
    try:
        source = Source(args.input, args.pages, max_bytes=config.fingerprint.max_bytes + 1)
    except ValueError as exc:
        args.parser.error(str(exc))
    except OSError as exc:
        _say(f"cannot read {exc.filename or args.input}: {exc.strerror or exc}")
        return 1
    progress = _say if args.verbose else None
    options = Options(config=config, max_pairs=args.max_pairs, text_cap=args.text_cap, workers=args.workers,
                      title=args.title, progress=progress)  # fmt: skip
    started = time.perf_counter()
    try:
        built = build(source, options)
    except MismatchError as exc:
        _say(f"{args.input} and {args.pages} do not belong together: {exc}")
        return 1
    except (OSError, EOFError) as exc:  # a truncated .gz, an unreadable file
        _say(f"read error: {exc}")
        return 1
    except BrokenProcessPool:  # a worker killed (out of memory, say)
        _say("a worker process died while working out the pairs; try --workers 1 or a lower --max-pairs")
        return 1
    if built.malformed and not built.pages:
        _say(f"{args.input}: no line is a feed item or a dedup output line ({built.malformed} malformed lines): "
             "not a crawl's JSON Lines feed or a dedup output")  # fmt: skip
        return EXIT_MALFORMED
    document = built.html()
    try:
        _write(output, document)
    except OSError as exc:
        _say(f"cannot write {output}: {exc.strerror or exc}")
        return 1
    if built.malformed:
        _say(f"{args.input}: {built.malformed} malformed lines (not JSON objects with a url), listed as skipped")
    print(
        f"report: {built.pages} pages, {built.clusters} clusters of near-duplicates ({built.pairs} pairs), "
        f"{built.near_misses} near misses, {built.detailed} pairs with texts; {output} "
        f"({len(document.encode('utf-8')) / 1e6:.1f} MB) in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    return EXIT_MALFORMED if built.malformed else 0


def _write(path: str, document: str) -> None:
    """Write beside ``path`` and rename over it: a failed run leaves no half report."""
    from simhash_filter.index.backends.file.osfiles import replace_whole, write_all  # the on-disk engine: not at start

    target = Path(path).absolute()
    data = document.encode("utf-8")
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    replace_whole(target, partial, lambda fd: write_all(fd, data), sync=False, mode=0o666)


def add_report_parser(sub: Any, threshold: argparse.ArgumentParser, model: argparse.ArgumentParser) -> None:
    """Add ``report`` to the ``simhash-filter`` parser."""
    p = sub.add_parser(
        "report",
        parents=[model, threshold],
        help="write an HTML report of what the filter did: clusters, pair differences, hosts, skipped pages",
        description=(
            "Read a crawl's JSON Lines feed (best in flag mode, with HTML: -a store=both -s SIMHASH_ACTION=flag) or "
            "a dedup output with --pages (its input), and write one self-contained HTML file. -k and -t set the "
            "near misses shown (kept pages within k+3 bits of an earlier page) and the plots' marks; they do not "
            "change the decisions read."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("input", metavar="INPUT", help="a crawl's feed or a dedup output: JSON Lines, optionally .gz")
    p.add_argument(
        "--pages",
        metavar="PAGES",
        help="the dedup input that INPUT was made from (JSON Lines of url and html, or WARC), for the texts",
    )
    p.add_argument("-o", "--output", metavar="OUT", help="the HTML file (default: INPUT's name + .report.html)")
    p.add_argument(
        "--max-pairs",
        type=int,
        default=DEFAULT_MAX_PAIRS,
        metavar="N",
        help=f"pairs shown with texts and features, largest clusters first (default: {DEFAULT_MAX_PAIRS})",
    )
    p.add_argument(
        "--text-cap",
        type=int,
        default=DEFAULT_TEXT_CAP,
        metavar="C",
        help=f"a page's main text is cut at C characters (default: {DEFAULT_TEXT_CAP})",
    )
    p.add_argument("--workers", type=int, default=1, metavar="N", help="work out the pairs in N processes")
    p.add_argument("--title", help="the report's title (default: from INPUT)")
    p.add_argument("-v", "--verbose", action="store_true", help="progress lines on stderr")
    p.set_defaults(func=lambda args: cmd_report(args, filter_config(args)), parser=p)
