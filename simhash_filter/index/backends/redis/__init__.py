"""Redis backend: one index shared by many processes and machines, with an atomic check-and-add.

``redis://[[user]:password@]host:port/db?prefix=crawl1`` (``rediss://`` for TLS; ``?cluster=1`` for
Redis Cluster).  Every call is one server-side Lua script (probe, verify and add in one step, so two
crawlers that meet near-identical pages at the same moment never both keep them); batches are pipelined.

Layout of the index *prefix* (layout 3: :data:`FORMAT` in the meta; every key carries the hash tag
``{prefix}``, so one index lives in one cluster slot and its script is legal in a cluster):

* ``{prefix}:meta``: a small hash: the format, the table design, the bucket width, the metadata (JSON:
  the fingerprint model), and ``n``, the number of stored fingerprints.  Fingerprint number *i* (its
  *id*) is the *i*-th one stored.
* ``{prefix}:<t>:<hex>``: one string per table *t* and bucket (the top ``bucket_bits`` of the table's
  lead value, in hex), holding one entry per fingerprint in the bucket, in insertion order: the id (4
  bytes), the fingerprint's 32-bit fold (its two halves XORed, 4 bytes) and its low half (4 bytes): 12 bytes
  an entry (:data:`ENTRY` + :data:`ENTRY_LOW`).
* ``{prefix}:f<c>``: the records of ids ``c * 4095`` to ``c * 4095 + 4094``, ``16 + sketch_bytes``
  bytes each: the fingerprint (8, big-endian), where its key ends in ``{prefix}:u<c>`` (4), when it was
  added (Unix seconds, 4), then the page's sketch (``sketch_bytes`` in the metadata); a shard of a sharded index
  (``sketch_in_key`` in its meta) keeps 16-byte records, the sketch at the start of its home's key.
* ``{prefix}:u<c>``: the keys (URLs) of the same ids, back to back (UTF-8; on a sharded index's shards, the
  sketch and the URL, or a 17-byte hash of the URL: :mod:`.sharded`).

An index of an earlier layout is refused on open, with the line that deletes it (a crawl refills it).

A probe reads one bucket per table and passes over every entry whose fold is more than k from the query's
(the fold distance never exceeds the true distance), with a table look-up per fold byte (four tables of the 256
distances to the query's fold bytes, built once per probe), no bit operation per entry.  An entry that passes is
verified on the 64-bit distance from the entry itself (the high half is the fold XOR the low half).  Bucket
strings are rewritten whole on each add (exact size, no room reserved for growth); a record chunk is trimmed when
it is full.

A check (:meth:`RedisBackend.add_and_candidates`, :meth:`RedisBackend.candidates`) is bounded
(:mod:`simhash_filter.index.bound`: per_table, duplicates and the most differing sketch bits are script
arguments).  For each table the script keeps the entries of the page's block (those that agree with it on the
table's whole lead: a bucket names only its top ``bucket_bits``) within the k it is given (10), verified on the
64-bit distance from the entries themselves, and takes the ``per_table`` nearest (ties: the oldest); the
candidates are those of every table, each once, nearest first, then oldest, with their sketches (the only records
read: the candidates').  A table with at least ``duplicates`` candidates counts those whose sketch differs from
the page's in at most ``bound.differing_bits`` bits (32-bit words XORed, their set bits cleared one by one); one
that counts ``duplicates`` of them, or whose block holds this very page (its key at distance 0), refuses the page.
The page gets an entry in the buckets of the tables that take it, and a record unless every table refuses it (then
nothing is written: no id is used).  So a flood of near-duplicates (a crawler trap) stops growing its blocks after
``duplicates`` pages each, and a check reads at most ``per_table`` entries per table.  Memory and server time,
with the commands that measure them: docs/stores.md ("The Redis index") and docs/scaling.md.

The package: :mod:`~simhash_filter.index.backends.redis.layout` (the format, the sizes, the key names, the
replies decoded), :mod:`~simhash_filter.index.backends.redis.script` (the Lua scripts),
:mod:`~simhash_filter.index.backends.redis.connection` (the client from a URI, the script sent, the tries
again) and :mod:`~simhash_filter.index.backends.redis.backend` (:class:`RedisBackend`).

Failures: each call has a socket timeout (``socket_timeout``, default 2 s) and is tried again
``retries`` times (default 2) on a connection error or a timeout, reconnecting when the server is
back; then the error (``redis.exceptions.ConnectionError`` or ``TimeoutError``) is raised.  A call
tried again after a timeout may have run already: the script is told, and an add does not add it twice, and an
add-and-candidates that finds it answers as its first attempt did (the candidates stored before it) and stores
nothing.  If the index is gone (a server restarted without persistence), it is created again, empty, with a warning.
"""

from __future__ import annotations

try:
    import redis  # noqa: F401 - the extra's presence, checked once with the way to install it
except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
    raise ImportError(
        "the redis:// index backend needs the redis package: pip install 'simhash-filter[redis]'"
    ) from exc

from simhash_filter.index.backends.redis.backend import RedisBackend
from simhash_filter.index.backends.redis.layout import (
    BATCH,
    CHUNK,
    DEFAULT_BUCKET_BITS,
    ENTRY,
    ENTRY_LOW,
    FORMAT,
    MAX_SIZE,
    RECORD,
    bucket_keys,
)

__all__ = [
    "BATCH",
    "CHUNK",
    "DEFAULT_BUCKET_BITS",
    "ENTRY",
    "ENTRY_LOW",
    "FORMAT",
    "MAX_SIZE",
    "RECORD",
    "RedisBackend",
    "bucket_keys",
]
