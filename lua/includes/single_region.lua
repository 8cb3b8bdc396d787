--[[
  The single-region algorithms for decide_single.lua, without the federation includes: the same keys, fields,
  numbers and float operations as the single-region paths of token_bucket.lua and fixed_window.lua (a region
  on its own holds the whole limit, stores no cells of peers and has no fence), so a config can move between
  the single-region and the federated library without a state migration (a token bucket's one number and the
  federated hash convert where they meet: gcra.lua).
  rule = { key, limit, period, burst, cost, budget, lease_ttl, lease_id }; ctx.n = 1.
]]
local SHARE_UNITS = 1000000

--- @include "includes/fmt"

--- @include "includes/bucket_single"

-- Token bucket: one number, the time it is full again (gcra.lua); a denial writes nothing.
local function token_bucket(rule, _, now)
  return single_region_bucket(rule, now)
end

--[[
  A sliding window's retry time after a denial: the estimate falls as the previous window slides out, so a retry may
  succeed before the window ends (`retry_after`, the window's end, otherwise). (silent_window.lua computes the same
  for the federated library, whose main chunk has no local left for a shared one.)
]]
local function sliding_retry_after(retry_after, id, P, L, count, cost, previous, now)
  if previous > 0 then
    local need = L - count - cost
    if need >= 0 then
      local at = id * P + math.ceil((1 - need / previous) * P)
      if at > now then return math.max(1, at - now) end
    end
  end
  return retry_after
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
    held = window_fields(rule.key, 'w' .. k, 'c' .. k .. '.0', 'w' .. kp, 'c' .. kp .. '.0')
  else
    held = window_fields(rule.key, 'w' .. k, 'c' .. k .. '.0')
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
  if sliding and not allowed then
    decision.retry_after = sliding_retry_after(decision.retry_after, id, P, L, count, cost, previous, now)
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
  decide_single.lua's loop over window_rule / token_bucket, without its tables, closures and string building.
  Returns the reply's six numbers (all allowed, now, allowed, remaining, reset at, retry after): single_reply makes
  them decide's reply, decide_single_batch.lua the batch's packed row (batch.lua). The arguments are the rule's
  numbers as decide_single.lua reads them from ARGV (its one rule's limit, period, burst and cost, the call's skew,
  shadow '1'; read_rule.lua reads them), so decide_batch (decide_single_batch.lua) reads them once for a run of
  calls with the same arguments. A fixed window takes no burst, a token bucket no skew.
]]
-- Slot k's fields (k = id mod 3, window_rule's 'w' .. k and so on), so a decision builds none of them.
local SLOT_W = { [0] = 'w0', 'w1', 'w2' }
local SLOT_C = { [0] = 'c0.0', 'c1.0', 'c2.0' }
local SLOT_X = { [0] = 'x0.0.0', 'x1.0.0', 'x2.0.0' }
local SLOT_T = { [0] = 't0.0', 't1.0', 't2.0' }

-- The id and cost of the last window opened (the same for every fresh key of a batch).
local fmt_opened_id, fmt_opened_cost = last_fmt(), last_fmt()

--[[
  A one-rule window's admission (window_rule's commit): a slot that held an older window loses its cells and opens
  this one with the cost, with the key's TTL; the current window's count grows by the cost.
]]
local function single_window_admit(key, held, current, slot, w, c, id, count, cost, P, skew)
  if current then
    redis.call('HSET', key, c, fmt(count + cost))
    return
  end
  if held[1] then
    local x, t = SLOT_X[slot], SLOT_T[slot]
    if x == nil then
      local k = tostring(slot)
      x, t = 'x' .. k .. '.0.0', 't' .. k .. '.0'
    end
    redis.call('HDEL', key, c, x, t)
  end
  redis.call('HSET', key, w, fmt_opened_id(id), c, fmt_opened_cost(cost))
  redis.call('PEXPIRE', key, 2 * P + skew + 1000)
end

local function single_fixed_window(key, L, P, _, cost, skew, shadow, now)
  local id = math.floor(now / P)
  local slot = id % 3
  local w, c = SLOT_W[slot], SLOT_C[slot]
  -- (No whole id: a clock or period that is no number. The same names as window_rule's.)
  if w == nil then
    local k = tostring(slot)
    w, c = 'w' .. k, 'c' .. k .. '.0'
  end
  local held = window_fields(key, w, c)
  local count = 0
  local current = tonumber(held[1]) == id
  if current then count = tonumber(held[2]) or 0 end
  local remaining = math.max(0, L - count)
  local reset_at = (id + 1) * P
  if cost <= remaining then
    single_window_admit(key, held, current, slot, w, c, id, count, cost, P, skew)
    return 1, now, 1, remaining - cost, reset_at, 0
  end
  return shadow and 1 or 0, now, 0, remaining, reset_at, math.max(1, reset_at - now)
end

-- The sliding-window counter (window_rule with `sliding`): the current and the previous window's fields, the same
-- estimate, writes and retry time.
local function single_sliding_window(key, L, P, _, cost, skew, shadow, now)
  local id = math.floor(now / P)
  local slot, prior = id % 3, (id - 1) % 3
  local w, c, wp, cp = SLOT_W[slot], SLOT_C[slot], SLOT_W[prior], SLOT_C[prior]
  if w == nil or wp == nil then
    local k, kp = tostring(slot), tostring(prior)
    w, c, wp, cp = 'w' .. k, 'c' .. k .. '.0', 'w' .. kp, 'c' .. kp .. '.0'
  end
  local held = window_fields(key, w, c, wp, cp)
  local count, previous = 0, 0
  local current = tonumber(held[1]) == id
  if current then count = tonumber(held[2]) or 0 end
  if tonumber(held[3]) == id - 1 then previous = tonumber(held[4]) or 0 end
  local elapsed = now - id * P
  local weighted = (previous * (P - elapsed)) / P
  local remaining = math.max(0, math.min(math.max(0, L - count), math.floor(L - weighted - count)))
  local reset_at = (id + 1) * P
  if cost <= remaining then
    single_window_admit(key, held, current, slot, w, c, id, count, cost, P, skew)
    return 1, now, 1, remaining - cost, reset_at, 0
  end
  local retry_after = sliding_retry_after(math.max(1, reset_at - now), id, P, L, count, cost, previous, now)
  return shadow and 1 or 0, now, 0, remaining, reset_at, retry_after
end

local function single_token_bucket(key, L, P, C, cost, _, shadow, now)
  local Q = gcra_interval(L, P)
  local allowed, F, remaining, reset_at, retry_after = gcra_decide(gcra_read(key, C, L, P, Q, now), C, Q, cost, P, now)
  if allowed then gcra_store(key, F, now) end
  return (allowed or shadow) and 1 or 0, now, allowed and 1 or 0, remaining, reset_at, retry_after
end

--[[
  single_fixed_window's, single_sliding_window's and single_token_bucket's answer (all allowed, now, allowed,
  remaining, reset at, retry after) as decide's reply for one rule: no false denial, the federation's remaining quota
  is the remaining (one region is exact), no lease.
]]
local function single_reply(verdict, now, allowed, remaining, reset_at, retry_after)
  return { verdict, now, allowed, remaining, reset_at, retry_after, 0, remaining, 0 }
end
