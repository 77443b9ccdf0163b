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

import inspect
import json
import logging
import struct
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

try:
    import redis
except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
    raise ImportError(
        "the redis:// index backend needs the redis package: pip install 'simhash-filter[redis]'"
    ) from exc
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from simhash_filter.index.backends.base import Backend, Candidate, Entry, MetadataMismatchError, check_metadata
from simhash_filter.index.backends.uri import redact_uri
from simhash_filter.index.tables import Match, TableDesign

__all__ = ["RedisBackend", "bucket_keys"]

logger = logging.getLogger(__name__)

#: Format of the stored index (``format`` in the meta hash): its layout version.  Layout 3 keeps a 32-bit fold
#: of the fingerprint in each bucket entry (layout 2: 16 bits), and the page's sketch in its record (two-stage
#: detection; since layout 2).
FORMAT = "simhash-filter redis 3"
#: Earlier layouts, refused with the way out: what they were, and why this version cannot use them.
OLD_FORMATS = {
    "simhash-filter redis 1": (
        "records without sketches, written by simhash-filter before two-stage detection",
        "the old index cannot be converted (it has no sketches)",
    ),
    "simhash-filter redis 2": (
        "bucket entries with 16-bit folds, written by simhash-filter before the 32-bit bucket filter",
        "the old index is not converted",
    ),
}
#: Default number of leading bits of each table's lead value that name its bucket (at most the lead bits).
DEFAULT_BUCKET_BITS = 14
#: Fingerprints per record chunk (``{prefix}:f<c>`` and ``{prefix}:u<c>``): 4095 records of 16 bytes and
#: the string's header fit a 64 KiB allocation exactly (4096 would take the next size, 80 KiB); records of
#: 80 bytes (a 64-byte sketch) fit 320 KiB.
CHUNK = 4095
#: Bytes of a bucket entry: the id (4) and the fingerprint's 32-bit fold (4: its halves XORed).  An index that
#: keeps sketches adds the fingerprint's low half (:data:`ENTRY_LOW`) to every entry: its candidate search at
#: k = 10, where 2.5 % of random entries pass the fold, verifies them without reading their records.
ENTRY = 8
ENTRY_LOW = 4
#: Bytes of a record without its sketch: the fingerprint (8), the end of its key (4), when it was added (4).
#: An index that keeps sketches adds ``sketch_bytes`` (its metadata's) to every record.
RECORD = 16
#: Items per script call: a call blocks the server while it runs (about 60 µs per item at 1M).
BATCH = 64
#: Ids are 4 bytes.
MAX_SIZE = 2**32
_DEFAULTS = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0}
_OWN_OPTIONS = ("prefix", "bucket_bits", "cluster", "retries", "retry_backoff", "max_age")
_CONNECTION_ERRORS = (RedisConnectionError, RedisTimeoutError)
_NOINDEX = "SIMHASH_NOINDEX"
_FP = struct.Struct(">Q")

# Popcount of every byte, as a Lua string literal of decimal escapes: byte(POP, x + 1) = popcount(x).
_POP = "".join(f"\\{bin(i).count('1')}" for i in range(256))
# Popcount of x XOR g for nibbles g and x, likewise: byte(NIB, 16 * g + x + 1) = popcount(x ^ g).
_NIB = "".join(f"\\{bin(x ^ g).count('1')}" for g in range(16) for x in range(16))
# The body of distances(g), a table d with d[x] = popcount(x ^ g) for every byte x: one constructor of 256
# sums of a high nibble's distance (h0 .. h15) and a low nibble's (l0 .. l15), about 4 us in Redis 7.
_DISTANCES = "return {[0] = " + ", ".join(f"h{x >> 4} + l{x & 15}" for x in range(256)) + "}"

