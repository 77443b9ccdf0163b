"""``simhash-filter dedup``: a stream of pages (JSON Lines or WARC files) in, one decision a page out, through
:func:`simhash_filter.batch.dedup.dedup`; its inputs, output file, progress bar and summary line."""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from simhash_filter.batch.dedup import (
    MALFORMED,
    IndexFailed,
    Outcome,
    Summary,
    WorkersFailed,
    auto_workers,
    dedup,
    open_index,
)
from simhash_filter.batch.inputs import WARC, input_files, same_file
from simhash_filter.batch.reader import InputReader
from simhash_filter.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    by_reason,
    filter_config,
    stdin_bytes,
    warn,
)
from simhash_filter.config import DEFAULTS, FilterConfig
from simhash_filter.errors import FINGERPRINT_ERROR
from simhash_filter.index.backends import error_message, open_errors, redact_uri

if TYPE_CHECKING:
    from simhash_filter.batch.warc import WarcCounts

EXIT_MALFORMED = 2
#: How much larger than its .gz file an input of HTML pages is taken to be (for the default --workers).
GZIP_RATIO = 5
#: ``dedup`` names this many malformed lines on stderr; the summary counts them all (a binary file is
#: thousands of "lines").
MALFORMED_SHOWN = 20


@dataclass(frozen=True)
class _Input:
    """``dedup``'s input: the reader of its files or of standard input, and about how many bytes of pages they
    hold (for the default ``--workers``)."""

    reader: InputReader
    html_bytes: int | None = None

    @property
    def warc(self) -> WarcCounts | None:
        """What reading WARC input counted (None when no WARC file was read)."""
        return self.reader.counts if self.reader.warc_files else None


def _open_inputs(paths: list[str], output: str | None, config: FilterConfig) -> _Input:
    """The files of ``dedup``'s inputs (:func:`simhash_filter.batch.inputs.input_files`; the output left out),
    or standard input (``-``, alone)."""
    max_bytes = config.fingerprint.max_bytes + 1  # the work cap, and a byte to know it
    if paths == ["-"]:
        return _Input(InputReader([], max_bytes=max_bytes, stdin=stdin_bytes()))
    if "-" in paths:
        raise UsageError("standard input ('-') cannot be read with other inputs")
    for path in paths:
        if output not in (None, "-") and os.path.isfile(path) and same_file(path, output):
            raise UsageError(f"the output {output} is the input file {path}: write it elsewhere")
    reader = InputReader(input_files(paths, exclude=[output]), max_bytes=max_bytes)
    size = reader.size or 0
    return _Input(reader, size + reader.compressed * (GZIP_RATIO - 1))


class _Output:
    """Where ``dedup`` writes: standard output, or a file written beside its final name (a hidden
    ``.NAME.*.partial``) and renamed over it by :meth:`commit`, so that a failed run leaves no
    complete-looking output and never touches the file before it succeeded.  A name that exists and is not
    a regular file (``/dev/null``, a FIFO) is written in place."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._partial: str | None = None
        self._file: IO[bytes] | None = None
        self._gzip: gzip.GzipFile | None = None
        if path is None or path == "-":
            self.stream: IO[str] = sys.stdout
            return
        if not os.path.exists(path) or os.path.isfile(path):
            head, name = os.path.split(path)
            self._partial = os.path.join(head, f".{name}.{os.getpid()}.partial")
        self._file = open(self._partial or path, "wb")  # noqa: SIM115 - closed by commit() or discard()
        if path.endswith(".gz"):
            self._gzip = gzip.GzipFile(fileobj=self._file, mode="wb", filename="", mtime=0)
        self.stream = io.TextIOWrapper(self._gzip or self._file, encoding="utf-8", newline="\n")

    @property
    def is_file(self) -> bool:
        return self._file is not None

    def write(self, text: str) -> None:
        try:
            self.stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _WriteError(exc) from exc

    def commit(self) -> None:
        """Flush and close; give the output its name."""
        try:
            self.stream.flush()
            if self._file is None:
                return
            if self._gzip is not None:
                self._gzip.close()  # writes the gzip trailer; the file under it stays open
            self._file.flush()
            if self._partial is not None:
                os.fsync(self._file.fileno())
                os.replace(self._partial, self.path)  # type: ignore[arg-type]
                self._partial = None
            self.stream.close()
            self._file.close()
        except OSError as exc:
            raise _WriteError(exc) from exc

    def discard(self) -> None:
        """Close without giving the output its name (after a failure): the partial file is removed."""
        if self._file is not None:
            for stream in (self.stream, self._file):
                with suppress(OSError, ValueError):
                    stream.close()
        if self._partial is not None:
            with suppress(OSError):
                os.unlink(self._partial)
            self._partial = None


class _WriteError(Exception):
    """Writing the output failed (a full disk, an unwritable file)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))


