"""The server-side Lua scripts of the Redis index: :data:`SCRIPT`, which probes, verifies and adds in one atomic step
(every call but the first), and the small ones that create the index, add notes and keep a home's key."""

from __future__ import annotations

from simhash_filter.index.backends.redis.layout import CHUNK, ENTRY, ENTRY_LOW, RECORD

#: The error the script answers when the index is gone (its meta hash deleted).
NOINDEX = "SIMHASH_NOINDEX"
#: The script's error when a page would take the index past its limit: this, a space, the pages it holds.
FULL = "SIMHASH_FULL"
#: Seconds a claim on a page's home is kept (op "r": far beyond the calls of the check that is storing the page).
CLAIM_SECONDS = 3600
# Popcount of every byte, as a Lua string literal of decimal escapes: byte(POP, x + 1) = popcount(x).
_POP = "".join(f"\\{bin(i).count('1')}" for i in range(256))
# Popcount of x XOR g for nibbles g and x, likewise: byte(NIB, 16 * g + x + 1) = popcount(x ^ g).
_NIB = "".join(f"\\{bin(x ^ g).count('1')}" for g in range(16) for x in range(16))
# The body of distances(g), a table d with d[x] = popcount(x ^ g) for every byte x: one constructor of 256
# sums of a high nibble's distance (h0 .. h15) and a low nibble's (l0 .. l15).
_DISTANCES = "return {[0] = " + ", ".join(f"h{x >> 4} + l{x & 15}" for x in range(256)) + "}"

# A two-stage check over at most this many bucket entries verifies each at once, without building the fold
# filter's four tables of distances (which cost more than a few entries' checks).
_FEW = 48

