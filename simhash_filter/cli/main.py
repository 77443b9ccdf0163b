"""The ``simhash-filter`` command line: ``fingerprint``, ``compare`` and ``dedup`` here; ``index``, ``report`` and
``calibrate`` in :mod:`~simhash_filter.cli.index`, :mod:`~simhash_filter.cli.report` and
:mod:`~simhash_filter.cli.calibrate`.

Every default comes from :data:`simhash_filter.config.DEFAULTS`, the same object the crawler reads.
This module only parses arguments, reads and writes files, and prints; the work is done by
:mod:`~simhash_filter.model.fingerprint`, :mod:`~simhash_filter.model.explain` and :mod:`~simhash_filter.batch.dedup`.

Exit status (each command's ``--help`` ends with its own): ``fingerprint``, ``dedup`` and ``index``: 0 on
success; 1 when a page could not be fingerprinted, a file could not be read or written, or an index could
not be opened or failed (one line on stderr each, no traceback); 2 for a usage error, or when ``dedup`` met
malformed input lines or a damaged WARC file.  ``compare`` answers a question, like ``cmp``: 0 near-duplicate,
1 distinct, 2 trouble (a usage error, an input that cannot be read or fingerprinted).
"""

from __future__ import annotations

import argparse
import errno
import gzip
import io
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from simhash_filter import __version__
from simhash_filter.batch.dedup import (
    ERROR,
    MALFORMED,
    IndexFailed,
    Outcome,
    Summary,
    WorkersFailed,
    auto_workers,
    dedup,
    open_index,
)
from simhash_filter.batch.inputs import WARC, input_files
from simhash_filter.batch.reader import InputReader
from simhash_filter.cli.calibrate import add_calibrate_parser
from simhash_filter.cli.common import UsageError, filter_config, fingerprint_config
from simhash_filter.cli.fetch import Fetched, FetchError, fetch, is_url
from simhash_filter.cli.index import add_index_parser
from simhash_filter.cli.report import add_report_parser
from simhash_filter.config import DEFAULTS, FilterConfig
from simhash_filter.index.backends import error_message, open_errors, redact_uri
from simhash_filter.index.nearduplicate import is_candidate, verdict
from simhash_filter.index.tables import TableDesign, hamming
from simhash_filter.model import core
from simhash_filter.model.explain import Explanation, FeatureDifference, explain_features
from simhash_filter.model.fingerprint import Fingerprint, Fingerprinter, Status
from simhash_filter.model.sketch import similarity

if TYPE_CHECKING:
    from simhash_filter.batch.warc import WarcCounts

PROG = "simhash-filter"
HEX_FINGERPRINT = re.compile(r"[0-9a-fA-F]{16}")
EXIT_OK, EXIT_FAILED = 0, 1
EXIT_MALFORMED = 2
#: ``compare``'s answer, as ``cmp`` gives it: the same (near-duplicate), different (distinct), or trouble.
EXIT_NEAR_DUPLICATE, EXIT_DISTINCT, EXIT_TROUBLE = 0, 1, 2
#: How much larger than its .gz file an input of HTML pages is taken to be (for the default --workers).
GZIP_RATIO = 5
#: ``dedup`` names this many malformed lines on stderr; the summary counts them all (a binary file is
#: thousands of "lines").
MALFORMED_SHOWN = 20


def _warn(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr)


def _read_bytes(path: str) -> bytes:
    """The first ``max_bytes + 1`` bytes of a file (the work cap, and one byte to know a page was cut): a
    600 MB file or ``/dev/zero`` is not read whole."""
    limit = DEFAULTS.fingerprint.max_bytes + 1
    if path == "-":
        return _stdin().read(limit)
    with open(path, "rb") as f:
        return f.read(limit)


def _stdin() -> IO[bytes]:
    if sys.stdin is None:  # started with standard input closed (`<&-`)
        raise OSError(errno.EBADF, "standard input is closed", "-")
    return sys.stdin.buffer


