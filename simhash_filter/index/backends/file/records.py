"""The files' format: headers, records and tombstones, their checks, and reading records back in chunks."""

from __future__ import annotations

import itertools
import json
import struct
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from simhash_filter.errors import CorruptIndexError
from simhash_filter.index.backends.base import MetadataMismatchError, earlier_version
from simhash_filter.index.backends.file.osfiles import pread

#: The index format written for designs of up to 8 tables (earlier formats are refused: :func:`read_header`).
FORMAT = 4
#: The format written for designs of 9 to 16 tables: format 4's records, with the key's length in the low 16 bits
#: of ``length_refused`` (keys of at most :data:`MAX_WIDE_KEY_BYTES`) and 16 tables' refusals above.
WIDE_FORMAT = 5
#: The formats read.
READ_FORMATS = (FORMAT, WIDE_FORMAT)
HEADER_SIZE = 4096
MAGIC = b"simhash-filter index\n"
URLS_MAGIC = b"simhash-filter urls\n"
DELETED_MAGIC = b"simhash-filter deleted\n"
RECORD = np.dtype(
    [
        ("fp", "<u8"),
        ("offset", "<u8"),
        ("added", "<u4"),
        ("length_refused", "<u4"),
        ("key_check", "<u4"),
        ("check", "<u4"),
    ]
)
RECORD_STRUCT = struct.Struct("<QQIIII")
TOMBSTONE = struct.Struct("<QQ")
assert RECORD.itemsize == RECORD_STRUCT.size == 32
#: Longest key (URL) in bytes, UTF-8.
MAX_KEY_BYTES = 1 << 20
#: The URL length is the low 24 bits of a record's ``length_refused``; the top 8 are the tables that refused the
#: row (bit 24 + t: table t).
LENGTH_BITS = 24
assert MAX_KEY_BYTES < 1 << LENGTH_BITS
#: Longest key in bytes in format 5 (16 bits of length; browsers and Scrapy stop at a few thousand).
MAX_WIDE_KEY_BYTES = (1 << 16) - 1


def format_for(n_tables: int) -> int:
    """The format a new index of *n_tables* tables is written in: :data:`FORMAT` up to 8, else :data:`WIDE_FORMAT`
    (a design of more than 16 tables has no on-disk format)."""
    return FORMAT if n_tables <= 32 - LENGTH_BITS else WIDE_FORMAT


def length_bits(fmt: int) -> int:
    """The bits of a record's ``length_refused`` that hold its key's length, in format *fmt*."""
    return 16 if fmt == WIDE_FORMAT else LENGTH_BITS


def max_key_bytes(fmt: int) -> int:
    """The longest key in bytes a record of format *fmt* holds."""
    return MAX_WIDE_KEY_BYTES if fmt == WIDE_FORMAT else MAX_KEY_BYTES
#: Records verified per step on open (bounds the temporary memory: 32 MiB).
CHUNK = 1 << 20
_M64 = (1 << 64) - 1
_P = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93, 0xFF51AFD7ED558CCD)
#: Multipliers of the sketch hash (a step per 8 bytes of sketch) and of its share of the check.
_PS = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
#: Multiplier of the key check's share of the check.
_PK = 0x2545F4914F6CDD1D
#: A write that never reached the disk leaves whole sectors of zeros (a record may straddle two).
SECTOR = 512


def record_dtype(sketch_bytes: int) -> np.dtype:
    """The record of an index keeping sketches of *sketch_bytes* (``RECORD`` when 0; else ``RECORD``'s fields
    and a ``sketch`` field of that many bytes)."""
    if not sketch_bytes:
        return RECORD
    fields: Mapping[str, Any] = RECORD.fields or {}
    return np.dtype([*((name, fields[name][0]) for name in fields), ("sketch", "u1", (sketch_bytes,))])


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


def key_check(key: bytes | memoryview) -> int:
    """The key check of a record: the CRC-32 of the key's UTF-8 bytes."""
    return zlib.crc32(key)


def record_check(
    fp: int,
    offset: int,
    added: int,
    length: int,
    salt: int,
    sketch: bytes | None = None,
    key_check: int = 0,
    refused: int = 0,
) -> int:
    """The 32-bit check of one record (same as :func:`record_checks`), with its *sketch* if the index keeps
    sketches, its *key_check* and the tables that *refused* it (the ``length_refused`` field as stored)."""
    h = (fp * _P[0]) & _M64
    h ^= (offset * _P[1]) & _M64
    h ^= ((added | length_refused(length, refused) << 32) * _P[2]) & _M64
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
    h ^= (records["added"].astype(u64) | records["length_refused"].astype(u64) << u64(32)) * u64(_P[2])
    h ^= u64((salt * _P[3]) & _M64)
    h ^= records["key_check"].astype(u64) * u64(_PK)
    if "sketch" in (records.dtype.names or ()):
        h ^= sketch_hashes(records["sketch"]) * u64(_PS[1])
    h ^= h >> u64(33)
    h *= u64(_P[4])
    h ^= h >> u64(29)
    checks: np.ndarray = (h & u64(0xFFFFFFFF)).astype(np.uint32)
    return checks


