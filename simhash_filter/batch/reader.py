"""Reading the inputs of a ``dedup`` run: the files :func:`~simhash_filter.batch.inputs.input_files` found (or
standard input) as one stream of input items, JSON lines and WARC pages."""

from __future__ import annotations

import bisect
import gzip
import io
import os
from collections.abc import Iterator, Sequence
from typing import IO, cast

from simhash_filter.batch.dedup import Page
from simhash_filter.batch.inputs import GZIP_MAGIC, JSONL, WARC, kind
from simhash_filter.batch.warc import WarcCounts, iter_warc_stream

__all__ = ["InputReader"]


def _unzipped(raw: IO[bytes]) -> IO[bytes]:
    """``raw`` (a buffered binary stream), decompressed when its first bytes are gzip's, whatever its name."""
    if raw.peek(2)[:2] == GZIP_MAGIC:  # type: ignore[attr-defined]
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb"))
    return raw


class InputReader:
    """The input items of several files (:func:`~simhash_filter.batch.inputs.input_files`) or of standard input,
    in order: JSON lines (bytes, gunzipped by their magic bytes) and WARC pages (standard input is WARC when its
    first bytes say so), what is not a page counted in :attr:`counts`; :meth:`where` names an item's place."""

    def __init__(self, files: Sequence[str], *, max_bytes: int | None = None, stdin: IO[bytes] | None = None) -> None:
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
        self._starts.append(self._items + 1)
        self._names.append(name)
        stream: IO[bytes] = raw
        if known is None:  # standard input: the first bytes tell
            if not hasattr(raw, "peek"):
                raw = cast(IO[bytes], io.BufferedReader(cast(io.RawIOBase, raw)))
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
