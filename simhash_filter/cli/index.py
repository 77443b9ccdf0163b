"""``simhash-filter index``: look into and maintain a stored index (``stats``, ``query``, ``export``, ``rules``,
``delete``, ``compact``, ``rebuild``); the reading subcommands open an on-disk index read-only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from simhash_filter.cli.common import PageModel
from simhash_filter.config import DEFAULTS
from simhash_filter.errors import DesignMismatchError
from simhash_filter.index.backends import (
    Backend,
    error_message,
    open_backend,
    open_errors,
    redact_uri,
    uri_scheme,
    with_uri_option,
)
from simhash_filter.index.nearduplicate import NearDuplicateIndex, spots_of, spots_verdict, verdict
from simhash_filter.index.tables import SIZED_TABLES, TableDesign, block_limit, capacity, page_limit, tables_for
from simhash_filter.model.sketch import similarity

__all__ = ["add_index_parser"]

_HEX = re.compile(r"[0-9a-fA-F]{16}")



def _open(
    uri: str, k: int, *, write: bool, metadata: dict[str, Any] | None = None, max_age: str | None = None
) -> Backend:
    if uri_scheme(uri) == "file":
        if not write:
            uri = with_uri_option(uri, "readonly", "1")
        if max_age is not None:
            uri = with_uri_option(uri, "max_age", max_age)
    designs = [DEFAULTS.tables, *(name for name in SIZED_TABLES if name != DEFAULTS.tables)]
    if uri_scheme(uri) == "file":  # the design its header names first: an index is never read with another's tables
        from simhash_filter.index.backends.file import FileBackend

        stored = FileBackend.design_at(uri)
        if stored is not None:
            designs = [stored, *(name for name in designs if name != stored)]
    return _open_stored(uri, k, metadata, tuple(designs))


def _open_stored(uri: str, k: int, metadata: dict[str, Any] | None, designs: tuple[str, ...]) -> Backend:
    """The index at *uri* opened with the design it was built with: the first of *designs* a store accepts (a
    Redis index names its own; an on-disk index's header names it first)."""
    for name in designs:
        try:
            return open_backend(uri, k=k, design=TableDesign.parse(name), metadata=metadata)
        except DesignMismatchError:
            if name == designs[-1]:
                raise
    raise AssertionError("unreachable: the last design's error is raised")  # pragma: no cover


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _size(n: int) -> str:
    """``512B``, ``4.10kB``, ``1.23MB``: tqdm's formatter (3 significant digits, powers of 1000)."""
    from tqdm import tqdm

    return tqdm.format_sizeof(n, "B")


def _max_age(value: str) -> str:
    """``--max-age``: a number with its unit (``30d``); a bare number is refused, not taken as seconds."""
    from simhash_filter.index.backends.file import parse_age  # the file backend, imported when asked for

    try:
        parse_age(value, require_unit=True)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def cmd_stats(args: argparse.Namespace) -> int:
    with _open(args.index, args.max_distance, write=False) as backend:
        info = backend.info()
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
        return 0
    rows = [("index", f"{info.get('path', redact_uri(args.index))} ({info['backend']})")]
    counts = f"{info['entries']:,}"
    if "stored" in info:
        counts += f" (stored {info['stored']:,}; deleted {info['deleted']:,}; expired {info['expired']:,})"
    rows.append(("entries", counts))
    rows.append(("model", str(info["metadata"].get("model", "-"))))
    rows.append(("design", f"{info['design']} (k up to {info['k']})"))
    for name in ("created", "oldest", "newest"):
        if name in info:
            rows.append((name, _when(info[name])))
    if info.get("max_age_seconds"):
        rows.append(("max age", f"{info['max_age_seconds']:g} s"))
    if "disk_bytes" in info:
        rows.append(("disk", f"{_size(info['disk_bytes'])} (keys {_size(info['key_bytes'])})"))
    if "memory_bytes" in info:
        rows.append(("memory", f"{_size(info['memory_bytes'])} when open"))
    for name, value in rows:
        print(f"{name:<8} {value}")
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    """Print the stored pages near each query (a 16-hex fingerprint or an HTML file).

    The candidates within k (``-k``), nearest first, each with its sketch similarity to a page given as a file,
    and whether that verifies it (a bare fingerprint has no sketch: its candidates are listed unverified)."""
    page_model = PageModel(args)
    queries: list[tuple[str, int, bytes | None]] = []
    status = 0
    pages = False
    for arg in args.queries:
        if _HEX.fullmatch(arg) and not os.path.exists(arg):
            queries.append((arg, int(arg, 16), None))
            continue
        pages = True
        value, sketch, problem = page_model.read(arg)
        if value is None:
            print(f"simhash-filter: {arg}: {problem}", file=sys.stderr)
            status = 1
        else:
            queries.append((arg, value, sketch))
    metadata = page_model.metadata if pages else None  # pages must be fingerprinted by the index's model
    with _open(args.index, args.max_distance, write=False, metadata=metadata) as backend:
        # a Redis prefix never written has no model and no page: every query finds nothing
        index = (NearDuplicateIndex(args.max_distance, backend=backend, min_similarity=args.min_similarity)
                 if backend.sketch_bytes else None)  # fmt: skip
        for name, value, sketch in queries:
            found = [] if index is None else _found(index, value, sketch)
            if args.json:
                print(json.dumps({"query": name, "fingerprint": f"{value:016x}", "matches": [
                    {"url": key, "fingerprint": f"{fp:016x}", "distance": d, "similarity": sim, "verified": ok}
                    for key, d, fp, sim, ok in found]}))  # fmt: skip
                continue
            verified = sum(ok is True for *_, ok in found)
            what = f"{len(found)} candidate(s) within {args.max_distance}" + (
                "" if sketch is None else f", {verified} verified (similarity >= {args.min_similarity:g})"
            )
            print(f"{name}: {value:016x}: {what}")
            for key, d, fp, sim, _ in found:
                print(f"  {d}  {fp:016x}  {'' if sim is None else f'{sim:.2f}  '}{key}")
    return status


def _found(
    index: NearDuplicateIndex, value: int, sketch: bytes | None
) -> list[tuple[str, int, int, float | None, bool | None]]:
    """(url, distance, fingerprint, similarity, verified) of the stored pages near a query."""
    out: list[tuple[str, int, int, float | None, bool | None]] = []
    for c in index.backend.candidates(value, index.k, index.bound):
        words = index.backend.verify_bytes
        sim = None if sketch is None else similarity(sketch[:words], c.sketch[:words])
        verified = None  # found by the tables: a candidate; verified by the word sketch or, model v6, the spots
        if sketch is not None and sim is not None:
            spots = spots_of(sketch, c.sketch, words)
            rule = index.rule
            verified = bool(verdict(c.distance, True, sim, rule) or spots_verdict(c.distance, True, spots, rule))
        out.append((c.key, c.distance, c.fingerprint, sim, verified))
    return out


def cmd_export(args: argparse.Namespace) -> int:
    with _open(args.index, args.max_distance, write=False) as backend:
        try:
            out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115
        except OSError as exc:
            print(f"simhash-filter: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        try:
            for entry in backend.entries():
                record = {"url": entry.key, "fingerprint": f"{entry.fingerprint:016x}"}
                if entry.added is not None:
                    record["added"] = _when(entry.added)
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
        finally:
            if out is not sys.stdout:
                out.close()
    return 0


def cmd_rules(args: argparse.Namespace) -> int:
    """Print the URL rules and mirrors that crawls learned into the index's notes (``SIMHASH_AVOID``)."""
    from simhash_filter.crawl.urlrules import RuleBook, precision_bound

    with _open(args.index, args.max_distance, write=False) as backend:
        notes = backend.notes()
    book = RuleBook(min_examples=args.min_examples, min_precision=args.min_precision)
    book.merge(notes)
    verdicts = [v for v in book.verdicts() if args.all or v.active]
    if args.json:
        for v in verdicts:
            record = {"kind": v.kind, "host": v.host, "rule": v.rule, "examples": v.positives,
                      "against": v.negatives, "active": v.active,
                      "precision_bound": round(precision_bound(v.positives, v.negatives), 4)}  # fmt: skip
            print(json.dumps(record, ensure_ascii=False))
        return 0
    if not verdicts:
        print("no URL rules" + ("" if args.all else " active") + " (crawls learn them with SIMHASH_AVOID=True)")
    for v in verdicts:
        print(v.describe())
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with _open(args.index, args.max_distance, write=True) as backend:
        deleted = backend.delete(args.urls)
    print(f"deleted {deleted} fingerprint(s)")
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    with _open(args.index, args.max_distance, write=True, max_age=args.max_age) as backend:
        before = backend.info()
        backend.compact()
        after = backend.info()
    disk = f"; disk {_size(before['disk_bytes'])} -> {_size(after['disk_bytes'])}" if "disk_bytes" in before else ""
    counts = [info.get("stored", info["entries"]) for info in (before, after)]
    print(f"{counts[0]:,} -> {counts[1]:,} fingerprints{disk}")
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    """Store an index's pages again in the tables built for ``--expected-pages``, oldest first, each checked as a
    crawl checks it (so the new tables' blocks refuse a flood's pages as the old ones did); its notes (the URL
    rules' evidence) too.  A directory is rebuilt beside itself and swapped in; another store needs ``--into``."""
    import shutil

    from simhash_filter.index.backends.file import FileBackend

    design = TableDesign.parse(tables_for(args.expected_pages))
    in_place = args.into is None
    if in_place and uri_scheme(args.index) != "file":
        args.parser.error("a store other than a directory is rebuilt into another: give --into URI (a new prefix)")
    with _open(args.index, args.max_distance, write=True) as source:  # a directory stays locked meanwhile
        path = source.path.resolve() if in_place and isinstance(source, FileBackend) else None
        into = str(path.with_name(path.name + ".rebuild")) if path is not None else args.into
        if path is not None and os.path.exists(into):
            raise FileExistsError(f"{into} is left from a rebuild that did not finish: remove it, then try again")
        if path is not None and isinstance(source, FileBackend):  # in place, the tables stay where they were
            into = f"file://{quote(into)}?{source.disk.table_options}"
        target = open_backend(into, k=source.k, design=design, metadata=source.metadata)
        added: list[float] = [0.0]
        if isinstance(target, FileBackend):
            target.set_clock(lambda: added[0])
        index = NearDuplicateIndex(
            source.k,
            backend=target,
            min_similarity=DEFAULTS.min_similarity,
            per_table=DEFAULTS.candidates_per_table,
            duplicates=DEFAULTS.block_duplicates,
            block_pages=block_limit(design, args.expected_pages),
        )
        with index:
            if len(target):
                raise ValueError(f"{redact_uri(into)} is not empty: rebuild into a new index")
            pages = 0
            for entry in source.entries():
                added[0] = entry.added or 0.0
                index.add_and_candidates(entry.fingerprint, entry.key, entry.sketch or b"")
                pages += 1
            target.add_notes(source.notes())
            stored = len(index)
    if path is not None:
        old = path.with_name(path.name + ".old")
        os.rename(path, old)
        os.rename(path.with_name(path.name + ".rebuild"), path)
        shutil.rmtree(old)
    print(
        f"{pages:,} pages -> {stored:,} stored in {redact_uri(str(path or into))}: tables {design.name}, built for "
        f"{capacity(design):,} pages, taking up to {page_limit(design):,}"
        + ("" if in_place else f"; point SIMHASH_BACKEND at {redact_uri(into)}")
    )
    return 0


def _regular_file(index: str) -> str | None:
    """The path *index* names when it is an existing regular file (a feed, a page given by mistake): the store
    would only say that ``FILE/CURRENT`` is not a directory."""
    if "://" in index:
        if not index.lower().startswith("file://"):
            return None
        index = unquote(urlsplit(index).path)
    return index if os.path.isfile(index) else None


def _guarded(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Report an index that cannot be opened, read or changed (unreachable, locked, damaged, another model's,
    a bad URI, an operation its backend lacks) in one line naming it (exit status 1), not a traceback; other
    exceptions are bugs and keep theirs."""

    def run(args: argparse.Namespace) -> int:
        file = _regular_file(args.index)
        if file is not None:
            where = "a crawl's is .scrapy/simhash/<project>/<spider>, or JOBDIR/simhash"
            print(f"simhash-filter: index {file} is a file, not an index directory: give the directory a crawl or "
                  f"dedup --index wrote ({where})", file=sys.stderr)  # fmt: skip
            return 2
        try:
            return func(args)
        except BrokenPipeError:
            raise
        except (NotImplementedError, *open_errors()) as exc:  # type: ignore[misc]  # mypy reads no starred tuple
            index = redact_uri(args.index)
            print(f"simhash-filter: index {index}: {error_message(exc, args.index)}", file=sys.stderr)
            return 1

    return run


#: The example at the end of each subcommand's ``--help``.
EXAMPLES = {
    "stats": "simhash-filter index stats .scrapy/simhash/simhash-crawler/site\n"
    "simhash-filter index stats .scrapy/simhash/simhash-crawler/site --json",
    "query": "simhash-filter index query .scrapy/simhash/simhash-crawler/site page.html\n"
    "simhash-filter index query .scrapy/simhash/simhash-crawler/site d490dfee0514e20d -k 3 --json",
    "export": "simhash-filter index export .scrapy/simhash/simhash-crawler/site -o kept.jsonl",
    "rules": "simhash-filter index rules .scrapy/simhash/simhash-crawler/site\n"
    "simhash-filter index rules .scrapy/simhash/simhash-crawler/site --all --json",
    "delete": "simhash-filter index delete .scrapy/simhash/simhash-crawler/site "
    "https://a.example/x https://a.example/y",
    "rebuild": "simhash-filter index rebuild .scrapy/simhash/simhash-crawler/site --expected-pages 50000000\n"
    "simhash-filter index rebuild 'redis://localhost:6379/0?prefix=site' --expected-pages 50000000 "
    "--into 'redis://localhost:6379/0?prefix=site2'",
    "compact": "simhash-filter index compact .scrapy/simhash/simhash-crawler/site\n"
    "simhash-filter index compact .scrapy/simhash/simhash-crawler/site --max-age 30d   "
    "# also drop entries added 30+ days ago",
}


def _epilog(examples: str) -> str:
    lines = examples.splitlines()
    return ("examples:\n" if len(lines) > 1 else "example:\n") + "\n".join(f"  {line}" for line in lines)


def add_index_parser(
    sub: Any,
    threshold: argparse.ArgumentParser,
    model: argparse.ArgumentParser,
) -> None:
    """Add ``index`` and its subcommands to the ``simhash-filter`` parser."""
    p = sub.add_parser(
        "index",
        help="inspect and maintain a stored index (stats, query, export, rules, delete, compact, rebuild)",
        description=(
            "INDEX is a backend URI or a directory (a crawl's default index is .scrapy/simhash/<project>/<spider> "
            "in the project, or JOBDIR/simhash). stats, query and export open an on-disk index read-only."
        ),
        epilog=_epilog("\n".join(EXAMPLES.values()))
        + "\n\nexit status: 0 success, 1 the index cannot be opened or failed, 2 a usage error",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = p.add_subparsers(dest="index_command", required=True, metavar="SUBCOMMAND")

    def command(name: str, help: str, parents: list[argparse.ArgumentParser] | None = None) -> argparse.ArgumentParser:
        c = commands.add_parser(
            name,
            help=help,
            description=help[0].upper() + help[1:] + ".",
            parents=parents or [],
            epilog=_epilog(EXAMPLES[name]),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        c.add_argument("index", metavar="INDEX", help="backend URI or index directory")
        if not parents:
            c.set_defaults(max_distance=DEFAULTS.max_distance)
        c.set_defaults(parser=c)
        return c

    c = command("stats", "what an index holds: entries, model, dates, disk and memory")
    c.add_argument("--json", action="store_true", help="print the facts as JSON")
    c.set_defaults(func=_guarded(cmd_stats))

    c = command("query", "the stored pages within k of fingerprints or HTML pages", [threshold, model])
    c.add_argument("queries", nargs="+", metavar="QUERY", help="16-hex-digit fingerprint or HTML file")
    c.add_argument("--json", action="store_true", help="one JSON object per query")
    c.set_defaults(func=_guarded(cmd_query))

    c = command("export", "every stored page as JSON Lines: url, fingerprint, added")
    c.add_argument("-o", "--output", metavar="OUT", help="output file (default: stdout)")
    c.set_defaults(func=_guarded(cmd_export))

    c = command("rules", "the URL rules and mirror hosts that crawls learned (SIMHASH_AVOID), with their evidence")
    c.add_argument("--all", action="store_true", help="also the rules still learning and the withdrawn ones")
    c.add_argument(
        "--min-examples",
        type=int,
        default=5,
        metavar="N",
        help="examples a rule needs to be active, as SIMHASH_AVOID_MIN_EXAMPLES (default: 5)",
    )
    c.add_argument(
        "--min-precision",
        type=float,
        default=0.8,
        metavar="P",
        help="lower 95%% bound of its precision a rule needs to be active, as SIMHASH_AVOID_MIN_PRECISION "
        "(default: 0.8)",
    )
    c.add_argument("--json", action="store_true", help="one JSON object per rule")
    c.set_defaults(func=_guarded(cmd_rules))

    c = command("delete", "forget the stored fingerprints of these URLs")
    c.add_argument("urls", nargs="+", metavar="URL", help="key (URL) of a stored page")
    c.set_defaults(func=_guarded(cmd_delete))

    c = command("compact", "rewrite the index without deleted and expired fingerprints")
    c.add_argument(
        "--max-age",
        type=_max_age,
        metavar="AGE",
        help="also drop fingerprints older than AGE: a number and a unit, s, m, h, d or w (e.g. 12h, 30d)",
    )
    c.set_defaults(func=_guarded(cmd_compact))

    c = command("rebuild", "store an index's pages again, in the tables built for another number of pages")
    c.add_argument(
        "--expected-pages",
        type=int,
        required=True,
        metavar="N",
        help="the pages the new tables are built for, as SIMHASH_EXPECTED_PAGES",
    )
    c.add_argument("--into", metavar="URI", help="a new index to store them in (default: the directory, swapped in)")
    c.set_defaults(func=_guarded(cmd_rebuild))
