--[[
  A silent federated key in one string (state layout 3; docs/architecture.md "A silent key is one string"). A silent
  key (federation.lua load_silent: z = 1) holds only this region's fields. While it stays silent they live in one
  string, in a fixed order, as the very texts its hash would hold, empty for an absent field:

    token bucket (silent_bucket.lua):
      S<r>|tokens|last_refill|sig|w0|w1|w2|c0.<r>|t0.<r>|c1.<r>|t1.<r>|c2.<r>|t2.<r>
    window, fixed or sliding (federation.lua load_silent, store_silent):
      W<r>|w0|w1|w2|c0.<r>|t0.<r>|a0.<r>.<r>|c1.<r>|t1.<r>|a1.<r>.<r>|c2.<r>|t2.<r>|a2.<r>.<r>

  r is the index of the region that wrote it. A decision reads it with one GET and writes it with one SET PX where
  the hash took HMGET, HSET and PEXPIRE. The string stands for exactly that hash: as soon as anything else must be
  written to the key (a version: mark_changed, the key turns loud; a peer's cells: apply_gossip; a sweep; a refund;
  a settlement; another region's index) it becomes that hash (silent_string_to_hash) and stays one. A single region
  reads a bucket's tokens (gcra.lua gcra_read) and a window's hash (gcra.lua window_fields).
  src/store/silent-string.ts reads both for the TS side.
]]
local SILENT_STRING = '^S(%d+)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$'
local WINDOW_STRING = '^W(%d+)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$'
-- The hash fields of values 2 to 7 (values 8 to 13 are this region's c and t of slots 0, 1 and 2).
local SILENT_STRING_FIELDS = { 'tokens', 'last_refill', 'sig', 'w0', 'w1', 'w2' }

--[[
  The values of a silent string (1 r, 2 tokens, 3 last_refill, 4 sig, 5 to 7 w0 to w2, 8 to 13 c0 t0 c1 t1 c2 t2;
  '' for an absent field), or nil when `text` is not one (a single region's number, gcra.lua).
]]
local function silent_string_values(text)
  local r, tokens, last, sig, w0, w1, w2, c0, t0, c1, t1, c2, t2 = string.match(text, SILENT_STRING)
  if r == nil then return nil end
  return { r, tokens, last, sig, w0, w1, w2, c0, t0, c1, t1, c2, t2 }
end

--[[
  The values of a window's silent string (1 r, 2 to 4 w0 to w2, then per slot k its c, t and a at 5 + 3k, 6 + 3k,
  7 + 3k; '' for an absent field), or nil when `text` is not one.
]]
local function window_string_values(text)
  local r, w0, w1, w2, c0, t0, a0, c1, t1, a1, c2, t2, a2 = string.match(text, WINDOW_STRING)
  if r == nil then return nil end
  return { r, w0, w1, w2, c0, t0, a0, c1, t1, a1, c2, t2, a2 }
end

--[[
  Keys whose silent test lately found a hash (a loud key, mostly): their next test reads the hash at once, where a
  GET would fail on it first (WRONGTYPE) and the hash be read after. A hint, never a fact: a hinted key that is a
  string again (it expired and came back silent, or was reset) is read as before and forgotten. A Functions library
  keeps it between calls, at most HASH_HINTS keys (then it starts over); an EVAL starts without hints.
]]
local HASH_HINTS = 10000
local hash_hints, hash_hint_count = {}, 0

local function hint_hash(key)
  if hash_hints[key] then return end
  if hash_hint_count >= HASH_HINTS then hash_hints, hash_hint_count = {}, 0 end
  hash_hints[key] = true
  hash_hint_count = hash_hint_count + 1
end

local function forget_hash(key)
  if not hash_hints[key] then return end
  hash_hints[key] = nil
  hash_hint_count = hash_hint_count - 1
end

-- The values of an absent key: region r's string with every field empty.
local function absent_values(r)
  return { r, '', '', '', '', '', '', '', '', '', '', '', '' }
end

--[[
  This region's silent string at `key`, parsed by `parse` (silent_string_values or window_string_values): new empty
  values when the key is absent, nil when it is a hash (and, when the hash was read here, its HGETALL reply as the
  third value). Any other string (the other algorithm's, another region index's, a single region's number) gives nil
  and true: the caller turns it into a hash or drops it, then reads the hash.
]]
local function own_silent_values(key, r, parse)
  if hash_hints[key] then
    local flat = redis.pcall('HGETALL', key)
    if flat.err == nil then
      if #flat > 0 then return nil, false, flat end
      -- Gone: absent, as GET would find it.
      forget_hash(key)
      return absent_values(r), false
    end
    forget_hash(key)
  end
  local text = redis.pcall('GET', key)
  if text == false then return absent_values(r), false end
  if type(text) ~= 'string' then
    hint_hash(key)
    return nil, false
  end
  local values = parse(text)
  if values ~= nil and values[1] == r then return values, false end
  return nil, true
end

-- Value i of a silent string as HMGET answers the field: false when absent ('').
local function silent_field(values, i)
  local value = values[i]
  if value == '' then return false end
  return value
end

-- The bucket's string of `values` (as silent_string_values returns them).
local function silent_string_text(values)
  return 'S' .. table.concat(values, '|')
end

-- The window's string of `values` (as window_string_values returns them).
local function window_string_text(values)
  return 'W' .. table.concat(values, '|')
end

-- Appends field, value to `sets` when the value is not ''.
local function add_field(sets, name, value)
  if value ~= '' then
    sets[#sets + 1] = name
    sets[#sets + 1] = value
  end
end

-- The hash a silent string stands for, as HSET's field, value list (z = 1 first); nil when `text` is not one.
local function silent_string_hash(text)
  local sets = { 'z', '1' }
  local values = silent_string_values(text)
  if values ~= nil then
    local own = '.' .. values[1]
    for i, name in ipairs(SILENT_STRING_FIELDS) do add_field(sets, name, values[i + 1]) end
    for k = 0, 2 do
      add_field(sets, 'c' .. k .. own, values[8 + 2 * k])
      add_field(sets, 't' .. k .. own, values[9 + 2 * k])
    end
    return sets
  end
  values = window_string_values(text)
  if values == nil then return nil end
  local own = '.' .. values[1]
  for k = 0, 2 do add_field(sets, 'w' .. k, values[2 + k]) end
  for k = 0, 2 do
    add_field(sets, 'c' .. k .. own, values[5 + 3 * k])
    add_field(sets, 't' .. k .. own, values[6 + 3 * k])
    add_field(sets, 'a' .. k .. own .. own, values[7 + 3 * k])
  end
  return sets
end

--[[
  Turns the silent string at `key` (a bucket's or a window's) into the hash it stands for (z = 1 and every non-empty
  field), keeping its TTL. Returns true when it converted; false when the key is a hash, absent, or a single
  region's number.
]]
local function silent_string_to_hash(key)
  local text = redis.pcall('GET', key)
  if type(text) ~= 'string' then return false end
  local sets = silent_string_hash(text)
  if sets == nil then return false end
  local ttl = redis.call('PTTL', key)
  redis.call('DEL', key)
  redis.call('HSET', key, unpack(sets))
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
  return true
end
