"""Tables on disk (``?tables=disk``): a run of rows' permuted tables in one file, read a bucket at a time.

A *run file* ``tables.<generation>.<start>-<end>`` holds, for the rows ``start..end-1`` of its generation's
records, after a 4 KiB header (magic line + JSON: the index's format and salt, the rows, the design, where each
part is, a CRC-32 of the columns and directories)::

    columns      the rows' fingerprints (u64), added times (u32), refusals (the smallest unsigned type with a
                 bit a table)
    per table    its directory: ``(1 << bucket_bits) + 1`` u32 offsets, a bucket's entries being those from
                 ``offsets[b]`` to ``offsets[b + 1]``; then its entries, the rows' numbers (u32), sorted by
                 the bucket (the top bits of the table's lead) and then by row

Opening one reads its columns straight into the backend's arrays (14 bytes a row with 9-16 tables: the backend
keeps the fingerprints, times and refusals of every row in memory) and its directories (a bucket holds
:data:`BUCKET_ROWS` entries on average: 4 bytes per 16 rows per table), and checks their CRC; a check then reads
one bucket per table with one ``pread`` (about 64 bytes) and takes the rows' fingerprints from memory.  An entry
is 4 bytes, so that the page cache holds the tables of a large index (15 tables of 100M rows: 6 GB).  The entries
are not checked on opening (they are most of the file): a candidate read from them is checked against its record
(:meth:`~simhash_filter.index.backends.file.FileBackend._sketch_of`).  A run file is
derived from the records: written to ``<name>.tmp``, synced, then renamed, so that a run file present is whole;
one that cannot be used (damaged, of another design) is left out, and its rows are read from the records.
"""

from __future__ import annotations

import contextlib
import os
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from simhash_filter.index.backends.file.errors import CorruptIndexError
from simhash_filter.index.backends.file.osfiles import fsync_dir, pread, write_all
from simhash_filter.index.backends.file.records import HEADER_SIZE, header, read_header
from simhash_filter.index.tables import TableDesign

__all__ = ["BUCKET_ROWS", "ENTRY", "RUN_MAGIC", "MergeCancelled", "RunFile", "run_name", "run_names", "write_run"]

RUN_MAGIC = b"simhash-filter tables\n"
#: An entry of a table on disk: a row's number (its fingerprint is in memory, in the columns).
ENTRY = np.dtype("<u4")
#: Rows per bucket on average (a bucket is one ``pread`` of about 16 x 4 bytes; the directories cost 4 bytes per
#: this many rows and table in memory).
BUCKET_ROWS = 16
#: Rows made and entries written at a time (bounds the temporary memory of writing a large run: its sort keys, 8
#: bytes a row, and this many rows' worth).
_WRITE_CHUNK = 1 << 22
_NAME = re.compile(r"tables\.(\d+)\.(\d+)-(\d+)")


class MergeCancelled(Exception):
    """A run file's writing was cancelled (the index is closing)."""


def run_name(generation: int, start: int, end: int) -> str:
    return f"tables.{generation}.{start}-{end}"


def run_names(directory: Path, generation: int) -> list[tuple[int, int, Path]]:
    """``(start, end, path)`` of the run files of *generation* in *directory*."""
    found = []
    for path in directory.iterdir():
        match = _NAME.fullmatch(path.name)
        if match and int(match[1]) == generation:
            found.append((int(match[2]), int(match[3]), path))
    return found