def _progress(outcomes: Iterator[Outcome], enabled: bool, source: _Input) -> Iterator[Outcome]:
    """A progress bar on stderr: of files (also .gz), bytes read of their size, with a rate and ETA, and
    the pages done; of standard input or a pipe, the pages done."""
    if not enabled:
        yield from outcomes
        return
    from tqdm import tqdm

    reader = source.reader
    if reader.size is None:
        with tqdm(outcomes, unit=" pages", file=sys.stderr, dynamic_ncols=True) as bar:
            yield from bar
        return
    position = reader.position
    with tqdm(total=reader.size, unit="B", unit_scale=True, file=sys.stderr, dynamic_ncols=True) as bar:
        for pages, outcome in enumerate(outcomes, 1):
            bar.set_postfix_str(f"{pages} pages", refresh=False)
            bar.update(position() - bar.n)
            yield outcome


def _by_reason(counts: dict[str, int]) -> str:
    return f" ({by_reason(counts)})" if counts else ""


def _summary_line(s: Summary, seconds: float, warc: WarcCounts | None = None) -> str:
    rate = s.pages / seconds if seconds > 0 else 0.0
    pages = f"dedup: {s.pages} pages and {s.malformed} malformed lines"
    if warc is not None and warc.pages == s.pages and not s.malformed:
        pages = f"dedup: {s.pages} pages of {warc.records} WARC records in {warc.files} files"
    elif warc is not None:  # JSON Lines and WARC files
        pages += f" (and {warc.records} WARC records in {warc.files} files)"
    line = (
        f"{pages} in {seconds:.1f} s ({rate:.1f} pages/s): "
        f"{s.kept} kept, {s.duplicates} near-duplicates, {sum(s.skipped.values())} skipped{_by_reason(s.skipped)}"
    )
    if warc is not None:
        skipped = sum(warc.skipped.values())
        line += f"; {skipped} records skipped{_by_reason(warc.skipped)}, {len(warc.damaged)} damaged"
    if s.candidates_max:
        line += f"; at most {s.candidates_max} candidates verified per page"
    return line


def _damage_reporter(warc: WarcCounts | None) -> Callable[[], None]:
    """A function that names on stderr the damage found in WARC files since its last call (the first
    :data:`MALFORMED_SHOWN`; then one line says more are counted)."""
    shown = 0

    def report() -> None:
        nonlocal shown
        if warc is None:
            return
        for damage in warc.damaged[shown:]:
            shown += 1
            if shown <= MALFORMED_SHOWN:
                warn(str(damage))
            elif shown == MALFORMED_SHOWN + 1:
                warn("more damaged WARC files: counted in the summary, not shown")

    return report


def cmd_dedup(args: argparse.Namespace) -> int:
    config = filter_config(args)
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    summary = Summary()
    start = time.perf_counter()
    # A failure before the first page is read is one line; one after it, one line and the summary so far.
    with ExitStack() as stack:
        try:
            source = _open_inputs(args.inputs, args.output, config)
        except OSError as exc:
            warn(f"cannot open {exc.filename or ' '.join(args.inputs)}: {exc.strerror or exc}")
            return EXIT_FAILED
        reader = source.reader
        if args.workers is None:
            args.workers = auto_workers(source.html_bytes)
        try:
            out = _Output(args.output)
        except OSError as exc:
            warn(f"cannot write {args.output}: {exc.strerror or exc}")
            return EXIT_FAILED
        stack.callback(out.discard)  # after a commit: nothing to do
        try:
            index = stack.enter_context(open_index(config, args.index))
        except open_errors() as exc:  # unreachable, locked, damaged, another model's, a bad URI
            warn(f"cannot open index {redact_uri(args.index)!r}: {error_message(exc, args.index)}")
            return EXIT_FAILED
        outcomes = dedup(reader, config=config, workers=args.workers, index=index)
        report_damage = _damage_reporter(reader.counts)
        try:
            for outcome in _progress(outcomes, args.progress and sys.stderr.isatty(), source):
                summary.count(outcome)
                report_damage()
                if outcome.status == MALFORMED:
                    name, line, _ = reader.where(outcome.line)
                    if summary.malformed <= MALFORMED_SHOWN:
                        warn(f"{name}:{line}: malformed line: {outcome.reason}")
                    elif summary.malformed == MALFORMED_SHOWN + 1:
                        warn(f"{name}: more malformed lines: counted in the summary, not shown")
                elif outcome.status == FINGERPRINT_ERROR:
                    name, place, kind = reader.where(outcome.line)
                    where = f"{name}: page {place}" if kind == WARC else f"{name}:{place}"
                    warn(f"{where}: {outcome.url}: fingerprinting failed: {outcome.reason}")
                out.write(json.dumps(outcome.record()) + "\n")
            report_damage()
            out.commit()
        except BrokenPipeError:
            raise
        except _WriteError as exc:
            message = f"{args.output or 'standard output'}: cannot write: {exc}"
            return _failed(out, summary, start, message, source.warc)
        except WorkersFailed as exc:
            return _failed(out, summary, start, f"{exc}; try --workers 1", source.warc)
        except IndexFailed as failed:  # the index failed part way (a full disk, a Redis server gone)
            cause = failed.__cause__ or failed
            where = f"index {redact_uri(args.index)!r} failed after {summary.lines} {_unit(source)}"
            return _failed(out, summary, start, f"{where}: {error_message(cause, args.index)}", source.warc)
        except (OSError, EOFError) as exc:  # a truncated .gz, an unreadable file
            name = reader.current or " ".join(args.inputs)
            message = f"{name}: read error after {summary.lines} {_unit(source)}: {exc}"
            return _failed(out, summary, start, message, source.warc)
    summary.candidates_max = index.candidates_max
    print(_summary_line(summary, time.perf_counter() - start, source.warc), file=sys.stderr)
    damaged = source.warc is not None and source.warc.damaged
    return EXIT_MALFORMED if summary.malformed or damaged else EXIT_OK


