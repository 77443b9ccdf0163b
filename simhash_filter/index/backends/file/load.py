"""Loading a generation: its headers checked, its records verified and their fingerprints, sketches, times
(and refusals) kept in memory, a torn tail told from damage, its tombstones read."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simhash_filter.errors import CorruptIndexError
from simhash_filter.index.backends.base import MetadataMismatchError, check_metadata, earlier_version
from simhash_filter.index.backends.file.directory import KINDS
from simhash_filter.index.backends.file.osfiles import pread, release_freed_memory
from simhash_filter.index.backends.file.records import (
    CHUNK,
    DELETED_MAGIC,
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
from simhash_filter.index.tables import is_count

if TYPE_CHECKING:
    from simhash_filter.index.backends.file.disktables import DiskTables
    from simhash_filter.index.backends.file.rows import FileRows
    from simhash_filter.index.backends.memory.tables import BoundedTables

logger = logging.getLogger("simhash_filter.index.backends.file")


class GenerationLoader:
    """Reads the current generation of *rows*' directory into *rows*, *disk*'s run files and *tables*; creates the
    index (of the *requested* metadata, sketches of *sketch_bytes*) if there is none."""

    def __init__(
        self,
        rows: FileRows,
        tables: BoundedTables,
        disk: DiskTables,
        *,
        requested: Mapping[str, Any] | None,
        sketch_bytes: int,
    ) -> None:
        self._rows = rows
        self._tables = tables
        self._disk = disk
        self._directory = rows.directory
        self._requested = None if requested is None else dict(requested)
        self._sketch_bytes = sketch_bytes
        self.path = rows.path
        self.design = tables.design
        self._readonly = rows.readonly

    def load(self) -> None:
        """Open the current generation (creating the index if there is none), verify it, build the tables."""
        r = self._rows
        opened = self._directory.open_generation()
        if opened is None:
            if self._readonly:
                raise self._directory.no_index()
            self._directory.create_index(self._requested or {}, self._rows.clock(), self._sketch_bytes)
            opened = self._directory.open_generation()
            if opened is None:  # pragma: no cover - CURRENT was just written, and the lock is held
                raise CorruptIndexError(f"{self.path}: CURRENT disappeared while the index was created")
        generation, r.fds = opened
        if not self._readonly:
            self._directory.remove_stale(generation)  # what a compaction that died left behind
        r.generation = generation
        paths = {kind: self._directory.file(kind, generation) for kind in KINDS}
        fields = read_header(r.fds["records"], paths["records"], MAGIC)
        r.salt = int(fields.get("salt", -1))
        r.created = float(fields.get("created", 0.0))
        r.stored_k = fields.get("k")
        r.format = fields["format"]
        r.length_bits = length_bits(r.format)
        r.stored_design = fields.get("design")
        stored = fields.get("metadata") or {}
        try:
            check_metadata(stored, self._requested)
        except MetadataMismatchError as exc:
            raise MetadataMismatchError(
                f"{exc} - the index {self.path} holds fingerprints of another model, which cannot be compared with "
                "this one's: use a new index location (or delete this one) to start afresh, or go back to the "
                "settings it was built with"
            ) from None
        r.metadata = dict(stored)
        self._use_sketches(paths["records"], stored.get("sketch_bytes", 0), fields.get("record_bytes"))
        for kind, magic in (("urls", URLS_MAGIC), ("deleted", DELETED_MAGIC)):
            if read_header(r.fds[kind], paths[kind], magic).get("salt") != r.salt:
                raise CorruptIndexError(f"{paths[kind]} does not belong to {paths['records']} (another index's file)")
        self._load_records(paths["records"])
        self._load_tombstones(paths["deleted"], r.stored)
        release_freed_memory()

    def _use_sketches(self, path: Path, sketch_bytes: Any, record_bytes: Any) -> None:
        """Keep sketches of the stored *sketch_bytes* (the index's metadata says) in records of *record_bytes* (the
        header says); an index without sketches was written by an earlier version."""
        r = self._rows
        if not is_count(sketch_bytes):
            raise CorruptIndexError(f"{path}: the header is damaged (sketch_bytes {sketch_bytes!r})")
        if not sketch_bytes:
            raise MetadataMismatchError(earlier_version(f"the index {path.parent}", f"rm -r {path.parent}"))
        record = record_dtype(sketch_bytes)
        if record_bytes != record.itemsize:
            raise CorruptIndexError(
                f"{path}: the header is damaged (records of {record_bytes!r} bytes, but a {sketch_bytes}-byte "
                f"sketch makes them {record.itemsize})"
            )
        r.configure(sketch_bytes, self._tables.buffer_size)
        r.record = record

    def _load_records(self, path: Path) -> None:
        """Read and verify the records, keeping the fingerprints, sketches and times of the intact ones; cut
        a torn tail (when writable); sort the fingerprints into the tables."""
        r = self._rows
        fd = r.fds["records"]
        record = r.record
        size = os.fstat(fd).st_size
        # The keys' size after the records': a writer appends a key before its record, so every record seen
        # has its key (a read-only open takes a consistent snapshot while the writer goes on).
        urls_size = os.fstat(r.fds["urls"]).st_size
        total = (size - HEADER_SIZE) // record.itemsize
        r.sketch_base = total  # no sketches reserved before it is known whose come from the records
        r.reserve(total)
        good = first = self._disk.open_runs(total)  # the rows in run files are not read here (tables on disk)
        end = self._key_end(path, first)
        for start, chunk in record_chunks(fd, path, first, total, record):
            ok = record_checks(chunk, r.salt) == chunk["check"]
            expected = np.empty(len(chunk), dtype=np.uint64)
            expected[0] = end
            lengths = key_lengths(chunk, r.length_bits)
            np.add(chunk["offset"][:-1], lengths[:-1], out=expected[1:])
            ok &= chunk["offset"] == expected
            ok &= chunk["offset"] + lengths <= np.uint64(urls_size)
            bad = np.flatnonzero(~ok)
            intact = len(chunk) if len(bad) == 0 else int(bad[0])
            r.fingerprints[start : start + intact] = chunk["fp"][:intact]
            r.times[start : start + intact] = chunk["added"][:intact]
            r.refusals[start : start + intact] = refusals(chunk[:intact], r.length_bits)
            base = start - r.sketch_base
            r.sketches[base : base + intact] = chunk["sketch"][:intact]
            good += intact
            if intact:
                end = int(chunk["offset"][intact - 1] + lengths[intact - 1])
            if intact < len(chunk):
                self._check_tail_is_torn(path, start + intact, total, urls_size)
                break
            if self._disk.tables_on_disk and not self._readonly and good - self._tables.sealed >= self._disk.spill_rows:
                r.stored = good  # written as a run file now: the sketches of a large index never all in memory
                r.url_end = end
                self._tables.seal()
                r.reserve(total)  # a spill leaves room for a buffer's sketches: the next chunk's are more
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
                os.ftruncate(r.fds["urls"], end)
        r.url_end = end
        r.stored = good
        self._check_refusals(path)
        if good - self._tables.sealed >= self._tables.buffer_size:
            self._tables.seal()

    def _key_end(self, path: Path, rows: int) -> int:
        """Where the keys of the first *rows* rows end in the keys file (checked against their last record)."""
        r = self._rows
        if not rows:
            return HEADER_SIZE
        ((_, last),) = record_chunks(r.fds["records"], path, rows - 1, rows, r.record)
        if record_checks(last, r.salt)[0] != last["check"][0]:
            raise CorruptIndexError(f"{path}: record {rows - 1} is damaged (its check fails)")
        return int(last["offset"][0] + key_lengths(last, r.length_bits)[0])

    def _check_refusals(self, path: Path) -> None:
        """Keep the refusals of the rows loaded if they are of this backend's tables (the design the header names);
        else a reader drops them and a writer is refused.  A writer of an index whose pages record no refusal makes
        its headers name its design (and an empty index's format that of its design) first."""
        r = self._rows
        refused = bool(r.refusals[: r.stored].any())
        wide = format_for(self.design.n_tables) == WIDE_FORMAT and r.format != WIDE_FORMAT and not r.stored
        if not self._readonly and not refused and (wide or r.stored_design != self.design.name):
            fmt = WIDE_FORMAT if wide else r.format  # an empty index's rows are written wide
            self._directory.rewrite_headers(r.generation, r.fds, fmt)
            r.format, r.length_bits, r.stored_design = fmt, length_bits(fmt), self.design.name
        if r.stored_design == self.design.name or not refused:
            return
        if not self._readonly:
            raise MetadataMismatchError(
                f"{path}: the index was built with the table design {r.stored_design}, and its pages record "
                f"which of those tables refused them, so it cannot take pages with the design {self.design.name}: "
                f"open it with the design {r.stored_design} (the SIMHASH_EXPECTED_PAGES it was built for), read it "
                "read-only, or rebuild it for another size with `simhash-filter index rebuild`"
            )
        logger.debug("simhash index %s: design %s, not %s: the refusals of its pages are ignored",
                     self.path, self.design.name, r.stored_design)  # fmt: skip
        r.refusals[: r.stored] = 0

    def _check_tail_is_torn(self, path: Path, first_bad: int, total: int, urls_size: int) -> None:
        """Return if the records from *first_bad* on are a torn write (each cut short, never written - a sector
        of zeros - or intact but with its key past the end of the keys file, which the disk did not keep);
        raise :class:`CorruptIndexError` if one of them was damaged (a complete record whose check fails, or
        that does not follow the one before) or an intact record follows."""
        r = self._rows
        damaged: int | None = None
        for start, chunk in record_chunks(r.fds["records"], path, first_bad, total, r.record, CHUNK // 16):
            intact = record_checks(chunk, r.salt) == chunk["check"]
            keyed = chunk["offset"] + key_lengths(chunk, r.length_bits) <= np.uint64(urls_size)
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
            at = HEADER_SIZE + damaged * r.record.itemsize
            raise CorruptIndexError(
                f"{path}: record {damaged} (bytes {at}..{at + r.record.itemsize}) is damaged: it is complete but "
                "its check fails (a torn write leaves a record cut short or unwritten, never changed) - the file "
                "was changed or damaged; it cannot be trusted (restore a copy, or start a new index)"
            )

    def _load_tombstones(self, path: Path, n: int) -> None:
        r = self._rows
        fd = r.fds["deleted"]
        data = pread(fd, max(0, os.fstat(fd).st_size - HEADER_SIZE), HEADER_SIZE)
        whole = len(data) - len(data) % TOMBSTONE.size
        if whole < len(data) and not self._readonly:  # a tombstone cut short: its delete did not return
            os.ftruncate(fd, HEADER_SIZE + whole)
        stones = np.frombuffer(data[:whole], dtype="<u8")
        for row, check in zip(stones[0::2].tolist(), stones[1::2].tolist(), strict=True):
            if check != tombstone_check(row, r.salt) or row >= n:
                raise CorruptIndexError(f"{path}: a tombstone is damaged")
            r.dead.add(row)
