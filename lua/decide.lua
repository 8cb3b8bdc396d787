--[[
  Decide one request against every rule that matches it, atomically, in one round trip.
  A request denied by any enforcing rule consumes from none.

  KEYS[1]          shard marker qf:{s<n>}:m (recovery fence; same slot as the rule keys)
  KEYS[2 .. p+1]   pending ZSETs of the p peers, qf:{s<n>}:p:<peer index>
  KEYS[p+2]        federated only (n > 1): the fast-lane set qf:{s<n>}:f (keys to send to the peers now)
  KEYS[p+3 ..]     (n = 1: KEYS[2 ..]) one state key per rule, in ARGV order

  ARGV[1]  self index     ARGV[2] region count n     ARGV[3] share units csv (protocol.ts shareUnits)
  ARGV[4]  max clock skew ms                          ARGV[5] rule count m
  ARGV[6]  now override in ms ('' = Redis TIME)
  then 9 values per rule: algorithm (tb|fw|sw|sl|cc), limit, period ms, burst, cost,
  leakage budget (-1 = unbounded; protocol.ts resolveBudget), lease ttl ms, lease id, shadow (1|0)

  Returns { all_allowed, now, then per rule: allowed, remaining, reset_at_ms, retry_after_ms, false_denial }
  (false_denial 1|0: docs/federation.md §4; always 0 in decide_lean.lua)
]]
--- @include "includes/clock"
--- @include "includes/federation"
--- @include "includes/window_decide"
--- @include "includes/bucket_share"
--- @include "includes/fixed_window"
--- @include "includes/sliding_window"
--- @include "includes/token_bucket"
--- @include "includes/sliding_log"
--- @include "includes/concurrency"

local n = tonumber(ARGV[2])
local rule_count = tonumber(ARGV[5])
local now = now_ms(ARGV[6])
local peers = n - 1
local ctx = { n = n, self = tonumber(ARGV[1]), skew = tonumber(ARGV[4]), fence = 0 }
if n > 1 then
  ctx.units = parse_units(ARGV[3], n)
  -- A missing marker means this Redis lost its data while serving: fence off what may have been spent.
  ctx.fence = shard_fence(KEYS[1], now)
else
  -- A single region holds the whole limit and is exact.
  ctx.units = { [0] = SHARE_UNITS }
end

local pending = {}
for i = 1, peers do pending[i] = KEYS[1 + i] end
-- A region's first admission of a key in a window/epoch, and a false denial, put the key on the fast lane: idle
-- peers hand it their allowance at once instead of a sync interval later.
local fast, first_key = nil, 2 + peers
if n > 1 then
  fast = KEYS[2 + peers]
  first_key = 3 + peers
end

local algorithms = { tb = token_bucket, fw = fixed_window, sw = sliding_window, sl = sliding_log, cc = concurrency }
local decisions = {}
local all_allowed = 1
for i = 1, rule_count do
  local base = 6 + (i - 1) * 9
  local rule = {
    key = KEYS[first_key - 1 + i],
    limit = tonumber(ARGV[base + 2]),
    period = tonumber(ARGV[base + 3]),
    burst = tonumber(ARGV[base + 4]),
    cost = tonumber(ARGV[base + 5]),
    budget = tonumber(ARGV[base + 6]),
    lease_ttl = tonumber(ARGV[base + 7]),
    lease_id = ARGV[base + 8],
  }
  local decision = algorithms[ARGV[base + 1]](rule, ctx, now)
  decision.shadow = ARGV[base + 9] == '1'
  decision.key = rule.key
  decisions[i] = decision
  if not decision.allowed and not decision.shadow then all_allowed = 0 end
end

local reply = { all_allowed, now }
for i = 1, rule_count do
  local decision = decisions[i]
  -- Shadow rules count what they would admit but never block; nothing is consumed when any rule denies.
  if all_allowed == 1 and decision.allowed then
    decision.commit()
    if decision.federated then
      mark_changed(decision.key, pending, now)
      if decision.first and fast then redis.call('SADD', fast, decision.key) end
    end
  end
  -- A false denial (this region ran out while the federation has room) sends the key's state at once, so a
  -- donor sees the hunger a sync interval sooner; the grant comes back on the fast lane as well.
  -- It is demand too: the rule refreshes this region's admission time (never its count) and the key goes to
  -- the peers, so they keep seeing this region hungry while it waits (protocol.ts decideWindow/decideBucket).
  if decision.false_denial and decision.federated then
    if decision.touch then
      decision.touch()
      mark_changed(decision.key, pending, now)
    end
    if fast then redis.call('SADD', fast, decision.key) end
  end
  reply[#reply + 1] = decision.allowed and 1 or 0
  reply[#reply + 1] = decision.remaining
  reply[#reply + 1] = decision.reset_at
  reply[#reply + 1] = decision.retry_after
  reply[#reply + 1] = decision.false_denial and 1 or 0
end
return reply