_SCRIPT = (
    r"""
-- simhash-filter: probe, verify and add in one atomic step (see simhash_filter/backends/redis.py).
-- KEYS[1]: the meta hash; KEYS[2..]: T bucket keys per item, item after item.
-- ARGV: op, k, key prefix ("{p}:"), T, retry ("1": an earlier attempt of this call may have run), max_age
-- (seconds, 0: none), R (bytes per record: @RECORD@ + the sketch's), the tables' lead masks (8 bytes each,
-- big-endian; "d" and "p" only, else empty), then per item the fingerprint (8 bytes, big-endian), for "c",
-- "a" and "d" its key, and for "d" (and "a" in an index that keeps sketches) its sketch.
-- Ops: "c" check-and-add, "a" add, "q" query, "d" add-and-candidates, "p" candidates, "n" count.
local op, k, P, T = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local retry, max_age = ARGV[5] == "1", tonumber(ARGV[6])
local R, MASKS = tonumber(ARGV[7]), ARGV[8]
local H = 8 -- header arguments: items start at ARGV[H + 1]
local S = R - @RECORD@ -- sketch bytes (0: the index keeps none)
-- Bytes of a bucket entry: the id (4) and the fingerprint's 32-bit fold (4), then, in an index that keeps
-- sketches, the fingerprint's low half (4).
local E = @ENTRY@
if S > 0 then E = @ENTRY@ + @ENTRY_LOW@ end
local meta = KEYS[1]
local call = redis.call
local byte, char, sub = string.byte, string.char, string.sub
local bxor, band = bit.bxor, bit.band
local floor = math.floor
local POP, NIB = "@POP@", "@NIB@"
local C = @CHUNK@

if call("EXISTS", meta) == 0 then
  return redis.error_reply("@NOINDEX@ the index is gone")
end
local now = tonumber(call("TIME")[1])
local oldest = 0
if max_age > 0 then oldest = now - max_age end

local function u32(s, i)
  local a, b, c, d = byte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

local function p32(x)
  return char(floor(x / 16777216) % 256, floor(x / 65536) % 256, floor(x / 256) % 256, x % 256)
end

-- The record of an id: fingerprint (8 bytes), end of its key (4), added (4), sketch (S).
local function record(id)
  local chunk = floor(id / C)
  local at = (id - chunk * C) * R
  return call("GETRANGE", P .. "f" .. chunk, at, at + R - 1)
end

local function key_of(id)
  local chunk = floor(id / C)
  local j = id - chunk * C
  local fkey = P .. "f" .. chunk
  local start = 0
  if j > 0 then start = u32(call("GETRANGE", fkey, (j - 1) * R + 8, (j - 1) * R + 11), 1) end
  local stop = u32(call("GETRANGE", fkey, j * R + 8, j * R + 11), 1)
  if stop <= start then return "" end
  return call("GETRANGE", P .. "u" .. chunk, start, stop - 1)
end

-- The tables' lead masks: leads[t][i] is byte i of table t's mask.
local leads = {}
for t = 1, #MASKS / 8 do
  leads[t] = {byte(MASKS, 8 * t - 7, 8 * t)}
end

-- Whether a fingerprint whose XOR with the query has the bytes x1 .. x8 agrees with it on the whole lead of
-- some table (a bucket names only the top bucket_bits of a lead).
local function agrees(x1, x2, x3, x4, x5, x6, x7, x8)
  for t = 1, #leads do
    local m = leads[t]
    if band(x1, m[1]) == 0 and band(x2, m[2]) == 0 and band(x3, m[3]) == 0 and band(x4, m[4]) == 0
      and band(x5, m[5]) == 0 and band(x6, m[6]) == 0 and band(x7, m[7]) == 0 and band(x8, m[8]) == 0 then
      return true
    end
  end
  return false
end

-- The fold of a fingerprint: its two 32-bit halves XORed, 4 bytes.  The fold distance of two fingerprints
-- never exceeds their distance (each bit of the fold is the XOR of two of theirs).
local function fold(q)
  local q1, q2, q3, q4, q5, q6, q7, q8 = byte(q, 1, 8)
  return char(bxor(q1, q5), bxor(q2, q6), bxor(q3, q7), bxor(q4, q8))
end

-- d[x] = popcount(x XOR g) for every byte x (0 .. 255): a fold byte's distance to g is one table lookup.
local function distances(g)
  local lo, hi = g % 16, floor(g / 16)
  local l0, l1, l2, l3, l4, l5, l6, l7, l8, l9, l10, l11, l12, l13, l14, l15 = byte(NIB, 16 * lo + 1, 16 * lo + 16)
  local h0, h1, h2, h3, h4, h5, h6, h7, h8, h9, h10, h11, h12, h13, h14, h15 = byte(NIB, 16 * hi + 1, 16 * hi + 16)
  @DISTANCES@
end

-- Every stored fingerprint within kq of q in the item's buckets KEYS[base + 1 .. base + T], once each, as
-- {distance, id, fingerprint}; with sketches (two-stage), only those agreeing with q on a table's lead, as
-- {distance, id, fingerprint, sketch}.  buckets[t] receives the content of bucket t (false: none).  An entry
-- whose fold is more than kq from q's is passed over (most: 2.5 % of random entries pass at kq = 10, 0.0001 %
-- at 3); the others are verified on the whole fingerprint: from the entry's low half in an index that keeps
-- sketches, else from the record.  A record is read only for a verified hit that needs it (its sketch, or
-- when it was added under max_age) or, without sketches, for an entry that passed.
local function probe(q, base, kq, buckets, with_sketches)
  local q1, q2, q3, q4, q5, q6, q7, q8 = byte(q, 1, 8)
  local d1, d2 = distances(bxor(q1, q5)), distances(bxor(q2, q6))
  local d3, d4 = distances(bxor(q3, q7)), distances(bxor(q4, q8))
  local hits, seen = {}, {}
  for t = 1, T do
    local s = call("GET", KEYS[base + t])
    buckets[t] = s
    if s then
      for i = 1, #s, E do
        local e1, e2, e3, e4 = byte(s, i + 4, i + 7)
        if d1[e1] + d2[e2] + d3[e3] + d4[e4] <= kq then
          local a, b, c, d = byte(s, i, i + 3)
          local id = ((a * 256 + b) * 256 + c) * 256 + d
          if not seen[id] then
            seen[id] = true
            local r, c1, c2, c3, c4, c5, c6, c7, c8
            if S > 0 then -- the entry holds the low half: the high half is the fold XOR the low half
              c5, c6, c7, c8 = byte(s, i + 8, i + 11)
              c1, c2, c3, c4 = bxor(e1, c5), bxor(e2, c6), bxor(e3, c7), bxor(e4, c8)
            else
              r = record(id)
              c1, c2, c3, c4, c5, c6, c7, c8 = byte(r, 1, 8)
            end
            local x1, x2, x3, x4 = bxor(c1, q1), bxor(c2, q2), bxor(c3, q3), bxor(c4, q4)
            local x5, x6, x7, x8 = bxor(c5, q5), bxor(c6, q6), bxor(c7, q7), bxor(c8, q8)
            local dist = byte(POP, x1 + 1) + byte(POP, x2 + 1) + byte(POP, x3 + 1) + byte(POP, x4 + 1)
              + byte(POP, x5 + 1) + byte(POP, x6 + 1) + byte(POP, x7 + 1) + byte(POP, x8 + 1)
            if dist <= kq and (not with_sketches or agrees(x1, x2, x3, x4, x5, x6, x7, x8)) then
              if r == nil and (with_sketches or oldest > 0) then r = record(id) end
              if oldest == 0 or u32(r, 13) >= oldest then
                local hit = {dist, id, char(c1, c2, c3, c4, c5, c6, c7, c8)}
                if with_sketches then hit[4] = sub(r, @RECORD@ + 1, R) end
                hits[#hits + 1] = hit
              end
            end
          end
        end
      end
    end
  end
  return hits
end

local function nearest_first(x, y)
  if x[1] ~= y[1] then return x[1] < y[1] end
  return x[2] < y[2]
end

local function nearest(hits)
  local best = nil
  for _, h in ipairs(hits) do
    if best == nil or nearest_first(h, best) then best = h end
  end
  return best
end

local function add(q, key, sketch, base, buckets, id)
  local chunk = floor(id / C)
  local j = id - chunk * C
  local fkey, ukey = P .. "f" .. chunk, P .. "u" .. chunk
  local stop = call("APPEND", ukey, key)
  call("SETRANGE", fkey, j * R, q .. p32(stop) .. p32(now) .. sketch)
  if j == C - 1 then -- a full chunk: give back the room APPEND and SETRANGE reserved for growth
    call("SET", fkey, call("GET", fkey))
    call("SET", ukey, call("GET", ukey))
  end
  local entry = p32(id) .. fold(q)
  if S > 0 then entry = entry .. sub(q, 5, 8) end
  for t = 1, T do
    local s = buckets[t]
    if s == nil then s = call("GET", KEYS[base + t]) end
    call("SET", KEYS[base + t], (s or "") .. entry)
  end
end

if op == "n" then -- stored fingerprints not older than max_age (ids are in order of time added)
  local n = tonumber(call("HGET", meta, "n") or "0")
  if oldest == 0 then return n end
  local lo, hi = 0, n
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if u32(record(mid), 13) >= oldest then hi = mid else lo = mid + 1 end
  end
  return n - lo
end

if (op == "d" or op == "p") and S <= 0 then
  return redis.error_reply("SIMHASH_SKETCH this index keeps no sketches")
end

local results = {}
if op == "q" or op == "p" then -- read only
  local with_sketches = op == "p"
  for i = H + 1, #ARGV do
    local hits = probe(ARGV[i], 1 + (i - H - 1) * T, k, {}, with_sketches)
    table.sort(hits, nearest_first)
    local out = {}
    for _, h in ipairs(hits) do
      out[#out + 1] = h[1]
      out[#out + 1] = h[3]
      out[#out + 1] = key_of(h[2])
      if with_sketches then out[#out + 1] = h[4] end
    end
    results[#results + 1] = out
  end
  return results
end

if op == "c" and S > 0 then
  return redis.error_reply("SIMHASH_SKETCH this index keeps a sketch beside each fingerprint: add with it")
end
local stride = 2
if op == "d" or S > 0 then stride = 3 end -- fingerprint, key, sketch
local m = (#ARGV - H) / stride
if stride == 3 then -- checked before anything is written
  for item = 0, m - 1 do
    if #ARGV[H + 3 + stride * item] ~= S then
      return redis.error_reply("SIMHASH_SKETCH a sketch must be " .. S .. " bytes")
    end
  end
end
local n0 = tonumber(call("HGET", meta, "n") or "0")
local n = n0
if n + m > @MAX_SIZE@ then
  return redis.error_reply("SIMHASH_FULL the index holds " .. n .. " fingerprints, the most it can hold")
end
for item = 0, m - 1 do
  local at = H + 1 + stride * item
  local q, key = ARGV[at], ARGV[at + 1]
  local sketch = ""
  if stride == 3 then sketch = ARGV[at + 2] end
  local base = 1 + item * T
  local buckets = {}
  if op == "d" then
    -- the candidates, nearest first, then oldest; then add unless (key, fingerprint) is stored already.  A
    -- retry that finds it (its earlier attempt ran) answers as that attempt did: the candidates older than it.
    local hits = probe(q, base, k, buckets, true)
    table.sort(hits, nearest_first)
    local own = nil
    for _, h in ipairs(hits) do
      if h[1] > 0 then break end
      h[5] = key_of(h[2])
      if h[5] == key then
        own = h[2]
        break
      end
    end
    if own == nil then
      add(q, key, sketch, base, buckets, n)
      n = n + 1
    end
    local out = {}
    for _, h in ipairs(hits) do
      if not retry or own == nil or h[2] < own then
        out[#out + 1] = h[1]
        out[#out + 1] = h[3]
        out[#out + 1] = h[5] or key_of(h[2])
        out[#out + 1] = h[4]
      end
    end
    results[#results + 1] = out
  else
    local found = nil
    local stored = false
    if op == "c" then
      found = nearest(probe(q, base, k, buckets))
      stored = retry and found ~= nil and found[1] == 0 and key_of(found[2]) == key
    elseif retry then
      for _, h in ipairs(probe(q, base, 0, buckets)) do
        if key_of(h[2]) == key then stored = true end
      end
    end
    if stored or found == nil then
      if not stored then
        add(q, key, sketch, base, buckets, n)
        n = n + 1
      end
      results[#results + 1] = {}
    else
      results[#results + 1] = {found[1], found[3], key_of(found[2])}
    end
  end
end
if n ~= n0 then call("HSET", meta, "n", n) end
if op == "a" then return n end
return results
""".replace("@POP@", _POP)
    .replace("@NIB@", _NIB)
    .replace("@DISTANCES@", _DISTANCES)
    .replace("@ENTRY@", str(ENTRY))
    .replace("@ENTRY_LOW@", str(ENTRY_LOW))
    .replace("@CHUNK@", str(CHUNK))
    .replace("@RECORD@", str(RECORD))
    .replace("@NOINDEX@", _NOINDEX)
    .replace("@MAX_SIZE@", str(MAX_SIZE))
)

