--[[
  The token bucket's single-region state (gcra.lua: one number) and its verdict, shared by the federated library
  (token_bucket.lua) and the single-region one (single_region.lua), so both decide a region on its own with the
  same reads, writes and numbers. Needs fmt from the including library.
]]
--- @include "includes/gcra"

-- A fmt that keeps the text of the value it was last given (fmt.lua last_text).
local function last_fmt()
  return last_text(fmt)
end

--[[
  A single region's decision of `cost` (gcra.lua; protocol.ts decideSingleBucket): allowed, the F to store when
  allowed, the whole tokens left, when the bucket is full again and when a retry may succeed (ms). A cost above
  the capacity never fits: retry next period, as token_bucket.lua's bucket_verdict says.
]]
local function gcra_decide(F, C, Q, cost, period, now)
  local now_us = now * 1000
  local debt = 0
  if F ~= nil and F > now_us then debt = F - now_us end
  local room = C * Q
  local allowed = debt + cost * Q <= room
  if allowed then debt = debt + cost * Q end
  -- (math.max(0, …) as a comparison: the same double, bucket_share.lua bucket_room says why.)
  local remaining = math.floor((room - debt) / Q)
  if not (remaining > 0) then remaining = 0 end
  local reset_at = now + math.ceil(debt / 1000)
  local retry_after = 0
  if not allowed then
    if cost <= C then
      retry_after = math.max(1, math.ceil((debt + cost * Q - room) / 1000))
    else
      retry_after = math.max(1, (math.floor(now / period) + 1) * period - now)
      reset_at = now + retry_after
    end
  end
  return allowed, now_us + debt, remaining, reset_at, retry_after
end

-- A single region's bucket decision as the decide loops take it (decide.lua's one-region path, decide_single.lua):
-- exact, so the federation's remaining quota is its remaining and a denial is never false.
local function single_region_bucket(rule, now)
  local C, L, P = rule.burst, rule.limit, rule.period
  local Q = gcra_interval(L, P)
  local allowed, F, remaining, reset_at, retry_after = gcra_decide(gcra_read(rule.key, C, L, P, Q, now), C, Q, rule.cost, P, now)
  return {
    allowed = allowed,
    remaining = remaining,
    quota = remaining,
    reset_at = reset_at,
    retry_after = retry_after,
    federated = false,
    false_denial = false,
    commit = function()
      gcra_store(rule.key, F, now)
    end,
  }
end
