"""Which files a batch run reads: one rule for ``simhash-filter dedup`` and the Spark job
(``simhash_filter.batch.spark``, which applies it to the names a Hadoop file system lists).

- A file named on the command line is read whatever its name: as WARC when it ends with ``.warc`` or ``.warc.gz``
  (any case), else as JSON Lines (gzipped or not: the first bytes tell).
- A directory gives its input files at any depth: the names ending with one of :data:`WARC_SUFFIXES` or
  :data:`JSONL_SUFFIXES` (any case), except those under a name that starts with ``.`` or ``_`` (hidden files,
  ``dedup``'s unfinished ``.OUT.*.partial``, Spark's ``_SUCCESS`` and ``_temporary``: Hadoop's own rule), and
  except the run's output file.
- A glob (``*``, ``?``, ``**`` for any depth) gives the files it matches, a directory it matches as above.
- The files of all inputs are read once each, sorted by path (the order the Spark job numbers pages in, so both
  decide the same), whatever order the inputs are given in.
"""

from __future__ import annotations

import bisect
import errno
import glob
import gzip
import io
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import IO

from simhash_filter.batch.dedup import Page

__all__ = [
    "GZIP_MAGIC",
    "JSONL",
    "JSONL_SUFFIXES",
    "WARC",
    "WARC_SUFFIXES",
    "InputReader",
    "input_files",
    "is_glob",
    "is_input_name",
    "kind",
]

#: WARC files (compared in lower case).
WARC_SUFFIXES = (".warc", ".warc.gz")
#: JSON Lines files taken from a directory (compared in lower case).
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz", ".json.gz")
#: The two kinds of input file.
WARC, JSONL = "warc", "jsonl"


def kind(name: str) -> str:
    """:data:`WARC` for a name ending with ``.warc`` or ``.warc.gz`` (any case), else :data:`JSONL`."""
    return WARC if name.lower().endswith(WARC_SUFFIXES) else JSONL


def is_glob(path: str) -> bool:
    return "*" in path or "?" in path


def is_input_name(relative: str) -> bool:
    """Whether a directory takes the file at ``relative`` (its path under the directory, ``/``-separated) as
    input: a JSON Lines or WARC name, with no part that starts with ``.`` or ``_``."""
    parts = relative.replace(os.sep, "/").split("/")
    if any(part.startswith((".", "_")) for part in parts):
        return False
    return parts[-1].lower().endswith(WARC_SUFFIXES + JSONL_SUFFIXES)


def _files_under(directory: str) -> list[str]:
    found = []
    for parent, dirs, names in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for name in names:
            path = os.path.join(parent, name)
            if is_input_name(os.path.relpath(path, directory)):
                found.append(path)
    return found


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def input_files(paths: Sequence[str], *, exclude: Iterable[str | None] = ()) -> list[str]:
    """The local files the inputs ``paths`` name (the module's rule), once each, sorted by absolute path.

    A file a directory or a glob gives that is one of ``exclude`` (the run's output) is left out; a file named
    itself is not (the caller refuses it).  Raises :class:`FileNotFoundError` naming the input when a file does
    not exist, a directory holds no input file or a glob matches none.
    """
    excluded = [path for path in exclude if path and path != "-" and os.path.exists(path)]

    def kept(path: str) -> bool:
        return not any(_same_file(path, other) for other in excluded)

    found: dict[str, str] = {}  # absolute path -> the name it is read under
    for given in paths:
        if os.path.isdir(given):
            files = [path for path in _files_under(given) if kept(path)]
            if not files:
                raise FileNotFoundError(errno.ENOENT, "no .jsonl or .warc files in this directory", given)
        elif os.path.exists(given):
            files = [given]
        elif not is_glob(given):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), given)
        else:
            files = []
            for match in glob.glob(given, recursive=True):
                files.extend(_files_under(match) if os.path.isdir(match) else [match])
            files = [path for path in files if kept(path)]
            if not files:
                raise FileNotFoundError(errno.ENOENT, "no files match", given)
        for path in files:
            found.setdefault(os.path.abspath(path), path)
    return [found[key] for key in sorted(found)]


