"""The ``simhash-filter`` command line: the parser and :func:`main`; one module per command, what they share in
:mod:`.common`.  Every default comes from :data:`simhash_filter.config.DEFAULTS`, the same object the crawler
reads.  Exit statuses: docs/cli.md (each command's ``--help`` ends with its own).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from contextlib import suppress

from simhash_filter import __version__
from simhash_filter.cli.calibrate import add_calibrate_parser
from simhash_filter.cli.common import EXIT_FAILED, PROG, UsageError
from simhash_filter.cli.compare import add_compare_parser
from simhash_filter.cli.dedup import add_dedup_parser
from simhash_filter.cli.fingerprint import add_fingerprint_parser
from simhash_filter.cli.index import add_index_parser
from simhash_filter.cli.report import add_report_parser
from simhash_filter.config import DEFAULTS
from simhash_filter.model import core
from simhash_filter.serve.command import add_serve_parser


def build_parser() -> argparse.ArgumentParser:
    fdefaults = DEFAULTS.fingerprint
    model = argparse.ArgumentParser(add_help=False)
    group = model.add_argument_group("fingerprint model")
    group.add_argument(
        "--structure-weight",
        type=float,
        metavar="W",
        help=f"share of the weight given to DOM structure, 0..1 (default: {fdefaults.structure_weight})",
    )
    group.add_argument(
        "--dom-decay",
        type=float,
        metavar="D",
        help=f"weight factor per level of DOM depth, (0, 1] (default: {fdefaults.dom_decay})",
    )
    threshold = argparse.ArgumentParser(add_help=False)
    threshold.add_argument(
        "-k",
        "--max-distance",
        type=int,
        default=DEFAULTS.max_distance,
        metavar="K",
        help=f"candidates: pages within this Hamming distance that share a table (default: {DEFAULTS.max_distance})",
    )
    threshold.add_argument(
        "-t",
        "--min-similarity",
        type=float,
        default=DEFAULTS.min_similarity,
        metavar="T",
        help="a candidate whose sketch is at least this similar (0..1) is a near-duplicate "
        f"(default: {DEFAULTS.min_similarity})",
    )

    parser = argparse.ArgumentParser(
        prog=PROG, description="Near-duplicate detection of web pages with 64-bit simhash fingerprints."
    )
    version = f"%(prog)s {__version__} (model {DEFAULTS.fingerprint.model_id()}, {core.describe()})"
    parser.add_argument("--version", action="version", version=version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    add_fingerprint_parser(sub, model)
    add_compare_parser(sub, threshold, model)
    add_dedup_parser(sub, threshold, model)
    add_index_parser(sub, threshold, model)
    add_report_parser(sub, threshold, model)
    add_calibrate_parser(sub, threshold, model)
    add_serve_parser(sub, threshold, model)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.func(args)
        return status
    except UsageError as exc:
        args.parser.error(str(exc))  # exits with status 2
        raise AssertionError("unreachable") from None  # pragma: no cover
    except BrokenPipeError:  # `simhash-filter dedup pages.jsonl | head`: stop quietly
        with suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return getattr(args, "failed", EXIT_FAILED)  # compare: 2, trouble (1 would say: distinct)
    except KeyboardInterrupt:
        return 130
