"""Loading a generation: its headers checked, its records verified and their fingerprints, sketches, times
(and refusals) kept in memory, a torn tail told from damage, its tombstones read."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from simhash_filter.index.backends.base import MetadataMismatchError, check_metadata
from simhash_filter.index.backends.file.directory import KINDS, IndexDirectory
from simhash_filter.index.backends.file.errors import CorruptIndexError
from simhash_filter.index.backends.file.osfiles import pread, release_freed_memory
from simhash_filter.index.backends.file.records import (
    CHUNK,
    DELETED_MAGIC,
    FORMAT,
    HEADER_SIZE,
    MAGIC,
    TOMBSTONE,
    URLS_MAGIC,
    WIDE_FORMAT,
    format_for,
    key_lengths,
    length_bits,
    read_header,
    record_checks,
    record_chunks,
    record_dtype,
    refusals,
    tombstone_check,
    unwritten,
)

__all__ = ["GenerationLoader"]

logger = logging.getLogger("simhash_filter.index.backends.file")


class GenerationLoader(IndexDirectory):
    """Reads the current generation into the memory backend's arrays, for
    :class:`~simhash_filter.index.backends.file.FileBackend` (a mixin)."""

    _fds: dict[str, int]
    _generation_number: int
    _salt: int
    _created: float
    _stored_k: Any
    _metadata: dict[str, Any]
    _record: np.dtype
    _sketches: np.ndarray
    _fps: np.ndarray
    _times: np.ndarray
    _n: int
    _url_end: int
    _buffer_size: int
    _dead: set[int]
    _refused: np.ndarray
    _sealed: int
    _sketch_base: int
    _spill_rows: int
    tables_on_disk: bool
    #: :meth:`~.disktables.DiskTables._open_runs`: the rows whose columns come from run files.
    _open_runs: Callable[[int], int]
    #: The format and the design the records file's header names; the bits of a record's key length in that format,
    #: and the format a writer writes (format 3 becomes 4; an empty index takes its design's).
    _format: int
    _stored_design: Any
    _length_bits: int
    _write_format: int
    #: Whether the headers must be rewritten (:meth:`_rewrite_headers`) before a row with refusals is written.
    _headers_stale: bool

    def _load(self) -> None:
        """Open the current generation (creating the index if there is none), verify it, build the tables."""
        opened = self._open_generation()
        if opened is None:
            if self._readonly:
                raise self._no_index()
            self._create_index()
            opened = self._open_generation()
            if opened is None:  # pragma: no cover - CURRENT was just written, and the lock is held
                raise CorruptIndexError(f"{self.path}: CURRENT disappeared while the index was created")
        generation, self._fds = opened
        if not self._readonly:
            self._remove_stale(generation)  # what a compaction that died left behind
        self._generation_number = generation
        paths = {kind: self._file(kind, generation) for kind in KINDS}
        fields = read_header(self._fds["records"], paths["records"], MAGIC)
        self._salt = int(fields.get("salt", -1))
        self._created = float(fields.get("created", 0.0))
        self._stored_k = fields.get("k")
        self._format = fields["format"]
        self._length_bits = length_bits(self._format)
        self._stored_design = fields.get("design")
        stored = fields.get("metadata") or {}
        try:
            check_metadata(stored, self._requested)
        except MetadataMismatchError as exc:
            raise MetadataMismatchError(
                f"{exc} - the index {self.path} holds fingerprints of another model, which cannot be compared with "
                "this one's: use a new index location (or delete this one) to start afresh, or go back to the "
                "settings it was built with"
            ) from None
        self._metadata = dict(stored)
        self._use_sketches(paths["records"], stored.get("sketch_bytes", 0), fields.get("record_bytes"))
        for kind, magic in (("urls", URLS_MAGIC), ("deleted", DELETED_MAGIC)):
            if read_header(self._fds[kind], paths[kind], magic).get("salt") != self._salt:
                raise CorruptIndexError(f"{paths[kind]} does not belong to {paths['records']} (another index's file)")
        self._load_records(paths["records"])
        self._load_tombstones(paths["deleted"], self._n)
        release_freed_memory()

    def _use_sketches(self, path: Path, sketch_bytes: Any, record_bytes: Any) -> None:
        """Keep sketches of the stored *sketch_bytes* (the index's metadata says; 0: none) in records of
        *record_bytes* (the header says)."""
        if isinstance(sketch_bytes, bool) or not isinstance(sketch_bytes, int) or sketch_bytes < 0:
            raise CorruptIndexError(f"{path}: the header is damaged (sketch_bytes {sketch_bytes!r})")
        record = record_dtype(sketch_bytes)
        if record_bytes != record.itemsize:
            raise CorruptIndexError(
                f"{path}: the header is damaged (records of {record_bytes!r} bytes, but a {sketch_bytes}-byte "
                f"sketch makes them {record.itemsize})"
            )
        self._sketch_bytes = sketch_bytes
        self._record = record
        self._sketches = np.empty((0, sketch_bytes), dtype=np.uint8)

    def _load_records(self, path: Path) -> None:
        """Read and verify the records, keeping the fingerprints, sketches and times of the intact ones; cut
        a torn tail (when writable); sort the fingerprints into the tables."""
        fd = self._fds["records"]
        record = self._record
        size = os.fstat(fd).st_size
        # The keys' size after the records': a writer appends a key before its record, so every record seen
        # has its key (a read-only open takes a consistent snapshot while the writer goes on).
        urls_size = os.fstat(self._fds["urls"]).st_size
        total = (size - HEADER_SIZE) // record.itemsize
        self._sketch_base = total  # no sketches reserved before it is known whose come from the records
        self._reserve(total)
        good = first = self._open_runs(total)  # the rows in run files are not read here (tables on disk)
        end = self._key_end(path, first)
        for start, chunk in record_chunks(fd, path, first, total, record):
            ok = record_checks(chunk, self._salt) == chunk["check"]
            expected = np.empty(len(chunk), dtype=np.uint64)
            expected[0] = end
            lengths = key_lengths(chunk, self._length_bits)
            np.add(chunk["offset"][:-1], lengths[:-1], out=expected[1:])
            ok &= chunk["offset"] == expected
            ok &= chunk["offset"] + lengths <= np.uint64(urls_size)
            bad = np.flatnonzero(~ok)
            intact = len(chunk) if len(bad) == 0 else int(bad[0])
            self._fps[start : start + intact] = chunk["fp"][:intact]
            self._times[start : start + intact] = chunk["added"][:intact]
            self._refused[start : start + intact] = refusals(chunk[:intact], self._length_bits)
            if self._sketch_bytes:
                base = start - self._sketch_base
                self._sketches[base : base + intact] = chunk["sketch"][:intact]
            good += intact
            if intact:
                end = int(chunk["offset"][intact - 1] + lengths[intact - 1])
            if intact < len(chunk):
                self._check_tail_is_torn(path, start + intact, total, urls_size)
                break
            if self.tables_on_disk and not self._readonly and good - self._sealed >= self._spill_rows:
                self._n = good  # written as a run file now: the sketches of a large index never all in memory
                self._url_end = end
                self._seal()
                self._reserve(total)  # a spill leaves room for a buffer's sketches: the next chunk's are more
        torn_bytes = size - HEADER_SIZE - good * record.itemsize
        if torn_bytes or urls_size > end:
            logger.log(
                logging.DEBUG if self._readonly else logging.WARNING,
                "simhash index %s: %d bytes of records and %d bytes of keys at the end were cut short "
                "(the writer stopped mid-write); %s",
                self.path,
                torn_bytes,
                urls_size - end,
                "ignored (read-only)" if self._readonly else "removed",
            )
            if not self._readonly:
                os.ftruncate(fd, HEADER_SIZE + good * record.itemsize)
                os.ftruncate(self._fds["urls"], end)
        self._url_end = end
        self._n = good
        self._check_refusals(path)
        if good - self._sealed >= self._buffer_size:
            self._seal()

    def _key_end(self, path: Path, rows: int) -> int:
        """Where the keys of the first *rows* rows end in the keys file (checked against their last record)."""
        if not rows:
            return HEADER_SIZE
        ((_, last),) = record_chunks(self._fds["records"], path, rows - 1, rows, self._record)
        if record_checks(last, self._salt)[0] != last["check"][0]:
            raise CorruptIndexError(f"{path}: record {rows - 1} is damaged (its check fails)")
        return int(last["offset"][0] + key_lengths(last, self._length_bits)[0])

    def _check_refusals(self, path: Path) -> None:
        """Keep the refusals of the rows loaded if they are of this backend's tables (the design the header names);
        else a reader drops them (every table holds every row, as in format 3: its candidates are still bounded)
        and a writer is refused, for the rows it would add could not say which tables refused them."""
        self._write_format = self._format if self._format == WIDE_FORMAT else FORMAT
        if format_for(self.design.n_tables) == WIDE_FORMAT and self._write_format != WIDE_FORMAT and not self._n:
            self._write_format = WIDE_FORMAT  # nothing stored yet: its rows are written wide
            if not self._readonly:
                self._rewrite_headers(self._generation_number, self._fds)
                self._format, self._length_bits = WIDE_FORMAT, length_bits(WIDE_FORMAT)
                self._stored_design = self.design.name
        self._headers_stale = self._format != self._write_format or self._stored_design != self.design.name
        if self._stored_design == self.design.name or not self._refused[: self._n].any():
            return
        if not self._readonly:
            raise MetadataMismatchError(
                f"{path}: the index was built with the table design {self._stored_design}, and its pages record "
                f"which of those tables refused them, so it cannot take pages with the design {self.design.name}: "
                f"open it with the design {self._stored_design} (the SIMHASH_EXPECTED_PAGES it was built for), read it "
                "read-only, or rebuild it for another size with `simhash-filter index rebuild`"
            )
        logger.debug("simhash index %s: design %s, not %s: the refusals of its pages are ignored",
                     self.path, self.design.name, self._stored_design)  # fmt: skip
        self._refused[: self._n] = 0

    def _check_tail_is_torn(self, path: Path, first_bad: int, total: int, urls_size: int) -> None:
        """Return if the records from *first_bad* on are a torn write (each cut short, never written - a sector
        of zeros - or intact but with its key past the end of the keys file, which the disk did not keep);
        raise :class:`CorruptIndexError` if one of them was damaged (a complete record whose check fails, or
        that does not follow the one before) or an intact record follows."""
        damaged: int | None = None
        for start, chunk in record_chunks(self._fds["records"], path, first_bad, total, self._record, CHUNK // 16):
            intact = record_checks(chunk, self._salt) == chunk["check"]
            keyed = chunk["offset"] + key_lengths(chunk, self._length_bits) <= np.uint64(urls_size)
            later = intact & keyed
            if start == first_bad:
                if later[0] and damaged is None:
                    damaged = first_bad  # intact, but its key does not follow the one before
                later[0] = False
            if later.any():
                raise CorruptIndexError(
                    f"{path}: record {first_bad} is damaged but later records are intact - the file was changed or "
                    "damaged; it cannot be trusted (restore a copy, or start a new index)"
                )
            wrong = np.flatnonzero(~intact & ~unwritten(chunk, start))
            if damaged is None and len(wrong):
                damaged = start + int(wrong[0])
        if damaged is not None:
            at = HEADER_SIZE + damaged * self._record.itemsize
            raise CorruptIndexError(
                f"{path}: record {damaged} (bytes {at}..{at + self._record.itemsize}) is damaged: it is complete but "
                "its check fails (a torn write leaves a record cut short or unwritten, never changed) - the file "
                "was changed or damaged; it cannot be trusted (restore a copy, or start a new index)"
            )

    def _load_tombstones(self, path: Path, n: int) -> None:
        fd = self._fds["deleted"]
        data = pread(fd, max(0, os.fstat(fd).st_size - HEADER_SIZE), HEADER_SIZE)
        whole = len(data) - len(data) % TOMBSTONE.size
        if whole < len(data) and not self._readonly:  # a tombstone cut short: its delete did not return
            os.ftruncate(fd, HEADER_SIZE + whole)
        stones = np.frombuffer(data[:whole], dtype="<u8")
        for row, check in zip(stones[0::2].tolist(), stones[1::2].tolist(), strict=True):
            if check != tombstone_check(row, self._salt) or row >= n:
                raise CorruptIndexError(f"{path}: a tombstone is damaged")
            self._dead.add(row)
