"""``simhash-filter fingerprint``: the fingerprint of HTML files, one line (or JSON object) each."""

from __future__ import annotations

import argparse
import json
from typing import Any

from simhash_filter.cli.common import EXIT_FAILED, EXIT_OK, fingerprint_config, read_bytes, warn
from simhash_filter.model.fingerprint import Fingerprinter


def cmd_fingerprint(args: argparse.Namespace) -> int:
    """One line per file: ``HEX  PATH``, or with ``--json`` one JSON object (JSON Lines); a file that cannot be
    read or fingerprinted is named on stderr (and, with ``--json``, is an object with a ``status``)."""
    fingerprinter = Fingerprinter(fingerprint_config(args))
    status = EXIT_OK
    for path in args.files:
        try:
            data = read_bytes(path)
        except OSError as exc:
            warn(f"{path}: cannot read: {exc.strerror or exc}")
            if args.json:
                print(json.dumps({"file": path, "fingerprint": None, "status": "unreadable",
                                  "error": exc.strerror or str(exc)}, ensure_ascii=False))  # fmt: skip
            status = EXIT_FAILED
            continue
        fp = fingerprinter.fingerprint(data)
        if fp.hex is None:
            warn(f"{path}: cannot fingerprint: {fp.status}")
            status = EXIT_FAILED
        if args.json:
            record: dict[str, Any] = {"file": path, "fingerprint": fp.hex}
            if fp.hex is None:
                record["status"] = str(fp.status)
            print(json.dumps(record, ensure_ascii=False))
        elif fp.hex is not None:
            print(f"{fp.hex}  {path}")
    return status


FINGERPRINT_EPILOG = """\
examples:
  simhash-filter fingerprint page.html other.html        # d490dfee0514e20d  page.html
  curl -s https://example.org/ | simhash-filter fingerprint -
  simhash-filter fingerprint --json pages/*.html > fingerprints.jsonl

exit status: 0 every file fingerprinted, 1 a file could not be read or fingerprinted, 2 a usage error"""


def add_fingerprint_parser(sub: Any, model: argparse.ArgumentParser) -> None:
    """Add ``fingerprint`` to the ``simhash-filter`` parser (``model``: the model options)."""
    p = sub.add_parser(
        "fingerprint",
        parents=[model],
        help="print the fingerprint of HTML files",
        description="Print one line per file: 16 hex digits, two spaces, the path.",
        epilog=FINGERPRINT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="HTML file ('-' for standard input)")
    p.add_argument(
        "--json",
        action="store_true",
        help='one JSON object per file (JSON Lines): {"file", "fingerprint"}, and "status" when it has none',
    )
    p.set_defaults(func=cmd_fingerprint, parser=p)
