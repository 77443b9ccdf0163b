"""On-disk backend: an append-only log on disk, the permuted tables in memory.

An index is a directory::

    CURRENT              the generation in use ("1"; a compaction writes the next one, then switches)
    LOCK                 held (flock) by the one process that writes; it holds that process's pid
    records.<gen>        a 4 KiB header (magic line + JSON: format, salt, record_bytes, metadata...),
                         then one record of ``record_bytes`` per stored page, in insertion order
    urls.<gen>           a 4 KiB header, then the keys (UTF-8), back to back, in the same order
    deleted.<gen>        16-byte tombstones (row, check) of deleted fingerprints
    CURRENT.tmp          only while CURRENT is being replaced (a stale one is ignored, and removed by
                         the next writer)

A record is ``fingerprint u64 | URL offset u64 | added (Unix seconds) u32 | URL length u32 |
key check u32 | check u32`` (32 bytes), then, in an index that keeps sketches (metadata
``sketch_bytes`` > 0: two-stage detection), the page's sketch (``sketch_bytes`` bytes, 64 in
practice), little-endian: a page's fingerprint and sketch are one record, written by one ``write(2)``.
The key check is the CRC-32 of the key's UTF-8 bytes.  The check mixes the other fields (the key
check among them) and a hash of the sketch with the file's random salt, so a torn, zeroed or foreign
record, or a changed byte of its sketch, fails it; the URL offsets must also follow each other.  A key
is verified against its key check whenever it is read (a query's result, an export, a delete, a
compaction): a changed byte of ``urls.<gen>`` is a :class:`CorruptIndexError` naming the file and the
key's offset, never a wrong URL.

This is index format 3 (the ``format`` of every header).  Formats 1 (records without sketches) and 2
(records without key checks), written by earlier versions, are not read: such an index is refused
(:class:`~simhash_filter.index.backends.base.MetadataMismatchError`) with the way out - start a new index
(another location, or delete this one), or keep using the version that wrote it.

On open the records are read and verified with numpy and the fingerprints are sorted into
:class:`~simhash_filter.index.backends.memory.MemoryBackend`'s tables (about 2 s for 10 million); only
the fingerprints (8 bytes), the sketches (``sketch_bytes``), the tables (6 bytes per table) and the
added times (4 bytes) stay in memory.  A key is read back from disk (two ``pread``) only when a
query returns its row.

Durability: an add writes the key, then the record (with its sketch), with ``write(2)`` before it
returns, so whatever a call reported as stored survives the process being killed (``kill -9``);
with ``?sync=always`` the key is ``fdatasync``-ed before the record is written and the record after,
so each add survives a power loss or an OS crash, and a record never reaches the disk before its key
(without it those may lose the adds of the last seconds, which the OS had not yet written back, and a
record may reach the disk without its key: reading that key is a :class:`CorruptIndexError`).
Records cut short at the end of the log, or whose bytes never reached the disk (a 512-byte sector of
them is zeros), are dropped on open (a torn tail); a complete record whose check fails (a changed byte,
even in the last record), or a damaged record followed by intact ones, is an error
(:class:`CorruptIndexError`), never dropped silently.

Readers and compaction: an open reads CURRENT and opens the three files of that generation at once (again,
if a compaction switched CURRENT meanwhile), then reads them only through those file descriptors: a
reader (``readonly``) reads the generation it opened to the end, even after a compaction in another
process removed its files (an unlinked open file stays readable on POSIX).

Failures (a full disk): opening never writes (but cuts a torn tail); a compaction or the creation of an
index that fails midway removes what it wrote (its generation's files, ``CURRENT.tmp``), so the index
stays as it was, and the backend goes on with the generation it had.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import itertools
import json
import logging
import os
import re
import secrets
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import numpy as np

from simhash_filter.index.backends.base import Entry, MetadataMismatchError, check_metadata
from simhash_filter.index.backends.memory import MemoryBackend
from simhash_filter.index.backends.uri import redact_uri
from simhash_filter.index.tables import TableDesign

__all__ = ["CorruptIndexError", "FileBackend", "IndexLockedError", "parse_age"]

logger = logging.getLogger(__name__)

#: The index format written and read (1: records without sketches; 2: records without key checks).
FORMAT = 3
HEADER_SIZE = 4096
MAGIC = b"simhash-filter index\n"
URLS_MAGIC = b"simhash-filter urls\n"
DELETED_MAGIC = b"simhash-filter deleted\n"
RECORD = np.dtype(
    [("fp", "<u8"), ("offset", "<u8"), ("added", "<u4"), ("length", "<u4"), ("key_check", "<u4"), ("check", "<u4")]
)
_RECORD = struct.Struct("<QQIIII")
_TOMBSTONE = struct.Struct("<QQ")
assert RECORD.itemsize == _RECORD.size == 32
#: Longest key (URL) in bytes, UTF-8.
MAX_KEY_BYTES = 1 << 20
#: Records verified per step on open (bounds the temporary memory: 32 MiB).
_CHUNK = 1 << 20
_M64 = (1 << 64) - 1
_P = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93, 0xFF51AFD7ED558CCD)
#: Multipliers of the sketch hash (a step per 8 bytes of sketch) and of its share of the check.
_PS = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
#: Multiplier of the key check's share of the check.
_PK = 0x2545F4914F6CDD1D
#: The files of a generation.
_KINDS = ("records", "urls", "deleted")
#: A write that never reached the disk leaves whole sectors of zeros (a record may straddle two).
_SECTOR = 512
#: Times an open tries again when a compaction switched CURRENT between reading it and opening the files.
_OPEN_ATTEMPTS = 100


def record_dtype(sketch_bytes: int) -> np.dtype:
    """The record of an index keeping sketches of *sketch_bytes* (``RECORD`` when 0; else ``RECORD``'s fields
    and a ``sketch`` field of that many bytes)."""
    if not sketch_bytes:
        return RECORD
    return np.dtype([*((name, RECORD.fields[name][0]) for name in RECORD.names), ("sketch", "u1", (sketch_bytes,))])


class CorruptIndexError(ValueError):
    """An index file is damaged or is not an index file."""


class IndexLockedError(RuntimeError):
    """Another process has the index open for writing."""


def sketch_hash(sketch: bytes) -> int:
    """A 64-bit hash of a sketch (same as :func:`sketch_hashes`): a change within any 8 bytes changes it."""
    padded = sketch + bytes(-len(sketch) % 8)
    s = len(sketch)
    for word in struct.unpack(f"<{len(padded) // 8}Q", padded):
        s = ((s ^ word) * _PS[0]) & _M64
        s ^= s >> 31
    return s


def sketch_hashes(sketches: np.ndarray) -> np.ndarray:
    """:func:`sketch_hash` of each row of an ``(m, sketch_bytes)`` ``uint8`` array."""
    m, size = sketches.shape
    padded = np.zeros((m, size + -size % 8), dtype=np.uint8)
    padded[:, :size] = sketches
    words = padded.view("<u8")
    s = np.full(m, size, dtype=np.uint64)
    for j in range(words.shape[1]):
        s ^= words[:, j]
        s *= np.uint64(_PS[0])
        s ^= s >> np.uint64(31)
    return s


def key_check(key: bytes) -> int:
    """The key check of a record: the CRC-32 of the key's UTF-8 bytes."""
    return zlib.crc32(key)