#: Creates the meta hash unless it exists; returns what is stored.  KEYS[1] meta, ARGV field/value pairs.
_INIT_SCRIPT = """
if redis.call("EXISTS", KEYS[1]) == 0 then
  if redis.call("EXISTS", ARGV[#ARGV]) == 1 then
    return redis.error_reply("SIMHASH_ORPHAN")
  end
  redis.call("HSET", KEYS[1], unpack(ARGV, 1, #ARGV - 1))
end
return redis.call("HGETALL", KEYS[1])
"""


def _tag(prefix: str) -> str:
    return "{" + prefix + "}:"


def bucket_keys(design: TableDesign, prefix: str, bucket_bits: int, fingerprints: np.ndarray) -> list[list[str]]:
    """The Redis key of each fingerprint's bucket in every table: ``result[t][i]``."""
    tag = _tag(prefix)
    out = []
    for t, lead in enumerate(design.lead_bits):
        shift = lead - min(bucket_bits, lead)
        values = design.lead_array(fingerprints, t)
        if shift:
            values >>= np.uint64(shift)
        head = f"{tag}{t}:"
        out.append([head + format(v, "x") for v in values.tolist()])
    return out


def _bool_option(name: str, value: str, uri: str) -> bool:
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"option {name} must be true or false, got {value!r} in {redact_uri(uri)!r}")


