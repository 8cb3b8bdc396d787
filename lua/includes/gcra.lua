--[[
  A single region's token bucket in one number (state layout 2; protocol.ts single-bucket.ts, the generic cell
  rate algorithm): F, the time in µs at which the bucket holds its capacity C again; no key = full. One token
  refills every Q = ceil(P·1000 / L) µs (the rule's rate exactly when P·1000/L is whole, else at most 1 µs a token
  slower, never faster). A request of cost c is admitted when debt + c·Q ≤ C·Q, debt = max(0, F − now·1000),
  and moves F to max(F, now·1000) + c·Q. Every value is an integer below 2^53 (µs since the epoch until the year
  2255), so Redis keeps F as an integer-encoded string: 88 B a key by MEMORY USAGE, where layout 1's hash took 136.

  Layout 1, a hash { tokens, last_refill }, is what a federated region still stores (with its cells). Each side
  converts the other's where it meets it, so a region can join or leave a federation, or be upgraded, without a
  migration or a fence: the single-region path reads a hash as its tokens at now (gcra_read) and writes F at its
  next admission; a federated reader turns F into the hash first (gcra_to_hash).
  Needs fmt from the including library.
]]
--- @include "includes/silent_string"

-- Q, µs per token.
local function gcra_interval(limit, period)
  return math.ceil((period * 1000) / limit)
end

-- The tokens F stands for at `now` (C when full).
local function gcra_tokens(F, C, Q, now)
  local debt = F - now * 1000
  if debt <= 0 then return C end
  return (C * Q - debt) / Q
end

--[[
  The F of the single-region bucket at `key`, nil when full or absent. A hash (layout 1: an older release, or this
  rule's federated state) counts as its tokens refilled to `now` at L/P, F = now·1000 + ceil((C − tokens)·Q), a
  debt rounded up, so never more tokens than the hash held.
]]
local function gcra_read(key, C, L, P, Q, now)
  local held = redis.pcall('GET', key)
  local tokens, last
  if type(held) ~= 'table' then
    if not held then return nil end
    local F = tonumber(held)
    if F ~= nil then return F end
    -- A silent federated bucket's string (silent_string.lua: this region federated the rule before).
    local values = silent_string_values(held)
    if values == nil then return nil end
    tokens, last = tonumber(values[2]), tonumber(values[3])
  else
    local hash = redis.call('HMGET', key, 'tokens', 'last_refill')
    tokens, last = tonumber(hash[1]), tonumber(hash[2])
  end
  if tokens == nil then return nil end
  last = last or now
  if now > last then tokens = tokens + (now - last) * (L / P) end
  if tokens >= C then return nil end
  return now * 1000 + math.ceil((C - tokens) * Q)
end

-- The texts of the last F and TTL stored: a batch's fresh keys (and every key of a bucket refilled to full) store the
-- same F, now·1000 + cost·Q, and TTL. One local for both (the federated library's main chunk is near Lua's 200).
local gcra_texts = { time = last_text(fmt), ttl = last_text(fmt) }

-- Writes F after an admission at `now`: the key lives until the bucket is full again, and a second more. (The TTL as
-- its text: a number argument is formatted with %.14g at every call.)
local function gcra_store(key, F, now)
  redis.call('SET', key, gcra_texts.time(F), 'PX', gcra_texts.ttl(math.ceil(F / 1000 - now) + 1000))
end

--[[
  For a reader of the federated layout: turns a layout-2 string at `key` into the hash { tokens, last_refill } at
  `now` (capacity C, L per P), keeping its TTL. Returns true when it converted; false when the key is a hash or absent.
]]
local function gcra_to_hash(key, C, L, P, now)
  local held = redis.pcall('GET', key)
  if type(held) == 'table' or not held then return false end
  -- A silent federated bucket's string: the hash it stands for.
  if tonumber(held) == nil then return silent_string_to_hash(key) end
  local tokens = gcra_tokens(tonumber(held), C, gcra_interval(L, P), now)
  local ttl = redis.call('PTTL', key)
  redis.call('DEL', key)
  redis.call('HSET', key, 'tokens', fmt(tokens), 'last_refill', fmt(now))
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
  return true
end

--[[
  A single region's window rule reads its key's `...` fields (HMGET) through this. A key that is not a hash is
  either a federated window's silent string (silent_string.lua: this region federated the rule before), read as
  the hash it stands for, or a token bucket's number left by a rule redefined under the same name (a restart with
  another algorithm: docs/federation.md §7), dropped and read as empty, so the window starts over as a renamed rule
  would (what layout 1's hash read as, too).
]]
local function window_fields(key, ...)
  local held = redis.pcall('HMGET', key, ...)
  if held.err == nil then return held end
  if silent_string_to_hash(key) then return redis.call('HMGET', key, ...) end
  redis.call('DEL', key)
  return {}
end
