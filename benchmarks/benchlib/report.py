"""A benchmark's command line and output: its argument parser, percentages, JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def make_parser(doc: str | None, *, full: bool = False) -> argparse.ArgumentParser:
    """The argument parser of a benchmark: its description is the first paragraph of the module's docstring
    ``doc``, or (``full``) the whole docstring as written."""
    if full:
        return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    return argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])


def write_json(path: Path, data: Any, **options: Any) -> None:
    """``data`` as JSON in ``path`` (its directory made; ``options`` go to :func:`json.dumps`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, **options) + "\n", encoding="utf-8")


def pct(x: float | None) -> str:
    """A share as a percentage with one decimal (``-`` for none)."""
    return "-" if x is None else f"{100 * x:.1f} %"


def add_settings_option(parser: argparse.ArgumentParser) -> None:
    """``-s/--set NAME=VALUE`` (repeatable): a Scrapy setting of every crawl of a crawl benchmark."""
    parser.add_argument(
        "-s",
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Scrapy setting of every crawl, e.g. -s SIMHASH_MIN_SIMILARITY=0.8 (repeatable)",
    )


def apply_settings(parser: argparse.ArgumentParser, items: list[str], settings: dict[str, str]) -> None:
    """Put the ``-s NAME=VALUE`` items into *settings* (a usage error for an item without ``=``)."""
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name:
            parser.error(f"--set takes NAME=VALUE, got {item!r}")
        settings[name] = value
