--[[
  The single-region algorithms for decide_lean.lua, without the federation includes: the same keys, fields,
  numbers and float operations as the single-region paths of token_bucket.lua and fixed_window.lua (a region
  on its own holds the whole limit, stores no cells of peers and has no fence), so a config can move between
  the lean and the federated library without a state migration.
  rule = { key, limit, period, burst, cost, budget, lease_ttl, lease_id }; ctx.n = 1.
]]
local SHARE_UNITS = 1000000

-- %.17g: Redis would turn a Lua number into a string with %.14g; fractional tokens must read back the same.
local function fmt(value)
  return string.format('%.17g', value)
end

--- @include "includes/bucket_single"

-- Token bucket: a hash with `tokens` and `last_refill` (ms); a denial writes nothing.
local function token_bucket(rule, ctx, now)
  local tokens, C, rate, store = single_region_bucket(rule, now)
  local allowed, after, reset_at, retry_after = bucket_verdict(tokens, C, rate, rule.cost, rule.period, now)
  return {
    allowed = allowed,
    remaining = math.max(0, math.floor(after)),
    reset_at = reset_at,
    retry_after = retry_after,
    commit = store,
  }
end

--[[
  Fixed window (and, with `sliding`, the sliding-window counter): slot k = id mod 3 holds window id in
  w<k> and this region's count in c<k>.0 (federation.lua's layout for n = 1).
]]
local function window_rule(rule, ctx, now, sliding)
  local P, L, cost = rule.period, rule.limit, rule.cost
  local id = math.floor(now / P)
  local k = tostring(id % 3)
  local held
  -- A fixed window reads only its own slot; the sliding window also the previous one.
  if sliding then
    local kp = tostring((id - 1) % 3)
    held = redis.call('HMGET', rule.key, 'w' .. k, 'c' .. k .. '.0', 'w' .. kp, 'c' .. kp .. '.0')
  else
    held = redis.call('HMGET', rule.key, 'w' .. k, 'c' .. k .. '.0')
  end
  local count, previous = 0, 0
  if tonumber(held[1]) == id then count = tonumber(held[2]) or 0 end
  if sliding and tonumber(held[3]) == id - 1 then previous = tonumber(held[4]) or 0 end
  local remaining = math.max(0, L - count)
  if sliding then
    local elapsed = now - id * P
    local weighted = (previous * (P - elapsed)) / P
    remaining = math.max(0, math.min(remaining, math.floor(L - weighted - count)))
  end
  local allowed = cost <= remaining
  if allowed then remaining = remaining - cost end
  local reset_at = (id + 1) * P
  local decision = {
    allowed = allowed,
    remaining = remaining,
    reset_at = reset_at,
    retry_after = allowed and 0 or math.max(1, reset_at - now),
  }
  if sliding and not allowed and previous > 0 then
    -- The estimate falls as the previous window slides out; a retry may succeed before the window ends.
    local need = L - count - cost
    if need >= 0 then
      local at = id * P + math.ceil((1 - need / previous) * P)
      if at > now then decision.retry_after = math.max(1, at - now) end
    end
  end
  decision.commit = function()
    if tonumber(held[1]) ~= id then
      -- The slot held an older window: drop its cells, then count from zero. (No w<k>, no cells of slot k.)
      if held[1] then redis.call('HDEL', rule.key, 'c' .. k .. '.0', 'x' .. k .. '.0.0', 't' .. k .. '.0') end
      redis.call('HSET', rule.key, 'w' .. k, fmt(id), 'c' .. k .. '.0', fmt(cost))
      -- federation.lua window_ttl. Set when a window opens: from then on the key outlives the next window,
      -- which is all a sliding window reads; decide.lua also renews it on every admission.
      redis.call('PEXPIRE', rule.key, 2 * P + ctx.skew + 1000)
    else
      redis.call('HSET', rule.key, 'c' .. k .. '.0', fmt(count + cost))
    end
  end
  return decision
end

local function fixed_window(rule, ctx, now)
  return window_rule(rule, ctx, now, false)
end

local function sliding_window(rule, ctx, now)
  return window_rule(rule, ctx, now, true)
end

--[[
  One rule of one of these two algorithms (nearly every call): the same reads, writes, numbers and reply as
  decide_lean.lua's loop over window_rule / token_bucket, without its tables and closures. Returns the reply.
  ARGV as decide_lean.lua takes it; the rule's values start at ARGV[7].
]]
local function single_fixed_window_reply(key, ARGV, now)
  local L, P, cost = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[11])
  local id = math.floor(now / P)
  local k = tostring(id % 3)
  local held = redis.call('HMGET', key, 'w' .. k, 'c' .. k .. '.0')
  local count = 0
  local current = tonumber(held[1]) == id
  if current then count = tonumber(held[2]) or 0 end
  local remaining = math.max(0, L - count)
  local allowed = cost <= remaining
  local reset_at = (id + 1) * P
  local retry_after = 0
  if allowed then
    remaining = remaining - cost
    if not current then
      if held[1] then redis.call('HDEL', key, 'c' .. k .. '.0', 'x' .. k .. '.0.0', 't' .. k .. '.0') end
      redis.call('HSET', key, 'w' .. k, fmt(id), 'c' .. k .. '.0', fmt(cost))
      redis.call('PEXPIRE', key, 2 * P + tonumber(ARGV[4]) + 1000)
    else
      redis.call('HSET', key, 'c' .. k .. '.0', fmt(count + cost))
    end
  else
    retry_after = math.max(1, reset_at - now)
  end
  local verdict = allowed and 1 or 0
  return { (allowed or ARGV[15] == '1') and 1 or 0, now, verdict, remaining, reset_at, retry_after, 0 }
end

local function single_token_bucket_reply(key, ARGV, now)
  local rule = { key = key, limit = tonumber(ARGV[8]), period = tonumber(ARGV[9]), burst = tonumber(ARGV[10]), cost = tonumber(ARGV[11]) }
  local tokens, C, rate, store = single_region_bucket(rule, now)
  local allowed, after, reset_at, retry_after = bucket_verdict(tokens, C, rate, rule.cost, rule.period, now)
  if allowed then store() end
  return { (allowed or ARGV[15] == '1') and 1 or 0, now, allowed and 1 or 0, math.max(0, math.floor(after)), reset_at, retry_after, 0 }
end