#: The first bytes of a gzip stream.
GZIP_MAGIC = b"\x1f\x8b"


def _unzipped(raw: IO[bytes]) -> IO[bytes]:
    """``raw`` (a buffered binary stream), decompressed when its first bytes are gzip's, whatever its name."""
    if raw.peek(2)[:2] == GZIP_MAGIC:  # type: ignore[attr-defined]
        return gzip.GzipFile(fileobj=raw, mode="rb")
    return raw


class InputReader:
    """The input items of several files (:func:`input_files`) or of standard input, in order: the lines of
    JSON Lines files (bytes), the pages of WARC files (:class:`~simhash_filter.batch.warc.WarcPage`), what is
    not a page counted in :attr:`counts`.

    A JSON Lines file or standard input is gunzipped when it starts with gzip's magic bytes; standard input
    whose (gunzipped) first bytes are ``WARC/`` is read as WARC.  Files are opened one at a time as the items are
    read; :meth:`where` names the file and line (or page) of an item's number.
    """

    def __init__(self, files: Sequence[str], *, max_bytes: int | None = None, stdin: IO[bytes] | None = None) -> None:
        from simhash_filter.batch.warc import WarcCounts

        self.files = list(files)
        self.max_bytes = max_bytes
        self.counts = WarcCounts()
        self._stdin = stdin
        self._sizes = [_size(path) for path in self.files]
        self._done = 0
        self._current: IO[bytes] | None = None
        self._starts: list[int] = []  # the number of each opened file's first item
        self._names: list[str] = []
        self._items = 0
        self._warc: set[str] = set()

    @property
    def size(self) -> int | None:
        """The files' total size in bytes (as stored; None for standard input)."""
        return None if self._stdin is not None else sum(self._sizes)

    @property
    def compressed(self) -> int:
        """How many of :attr:`size`'s bytes are in ``.gz`` files."""
        return sum(size for path, size in zip(self.files, self._sizes, strict=True) if path.lower().endswith(".gz"))

    @property
    def warc_files(self) -> int:
        """The WARC files (or WARC standard input) opened so far."""
        return self.counts.files

    @property
    def items(self) -> int:
        """The items read so far."""
        return self._items

    @property
    def current(self) -> str | None:
        """The file being read (or read last; ``-``: standard input); None before the first."""
        return self._names[-1] if self._names else None

    def position(self) -> int:
        """Bytes of the files read so far (for a progress bar)."""
        current = self._current
        return self._done + (current.tell() if current is not None and not current.closed else 0)

    def where(self, number: int) -> tuple[str, int, str]:
        """``(file, place in it, kind)`` of item ``number`` (from 1): a line number, or a page number in a WARC
        file."""
        i = bisect.bisect_right(self._starts, number) - 1
        name = self._names[i]
        return name, number - self._starts[i] + 1, WARC if name in self._warc else JSONL

    def __iter__(self) -> Iterator[bytes | Page]:
        if self._stdin is not None:
            yield from self._read(self._stdin, "-", None)
            return
        for path, size in zip(self.files, self._sizes, strict=True):
            with open(path, "rb") as raw:
                self._current = raw
                yield from self._read(raw, path, kind(path))
            self._current = None
            self._done += size

    def _read(self, raw: IO[bytes], name: str, known: str | None) -> Iterator[bytes | Page]:
        from simhash_filter.batch.warc import iter_warc_stream

        self._starts.append(self._items + 1)
        self._names.append(name)
        stream: IO[bytes] = raw
        if known is None:  # standard input: the first bytes tell
            if not hasattr(raw, "peek"):
                raw = io.BufferedReader(raw)  # type: ignore[arg-type]
            stream = _unzipped(raw)
            known = WARC if stream.peek(5)[:5] == b"WARC/" else JSONL  # type: ignore[attr-defined]
        if known == WARC:
            self._warc.add(name)
            self.counts.files += 1
            for page in iter_warc_stream(stream, name, self.counts, max_bytes=self.max_bytes):
                self._items += 1
                yield page
            return
        if stream is raw:
            stream = _unzipped(raw)
        for line in stream:
            self._items += 1
            yield line


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0  # opening it will say why
