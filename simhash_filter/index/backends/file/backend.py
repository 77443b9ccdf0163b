"""The on-disk backend's class: options, the memory backend's hooks (keys and records written before a row is
added, keys read back from disk, expired and deleted rows hidden), deletion, export and compaction."""

from __future__ import annotations

import contextlib
import os
import secrets
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import numpy as np

from simhash_filter.index.backends.base import Entry, MetadataMismatchError
from simhash_filter.index.backends.file.age import parse_age
from simhash_filter.index.backends.file.disktables import DiskTables
from simhash_filter.index.backends.file.errors import CorruptIndexError, damaged_key
from simhash_filter.index.backends.file.load import GenerationLoader
from simhash_filter.index.backends.file.notes import NotesFile
from simhash_filter.index.backends.file.osfiles import close_all, pread, write_all
from simhash_filter.index.backends.file.records import (
    CHUNK,
    HEADER_SIZE,
    LENGTH_BITS,
    MAGIC,
    RECORD,
    RECORD_STRUCT,
    TOMBSTONE,
    key_check,
    key_lengths,
    length_refused,
    max_key_bytes,
    read_header,
    record_check,
    record_checks,
    record_chunks,
    record_dtype,
    tombstone_check,
)
from simhash_filter.index.backends.memory import MemoryBackend
from simhash_filter.index.backends.uri import redact_uri
from simhash_filter.index.tables import Match, TableDesign

__all__ = ["FileBackend"]