def record_check(
    fp: int, offset: int, added: int, length: int, salt: int, sketch: bytes | None = None, key_check: int = 0
) -> int:
    """The 32-bit check of one record (same as :func:`record_checks`), with its *sketch* if the index keeps
    sketches, and its *key_check*."""
    h = (fp * _P[0]) & _M64
    h ^= (offset * _P[1]) & _M64
    h ^= ((added | length << 32) * _P[2]) & _M64
    h ^= (salt * _P[3]) & _M64
    h ^= (key_check * _PK) & _M64
    if sketch is not None:
        h ^= (sketch_hash(sketch) * _PS[1]) & _M64
    h ^= h >> 33
    h = (h * _P[4]) & _M64
    h ^= h >> 29
    return h & 0xFFFFFFFF


def record_checks(records: np.ndarray, salt: int) -> np.ndarray:
    """The check of each record of a :func:`record_dtype` array (numpy wraps the products modulo 2**64)."""
    u64 = np.uint64
    h = records["fp"] * u64(_P[0])
    h ^= records["offset"] * u64(_P[1])
    h ^= (records["added"].astype(u64) | records["length"].astype(u64) << u64(32)) * u64(_P[2])
    h ^= u64((salt * _P[3]) & _M64)
    h ^= records["key_check"].astype(u64) * u64(_PK)
    if "sketch" in (records.dtype.names or ()):
        h ^= sketch_hashes(records["sketch"]) * u64(_PS[1])
    h ^= h >> u64(33)
    h *= u64(_P[4])
    h ^= h >> u64(29)
    return (h & u64(0xFFFFFFFF)).astype(np.uint32)


