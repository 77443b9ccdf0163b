"""The on-disk store's rows: the columns in memory and the open generation's log, the
:class:`~simhash_filter.index.backends.memory.tables.RowSource` of its tables.

A row's fingerprint, refusals, added time and (past the run files) sketch are in memory; its key is read from the
keys file through its record, and the sketch of a row in a run file from its record, each checked.  Appending writes
the keys and then the records before the row counts as stored.  Deleted rows, and rows older than ``max_age``, are
hidden."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from simhash_filter.errors import CorruptIndexError
from simhash_filter.index.backends.base import MetadataMismatchError
from simhash_filter.index.backends.file.directory import IndexDirectory
from simhash_filter.index.backends.file.osfiles import pread, write_all
from simhash_filter.index.backends.file.records import (
    HEADER_SIZE,
    LENGTH_BITS,
    RECORD,
    RECORD_STRUCT,
    damaged_key,
    key_check,
    length_refused,
    max_key_bytes,
    record_check,
    record_checks,
    record_dtype,
)
from simhash_filter.index.backends.memory.rows import Columns
from simhash_filter.index.backends.memory.tables import Part


class LowerTables(Protocol):
    """What the rows call of the tables kept on disk below them (:class:`~.disktables.DiskTables`)."""

    def lower_buckets(self, fingerprint: int, leads: list[int]) -> Iterator[Part]: ...

    def spill(self) -> bool: ...

#: The most keys :attr:`FileRows.keys_read` keeps (about 8 MB of 60-character URLs: a crowd of 65,536 look-alikes
#: reads its candidates' keys once).
_KEYS_KEPT = 65_536


class FileRows(Columns):
    """The rows of the generation open in *directory* (its files' descriptors in :attr:`fds`, its header's fields
    as attributes, filled by :class:`~simhash_filter.index.backends.file.load.GenerationLoader`)."""

    def __init__(
        self,
        directory: IndexDirectory,
        refused_dtype: np.dtype,
        *,
        sync: bool = False,
        max_age: float = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(refused_dtype, timed=True)
        self.directory = directory
        self.path: Path = directory.path
        self.readonly = directory.readonly
        self.sync = sync
        self.max_age = max_age
        self.clock = clock
        #: The run files of the older rows (set once built; None: every row's tables are in memory).
        self.disk: LowerTables | None = None
        #: The open generation: its number, its files' descriptors, its header's fields.
        self.generation = 0
        self.fds: dict[str, int] = {}
        self.salt = 0
        self.created = 0.0
        self.stored_k: Any = None
        self.metadata: dict[str, Any] = {}
        self.record = record_dtype(0)
        #: The format and the design the records file's header names, and the bits of a record's key length there.
        self.format = 0
        self.stored_design: Any = None
        self.length_bits = LENGTH_BITS
        #: Where the next key is written in the keys file.
        self.url_end = HEADER_SIZE

    def clear(self) -> None:
        super().clear()
        self.dead: set[int] = set()
        #: Keys read (checked) of this generation's rows, by row: a row's key never changes within a generation,
        #: and a crowd of look-alikes shows page after page the same few thousand candidates (at most
        #: :data:`_KEYS_KEPT`, then forgotten at once).
        self.keys_read: dict[int, str] = {}

    def file_name(self) -> Path:
        """The records file of the open generation."""
        return self.directory.file("records", self.generation)

    # -- appending -------------------------------------------------------------------------------

    def keep(self, fingerprints: np.ndarray, keys: Sequence[str], sketches: np.ndarray, refused: np.ndarray) -> None:
        """Write the keys and then the records of rows about to be appended (with the tables that *refused*
        them); durable when it returns."""
        if self.readonly:
            raise PermissionError(f"the index {self.path} is open read-only")
        design = self.directory.design
        if self.length_bits == LENGTH_BITS and refused.any() and (refused.astype(np.uint64) >> np.uint64(8)).any():
            raise MetadataMismatchError(
                f"{self.path}: the index keeps the refusals of 8 tables in its records (format {self.format}), and "
                f"the design {design.name} has {design.n_tables}: rebuild it for the pages it is to hold "
                "(`simhash-filter index rebuild INDEX --expected-pages N`), or open it with the design "
                f"{self.stored_design}"
            )
        now = int(self.clock())
        encoded = [key.encode("utf-8", "surrogatepass") for key in keys]
        longest = max_key_bytes(self.format)
        for data in encoded:
            if len(data) > longest:
                raise ValueError(f"a key longer than {longest} bytes: {data[:80]!r}...")
        if len(encoded) == 1:
            data = encoded[0]
            fp = int(fingerprints[0])
            sketch = sketches[0].tobytes()
            crc = key_check(data)
            mask = int(refused[0])
            packed = length_refused(len(data), mask, self.length_bits)
            check = record_check(fp, self.url_end, now, packed, self.salt, sketch, crc)
            records = RECORD_STRUCT.pack(fp, self.url_end, now, packed, crc, check) + sketch
            urls = data
        else:
            records_array = np.zeros(len(encoded), dtype=self.record)
            lengths = np.fromiter(map(len, encoded), dtype=np.uint64, count=len(encoded))
            records_array["fp"] = fingerprints
            records_array["length_refused"] = lengths | refused.astype(np.uint64) << np.uint64(self.length_bits)
            records_array["offset"] = np.cumsum(lengths) - lengths + np.uint64(self.url_end)
            records_array["added"] = now
            records_array["key_check"] = np.fromiter(map(key_check, encoded), dtype=np.uint32, count=len(encoded))
            records_array["sketch"] = sketches
            records_array["check"] = record_checks(records_array, self.salt)
            records = records_array.tobytes()
            urls = b"".join(encoded)
        urls_fd, records_fd = self.fds["urls"], self.fds["records"]
        records_end = HEADER_SIZE + self.stored * self.record.itemsize
        try:
            write_all(urls_fd, urls)
            if self.sync:
                os.fdatasync(urls_fd)  # the keys are on the disk before the records that point at them
            write_all(records_fd, records)
            if self.sync:
                os.fdatasync(records_fd)
        except BaseException:
            for fd, end in ((records_fd, records_end), (urls_fd, self.url_end)):
                with contextlib.suppress(OSError):  # leave the files as they were: nothing half-added
                    os.ftruncate(fd, end)
            raise
        self.url_end += len(urls)
        self.times[self.stored : self.stored + len(encoded)] = now

    # -- the row source --------------------------------------------------------------------------

    def key(self, row: int) -> str:
        """A row's key, read from the keys file through its record, checked (once: :attr:`keys_read`)."""
        key = self.keys_read.get(row)
        if key is None:
            if len(self.keys_read) >= _KEYS_KEPT:
                self.keys_read.clear()
            key = self.keys_read[row] = self._read_key(row)
        return key

    def _read_key(self, row: int) -> str:
        record = pread(self.fds["records"], RECORD.itemsize, HEADER_SIZE + row * self.record.itemsize)
        _, offset, _, packed, crc, _ = RECORD_STRUCT.unpack(record)
        length = packed & ((1 << self.length_bits) - 1)
        key = pread(self.fds["urls"], length, offset)
        if key_check(key) == crc:
            with contextlib.suppress(UnicodeDecodeError):  # else its key check matched by chance
                return key.decode("utf-8", "surrogatepass")
        raise damaged_key(self.directory.file("urls", self.generation), row, offset, length)

    def sketch_rows(self, rows: np.ndarray) -> np.ndarray:
        """The sketches of *rows*: from memory, or (rows in a run file) from their records, checked."""
        old = rows < self.sketch_base
        if not old.any():
            return super().sketch_rows(rows)
        out = np.empty((len(rows), self.sketch_bytes), dtype=np.uint8)
        out[~old] = super().sketch_rows(rows[~old])
        size = self.record.itemsize
        wanted = rows[old].tolist()
        parts = [os.pread(self.fds["records"], size, HEADER_SIZE + row * size) for row in wanted]
        records = np.frombuffer(b"".join(part.ljust(size, b"\0") for part in parts), dtype=self.record)
        bad = record_checks(records, self.salt) != records["check"]
        bad |= (records["fp"] != self.fingerprints[wanted]) | np.array([len(part) != size for part in parts])
        if bad.any():
            row = wanted[int(np.flatnonzero(bad)[0])]
            at = HEADER_SIZE + row * size
            raise CorruptIndexError(
                f"{self.file_name()}: record {row} (bytes {at}..{at + size}) is damaged, or the run file holding its "
                "row is"
            )
        out[old] = records["sketch"]
        return out

    def cutoff(self) -> int:
        """Rows added before this Unix time are expired (0: none)."""
        return int(self.clock() - self.max_age) if self.max_age else 0

    def hides_rows(self) -> bool:
        return bool(self.dead) or self.max_age > 0

    def hidden(self, row: int) -> bool:
        return row in self.dead or (self.max_age > 0 and int(self.times[row]) < self.cutoff())

    def live_mask(self, start: int = 0, end: int | None = None) -> np.ndarray:
        """Whether each row of ``start..end-1`` is live (neither deleted nor expired)."""
        end = self.stored if end is None else end
        live = np.ones(end - start, dtype=bool)
        if self.max_age:
            live &= self.times[start:end] >= self.cutoff()
        for row in self.dead:
            if start <= row < end:
                live[row - start] = False
        return live

    def lower_buckets(self, fingerprint: int, leads: list[int]) -> Iterator[Part]:
        """The rows of the page's blocks in the run files (none without tables on disk)."""
        if self.disk is None:
            return iter(())
        return self.disk.lower_buckets(fingerprint, leads)

    def spill(self) -> bool:
        """Write the rows in memory as a run file if it is due (:meth:`~.disktables.DiskTables.spill`)."""
        return self.disk is not None and self.disk.spill()