# --- fingerprint ---------------------------------------------------------------------------------


def cmd_fingerprint(args: argparse.Namespace) -> int:
    """One line per file: ``HEX  PATH``, or with ``--json`` one JSON object (JSON Lines); a file that cannot be
    read or fingerprinted is named on stderr (and, with ``--json``, is an object with a ``status``)."""
    fingerprinter = Fingerprinter(fingerprint_config(args))
    status = EXIT_OK
    for path in args.files:
        try:
            data = _read_bytes(path)
        except OSError as exc:
            _warn(f"{path}: cannot read: {exc.strerror or exc}")
            if args.json:
                print(json.dumps({"file": path, "fingerprint": None, "status": "unreadable",
                                  "error": exc.strerror or str(exc)}, ensure_ascii=False))  # fmt: skip
            status = EXIT_FAILED
            continue
        fp = fingerprinter.fingerprint(data)
        if fp.hex is None:
            _warn(f"{path}: cannot fingerprint: {fp.status}")
            status = EXIT_FAILED
        if args.json:
            record: dict[str, Any] = {"file": path, "fingerprint": fp.hex}
            if fp.hex is None:
                record["status"] = str(fp.status)
            print(json.dumps(record, ensure_ascii=False))
        elif fp.hex is not None:
            print(f"{fp.hex}  {path}")
    return status


# --- compare -------------------------------------------------------------------------------------


def _is_fingerprint(arg: str) -> bool:
    return arg != "-" and not os.path.exists(arg) and HEX_FINGERPRINT.fullmatch(arg) is not None


def _format_weight(w: float) -> str:
    return "-" if w == 0.0 else f"{w:.3g}"


def _print_differences(title: str, diffs: Sequence[FeatureDifference]) -> None:
    print(f"{title} (weight in A / in B):")
    if not diffs:
        print("  (none)")
        return
    width = min(40, max(len(d.name) for d in diffs))
    for d in diffs:
        side = {"a": "only A", "b": "only B", None: "both"}[d.only_in]
        print(f"  {d.name:<{width}}  {_format_weight(d.weight_a):>7} / {_format_weight(d.weight_b):<7}  {side}")


def _print_explanation(e: Explanation) -> None:
    print(
        f"weight difference: {e.text_share:.0%} text, {e.structure_share:.0%} structure "
        f"(weighted Jaccard similarity {e.weighted_jaccard:.2f})"
    )
    _print_differences("text features that differ most", e.text)
    _print_differences("structure features that differ most", e.structure)


def _compared_fingerprint(arg: str, page: Fetched | None, fingerprinter: Fingerprinter) -> Fingerprint:
    if page is None:
        return Fingerprint(int(arg, 16), Status.OK)
    return fingerprinter.fingerprint(page.body, page.charset)


def _compared_page(arg: str) -> Fetched:
    """The bytes of a file, of standard input or of an http(s) URL (with the charset its header names)."""
    if is_url(arg):
        return fetch(arg, DEFAULTS.fingerprint.max_bytes + 1)
    return Fetched(_read_bytes(arg), None)


def _unreadable(arg: str, exc: OSError) -> str:
    """Why an argument that may be a file or a fingerprint (``compare``, ``index query``) cannot be used: it is
    neither a file that can be read nor a fingerprint."""
    why = "no such file" if exc.errno == errno.ENOENT else f"cannot read ({exc.strerror or exc})"
    return why + ("" if arg == "-" else ", and not a 16-hex-digit fingerprint")


