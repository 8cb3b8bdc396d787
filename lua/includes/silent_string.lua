--[[
  A silent federated key in one string (state layouts 3 and 4; docs/architecture.md "A silent key is one string"). A
  silent key (federation.lua load_silent: z = 1) holds only this region's fields. While it stays silent they live in
  one string, in a fixed order:

    token bucket (silent_bucket.lua): a MessagePack array of 13 (cmsgpack; first byte 0x9d)
      [ "<r>", tokens, last_refill, sig, w0, w1, w2, c0.<r>, t0.<r>, c1.<r>, t1.<r>, c2.<r>, t2.<r> ]
    window, fixed or sliding (federation.lua load_silent, store_silent): an array of 14 (first byte 0x9e)
      [ "W", "<r>", w0, w1, w2, c0.<r>, t0.<r>, a0.<r>.<r>, c1.<r>, t1.<r>, a1.<r>.<r>, c2.<r>, t2.<r>, a2.<r>.<r> ]

  each field a number (MessagePack's integer, float or double: exact for every double; a -0 as the text '-0') or
  false when absent (state layout 4). Layout 3 wrote the same fields as the texts the hash holds, joined by '|' after
  S<r> or W<r>, '' for an absent one; it is still read, as the same numbers. The numbers go without a text between
  them and the arithmetic: no string.match, tonumber or %.17g on the silent path (docs/performance.md, thirty-third
  pass). r is the index of the region that wrote it. A decision reads it with one GET and writes it with one SET PX where
  the hash took HMGET, HSET and PEXPIRE. The string stands for exactly that hash: as soon as anything else must be
  written to the key (a version: mark_changed, the key turns loud; a peer's cells: apply_gossip; a sweep; a refund;
  a settlement; another region's index) it becomes that hash (silent_string_to_hash) and stays one. A single region
  reads a bucket's tokens (gcra.lua gcra_read) and a window's hash (gcra.lua window_fields).
  src/store/silent-string.ts reads both for the TS side.
]]
--- @include "includes/fmt"

local SILENT_STRING = '^S(%d+)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$'
local WINDOW_STRING = '^W(%d+)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$'
-- The hash fields of values 2 to 7 (values 8 to 13 are this region's c and t of slots 0, 1 and 2).
local SILENT_STRING_FIELDS = { 'tokens', 'last_refill', 'sig', 'w0', 'w1', 'w2' }

-- A layout-3 field's number, false for an absent one (''), and the text '-0' for a -0, as layout 4 holds it: a value
-- read from a string is never a -0 number (silent_string_packed checks only the values a decision writes).
local function text_number(text)
  if text == '' then return false end
  local number = tonumber(text)
  if number == 0 and 1 / number < 0 then return '-0' end
  return number
end

-- The first byte of a bucket's string in layout 4, a MessagePack array of 13 values (0x9d), and of a window's, 14.
local PACKED_BUCKET, PACKED_WINDOW = 157, 158

--[[
  The `count` values of the MessagePack array in `text` from byte `from` on, in a table; nil when it holds another
  number. A layout-4 string is an array's header (one byte), then its values one after the other: read from after the
  header as the sequence they are, cmsgpack.unpack answers each value and one constructor makes the table, where
  unpacking the array built its table in C value by value (9,400 instructions for a bucket's 13 against 4,800,
  docs/performance.md). A string cut short or not MessagePack raises cmsgpack's error: in a decide call, that call's
  error in its place (as the unreadable state it is already); silent_string_hash, which converts, answers nil for it.
]]
local function packed_values(text, from, count)
  local values = { cmsgpack.unpack(string.sub(text, from)) }
  if #values == count then return values end
  return nil
end

--[[
  The values of a bucket's silent string (1 r, 2 tokens, 3 last_refill, 4 sig, 5 to 7 w0 to w2, 8 to 13 c0 t0 c1 t1
  c2 t2): r as text, the others numbers or false for an absent field; nil when `text` is not one (a single region's
  number, gcra.lua; a window's string). Reads layout 4 and layout 3.
]]
local function silent_string_values(text)
  if string.byte(text, 1) == PACKED_BUCKET then
    local values = packed_values(text, 2, 13)
    if values ~= nil and type(values[1]) == 'string' then return values end
    return nil
  end
  local r, tokens, last, sig, w0, w1, w2, c0, t0, c1, t1, c2, t2 = string.match(text, SILENT_STRING)
  if r == nil then return nil end
  return { r, text_number(tokens), text_number(last), text_number(sig), text_number(w0), text_number(w1), text_number(w2),
    text_number(c0), text_number(t0), text_number(c1), text_number(t1), text_number(c2), text_number(t2) }
end

--[[
  The values of a window's silent string (1 r, 2 to 4 w0 to w2, then per slot k its c, t and a at 5 + 3k, 6 + 3k,
  7 + 3k): r as text, the others numbers or false for an absent field; nil when `text` is not one. Reads layout 4
  and layout 3.
]]
local function window_string_values(text)
  if string.byte(text, 1) == PACKED_WINDOW then
    -- Its values after its first, the text 'W' (MessagePack's one-byte text: 0xa1 'W'): the array of 14 less its tag.
    if string.sub(text, 2, 3) ~= '\161W' then return nil end
    local values = packed_values(text, 4, 13)
    if values == nil or type(values[1]) ~= 'string' then return nil end
    return values
  end
  local r, w0, w1, w2, c0, t0, a0, c1, t1, a1, c2, t2, a2 = string.match(text, WINDOW_STRING)
  if r == nil then return nil end
  return { r, text_number(w0), text_number(w1), text_number(w2), text_number(c0), text_number(t0), text_number(a0),
    text_number(c1), text_number(t1), text_number(a1), text_number(c2), text_number(t2), text_number(a2) }
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

-- The values of an absent key: region r's string with every field absent.
local function absent_values(r)
  return { r, false, false, false, false, false, false, false, false, false, false, false, false }
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

-- Values 2 to 13 as MessagePack keeps them: a -0 as its text '-0' (it would go as the integer 0; fmt writes '-0').
local function keep_negative_zeros(values)
  for i = 2, 13 do
    local value = values[i]
    if value == 0 and 1 / value < 0 then values[i] = '-0' end
  end
end

--[[
  The bucket's string of `values` (as silent_string_values returns them), layout 4, after a decision wrote values
  2 to 4 (tokens, last refill, σ) and 5 + k (slot k's epoch id). Its counts and times are written as false for 0
  (silent_bucket.lua silent_store), and a value read from a string is never a -0 number (text_number), so only these
  four can be a -0: keep_negative_zeros over all twelve cost a decision 2,700 instructions.
]]
local function silent_string_packed(values, k)
  for i = 2, 4 do
    local value = values[i]
    if value == 0 and 1 / value < 0 then values[i] = '-0' end
  end
  local id = values[5 + k]
  if id == 0 and 1 / id < 0 then values[5 + k] = '-0' end
  return cmsgpack.pack(values)
end

-- The window's string of `values` (as window_string_values returns them), layout 4.
local function window_string_packed(values)
  keep_negative_zeros(values)
  return cmsgpack.pack({ 'W', unpack(values, 1, 13) })
end

-- Appends field, value to `sets` when the value is there: a number as the hash's text of it (fmt, what layout 3
-- stored), a text as it is.
local function add_field(sets, name, value)
  if value ~= false then
    sets[#sets + 1] = name
    sets[#sets + 1] = type(value) == 'number' and fmt(value) or value
  end
end

-- The hash a silent string stands for, as HSET's field, value list (z = 1 first); nil when `text` is not one (nor
-- MessagePack: packed_values raises on that).
local function silent_string_hash(text)
  local sets = { 'z', '1' }
  local ok, values = pcall(silent_string_values, text)
  if not ok then return nil end
  if values ~= nil then
    local own = '.' .. values[1]
    for i, name in ipairs(SILENT_STRING_FIELDS) do add_field(sets, name, values[i + 1]) end
    for k = 0, 2 do
      add_field(sets, 'c' .. k .. own, values[8 + 2 * k])
      add_field(sets, 't' .. k .. own, values[9 + 2 * k])
    end
    return sets
  end
  ok, values = pcall(window_string_values, text)
  if not ok or values == nil then return nil end
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