class FileBackend(DiskTables, GenerationLoader, NotesFile, MemoryBackend):
    """An index in a directory; ``file:///path/to/dir?sync=always&max_age=30d`` or a plain path.

    Options: ``sync`` (``none``, the default: every add is written before it returns and survives
    ``kill -9``; ``always``: also ``fdatasync``-ed, survives power loss), ``max_age`` (fingerprints
    older than this are ignored, so their pages are kept again: seconds or ``12h``, ``30d``...;
    ``0``, the default, keeps them forever), ``readonly`` (``1``: no lock, no writes; reads a
    snapshot while another process writes), ``tables`` (``memory``: every row's tables and sketch in memory;
    ``disk``: the older rows' tables in run files, their sketches read from the records -
    :mod:`~simhash_filter.index.backends.file.disktables`, for an index of tens of millions of pages; ``auto``, the
    default: on disk when the index has run files) and ``spill_rows`` (with tables on disk, the rows kept in memory
    before they are written as a run file; 1,048,576), and the memory backend's ``buffer_size`` and
    ``merge_factor``.  One process writes at a time (:class:`IndexLockedError` otherwise).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        k: int,
        design: TableDesign,
        metadata: Mapping[str, Any] | None = None,
        sync: str = "none",
        max_age: float | str = 0,
        readonly: bool = False,
        clock: Callable[[], float] = time.time,
        buffer_size: int = 2048,
        merge_factor: int = 8,
        tables: str = "auto",
        spill_rows: int = 1 << 20,
    ) -> None:
        super().__init__(k=k, design=design, metadata=metadata, buffer_size=buffer_size, merge_factor=merge_factor)
        self._init_tables(tables, spill_rows)
        if design.n_tables > 16 and not readonly and (metadata or {}).get("sketch_bytes"):
            raise ValueError(
                f"the on-disk index keeps the refusals of at most 16 tables (two bytes of each record); design "
                f"{design.name} has {design.n_tables}: choose one with fewer tables (SIMHASH_EXPECTED_PAGES of at "
                "most 1,073,741,824), or a Redis index"
            )
        if sync not in ("none", "always"):
            raise ValueError(f"sync must be 'none' or 'always', got {sync!r}")
        self.path = Path(path)
        self._sync = sync == "always"
        self._max_age = parse_age(max_age)
        self._readonly = readonly
        self._clock = clock
        self._requested = None if metadata is None else dict(metadata)
        self._lock_fd: int | None = None
        self._fds: dict[str, int] = {}
        self._times = np.empty(0, dtype=np.uint32)
        self._record = record_dtype(self._sketch_bytes)  # as stored, once loaded
        try:
            if not readonly:
                self._take_lock()
            with self._lock:  # a merge that the open starts swaps its run file in once the open is done
                self._load()
        except BaseException:
            self._release()
            raise

    @classmethod
    def from_uri(
        cls, uri: str, *, k: int, design: TableDesign, metadata: Mapping[str, Any] | None = None
    ) -> FileBackend:
        """``file://PATH?options`` (``file:///abs/dir``, ``file://relative/dir``) or a plain ``PATH``."""
        location, query = _location(uri)
        if not location:
            raise ValueError(
                f"a file backend needs a directory: {redact_uri(uri)!r} (e.g. 'file:///var/lib/crawl/simhash')"
            )
        options: dict[str, Any] = {}
        for name, value in parse_qsl(query, keep_blank_values=True):
            if name in ("buffer_size", "merge_factor", "spill_rows"):
                try:
                    options[name] = int(value)
                except ValueError:
                    raise ValueError(
                        f"option {name} must be an integer, got {value!r} in {redact_uri(uri)!r}"
                    ) from None
            elif name == "readonly":
                if value not in ("0", "1", "true", "false"):
                    raise ValueError(f"option readonly must be 0 or 1, got {value!r} in {redact_uri(uri)!r}")
                options[name] = value in ("1", "true")
            elif name in ("sync", "max_age", "tables"):
                options[name] = value
            else:
                raise ValueError(f"unknown file backend option {name!r} in {redact_uri(uri)!r}")
        return cls(Path(location).expanduser(), k=k, design=design, metadata=metadata, **options)

    @staticmethod
    def design_at(uri: str) -> str | None:
        """The table design the index at *uri* was built with, from its records' header (None: no index there, or
        its header cannot be read), without opening it (``simhash-filter index`` opens an index with it)."""
        location, _ = _location(uri)
        path = Path(location).expanduser()
        try:
            generation = (path / "CURRENT").read_text("ascii").strip()
            fd = os.open(path / f"records.{generation}", os.O_RDONLY)
        except (OSError, UnicodeDecodeError):
            return None
        try:
            design = read_header(fd, path, MAGIC).get("design")
        except (CorruptIndexError, MetadataMismatchError):
            return None
        finally:
            os.close(fd)
        return design if isinstance(design, str) else None

    # -- opening ---------------------------------------------------------------------------------

    def _reserve(self, n: int) -> None:
        super()._reserve(n)
        if len(self._times) < len(self._fps):
            grown = np.empty(len(self._fps), dtype=np.uint32)
            grown[: self._n] = self._times[: self._n]
            self._times = grown

    def _store_keys(
        self, fingerprints: np.ndarray, keys: Sequence[str], sketches: np.ndarray, refused: np.ndarray
    ) -> None:
        """Write the keys and then the records of rows about to be appended (with the tables that *refused*
        them); durable when it returns."""
        if self._readonly:
            raise PermissionError(f"the index {self.path} is open read-only")
        if self._length_bits == LENGTH_BITS and refused.any() and (refused.astype(np.uint64) >> np.uint64(8)).any():
            raise MetadataMismatchError(
                f"{self.path}: the index keeps the refusals of 8 tables in its records (format {self._format}), and "
                f"the design {self.design.name} has {self.design.n_tables}: rebuild it for the pages it is to hold "
                "(`simhash-filter index rebuild INDEX --expected-pages N`), or open it with the design "
                f"{self._stored_design}"
            )
        if self._headers_stale and refused.any():  # a format-3 generation takes its first refused row
            self._rewrite_headers(self._generation_number, self._fds)
            self._headers_stale = False
        now = int(self._clock())
        encoded = [key.encode("utf-8", "surrogatepass") for key in keys]
        longest = max_key_bytes(self._format)
        for data in encoded:
            if len(data) > longest:
                raise ValueError(f"a key longer than {longest} bytes: {data[:80]!r}...")
        if len(encoded) == 1:
            data = encoded[0]
            fp = int(fingerprints[0])
            sketch = sketches[0].tobytes() if self._sketch_bytes else None
            crc = key_check(data)
            mask = int(refused[0])
            packed = length_refused(len(data), mask, self._length_bits)
            check = record_check(fp, self._url_end, now, packed, self._salt, sketch, crc)
            records = RECORD_STRUCT.pack(fp, self._url_end, now, packed, crc, check) + (sketch or b"")
            urls = data
        else:
            records_array = np.zeros(len(encoded), dtype=self._record)
            lengths = np.fromiter(map(len, encoded), dtype=np.uint64, count=len(encoded))
            records_array["fp"] = fingerprints
            records_array["length_refused"] = lengths | refused.astype(np.uint64) << np.uint64(self._length_bits)
            records_array["offset"] = np.cumsum(lengths) - lengths + np.uint64(self._url_end)
            records_array["added"] = now
            records_array["key_check"] = np.fromiter(map(key_check, encoded), dtype=np.uint32, count=len(encoded))
            if self._sketch_bytes:
                records_array["sketch"] = sketches
            records_array["check"] = record_checks(records_array, self._salt)
            records = records_array.tobytes()
            urls = b"".join(encoded)
        urls_fd, records_fd = self._fds["urls"], self._fds["records"]
        records_end = HEADER_SIZE + self._n * self._record.itemsize
        try:
            write_all(urls_fd, urls)
            if self._sync:
                os.fdatasync(urls_fd)  # the keys are on the disk before the records that point at them
            write_all(records_fd, records)
            if self._sync:
                os.fdatasync(records_fd)
        except BaseException:
            for fd, end in ((records_fd, records_end), (urls_fd, self._url_end)):
                with contextlib.suppress(OSError):  # leave the files as they were: nothing half-added
                    os.ftruncate(fd, end)
            raise
        self._url_end += len(urls)
        self._times[self._n : self._n + len(encoded)] = now

    def _key(self, row: int) -> str:
        record = pread(self._fds["records"], RECORD.itemsize, HEADER_SIZE + row * self._record.itemsize)
        _, offset, _, packed, crc, _ = RECORD_STRUCT.unpack(record)
        length = packed & ((1 << self._length_bits) - 1)
        key = pread(self._fds["urls"], length, offset)
        if key_check(key) == crc:
            with contextlib.suppress(UnicodeDecodeError):  # else its key check matched by chance
                return key.decode("utf-8", "surrogatepass")
        raise damaged_key(self._file("urls", self._generation_number), row, offset, length)

    def _cutoff(self) -> int:
        """Rows added before this Unix time are expired (0: none)."""
        return int(self._clock() - self._max_age) if self._max_age else 0

    def _hides_rows(self) -> bool:
        return bool(self._dead) or self._max_age > 0

    def _hidden(self, row: int) -> bool:
        return row in self._dead or (self._max_age > 0 and int(self._times[row]) < self._cutoff())

    def _live_mask(self, start: int = 0, end: int | None = None) -> np.ndarray:
        end = self._n if end is None else end
        live = np.ones(end - start, dtype=bool)
        if self._max_age:
            live &= self._times[start:end] >= self._cutoff()
        for row in self._dead:
            if start <= row < end:
                live[row - start] = False
        return live

    # -- the Backend interface -------------------------------------------------------------------

    def __len__(self) -> int:
        if not self._hides_rows():
            return self._n
        return int(np.count_nonzero(self._live_mask()))

    def delete(self, keys: Iterable[str]) -> int:
        """Forget every stored fingerprint whose key is in *keys*; a tombstone is written for each."""
        wanted = set(keys)
        with self._lock:
            self._check_open()
            if self._readonly:
                raise PermissionError(f"the index {self.path} is open read-only")
            scan = self._scan(self._fds["records"], self._fds["urls"], self._n, self._generation_number)
            rows = [row for row, _, key, _, _ in scan if key in wanted and row not in self._dead]
            if rows:
                fd = self._fds["deleted"]
                end = os.fstat(fd).st_size
                stones = b"".join(TOMBSTONE.pack(row, tombstone_check(row, self._salt)) for row in rows)
                try:
                    write_all(fd, stones)
                    os.fdatasync(fd)
                except BaseException:
                    with contextlib.suppress(OSError):  # nothing half-deleted
                        os.ftruncate(fd, end)
                    raise
                self._dead.update(rows)
            return len(rows)

    def _scan(
        self, records_fd: int, urls_fd: int, n: int, generation: int
    ) -> Iterator[tuple[int, int, str, int, bytes | None]]:
        """(row, fingerprint, key, added, sketch or None) of the rows ``0..n-1`` of the open files of
        *generation*, in order, each key verified."""
        size = self._sketch_bytes
        path = self._file("records", generation)
        urls = self._file("urls", generation)
        crc32 = zlib.crc32
        for start, chunk in record_chunks(records_fd, path, 0, n, self._record, CHUNK // 16):
            first = int(chunk["offset"][0])
            lengths = key_lengths(chunk, self._length_bits)
            blob = pread(urls_fd, int(chunk["offset"][-1] + lengths[-1]) - first, first)
            sketches = np.ascontiguousarray(chunk["sketch"]).tobytes() if size else b""
            for i, (fp, offset, length, added, crc) in enumerate(
                zip(
                    chunk["fp"].tolist(),
                    chunk["offset"].tolist(),
                    lengths.tolist(),
                    chunk["added"].tolist(),
                    chunk["key_check"].tolist(),
                    strict=True,
                )
            ):
                data = blob[offset - first : offset - first + length]
                if crc32(data) != crc:
                    raise damaged_key(urls, start + i, offset, length)
                try:
                    key = data.decode("utf-8", "surrogatepass")
                except UnicodeDecodeError:  # its key check matched by chance
                    raise damaged_key(urls, start + i, offset, length) from None
                sketch = sketches[i * size : (i + 1) * size] if size else None
                yield start + i, fp, key, added, sketch

    def entries(self) -> Iterator[Entry]:
        """Every live fingerprint with its key, the time it was added (and its sketch, in an index that keeps
        sketches), oldest first, read from disk: from the generation open when the iteration starts, to its end
        (a compaction meanwhile, here or in another process, does not change what it reads)."""
        with self._lock:
            self._check_open()
            live = self._live_mask()
            n = self._n
            records_fd = os.dup(self._fds["records"])
            try:
                urls_fd = os.dup(self._fds["urls"])
            except BaseException:
                os.close(records_fd)
                raise
            scan = self._scan(records_fd, urls_fd, n, self._generation_number)
        try:
            for row, fp, key, added, sketch in scan:
                if live[row]:
                    yield Entry(fp, key, float(added), sketch)
        finally:
            scan.close()
            os.close(records_fd)
            os.close(urls_fd)

    def compact(self) -> None:
        """Rewrite the index without its deleted and expired fingerprints (a new generation, then a switch).

        If it fails (a full disk), the new generation's files are removed and the index stays as it was."""
        with self._lock:
            self._check_open()
            if self._readonly:
                raise PermissionError(f"the index {self.path} is open read-only")
            new = self._generation_number + 1
            try:
                self._write_generation(new)
                self._write_current(new)
            except BaseException:
                if not self._current_is(new):
                    self._discard(new)
                    raise
                self._use_generation(new, remove_old=False)  # switched, but the directory was not synced
                raise
            self._use_generation(new, remove_old=True)

    def _write_generation(self, new: int) -> None:
        """Write generation *new*: the live rows of this one, their keys verified, with the tables that refused
        them, under a new salt, in this one's format (a format-3 generation holds no refusals)."""
        salt = secrets.randbits(63)
        self._create(new, salt, self._created, self._metadata, self._format)
        live = self._live_mask()
        old_urls = self._file("urls", self._generation_number)
        fds: dict[str, int] = {}
        try:
            for kind in ("records", "urls"):
                fds[kind] = os.open(self._file(kind, new), os.O_WRONLY | os.O_APPEND)
            url_end = HEADER_SIZE
            path = self._file("records", self._generation_number)
            for start, chunk in record_chunks(self._fds["records"], path, 0, self._n, self._record):
                first = int(chunk["offset"][0])
                sizes = key_lengths(chunk, self._length_bits)
                data = pread(self._fds["urls"], int(chunk["offset"][-1] + sizes[-1]) - first, first)
                keep = live[start : start + len(chunk)]
                view = memoryview(data)
                offsets, lengths, crcs = chunk["offset"].tolist(), sizes.tolist(), chunk["key_check"].tolist()
                for i in np.flatnonzero(keep).tolist():  # the kept keys are verified (never copied damaged)
                    o = offsets[i] - first
                    if key_check(view[o : o + lengths[i]]) != crcs[i]:
                        raise damaged_key(old_urls, start + i, offsets[i], lengths[i])
                blob = np.frombuffer(data, dtype=np.uint8)
                kept = chunk[keep]
                kept_sizes = sizes[keep]
                write_all(fds["urls"], blob[np.repeat(keep, sizes.astype(np.intp))].tobytes())
                kept["offset"] = np.cumsum(kept_sizes, dtype=np.uint64) - kept_sizes + np.uint64(url_end)
                url_end += int(kept_sizes.sum())
                refused = self._refused[start : start + len(chunk)][keep]  # the refusals in force
                kept["length_refused"] = kept_sizes | refused.astype(np.uint64) << np.uint64(self._length_bits)
                kept["check"] = record_checks(kept, salt)
                write_all(fds["records"], kept.tobytes())
            for fd in fds.values():
                os.fsync(fd)
        finally:
            close_all(fds)

    def _use_generation(self, new: int, *, remove_old: bool) -> None:
        """Go on with generation *new*, now current: close this one's files (removing them if *remove_old*),
        load the new one."""
        old = self._fds
        self._fds = {}
        close_all(old)
        if remove_old:
            self._remove_stale(new)
        self._reset()
        self._load()

    def _reset(self) -> None:
        self._close_runs()
        self._sketch_base = 0
        self._fps = np.empty(0, dtype=np.uint64)
        self._sketches = np.empty((0, self._sketch_bytes), dtype=np.uint8)
        self._refused = np.empty(0, dtype=self._refused_dtype)
        self._times = np.empty(0, dtype=np.uint32)
        self._runs = []
        self._dead = set()
        self._n = self._sealed = 0

    def set_clock(self, clock: Callable[[], float]) -> None:
        """Take the time of each row written from now on from *clock* (``index rebuild`` keeps each page's age)."""
        self._clock = clock

    @property
    def stored_design(self) -> str:
        """The design its records header names (the tables' refusals are theirs), else this backend's."""
        return self._stored_design or self._design.name

    def info(self) -> dict[str, Any]:
        with self._lock:
            self._check_open()
            live = self._live_mask()
            added = self._times[: self._n]
            sizes = {kind: os.fstat(fd).st_size for kind, fd in self._fds.items()}
        info = super().info()
        info.update(
            path=str(self.path.resolve()),
            entries=int(np.count_nonzero(live)),
            stored=self._n,
            deleted=len(self._dead),
            expired=int(self._n - np.count_nonzero(live) - len(self._dead)),
            max_age_seconds=self._max_age,
            created=self._created,
            oldest=float(added.min()) if self._n else None,
            newest=float(added.max()) if self._n else None,
            k_when_created=self._stored_k,
            generation=self._generation_number,
            disk_bytes=sum(sizes.values()),
            key_bytes=sizes["urls"] - HEADER_SIZE,
            memory_bytes=self.nbytes,
            **self._tables_info(),
        )
        return info

    @property
    def nbytes(self) -> int:
        """Bytes held in numpy arrays (fingerprints, sketches, tables, added times); keys stay on disk."""
        return super().nbytes + self._times.nbytes + self._directories_nbytes

    def query_many(self, fingerprints: np.ndarray, k: int) -> list[list[Match]]:
        """Every stored fingerprint within *k* of each query (one by one with tables on disk)."""
        if not self.tables_on_disk:
            return super().query_many(fingerprints, k)
        return [self.query(fp, k) for fp in fingerprints.tolist()]

    def flush(self) -> None:
        """Force what was written to the disk (``fsync``; adds are already safe from a process crash)."""
        with self._lock:
            self._check_open()
            for fd in self._fds.values():
                os.fsync(fd)

    def _close_files(self) -> None:
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                if not self._readonly:
                    os.fsync(fd)
                os.close(fd)
        self._fds = {}

    def _release(self) -> None:
        self._close_runs()
        self._close_files()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def close(self) -> None:
        """Flush to disk, release the lock and the memory; later calls raise ``ValueError``."""
        with self._lock:
            if self._closed:
                return
            self._release()
        super().close()


def _location(uri: str) -> tuple[str, str]:
    """The directory and the query of ``file://PATH?options`` or a plain ``PATH``."""
    if "://" in uri:
        return unquote(uri.split("://", 1)[1].split("?", 1)[0].split("#", 1)[0]), urlsplit(uri).query
    return uri, ""