#: Probe, verify and add in one atomic step (ARGV and ops: its header comment).
SCRIPT = (
    r"""
-- simhash-filter: probe, verify and add in one atomic step (see simhash_filter/index/backends/redis/).
-- KEYS[1]: the meta hash; then T bucket keys per item (op "m": those of the tables its mask names).
-- ARGV[1..18], the header: op; k; the key prefix "{p}:"; T; retry ("1": an earlier attempt may have run); max_age
-- (seconds, 0: none); R, bytes per record (@RECORD@ + the sketch's); the tables' lead masks (8 bytes each, "d" and
-- "p"); the bound ("d" and "p", else "0"): per_table, duplicates, the most differing sketch bits; the most pages
-- the index takes; a shard's "1" (a "d" reply ends with 1 if the page is stored here, else 0) or "2" (the same, and
-- the page counted in "pages" by the call that stores it), else "0"; the most entries a block takes ("d", else
-- "0"); per table "1" if its bucket holds several blocks, else "0"; V, the verified sketch bytes; SK, a shard's
-- sketch bytes at the start of a home's key (0: sketches in the records; a page stored for another home has a
-- hashed key, and an item's sketch is its V bytes); the sketches the client found on other homes (fingerprint,
-- hashed key, "1" and V bytes, or "0" and V bytes when its home has none).  Then per item: the fingerprint (8
-- bytes, big-endian), and for "a", "m" and "d" its key and sketch ("m": then its mask).
-- A "d" check that needs a sketch neither here nor given stores nothing and its reply ends with 2; a home's "d"
-- (SK, "2") answers, after its candidates, the pages that claimed it: fingerprint, their key on their home, "".
-- Ops: "a" add, "m" add to some tables, "d" add-and-candidates, "p" candidates, "n" count, "r" a page's record on
-- its home, else its claim kept there (simhash_filter/index/backends/redis/sharded.py).
local op, k, P, T = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local retry, max_age = ARGV[5] == "1", tonumber(ARGV[6])
local R, MASKS = tonumber(ARGV[7]), ARGV[8]
local PER_TABLE, DUPLICATES, DIFFER = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local LIMIT, TELL_STORED, COUNT = tonumber(ARGV[12]), ARGV[13] ~= "0", ARGV[13] == "2"
local BLOCK, WIDE = tonumber(ARGV[14]), ARGV[15]
local V = tonumber(ARGV[16]) -- verified sketch bytes
local SK = tonumber(ARGV[17]) -- sketch bytes at the start of a home's key (0: sketches in the records)
local H = 18 -- header arguments: items start at ARGV[H + 1]
local S = R - @RECORD@ -- sketch bytes in a record (0: a shard that keeps them in its keys: SK)
local SL = S -- bytes of an item's sketch
if SK > 0 then SL = V end
-- Bytes of a bucket entry: the id (4), the fingerprint's 32-bit fold (4) and its low half (4).
local E = @ENTRY@ + @ENTRY_LOW@
local meta = KEYS[1]
local call = redis.call
local byte, char, sub = string.byte, string.char, string.sub
local bxor, band = bit.bxor, bit.band
local sunpack = struct.unpack
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

-- The tables' lead masks: leads[t][i] is byte i of table t's mask.
local leads = {}
for t = 1, #MASKS / 8 do
  leads[t] = {byte(MASKS, 8 * t - 7, 8 * t)}
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

-- The name of the item's bucket of table t: KEYS[base + t], or (op "m") the one its mask gave (nil: none given).
local slots = nil
local function bucket(base, t)
  if slots then return slots[t] end
  return KEYS[base + t]
end

-- The bits in which two fingerprints (8 bytes each) differ.
local function hamming(a, b)
  local a1, a2, a3, a4, a5, a6, a7, a8 = byte(a, 1, 8)
  local b1, b2, b3, b4, b5, b6, b7, b8 = byte(b, 1, 8)
  return byte(POP, bxor(a1, b1) + 1) + byte(POP, bxor(a2, b2) + 1) + byte(POP, bxor(a3, b3) + 1)
    + byte(POP, bxor(a4, b4) + 1) + byte(POP, bxor(a5, b5) + 1) + byte(POP, bxor(a6, b6) + 1)
    + byte(POP, bxor(a7, b7) + 1) + byte(POP, bxor(a8, b8) + 1)
end

-- The key other shards keep for a page whose key on its home is `key` (SK: sketch, then URL): a mark and 16 hex
-- digits of the URL's SHA-1 (sharded.hashed_key).
local function hashed_of(key)
  return "\0" .. sub(redis.sha1hex(sub(key, SK + 1)), 1, 16)
end

local function nearest_first(x, y)
  if x[1] ~= y[1] then return x[1] < y[1] end
  return x[2] < y[2]
end

-- Per call: the records read (fingerprint, end of key, added, sketch), the start of their keys, their keys,
-- and whether their sketches verify against the page's.
local records, starts, keys, verdicts = {}, {}, {}, {}

-- The record of a stored id, and where its key starts (one read: the end of the previous key, then it).
local function fetch(id)
  local r = records[id]
  if r == nil then
    local chunk = floor(id / C)
    local j = id - chunk * C
    if j > 0 then
      local s = call("GETRANGE", P .. "f" .. chunk, j * R - R + 8, j * R + R - 1)
      starts[id] = u32(s, 1)
      r = sub(s, R - 7)
    else
      starts[id] = 0
      r = call("GETRANGE", P .. "f" .. chunk, 0, R - 1)
    end
    records[id] = r
  end
  return r
end

local function stored_key(id)
  local key = keys[id]
  if key == nil then
    local r = fetch(id)
    local start, stop = starts[id], u32(r, 9)
    key = ""
    if stop > start then key = call("GETRANGE", P .. "u" .. floor(id / C), start, stop - 1) end
    keys[id] = key
  end
  return key
end

-- The bounded two-stage check (simhash_filter/index/bound.py).  For each table t, the entries of the page's
-- block (its whole lead of table t: a bucket names only the top bucket_bits of it) within kq, hidden ones (max_age)
-- left out, as {distance, id, fingerprint}: with `all`, every one, in id order; else only the PER_TABLE nearest
-- (then earliest), nearest first, so that a block crowded with pages near the page costs a comparison per entry
-- and no table or string.  Also per table: its hits at distance 0 (every one), and whether its block holds BLOCK
-- entries (rule 3; a bucket that names the whole lead holds one block: its length says).  buckets[t] receives the
-- content of bucket t.  Few entries (a flood's blocks, which stop growing) are verified at once, without the fold
-- filter's tables.
local function blocks(q, base, kq, buckets, all)
  local q1, q2, q3, q4, q5, q6, q7, q8 = byte(q, 1, 8)
  local entries = 0
  for t = 1, T do
    local s = call("GET", KEYS[base + t])
    buckets[t] = s
    if s then entries = entries + #s / E end
  end
  local every, d1, d2, d3, d4 = entries <= @FEW@, nil, nil, nil, nil
  if not every then
    d1, d2 = distances(bxor(q1, q5)), distances(bxor(q2, q6))
    d3, d4 = distances(bxor(q3, q7)), distances(bxor(q4, q8))
  end
  local out, zeros, fulls = {}, {}, {}
  for t = 1, T do
    local s = buckets[t]
    local list, zero, n, size = {}, {}, 0, 0
    if s then
      local m1, m2, m3, m4, m5, m6, m7, m8 = unpack(leads[t])
      size = #s / E
      local count = BLOCK > 0 and size >= BLOCK and byte(WIDE, t) == 49 -- "1": the bucket holds several blocks
      if count then size = 0 end
      -- The most bits an entry's fold may differ in and the entry still be taken: kq, then, once PER_TABLE are
      -- taken, one less than the farthest of them (never below 0: hits at distance 0 are all kept).  A fold never
      -- differs in more bits than the fingerprint, so the entries passed over could not be taken: a crowd's full
      -- blocks cost one fold comparison per entry, not a distance.
      local cut = kq
      for i = 1, #s, E do
        local e1, e2, e3, e4 = byte(s, i + 4, i + 7)
        local pass = every or d1[e1] + d2[e2] + d3[e3] + d4[e4] <= cut
        if pass or count then
          local c5, c6, c7, c8 = byte(s, i + 8, i + 11) -- the low half; the high half is the fold XOR it
          local c1, c2, c3, c4 = bxor(e1, c5), bxor(e2, c6), bxor(e3, c7), bxor(e4, c8)
          local x1, x2, x3, x4 = bxor(c1, q1), bxor(c2, q2), bxor(c3, q3), bxor(c4, q4)
          local x5, x6, x7, x8 = bxor(c5, q5), bxor(c6, q6), bxor(c7, q7), bxor(c8, q8)
          if band(x1, m1) == 0 and band(x2, m2) == 0 and band(x3, m3) == 0 and band(x4, m4) == 0
            and band(x5, m5) == 0 and band(x6, m6) == 0 and band(x7, m7) == 0 and band(x8, m8) == 0 then
            if count then size = size + 1 end
            local dist = kq + 1
            if pass then
              dist = byte(POP, x1 + 1) + byte(POP, x2 + 1) + byte(POP, x3 + 1) + byte(POP, x4 + 1)
                + byte(POP, x5 + 1) + byte(POP, x6 + 1) + byte(POP, x7 + 1) + byte(POP, x8 + 1)
            end
            if dist <= kq and (all or dist == 0 or n < PER_TABLE or dist < list[n][1]) then
              local a, b, c, d = byte(s, i, i + 3)
              local id = ((a * 256 + b) * 256 + c) * 256 + d
              if oldest == 0 or u32(fetch(id), 13) >= oldest then
                local h = {dist, id, char(c1, c2, c3, c4, c5, c6, c7, c8)}
                if dist == 0 then zero[#zero + 1] = h end
                if all then
                  list[#list + 1] = h
                elseif n < PER_TABLE or dist < list[n][1] then -- ids come in order: a tie stays behind
                  local at = n + 1
                  if n == PER_TABLE then at = n end
                  while at > 1 and list[at - 1][1] > dist do
                    list[at] = list[at - 1]
                    at = at - 1
                  end
                  list[at] = h
                  if n < PER_TABLE then n = n + 1 end
                  if n == PER_TABLE then cut = list[n][1] > 0 and list[n][1] - 1 or 0 end
                end
              end
            end
          end
        end
      end
    end
    out[t], zeros[t], fulls[t] = list, zero, BLOCK > 0 and size >= BLOCK
  end
  return out, zeros, fulls
end

-- The PER_TABLE nearest of a block's hits (distance, then id) whose id is below `below`, nearest first.
local function nearest_of(list, below)
  local best, n = {}, 0
  for _, h in ipairs(list) do
    if h[2] < below and (n < PER_TABLE or nearest_first(h, best[n])) then
      local at = n + 1
      while at > 1 and nearest_first(h, best[at - 1]) do
        best[at] = best[at - 1]
        at = at - 1
      end
      best[at] = h
      if n < PER_TABLE then n = n + 1 else best[n + 1] = nil end
    end
  end
  return best
end

-- The sketches ARGV[18] brings (SK): the verified part by fingerprint and hashed key, false when its home has none.
local supplied = {}
if SK > 0 then
  local SUPPLIED = ARGV[18]
  for i = 1, #SUPPLIED, 26 + V do
    local known = sub(SUPPLIED, i + 25, i + 25) == "1"
    supplied[sub(SUPPLIED, i, i + 24)] = known and sub(SUPPLIED, i + 26, i + 25 + V)
  end
end

-- The verified part (V bytes) of the sketch of a stored id: from its record, or (SK) from its key on its home,
-- from ARGV[18] elsewhere; false when its home has none, nil when not given.
local function stored_sketch(id)
  if SK == 0 then return sub(fetch(id), @RECORD@ + 1, @RECORD@ + V) end
  local key = stored_key(id)
  if #key >= SK then return sub(key, 1, V) end
  return supplied[sub(fetch(id), 1, 8) .. key]
end

-- Whether the verified part (V bytes) of the sketch of a stored id differs from the page's (`sketch`, and `page`:
-- its 32-bit words) in at most DIFFER bits (nil: its sketch is not here).  The words XORed have their set bits
-- cleared one at a time (x AND x - 1): a near-identical sketch takes a few steps, another stops after DIFFER + 1.
local WORDS = floor(V / 4)
local WF = ">" .. string.rep("I4", WORDS)
local function verifies(id, sketch, page)
  local v = verdicts[id]
  if v == nil then
    local r = stored_sketch(id)
    if r == nil then return nil end
    local differ = 0
    if not r then
      differ = DIFFER + 1
    elseif r ~= sub(sketch, 1, V) then -- (a trap's pages: often the same sketch)
      local words = {sunpack(WF, r, 1)}
      local w = 1
      while w <= WORDS and differ <= DIFFER do
        local x = bxor(words[w], page[w])
        while x ~= 0 and differ <= DIFFER do
          x = band(x, x - 1)
          differ = differ + 1
        end
        w = w + 1
      end
      for i = 4 * WORDS + 1, V do
        differ = differ + byte(POP, bxor(byte(r, i), byte(sketch, i)) + 1)
      end
    end
    v = differ <= DIFFER
    verdicts[id] = v
  end
  return v
end

-- Whether a table's block hits at distance 0 hold this very page: `key` with the page's fingerprint.
local function holds(list, key)
  for _, h in ipairs(list) do
    if stored_key(h[2]) == key then return true end
  end
  return false
end

-- Whether `nearest` (a table's candidates) holds DUPLICATES whose sketches verify against the page's; nil when
-- that depends on sketches not here (SK).
local function full(nearest, sketch, page)
  local n = #nearest
  if n < DUPLICATES then return false end
  local found, unknown = 0, 0
  for i, h in ipairs(nearest) do
    local v = verifies(h[2], sketch, page)
    if v then
      found = found + 1
      if found >= DUPLICATES then return true end
    elseif v == nil then
      unknown = unknown + 1
    end
    if found + unknown + n - i < DUPLICATES then return false end
  end
  if unknown > 0 then return nil end
  return false
end

-- One bounded check of the page q (key nil: candidates only, nothing stored): its candidates, each once,
-- nearest first, then oldest, as {distance, id, fingerprint}, the tables that take it (takes[t] true), or
-- nil when none does, whether a retry found the page stored, and whether a table's verdict waits for sketches
-- not here (SK: then nothing is to be stored).  A retry that finds the page stored already
-- (its first attempt ran: distance 0, the same key) answers as that attempt did (the pages stored before it)
-- and stores nothing.
local function bounded(q, key, sketch, base, buckets)
  local all = retry and key ~= nil -- a retry takes the nearest of the pages stored before its first attempt
  local hits, zeros, fulls = blocks(q, base, k, buckets, all)
  local below = math.huge
  if all then
    for t = 1, T do
      for _, h in ipairs(zeros[t]) do
        if (below == math.huge or h[2] > below) and stored_key(h[2]) == key then below = h[2] end
      end
    end
  end
  local chosen, seen, takes, page, waits = {}, {}, nil, nil, false
  if key ~= nil then
    verdicts = {} -- verdicts are the page's
    page = {sunpack(WF, sketch)}
  end
  for t = 1, T do
    local nearest = nearest_of(hits[t], below)
    for _, h in ipairs(nearest) do
      if not seen[h[2]] then
        seen[h[2]] = true
        chosen[#chosen + 1] = h
      end
    end
    if key ~= nil and below == math.huge and not fulls[t] and not holds(zeros[t], key) then
      local refuses = full(nearest, sketch, page)
      if refuses == nil then
        waits = true
      elseif not refuses then
        takes = takes or {}
        takes[t] = true
      end
    end
  end
  table.sort(chosen, nearest_first)
  if waits then takes = nil end
  return chosen, takes, below ~= math.huge, waits
end

-- Store the page q as the id `id`: its record and key, and an entry in the buckets of the tables in `takes`
-- (nil: every table).
local function add(q, key, sketch, base, buckets, id, takes)
  local chunk = floor(id / C)
  local j = id - chunk * C
  local fkey, ukey = P .. "f" .. chunk, P .. "u" .. chunk
  local stop = call("APPEND", ukey, key)
  if SK > 0 then sketch = "" end -- kept at the start of its key on its home
  call("SETRANGE", fkey, j * R, q .. p32(stop) .. p32(now) .. sketch)
  if j == C - 1 then -- a full chunk: give back the room APPEND and SETRANGE reserved for growth
    call("SET", fkey, call("GET", fkey))
    call("SET", ukey, call("GET", ukey))
  end
  local entry = p32(id) .. fold(q) .. sub(q, 5, 8)
  for t = 1, T do
    if takes == nil or takes[t] then
      local s, name = buckets[t], bucket(base, t)
      if s == nil then s = call("GET", name) end
      call("SET", name, (s or "") .. entry)
    end
  end
end

-- Whether the page q is stored with `key` already (a retry whose first attempt ran): an entry of its fingerprint
-- in one of its buckets (their content kept in buckets[t]), not older than max_age, with that key.
local function stored_already(q, key, base, buckets)
  local tail = fold(q) .. sub(q, 5, 8)
  for t = 1, T do
    local name = bucket(base, t)
    local s = name and call("GET", name)
    buckets[t] = s
    if s then
      for i = 1, #s, E do
        if sub(s, i + 4, i + 11) == tail then
          local id = u32(s, i)
          if (oldest == 0 or u32(fetch(id), 13) >= oldest) and stored_key(id) == key then return true end
        end
      end
    end
  end
  return false
end

-- A reply of a two-stage check: distance, fingerprint, key and sketch of each candidate.
local function reply(chosen)
  local out = {}
  for _, h in ipairs(chosen) do
    out[#out + 1] = h[1]
    out[#out + 1] = h[3]
    out[#out + 1] = stored_key(h[2])
    out[#out + 1] = sub(fetch(h[2]), @RECORD@ + 1, R)
  end
  return out
end

if op == "n" then -- stored fingerprints not older than max_age (ids are in order of time added)
  local n = tonumber(call("HGET", meta, "n") or "0")
  if oldest == 0 then return n end
  local lo, hi = 0, n
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if u32(fetch(mid), 13) >= oldest then hi = mid else lo = mid + 1 end
  end
  return n - lo
end

local results = {}
if op == "p" then -- read only
  for i = H + 1, #ARGV do
    results[#results + 1] = reply((bounded(ARGV[i], nil, nil, 1 + (i - H - 1) * T, {})))
  end
  return results
end
if op == "r" then -- a page's record on its home, else a claim on it there (the page asking will not verify it)
  local q, hashed, claim = ARGV[H + 1], ARGV[H + 2], ARGV[H + 3] -- claim: fingerprint, 4-byte length, key; or ""
  local _, zeros = blocks(q, 1, 0, {}, true)
  for t = 1, T do
    for _, h in ipairs(zeros[t]) do
      local key = stored_key(h[2])
      if #key >= SK and hashed_of(key) == hashed then return key end
    end
  end
  local kept = call("HGET", P .. "x", q .. hashed)
  if kept then return kept end
  if claim ~= "" then
    call("APPEND", P .. "c:" .. q .. hashed, claim)
    call("EXPIRE", P .. "c:" .. q .. hashed, @CLAIM_SECONDS@)
  end
  return false
end
local stride = 3 -- fingerprint, key, sketch
if op == "m" then stride = 4 end -- and the tables to store it in ("1" or "0" each), then "1" to count it
local m = (#ARGV - H) / stride
for item = 0, m - 1 do -- checked before anything is written
  if #ARGV[H + 3 + stride * item] ~= SL then
    return redis.error_reply("SIMHASH_SKETCH a sketch must be " .. SL .. " bytes")
  end
end
local n0 = tonumber(call("HGET", meta, "n") or "0")
local n = n0
if n + m > LIMIT then
  return redis.error_reply("SIMHASH_FULL " .. n)
end
local given = 1 -- op "m": the bucket keys given so far
for item = 0, m - 1 do
  local at = H + 1 + stride * item
  local q, key = ARGV[at], ARGV[at + 1]
  local sketch = ARGV[at + 2]
  local base = 1 + item * T
  local buckets = {}
  if op == "m" then
    slots = {}
    for t = 1, T do
      if byte(ARGV[at + 3], t) == 49 then
        given = given + 1
        slots[t] = KEYS[given]
      end
    end
  end
  if op == "d" then -- the candidates, then the page stored in the tables that take it (none: not stored)
    local chosen, takes, found, waits = bounded(q, key, sketch, base, buckets)
    if takes ~= nil then
      add(q, key, sketch, base, buckets, n, takes)
      n = n + 1
      if COUNT then call("HINCRBY", meta, "pages", 1) end
    end
    local out = reply(chosen)
    if COUNT and SK > 0 then -- the pages that met this one before its home had it, and could not verify it
      local claims = call("GET", P .. "c:" .. q .. hashed_of(key)) or ""
      local i = 1
      while i < #claims do
        local fp, size = sub(claims, i, i + 7), u32(claims, i + 8)
        out[#out + 1] = hamming(q, fp)
        out[#out + 1] = fp
        out[#out + 1] = sub(claims, i + 12, i + 11 + size)
        out[#out + 1] = ""
        i = i + 12 + size
      end
    end
    -- stored: by this call, or by its first attempt (which counted it if it was to)
    if waits then
      out[#out + 1] = 2 -- (SK: asked only with TELL_STORED)
    elseif TELL_STORED then
      out[#out + 1] = (takes ~= nil or found) and 1 or 0
    end
    results[#results + 1] = out
  else -- "a", "m": stored unless a retry finds it stored
    local stored = false
    if retry then stored = stored_already(q, key, base, buckets) end
    if not stored then
      local takes, counts = nil, COUNT
      if op == "m" then
        local mask = ARGV[at + 3]
        takes, counts = {}, byte(mask, T + 1) == 49
        for t = 1, T do takes[t] = byte(mask, t) == 49 end
      end
      add(q, key, sketch, base, buckets, n, takes)
      n = n + 1
      if counts then call("HINCRBY", meta, "pages", 1) end
    end
    results[#results + 1] = {}
  end
end
if n ~= n0 then call("HSET", meta, "n", n) end
if op == "a" or op == "m" then return n end
return results
""".replace("@POP@", _POP)
    .replace("@NIB@", _NIB)
    .replace("@DISTANCES@", _DISTANCES)
    .replace("@ENTRY@", str(ENTRY))
    .replace("@ENTRY_LOW@", str(ENTRY_LOW))
    .replace("@CHUNK@", str(CHUNK))
    .replace("@RECORD@", str(RECORD))
    .replace("@NOINDEX@", NOINDEX)
    .replace("@FEW@", str(_FEW))
    .replace("@CLAIM_SECONDS@", str(CLAIM_SECONDS))
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

#: Adds to the counters of the notes hash and returns them all, once per token.  KEYS[1] the notes hash, KEYS[2] the
#: call's token (a retry of a call that ran finds it, and adds nothing again); ARGV[1] seconds the token is kept,
#: then counter/increment pairs.
NOTES_SCRIPT = """
if redis.call("SET", KEYS[2], "1", "NX", "EX", ARGV[1]) then
  for i = 2, #ARGV, 2 do
    redis.call("HINCRBY", KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
return redis.call("HGETALL", KEYS[1])
"""

#: Keeps a page's URL in a hash unless it is there, and counts the page in the meta hash then only; returns the
#: claims on the page (op "r" of :data:`SCRIPT`), or "".  KEYS[1] the hash, KEYS[2] the meta hash, KEYS[3] the
#: page's claims; ARGV[1] the field (fingerprint and hashed key), ARGV[2] the URL (after the sketch).
KEEP_KEY_SCRIPT = """
if redis.call("HSETNX", KEYS[1], ARGV[1], ARGV[2]) == 1 then
  redis.call("HINCRBY", KEYS[2], "pages", 1)
end
return redis.call("GET", KEYS[3]) or ""
"""
