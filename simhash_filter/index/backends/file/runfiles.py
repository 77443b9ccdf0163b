"""Run files (``?tables=disk``): the permuted tables of rows ``start..end-1`` in ``tables.<generation>.<start>-<end>``,
read a bucket at a time.

After a 4 KiB header (magic line + JSON: the index's format and salt, :data:`RUN_FORMAT`, the rows, the design,
where each part is, a CRC-32 of the columns, directories and block checks) come the columns (the rows'
fingerprints u64, added times u32, refusals), then per table its directory (``(1 << bucket_bits) + 1`` u32 offsets),
its entries (row numbers u32, sorted by bucket, then row) and a CRC-32 of each :data:`BLOCK_ENTRIES` entries.  A run
file is written to ``<name>.tmp``, synced and renamed; one that cannot be used is left out (its rows are read from
the records); a block whose check fails is made again from :class:`RunColumns`, never read as row numbers."""

from __future__ import annotations

import contextlib
import os
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from simhash_filter.errors import CorruptIndexError
from simhash_filter.index.backends.file.osfiles import pread, replace_whole, write_all
from simhash_filter.index.backends.file.records import HEADER_SIZE, header, read_header
from simhash_filter.index.tables import TableDesign, is_count

RUN_MAGIC = b"simhash-filter tables\n"
#: The run-file format written and read.
RUN_FORMAT = 2
#: An entry of a table on disk: a row's number (its fingerprint is in memory, in the columns).
ENTRY = np.dtype("<u4")
#: Rows per bucket on average (a bucket is one ``pread`` of about 16 x 4 bytes; the directories cost 4 bytes per
#: this many rows and table in memory).
BUCKET_ROWS = 16
#: Entries per checked block (1 KiB), a CRC-32 each kept in memory (docs/stores.md compares the sizes).
BLOCK_ENTRIES = 256
#: Rows made and entries written at a time (bounds the temporary memory of writing a large run: its sort keys, 8
#: bytes a row, and this many rows' worth).
_WRITE_CHUNK = 1 << 22
_NAME = re.compile(r"tables\.(\d+)\.(\d+)-(\d+)")

#: ``on_damage(run, what)``: a block of a run file's entries failed its check (*what* names it) and was made again.
DamageHook = Callable[["RunFile", str], None]


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


