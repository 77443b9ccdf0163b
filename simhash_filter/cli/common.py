"""What the commands share: the error of bad arguments found after parsing, the configurations built from the
command line's options (``-k``, ``-t``, the model's options) -- one place, so that every command reads them alike --
the program's name and exit statuses, and reading a page from a file or standard input."""

from __future__ import annotations

import argparse
import errno
import re
import sys
from typing import IO, NamedTuple

from simhash_filter.config import DEFAULTS, FilterConfig, FingerprintConfig
from simhash_filter.model.fingerprint import Fingerprinter


class UsageError(Exception):
    """Bad arguments found after parsing (reported like argparse errors, exit status 2)."""


def fingerprint_config(args: argparse.Namespace) -> FingerprintConfig:
    """The model's options (``--structure-weight``, ``--dom-decay``) over the defaults."""
    try:
        return DEFAULTS.fingerprint.with_options(structure_weight=args.structure_weight, dom_decay=args.dom_decay)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def filter_config(args: argparse.Namespace) -> FilterConfig:
    """The filter's configuration from a command's options; the options a command lacks keep their defaults."""
    try:
        return FilterConfig(
            fingerprint=fingerprint_config(args),
            max_distance=args.max_distance,
            min_similarity=getattr(args, "min_similarity", DEFAULTS.min_similarity),
            candidates_per_table=getattr(args, "candidates_per_table", DEFAULTS.candidates_per_table),
            block_duplicates=getattr(args, "block_duplicates", DEFAULTS.block_duplicates),
            expected_pages=getattr(args, "expected_pages", DEFAULTS.expected_pages),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


#: The command's name in its messages.
PROG = "simhash-filter"
HEX_FINGERPRINT = re.compile(r"[0-9a-fA-F]{16}")
EXIT_OK, EXIT_FAILED = 0, 1


def warn(message: str) -> None:
    """One line on stderr, after the command's name."""
    print(f"{PROG}: {message}", file=sys.stderr)


def by_reason(counts: dict[str, int]) -> str:
    """Counts by reason, in the order of the reasons: ``empty 2, not_html 1``."""
    return ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items()))


def read_bytes(path: str) -> bytes:
    """The first ``max_bytes + 1`` bytes of a file (the work cap, and one byte to know a page was cut): a
    600 MB file or ``/dev/zero`` is not read whole."""
    limit = DEFAULTS.fingerprint.max_bytes + 1
    if path == "-":
        return stdin_bytes().read(limit)
    with open(path, "rb") as f:
        return f.read(limit)


def stdin_bytes() -> IO[bytes]:
    """Standard input's bytes (an error like a missing file's when it is closed)."""
    if sys.stdin is None:  # started with standard input closed (`<&-`)
        raise OSError(errno.EBADF, "standard input is closed", "-")
    return sys.stdin.buffer


def unreadable(arg: str, exc: OSError) -> str:
    """Why an argument that may be a file or a fingerprint (``compare``, ``index query``) cannot be used: it is
    neither a file that can be read nor a fingerprint."""
    why = "no such file" if exc.errno == errno.ENOENT else f"cannot read ({exc.strerror or exc})"
    return why + ("" if arg == "-" else ", and not a 16-hex-digit fingerprint")


class PageRead(NamedTuple):
    """An HTML file fingerprinted for ``index query``: its fingerprint and sketch, or why it has none."""

    value: int | None
    sketch: bytes | None
    problem: str | None


class PageModel:
    """The fingerprint model a command's options describe, for the HTML files ``index query`` is given, and the
    index metadata of that model (an index of another model is refused)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.fingerprinter = Fingerprinter(fingerprint_config(args))
        self.metadata = filter_config(args).index_metadata()

    def read(self, path: str) -> PageRead:
        try:
            fp = self.fingerprinter.fingerprint(read_bytes(path))
        except OSError as exc:
            return PageRead(None, None, unreadable(path, exc))
        if fp.value is None:
            return PageRead(None, None, f"cannot fingerprint: {fp.status}")
        return PageRead(fp.value, fp.sketch, None)
