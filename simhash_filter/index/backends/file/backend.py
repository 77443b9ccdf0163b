"""The on-disk backend's class: options, deletion, export and compaction, over its helpers; the queries and the
write path are :class:`~simhash_filter.index.backends.memory.store.TablesBackend`'s."""

from __future__ import annotations

import contextlib
import os
import secrets
import time
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import numpy as np

from simhash_filter.errors import CorruptIndexError
from simhash_filter.index.backends.base import Entry, MetadataMismatchError
from simhash_filter.index.backends.file.age import parse_age
from simhash_filter.index.backends.file.directory import IndexDirectory
from simhash_filter.index.backends.file.disktables import DiskTables
from simhash_filter.index.backends.file.load import GenerationLoader
from simhash_filter.index.backends.file.notes import NotesFile
from simhash_filter.index.backends.file.osfiles import close_all, pread, write_all
from simhash_filter.index.backends.file.records import (
    CHUNK,
    HEADER_SIZE,
    MAGIC,
    TOMBSTONE,
    damaged_key,
    key_check,
    key_lengths,
    read_header,
    record_checks,
    record_chunks,
    tombstone_check,
)
from simhash_filter.index.backends.file.rows import FileRows
from simhash_filter.index.backends.memory.store import TablesBackend
from simhash_filter.index.backends.uri import no_other_options, redact_uri, uri_options
from simhash_filter.index.bound import refusal_dtype
from simhash_filter.index.tables import TableDesign