def _bucket_chunks(
    design: TableDesign, fps: np.ndarray, refused: np.ndarray, t: int, drop: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(rows, buckets)`` of the rows table *t* takes (numbered from the run's first, ``uint64``) and their buckets
    (the lead's top bits: *drop* bits dropped), a chunk of rows at a time: how a run file sorts a table's entries,
    the same when it is written and when a damaged block is made again."""
    size = len(fps)
    taken = (refused & refused.dtype.type(1 << t)) == 0 if refused.any() else None
    for lo in range(0, size, _WRITE_CHUNK):
        ids = np.arange(lo, min(size, lo + _WRITE_CHUNK), dtype=np.uint64)
        if taken is not None:
            ids = ids[taken[lo : lo + _WRITE_CHUNK]]
        part = design.lead_array(fps[ids], t)
        if drop:
            part >>= np.uint64(drop)
        yield ids, part


def _block_checks(entries: np.ndarray, block: int) -> np.ndarray:
    """The CRC-32 of each *block* entries of *entries* (the last block may be shorter)."""
    view = memoryview(entries.data).cast("B")
    size = block * ENTRY.itemsize
    return np.array([zlib.crc32(view[i : i + size]) for i in range(0, len(view), size)], dtype="<u4")


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
    block: int = BLOCK_ENTRIES,
) -> Path:
    """Write the run file of rows ``start..start+len(fps)-1`` (their fingerprints, added times and refusals) of
    an index in format *fmt*, its entries checked every *block*, synced and renamed into place; its path.
    :class:`MergeCancelled` (nothing left) if *cancelled()* says so between two tables."""
    size = len(fps)
    end = start + size
    path = directory / run_name(generation, start, end)

    def fill(fd: int) -> None:
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
            key = np.empty(size, dtype=np.uint64)
            counts = np.zeros(1 << b, dtype=np.int64)
            filled = 0
            for ids, part in _bucket_chunks(design, fps, refused, t, drop):  # (bucket, row) packed in 64 bits
                counts += np.bincount(part.astype(np.intp), minlength=1 << b)
                part <<= np.uint64(row_bits)
                part |= ids
                key[filled : filled + len(part)] = part
                filled += len(part)
            key = key[:filled]
            offsets = np.zeros((1 << b) + 1, dtype="<u4")
            np.cumsum(counts, out=offsets[1:])
            key.sort()
            key &= np.uint64((1 << row_bits) - 1)
            write_all(fd, offsets.data)
            crc = zlib.crc32(offsets.data, crc)
            directory_at, at = at, at + offsets.nbytes
            checks = []
            for lo in range(0, len(key), _WRITE_CHUNK):  # a multiple of the block: each block's check in one chunk
                entries = (key[lo : lo + _WRITE_CHUNK] + np.uint64(start)).astype(ENTRY)
                write_all(fd, entries.data)
                checks.append(_block_checks(entries, block))
            entries_at, at = at, at + len(key) * ENTRY.itemsize
            check_data = np.concatenate(checks) if checks else np.empty(0, dtype="<u4")
            write_all(fd, check_data.data)
            crc = zlib.crc32(check_data.data, crc)
            tables.append([b, drop, directory_at, entries_at, len(key), at])
            at += check_data.nbytes
            del key
        fields = {
            "format": fmt, "run_format": RUN_FORMAT, "block_entries": block, "salt": salt, "start": start,
            "end": end, "design": design.name, "refused_bytes": refused.dtype.itemsize, "tables": tables, "crc": crc,
        }  # fmt: skip
        os.pwrite(fd, header(RUN_MAGIC, fields), 0)

    replace_whole(path, path.with_name(path.name + ".tmp"), fill)
    return path


class RunColumns:
    """A run's rows as the backend holds them in memory (views of its arrays, which never change): a damaged block of
    entries is made again from them, without reading the records."""

    __slots__ = ("design", "fps", "refused", "start")

    def __init__(self, design: TableDesign, start: int, fps: np.ndarray, refused: np.ndarray) -> None:
        self.design = design
        self.start = start
        self.fps = fps
        self.refused = refused

    def entries(self, t: int, drop: int, directory: np.ndarray, first: int, last: int) -> np.ndarray:
        """Entries ``first..last-1`` of table *t* (whose buckets drop *drop* bits of the lead and start at
        *directory*), as the run file holds them."""
        low = int(np.searchsorted(directory, first, side="right")) - 1  # the buckets the entries are in
        high = int(np.searchsorted(directory, last - 1, side="right")) - 1
        rows, buckets = [], []
        for ids, part in _bucket_chunks(self.design, self.fps, self.refused, t, drop):
            inside = (part >= np.uint64(low)) & (part <= np.uint64(high))
            rows.append(ids[inside])
            buckets.append(part[inside])
        row = np.concatenate(rows)
        row = row[np.lexsort((row, np.concatenate(buckets)))]
        base = int(directory[low])
        if len(row) != int(directory[high + 1]) - base:
            raise CorruptIndexError(f"table {t}'s directory does not match the rows of the run")
        entries: np.ndarray = (row[first - base : last - base] + np.uint64(self.start)).astype(ENTRY)
        return entries


class _Table:
    """One table of an open run file: its directory and block checks (in memory), where its entries are."""

    __slots__ = ("checks", "count", "directory", "drop", "entries_at", "offsets")

    def __init__(self, directory: np.ndarray, drop: int, entries_at: int, count: int, checks: np.ndarray) -> None:
        self.offsets = directory
        self.directory = memoryview(directory.data)  # a Python int per index: faster than numpy's scalars
        self.drop = drop
        self.entries_at = entries_at
        self.count = count
        self.checks = memoryview(checks.data)


class RunFile:
    """An open run file: its directories and block checks in memory, its entries read a bucket at a time, each
    block checked (a damaged one made again from the run's columns, and kept)."""

    __slots__ = ("_remade", "block", "columns", "end", "fd", "on_damage", "path", "start", "tables")

    def __init__(
        self,
        path: Path,
        fd: int,
        columns: RunColumns,
        end: int,
        tables: list[_Table],
        block: int,
        on_damage: DamageHook,
    ) -> None:
        self.path = path
        self.fd = fd
        self.columns = columns
        self.start = columns.start
        self.end = end
        self.tables = tables
        self.block = block
        self.on_damage = on_damage
        self._remade: dict[tuple[int, int], bytes] = {}  # (table, block) -> its entries, made from the columns

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def nbytes(self) -> int:
        """Bytes of its directories, block checks and remade blocks in memory."""
        held = sum(t.directory.nbytes + t.checks.nbytes for t in self.tables)
        return held + sum(map(len, self._remade.values()))

    @property
    def damaged(self) -> int:
        """Its blocks found damaged (and made again) so far."""
        return len(self._remade)

    @classmethod
    def open(
        cls,
        path: Path,
        salt: int,
        design: TableDesign,
        columns: tuple[np.ndarray, np.ndarray, np.ndarray],
        *,
        read: bool = True,
        on_damage: DamageHook = lambda run, what: None,
    ) -> RunFile:
        """Open the run file at *path* of the rows whose *columns* ``(fingerprints, added, refused)`` these are (the
        backend's arrays' rows of the run), reading them from the file with *read* (else: a run just written, whose
        columns and CRC are not read); raise :class:`CorruptIndexError` if it is not one of this index's (its salt),
        of *design*, whole.  *on_damage* is told of each damaged block of entries found later."""
        fd = os.open(path, os.O_RDONLY)
        try:
            fields = read_header(fd, path, RUN_MAGIC)
            start, end = int(fields["start"]), int(fields["end"])
            block = _layout(fields, path)
            if fields.get("salt") != salt:
                raise CorruptIndexError(f"{path} does not belong to this generation's records (another salt)")
            refused = columns[2]
            if fields.get("design") != design.name or fields.get("refused_bytes") != refused.dtype.itemsize:
                raise CorruptIndexError(f"{path} holds the tables of the design {fields.get('design')}")
            if any(len(column) != end - start for column in columns):
                raise CorruptIndexError(f"{path} holds rows {start}..{end - 1}, which the records do not")
            crc = _read_columns(fd, path, columns) if read else 0
            tables = []
            for b, drop, directory_at, entries_at, count, checks_at in _table_fields(fields, path, design):
                raw = pread(fd, 4 * ((1 << b) + 1), directory_at)
                crc = zlib.crc32(raw, crc)
                directory = np.frombuffer(raw, dtype="<u4")
                if len(directory) != (1 << b) + 1 or int(directory[-1]) != count:
                    raise CorruptIndexError(f"{path}: a table's directory is damaged")
                raw = pread(fd, 4 * -(-count // block), checks_at)
                crc = zlib.crc32(raw, crc)
                checks = np.frombuffer(raw, dtype="<u4")
                tables.append(_Table(directory, drop, entries_at, count, checks))
            if read and crc != fields.get("crc"):
                raise CorruptIndexError(
                    f"{path}: its columns, directories or block checks are damaged (their CRC-32 differs)"
                )
            if os.fstat(fd).st_size < max(entries_at + count * ENTRY.itemsize, checks_at + 4 * -(-count // block)):
                raise CorruptIndexError(f"{path} ends in its entries")
        except BaseException:
            os.close(fd)
            raise
        run_columns = RunColumns(design, start, columns[0], refused)
        return cls(path, fd, run_columns, end, tables, block, on_damage)

    def buckets(self, leads: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """The rows in each table's bucket of the lead values *leads* (one per table), one ``pread`` a bucket (the
        blocks that hold it, checked): the rows of every bucket back to back, and each row's table."""
        reads, tables, sizes = [], [], []
        fd, block, crc32 = self.fd, self.block, zlib.crc32
        size = block * 4
        for t, (table, lead) in enumerate(zip(self.tables, leads, strict=True)):
            directory = table.directory
            b = lead >> table.drop
            lo = directory[b]
            hi = directory[b + 1]
            if hi == lo:
                continue
            checks = table.checks
            first = lo - lo % block
            last = hi + -hi % block
            if last > table.count:
                last = table.count
            data = os.pread(fd, (last - first) * 4, table.entries_at + first * 4)
            if len(data) != (last - first) * 4 or (  # one block, usually; else each checked
                crc32(data) != checks[first // block]
                if last - first <= block
                else not _intact(data, checks, first // block, size)
            ):
                data = self._checked(t, table, data, first, last)  # a damaged block made again
            reads.append(data[(lo - first) * 4 : (hi - first) * 4])
            tables.append(t)
            sizes.append(hi - lo)
        rows = np.frombuffer(b"".join(reads), dtype=ENTRY)
        which = np.repeat(np.array(tables, dtype=np.intp), sizes)
        return rows, which

    def _checked(self, t: int, table: _Table, data: bytes, first: int, last: int) -> bytes:
        """Entries ``first..last-1`` of *table* (the *t*-th), whole blocks, from *data* (as read), each block
        checked (a damaged one made again)."""
        j = first // self.block
        return b"".join(self._block(t, table, data, j, j + i) for i in range(-(-(last - first) // self.block)))

    def _block(self, t: int, table: _Table, data: bytes, first: int, j: int) -> bytes:
        """Block *j* of *table* (the *t*-th) out of *data*, the blocks read from block *first* on, checked (made
        again if damaged)."""
        size = self.block * 4
        part = data[(j - first) * size : (j - first + 1) * size]
        if len(part) != min(size, (table.count - j * self.block) * 4) or zlib.crc32(part) != table.checks[j]:
            return self._remake(t, table, j)
        return part

    def _remake(self, t: int, table: _Table, j: int) -> bytes:
        """Block *j* of *table* (the *t*-th) made again from the run's columns (kept: it is made once), its check
        verified; the damage reported."""
        remade = self._remade.get((t, j))
        if remade is not None:
            return remade
        first = j * self.block
        last = min(table.count, first + self.block)
        entries = self.columns.entries(t, table.drop, table.offsets, first, last)
        if zlib.crc32(entries.data) != table.checks[j]:
            raise CorruptIndexError(f"{self.path}: table {t}'s block {j} made from the rows differs from its check")
        remade = self._remade[(t, j)] = entries.tobytes()
        self.on_damage(self, f"table {t}'s block {j} of entries (entries {first}..{last - 1}) failed its check")
        return remade

    def close(self, remove: bool = False) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
        if remove:
            with contextlib.suppress(OSError):
                self.path.unlink()


def _intact(data: bytes, checks: memoryview, j: int, size: int) -> bool:
    """Whether the blocks *data* holds (of *size* bytes; the first is block *j*) match their *checks*."""
    view = memoryview(data)
    for at in range(0, len(data), size):
        if zlib.crc32(view[at : at + size]) != checks[j]:
            return False
        j += 1
    return True


def _layout(fields: dict[str, Any], path: Path) -> int:
    """The entries per checked block the header names (of a run file of :data:`RUN_FORMAT`)."""
    run_format = fields.get("run_format", 1)
    if run_format != RUN_FORMAT or isinstance(run_format, bool):
        raise CorruptIndexError(f"{path} is in run-file format {run_format!r}, which this version does not read")
    block = fields.get("block_entries", BLOCK_ENTRIES)
    if not is_count(block, 1):
        raise CorruptIndexError(f"{path}: the header is damaged (block_entries {block!r})")
    return block


def _read_columns(fd: int, path: Path, columns: tuple[np.ndarray, ...]) -> int:
    """Fill *columns* from the run file's columns; their CRC-32."""
    crc = 0
    at = HEADER_SIZE
    for column in columns:
        view = memoryview(column.data).cast("B")
        _read_into(fd, view, at, path)
        crc = zlib.crc32(view, crc)
        at += len(view)
    return crc


def _read_into(fd: int, view: memoryview, offset: int, path: Path) -> None:
    """Fill *view* with the file's bytes from *offset* (a read at a time of at most 256 MiB)."""
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done : done + (1 << 28)]], offset + done)
        if not got:
            raise CorruptIndexError(f"{path} ends in its columns")
        done += got


def _table_fields(
    fields: dict[str, Any], path: Path, design: TableDesign
) -> Iterator[tuple[int, int, int, int, int, int]]:
    """Each table's ``(bucket bits, dropped bits, directory at, entries at, entries, checks at)``."""
    tables = fields.get("tables")
    if not isinstance(tables, list) or len(tables) != design.n_tables:
        raise CorruptIndexError(f"{path}: the header is damaged (its tables)")
    for table in tables:
        if not (isinstance(table, list) and len(table) == 6 and all(isinstance(v, int) and v >= 0 for v in table)):
            raise CorruptIndexError(f"{path}: the header is damaged (a table {table!r})")
        yield tuple(table)