def length_refused(length: int, refused: int, bits: int = LENGTH_BITS) -> int:
    """The ``length_refused`` field of a record: the key's *length* (in its low *bits*) and the tables that
    *refused* the row."""
    return length | refused << bits


def key_lengths(records: np.ndarray, bits: int = LENGTH_BITS) -> np.ndarray:
    """The key length of each of *records* (``uint64``, to add to offsets); *bits*: :func:`length_bits`."""
    lengths: np.ndarray = (records["length_refused"] & np.uint32((1 << bits) - 1)).astype(np.uint64)
    return lengths


def refusals(records: np.ndarray, bits: int = LENGTH_BITS) -> np.ndarray:
    """The tables that refused each of *records* (bit t: table t); *bits*: :func:`length_bits`."""
    refused: np.ndarray = records["length_refused"] >> np.uint32(bits)
    return refused.astype(np.uint8 if bits == LENGTH_BITS else np.uint16)


def tombstone_check(row: int, salt: int) -> int:
    return record_check(row, 0, 0, 0, salt ^ 0x7F4A7C15)


def header(magic: bytes, fields: Mapping[str, Any]) -> bytes:
    body = magic + json.dumps(fields, sort_keys=True, ensure_ascii=True).encode("ascii") + b"\n"
    if len(body) > HEADER_SIZE:
        raise ValueError(f"index metadata too large for the {HEADER_SIZE}-byte header")
    return body.ljust(HEADER_SIZE, b" ")


def read_header(fd: int, path: Path, magic: bytes) -> dict[str, Any]:
    """The header fields of the open file *fd* (*path* names it in errors)."""
    head = pread(fd, HEADER_SIZE, 0)
    if not head.startswith(magic):
        raise CorruptIndexError(f"{path} is not a simhash-filter index file (no {magic.strip().decode()!r} header)")
    try:
        fields = json.loads(head[len(magic) :].decode("ascii"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CorruptIndexError(f"{path}: the header is damaged") from None
    if len(head) < HEADER_SIZE or not isinstance(fields, dict):
        raise CorruptIndexError(f"{path}: the header is damaged")
    stored = fields.get("format")
    if stored not in READ_FORMATS or isinstance(stored, bool):
        if isinstance(stored, int) and stored > WIDE_FORMAT:
            raise MetadataMismatchError(
                f"{path} is in index format {stored!r}, written by a newer version of simhash-filter (this one reads "
                f"formats {FORMAT} and {WIDE_FORMAT}): upgrade simhash-filter, or use a new index location"
            )
        raise MetadataMismatchError(earlier_version(f"the index {path.parent}", f"rm -r {path.parent}"))
    return fields


def record_chunks(
    fd: int, path: Path, start: int, end: int, record: np.dtype = RECORD, size: int = CHUNK
) -> Iterator[tuple[int, np.ndarray]]:
    """``(first row, records)`` (read-only arrays) of rows ``start..end-1`` of the open records file *fd*
    (records of dtype *record*; *path* names it in errors), *size* records of 32 bytes' worth at a time (fewer
    of a longer record)."""
    size = max(1, size * RECORD.itemsize // record.itemsize)
    for first in range(start, end, size):
        count = min(size, end - first)
        data = pread(fd, count * record.itemsize, HEADER_SIZE + first * record.itemsize)
        if len(data) != count * record.itemsize:
            raise CorruptIndexError(f"{path} ends before record {end - 1}: the file was cut while in use")
        yield first, np.frombuffer(data, dtype=record)


def unwritten(records: np.ndarray, first_row: int) -> np.ndarray:
    """Whether each of *records* (rows ``first_row...`` of a records file) has bytes that never reached the disk:
    all zeros from one 512-byte sector boundary of the file (or the record's start) to the next (or its end).
    Such a record is a torn write; a complete record whose check fails without that was changed afterwards."""
    m = len(records)
    itemsize = records.dtype.itemsize
    raw = records.view(np.uint8).reshape(m, itemsize)
    seen = np.zeros((m, itemsize + 1), dtype=np.int32)  # nonzero bytes before each position of the record
    np.cumsum(raw != 0, axis=1, out=seen[:, 1:])
    phase = -(HEADER_SIZE + (first_row + np.arange(m, dtype=np.int64)) * itemsize) % SECTOR
    out = np.zeros(m, dtype=bool)
    for p in np.unique(phase).tolist():  # the records whose sector boundaries fall at the same places
        which = phase == p
        cuts = sorted({0, itemsize, *range(p, itemsize, SECTOR)})
        part = seen[which]
        zeros = np.zeros(len(part), dtype=bool)
        for a, b in itertools.pairwise(cuts):
            zeros |= part[:, b] == part[:, a]
        out[which] = zeros
    return out


def damaged_key(path: Path, row: int, offset: int, length: int) -> CorruptIndexError:
    """The error for the key of record *row* (*length* bytes at *offset* of the keys file *path*) that does not
    match its key check."""
    return CorruptIndexError(
        f"{path}: the key of record {row} at offset {offset} ({length} bytes) is damaged (it does not match its "
        "check) - the file was changed or damaged; it cannot be trusted (restore a copy, or start a new index)"
    )