def _unit(source: _Input) -> str:
    warc = source.warc
    return "pages" if warc is not None and warc.pages == source.reader.items else "lines"


def _failed(out: _Output, summary: Summary, start: float, message: str, warc: WarcCounts | None = None) -> int:
    """A ``dedup`` run that stopped: the reason and the summary so far on stderr; an output file is not
    written (a file of that name is left as it was)."""
    warn(message + (f" ({out.path} not written)" if out.is_file else ""))
    print(_summary_line(summary, time.perf_counter() - start, warc), file=sys.stderr)
    return EXIT_FAILED


DEDUP_EPILOG = """\
examples:
  simhash-filter dedup pages.jsonl.gz --output result.jsonl
  simhash-filter dedup pages.jsonl --index pages.idx --workers 4   # remember pages across runs
  simhash-filter dedup crawl/ --output result.jsonl   # WARC: a .warc(.gz) file, a directory, a glob 'crawl/*.warc.gz'
  simhash-filter dedup a.warc.gz b.warc more/ --output result.jsonl   # several inputs, read in path order
  simhash-filter dedup - < pages.jsonl.gz | grep -v '"duplicate_of": null'

exit status: 0 success, 1 the input, output or index failed, 2 a usage error, malformed input lines or a
  damaged WARC file"""


def add_dedup_parser(sub: Any, threshold: argparse.ArgumentParser, model: argparse.ArgumentParser) -> None:
    """Add ``dedup`` to the ``simhash-filter`` parser (``threshold``: -k and -t, ``model``: the model options)."""
    p = sub.add_parser(
        "dedup",
        parents=[model, threshold],
        help="flag near-duplicates in a JSON Lines file of pages, or in WARC files",
        description=(
            "Read JSON Lines objects with 'url' and 'html', or the HTML responses of WARC files; write one line "
            'per input line or page, in order: {"url", "fingerprint", "duplicate_of", "distance"} (of a WARC '
            'page, also "warc_date" and "warc_record_id"). Each page is checked against all pages kept before it.'
        ),
        epilog=DEDUP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="JSON Lines files (gzipped or not) and WARC files (.warc, .warc.gz); directories (their .jsonl, "
        ".jsonl.gz, .ndjson, .warc, .warc.gz files at any depth, not hidden, not the output); quoted globs "
        "('crawl/*.warc.gz'); all read once, in path order. '-': standard input alone (JSON Lines or WARC, "
        "gzipped or not)",
    )
    p.add_argument("-o", "--output", metavar="OUT", help="output file, .gz compressed if so named (default: stdout)")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="fingerprint in N processes; output is the same for any N (default: one per CPU for input "
        "files of 16 MB or more, else 1)",
    )
    p.add_argument("--index", default="memory://", metavar="URI", help="index backend (default: memory://)")
    add_index_options(p)
    p.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="no progress bar (it is shown only when stderr is a terminal: of an input file, bytes read of its size "
        "with an ETA; of standard input, pages done)",
    )
    p.set_defaults(func=cmd_dedup, parser=p)


def add_index_options(p: argparse.ArgumentParser) -> None:
    """The options of the index's bound and size, shared by the commands that open an index for pages (``dedup``,
    ``serve``): an index keeps them, so that every process that shares it opens it alike."""
    p.add_argument(
        "--candidates-per-table",
        type=int,
        default=DEFAULTS.candidates_per_table,
        metavar="N",
        help="the bound on a check's work: at most N candidates of each table are verified, the nearest "
        f"(default: {DEFAULTS.candidates_per_table})",
    )
    p.add_argument(
        "--block-duplicates",
        type=int,
        default=DEFAULTS.block_duplicates,
        metavar="N",
        help="a table's block of the index takes no more pages when N of their candidates there verify: a flood "
        f"stops filling the index (default: {DEFAULTS.block_duplicates})",
    )
    p.add_argument(
        "--expected-pages",
        type=int,
        default=DEFAULTS.expected_pages,
        metavar="N",
        help="the pages the index is built for: its tables follow, so that a check's work stays bounded; it takes "
        f"at most twice what its tables are built for (default: {DEFAULTS.expected_pages:,}: five tables, "
        "up to 8,388,608 pages)",
    )
