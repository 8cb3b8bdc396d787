--[[
  decide(KEYS, ARGV): decide.lua's call as a function, so decide.lua (EVAL) and the decide library (FCALL)
  run the same code. KEYS, ARGV and the reply as lua/decide.lua documents them. It expects federation.lua's
  memos fresh, as an EVAL starts (the library renews them before every call).
]]
--- @include "includes/clock"
--- @include "includes/federation"
--- @include "includes/window_decide"
--- @include "includes/bucket_share"
--- @include "includes/admission_gossip"
--- @include "includes/fixed_window"
--- @include "includes/sliding_window"
--- @include "includes/silent_window"
--- @include "includes/token_bucket"
--- @include "includes/sliding_log"
--- @include "includes/concurrency"
--- @include "includes/read_rule"
--- @include "includes/local_lease"
--- @include "includes/bell"

local algorithms = { tb = token_bucket, fw = fixed_window, sw = sliding_window, sl = sliding_log, cc = concurrency }

--[[
  What a decide call reads from its ARGV alone: the context (regions, shares, skew, horizon; the fence is set
  per call), the rules, the clock override and peek. decide_batch.lua prepares it once for a run of calls with
  the same arguments.
]]
local function prepare_call(ARGV)
  local n, rule_count, now_override = read_call(ARGV, 0)
  local self, units, skew = read_context(ARGV, 0)
  local ctx = { n = n, self = self, skew = skew, fence = 0, horizon = read_horizon(ARGV, 0, rule_count) }
  if n > 1 then
    ctx.units = parse_units(units, n)
  else
    -- A single region holds the whole limit and is exact.
    ctx.units = { [0] = SHARE_UNITS }
  end
  return {
    ctx = ctx,
    rules = read_rules(ARGV, 0, rule_count),
    now_override = now_override,
    -- A peek answers the decision and writes nothing.
    peek = read_peek(ARGV, 0, rule_count),
    -- The shard fences read so far in this script call (shard_fence's memo), when the caller keeps one.
    fences = nil,
  }
end

-- The pending sets of `pending` (one per peer, in region order without `self`) but those of the peers in `skips`.
local function pending_without(pending, skips, self)
  local kept = {}
  for i, set in ipairs(pending) do
    local o = i - 1
    if o >= self then o = i end
    if not skips[o] then kept[#kept + 1] = set end
  end
  return kept
end

--[[
  Whether a prepared call can take the silent path (decide_silent): federated, one token-bucket, fixed-window or
  sliding-window rule that enforces (not shadow), bounded (a budget), asks no local lease, and a call that writes
  (not a peek).
]]
local function silent_candidate(call)
  if call.ctx.n < 2 or call.peek or #call.rules ~= 1 then return false end
  local read = call.rules[1]
  local code = read.code
  return (code == 'tb' or code == 'fw' or code == 'sw') and not read.shadow and read.rule.lease_ask == 0 and read.rule.budget >= 0
end

-- decide_prepared's reply for one token-bucket rule that neither leases nor reports a false denial, as its nine values
-- (the batch packs them into its row without a reply table: batch.lua add_one).
local function one_bucket_row(allowed, after, reset_at, retry_after, quota, now)
  -- token_bucket's remaining and quota.
  local remaining = math.floor(after)
  if not (remaining > 0) then remaining = 0 end
  if quota == nil then quota = remaining end
  local verdict = allowed and 1 or 0
  return verdict, now, verdict, remaining, reset_at, retry_after, 0, quota, 0
end

-- Whether a round report of region `self` of `n` that skips `skips` (report_skips) goes to no peer at all.
local function skips_every_peer(skips, n, self)
  if skips == nil then return false end
  for o = 0, n - 1 do
    if o ~= self and not skips[o] then return false end
  end
  return true
end

--[[
  A loud hash's decision on the silent path's frame (decide_silent): loud_bucket's answer (loud_bucket.lua) when it
  needs no message, else nil with nothing written. decide_prepared, given the same answer, would commit an admission
  and mark no peer (its gossip is silent, or a round report that skips every peer as a bystander), and write nothing
  for a denial (loud_bucket answers no false denial); this reply is the one it gives then. Anything else (an admission
  the peers must hear of, or a decision loud_bucket leaves to load_bucket) goes to decide_prepared.
]]
local function decide_loud(p, rule, fence, now, flat, map)
  local tokens, capacity, rate, store, gossip, _, _, quota, skips = loud_bucket(p, rule, fence, now, flat, map)
  if tokens == nil then return nil end
  local allowed, after, reset_at, retry_after = bucket_verdict(tokens, capacity, rate, rule.cost, rule.period, now)
  if allowed then
    if gossip ~= 'silent' and not (gossip == 'round' and skips_every_peer(skips, p.n, p.self)) then return nil end
    store()
  end
  return one_bucket_row(allowed, after, reset_at, retry_after, quota, now)
end

-- decide_silent's state (silent_bucket_state's `into`): every field written anew for each decision, none kept past it.
local silent_state = {}

--[[
  A silent key's decision without the general loop's tables: for a call silent_candidate lets through, the nine
  values of the very reply decide_prepared would give (one_bucket_row) when the key is this region's silent string
  (or absent) and the decision needs no message: an admission that stays silent (admission_gossip.lua), or a denial
  that is not false; or, for a loud hash, decide_loud's. Nil, with nothing written, for anything else (a loud
  admission the peers must hear of, a false denial): decide_prepared decides it, with the shard's fence read here as
  the second value (no second read of the marker). (silent_bucket may turn another layout's string into its hash
  first: the state it stands for, unchanged.) `marker` and `key` are the call's first and last KEYS (silent_path).
]]
local function decide_silent(call, marker, key, now)
  local ctx = call.ctx
  local fence = shard_fence(marker, now, call.fences)
  local read = call.rules[1]
  local rule = read.rule
  rule.key, rule.hash_read = key, nil
  local p = decide_params(rule, ctx)
  if read.code ~= 'tb' then
    -- A window (silent_window.lua): its nine values, or nil and the fence for the general path.
    local verdict, at, allowed, remaining, reset_at, retry_after, false_denial, quota, leased =
      decide_silent_window(p, rule, fence, now, read.code == 'sw')
    if verdict == nil then return nil, fence end
    return verdict, at, allowed, remaining, reset_at, retry_after, false_denial, quota, leased
  end
  local s, flat, map = silent_bucket_state(p, rule, fence, now, silent_state)
  if s == nil then
    -- A loud hash: silent_bucket_state's second and third values are the HGETALL reply it read and its map. Decided
    -- here when it needs no message (decide_loud), else by the general path (next, in this same decide_prepared, on
    -- this rule and key), which takes the reply instead of reading the key again.
    if flat ~= nil then
      local verdict, at, allowed, remaining, reset_at, retry_after, false_denial, quota, leased =
        decide_loud(p, rule, fence, now, flat, map)
      if verdict ~= nil then
        return verdict, at, allowed, remaining, reset_at, retry_after, false_denial, quota, leased
      end
    end
    rule.hash_read = flat
    return nil, fence
  end
  if s.false_denial then return nil, fence end
  local allowed, after, reset_at, retry_after = bucket_verdict(s.tokens, s.cap, s.rate, rule.cost, rule.period, now)
  if allowed and s.gossip ~= 'silent' then return nil, fence end
  if allowed then silent_commit(s) end
  return one_bucket_row(allowed, after, reset_at, retry_after, s.quota, now)
