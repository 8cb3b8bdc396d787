--[[
  Undo what decide.lua committed for one identity when a rule of another identity (another cluster slot,
  so another script) denied the same request. Keeps "a denial consumes nothing" true on a cluster.
  A refunded federated count may already have been gossiped; peers then keep the higher value (max-merge),
  which only errs on the safe side. The acknowledgement and recency cells (a, t) stay: they never decrease.
  Refunded tokens are clamped by the next refill to the cap in force (protocol.ts refill).

  A single region's token bucket (gcra.lua: one number, the time it is full again) gets its cost's refill time back;
  a silent federated key's string (silent_string.lua) becomes its hash first.

  KEYS     the state keys of the rules to refund, then the refund's marker qf:{s<n>}:rf:<refund id> (same slot)
  ARGV[1]  self index   ARGV[2] decide's now (ms)   ARGV[3] how long the marker lives (ms)
  then 5 values per key: algorithm (tb|fw|sw|sl|cc), period ms, cost, lease id, limit
  Returns the number of keys refunded; 0 when this refund ran before (the marker exists: the client sent the same
  command again, as ioredis does after a reconnect), so a request's cost is never returned twice.
]]
--- @include "includes/federation"
--- @include "includes/gcra"
local self_index = ARGV[1]
local now = tonumber(ARGV[2])
local rules = #KEYS - 1
if not redis.call('SET', KEYS[#KEYS], '1', 'NX', 'PX', tonumber(ARGV[3])) then return 0 end
local refunded = 0
for i = 1, rules do
  local key = KEYS[i]
  local base = 3 + (i - 1) * 5
  local algorithm, period, cost, lease = ARGV[base + 1], tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3]), ARGV[base + 4]
  local id = math.floor(now / period)
  local k = slot_index(id)
  if algorithm == 'sl' or algorithm == 'cc' then
    local members = {}
    for j = 1, cost do members[j] = lease .. '#' .. j end
    refunded = refunded + math.min(1, redis.call('ZREM', key, unpack(members)))
  else
    local exists, cells = true, true
    -- A silent key's string (silent_string.lua): its hash from now on, refunded as one.
    if redis.call('TYPE', key).ok == 'string' then silent_string_to_hash(key) end
    if algorithm == 'tb' then
      local held = redis.pcall('HGET', key, 'tokens')
      if type(held) == 'table' then
        -- One region's bucket (gcra.lua): F less the cost's refill time, keeping the TTL.
        local F = tonumber(redis.call('GET', key))
        exists, cells = F ~= nil, false
        if exists then redis.call('SET', key, fmt(F - cost * gcra_interval(tonumber(ARGV[base + 5]), period)), 'KEEPTTL') end
      else
        exists = tonumber(held) ~= nil
        if exists then redis.call('HSET', key, 'tokens', fmt(tonumber(held) + cost)) end
      end
    end
    if exists and not cells then
      refunded = refunded + 1
    elseif exists then
      if tonumber(redis.call('HGET', key, 'w' .. label(k))) == id then
        local field = 'c' .. label(k) .. '.' .. self_index
        local count = tonumber(redis.call('HGET', key, field)) or 0
        if count > cost then
          redis.call('HSET', key, field, fmt(count - cost))
        elseif count == cost then
          redis.call('HDEL', key, field)
        end
      end
      refunded = refunded + 1
    end
  end
end
return refunded