@dataclass(frozen=True)
class _Decision:
    """The two-stage decision about two fingerprinted pages."""

    distance: int
    table_in_common: bool
    similarity: float | None  # None: a side is a bare fingerprint (no sketch)
    decision: str  # "near-duplicate", "distinct" or "candidate"
    k: int
    threshold: float

    @property
    def line(self) -> str:
        d, k, t, s = self.distance, self.k, self.threshold, self.similarity
        if d > k or not self.table_in_common:
            why = f"k={k}" if d > k else f"within k={k} but no table in common"
            return f"distance {d}: distinct ({why})"
        if s is None:
            return f"distance {d}: candidate (k={k}; compare the pages themselves to verify)"
        return f"distance {d}, similarity {s:.2f}: {self.decision} (k={k}, t={t:g})"

    @property
    def exit_status(self) -> int:
        """0 near-duplicate (and a candidate: the one-stage decision, no sketch to verify it), 1 distinct."""
        return EXIT_DISTINCT if self.decision == "distinct" else EXIT_NEAR_DUPLICATE


def _decide(a: Fingerprint, b: Fingerprint, config: FilterConfig) -> _Decision:
    assert a.value is not None and b.value is not None
    d, k, t = hamming(a.value, b.value), config.max_distance, config.min_similarity
    common = TableDesign.parse(config.tables).agree_on_a_lead(a.value, b.value)
    s = None if a.sketch is None or b.sketch is None else similarity(a.sketch, b.sketch)
    if s is None:  # a bare fingerprint: only stage one can be told
        decision = "candidate" if is_candidate(d, common, config) else "distinct"
    else:
        decision = "near-duplicate" if verdict(d, common, s, config) else "distinct"
    return _Decision(d, common, s, decision, k, t)


def _compare_record(names: Sequence[str], fps: Sequence[Fingerprint], x: _Decision) -> dict[str, Any]:
    """``compare --json``: the inputs, both fingerprints and the decision with its k and threshold."""
    return {
        "a": names[0],
        "b": names[1],
        "fingerprint_a": fps[0].hex,
        "fingerprint_b": fps[1].hex,
        "distance": x.distance,
        "table_in_common": x.table_in_common,
        "similarity": x.similarity,
        "decision": x.decision,
        "k": x.k,
        "threshold": x.threshold,
    }


def _explanation_record(e: Explanation) -> dict[str, Any]:
    def features(diffs: Sequence[FeatureDifference]) -> list[dict[str, Any]]:
        return [{"name": d.name, "weight_a": d.weight_a, "weight_b": d.weight_b, "only_in": d.only_in} for d in diffs]

    return {
        "text_share": e.text_share,
        "structure_share": e.structure_share,
        "weighted_jaccard": e.weighted_jaccard,
        "text": features(e.text),
        "structure": features(e.structure),
    }


def _explained(a: Fetched, b: Fetched, config: FilterConfig, top: int) -> Explanation:
    """:func:`explain` of two pages, each read in the charset its server named (a URL's Content-Type)."""
    fingerprinter = Fingerprinter(config.fingerprint)
    return explain_features(*fingerprinter.analyze(a.body, a.charset), *fingerprinter.analyze(b.body, b.charset),
                            top=top)  # fmt: skip


def cmd_compare(args: argparse.Namespace) -> int:
    config = filter_config(args)
    names = (args.a, args.b)
    if names == ("-", "-"):
        raise UsageError("only one of A and B can be '-' (standard input)")
    given = [_is_fingerprint(arg) for arg in names]
    if args.explain and any(given):
        raise UsageError("--explain needs two HTML files, not fingerprints")
    if args.top < 0:
        raise UsageError(f"--top must be >= 0, got {args.top}")
    pages: list[Fetched | None] = []
    for arg, is_fp in zip(names, given, strict=True):
        try:
            pages.append(None if is_fp else _compared_page(arg))
        except FetchError as exc:
            _warn(f"{arg}: {exc}")
            return EXIT_TROUBLE
        except OSError as exc:
            _warn(f"{arg}: {_unreadable(arg, exc)}")
            return EXIT_TROUBLE
    explanation = None
    if args.explain:
        a_page, b_page = pages
        assert a_page is not None and b_page is not None  # --explain with a fingerprint was refused
        explanation = _explained(a_page, b_page, config, args.top)
        fps = [explanation.a, explanation.b]
    else:
        fingerprinter = Fingerprinter(config.fingerprint)
        fps = [_compared_fingerprint(arg, data, fingerprinter) for arg, data in zip(names, pages, strict=True)]
    failed = [(arg, fp) for arg, fp in zip(names, fps, strict=True) if fp.value is None]
    for arg, fp in failed:
        _warn(f"{arg}: cannot fingerprint: {fp.status}")
    if failed:
        return EXIT_TROUBLE
    decision = _decide(fps[0], fps[1], config)
    if args.json:
        record = _compare_record(names, fps, decision)
        if explanation is not None:
            record["explanation"] = _explanation_record(explanation)
        print(json.dumps(record, ensure_ascii=False))
        return decision.exit_status
    print(decision.line)
    if explanation is not None:
        _print_explanation(explanation)
    return decision.exit_status