class FileBackend(TablesBackend):
    """An index in a directory; ``file:///path/to/dir?sync=always&max_age=30d`` or a plain path.

    Options (docs/stores.md, "The on-disk index"): ``sync`` (``none`` or ``always``), ``max_age`` (seconds or
    ``12h``, ``30d``...; 0: forever), ``readonly``, ``tables`` (``auto``, ``memory`` or ``disk``), ``spill_rows``,
    and the memory backend's ``buffer_size`` and ``merge_factor``.  One process writes at a time
    (:class:`IndexLockedError` otherwise)."""

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
        self.path = Path(path)
        self._directory = IndexDirectory(self.path, readonly=readonly, k=k, design=design)
        self._store = rows = FileRows(self._directory, refusal_dtype(design.n_tables), clock=clock)
        super().__init__(
            k=k, design=design, metadata=metadata, rows=rows, buffer_size=buffer_size, merge_factor=merge_factor
        )
        #: The run files of the older rows (``tables=disk``: :class:`DiskTables`).
        self.disk = rows.disk = DiskTables(rows, self.tables, self._lock, mode=tables, spill_rows=spill_rows)
        if design.n_tables > 16 and not readonly and (metadata or {}).get("sketch_bytes"):
            raise ValueError(
                f"the on-disk index keeps the refusals of at most 16 tables (two bytes of each record); design "
                f"{design.name} has {design.n_tables}: choose one with fewer tables (SIMHASH_EXPECTED_PAGES of at "
                "most 1,073,741,824), or a Redis index"
            )
        if sync not in ("none", "always"):
            raise ValueError(f"sync must be 'none' or 'always', got {sync!r}")
        rows.sync = sync == "always"
        rows.max_age = parse_age(max_age)
        self._readonly = readonly
        self._notes_file = NotesFile(self.path, readonly=readonly, sync=rows.sync)
        self._loader = GenerationLoader(
            rows, self.tables, self.disk, requested=metadata, sketch_bytes=self._sketch_bytes
        )
        try:
            if not readonly:
                self._directory.take_lock()
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
        kinds = {"buffer_size": int, "merge_factor": int, "spill_rows": int, "readonly": bool, "sync": str,
                 "max_age": str, "tables": str}  # fmt: skip
        options, others = uri_options(uri, query, kinds)
        no_other_options(uri, others, "file")
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

    def _load(self) -> None:
        """Read the current generation (:class:`GenerationLoader`); take its metadata and sketch size."""
        self._loader.load()
        self._metadata = self._store.metadata
        self._sketch_bytes = self._store.sketch_bytes

    # -- the Backend interface -------------------------------------------------------------------

    def __len__(self) -> int:
        if not self._store.hides_rows():
            return self._store.stored
        return int(np.count_nonzero(self._store.live_mask()))

    def delete(self, keys: Iterable[str]) -> int:
        """Forget every stored fingerprint whose key is in *keys*; a tombstone is written for each."""
        rows = self._store
        wanted = set(keys)
        with self._lock:
            self.ensure_open()
            if self._readonly:
                raise PermissionError(f"the index {self.path} is open read-only")
            scan = self._scan(rows.fds["records"], rows.fds["urls"], rows.stored, rows.generation)
            found = [row for row, _, key, _, _ in scan if key in wanted and row not in rows.dead]
            if found:
                fd = rows.fds["deleted"]
                end = os.fstat(fd).st_size
                stones = b"".join(TOMBSTONE.pack(row, tombstone_check(row, rows.salt)) for row in found)
                try:
                    write_all(fd, stones)
                    os.fdatasync(fd)
                except BaseException:
                    with contextlib.suppress(OSError):  # nothing half-deleted
                        os.ftruncate(fd, end)
                    raise
                rows.dead.update(found)
            return len(found)

    def _scan(
        self, records_fd: int, urls_fd: int, n: int, generation: int
    ) -> Generator[tuple[int, int, str, int, bytes], None, None]:
        """(row, fingerprint, key, added, sketch) of the rows ``0..n-1`` of the open files of *generation*, in
        order, each key verified."""
        rows = self._store
        size = self._sketch_bytes
        path = self._directory.file("records", generation)
        urls = self._directory.file("urls", generation)
        crc32 = zlib.crc32
        for start, chunk in record_chunks(records_fd, path, 0, n, rows.record, CHUNK // 16):
            first = int(chunk["offset"][0])
            lengths = key_lengths(chunk, rows.length_bits)
            blob = pread(urls_fd, int(chunk["offset"][-1] + lengths[-1]) - first, first)
            sketches = np.ascontiguousarray(chunk["sketch"]).tobytes()
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
                yield start + i, fp, key, added, sketches[i * size : (i + 1) * size]

    def entries(self) -> Iterator[Entry]:
        """Every live fingerprint with its key, sketch and the time it was added, oldest first, read from the
        generation open when the iteration starts (a compaction meanwhile does not change what it reads)."""
        rows = self._store
        with self._lock:
            self.ensure_open()
            live = rows.live_mask()
            n = rows.stored
            records_fd = os.dup(rows.fds["records"])
            try:
                urls_fd = os.dup(rows.fds["urls"])
            except BaseException:
                os.close(records_fd)
                raise
            scan = self._scan(records_fd, urls_fd, n, rows.generation)
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
        rows = self._store
        with self._lock:
            self.ensure_open()
            if self._readonly:
                raise PermissionError(f"the index {self.path} is open read-only")
            new = rows.generation + 1
            try:
                self._write_generation(new)
                self._directory.write_current(new)
            except BaseException:
                if not self._directory.current_is(new):
                    self._directory.discard(new)
                    raise
                self._use_generation(new, remove_old=False)  # switched, but the directory was not synced
                raise
            self._use_generation(new, remove_old=True)

    def _write_generation(self, new: int) -> None:
        """Write generation *new*: the live rows of this one, their keys verified, with the tables that refused
        them, under a new salt, in this one's format."""
        rows = self._store
        salt = secrets.randbits(63)
        self._directory.create(new, salt, rows.created, self._metadata, self._sketch_bytes, rows.format)
        live = rows.live_mask()
        old_urls = self._directory.file("urls", rows.generation)
        fds: dict[str, int] = {}
        try:
            for kind in ("records", "urls"):
                fds[kind] = os.open(self._directory.file(kind, new), os.O_WRONLY | os.O_APPEND)
            url_end = HEADER_SIZE
            path = self._directory.file("records", rows.generation)
            for start, chunk in record_chunks(rows.fds["records"], path, 0, rows.stored, rows.record):
                first = int(chunk["offset"][0])
                sizes = key_lengths(chunk, rows.length_bits)
                data = pread(rows.fds["urls"], int(chunk["offset"][-1] + sizes[-1]) - first, first)
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
                refused = rows.refusals[start : start + len(chunk)][keep]  # the refusals in force
                kept["length_refused"] = kept_sizes | refused.astype(np.uint64) << np.uint64(rows.length_bits)
                kept["check"] = record_checks(kept, salt)
                write_all(fds["records"], kept.tobytes())
            for fd in fds.values():
                os.fsync(fd)
        finally:
            close_all(fds)

    def _use_generation(self, new: int, *, remove_old: bool) -> None:
        """Go on with generation *new*, now current: close this one's files (removing them if *remove_old*),
        load the new one."""
        rows = self._store
        old = rows.fds
        rows.fds = {}
        close_all(old)
        if remove_old:
            self._directory.remove_stale(new)
        self._reset()
        self._load()

    def _reset(self) -> None:
        """Forget the rows and the tables of the generation closed."""
        self.disk.close()
        self._store.clear()
        self.tables.clear()

    def set_clock(self, clock: Callable[[], float]) -> None:
        """Take the time of each row written from now on from *clock* (``index rebuild`` keeps each page's age)."""
        self._store.clock = clock

    def info(self) -> dict[str, Any]:
        rows = self._store
        with self._lock:
            self.ensure_open()
            live = rows.live_mask()
            added = rows.times[: rows.stored]
            sizes = {kind: os.fstat(fd).st_size for kind, fd in rows.fds.items()}
        info = super().info()
        info.update(
            path=str(self.path.resolve()),
            entries=int(np.count_nonzero(live)),
            stored=rows.stored,
            deleted=len(rows.dead),
            expired=int(rows.stored - np.count_nonzero(live) - len(rows.dead)),
            max_age_seconds=rows.max_age,
            created=rows.created,
            oldest=float(added.min()) if rows.stored else None,
            newest=float(added.max()) if rows.stored else None,
            k_when_created=rows.stored_k,
            generation=rows.generation,
            disk_bytes=sum(sizes.values()),
            key_bytes=sizes["urls"] - HEADER_SIZE,
            memory_bytes=self.nbytes,
            **self.disk.info(),
        )
        return info

    @property
    def nbytes(self) -> int:
        """Bytes held in numpy arrays (fingerprints, sketches, tables, added times); keys stay on disk."""
        return super().nbytes + self.disk.nbytes

    def notes(self) -> dict[str, int]:
        """The counters kept in the index's ``notes.json`` (:class:`NotesFile`)."""
        return self._notes_file.read()

    def add_notes(self, increments: Mapping[str, int]) -> dict[str, int]:
        """Add to the counters of ``notes.json``, written anew (a crash leaves the old file or the new one)."""
        with self._lock:
            self.ensure_open()
            return self._notes_file.add(increments)

    def _release(self) -> None:
        self.disk.close()
        rows = self._store
        for fd in rows.fds.values():
            with contextlib.suppress(OSError):
                if not self._readonly:
                    os.fsync(fd)
                os.close(fd)
        rows.fds = {}
        self._directory.release_lock()

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
