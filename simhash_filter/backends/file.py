"""On-disk backend: an append-only log on disk, the permuted tables in memory.

An index is a directory::

    CURRENT              the generation in use ("1"; a compaction writes the next one, then switches)
    LOCK                 held (flock) by the one process that writes; it holds that process's pid
    records.<gen>        a 4 KiB header (magic line + JSON: format, salt, record_bytes, metadata...),
                         then one record of ``record_bytes`` per stored page, in insertion order
    urls.<gen>           a 4 KiB header, then the keys (UTF-8), back to back, in the same order
    deleted.<gen>        16-byte tombstones (row, check) of deleted fingerprints

A record is ``fingerprint u64 | URL offset u64 | added (Unix seconds) u32 | URL length u32 |
flags u32 (0) | check u32`` (32 bytes), then, in an index that keeps sketches (metadata
``sketch_bytes`` > 0: two-stage detection), the page's sketch (``sketch_bytes`` bytes, 64 in
practice), little-endian: a page's fingerprint and sketch are one record, written by one ``write(2)``.
The check mixes the other fields and a hash of the sketch with the file's random salt, so a torn,
zeroed or foreign record, or a changed byte of its sketch, fails it; the URL offsets must also follow
each other.

This is index format 2 (the ``format`` of every header).  Format 1, written before two-stage
detection (the same files, records without sketches), is not read: such an index is refused
(:class:`~simhash_filter.backends.base.MetadataMismatchError`) with the way out - start a new index
(another location, or delete this one), or keep using the version that wrote it.

On open the records are read and verified with numpy and the fingerprints are sorted into
:class:`~simhash_filter.backends.memory.MemoryBackend`'s tables (about 2 s for 10 million); only
the fingerprints (8 bytes), the sketches (``sketch_bytes``), the tables (6 bytes per table) and the
added times (4 bytes) stay in memory.  A key is read back from disk (two ``pread``) only when a
query returns its row.

Durability: an add writes the key, then the record (with its sketch), with ``write(2)`` before it
returns, so whatever a call reported as stored survives the process being killed (``kill -9``);
with ``?sync=always`` the key is ``fdatasync``-ed before the record is written and the record after,
so each add survives a power loss or an OS crash, and a record never reaches the disk before its key
(without it those may lose the adds of the last seconds, which the OS had not yet written back).
Records cut short at the end of the log are dropped on open (a torn tail); a damaged record (or
sketch) followed by intact ones is an error (:class:`CorruptIndexError`), never skipped silently.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import logging
import os
import re
import secrets
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import numpy as np

from simhash_filter.backends import redact_uri
from simhash_filter.backends.base import Entry, MetadataMismatchError, check_metadata
from simhash_filter.backends.memory import MemoryBackend
from simhash_filter.index import TableDesign

__all__ = ["CorruptIndexError", "FileBackend", "IndexLockedError", "parse_age"]

logger = logging.getLogger(__name__)

#: The index format written and read (1: before two-stage detection, records without sketches).
FORMAT = 2
HEADER_SIZE = 4096
MAGIC = b"simhash-filter index\n"
URLS_MAGIC = b"simhash-filter urls\n"
DELETED_MAGIC = b"simhash-filter deleted\n"
RECORD = np.dtype(
    [("fp", "<u8"), ("offset", "<u8"), ("added", "<u4"), ("length", "<u4"), ("flags", "<u4"), ("check", "<u4")]
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


def record_check(fp: int, offset: int, added: int, length: int, salt: int, sketch: bytes | None = None) -> int:
    """The 32-bit check of one record (same as :func:`record_checks`), with its *sketch* if the index keeps
    sketches."""
    h = (fp * _P[0]) & _M64
    h ^= (offset * _P[1]) & _M64
    h ^= ((added | length << 32) * _P[2]) & _M64
    h ^= (salt * _P[3]) & _M64
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


def parse_age(value: str | float | int) -> float:
    """Seconds from ``3600``, ``"90s"``, ``"15m"``, ``"12h"``, ``"30d"`` or ``"2w"``; 0 means never."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        found = _AGE.fullmatch(str(value))
        if not found:
            raise ValueError(f"an age must be seconds or a number with s, m, h, d or w, got {value!r}")
        seconds = float(found[1]) * _AGE_UNITS[found[2].lower()]
    if seconds < 0:
        raise ValueError(f"an age must be >= 0, got {value!r}")
    return seconds


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _header(magic: bytes, fields: Mapping[str, Any]) -> bytes:
    body = magic + json.dumps(fields, sort_keys=True, ensure_ascii=True).encode("ascii") + b"\n"
    if len(body) > HEADER_SIZE:
        raise ValueError(f"index metadata too large for the {HEADER_SIZE}-byte header")
    return body.ljust(HEADER_SIZE, b" ")


