--[[
  A silent federated token bucket in one string (state layout 3; docs/architecture.md "State layouts"). A silent
  key (federation.lua load_silent: z = 1) holds only this region's fields: tokens, last_refill, sig, the slot ids
  and its own c and t of each slot. While it stays silent they live in one string, in a fixed order, as the very
  texts its hash would hold, empty for an absent field:

    S<r>|tokens|last_refill|sig|w0|w1|w2|c0.<r>|t0.<r>|c1.<r>|t1.<r>|c2.<r>|t2.<r>

  r is the index of the region that wrote it. A decision reads it with one GET and writes it with one SET PX
  (silent_bucket.lua) where the hash took HMGET, HSET and PEXPIRE. The string stands for exactly that hash: as
  soon as anything else must be written to the key (a version: mark_changed, the key turns loud; a peer's cells:
  apply_gossip; a sweep; a refund; another region's index) it becomes that hash (silent_string_to_hash) and stays
  one. A single region reads its tokens (gcra.lua gcra_read). src/store/silent-string.ts reads it for the TS side.
]]
local SILENT_STRING = '^S(%d+)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$'
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

-- The string of `values` (as silent_string_values returns them).
local function silent_string_text(values)
  return 'S' .. table.concat(values, '|')
end

--[[
  Turns the silent string at `key` into the hash it stands for (z = 1 and every non-empty field), keeping its TTL.
  Returns true when it converted; false when the key is a hash, absent, or a single region's number.
]]
local function silent_string_to_hash(key)
  local text = redis.pcall('GET', key)
  if type(text) ~= 'string' then return false end
  local values = silent_string_values(text)
  if values == nil then return false end
  local sets = { 'z', '1' }
  for i, name in ipairs(SILENT_STRING_FIELDS) do
    if values[i + 1] ~= '' then
      sets[#sets + 1] = name
      sets[#sets + 1] = values[i + 1]
    end
  end
  local own = '.' .. values[1]
  for k = 0, 2 do
    local c, t = values[8 + 2 * k], values[9 + 2 * k]
    if c ~= '' then
      sets[#sets + 1] = 'c' .. k .. own
      sets[#sets + 1] = c
    end
    if t ~= '' then
      sets[#sets + 1] = 't' .. k .. own
      sets[#sets + 1] = t
    end
  end
  local ttl = redis.call('PTTL', key)
  redis.call('DEL', key)
  redis.call('HSET', key, unpack(sets))
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
  return true
end
