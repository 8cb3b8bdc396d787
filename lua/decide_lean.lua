--[[
  decide.lua for a region that does not federate (one region, or no federation section): the same call and
  reply, the same state, without federation cells, fences, rebalancing or pending sets. The engine chooses
  it when its topology has one region (src/engine/redis-engine.ts); decide.lua stays the only federated path.

  KEYS[1]          shard marker qf:{s<n>}:m (unused here; kept so both scripts take the same call)
  KEYS[2 ..]       one state key per rule, in ARGV order

  ARGV[1]  self index (0)  ARGV[2] region count (1)  ARGV[3] share units csv (unused)
  ARGV[4]  max clock skew ms                          ARGV[5] rule count m
  ARGV[6]  now override in ms ('' = Redis TIME)
  then 9 values per rule: algorithm (tb|fw|sw|sl|cc), limit, period ms, burst, cost,
  leakage budget (unused), lease ttl ms, lease id, shadow (1|0)

  Returns { all_allowed, now, then per rule: allowed, remaining, reset_at_ms, retry_after_ms, false_denial }
  (false_denial 1|0: docs/federation.md §4; always 0 in decide_lean.lua)
]]
--- @include "includes/clock"
--- @include "includes/lean"
--- @include "includes/sliding_log"
--- @include "includes/concurrency"

local algorithms = { tb = token_bucket, fw = fixed_window, sw = sliding_window, sl = sliding_log, cc = concurrency }

local n = tonumber(ARGV[2])
if n ~= 1 then error('decide_lean decides for one region, got ' .. tostring(n)) end
local rule_count = tonumber(ARGV[5])
local now = now_ms(ARGV[6])
-- One fixed-window or token-bucket rule: the same decision without the general loop's tables (lean.lua).
if rule_count == 1 then
  local code = ARGV[7]
  if code == 'fw' then
    return single_fixed_window(KEYS[2], tonumber(ARGV[8]), tonumber(ARGV[9]), nil, tonumber(ARGV[11]), tonumber(ARGV[4]), ARGV[15] == '1', now)
  end
  if code == 'tb' then
    return single_token_bucket(KEYS[2], tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11]), nil, ARGV[15] == '1', now)
  end
end
local ctx = { n = 1, self = 0, skew = tonumber(ARGV[4]), fence = 0 }
local decisions = {}
local all_allowed = 1
for i = 1, rule_count do
  local base = 6 + (i - 1) * 9
  local rule = {
    key = KEYS[1 + i],
    limit = tonumber(ARGV[base + 2]),
    period = tonumber(ARGV[base + 3]),
    burst = tonumber(ARGV[base + 4]),
    cost = tonumber(ARGV[base + 5]),
    lease_ttl = tonumber(ARGV[base + 7]),
    lease_id = ARGV[base + 8],
  }
  local decision = algorithms[ARGV[base + 1]](rule, ctx, now)
  decision.shadow = ARGV[base + 9] == '1'
  decisions[i] = decision
  if not decision.allowed and not decision.shadow then all_allowed = 0 end
end

local reply = { all_allowed, now }
for i = 1, rule_count do
  local decision = decisions[i]
  -- Shadow rules count what they would admit but never block; nothing is consumed when any rule denies.
  if all_allowed == 1 and decision.allowed then decision.commit() end
  reply[#reply + 1] = decision.allowed and 1 or 0
  reply[#reply + 1] = decision.remaining
  reply[#reply + 1] = decision.reset_at
  reply[#reply + 1] = decision.retry_after
  -- No federation, no false denial (decide.lua's reply layout, so one parser reads both).
  reply[#reply + 1] = 0
end
return reply