def _read_header(path: Path, magic: bytes) -> dict[str, Any]:
    with open(path, "rb") as f:
        head = f.read(HEADER_SIZE)
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
            "only (format 2 keeps each page's sketch beside its fingerprint): "
            + (
                "upgrade simhash-filter, or use a new index location to start afresh"
                if newer
                else f"use a new index location (or delete {path.parent}) to start afresh, or keep using the "
                "version that wrote it (its 'simhash-filter index export' lists the stored URLs and fingerprints)"
            )
        )
    return fields


def _record_chunks(
    path: Path, start: int, end: int, record: np.dtype = RECORD, size: int = _CHUNK
) -> Iterator[tuple[int, np.ndarray]]:
    """``(first row, records)`` of rows ``start..end-1`` of a records file (records of dtype *record*), *size*
    records of 32 bytes' worth at a time (fewer of a longer record)."""
    size = max(1, size * RECORD.itemsize // record.itemsize)
    for first in range(start, end, size):
        count = min(size, end - first)
        yield first, np.fromfile(path, dtype=record, count=count, offset=HEADER_SIZE + first * record.itemsize)


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
            raise ValueError(f"a file backend needs a directory: {redact_uri(uri)!r} (e.g. 'file:///var/lib/crawl/simhash')")
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
            with open(self._file(kind, generation), "wb") as f:
                f.write(_header(magic, fields if kind == "records" else {"format": FORMAT, "salt": salt}))
                f.flush()
                os.fsync(f.fileno())

    def _switch(self, generation: int) -> None:
        """Make *generation* current (atomically) and remove the files of any other."""
        tmp = self.path / "CURRENT.tmp"
        with open(tmp, "w", encoding="ascii") as f:
            f.write(f"{generation}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path / "CURRENT")
        _fsync_dir(self.path)
        for stale in self.path.iterdir():
            kind, _, number = stale.name.partition(".")
            if kind in ("records", "urls", "deleted") and number.isdigit() and int(number) != generation:
                stale.unlink()

    def _load(self) -> None:
        """Open the current generation (creating the index if there is none), verify it, build the tables."""
        generation = self._generation()
        if generation is None:
            if self._readonly:
                if not self.path.exists():
                    raise FileNotFoundError(f"no index at {self.path}")
                raise CorruptIndexError(f"{self.path} is not a simhash-filter index (no CURRENT file)")
            generation = 1
            self._create(generation, secrets.randbits(63), self._clock(), self._requested or {})
            self._switch(generation)
        elif not self._readonly:
            self._switch(generation)  # removes what a compaction that died left behind
        self._generation_number = generation
        paths = {kind: self._file(kind, generation) for kind in ("records", "urls", "deleted")}
        for path in paths.values():
            if not path.exists():
                raise CorruptIndexError(f"{path} is missing: the index {self.path} is incomplete")
        fields = _read_header(paths["records"], MAGIC)
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
            if _read_header(paths[kind], magic).get("salt") != self._salt:
                raise CorruptIndexError(f"{paths[kind]} does not belong to {paths['records']} (another index's file)")
        flags = os.O_RDONLY if self._readonly else os.O_RDWR | os.O_APPEND
        for kind, path in paths.items():
            self._fds[kind] = os.open(path, flags)
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
        for start, chunk in _record_chunks(path, 0, total, record):
            ok = record_checks(chunk, self._salt) == chunk["check"]
            ok &= chunk["flags"] == 0
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
                self._check_rest_is_torn(path, chunk[intact:], start + intact, total)
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

    def _check_rest_is_torn(self, path: Path, rest: np.ndarray, first_bad: int, total: int) -> None:
        """Raise :class:`CorruptIndexError` if an intact record follows the damaged record *first_bad*."""
        intact = record_checks(rest, self._salt) == rest["check"]
        intact[0] = False
        later = iter(_record_chunks(path, first_bad + len(rest), total, self._record))
        while not intact.any():
            chunk = next(later, None)
            if chunk is None:
                return
            intact = record_checks(chunk[1], self._salt) == chunk[1]["check"]
        raise CorruptIndexError(
            f"{path}: record {first_bad} is damaged but later records are intact - the file was changed or "
            "damaged; it cannot be trusted (restore a copy, or start a new index)"
        )

    def _load_tombstones(self, path: Path, n: int) -> None:
        data = np.fromfile(path, dtype="<u8", offset=HEADER_SIZE)
        if len(data) % 2 and not self._readonly:
            os.ftruncate(self._fds["deleted"], HEADER_SIZE + (len(data) - 1) * 8)
        for row, check in zip(data[0::2].tolist(), data[1::2].tolist(), strict=False):
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
            check = record_check(fp, self._url_end, now, len(data), self._salt, sketch)
            records = _RECORD.pack(fp, self._url_end, now, len(data), 0, check) + (sketch or b"")
            urls = data
        else:
            records_array = np.zeros(len(encoded), dtype=self._record)
            lengths = np.fromiter(map(len, encoded), dtype=np.uint64, count=len(encoded))
            records_array["fp"] = fingerprints
            records_array["length"] = lengths
            records_array["offset"] = np.cumsum(lengths) - lengths + np.uint64(self._url_end)
            records_array["added"] = now
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
        record = os.pread(self._fds["records"], RECORD.itemsize, HEADER_SIZE + row * self._record.itemsize)
        _, offset, _, length, _, _ = _RECORD.unpack(record)
        return os.pread(self._fds["urls"], length, offset).decode("utf-8", "surrogatepass")

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
        wanted = {key.encode("utf-8", "surrogatepass") for key in keys}
        with self._lock:
            self._check_open()
            if self._readonly:
                raise PermissionError(f"the index {self.path} is open read-only")
            rows = [row for row, _, key, _, _ in self._scan() if key in wanted and row not in self._dead]
            if rows:
                stones = b"".join(_TOMBSTONE.pack(row, _tombstone_check(row, self._salt)) for row in rows)
                _write_all(self._fds["deleted"], stones)
                os.fdatasync(self._fds["deleted"])
                self._dead.update(rows)
            return len(rows)

    def _scan(self) -> Iterator[tuple[int, int, bytes, int, bytes | None]]:
        """(row, fingerprint, key bytes, added, sketch or None) of every stored row, from disk, in order."""
        n = self._n
        size = self._sketch_bytes
        path = self._file("records", self._generation_number)
        for start, chunk in _record_chunks(path, 0, n, self._record, _CHUNK // 16):
            first = int(chunk["offset"][0])
            blob = os.pread(self._fds["urls"], int(chunk["offset"][-1] + chunk["length"][-1]) - first, first)
            sketches = np.ascontiguousarray(chunk["sketch"]).tobytes() if size else b""
            for i, (fp, offset, length, added) in enumerate(
                zip(
                    chunk["fp"].tolist(),
                    chunk["offset"].tolist(),
                    chunk["length"].tolist(),
                    chunk["added"].tolist(),
                    strict=True,
                )
            ):
                sketch = sketches[i * size : (i + 1) * size] if size else None
                yield start + i, fp, blob[offset - first : offset - first + length], added, sketch

    def entries(self) -> Iterator[Entry]:
        """Every live fingerprint with its key, the time it was added (and its sketch, in an index that keeps
        sketches), oldest first, read from disk."""
        with self._lock:
            self._check_open()
            live = self._live_mask()
        for row, fp, key, added, sketch in self._scan():
            if row < len(live) and live[row]:
                yield Entry(fp, key.decode("utf-8", "surrogatepass"), float(added), sketch)

    def compact(self) -> None:
        """Rewrite the index without its deleted and expired fingerprints (a new generation, then a switch)."""
        with self._lock:
            self._check_open()
            if self._readonly:
                raise PermissionError(f"the index {self.path} is open read-only")
            old = self._generation_number
            new = old + 1
            salt = secrets.randbits(63)
            self._create(new, salt, self._created, self._metadata)
            live = self._live_mask()
            with open(self._file("records", new), "ab") as records, open(self._file("urls", new), "ab") as urls:
                url_end = HEADER_SIZE
                path = self._file("records", old)
                for start, chunk in _record_chunks(path, 0, self._n, self._record):  # sketches come along
                    first = int(chunk["offset"][0])
                    blob = np.frombuffer(
                        os.pread(self._fds["urls"], int(chunk["offset"][-1] + chunk["length"][-1]) - first, first),
                        dtype=np.uint8,
                    )
                    keep = live[start : start + len(chunk)]
                    kept = chunk[keep]
                    urls.write(blob[np.repeat(keep, chunk["length"].astype(np.intp))].tobytes())
                    kept["offset"] = np.cumsum(kept["length"], dtype=np.uint64) - kept["length"] + np.uint64(url_end)
                    url_end += int(kept["length"].sum())
                    kept["check"] = record_checks(kept, salt)
                    records.write(kept.tobytes())
                for f in (records, urls):
                    f.flush()
                    os.fsync(f.fileno())
            self._close_files()
            self._switch(new)
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