def _redis_options() -> set[str]:
    """Keyword arguments of ``redis.Redis`` that a URI may carry (``socket_timeout``, ``ssl_ca_certs``...)."""
    names = set(inspect.signature(redis.Redis.__init__).parameters)
    return (names | {"timeout"}) - {
        "self",
        "connection_pool",
        "retry",
        "decode_responses",
        "encoding",
        "encoding_errors",
    }


class RedisBackend(Backend):
    """The index in Redis, shared by every process that opens the same server and prefix.

    *client* is a ``redis.Redis`` or ``redis.cluster.RedisCluster``; *prefix* names the index (keys
    ``{prefix}:...``); *bucket_bits* the width of the buckets' names (default: what the stored index
    uses, else 14: about 60 fingerprints per bucket at a million); *retries* and *retry_backoff*
    (seconds, doubled each time) how often and after how long a call that met a connection error or a
    timeout is tried again; *max_age* (seconds, 0: never) hides fingerprints stored longer ago (they
    stay in Redis).

    Opening stores the design, the bucket width and *metadata* on first use, and refuses with
    :class:`MetadataMismatchError` an index stored with others.
    """

    #: Calls go over the network and may block (up to the socket timeout, times the tries).
    remote: ClassVar[bool] = True

    def __init__(
        self,
        client: Any,
        *,
        k: int,
        design: TableDesign,
        metadata: Mapping[str, Any] | None = None,
        prefix: str = "simhash",
        bucket_bits: int | None = None,
        retries: int = 2,
        retry_backoff: float = 0.1,
        max_age: float = 0,
        owns_client: bool = False,
        location: str = "",
    ) -> None:
        super().__init__(k=k, design=design, metadata=metadata)
        if not isinstance(prefix, str) or not prefix or "{" in prefix or "}" in prefix:
            raise ValueError(f"prefix must be a non-empty string without braces, got {prefix!r}")
        if bucket_bits is not None and (
            isinstance(bucket_bits, bool) or not isinstance(bucket_bits, int) or not 1 <= bucket_bits <= 32
        ):
            raise ValueError(f"bucket_bits must be an int in [1, 32], got {bucket_bits!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an int >= 0, got {retries!r}")
        if not retry_backoff >= 0:
            raise ValueError(f"retry_backoff must be >= 0, got {retry_backoff!r}")
        if not max_age >= 0:
            raise ValueError(f"max_age must be >= 0 seconds, got {max_age!r}")
        self._client = client
        self._owns_client = owns_client
        self._prefix = prefix
        self._tag = _tag(prefix)
        self._meta_key = self._tag + "meta"
        self._retries = retries
        self._retry_backoff = float(retry_backoff)
        self._max_age = int(max_age)
        self._location = location or repr(client)
        self._cluster = not isinstance(client, redis.Redis)
        self._closed = False
        self._heads = [f"{self._tag}{t}:" for t in range(design.n_tables)]
        self._lock = threading.Lock()  # guards re-creating a lost index
        self._script = _SCRIPT.encode("utf-8")
        self._sha = client.script_load(self._script)
        requested_bits = bucket_bits
        self._requested_metadata = None if metadata is None else dict(metadata)
        stored = self._open(DEFAULT_BUCKET_BITS if bucket_bits is None else bucket_bits)
        self._bucket_bits = int(stored["bucket_bits"])
        self._shifts = [lead - min(self._bucket_bits, lead) for lead in design.lead_bits]
        if requested_bits is not None and requested_bits != self._bucket_bits:
            raise MetadataMismatchError(
                f"the Redis index {prefix!r} ({self._location}) uses bucket_bits={self._bucket_bits}, "
                f"not {requested_bits}: {self._way_out()}"
            )
        self._metadata = json.loads(stored["metadata"])
        self._sketch_bytes = self._stored_sketch_bytes()
        self._record = RECORD + self._sketch_bytes
        self._masks = b"".join(_FP.pack(mask) for mask in design.lead_masks)
        self._created = float(stored.get("created", 0))

    # -- construction ----------------------------------------------------------------------------

    @classmethod
    def from_uri(
        cls, uri: str, *, k: int, design: TableDesign, metadata: Mapping[str, Any] | None = None
    ) -> RedisBackend:
        """``redis://[[user]:password@]host:port/db?prefix=NAME&...`` or ``rediss://...`` (TLS).

        Options: ``prefix`` (default ``simhash``), ``bucket_bits``, ``cluster`` (``1``: Redis Cluster),
        ``retries`` (default 2), ``retry_backoff`` (seconds, default 0.1), ``max_age`` (seconds), and
        redis-py's connection options, among them ``socket_timeout`` and ``socket_connect_timeout``
        (seconds, default 2 here), ``health_check_interval``, ``client_name`` and the ``ssl_*`` ones.
        """
        parts = urlsplit(uri)
        if not parts.hostname:
            raise ValueError(f"a Redis backend needs a host: {redact_uri(uri)!r} (e.g. 'redis://127.0.0.1:6379/0')")
        own: dict[str, Any] = {}
        passed: list[tuple[str, str]] = []
        allowed = _redis_options()
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            if name in ("prefix",):
                own[name] = value
            elif name in ("bucket_bits", "retries"):
                try:
                    own[name] = int(value)
                except ValueError:
                    raise ValueError(
                        f"option {name} must be an integer, got {value!r} in {redact_uri(uri)!r}"
                    ) from None
            elif name in ("retry_backoff", "max_age"):
                try:
                    own[name] = float(value)
                except ValueError:
                    raise ValueError(f"option {name} must be a number, got {value!r} in {redact_uri(uri)!r}") from None
            elif name == "cluster":
                own[name] = _bool_option(name, value, uri)
            elif name in allowed:
                passed.append((name, value))
            else:
                known = ", ".join(_OWN_OPTIONS) + ", and redis-py's (socket_timeout, ...)"
                raise ValueError(f"unknown Redis backend option {name!r} in {redact_uri(uri)!r}; known: {known}")
        scheme = parts.scheme.lower()
        names = {name for name, _ in passed}
        query = urlencode(passed)
        url = urlunsplit((scheme, parts.netloc, parts.path, query, ""))
        kwargs: dict[str, Any] = {name: value for name, value in _DEFAULTS.items() if name not in names}
        kwargs["retry"] = Retry(NoBackoff(), 0)  # this backend tries again itself (see _call)
        cluster = own.pop("cluster", False)
        if cluster:
            from redis.cluster import RedisCluster

            client: Any = RedisCluster.from_url(url, **kwargs)
        else:
            client = redis.Redis.from_url(url, **kwargs)
        location = urlunsplit((scheme, parts.hostname or "", parts.path, "", ""))
        if parts.port:
            location = urlunsplit((scheme, f"{parts.hostname}:{parts.port}", parts.path, "", ""))
        try:
            return cls(client, k=k, design=design, metadata=metadata, owns_client=True, location=location, **own)
        except BaseException:
            client.close()
            raise

    def _way_out(self) -> str:
        return (
            f"open it with the same settings, use another prefix (?prefix=...), or delete it "
            f"(RedisBackend.drop(), or redis-cli --scan --pattern '{{{self._prefix}}}:*' | xargs redis-cli unlink)"
        )

    def _meta_fields(self, bucket_bits: int) -> dict[str, str]:
        return {
            "format": FORMAT,
            "design": self._design.name,
            "bucket_bits": str(bucket_bits),
            "metadata": json.dumps(
                self._metadata if self._requested_metadata is None else self._requested_metadata, sort_keys=True
            ),
            "created": str(int(time.time())),
            "n": "0",
        }

    def _open(self, bucket_bits: int) -> dict[str, str]:
        """Create the index's meta hash unless it exists; check and return what is stored."""
        fields = self._meta_fields(bucket_bits)
        args = [x for pair in fields.items() for x in pair] + [self._tag + "f0"]
        try:
            raw = self._client.eval(_INIT_SCRIPT, 1, self._meta_key, *args)
        except ResponseError as exc:
            if "SIMHASH_ORPHAN" in str(exc):
                raise MetadataMismatchError(
                    f"the Redis index {self._prefix!r} ({self._location}) has data but no metadata (keys "
                    f"evicted? set maxmemory-policy noeviction): {self._way_out()}"
                ) from None
            raise
        stored = {_text(raw[i]): _text(raw[i + 1]) for i in range(0, len(raw), 2)}
        where = f"the Redis index {self._prefix!r} ({self._location})"
        if stored.get("format") in OLD_FORMATS:
            what, why = OLD_FORMATS[stored["format"]]
            raise MetadataMismatchError(
                f"{where} has the old layout ({stored['format']!r}: {what}); this version reads only {FORMAT!r}, "
                f"and {why}: build a new one under another prefix (?prefix=...), or delete it (redis-cli --scan "
                f"--pattern '{{{self._prefix}}}:*' | xargs redis-cli unlink); its URLs can be listed first with "
                f"the earlier version (simhash-filter index export)"
            )
        if stored.get("format") != FORMAT:
            raise MetadataMismatchError(
                f"{where} is not a simhash-filter index of this version (format {stored.get('format')!r}): "
                f"{self._way_out()}"
            )
        if stored.get("design") != self._design.name:
            raise MetadataMismatchError(
                f"{where} was built with table design {stored.get('design')}, this index asks for "
                f"{self._design.name} (another k or design): {self._way_out()}"
            )
        try:
            check_metadata(json.loads(stored["metadata"]), self._requested_metadata)
        except MetadataMismatchError as exc:
            raise MetadataMismatchError(f"{where}: {exc}; {self._way_out()}") from None
        return stored

    def _stored_sketch_bytes(self) -> int:
        """The sketch size of the stored metadata (0: none), which sets the record size."""
        size = self._metadata.get("sketch_bytes", 0) if isinstance(self._metadata, dict) else 0
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise MetadataMismatchError(
                f"the Redis index {self._prefix!r} ({self._location}) stores sketch_bytes {size!r} in its "
                f"metadata, not an int >= 0: {self._way_out()}"
            )
        return size

    def _checked_sketches(self, sketches: Sequence[bytes] | None, m: int) -> list[bytes] | None:
        """*sketches* checked: one of :attr:`sketch_bytes` per key exactly when the index keeps them."""
        size = self._sketch_bytes
        if not size:
            if sketches is not None:
                raise ValueError("this index keeps no sketches: store fingerprints and keys only")
            return None
        if sketches is None and not m:
            return None
        if sketches is None or len(sketches) != m:
            raise ValueError(f"this index keeps a {size}-byte sketch beside each fingerprint: give one per key")
        out = list(sketches)
        for sketch in out:
            if not isinstance(sketch, bytes) or len(sketch) != size:
                got = f"{len(sketch)} bytes" if isinstance(sketch, bytes) else type(sketch).__name__
                raise ValueError(f"a sketch must be {size} bytes, got {got}")
        return out

    def _require_sketches(self) -> None:
        if not self._sketch_bytes:
            raise NotImplementedError("this index keeps no sketches (its metadata has no sketch_bytes)")

    def _refuse_sketches(self) -> None:
        if self._sketch_bytes:
            raise ValueError("this index keeps a sketch beside each fingerprint: use add_and_candidates")

    # -- introspection ---------------------------------------------------------------------------

    @property
    def prefix(self) -> str:
        """The index's name: its keys are ``{prefix}:...``."""
        return self._prefix

    @property
    def bucket_bits(self) -> int:
        """Leading bits of each table's lead value that name a bucket (fewer when a table has fewer)."""
        return self._bucket_bits

    @property
    def client(self) -> Any:
        """The redis-py client."""
        return self._client

    def __len__(self) -> int:
        (n,) = self._call("n", 0, [], None)
        return int(n)

    def info(self) -> dict[str, Any]:
        """Facts about the stored index: the base ones, and where it is."""
        out = super().info()
        out.update(
            location=self._location,
            prefix=self._prefix,
            bucket_bits=self._bucket_bits,
            created=self._created,
            max_age_seconds=self._max_age,
        )
        return out

    def notes(self) -> dict[str, int]:
        """The counters of the hash ``{prefix}:notes``."""
        self._check_open()
        return {_text(k): int(v) for k, v in self._client.hgetall(self._tag + "notes").items()}

    def add_notes(self, increments: Mapping[str, int]) -> dict[str, int]:
        """``HINCRBY`` of each counter and ``HGETALL`` in one transaction: atomic for every process."""
        self._check_open()
        key = self._tag + "notes"
        pipe = self._client.pipeline(transaction=True)
        for name, n in increments.items():
            pipe.hincrby(key, name, int(n))
        pipe.hgetall(key)
        return {_text(k): int(v) for k, v in pipe.execute()[-1].items()}

    def close(self) -> None:
        """Close the connections (when this backend opened them); later calls raise ``ValueError``."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            self._client.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("operation on a closed index backend")

    def drop(self) -> int:
        """Delete the whole index from Redis (every key ``{prefix}:*``) and close; return the keys deleted."""
        self._check_open()
        pattern = "".join("\\" + ch if ch in "\\*?[]{}" else ch for ch in self._tag) + "*"  # a glob: escaped
        deleted = 0
        batch: list[Any] = []
        for key in self._client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                deleted += self._client.unlink(*batch)
                batch = []
        if batch:
            deleted += self._client.unlink(*batch)
        self.close()
        return deleted

    # -- the script ------------------------------------------------------------------------------

    def _item_keys(self, fingerprint: int) -> list[str]:
        """The bucket keys of one fingerprint (the fast path of :func:`bucket_keys`)."""
        return [
            head + format(lead >> shift, "x")
            for head, lead, shift in zip(self._heads, self._design.lead_values(fingerprint), self._shifts, strict=True)
        ]

    def _calls(
        self, fingerprints: np.ndarray | list[int], keys: Sequence[str] | None, sketches: Sequence[bytes] | None = None
    ) -> list[tuple[list, list]]:
        """Split a batch into script calls of at most :data:`BATCH` items: ``(KEYS, ARGV after the header)``."""
        if isinstance(fingerprints, list):  # one fingerprint
            ((fp,),) = (fingerprints,)
            args: list[Any] = [_FP.pack(fp)] if keys is None else [_FP.pack(fp), _encode(keys[0])]
            if sketches is not None:
                args.append(sketches[0])
            return [([self._meta_key, *self._item_keys(fp)], args)]
        buckets = bucket_keys(self._design, self._prefix, self._bucket_bits, fingerprints)
        packed = fingerprints.astype(">u8").tobytes()
        out = []
        for lo in range(0, len(fingerprints), BATCH):
            call_keys: list[Any] = [self._meta_key]
            args = []
            for i in range(lo, min(lo + BATCH, len(fingerprints))):
                call_keys.extend(table[i] for table in buckets)
                args.append(packed[8 * i : 8 * i + 8])
                if keys is not None:
                    args.append(_encode(keys[i]))
                if sketches is not None:
                    args.append(sketches[i])
            out.append((call_keys, args))
        return out

    def _call(
        self,
        op: str,
        k: int,
        fingerprints: np.ndarray | list[int],
        keys: Sequence[str] | None,
        sketches: Sequence[bytes] | None = None,
    ) -> list[Any]:
        """Run the script for *op* over a batch: one call per :data:`BATCH` items, pipelined; the replies.

        Tries again after a connection error or a timeout (telling the script, which then never adds
        twice), creates the index again if it is gone, loads the script again if the server lost it.
        """
        self._check_open()
        calls = self._calls(fingerprints, keys, sketches) if len(fingerprints) else [([self._meta_key], [])]
        masks = self._masks if op in ("d", "p") else b""
        header: list[Any] = [op, str(k), self._tag, str(self._design.n_tables), "0", str(self._max_age)]
        header += [str(self._record), masks]
        replies: list[Any] = []
        attempt = 0
        while len(replies) < len(calls):
            header[4] = "1" if attempt else "0"
            try:
                replies.extend(self._send(header, calls[len(replies) :]))
            except _CONNECTION_ERRORS as exc:
                self._check_open()
                attempt += 1
                if attempt > self._retries:
                    raise type(exc)(
                        f"Redis index {self._prefix!r} at {self._location}: {exc} (tried {attempt} times)"
                    ) from exc
                time.sleep(self._retry_backoff * 2 ** (attempt - 1))
            except _IndexGone as gone:
                replies.extend(gone.replies)
                self._recreate()
        return replies

    def _send(self, header: list[str], calls: list[tuple]) -> list[Any]:
        """Send the script calls; return their replies in order (fewer if the index is gone)."""
        if len(calls) == 1 or self._cluster:
            replies: list[Any] = []
            for call_keys, args in calls:
                try:
                    replies.append(self._evalsha(call_keys, header + args))
                except _IndexGone as gone:
                    gone.replies = replies
                    raise
            return replies
        pipe = self._client.pipeline(transaction=False)
        for call_keys, args in calls:
            pipe.evalsha(self._sha, len(call_keys), *call_keys, *header, *args)
        results = pipe.execute(raise_on_error=False)
        for i, result in enumerate(results):
            if isinstance(result, NoScriptError):
                self._sha = self._client.script_load(self._script)
                return results[:i] + self._send(header, calls[i:])
            if isinstance(result, BaseException):
                _raise_reply(result, results[:i])
        return results

    def _evalsha(self, call_keys: list[Any], args: list[Any]) -> Any:
        try:
            try:
                return self._client.evalsha(self._sha, len(call_keys), *call_keys, *args)
            except NoScriptError:
                self._sha = self._client.script_load(self._script)
                return self._client.evalsha(self._sha, len(call_keys), *call_keys, *args)
        except ResponseError as exc:
            _raise_reply(exc, [])
            raise  # pragma: no cover - _raise_reply always raises

    def _recreate(self) -> None:
        with self._lock:
            logger.warning(
                "simhash: the Redis index %r at %s is gone (a server restarted without persistence, or the keys "
                "were deleted); starting it again, empty",
                self._prefix,
                self._location,
            )
            self._open(self._bucket_bits)

    # -- writes ----------------------------------------------------------------------------------

    def add_many(self, fingerprints: np.ndarray, keys: Sequence[str], sketches: Sequence[bytes] | None = None) -> None:
        """Store many fingerprints (with their sketches, in an index that keeps them), in order, pipelined."""
        checked = self._checked_sketches(sketches, len(fingerprints))
        if len(fingerprints):
            self._call("a", 0, fingerprints, keys, checked)

    def check_and_add(self, fingerprint: int, key: str, k: int) -> Match | None:
        """Atomically, on the server: the nearest stored fingerprint within *k*, or add this one."""
        self._refuse_sketches()
        (reply,) = self._call("c", k, [fingerprint], [key])
        return _match(reply[0])

    def check_and_add_many(self, fingerprints: np.ndarray, keys: Sequence[str], k: int) -> list[Match | None]:
        """:meth:`check_and_add` for each pair in order, pipelined (each pair atomic on its own)."""
        self._refuse_sketches()
        if not len(fingerprints):
            return []
        return [_match(item) for reply in self._call("c", k, fingerprints, keys) for item in reply]

    def add_and_candidates(self, fingerprint: int, key: str, sketch: bytes, k: int) -> list[Candidate]:
        """Atomically, on the server: the candidates within *k* (stored fingerprints within *k* that agree with
        this one on some table's lead), nearest first, then oldest, with their sketches; then store this page
        unless *key* is stored with this fingerprint already.  A call tried again after a timeout that finds
        the page stored (its first attempt ran) answers as that attempt did: the candidates stored before it."""
        self._require_sketches()
        checked = self._checked_sketches([sketch], 1)
        (reply,) = self._call("d", k, [fingerprint], [key], checked)
        return _candidates(reply[0])

    def candidates(self, fingerprint: int, k: int) -> list[Candidate]:
        """The candidates within *k*, nearest first, then oldest, with their sketches; nothing stored."""
        self._require_sketches()
        (reply,) = self._call("p", k, [fingerprint], None)
        return _candidates(reply[0])

    # -- reads -----------------------------------------------------------------------------------

    def query(self, fingerprint: int, k: int) -> list[Match]:
        """Every stored fingerprint within *k*, nearest first, ties in insertion order."""
        (reply,) = self._call("q", k, [fingerprint], None)
        return _matches(reply[0])

    def query_many(self, fingerprints: np.ndarray, k: int) -> list[list[Match]]:
        """:meth:`query` for each of a ``uint64`` array, pipelined."""
        if not len(fingerprints):
            self._check_open()
            return []
        return [_matches(item) for reply in self._call("q", k, fingerprints, None) for item in reply]

    def entries(self) -> Iterator[Entry]:
        """Every stored fingerprint, oldest first (read chunk by chunk; not a snapshot)."""
        self._check_open()
        n = int(self._client.hget(self._meta_key, "n") or 0)
        oldest = time.time() - self._max_age if self._max_age else 0
        size, width = self._sketch_bytes, self._record
        layout = {"names": ["fp", "end", "added"], "formats": [">u8", ">u4", ">u4"], "offsets": [0, 8, 12]}
        record = np.dtype({**layout, "itemsize": width})
        for chunk in range((n + CHUNK - 1) // CHUNK):
            records, urls = self._client.get(f"{self._tag}f{chunk}"), self._client.get(f"{self._tag}u{chunk}")
            records, urls = records or b"", urls or b""
            count = min(CHUNK, n - chunk * CHUNK)
            table = np.frombuffer(records, dtype=record, count=min(count, len(records) // width))
            start = 0
            for i, (fp, end, added) in enumerate(table.tolist()):
                key = _key(urls[start:end])
                start = end
                if added >= oldest:
                    sketch = records[i * width + RECORD : (i + 1) * width] if size else None
                    yield Entry(fp, key, float(added), sketch)


class _IndexGone(Exception):
    """The script found no meta hash: the index is gone.  *replies*: those of the calls before."""

    def __init__(self, replies: list[Any]) -> None:
        super().__init__("the index is gone")
        self.replies = replies


def _raise_reply(error: BaseException, replies_before: list[Any]) -> None:
    if _NOINDEX in str(error):
        raise _IndexGone(replies_before)
    raise error


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _encode(key: str) -> bytes:
    return key.encode("utf-8", "surrogatepass")  # any str round-trips, lone surrogates too


def _key(value: bytes) -> str:
    return value.decode("utf-8", "surrogatepass")


def _match(item: list[Any]) -> Match | None:
    if not item:
        return None
    distance, fp, key = item
    return Match(_key(key), int(distance), _FP.unpack(fp)[0])


def _matches(item: list[Any]) -> list[Match]:
    return [Match(_key(item[i + 2]), int(item[i]), _FP.unpack(item[i + 1])[0]) for i in range(0, len(item), 3)]


def _candidates(item: list[Any]) -> list[Candidate]:
    return [
        Candidate(_key(item[i + 2]), int(item[i]), _FP.unpack(item[i + 1])[0], bytes(item[i + 3]))
        for i in range(0, len(item), 4)
    ]