end

-- Whether a call of `key_count` KEYS takes the silent path first: a silent candidate (silent_candidate, asked once
-- per prepared call) with its KEYS as decide_silent reads them: the marker, n - 1 pending sets, the fast lane, the
-- bell, the rule's state key.
local function silent_path(call, key_count)
  if call.silent == nil then call.silent = silent_candidate(call) end
  return call.silent and key_count == call.ctx.n + 3
end

--[[
  One decide call (KEYS and reply as lua/decide.lua documents them) of a prepared call, at `now`. `tried`: the
  caller ran decide_silent already (decide_batch.lua), which answered nil and, as `fence`, the shard's fence it
  read (nil when it read none).
]]
local function decide_prepared(call, KEYS, now, tried, fence)
  if not tried and silent_path(call, #KEYS) then
    local verdict, at, allowed, remaining, reset_at, retry_after, false_denial, quota, leased =
      decide_silent(call, KEYS[1], KEYS[#KEYS], now)
    if verdict ~= nil then
      return { verdict, at, allowed, remaining, reset_at, retry_after, false_denial, quota, leased }
    end
    -- Not decided there: its second value is the shard's fence it read.
    fence = at
  end
  local ctx, peek = call.ctx, call.peek
  local n = ctx.n
  local peers = n - 1
  -- A missing marker means this Redis lost its data while serving: fence off what may have been spent.
  if n > 1 then ctx.fence = fence or shard_fence(KEYS[1], now, call.fences) end

  local pending = {}
  for i = 1, peers do pending[i] = KEYS[1 + i] end
  -- An admission that turns a key loud, a loud key's first admission in a window/epoch, and a false denial put
  -- the key on the fast lane: idle peers hand it their allowance at once instead of a sync interval later.
  -- Whatever the call queued (pending or fast lane) rings the shard's bell once, at the end.
  local fast, bell, first_key = nil, nil, 2 + peers
  if n > 1 then
    fast = KEYS[2 + peers]
    bell = KEYS[3 + peers]
    first_key = 4 + peers
  end
  local queued = false
  -- The lanes the call gave work to (bell.lua), rung once at the end.
  local lanes = 0
  local rule_count = #call.rules

  local decisions, all_allowed = decide_rules(algorithms, KEYS, call.rules, first_key, ctx, now)

  local reply = { all_allowed, now }
  for i = 1, rule_count do
    local decision = decisions[i]
    -- Shadow rules count what they would admit but never block; nothing is consumed when any rule denies.
    local leased = 0
    if all_allowed == 1 and decision.allowed and not peek then
      decision.commit()
      -- A local lease is a second admission of the same rule (local_lease.lua): gossiped as the first would be.
      local taken
      leased, taken = take_lease(algorithms, call.rules[i], decision, ctx, now)
      -- A silent admission (admission_gossip.lua: far below the region's share, nobody else talks of the key)
      -- sends nothing; a loud one goes with the next round, or on the fast lane when the peers must see it now.
      local gossip = decision.gossip
      if taken and gossip ~= 'fast' and taken.gossip ~= 'silent' then gossip = taken.gossip end
      if decision.federated and gossip ~= 'silent' then
        -- A round report skips the bystanders (a token bucket's idle donors that gave this region everything).
        local marks = pending
        if gossip == 'round' and decision.report_skips ~= nil then
          marks = pending_without(pending, decision.report_skips, ctx.self)
        end
        mark_changed(decision.key, marks, now)
        lanes = bit.bor(lanes, bell_lanes_of(marks))
        if gossip == 'fast' and fast then
          redis.call('SADD', fast, decision.key)
          lanes = bit.bor(lanes, BELL_FAST)
        end
        if #marks > 0 or gossip == 'fast' then queued = true end
      end
    end
    -- A false denial (this region ran out while the federation has room) sends the key's state at once, so a
    -- donor sees the hunger a sync interval sooner; the grant comes back on the fast lane as well.
    -- It is demand too: the rule refreshes this region's admission time (never its count) and the key goes to
    -- the peers, so they keep seeing this region hungry while it waits (protocol.ts decideWindow/decideBucket).
    if decision.false_denial and decision.federated and not peek then
      if decision.touch then
        decision.touch()
        mark_changed(decision.key, pending, now)
        lanes = bit.bor(lanes, bell_lanes_of(pending))
      end
      if fast then
        redis.call('SADD', fast, decision.key)
        lanes = bit.bor(lanes, BELL_FAST)
      end
      queued = true
    end
    reply[#reply + 1] = decision.allowed and 1 or 0
    reply[#reply + 1] = decision.remaining
    reply[#reply + 1] = decision.reset_at
    reply[#reply + 1] = decision.retry_after
    reply[#reply + 1] = decision.false_denial and 1 or 0
    -- The federation's remaining quota as this region sees it; a rule that does not federate (sliding log,
    -- concurrency) is exact, its remaining.
    reply[#reply + 1] = decision.quota or decision.remaining
    -- Units taken for a local lease beyond the request's cost.
    reply[#reply + 1] = leased
  end
  if queued and bell then ring_bell(bell, lanes) end
  return reply
end

local function decide(KEYS, ARGV)
  local call = prepare_call(ARGV)
  return decide_prepared(call, KEYS, now_ms(call.now_override))
end
