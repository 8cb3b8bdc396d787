--[[
  decide(KEYS, ARGV): decide_single.lua's call as a function, so decide_single.lua (EVAL) and the
  single-region decide library (FCALL) run the same code. KEYS, ARGV and the reply as lua/decide_single.lua
  documents them.
]]
--- @include "includes/clock"
--- @include "includes/single_region"
--- @include "includes/sliding_log"
--- @include "includes/concurrency"
--- @include "includes/read_rule"
--- @include "includes/local_lease"

local algorithms = { tb = token_bucket, fw = fixed_window, sw = sliding_window, sl = sliding_log, cc = concurrency }

local function decide(KEYS, ARGV)
  local n, rule_count, now_override = read_call(ARGV, 0)
  if n ~= 1 then error('decide_single decides for one region, got ' .. tostring(n)) end
  local now = now_ms(now_override)
  -- One fixed-window, sliding-window or token-bucket rule: the same decision without the general loop's tables
  -- (single_region.lua).
  local peek = read_peek(ARGV, 0, rule_count)
  if rule_count == 1 and not peek then
    local code, limit, period, burst, cost, skew, shadow = read_first_rule(ARGV, 0)
    if code == 'fw' then return single_reply(single_fixed_window(KEYS[2], limit, period, burst, cost, skew, shadow, now)) end
    if code == 'tb' then return single_reply(single_token_bucket(KEYS[2], limit, period, burst, cost, skew, shadow, now)) end
    if code == 'sw' then return single_reply(single_sliding_window(KEYS[2], limit, period, burst, cost, skew, shadow, now)) end
  end
  local _, _, skew = read_context(ARGV, 0)
  local ctx = { n = 1, self = 0, skew = skew, fence = 0 }
  local rules = read_rules(ARGV, 0, rule_count)
  local decisions, all_allowed = decide_rules(algorithms, KEYS, rules, 2, ctx, now)

  local reply = { all_allowed, now }
  for i = 1, rule_count do
    local decision = decisions[i]
    -- Shadow rules count what they would admit but never block; nothing is consumed when any rule denies.
    -- A peek answers the decision and writes nothing.
    local leased = 0
    if all_allowed == 1 and decision.allowed and not peek then
      decision.commit()
      leased = take_lease(algorithms, rules[i], decision, ctx, now)
    end
    reply[#reply + 1] = decision.allowed and 1 or 0
    reply[#reply + 1] = decision.remaining
    reply[#reply + 1] = decision.reset_at
    reply[#reply + 1] = decision.retry_after
    -- No federation, no false denial (decide.lua's reply layout, so one parser reads both).
    reply[#reply + 1] = 0
    -- One region is exact: the federation's remaining quota is its remaining.
    reply[#reply + 1] = decision.remaining
    reply[#reply + 1] = leased
  end
  return reply
end
