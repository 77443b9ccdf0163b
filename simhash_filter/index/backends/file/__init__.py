"""On-disk backend: an append-only log on disk, the permuted tables in memory.

An index is a directory::

    CURRENT              the generation in use ("1"; a compaction writes the next one, then switches)
    LOCK                 held (flock) by the one process that writes; it holds that process's pid
    records.<gen>        a 4 KiB header (magic line + JSON: format, salt, record_bytes, metadata...),
                         then one record of ``record_bytes`` per stored page, in insertion order
    urls.<gen>           a 4 KiB header, then the keys (UTF-8), back to back, in the same order
    deleted.<gen>        16-byte tombstones (row, check) of deleted fingerprints
    tables.<gen>.<a>-<b> with ``tables=disk``: the tables of rows a..b-1 (:mod:`.runfiles`, derived from the
                         records: rebuilt from them when missing or damaged)
    CURRENT.tmp          only while CURRENT is being replaced (a stale one is ignored, and removed by
                         the next writer)

A record is ``fingerprint u64 | URL offset u64 | added (Unix seconds) u32 | URL length and refusals u32 |
key check u32 | check u32`` (32 bytes), then, in an index that keeps sketches (metadata
``sketch_bytes`` > 0: two-stage detection), the page's sketch (``sketch_bytes`` bytes, 64 in
practice), little-endian: a page's fingerprint and sketch are one record, written by one ``write(2)``.
The URL length is the low 24 bits of its field (a key is at most 1 MiB); the top 8 bits are the tables
that refused the page (bit 24 + t: table t, :mod:`simhash_filter.index.bound`), so a reopened index holds
the same tables: a row stays out of the tables that refused it, after a reopen and after a compaction (a
page every table refused has no record at all).  The refusals are those of the tables of the design the
records header names; an index opened with another design is read with none (every table holding every
row), and is refused for writing if it has some.
The key check is the CRC-32 of the key's UTF-8 bytes.  The check mixes the other fields (the key
check and the refusals among them) and a hash of the sketch with the file's random salt, so a torn, zeroed
or foreign record, or a changed byte of its sketch or refusals, fails it; the URL offsets must also follow
each other.  A key is verified against its key check whenever it is read (a query's result, an export, a
delete, a compaction): a changed byte of ``urls.<gen>`` is a :class:`CorruptIndexError` naming the file
and the key's offset, never a wrong URL.

This is index format 4 (the ``format`` of every header; 5 for designs of 9 to 16 tables, whose records keep 16
tables' refusals), written by every new index.  An index of an earlier format is refused with one line that says
how to refill it; a newer one with the way out.

With ``tables=disk`` (:mod:`.disktables`) the older rows' tables are in run files, read a bucket at a time, and
their sketches are read from their records when a check needs them; opening reads the run files' columns and only
the records past them.  Otherwise, on open the records are read and verified with numpy and the fingerprints are
sorted into the tables of :class:`~simhash_filter.index.backends.memory.MemoryBackend` (docs/stores.md measures it);
only the fingerprints (8 bytes), the sketches (``sketch_bytes``), the tables (12 bytes a table) and the added times
(4 bytes) stay in memory.  A key is read back from disk (two ``pread``) only when a query returns its row.

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

The package: :mod:`.records` (the format: headers, records, tombstones and their checks), :mod:`.runfiles` and
:mod:`.disktables` (tables on disk), :mod:`.directory`
(the lock, ``CURRENT`` and the generations), :mod:`.load` (reading and verifying a generation into memory),
:mod:`.rows` (the rows in memory and the log their keys are written to and read from: what the memory store's
bounded tables read), :mod:`.notes` (``notes.json``), :mod:`.backend` (:class:`FileBackend`, which holds one of
each), :mod:`.errors`, :mod:`.age` (:func:`parse_age`) and :mod:`.osfiles` (whole reads and writes of file
descriptors).
"""

from simhash_filter.index.backends.file.age import parse_age
from simhash_filter.index.backends.file.backend import FileBackend
from simhash_filter.index.backends.file.errors import CorruptIndexError, IndexLockedError
from simhash_filter.index.backends.file.records import (
    FORMAT,
    HEADER_SIZE,
    LENGTH_BITS,
    MAX_KEY_BYTES,
    RECORD,
    key_check,
    record_check,
    record_checks,
    record_dtype,
    sketch_hash,
    sketch_hashes,
)

__all__ = [
    "FORMAT",
    "HEADER_SIZE",
    "LENGTH_BITS",
    "MAX_KEY_BYTES",
    "RECORD",
    "CorruptIndexError",
    "FileBackend",
    "IndexLockedError",
    "key_check",
    "parse_age",
    "record_check",
    "record_checks",
    "record_dtype",
    "sketch_hash",
    "sketch_hashes",
]
