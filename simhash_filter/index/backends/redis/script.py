"""The server-side Lua scripts of the Redis index: the one that probes, verifies and adds (every call of
:class:`~simhash_filter.index.backends.redis.RedisBackend` but the first), and the one that creates the index."""

from __future__ import annotations

from simhash_filter.index.backends.redis.layout import CHUNK, ENTRY, ENTRY_LOW, MAX_SIZE, RECORD

__all__ = ["INIT_SCRIPT", "NOINDEX", "SCRIPT"]

#: The error the script answers when the index is gone (its meta hash deleted).
NOINDEX = "SIMHASH_NOINDEX"
# Popcount of every byte, as a Lua string literal of decimal escapes: byte(POP, x + 1) = popcount(x).
_POP = "".join(f"\\{bin(i).count('1')}" for i in range(256))
# Popcount of x XOR g for nibbles g and x, likewise: byte(NIB, 16 * g + x + 1) = popcount(x ^ g).
_NIB = "".join(f"\\{bin(x ^ g).count('1')}" for g in range(16) for x in range(16))
# The body of distances(g), a table d with d[x] = popcount(x ^ g) for every byte x: one constructor of 256
# sums of a high nibble's distance (h0 .. h15) and a low nibble's (l0 .. l15), about 4 us in Redis 7.
_DISTANCES = "return {[0] = " + ", ".join(f"h{x >> 4} + l{x & 15}" for x in range(256)) + "}"

#: Probe, verify and add in one atomic step (ARGV and ops: its header comment).
SCRIPT = (
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
    .replace("@NOINDEX@", NOINDEX)
    .replace("@MAX_SIZE@", str(MAX_SIZE))
)

#: Creates the meta hash unless it exists; returns what is stored.  KEYS[1] meta, ARGV field/value pairs.
INIT_SCRIPT = """
if redis.call("EXISTS", KEYS[1]) == 0 then
  if redis.call("EXISTS", ARGV[#ARGV]) == 1 then
    return redis.error_reply("SIMHASH_ORPHAN")
  end
  redis.call("HSET", KEYS[1], unpack(ARGV, 1, #ARGV - 1))
end
return redis.call("HGETALL", KEYS[1])
"""
