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
  bytes) and the fingerprint's 32-bit fold (its two halves XORed, 4 bytes), then, in an index that keeps
  sketches, the fingerprint's low half (4 bytes): 8 bytes an entry (:data:`ENTRY`), 12 with sketches.
* ``{prefix}:f<c>``: the records of ids ``c * 4095`` to ``c * 4095 + 4094``, ``16 + sketch_bytes``
  bytes each: the fingerprint (8, big-endian), where its key ends in ``{prefix}:u<c>`` (4), when it was
  added (Unix seconds, 4), then, in an index that keeps sketches (two-stage detection: ``sketch_bytes``
  in the metadata, 128 in practice), the page's sketch; a shard of a sharded index created since the sketch is
  kept once (``sketch_in_key`` in its meta) keeps 16-byte records, the sketch at the start of its home's key.
* ``{prefix}:u<c>``: the keys (URLs) of the same ids, back to back (UTF-8; on a sharded index's shards, the
  sketch and the URL, or a 17-byte hash of the URL: :mod:`.sharded`).

An index of an earlier layout is refused on open, with the line that deletes it (a crawl refills it).

A probe reads one bucket per table and passes over every entry whose fold is more than k from the query's
(the fold distance never exceeds the true distance): about one random entry in a million passes at k = 3,
2.5 % at k = 10.  The test is a table look-up per fold byte (four tables of the 256 distances to the
query's fold bytes, built once per probe), no bit operation per entry.  An entry that passes is verified
on the 64-bit distance: from the entry itself in an index that keeps sketches (the high half is the fold
XOR the low half), else from its record.  Bucket strings are rewritten whole on each add (exact size, no room
reserved for growth); a record chunk is trimmed when it is full.  With 4 tables of 2**14 buckets (the
default) a fingerprint takes 63 bytes of Redis memory at a million, plus the URL, and a check-and-add
71 us of server time at the median, 133 us at p99 (layout 2: 54 bytes, 95 and 167 us measured beside it).

Two-stage detection (:meth:`RedisBackend.add_and_candidates`, :meth:`RedisBackend.candidates`) is bounded
(:mod:`simhash_filter.index.bound`: per_table, duplicates and the most differing sketch bits are script
arguments).  For each table the script keeps the entries of the page's block (those that agree with it on the
table's whole lead: a bucket names only its top ``bucket_bits``) within the k it is given (10), verified on the
64-bit distance from the entries themselves, and takes the ``per_table`` nearest (ties: the oldest); the
candidates are those of every table, each once, nearest first, then oldest, with their sketches (the only records
read: the candidates').  A table with at least ``duplicates`` candidates counts those whose sketch differs from
the page's in at most ``bound.differing_bits`` bits (32-bit words XORed, their set bits cleared one by one); one
that counts ``duplicates`` of them, or whose block holds this very page (its key at distance 0), refuses the page.
The page gets an entry in the buckets of the tables that take it, and a record unless every table refuses it (then
nothing is written: no id is used).  The layout is layout 3's: a refused table simply lacks the entry, and an
index written before the bound reads the same (every page in every table).  So a flood of near-duplicates (a
crawler trap) stops growing its blocks after ``duplicates`` pages each, and a check reads at most ``per_table``
entries per table: 100,000 near-identical pages stored 2,511 of them, in buckets of at most 48 bytes, and an
add-and-candidates took 412 us of server time at the median, 2,191 us at p99 and 16,618 us at most (the median of
the first 1,000 calls 301 us, of the last 1,000 327 us; before the bound, ``--flood 2000`` stored every page and a
call took 53.8 ms on average at 2,000 with 986 candidates, growing with the pages stored).  On random pages (which
every table takes) the bound changes nothing: with the design 13+13+13+13+12/k4 (5 tables, default buckets: about
610 entries scanned per call at a million) and 64-byte sketches a page takes 155 bytes of Redis memory at a
million, plus the URL (68 in the buckets, 80 in the records), and an add-and-candidates at k = 10 took 458 to 508
us of server time at the median and 0.8 to 4.7 ms at p99 over five runs; the code before the bound, run
alternating with it, 342 and 376 us, 0.7 and 1.6 ms (and the two scripts alternating on one server and index,
2,000 calls each: medians of 334 to 535 us against 355 to 442 us: no difference beyond the machine's noise).
Layout 2 took 123 bytes and 2.1 to 3.9 ms: nearly every entry passed its 16-bit fold at k = 10 and had its record
read.

Measured on a ``devsites/redis_server.py`` server (Redis 7.0.15; memory: ``used_memory`` after minus before, less
the URLs; server time: ``SLOWLOG`` with every command logged: Redis 7 logs the commands a script runs too, and
that logging is part of the times) on a 2-core machine shared with other jobs (load 6 to 9), which makes the
p99 and max figures noisy; the random pages with a million stored, URL-like keys::

    python -m benchmarks.scale.bench_redis --only classic --articles 0 --checks 5000 --repeat 3
    python -m benchmarks.scale.bench_redis --only two-stage --checks 3000 --repeat 1
    python -m benchmarks.scale.bench_redis --only flood --flood 100000

The package: :mod:`~simhash_filter.index.backends.redis.layout` (the format, the sizes, the key names, the
replies decoded), :mod:`~simhash_filter.index.backends.redis.script` (the Lua scripts),
:mod:`~simhash_filter.index.backends.redis.connection` (the client from a URI, the script sent, the tries
again) and :mod:`~simhash_filter.index.backends.redis.backend` (:class:`RedisBackend`).

Failures: each call has a socket timeout (``socket_timeout``, default 2 s) and is tried again
``retries`` times (default 2) on a connection error or a timeout, reconnecting when the server is
back; then the error (``redis.exceptions.ConnectionError`` or ``TimeoutError``) is raised.  A call
tried again after a timeout may have run already: the script is told, and a check-and-add that finds
its own (fingerprint, key) at distance 0 reports it as kept, an add does not add it twice, and an
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
