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
  in the metadata, 64 in practice), the page's sketch.
* ``{prefix}:u<c>``: the keys (URLs) of the same ids, back to back (UTF-8).

Layouts 1 (records without sketches, format ``simhash-filter redis 1``) and 2 (6-byte bucket entries with
a 16-bit fold, ``simhash-filter redis 2``) are refused on open, with the way out: a new index under
another prefix, or deleting the old one.

A probe reads one bucket per table and passes over every entry whose fold is more than k from the query's
(the fold distance never exceeds the true distance): about one random entry in a million passes at k = 3,
2.5 % at k = 10.  The test is a table look-up per fold byte (four tables of the 256 distances to the
query's fold bytes, built once per probe), no bit operation per entry.  An entry that passes is verified
on the 64-bit distance: from the entry itself in an index that keeps sketches (the high half is the fold
XOR the low half), else from its record.  Bucket strings are rewritten whole on each add (exact size, no room
reserved for growth); a record chunk is trimmed when it is full.  With 4 tables of 2**14 buckets (the
default) a fingerprint takes 63 bytes of Redis memory at a million, plus the URL, and a check-and-add
71 us of server time at the median, 133 us at p99 (layout 2: 54 bytes, 95 and 167 us measured beside it).

Two-stage detection (:meth:`RedisBackend.add_and_candidates`, :meth:`RedisBackend.candidates`): the
probe filters the folds with the k it is given (10), verifies the 64-bit distance from the entries, keeps
those that agree with the query on the whole lead of some table (a bucket names only the top
``bucket_bits`` of a lead) and returns each once, nearest first, then oldest, with the sketch from its
record (the only records read: the candidates'); then it adds the page unless its (key, fingerprint) is
stored already.  With the design 13+13+13+13+12/k4 (5 tables, default buckets: about 610 entries scanned
per call at a million) and 64-byte sketches a page takes 155 bytes of Redis memory at a million, plus the
URL (68 in the buckets, 80 in the records), and an add-and-candidates at k = 10 takes 176 us of server time
at the median, 231 us at p99 (candidates: 131 and 204 us).  Layout 2 took 123 bytes and 2.1 to 3.9 ms:
nearly every entry passed its 16-bit fold at k = 10 and had its record read; with a 32-bit fold alone
(8-byte entries, 134 bytes a page) 2.5 % of them still were, 220 us at the median and 310 to 350 at p99.

Measured with a million random pages and URL-like keys on a ``tests/redis_server.py`` server (memory:
``used_memory`` after minus before, less the URLs; server time: ``SLOWLOG`` with every call logged)::

    python benchmarks/bench_redis.py --only classic --articles 0 --checks 5000 --repeat 3
    python benchmarks/bench_redis.py --only two-stage --checks 3000 --repeat 3

Failures: each call has a socket timeout (``socket_timeout``, default 2 s) and is tried again
``retries`` times (default 2) on a connection error or a timeout, reconnecting when the server is
back; then the error (``redis.exceptions.ConnectionError`` or ``TimeoutError``) is raised.  A call
tried again after a timeout may have run already: the script is told, and a check-and-add that finds
its own (fingerprint, key) at distance 0 reports it as kept, an add does not add it twice, and an
add-and-candidates that finds it answers as its first attempt did (the candidates stored before it).  If the
index is gone (a server restarted without persistence), it is created again, empty, with a warning.
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
    OLD_FORMATS,
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
    "OLD_FORMATS",
    "RECORD",
    "RedisBackend",
    "bucket_keys",
]
