--[[
  Merge one key's state from a peer's gossip, then move unused allowance to hungry regions.
  Merging is a cell-wise max of cumulative counters, so duplicated, reordered or replayed gossip changes
  nothing twice. Only allowance this region has not used is ever given away.

  KEYS[1]          the state key            KEYS[2] shard marker qf:{s<n>}:m
  KEYS[3 .. p+2]   pending ZSETs of the p peers

  ARGV[1] self index   ARGV[2] region count n   ARGV[3] weights csv   ARGV[4] max clock skew ms
  ARGV[5] algorithm (tb|fw|sw)   ARGV[6] limit   ARGV[7] period ms   ARGV[8] burst
  ARGV[9] leakage budget (-1 = unbounded)
  ARGV[10] hunger fraction   ARGV[11] reserve fraction   ARGV[12] give fraction
  ARGV[13] sender index   ARGV[14] now override ('' = TIME)   ARGV[15] sender's change time ms
  ARGV[16] slot count, then per slot: id, n values c[o], n*n values x[o][d], n*n values a[o][d]

  Returns { changed (1|0), lag ms (now - sender's change time) }
]]
--- @include "includes/clock"
--- @include "includes/federation"
--- @include "includes/token_bucket"

local key = KEYS[1]
local n = tonumber(ARGV[2])
local fed = { self = tonumber(ARGV[1]), n = n, weights = parse_weights(ARGV[3], n), skew = tonumber(ARGV[4]), fence = 0 }
local algorithm = ARGV[5]
local rule = {
  key = key, limit = tonumber(ARGV[6]), period = tonumber(ARGV[7]), burst = tonumber(ARGV[8]),
  budget = tonumber(ARGV[9]), cost = 0,
}
local hunger, reserve_fraction, give_fraction = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])
local sender = tonumber(ARGV[13])
local now = now_ms(ARGV[14])
local sender_time = tonumber(ARGV[15]) or now
local pending = {}
for i = 1, n - 1 do pending[i] = KEYS[2 + i] end

local fence = redis.call('HGET', KEYS[2], 'fence')
if fence == false then
  redis.call('HSET', KEYS[2], 'fence', now)
  fence = now
end
fed.fence = tonumber(fence)

local P = rule.period
local current = math.floor(now / P)
local is_bucket = algorithm == 'tb'
local bucket_exists = is_bucket and redis.call('HEXISTS', key, 'tokens') == 1
local tokens = nil
if bucket_exists then
  local units_before = bucket_share(rule, fed, now)
  tokens = refilled_tokens(rule, fed, now, units_before)
end

local changed = false
local slot_count = tonumber(ARGV[16])
local at = 17
for _ = 1, slot_count do
  local id = tonumber(ARGV[at])
  at = at + 1
  local c_at, x_at, a_at = at, at + n, at + n + n * n
  at = at + n + 2 * n * n
  if id >= current - 1 and id <= current + 1 and claim_slot(key, id, n) then
    local k = id % 3
    local fields, incoming = {}, {}
    for o = 0, n - 1 do
      fields[#fields + 1] = 'c' .. k .. '.' .. o
      incoming[#incoming + 1] = tonumber(ARGV[c_at + o])
    end
    local view_fields = #fields
    for o = 0, n - 1 do
      for d = 0, n - 1 do
        if o ~= d then
          fields[#fields + 1] = 'x' .. k .. '.' .. o .. '.' .. d
          incoming[#incoming + 1] = tonumber(ARGV[x_at + o * n + d])
        end
      end
    end
    view_fields = #fields
    for o = 0, n - 1 do
      for d = 0, n - 1 do
        if o ~= d and o ~= fed.self then
          fields[#fields + 1] = 'a' .. k .. '.' .. o .. '.' .. d
          -- The sender's acknowledgement of d is the sender's own view of c[d].
          local seen = tonumber(ARGV[a_at + o * n + d])
          if o == sender then seen = math.max(seen, tonumber(ARGV[c_at + d])) end
          incoming[#incoming + 1] = seen
        end
      end
    end
    local stored = redis.call('HMGET', key, unpack(fields))
    local updates = {}
    for i = 1, #fields do
      local value = incoming[i]
      if value ~= nil and value == value and value > (tonumber(stored[i]) or 0) then
        updates[#updates + 1] = fields[i]
        updates[#updates + 1] = value
        if i <= view_fields then changed = true end
      end
    end
    if #updates > 0 then redis.call('HSET', key, unpack(updates)) end
  end
end

-- Demand-following transfer, only in the current window and never from a fenced one.
-- A region that is not hungry itself gives part of its surplus (beyond a reserve) to hungry peers.
local function give_to_hungry(is_hungry, surplus)
  if is_hungry(fed.self) or surplus < 2 then return false end
  local hungry = {}
  for d = 0, n - 1 do
    if d ~= fed.self and is_hungry(d) then hungry[#hungry + 1] = d end
  end
  if #hungry == 0 then return false end
  local give = math.floor(surplus * give_fraction / #hungry)
  if give < 1 then return false end
  local k = current % 3
  for _, d in ipairs(hungry) do
    redis.call('HINCRBY', key, 'x' .. k .. '.' .. fed.self .. '.' .. d, give)
  end
  return true
end

local fenced = fed.fence > 0 and current * P < fed.fence
if n > 1 and rule.budget >= 0 and not fenced then
  local cells = read_cells(key, current, n)
  if cells.present then
    local gave
    if is_bucket then
      -- Demand is measured against what a share would admit in one epoch: capacity plus one period's refill.
      local span = rule.burst + rule.limit
      local prev = nil
      if now - current * P < fed.skew then prev = read_cells(key, current - 1, n) end
      local is_hungry = function(d)
        local allowance = span * share_units(cells, nil, fed, d, now, P) / SHARE_UNITS
        return cells.c[d] > 0 and cells.c[d] > hunger * allowance
      end
      local reserve = math.max(reserve_fraction * math.floor(SHARE_UNITS * fed.weights[fed.self]),
        SHARE_UNITS * cells.c[fed.self] / span)
      gave = give_to_hungry(is_hungry, share_units(cells, prev, fed, fed.self, now, P) - reserve)
    else
      local is_hungry = function(d)
        return cells.c[d] > 0 and cells.c[d] > hunger * local_limit(cells, rule.limit, rule.budget, fed, d)
      end
      local base = base_allowance(rule.limit, rule.budget, fed, fed.self)
      local reserve = math.max(math.ceil(reserve_fraction * base), cells.c[fed.self])
      gave = give_to_hungry(is_hungry, local_limit(cells, rule.limit, rule.budget, fed, fed.self) - cells.c[fed.self] - reserve)
    end
    changed = changed or gave
  end
end

if bucket_exists then
  local units_after = bucket_share(rule, fed, now)
  local capacity, rate = bucket_shape(rule, fed, units_after)
  store_bucket(rule, fed, now, units_after, math.min(tokens, capacity), capacity, rate)
elseif redis.call('EXISTS', key) == 1 then
  local ttl = 2 * P + fed.skew + 1000
  redis.call('PEXPIRE', key, ttl)
end

if changed then mark_changed(key, pending, now) end
return { changed and 1 or 0, now - sender_time }