def _tombstone_check(row: int, salt: int) -> int:
    return record_check(row, 0, 0, 0, salt ^ 0x7F4A7C15)


_AGE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", re.I)
_AGE_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_age(value: str | float | int, *, require_unit: bool = False) -> float:
    """Seconds from ``3600``, ``"90s"``, ``"15m"``, ``"12h"``, ``"30d"`` or ``"2w"``; 0 means never.

    A bare number is seconds (the ``SIMHASH_MAX_AGE`` setting and the ``max_age`` URI option), unless
    ``require_unit`` (the command line's ``--max-age``), where a string must end in one of the units.  Ours, not
    a library's: nothing installed parses durations (``dateparser``, a benchmark extra, reads dates), and
    this five-unit grammar is one regular expression."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not require_unit:
        seconds = float(value)
    else:
        found = _AGE.fullmatch(str(value))
        if not found or (require_unit and not found[2]):
            forms = "a number and a unit:" if require_unit else "seconds, or a number and a unit:"
            raise ValueError(f"an age must be {forms} s, m, h, d or w (e.g. 90s, 15m, 12h, 30d, 2w), got {value!r}")
        seconds = float(found[1]) * _AGE_UNITS[found[2].lower()]
    if seconds < 0:
        raise ValueError(f"an age must be >= 0, got {value!r}")
    return seconds


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _pread(fd: int, size: int, offset: int) -> bytes:
    """*size* bytes at *offset* (fewer at the end of the file)."""
    data = os.pread(fd, size, offset)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _damaged_key(path: Path, row: int, offset: int, length: int) -> CorruptIndexError:
    """The error for the key of record *row* (*length* bytes at *offset* of the keys file *path*) that does not
    match its key check."""
    return CorruptIndexError(
        f"{path}: the key of record {row} at offset {offset} ({length} bytes) is damaged (it does not match its "
        "check) - the file was changed or damaged; it cannot be trusted (restore a copy, or start a new index)"
    )


def _close_all(fds: Mapping[str, int]) -> None:
    for fd in fds.values():
        with contextlib.suppress(OSError):
            os.close(fd)


def _header(magic: bytes, fields: Mapping[str, Any]) -> bytes:
    body = magic + json.dumps(fields, sort_keys=True, ensure_ascii=True).encode("ascii") + b"\n"
    if len(body) > HEADER_SIZE:
        raise ValueError(f"index metadata too large for the {HEADER_SIZE}-byte header")
    return body.ljust(HEADER_SIZE, b" ")


def _read_header(fd: int, path: Path, magic: bytes) -> dict[str, Any]:
    """The header fields of the open file *fd* (*path* names it in errors)."""
    head = _pread(fd, HEADER_SIZE, 0)
    if not head.startswith(magic):
        raise CorruptIndexError(f"{path} is not a simhash-filter index file (no {magic.strip().decode()!r} header)")
    try:
        fields = json.loads(head[len(magic) :].decode("ascii"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CorruptIndexError(f"{path}: the header is damaged") from None
    if len(head) < HEADER_SIZE or not isinstance(fields, dict):
        raise CorruptIndexError(f"{path}: the header is damaged")
    stored = fields.get("format")
    if stored != FORMAT:
        newer = isinstance(stored, int) and not isinstance(stored, bool) and stored > FORMAT
        raise MetadataMismatchError(
            f"{path} is in index format {stored!r}, written by "
            f"{'a newer' if newer else 'an older'} version of simhash-filter; this version reads format {FORMAT} "
            "only (format 3 keeps each page's sketch beside its fingerprint, and a check of its URL): "
            + (
                "upgrade simhash-filter, or use a new index location to start afresh"
                if newer
                else f"use a new index location (or delete {path.parent}) to start afresh, or keep using the "
                "version that wrote it (its 'simhash-filter index export' lists the stored URLs and fingerprints)"
            )
        )
    return fields


def _record_chunks(
    fd: int, path: Path, start: int, end: int, record: np.dtype = RECORD, size: int = _CHUNK
) -> Iterator[tuple[int, np.ndarray]]:
    """``(first row, records)`` (read-only arrays) of rows ``start..end-1`` of the open records file *fd*
    (records of dtype *record*; *path* names it in errors), *size* records of 32 bytes' worth at a time (fewer
    of a longer record)."""
    size = max(1, size * RECORD.itemsize // record.itemsize)
    for first in range(start, end, size):
        count = min(size, end - first)
        data = _pread(fd, count * record.itemsize, HEADER_SIZE + first * record.itemsize)
        if len(data) != count * record.itemsize:
            raise CorruptIndexError(f"{path} ends before record {end - 1}: the file was cut while in use")
        yield first, np.frombuffer(data, dtype=record)


def _unwritten(records: np.ndarray, first_row: int) -> np.ndarray:
    """Whether each of *records* (rows ``first_row...`` of a records file) has bytes that never reached the disk:
    all zeros from one 512-byte sector boundary of the file (or the record's start) to the next (or its end).
    Such a record is a torn write; a complete record whose check fails without that was changed afterwards."""
    m = len(records)
    itemsize = records.dtype.itemsize
    raw = records.view(np.uint8).reshape(m, itemsize)
    seen = np.zeros((m, itemsize + 1), dtype=np.int32)  # nonzero bytes before each position of the record
    np.cumsum(raw != 0, axis=1, out=seen[:, 1:])
    phase = -(HEADER_SIZE + (first_row + np.arange(m, dtype=np.int64)) * itemsize) % _SECTOR
    out = np.zeros(m, dtype=bool)
    for p in np.unique(phase).tolist():  # the records whose sector boundaries fall at the same places
        which = phase == p
        cuts = sorted({0, itemsize, *range(p, itemsize, _SECTOR)})
        part = seen[which]
        zeros = np.zeros(len(part), dtype=bool)
        for a, b in itertools.pairwise(cuts):
            zeros |= part[:, b] == part[:, a]
        out[which] = zeros
    return out


def _release_freed_memory() -> None:
    """Hand the temporary arrays of a load back to the OS (glibc keeps freed blocks under 32 MB otherwise)."""
    with contextlib.suppress(AttributeError, OSError):  # not glibc: nothing to do
        ctypes.CDLL(None).malloc_trim(0)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileBackend(MemoryBackend):
    """An index in a directory; ``file:///path/to/dir?sync=always&max_age=30d`` or a plain path.

    Options: ``sync`` (``none``, the default: every add is written before it returns and survives
    ``kill -9``; ``always``: also ``fdatasync``-ed, survives power loss), ``max_age`` (fingerprints
    older than this are ignored, so their pages are kept again: seconds or ``12h``, ``30d``...;
    ``0``, the default, keeps them forever), ``readonly`` (``1``: no lock, no writes; reads a
    snapshot while another process writes), and the memory backend's ``buffer_size`` and
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
    ) -> None:
        super().__init__(k=k, design=design, metadata=metadata, buffer_size=buffer_size, merge_factor=merge_factor)
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
            self._load()
        except BaseException:
            self._release()
            raise

    @classmethod
    def from_uri(
        cls, uri: str, *, k: int, design: TableDesign, metadata: Mapping[str, Any] | None = None
    ) -> FileBackend:
        """``file://PATH?options`` (``file:///abs/dir``, ``file://relative/dir``) or a plain ``PATH``."""
        if "://" in uri:
            parts = urlsplit(uri)
            location = unquote(uri.split("://", 1)[1].split("?", 1)[0].split("#", 1)[0])
            query = parts.query
        else:
            location, query = uri, ""
        if not location:
            raise ValueError(
                f"a file backend needs a directory: {redact_uri(uri)!r} (e.g. 'file:///var/lib/crawl/simhash')"
            )
        options: dict[str, Any] = {}
        for name, value in parse_qsl(query, keep_blank_values=True):
            if name in ("buffer_size", "merge_factor"):
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
            elif name in ("sync", "max_age"):
                options[name] = value
            else:
                raise ValueError(f"unknown file backend option {name!r} in {redact_uri(uri)!r}")
        return cls(Path(location).expanduser(), k=k, design=design, metadata=metadata, **options)

    # -- opening ---------------------------------------------------------------------------------

    def _file(self, kind: str, generation: int) -> Path:
        return self.path / f"{kind}.{generation}"

    def _take_lock(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise IndexLockedError(
                f"the index {self.path} is open for writing in another process (pid {holder}); one process writes "
                "an index at a time: give each crawl its own index, or share one through redis://"
            ) from None
        with contextlib.suppress(OSError):  # the pid is for the error message only: a full disk opens too
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._lock_fd = fd

    def _generation(self) -> int | None:
        try:
            text = (self.path / "CURRENT").read_text("ascii").strip()
        except FileNotFoundError:
            return None
        except UnicodeDecodeError:
            text = ""
        if not text.isdigit():
            raise CorruptIndexError(f"{self.path / 'CURRENT'} is damaged (expected a generation number)")
        return int(text)

    def _create(self, generation: int, salt: int, created: float, metadata: Mapping[str, Any]) -> None:
        """Write the empty files of a generation (not yet current)."""
        fields = {
            "format": FORMAT,
            "salt": salt,
            "created": created,
            "record_bytes": record_dtype(self._sketch_bytes).itemsize,
            "metadata": dict(metadata),
            "k": self.k,
            "design": self.design.name,
        }
        for kind, magic in (("records", MAGIC), ("urls", URLS_MAGIC), ("deleted", DELETED_MAGIC)):
            fd = os.open(self._file(kind, generation), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                _write_all(fd, _header(magic, fields if kind == "records" else {"format": FORMAT, "salt": salt}))
                os.fsync(fd)
            finally:
                os.close(fd)

    def _write_current(self, generation: int) -> None:
        """Make *generation* current: write ``CURRENT.tmp``, then rename it to ``CURRENT`` (atomically)."""
        tmp = self.path / "CURRENT.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, f"{generation}\n".encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path / "CURRENT")
        _fsync_dir(self.path)

    def _current_is(self, generation: int) -> bool:
        """Whether CURRENT names *generation* (False if it cannot be read)."""
        try:
            return self._generation() == generation
        except (OSError, CorruptIndexError):
            return False

    def _discard(self, generation: int) -> None:
        """Remove what a creation or compaction of *generation* that failed wrote (best effort)."""
        for path in (*(self._file(kind, generation) for kind in _KINDS), self.path / "CURRENT.tmp"):
            with contextlib.suppress(OSError):
                path.unlink()

    def _remove_stale(self, generation: int) -> None:
        """Remove the files of generations other than *generation* (a compaction's old one, or what one that
        died left) and a stale ``CURRENT.tmp``.  Readers that hold them open go on reading them."""
        for stale in self.path.iterdir():
            kind, _, number = stale.name.partition(".")
            if stale.name == "CURRENT.tmp" or (kind in _KINDS and number.isdigit() and int(number) != generation):
                with contextlib.suppress(FileNotFoundError):
                    stale.unlink()

    def _create_index(self) -> None:
        """Create generation 1 and make it current; if that fails (a full disk), remove what was written."""
        try:
            self._create(1, secrets.randbits(63), self._clock(), self._requested or {})
            self._write_current(1)
        except BaseException:
            if not self._current_is(1):
                self._discard(1)
            raise

    def _open_generation(self) -> tuple[int, dict[str, int]] | None:
        """Read CURRENT and open the files of its generation, all at once: ``(generation, fds)``, or None if
        there is no CURRENT.  If a compaction switched CURRENT in between (and removed the files it named), try
        again with the new one."""
        flags = os.O_RDONLY if self._readonly else os.O_RDWR | os.O_APPEND
        for attempt in range(_OPEN_ATTEMPTS):
            generation = self._generation()
            if generation is None:
                return None
            fds: dict[str, int] = {}
            try:
                for kind in _KINDS:
                    fds[kind] = os.open(self._file(kind, generation), flags)
            except FileNotFoundError:
                _close_all(fds)
                if self._generation() != generation:
                    continue  # a compaction switched to its new generation and removed this one
                missing = next(self._file(k, generation) for k in _KINDS if k not in fds)
                raise CorruptIndexError(
                    f"{missing} is missing: the index {self.path} is incomplete, or its CURRENT is damaged "
                    f"({self.path / 'CURRENT'} names generation {generation})"
                ) from None
            except BaseException:
                _close_all(fds)
                raise
            if attempt + 1 < _OPEN_ATTEMPTS and self._generation() != generation:
                _close_all(fds)  # CURRENT moved on meanwhile: open the newer generation
                continue
            return generation, fds
        raise FileNotFoundError(
            errno.ENOENT, f"the index {self.path} was compacted {_OPEN_ATTEMPTS} times while being opened; try again"
        )

    def _no_index(self) -> Exception:
        """The error of a read-only open where there is no CURRENT."""
        if not self.path.exists():
            return FileNotFoundError(f"no index at {self.path}")
        if self.path.is_dir() and {p.name for p in self.path.iterdir()} <= {"LOCK", "CURRENT.tmp"}:
            return FileNotFoundError(f"no index at {self.path} (none was created there, or its creation failed)")
        return CorruptIndexError(f"{self.path} is not a simhash-filter index (no CURRENT file)")

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
        paths = {kind: self._file(kind, generation) for kind in _KINDS}
        fields = _read_header(self._fds["records"], paths["records"], MAGIC)
        self._salt = int(fields.get("salt", -1))
        self._created = float(fields.get("created", 0.0))
        self._stored_k = fields.get("k")
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
            if _read_header(self._fds[kind], paths[kind], magic).get("salt") != self._salt:
                raise CorruptIndexError(f"{paths[kind]} does not belong to {paths['records']} (another index's file)")
        self._load_records(paths["records"])
        self._load_tombstones(paths["deleted"], self._n)
        _release_freed_memory()

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
        self._reserve(total)
        good = 0
        end = HEADER_SIZE
        for start, chunk in _record_chunks(fd, path, 0, total, record):
            ok = record_checks(chunk, self._salt) == chunk["check"]
            expected = np.empty(len(chunk), dtype=np.uint64)
            expected[0] = end
            np.add(chunk["offset"][:-1], chunk["length"][:-1], out=expected[1:])
            ok &= chunk["offset"] == expected
            ok &= chunk["offset"] + chunk["length"] <= np.uint64(urls_size)
            bad = np.flatnonzero(~ok)
            intact = len(chunk) if len(bad) == 0 else int(bad[0])
            self._fps[start : start + intact] = chunk["fp"][:intact]
            self._times[start : start + intact] = chunk["added"][:intact]
            if self._sketch_bytes:
                self._sketches[start : start + intact] = chunk["sketch"][:intact]
            good += intact
            if intact:
                end = int(chunk["offset"][intact - 1] + chunk["length"][intact - 1])
            if intact < len(chunk):
                self._check_tail_is_torn(path, start + intact, total, urls_size)
                break
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
        if good >= self._buffer_size:
            self._seal()

    def _check_tail_is_torn(self, path: Path, first_bad: int, total: int, urls_size: int) -> None:
        """Return if the records from *first_bad* on are a torn write (each cut short, never written - a sector
        of zeros - or intact but with its key past the end of the keys file, which the disk did not keep);
        raise :class:`CorruptIndexError` if one of them was damaged (a complete record whose check fails, or
        that does not follow the one before) or an intact record follows."""
        damaged: int | None = None
        for start, chunk in _record_chunks(self._fds["records"], path, first_bad, total, self._record, _CHUNK // 16):
            intact = record_checks(chunk, self._salt) == chunk["check"]
            keyed = chunk["offset"] + chunk["length"] <= np.uint64(urls_size)
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
            wrong = np.flatnonzero(~intact & ~_unwritten(chunk, start))
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
        data = _pread(fd, max(0, os.fstat(fd).st_size - HEADER_SIZE), HEADER_SIZE)
        whole = len(data) - len(data) % _TOMBSTONE.size
        if whole < len(data) and not self._readonly:  # a tombstone cut short: its delete did not return
            os.ftruncate(fd, HEADER_SIZE + whole)
        stones = np.frombuffer(data[:whole], dtype="<u8")
        for row, check in zip(stones[0::2].tolist(), stones[1::2].tolist(), strict=True):
            if check != _tombstone_check(row, self._salt) or row >= n:
                raise CorruptIndexError(f"{path}: a tombstone is damaged")
            self._dead.add(row)

    # -- memory backend hooks --------------------------------------------------------------------

    def _reserve(self, n: int) -> None:
        super()._reserve(n)
        if len(self._times) < len(self._fps):
            grown = np.empty(len(self._fps), dtype=np.uint32)
            grown[: self._n] = self._times[: self._n]
            self._times = grown

    def _store_keys(self, fingerprints: np.ndarray, keys: Sequence[str], sketches: np.ndarray) -> None:
        """Write the keys and then the records of rows about to be appended; durable when it returns."""
        if self._readonly:
            raise PermissionError(f"the index {self.path} is open read-only")
        now = int(self._clock())
        encoded = [key.encode("utf-8", "surrogatepass") for key in keys]
        for data in encoded:
            if len(data) > MAX_KEY_BYTES:
                raise ValueError(f"a key longer than {MAX_KEY_BYTES} bytes: {data[:80]!r}...")
        if len(encoded) == 1:
            data = encoded[0]
            fp = int(fingerprints[0])
            sketch = sketches[0].tobytes() if self._sketch_bytes else None
            crc = key_check(data)
            check = record_check(fp, self._url_end, now, len(data), self._salt, sketch, crc)
            records = _RECORD.pack(fp, self._url_end, now, len(data), crc, check) + (sketch or b"")
            urls = data
        else:
            records_array = np.zeros(len(encoded), dtype=self._record)
            lengths = np.fromiter(map(len, encoded), dtype=np.uint64, count=len(encoded))
            records_array["fp"] = fingerprints
            records_array["length"] = lengths
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
            _write_all(urls_fd, urls)
            if self._sync:
                os.fdatasync(urls_fd)  # the keys are on the disk before the records that point at them
            _write_all(records_fd, records)
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
        record = _pread(self._fds["records"], RECORD.itemsize, HEADER_SIZE + row * self._record.itemsize)
        _, offset, _, length, crc, _ = _RECORD.unpack(record)
        key = _pread(self._fds["urls"], length, offset)
        if key_check(key) == crc:
            with contextlib.suppress(UnicodeDecodeError):  # else its key check matched by chance
                return key.decode("utf-8", "surrogatepass")
        raise _damaged_key(self._file("urls", self._generation_number), row, offset, length)

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
                stones = b"".join(_TOMBSTONE.pack(row, _tombstone_check(row, self._salt)) for row in rows)
                try:
                    _write_all(fd, stones)
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
        for start, chunk in _record_chunks(records_fd, path, 0, n, self._record, _CHUNK // 16):
            first = int(chunk["offset"][0])
            blob = _pread(urls_fd, int(chunk["offset"][-1] + chunk["length"][-1]) - first, first)
            sketches = np.ascontiguousarray(chunk["sketch"]).tobytes() if size else b""
            for i, (fp, offset, length, added, crc) in enumerate(
                zip(
                    chunk["fp"].tolist(),
                    chunk["offset"].tolist(),
                    chunk["length"].tolist(),
                    chunk["added"].tolist(),
                    chunk["key_check"].tolist(),
                    strict=True,
                )
            ):
                data = blob[offset - first : offset - first + length]
                if crc32(data) != crc:
                    raise _damaged_key(urls, start + i, offset, length)
                try:
                    key = data.decode("utf-8", "surrogatepass")
                except UnicodeDecodeError:  # its key check matched by chance
                    raise _damaged_key(urls, start + i, offset, length) from None
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
        """Write generation *new*: the live rows of this one, their keys verified, under a new salt."""
        salt = secrets.randbits(63)
        self._create(new, salt, self._created, self._metadata)
        live = self._live_mask()
        old_urls = self._file("urls", self._generation_number)
        fds: dict[str, int] = {}
        try:
            for kind in ("records", "urls"):
                fds[kind] = os.open(self._file(kind, new), os.O_WRONLY | os.O_APPEND)
            url_end = HEADER_SIZE
            path = self._file("records", self._generation_number)
            for start, chunk in _record_chunks(self._fds["records"], path, 0, self._n, self._record):
                first = int(chunk["offset"][0])
                data = _pread(self._fds["urls"], int(chunk["offset"][-1] + chunk["length"][-1]) - first, first)
                keep = live[start : start + len(chunk)]
                view = memoryview(data)
                offsets, lengths, crcs = (chunk[name].tolist() for name in ("offset", "length", "key_check"))
                for i in np.flatnonzero(keep).tolist():  # the kept keys are verified (never copied damaged)
                    o = offsets[i] - first
                    if key_check(view[o : o + lengths[i]]) != crcs[i]:
                        raise _damaged_key(old_urls, start + i, offsets[i], lengths[i])
                blob = np.frombuffer(data, dtype=np.uint8)
                kept = chunk[keep]
                _write_all(fds["urls"], blob[np.repeat(keep, chunk["length"].astype(np.intp))].tobytes())
                kept["offset"] = np.cumsum(kept["length"], dtype=np.uint64) - kept["length"] + np.uint64(url_end)
                url_end += int(kept["length"].sum())
                kept["check"] = record_checks(kept, salt)
                _write_all(fds["records"], kept.tobytes())
            for fd in fds.values():
                os.fsync(fd)
        finally:
            _close_all(fds)

    def _use_generation(self, new: int, *, remove_old: bool) -> None:
        """Go on with generation *new*, now current: close this one's files (removing them if *remove_old*),
        load the new one."""
        old = self._fds
        self._fds = {}
        _close_all(old)
        if remove_old:
            self._remove_stale(new)
        self._reset()
        self._load()

    def _reset(self) -> None:
        self._fps = np.empty(0, dtype=np.uint64)
        self._sketches = np.empty((0, self._sketch_bytes), dtype=np.uint8)
        self._times = np.empty(0, dtype=np.uint32)
        self._runs = []
        self._dead = set()
        self._n = self._sealed = 0

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
        )
        return info

    @property
    def nbytes(self) -> int:
        """Bytes held in numpy arrays (fingerprints, sketches, tables, added times); keys stay on disk."""
        return super().nbytes + self._times.nbytes

    # -- notes: ``notes.json`` in the index's directory, replaced atomically on each change ---------------

    NOTES_FILE = "notes.json"

    def notes(self) -> dict[str, int]:
        """The counters of ``notes.json`` (none when it is missing; a damaged file counts as none, with its
        name in the log of the caller's next write, which replaces it)."""
        try:
            data = json.loads((self.path / self.NOTES_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)}

    def add_notes(self, increments: Mapping[str, int]) -> dict[str, int]:
        """Add to the counters and write ``notes.json`` anew (a temporary file renamed over it: a crash leaves
        the old file or the new one)."""
        with self._lock:
            self._check_open()
            notes = self.notes()
            if not increments:
                return notes
            if self._readonly:
                raise ValueError("the index was opened read-only: its notes cannot change")
            for key, n in increments.items():
                notes[key] = notes.get(key, 0) + int(n)
            target = self.path / self.NOTES_FILE
            tmp = target.with_name(f".{self.NOTES_FILE}.{os.getpid()}.tmp")
            data = json.dumps(notes, sort_keys=True, separators=(",", ":")).encode("utf-8")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                _write_all(fd, data)
                if self._sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, target)
            if self._sync:
                _fsync_dir(self.path)
            return notes

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