def _bucket_bits(lead_bits: int, size: int) -> int:
    return max(0, min(lead_bits, (size // BUCKET_ROWS).bit_length() - 1))


def write_run(
    directory: Path,
    generation: int,
    salt: int,
    design: TableDesign,
    start: int,
    fps: np.ndarray,
    added: np.ndarray,
    refused: np.ndarray,
    fmt: int,
    cancelled: Callable[[], bool] = lambda: False,
) -> Path:
    """Write the run file of rows ``start..start+len(fps)-1`` (their fingerprints, added times and refusals) of
    an index in format *fmt*, synced and renamed into place; its path.  :class:`MergeCancelled` (nothing left) if
    *cancelled()* says so between two tables."""
    size = len(fps)
    end = start + size
    path = directory / run_name(generation, start, end)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        at = HEADER_SIZE
        os.lseek(fd, at, os.SEEK_SET)
        crc = 0
        for column in (fps.astype("<u8", copy=False), added.astype("<u4", copy=False), refused):
            data = np.ascontiguousarray(column).data
            write_all(fd, data)
            crc = zlib.crc32(data, crc)
            at += column.nbytes
        tables = []
        row_bits = max(1, (size - 1).bit_length())
        for t, lead in enumerate(design.lead_bits):
            if cancelled():
                raise MergeCancelled
            b = _bucket_bits(lead, size)
            drop = lead - b
            taken = (refused & refused.dtype.type(1 << t)) == 0 if refused.any() else None
            key = np.empty(size if taken is None else int(np.count_nonzero(taken)), dtype=np.uint64)
            counts = np.zeros(1 << b, dtype=np.int64)
            filled = 0
            for lo in range(0, size, _WRITE_CHUNK):  # (bucket, row) packed in 64 bits, a chunk at a time
                ids = np.arange(lo, min(size, lo + _WRITE_CHUNK), dtype=np.uint64)
                if taken is not None:
                    ids = ids[taken[lo : lo + _WRITE_CHUNK]]
                part = design.lead_array(fps[ids], t)
                if drop:
                    part >>= np.uint64(drop)
                counts += np.bincount(part.astype(np.intp), minlength=1 << b)
                part <<= np.uint64(row_bits)
                part |= ids
                key[filled : filled + len(part)] = part
                filled += len(part)
            offsets = np.zeros((1 << b) + 1, dtype="<u4")
            np.cumsum(counts, out=offsets[1:])
            key.sort()
            key &= np.uint64((1 << row_bits) - 1)
            write_all(fd, offsets.data)
            crc = zlib.crc32(offsets.data, crc)
            directory_at, at = at, at + offsets.nbytes
            for lo in range(0, len(key), _WRITE_CHUNK):
                local = key[lo : lo + _WRITE_CHUNK]
                entries = (local + np.uint64(start)).astype(ENTRY)
                write_all(fd, entries.data)
            tables.append([b, drop, directory_at, at, len(key)])
            at += len(key) * ENTRY.itemsize
            del key
        fields = {
            "format": fmt, "salt": salt, "start": start, "end": end, "design": design.name,
            "refused_bytes": refused.dtype.itemsize, "tables": tables, "crc": crc,
        }  # fmt: skip
        os.pwrite(fd, header(RUN_MAGIC, fields), 0)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    os.close(fd)
    os.replace(tmp, path)
    fsync_dir(directory)
    return path


class RunFile:
    """An open run file: its directories in memory, its entries read a bucket at a time."""

    __slots__ = ("end", "fd", "path", "start", "tables")

    def __init__(self, path: Path, fd: int, start: int, end: int, tables: list[tuple[memoryview, int, int]]) -> None:
        self.path = path
        self.fd = fd
        self.start = start
        self.end = end
        #: per table: (directory, lead bits below the bucket, offset of the entries in the file)
        self.tables = tables

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def nbytes(self) -> int:
        """Bytes of its directories in memory."""
        return sum(directory.nbytes for directory, _, _ in self.tables)

    @classmethod
    def open(
        cls,
        path: Path,
        salt: int,
        design: TableDesign,
        refused_dtype: np.dtype,
        columns: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> RunFile:
        """Open the run file at *path*, reading its columns into *columns* ``(fingerprints, added, refused)``, the
        backend's arrays' rows of the run (None: a run just written, whose columns and CRC are not read); raise
        :class:`CorruptIndexError` if it is not one of this index's (its salt), of *design*, whole."""
        fd = os.open(path, os.O_RDONLY)
        try:
            fields = read_header(fd, path, RUN_MAGIC)
            start, end = int(fields["start"]), int(fields["end"])
            if fields.get("salt") != salt:
                raise CorruptIndexError(f"{path} does not belong to this generation's records (another salt)")
            if fields.get("design") != design.name or fields.get("refused_bytes") != refused_dtype.itemsize:
                raise CorruptIndexError(f"{path} holds the tables of the design {fields.get('design')}")
            crc = 0
            if columns is not None:
                at = HEADER_SIZE
                for column in columns:
                    if len(column) != end - start:
                        raise CorruptIndexError(f"{path} holds rows {start}..{end - 1}, which the records do not")
                    view = memoryview(column).cast("B")
                    _read_into(fd, view, at, path)
                    crc = zlib.crc32(view, crc)
                    at += len(view)
            tables = []
            for b, drop, directory_at, entries_at, count in _table_fields(fields, path, design):
                raw = pread(fd, 4 * ((1 << b) + 1), directory_at)
                if columns is not None:
                    crc = zlib.crc32(raw, crc)
                directory = np.frombuffer(raw, dtype="<u4")
                if len(directory) != (1 << b) + 1 or int(directory[-1]) != count:
                    raise CorruptIndexError(f"{path}: a table's directory is damaged")
                tables.append((memoryview(directory), drop, entries_at))
            if columns is not None and crc != fields.get("crc"):
                raise CorruptIndexError(f"{path}: its columns or directories are damaged (their CRC-32 differs)")
            if os.fstat(fd).st_size < entries_at + count * ENTRY.itemsize:
                raise CorruptIndexError(f"{path} ends in its entries")
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, start, end, tables)

    def buckets(self, leads: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """The rows in each table's bucket of the lead values *leads* (one per table), one ``pread`` a bucket: the
        rows of every bucket back to back, and each row's table."""
        reads, tables, sizes = [], [], []
        fd = self.fd
        for t, ((directory, drop, entries_at), lead) in enumerate(zip(self.tables, leads, strict=True)):
            b = lead >> drop
            lo = directory[b]
            hi = directory[b + 1]
            if hi != lo:
                reads.append(os.pread(fd, (hi - lo) * 4, entries_at + lo * 4))
                tables.append(t)
                sizes.append(hi - lo)
        data = b"".join(reads)
        if len(data) != 4 * sum(sizes):
            raise CorruptIndexError(f"{self.path} ends in a table's entries: the file was cut while in use")
        return np.frombuffer(data, dtype=ENTRY), np.repeat(np.array(tables, dtype=np.intp), sizes)

    def close(self, remove: bool = False) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
        if remove:
            with contextlib.suppress(OSError):
                self.path.unlink()


def _read_into(fd: int, view: memoryview, offset: int, path: Path) -> None:
    """Fill *view* with the file's bytes from *offset* (a read at a time of at most 256 MiB)."""
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done : done + (1 << 28)]], offset + done)
        if not got:
            raise CorruptIndexError(f"{path} ends in its columns")
        done += got


def _table_fields(fields: dict[str, Any], path: Path, design: TableDesign) -> Iterator[tuple[int, int, int, int, int]]:
    tables = fields.get("tables")
    if not isinstance(tables, list) or len(tables) != design.n_tables:
        raise CorruptIndexError(f"{path}: the header is damaged (its tables)")
    for table in tables:
        if not (isinstance(table, list) and len(table) == 5 and all(isinstance(v, int) and v >= 0 for v in table)):
            raise CorruptIndexError(f"{path}: the header is damaged (a table {table!r})")
        yield tuple(table)  # type: ignore[misc]