# --- dedup ---------------------------------------------------------------------------------------


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
        return _Input(InputReader([], max_bytes=max_bytes, stdin=_stdin()))
    if "-" in paths:
        raise UsageError("standard input ('-') cannot be read with other inputs")
    for path in paths:
        if output not in (None, "-") and os.path.isfile(path) and _same_file(path, output):
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
        if os.path.exists(path) and not os.path.isfile(path):
            self._file = open(path, "wb")  # noqa: SIM115 - closed by commit() or discard()
        else:
            head, name = os.path.split(path)
            fd, self._partial = tempfile.mkstemp(prefix=f".{name}.", suffix=".partial", dir=head or ".")
            self._file = os.fdopen(fd, "wb")
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
                os.chmod(self._partial, 0o666 & ~_umask())
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _same_file(a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` name one file (through links too)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


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
    by_reason = ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items()))
    return f" ({by_reason})" if by_reason else ""


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
                _warn(str(damage))
            elif shown == MALFORMED_SHOWN + 1:
                _warn("more damaged WARC files: counted in the summary, not shown")

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
            _warn(f"cannot open {exc.filename or ' '.join(args.inputs)}: {exc.strerror or exc}")
            return EXIT_FAILED
        reader = source.reader
        if args.workers is None:
            args.workers = auto_workers(source.html_bytes)
        try:
            out = _Output(args.output)
        except OSError as exc:
            _warn(f"cannot write {args.output}: {exc.strerror or exc}")
            return EXIT_FAILED
        stack.callback(out.discard)  # after a commit: nothing to do
        try:
            index = stack.enter_context(open_index(config, args.index))
        except open_errors() as exc:  # unreachable, locked, damaged, another model's, a bad URI
            _warn(f"cannot open index {redact_uri(args.index)!r}: {error_message(exc, args.index)}")
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
                        _warn(f"{name}:{line}: malformed line: {outcome.reason}")
                    elif summary.malformed == MALFORMED_SHOWN + 1:
                        _warn(f"{name}: more malformed lines: counted in the summary, not shown")
                elif outcome.status == ERROR:
                    name, place, kind = reader.where(outcome.line)
                    where = f"{name}: page {place}" if kind == WARC else f"{name}:{place}"
                    _warn(f"{where}: {outcome.url}: fingerprinting failed: {outcome.reason}")
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
            exc = failed.__cause__ or failed
            where = f"index {redact_uri(args.index)!r} failed after {summary.lines} {_unit(source)}"
            return _failed(out, summary, start, f"{where}: {error_message(exc, args.index)}", source.warc)
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
    _warn(message + (f" ({out.path} not written)" if out.is_file else ""))
    print(_summary_line(summary, time.perf_counter() - start, warc), file=sys.stderr)
    return EXIT_FAILED


def _page_model(
    args: argparse.Namespace,
) -> tuple[Callable[[str], tuple[int | None, bytes | None, str | None]], dict[str, Any]]:
    """For ``index query``: a function that fingerprints an HTML file, and the model's index metadata."""
    fingerprinter = Fingerprinter(fingerprint_config(args))

    def fingerprint_page(path: str) -> tuple[int | None, bytes | None, str | None]:
        try:
            fp = fingerprinter.fingerprint(_read_bytes(path))
        except OSError as exc:
            return None, None, _unreadable(path, exc)
        if fp.value is None:
            return None, None, f"cannot fingerprint: {fp.status}"
        return fp.value, fp.sketch, None

    return fingerprint_page, filter_config(args).index_metadata()


# --- parser --------------------------------------------------------------------------------------

FINGERPRINT_EPILOG = """\
examples:
  simhash-filter fingerprint page.html other.html        # d490dfee0514e20d  page.html
  curl -s https://example.org/ | simhash-filter fingerprint -
  simhash-filter fingerprint --json pages/*.html > fingerprints.jsonl

exit status: 0 every file fingerprinted, 1 a file could not be read or fingerprinted, 2 a usage error"""

COMPARE_EPILOG = """\
examples:
  simhash-filter compare a.html b.html              # distance 2, similarity 0.93: near-duplicate (k=10, t=0.75)
  simhash-filter compare a.html 3f0c1e22a9d47b10    # a file or a 16-hex-digit fingerprint on each side
  simhash-filter compare https://a.example/x https://b.example/x   # or a URL: one GET each
  simhash-filter compare a.html b.html --explain    # + the features that pushed the two apart
  simhash-filter compare a.html b.html --json
  if simhash-filter compare a.html b.html >/dev/null; then echo near-duplicate; fi

exit status (as cmp's):
  0  near-duplicate (with a fingerprint on a side: a candidate, which no sketch can verify)
  1  distinct
  2  trouble: an input that is neither a readable file nor a fingerprint, a page that cannot be
     fingerprinted, a usage error"""

DEDUP_EPILOG = """\
examples:
  simhash-filter dedup pages.jsonl.gz --output result.jsonl
  simhash-filter dedup pages.jsonl --index pages.idx --workers 4   # remember pages across runs
  simhash-filter dedup crawl/ --output result.jsonl   # WARC: a .warc(.gz) file, a directory, a glob 'crawl/*.warc.gz'
  simhash-filter dedup a.warc.gz b.warc more/ --output result.jsonl   # several inputs, read in path order
  simhash-filter dedup - < pages.jsonl.gz | grep -v '"duplicate_of": null'

exit status: 0 success, 1 the input, output or index failed, 2 a usage error, malformed input lines or a
  damaged WARC file"""


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

    p = sub.add_parser(
        "compare",
        parents=[model, threshold],
        help="Hamming distance and decision for two pages (exit status 0 near-duplicate, 1 distinct)",
        description="Print the Hamming distance of two pages and whether they are near-duplicates.",
        epilog=COMPARE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("a", metavar="A", help="HTML file, http(s) URL or 16-hex-digit fingerprint ('-' for standard input)")
    p.add_argument("b", metavar="B", help="HTML file, http(s) URL or 16-hex-digit fingerprint")
    p.add_argument("--explain", action="store_true", help="list the features that pushed the two pages apart")
    p.add_argument("--top", type=int, default=10, metavar="N", help="features listed per kind (default: 10)")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: both fingerprints, distance, similarity, decision, k and threshold",
    )
    p.set_defaults(func=cmd_compare, parser=p, failed=EXIT_TROUBLE)

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
    p.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="no progress bar (it is shown only when stderr is a terminal: of an input file, bytes read of its size "
        "with an ETA; of standard input, pages done)",
    )
    p.set_defaults(func=cmd_dedup, parser=p)

    add_index_parser(sub, threshold, model, _page_model)
    add_report_parser(sub, threshold, model)
    add_calibrate_parser(sub, threshold, model)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UsageError as exc:
        args.parser.error(str(exc))  # exits with status 2
    except BrokenPipeError:  # `simhash-filter dedup pages.jsonl | head`: stop quietly
        with suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return getattr(args, "failed", EXIT_FAILED)  # compare: 2, trouble (1 would say: distinct)
    except KeyboardInterrupt:
        return 130
